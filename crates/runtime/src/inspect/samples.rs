//! One canonical opening message per protocol, written from each protocol's specification: what
//! the trace generator puts on the wire and what the tests check the signatures against.

use super::dns;

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
        // DNSCrypt: the certificate query over TCP, with an EDNS OPT record (a UDP payload of
        // 4096); then an encrypted response, which opens with the resolver's magic.
        (
            "dnscrypt",
            b"\x00\x31\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x01\x012\x0ddnscrypt-cert\x08resolver\x07example\x00\x00\x10\x00\x01\x00\x00\x29\x10\x00\x00\x00\x00\x00\x00\x00"
                .to_vec(),
        ),
        ("dnscrypt", [&dns::RESOLVER_MAGIC[..], &[0x3e; 24], &[0xa7; 16], &[0x19; 64]].concat()),
        // Snap7's COTP Connection Request: TPDU size 1024, calling TSAP 0x0100, called TSAP
        // 0x0102 (PG, rack 0, slot 2).
        ("s7comm", b"\x03\x00\x00\x16\x11\xe0\x00\x00\x00\x01\x00\xc0\x01\x0a\xc1\x02\x01\x00\xc2\x02\x01\x02".to_vec()),
        // Then its Setup Communication job, an S7 PDU in a COTP Data TPDU.
        ("s7comm", b"\x03\x00\x00\x19\x02\xf0\x80\x32\x01\x00\x00\x00\x00\x00\x08\x00\x00\xf0\x00\x00\x01\x00\x01\x01\xe0".to_vec()),
        // The start of an MMS association: a session CONNECT SPDU (SI 13) with its connect
        // and session requirements, then the presentation CP-type whose context list names
        // ACSE (2.2.1.0.1) and MMS (1.0.9506.2.1).
        (
            "mms",
            [
                &b"\x03\x00\x00\x5b\x02\xf0\x80\x0d\xb2\x05\x06\x13\x01\x00\x16\x01\x02\x14\x02\x00\x02"[..],
                b"\x33\x02\x00\x01\x34\x02\x00\x01\xc1\x9c\x31\x81\x99\xa0\x03\x80\x01\x01\xa2\x81\x91",
                b"\x81\x04\x00\x00\x00\x01\x82\x04\x00\x00\x00\x01\xa4\x23\x30\x0f\x02\x01\x01\x06\x04",
                b"\x52\x01\x00\x01\x30\x04\x06\x02\x51\x01\x30\x10\x02\x01\x03\x06\x05\x28\xca\x22\x02\x01",
                b"\x30\x04\x06\x02\x51\x01",
            ]
            .concat(),
        ),
        // A DTLS 1.2 ClientHello in a DTLS 1.0 record, epoch 0, sequence 0: its handshake
        // header (type 1, message_seq 0, one fragment), client_version 1.2, the random.
        (
            "dtls",
            [
                &b"\x16\xfe\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x38\x01\x00\x00\x2c\x00\x00\x00\x00\x00\x00\x00\x2c\xfe\xfd"[..],
                &[0x6d; 32],
                b"\x00\x00\x00\x04\xc0\x2b\xc0\x2f\x01\x00",
            ]
            .concat(),
        ),
        // A sender report, then an SDES with the sender's CNAME: one compound packet.
        (
            "rtcp",
            [
                &b"\x80\xc8\x00\x06\x5e\x1f\x00\xa1\xe9\x2b\x53\x10\x8a\x3d\x70\xa4\x00\x02\xbf\x20\x00\x00\x00\x31\x00\x00\x1e\xa4"[..],
                b"\x81\xca\x00\x03\x5e\x1f\x00\xa1\x01\x05alice\x00",
            ]
            .concat(),
        ),
        // An SLPv2 SrvRqst for printers in scope DEFAULT, multicast (flag R).
        ("slp", b"\x02\x01\x00\x00\x30\x20\x00\x00\x00\x00\x12\x34\x00\x02en\x00\x00\x00\x0fservice:printer\x00\x07DEFAULT\x00\x00\x00\x00".to_vec()),
        // An IKE_SA_INIT request's header and SA payload: one proposal, AES-CBC-128 and
        // PRF-HMAC-SHA2-256.
        (
            "ike",
            [
                &b"\x8e\x3a\x0c\x51\x6b\x02\x9d\xf4\x00\x00\x00\x00\x00\x00\x00\x00\x21\x20\x22\x08\x00\x00\x00\x00\x00\x00\x00\x3c"[..],
                b"\x00\x00\x00\x20\x00\x00\x00\x1c\x01\x01\x00\x02\x03\x00\x00\x0c\x01\x00\x00\x0c\x80\x0e\x00\x80\x00\x00\x00\x08\x02\x00\x00\x05",
            ]
            .concat(),
        ),
        // An agent's active checks request.
        ("zabbix", b"ZBXD\x01\x2b\x00\x00\x00\x00\x00\x00\x00{\"request\":\"active checks\",\"host\":\"web-01\"}".to_vec()),
        // P_CONTROL_HARD_RESET_CLIENT_V2 over TCP, without tls-auth: session id, no acks,
        // message id 0.
        ("openvpn", b"\x00\x0e\x38\x7a\x1c\x9e\x02\x55\xd0\x41\xb3\x00\x00\x00\x00\x00".to_vec()),
        // The same over UDP with tls-auth (HMAC-SHA1), replay id 1 and its time.
        (
            "openvpn",
            [&b"\x38\x7a\x1c\x9e\x02\x55\xd0\x41\xb3"[..], &[0xc4; 20], b"\x00\x00\x00\x01\x65\xa5\x1f\x00\x00\x00\x00\x00\x00"].concat(),
        ),
        // An NFSv3 NULL call over TCP: the record mark, then AUTH_NULL credentials and verifier.
        ("nfs", [&b"\x80\x00\x00\x28\x12\x34\x56\x78\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01\x86\xa3\x00\x00\x00\x03"[..], &[0; 20]].concat()),
        // A Logon, its body length and checksum as the specification computes them.
        ("fix", b"8=FIX.4.4\x019=67\x0135=A\x0134=1\x0149=CLIENT\x0152=20240115-09:30:00.000\x0156=SERVER\x0198=0\x01108=30\x0110=132\x01".to_vec()),
        // A PRELOGIN: VERSION, ENCRYPTION, INSTOPT, THREADID and MARS, then their values.
        (
            "tds",
            b"\x12\x01\x00\x2f\x00\x00\x01\x00\x00\x00\x1a\x00\x06\x01\x00\x20\x00\x01\x02\x00\x21\x00\x01\x03\x00\x22\x00\x04\x04\x00\x26\x00\x01\xff\x0f\x00\x07\xd0\x00\x00\x00\x00\x00\x00\x00\x00\x00"
                .to_vec(),
        ),
        // A global Who-Is broadcast: BVLC Original-Broadcast-NPDU, an NPDU to DNET 0xFFFF.
        ("bacnet", b"\x81\x0b\x00\x0c\x01\x20\xff\xff\x00\xff\x10\x08".to_vec()),
        // A master's Reset Link States, from address 4 to outstation 1.
        ("dnp3", b"\x05\x64\x05\xc0\x01\x00\x00\x04\xe9\x21".to_vec()),
        // STARTDT act, then a general interrogation (C_IC_NA_1, activation, station 1).
        ("iec104", b"\x68\x04\x07\x00\x00\x00\x68\x0e\x00\x00\x00\x00\x64\x01\x06\x00\x01\x00\x00\x00\x00\x14".to_vec()),
        // ApiVersions v3 from librdkafka (client id rdkafka, its software name and version).
        ("kafka", b"\x00\x00\x00\x24\x00\x12\x00\x03\x00\x00\x00\x01\x00\x07rdkafka\x00\x0blibrdkafka\x062.3.0\x00".to_vec()),
        // A browser's direct group datagram from WORKSTATION<00> to WORKGROUP<1E>, cut after the
        // names (its SMB follows).
        (
            "netbios-dgm",
            [
                &b"\x11\x0a\x81\x23\xc0\xa8\x01\x05\x00\x8a\x00\x44\x00\x00"[..],
                b"\x20FHEPFCELFDFEEBFEEJEPEOCACACACAAA\x00",
                b"\x20FHEPFCELEHFCEPFFFACACACACACACABO\x00",
            ]
            .concat(),
        ),
        // More ways the protocols named before begin.
        // A WebDAV PROPFIND (RFC 4918 §9.1).
        ("http", b"PROPFIND /calendars/alice/ HTTP/1.1\r\nHost: dav.example.org\r\nDepth: 1\r\n\r\n".to_vec()),
        // A query over TCP, after its two-byte length; and a root priming query (RFC 8109 §3).
        ("dns", b"\x00\x1d\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03org\x00\x00\x01\x00\x01".to_vec()),
        ("dns", b"\x5a\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01".to_vec()),
        // SIP over TCP after a CRLF keep-alive; an INFO (RFC 6086 §4.2).
        ("sip", b"\r\n\r\nINFO sip:carol@chicago.example.com SIP/2.0\r\nVia: SIP/2.0/TCP pc33.example.com\r\n".to_vec()),
        // RFC 3164's forms: a TAG and no timestamp, an RFC 3339 timestamp without the version.
        ("syslog", b"<30>dhclient[1021]: DHCPREQUEST on eth0 to 10.0.0.1 port 67".to_vec()),
        ("syslog", b"<86>2024-01-15T09:30:00+01:00 gateway sshd[4242]: Accepted publickey for alice".to_vec()),
        // A search response (UDA 2.0 §1.3.3), over UDP.
        ("ssdp", b"HTTP/1.1 200 OK\r\nCACHE-CONTROL: max-age=1800\r\nEXT:\r\nLOCATION: http://10.0.0.7:49152/desc.xml\r\nST: upnp:rootdevice\r\n\r\n".to_vec()),
        // QUIC draft-29's Initial; gQUIC Q050 in the long header; Q043's public header (flags
        // 0x0d: version, 8-byte connection id) with its packet number.
        ("quic", b"\xc3\xff\x00\x00\x1d\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08\x00\x00\x44\x9e".to_vec()),
        ("quic", b"\xc3Q050\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08\x00\x00\x00\x01".to_vec()),
        ("quic", b"\x0d\x83\x94\xc8\xf0\x3e\x51\x57\x08Q043\x01\x5e\x4f\x8e\x0c".to_vec()),
        // A Solicit: client id (DUID-LLT), elapsed time, IA_NA, option request.
        (
            "dhcpv6",
            b"\x01\x10\x08\x74\x00\x01\x00\x0e\x00\x01\x00\x01\x2a\x2b\x2c\x2d\x00\x11\x22\x33\x44\x55\x00\x08\x00\x02\x00\x00\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x06\x00\x04\x00\x17\x00\x18"
                .to_vec(),
        ),
        // Issue 39's protocols.
        // A 0.6 handshake (RFC-Gnutella 0.6 draft §2.2); a GUESS Ping over UDP, TTL 1; a G2
        // ping over UDP: `GND`, no flags, sequence 0x1234, part 1 of 1, then the packet.
        ("gnutella", b"GNUTELLA CONNECT/0.6\r\nUser-Agent: LimeWire/4.18.8\r\nX-Ultrapeer: False\r\n\r\n".to_vec()),
        ("gnutella", [&b"\x5a\x0e\x21\xc4\x93\x77\x1b\x4f\xff\x3c\x80\x2a\x61\xd5\x4e\x00"[..], b"\x00\x01\x00\x00\x00\x00\x00"].concat()),
        ("gnutella", b"GND\x00\x12\x34\x01\x01\x48\x02PI\x00".to_vec()),
        // Two PCMU packets of one stream (RFC 3551 §4.5.14: payload type 0, 20 ms, 160 bytes).
        (
            "rtp",
            [
                &b"\x80\x80\x03\xe8\x00\x00\x3e\x80\x1b\x4d\x2c\x9e"[..],
                &[0xd5; 160],
                b"\x80\x00\x03\xe9\x00\x00\x3f\x20\x1b\x4d\x2c\x9e",
                &[0x55; 160],
            ]
            .concat(),
        ),
        // RFC 3435 §2.3.3's example: a NotificationRequest to an analog line.
        ("mgcp", b"RQNT 1201 aaln/1@rgw-2567.whatever.net MGCP 1.0\r\nN: ca@ca1.whatever.net:5678\r\nX: 0123456789AC\r\n".to_vec()),
        // An external address request and its response (RFC 6886 §3.2).
        ("natpmp", b"\x00\x00".to_vec()),
        ("natpmp", b"\x00\x80\x00\x00\x00\x01\x51\x80\xc6\x33\x64\x07".to_vec()),
        // An unconnected ping: time, the offline message magic, the client's GUID.
        (
            "raknet",
            b"\x01\x00\x00\x00\x00\x00\x9e\x4b\x21\x00\xff\xff\x00\xfe\xfe\xfe\xfe\xfd\xfd\xfd\xfd\x12\x34\x56\x78\x4f\x2a\x91\x0c\x77\x13\xe2\x05"
                .to_vec(),
        ),
        // A mainnet `version` header (its payload cut after the protocol version).
        ("bitcoin", b"\xf9\xbe\xb4\xd9version\x00\x00\x00\x00\x00\x66\x00\x00\x00\x2f\x5e\x1d\x8a\x80\x11\x01\x00".to_vec()),
        // A SOME/IP-SD message (service 0xFFFF, method 0x8100, a notification): its header, the
        // SD flags, and an empty entries and options array.
        ("someip", b"\xff\xff\x81\x00\x00\x00\x00\x14\x00\x00\x00\x01\x01\x01\x02\x00\xc0\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00".to_vec()),
        // A handshake response (whitepaper §5.4.3): sender and receiver indices, the rest.
        ("wireguard", [&b"\x02\x00\x00\x00\x11\x22\x33\x44\x55\x66\x77\x88"[..], &[0x9b; 80]].concat()),
        // Read Holding Registers (Application Protocol v1.1b3 §6.3): ten from address 0 of unit 1.
        ("modbus", b"\x00\x01\x00\x00\x00\x06\x01\x03\x00\x00\x00\x0a".to_vec()),
    ]
}
