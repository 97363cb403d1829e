//! One canonical opening message per protocol, written from each protocol's specification: what
//! the trace generator puts on the wire and what the tests check the signatures against.

/// (protocol name, the message that opens its connections); some protocols have two openings
/// (an HTTP request and a response, an SMTP greeting and a client's EHLO).
pub fn openings() -> Vec<(&'static str, Vec<u8>)> {
    let mut dhcp = vec![0x01, 0x01, 0x06, 0x00];
    dhcp.extend_from_slice(&[0u8; 232]);
    dhcp.extend_from_slice(&[0x63, 0x82, 0x53, 0x63, 53, 1, 1, 0xff]);
    let mut ntp = vec![0x23, 0x00, 0x06, 0xec];
    ntp.extend_from_slice(&[0u8; 44]);
    vec![
        ("http", b"GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n".to_vec()),
        ("http", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec()),
        ("tls", super::tls::sample_client_hello(Some("example.org"))),
        // A capture that starts mid-connection: a TLS 1.3 application_data record.
        ("tls", b"\x17\x03\x03\x00\x45\x8f\x2a\x91\x0c".to_vec()),
        ("ssh", b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n".to_vec()),
        // A broadcast name query for WORKGROUP<1D> (the master browser), RFC 1002 §4.2.12.
        (
            "netbios-ns",
            b"\x80\x01\x01\x10\x00\x01\x00\x00\x00\x00\x00\x00\x20FHEPFCELEHFCEPFFFACACACACACACABN\x00\x00\x20\x00\x01"
                .to_vec(),
        ),
        ("dns", b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03org\x00\x00\x01\x00\x01".to_vec()),
        // A response whose query the capture does not hold: example.org's address.
        ("dns", b"\x12\x34\x81\x80\x00\x01\x00\x01\x00\x00\x00\x00\x07example\x03org\x00\x00\x01\x00\x01\xc0\x0c\x00\x01\x00\x01\x00\x00\x0e\x10\x00\x04\x5d\xb8\xd7\x0e".to_vec()),
        ("ftp", b"220 ProFTPD Server (Debian) [::ffff:10.0.0.2]\r\n".to_vec()),
        ("smtp", b"220 mail.example.org ESMTP Postfix (Debian/GNU)\r\n".to_vec()),
        ("smtp", b"EHLO client.example.org\r\n".to_vec()),
        ("imap", b"* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS] Dovecot ready.\r\n".to_vec()),
        ("pop3", b"+OK Dovecot ready.\r\n".to_vec()),
        ("sip", b"INVITE sip:bob@example.org SIP/2.0\r\nVia: SIP/2.0/UDP pc33.example.org\r\n".to_vec()),
        ("rtsp", b"DESCRIBE rtsp://example.org/media.mp4 RTSP/1.0\r\nCSeq: 2\r\n".to_vec()),
        ("mqtt", b"\x10\x10\x00\x04MQTT\x04\x02\x00\x3c\x00\x04abcd".to_vec()),
        ("redis", b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n".to_vec()),
        ("postgresql", b"\x00\x00\x00\x29\x00\x03\x00\x00user\x00postgres\x00database\x00app\x00\x00".to_vec()),
        ("mysql", b"\x4a\x00\x00\x00\x0a8.0.36\x00\x08\x00\x00\x00abcdefgh\x00".to_vec()),
        // A session request from CLIENT<00> to FILESERVER<20>, RFC 1002 §4.3.2.
        (
            "netbios-ssn",
            [
                &b"\x81\x00\x00\x44\x20EGEJEMEFFDEFFCFGEFFCCACACACACACA\x00"[..],
                &b"\x20EDEMEJEFEOFECACACACACACACACACAAA\x00"[..],
            ]
            .concat(),
        ),
        ("smb", b"\x00\x00\x00\x54\xfeSMB\x40\x00\x00\x00\x00\x00\x00\x00".to_vec()),
        ("rdp", b"\x03\x00\x00\x13\x0e\xe0\x00\x00\x00\x00\x00\x01\x00\x08\x00\x03\x00\x00\x00".to_vec()),
        ("bittorrent", b"\x13BitTorrent protocol\x00\x00\x00\x00\x00\x10\x00\x05".to_vec()),
        ("quic", b"\xc3\x00\x00\x00\x01\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08\x00\x00\x44\x9e".to_vec()),
        ("ntp", ntp),
        ("dhcp", dhcp),
        ("telnet", b"\xff\xfd\x18\xff\xfd\x20\xff\xfd\x23".to_vec()),
        // A session whose capture starts with a subnegotiation: the terminal type, RFC 1091.
        ("telnet", b"\xff\xfa\x18\x00XTERM\xff\xf0".to_vec()),
        ("ssdp", b"M-SEARCH * HTTP/1.1\r\nHOST: 239.255.255.250:1900\r\nMAN: \"ssdp:discover\"\r\nMX: 1\r\nST: ssdp:all\r\n\r\n".to_vec()),
        ("syslog", b"<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - 'su root' failed for lonvick on /dev/pts/8".to_vec()),
        ("syslog", b"<13>Feb  5 17:32:18 10.0.0.99 Use the BFG!".to_vec()),
        // GetRequest for sysDescr.0 with community "public", SNMPv2c.
        ("snmp", b"\x30\x29\x02\x01\x01\x04\x06public\xa0\x1c\x02\x04\x1a\x2b\x3c\x4d\x02\x01\x00\x02\x01\x00\x30\x0e\x30\x0c\x06\x08\x2b\x06\x01\x02\x01\x01\x01\x00\x05\x00".to_vec()),
        // An anonymous simple bindRequest, LDAPv3.
        ("ldap", b"\x30\x0c\x02\x01\x01\x60\x07\x02\x01\x03\x04\x00\x80\x00".to_vec()),
        // The start of an AS-REQ over UDP: pvno 5, msg-type 10.
        ("kerberos", b"\x6a\x81\xb0\x30\x81\xad\xa1\x03\x02\x01\x05\xa2\x03\x02\x01\x0a\xa3\x0e\x30\x0c".to_vec()),
        // A Binding Request with no attributes.
        ("stun", b"\x00\x01\x00\x00\x21\x12\xa4\x42\xb7\xe7\xa7\x01\xbc\x34\xd6\x86\xfa\x87\xdf\xae".to_vec()),
        ("tftp", b"\x00\x01rfc1350.txt\x00octet\x00".to_vec()),
        // A KEEPALIVE.
        ("bgp", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x13\x04".to_vec()),
        ("amqp", b"AMQP\x00\x00\x09\x01".to_vec()),
        ("vnc", b"RFB 003.008\n".to_vec()),
        ("irc", b"NICK alice\r\nUSER alice 0 * :Alice Example\r\n".to_vec()),
        ("git", b"0032git-upload-pack /project.git\x00host=example.org\x00".to_vec()),
        ("wireguard", [&b"\x01\x00\x00\x00"[..], &[0x5a; 144][..]].concat()),
        ("memcached", b"get session:1234\r\n".to_vec()),
        ("nats", b"INFO {\"server_id\":\"NCXMJZYQEWUDJFLYLSTTE745I2WUNCVG3LJJ3NRKSFJXEG6RGK7753DJ\",\"version\":\"2.10.7\"}\r\n".to_vec()),
        // An OP_MSG of 41 bytes: flags 0, a body section holding {ping: 1}.
        ("mongodb", b"\x29\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\xdd\x07\x00\x00\x00\x00\x00\x00\x00\x13\x00\x00\x00\x10ping\x00\x01\x00\x00\x00\x00".to_vec()),
        ("xmpp", b"<?xml version='1.0'?><stream:stream to='example.org' xmlns='jabber:client'>".to_vec()),
        // The preface, then an empty SETTINGS frame.
        ("http2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00".to_vec()),
        // A DNS-SD browse: PTR _services._dns-sd._udp.local, ID 0 (RFC 6763 §9).
        ("mdns", b"\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x09_services\x07_dns-sd\x04_udp\x05local\x00\x00\x0c\x00\x01".to_vec()),
        // A query for wpad's address.
        ("llmnr", b"\x8a\x3c\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04wpad\x00\x00\x01\x00\x01".to_vec()),
        // An Access-Request of 45 bytes: User-Name "alice", then a User-Password.
        (
            "radius",
            [&b"\x01\x2a\x00\x2d"[..], &[0x3c; 16][..], b"\x01\x07alice\x02\x12", &[0x9e; 16][..]].concat(),
        ),
        // GET /.well-known/core, confirmable, no token (RFC 6690 §4).
        ("coap", b"\x40\x01\x12\x34\xbb.well-known\x04core".to_vec()),
        // SOCKS 5: one method offered, no authentication.
        ("socks", b"\x05\x01\x00".to_vec()),
    ]
}
