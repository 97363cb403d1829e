//! The protocol signatures: one regular expression per protocol over the start of a connection's
//! buffer (its first bytes in conversation order; see `switchyard_ingest::conn`).
//!
//! Each is written from the protocol's specification of its opening message, not taken from the
//! l7-protocols set. All are anchored at the buffer's start (`\A`): a connection is identified by
//! how it opens, which keeps the automaton small and false matches rare. Patterns run on bytes,
//! without Unicode (`(?-u)`), and `.` matches any byte (`(?s)`).

/// A protocol the inspector can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    /// Short lower-case name, as reports and labels print it.
    pub name: &'static str,
    /// What opens a connection of this protocol, and where that is specified.
    pub what: &'static str,
    /// The pattern.
    pub pattern: &'static str,
    /// The transports it runs over.
    pub over: Over,
    /// Which end speaks first. Where a signature matches tells which end is the server
    /// ([`Opens::Client`], [`Opens::Server`]), whatever the capture saw first.
    pub opens: Opens,
    /// Its well-known ports (IANA's registry, or the specification's): the port hint of
    /// [`Needs::PayloadOnPort`], and what `--guess` names a connection by when nothing matched.
    pub ports: &'static [u16],
    /// What it takes to name the protocol.
    pub needs: Needs,
}

/// The transports a protocol runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Over {
    /// TCP only.
    Tcp,
    /// UDP only.
    Udp,
    /// Either.
    Both,
}

impl Over {
    /// Whether IP protocol number `proto` (6 TCP, 17 UDP) is one of these transports.
    pub fn carries(self, proto: u8) -> bool {
        matches!((self, proto), (Self::Tcp | Self::Both, 6) | (Self::Udp | Self::Both, 17))
    }
}

/// Which end of a connection sends the bytes a signature matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opens {
    /// The client's request (a ClientHello, a StartupMessage): the end that sent it is the client.
    Client,
    /// The server's greeting (FTP's 220, a MySQL handshake): the end that sent it is the server.
    Server,
    /// Either end's first message (a request or a response, a query or an answer): the signature
    /// does not tell which end is the server.
    Either,
}

/// What it takes to name a protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Its signature matching the payload, on any port.
    Payload,
    /// Its signature matching the payload of a connection on one of its [`Signature::ports`]. For
    /// protocols whose payload is another's (mDNS and LLMNR are DNS messages) or too short to
    /// tell from chance (CoAP's 4-byte header): the port breaks the tie, and the output says so
    /// (`evidence` is `payload+port`). On their ports these are tried before the others.
    PayloadOnPort,
}

macro_rules! signatures {
    ($( $name:literal, $over:ident, $opens:ident, [$($port:literal),*], $needs:ident, $what:literal, $pattern:literal; )*) => {
        /// Every signature, in priority order (the first that matches names the protocol).
        pub const SIGNATURES: &[Signature] = &[ $( Signature {
            name: $name,
            what: $what,
            pattern: $pattern,
            over: Over::$over,
            opens: Opens::$opens,
            ports: &[$($port),*],
            needs: Needs::$needs,
        }, )* ];
    };
}

signatures! {
    "http", Tcp, Either, [80, 8080], Payload, "HTTP/1.x request line or status line (RFC 9112 §3, §4)",
        r"(?s-u)\A(?:(?:GET|POST|HEAD|PUT|DELETE|OPTIONS|PATCH|CONNECT|TRACE) [!-~]+ HTTP/1\.[01]\r?\n|HTTP/1\.[01] [1-5][0-9][0-9])";
    "tls", Tcp, Either, [443, 853, 993, 995, 465, 8443], Payload, "TLS record of type handshake carrying a ClientHello or a ServerHello (RFC 8446 §5.1, §4.1.2, §4.1.3); or, for a capture that starts mid-connection or shows one side, any record (change_cipher_spec, alert, handshake, application_data) whose record-layer version is 1.0–1.2 (1.3 records say 1.2, §5.1) and whose length fits a record (at most 2^14 + 256 bytes, §5.2)",
        r"(?s-u)\A(?:\x16\x03[\x00-\x04]..[\x01\x02]...\x03[\x00-\x04]|[\x14-\x17]\x03[\x01-\x03][\x00-\x48].)";
    "ssh", Tcp, Either, [22], Payload, "SSH identification string (RFC 4253 §4.2)",
        r"(?s-u)\ASSH-(?:2\.0|1\.99|1\.5)-[!-~]";
    "netbios-ns", Udp, Either, [137], Payload, "NetBIOS name service packet (RFC 1002 §4.2): a DNS-shaped header, then a question name of 32 letters A–P (the first-level encoding of a 16-byte NetBIOS name, RFC 1001 §14.1) of type NB or NBSTAT, class IN. Before dns, whose signature its queries also match",
        r"(?s-u)\A.{12}\x20[A-P]{32}(?:[\x01-\x3f][!-~]{1,63})*\x00\x00[\x20\x21]\x00\x01";
    "dns", Both, Either, [53], Payload, "DNS query or, for a response whose query is not in the capture, response header: one question, no answers (RFC 1035 §4.1.1), over UDP or with TCP's length prefix. A first label of 32 characters may not start with A–P: that is NetBIOS's encoding (netbios-ns), and signatures must not overlap (the combined engine takes the first to match, not the first listed). The cost: a DNS name whose first label is 32 characters from an upper-case A–P is missed",
        r"(?s-u)\A(?:..)?..(?:[\x00\x01][\x00\x10\x20]\x00\x01\x00\x00\x00\x00\x00[\x00\x01]|[\x80-\x87][\x00-\x05\x80-\x85\xa0-\xa5]\x00\x01\x00[\x00-\x3f]\x00[\x00-\x0f]\x00[\x00-\x0f])(?:[\x01-\x1f\x21-\x3f][-0-9A-Za-z_]|\x20[-0-9Q-Za-z_])";
    "ftp", Tcp, Server, [21], Payload, "FTP server greeting naming FTP (RFC 959 §4.2)",
        r"(?s-u)\A220[ -][^\r\n]*(?i:ftp)";
    "smtp", Tcp, Either, [25, 587], Payload, "SMTP greeting naming (E)SMTP, or a client's EHLO/HELO (RFC 5321 §4.2, §4.1.1.1)",
        r"(?s-u)\A(?:220[ -][^\r\n]*(?i:e?smtp)|(?i:ehlo|helo) [!-~])";
    "imap", Tcp, Server, [143], Payload, "IMAP untagged greeting naming IMAP (RFC 9051 §7.1)",
        r"(?s-u)\A\* (?:OK|PREAUTH)[^\r\n]*(?i:imap)";
    "pop3", Tcp, Server, [110], Payload, "POP3 positive greeting (RFC 1939 §4)",
        r"(?s-u)\A\+OK[^\r\n]*(?i:pop|ready|dovecot)";
    "sip", Both, Either, [5060], Payload, "SIP request line or status line (RFC 3261 §7.1, §7.2)",
        r"(?s-u)\A(?:(?:INVITE|REGISTER|OPTIONS|BYE|ACK|CANCEL|SUBSCRIBE|NOTIFY|MESSAGE) sips?:[!-~]+ SIP/2\.0\r\n|SIP/2\.0 [1-6][0-9][0-9] )";
    "rtsp", Tcp, Either, [554], Payload, "RTSP request or status line (RFC 2326 §6, §7)",
        r"(?s-u)\A(?:(?:OPTIONS|DESCRIBE|SETUP|PLAY|PAUSE|TEARDOWN|ANNOUNCE|RECORD|GET_PARAMETER|SET_PARAMETER) (?:rtsp://[!-~]+|\*) RTSP/1\.0\r\n|RTSP/1\.0 [1-5][0-9][0-9] )";
    "mqtt", Tcp, Client, [1883], Payload, "MQTT CONNECT packet, protocol name MQTT (3.1.1, 5) or MQIsdp (3.1) (MQTT 5.0 §3.1.2.1)",
        r"(?s-u)\A\x10(?:[\x80-\xff]{0,3}[\x00-\x7f])(?:\x00\x04MQTT[\x04\x05]|\x00\x06MQIsdp\x03)";
    "redis", Tcp, Client, [6379], Payload, "RESP array of bulk strings, the form of every client command (Redis protocol spec)",
        r"(?s-u)\A\*[1-9][0-9]{0,5}\r\n\$[0-9]{1,9}\r\n";
    "postgresql", Tcp, Client, [5432], Payload, "PostgreSQL StartupMessage (protocol 3.0) or SSLRequest (protocol docs §55.2, §55.7)",
        r"(?s-u)\A(?:....\x00\x03\x00\x00(?:user|database|options|application_name)\x00|\x00\x00\x00\x08\x04\xd2\x16\x2f)";
    "mysql", Tcp, Server, [3306], Payload, "MySQL server greeting, protocol 10 (Initial Handshake Packet)",
        r"(?s-u)\A...\x00\x0a[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{1,3}[\x20-\x7e]*\x00";
    "netbios-ssn", Tcp, Either, [139], Payload, "NetBIOS session request with the called name (RFC 1002 §4.3.2), or a positive session response (§4.3.3)",
        r"(?s-u)\A(?:\x81\x00..\x20[A-P]{32}|\x82\x00\x00\x00\z)";
    "smb", Tcp, Either, [445], Payload, "SMB1 or SMB2/3 header after a NetBIOS session header (MS-SMB2 §2.2.1)",
        r"(?s-u)\A\x00...[\xfe\xff]SMB";
    "rdp", Tcp, Client, [3389], Payload, "TPKT with an X.224 Connection Request (MS-RDPBCGR §2.2.1.1)",
        r"(?s-u)\A\x03\x00..[\x06-\xff]\xe0\x00\x00";
    "bittorrent", Tcp, Either, [6881], Payload, "BitTorrent handshake (BEP 3)",
        r"(?s-u)\A\x13BitTorrent protocol";
    "quic", Udp, Either, [443], Payload, "QUIC long-header Initial packet of version 1 or 2 (RFC 9000 §17.2.2, RFC 9369)",
        r"(?s-u)\A(?:[\xc0-\xcf]\x00\x00\x00\x01|[\xd0-\xdf]\x6b\x33\x43\xcf)";
    "ntp", Udp, Either, [123], Payload, "NTP v3/v4 client or server packet of 48 bytes (RFC 5905 §7.3)",
        r"(?s-u)\A[\x1b\x1c\x23\x24\xe3\xe4\xdb\xdc][\x00-\x10].{46}\z";
    "dhcp", Udp, Either, [67, 68], Payload, "BOOTP message with the DHCP magic cookie (RFC 2131 §2, §3)",
        r"(?s-u)\A[\x01\x02]\x01\x06.{233}\x63\x82\x53\x63";
    "telnet", Tcp, Either, [23], Payload, "Telnet option negotiation (RFC 854), or a subnegotiation (RFC 855) where a capture starts with one",
        r"(?s-u)\A\xff(?:[\xfb-\xfe]|\xfa)[\x00-\x2f]";
    "ssdp", Udp, Either, [1900], Payload, "SSDP search or announcement (UPnP Device Architecture 2.0 §1.2.2, §1.3.2): HTTP over UDP with the methods HTTP does not have",
        r"(?s-u)\A(?:M-SEARCH|NOTIFY) \* HTTP/1\.1\r\n";
    "syslog", Both, Client, [514], Payload, "syslog message: a priority in angle brackets, then version 1 (RFC 5424 §6.2) or a BSD timestamp (RFC 3164 §4.1.2)",
        r"(?s-u)\A<(?:[0-9]|[1-9][0-9]|1[0-8][0-9]|19[01])>(?:1 |(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 0-3][0-9] [0-2][0-9]:)";
    "snmp", Udp, Either, [161, 162], Payload, "SNMP message: a BER SEQUENCE holding version 1, 2c (then the community string) or 3 (then its global data) (RFC 3416 §3, RFC 3412 §6)",
        r"(?s-u)\A\x30(?:[\x00-\x7f]|\x81.|\x82..)\x02\x01(?:[\x00\x01]\x04|\x03\x30)";
    "ldap", Both, Either, [389], Payload, "LDAP message: a BER SEQUENCE, a message ID, then a protocol operation's application tag (RFC 4511 §4.1.1, §4.2)",
        r"(?s-u)\A\x30(?:[\x00-\x7f]|\x81.|\x82..|\x84....)\x02(?:\x01.|\x02..|\x03...|\x04....)[\x42\x4a\x60-\x78]";
    "kerberos", Both, Either, [88], Payload, "Kerberos 5 KDC request (AS-REQ, TGS-REQ: pvno 5 at tag [1]), reply or error (pvno at tag [0]), over UDP or with TCP's length prefix (RFC 4120 §5.4.1, §5.4.2, §5.9.1, §7.2.2)",
        r"(?s-u)\A(?:\x00...)?(?:[\x6a\x6c](?:[\x00-\x7f]|\x81.|\x82..)\x30(?:[\x00-\x7f]|\x81.|\x82..)\xa1\x03\x02\x01\x05\xa2\x03\x02\x01[\x0a\x0c]|[\x6b\x6d\x7e](?:[\x00-\x7f]|\x81.|\x82..)\x30(?:[\x00-\x7f]|\x81.|\x82..)\xa0\x03\x02\x01\x05\xa1\x03\x02\x01[\x0b\x0d\x1e])";
    "stun", Both, Either, [3478], Payload, "STUN message: class and method, a length that is a multiple of 4, the magic cookie 0x2112A442 (RFC 8489 §5)",
        r"(?s-u)\A[\x00\x01].[\x00-\x0f][\x00\x04\x08\x0c\x10\x14\x18\x1c\x20\x24\x28\x2c\x30\x34\x38\x3c\x40\x44\x48\x4c\x50\x54\x58\x5c\x60\x64\x68\x6c\x70\x74\x78\x7c\x80\x84\x88\x8c\x90\x94\x98\x9c\xa0\xa4\xa8\xac\xb0\xb4\xb8\xbc\xc0\xc4\xc8\xcc\xd0\xd4\xd8\xdc\xe0\xe4\xe8\xec\xf0\xf4\xf8\xfc]\x21\x12\xa4\x42";
    "tftp", Udp, Client, [69], Payload, "TFTP read or write request: opcode 1 or 2, a file name, a mode (RFC 1350 §5)",
        r"(?s-u)\A\x00[\x01\x02][!-~]{1,255}\x00(?i:netascii|octet|mail)\x00";
    "bgp", Tcp, Either, [179], Payload, "BGP message header: 16-byte marker of all ones, a length, a type 1–5 (RFC 4271 §4.1, RFC 2918)",
        r"(?s-u)\A\xff{16}[\x00-\x10].[\x01-\x05]";
    "amqp", Tcp, Client, [5672], Payload, "AMQP protocol header: the letters AMQP, then protocol id and version (AMQP 0-9-1 §4.2.2; AMQP 1.0 §2.2)",
        r"(?s-u)\AAMQP[\x00-\x03](?:\x00\x09\x01|\x01\x00\x00)";
    "vnc", Tcp, Either, [5900], Payload, "RFB protocol version handshake (RFC 6143 §7.1.1)",
        r"(?s-u)\ARFB 00[34]\.00[0-9]\n";
    "irc", Tcp, Either, [6667], Payload, "IRC registration (NICK, USER) or a server's first NOTICE (RFC 2812 §3.1)",
        r"(?s-u)\A(?:NICK [!-~]{1,64}\r?\n|USER [!-~]+ [!-~]+ [!-~]+ :|:[!-~]+ NOTICE (?:AUTH|\*) :)";
    "git", Tcp, Client, [9418], Payload, "Git protocol request: a pkt-line naming git-upload-pack or git-receive-pack (gitprotocol-pack, \"Git Transport\")",
        r"(?s-u)\A[0-9a-f]{4}git-(?:upload|receive|upload-archive)-pack ";
    "wireguard", Udp, Client, [51820], Payload, "WireGuard handshake initiation: type 1, three zero bytes, 148 bytes in all (WireGuard whitepaper §5.4.2)",
        r"(?s-u)\A\x01\x00\x00\x00.{144}\z";
    "memcached", Both, Client, [11211], Payload, "memcached text protocol command (protocol.txt, \"Commands\")",
        r"(?s-u)\A(?:(?:get|gets|gat|gats|set|add|replace|append|prepend|cas|delete|incr|decr|touch) [!-~]{1,250}(?: [0-9]+){0,4}(?: noreply)?\r\n|(?:stats|version|flush_all)\r\n)";
    "nats", Tcp, Server, [4222], Payload, "NATS server greeting: INFO and a JSON object (NATS client protocol, \"INFO\")",
        r"(?s-u)\AINFO \{";
    "mongodb", Tcp, Either, [27017], Payload, "MongoDB wire protocol message header: a length of 16 bytes to 4 MB, then opcode OP_MSG (2013) or OP_QUERY (2004) (MongoDB Wire Protocol, \"Standard Message Header\")",
        r"(?s-u)\A(?:[\x10-\xff].|[\x00-\x0f][\x01-\xff])[\x00-\x3f]\x00.{8}[\xd4\xdd]\x07\x00\x00";
    "xmpp", Tcp, Either, [5222], Payload, "XMPP stream header (RFC 6120 §4.2)",
        r"(?s-u)\A(?:<\?xml[^>]{0,100}\?>\s*)?<stream:stream[\s>]";
    "http2", Tcp, Client, [80], Payload, "HTTP/2 connection preface with prior knowledge, as h2c opens (RFC 9113 §3.4)",
        r"(?s-u)\APRI \* HTTP/2\.0\r\n\r\nSM\r\n\r\n";
    "mdns", Udp, Either, [5353], PayloadOnPort, "Multicast DNS query or response: a DNS message (RFC 6762 §18) whose flags are a standard query, or a response with AA set (§18.2–18.4), then a name or a compressed pointer. The payload is DNS's: port 5353 tells them apart",
        r"(?s-u)\A..(?:[\x00\x02]|[\x84\x86])\x00.{8}(?:[\x01-\x3f][-0-9A-Za-z_]|\xc0)";
    "llmnr", Both, Either, [5355], PayloadOnPort, "LLMNR query or response: a DNS-shaped header with opcode 0, Z zero and exactly one question (RFC 4795 §2.1.1). The payload is DNS's: port 5355 tells them apart",
        r"(?s-u)\A..[\x00-\x07\x80-\x87][\x00-\x0f]\x00\x01.{6}[\x01-\x3f][-0-9A-Za-z_]";
    "radius", Udp, Either, [1812, 1813, 1645, 1646, 3799], PayloadOnPort, "RADIUS packet: code (Access-Request to Accounting-Response, Access-Challenge, Status-Server/-Client, Disconnect and CoA), identifier, a length of 20–4096, the 16-byte authenticator, then an attribute of length 2 or more (RFC 2865 §3, §5; RFC 2866 §3; RFC 5176 §2.3). A 4-byte header: only on RADIUS's ports",
        r"(?s-u)\A[\x01-\x05\x0b-\x0d\x28-\x2d].(?:\x00[\x14-\xff]|[\x01-\x0f].).{16}[\x01-\xff][\x02-\xff]";
    "coap", Udp, Either, [5683], PayloadOnPort, "CoAP message: version 1, a token length of 0–8, a code that is a method (0.01–0.07) or a response class 2, 4 or 5 (RFC 7252 §3, §12.1; RFC 8132 §5). A 4-byte header: only on CoAP's port",
        r"(?s-u)\A[\x40-\x48\x50-\x58\x60-\x68\x70-\x78][\x00-\x07\x41-\x45\x5f\x80-\x8f\xa0-\xa5]..";
    "socks", Tcp, Client, [1080], PayloadOnPort, "SOCKS 5 method selection (RFC 1928 §3) or a SOCKS 4 CONNECT/BIND request (SOCKS 4 protocol, \"CONNECT\"): a few bytes with no magic, so only on SOCKS's port",
        r"(?s-u)\A(?:\x05[\x01-\x0a][\x00-\x03\x80-\xfe]|\x04[\x01\x02]......[!-~]{0,255}\x00)";
}
