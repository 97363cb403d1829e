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
}

macro_rules! signatures {
    ($( $name:literal, $what:literal, $pattern:literal; )*) => {
        /// Every signature, in priority order (the first that matches names the protocol).
        pub const SIGNATURES: &[Signature] = &[ $( Signature { name: $name, what: $what, pattern: $pattern }, )* ];
    };
}

signatures! {
    "http", "HTTP/1.x request line or status line (RFC 9112 §3, §4)",
        r"(?s-u)\A(?:(?:GET|POST|HEAD|PUT|DELETE|OPTIONS|PATCH|CONNECT|TRACE) [!-~]+ HTTP/1\.[01]\r?\n|HTTP/1\.[01] [1-5][0-9][0-9])";
    "tls", "TLS record of type handshake carrying a ClientHello or a ServerHello (RFC 8446 §5.1, §4.1.2, §4.1.3); or, for a capture that starts mid-connection or shows one side, any record (change_cipher_spec, alert, handshake, application_data) whose record-layer version is 1.0–1.2 (1.3 records say 1.2, §5.1) and whose length fits a record (at most 2^14 + 256 bytes, §5.2)",
        r"(?s-u)\A(?:\x16\x03[\x00-\x04]..[\x01\x02]...\x03[\x00-\x04]|[\x14-\x17]\x03[\x01-\x03][\x00-\x48].)";
    "ssh", "SSH identification string (RFC 4253 §4.2)",
        r"(?s-u)\ASSH-(?:2\.0|1\.99|1\.5)-[!-~]";
    "netbios-ns", "NetBIOS name service packet (RFC 1002 §4.2): a DNS-shaped header, then a question name of 32 letters A–P (the first-level encoding of a 16-byte NetBIOS name, RFC 1001 §14.1) of type NB or NBSTAT, class IN. Before dns, whose signature its queries also match",
        r"(?s-u)\A.{12}\x20[A-P]{32}(?:[\x01-\x3f][!-~]{1,63})*\x00\x00[\x20\x21]\x00\x01";
    "dns", "DNS query or, for a response whose query is not in the capture, response header: one question, no answers (RFC 1035 §4.1.1), over UDP or with TCP's length prefix. A first label of 32 characters may not start with A–P: that is NetBIOS's encoding (netbios-ns), and signatures must not overlap (the combined engine takes the first to match, not the first listed). The cost: a DNS name whose first label is 32 characters from an upper-case A–P is missed",
        r"(?s-u)\A(?:..)?..(?:[\x00\x01][\x00\x10\x20]\x00\x01\x00\x00\x00\x00\x00[\x00\x01]|[\x80-\x87][\x00-\x05\x80-\x85\xa0-\xa5]\x00\x01\x00[\x00-\x3f]\x00[\x00-\x0f]\x00[\x00-\x0f])(?:[\x01-\x1f\x21-\x3f][-0-9A-Za-z_]|\x20[-0-9Q-Za-z_])";
    "ftp", "FTP server greeting naming FTP (RFC 959 §4.2)",
        r"(?s-u)\A220[ -][^\r\n]*(?i:ftp)";
    "smtp", "SMTP greeting naming (E)SMTP, or a client's EHLO/HELO (RFC 5321 §4.2, §4.1.1.1)",
        r"(?s-u)\A(?:220[ -][^\r\n]*(?i:e?smtp)|(?i:ehlo|helo) [!-~])";
    "imap", "IMAP untagged greeting naming IMAP (RFC 9051 §7.1)",
        r"(?s-u)\A\* (?:OK|PREAUTH)[^\r\n]*(?i:imap)";
    "pop3", "POP3 positive greeting (RFC 1939 §4)",
        r"(?s-u)\A\+OK[^\r\n]*(?i:pop|ready|dovecot)";
    "sip", "SIP request line or status line (RFC 3261 §7.1, §7.2)",
        r"(?s-u)\A(?:(?:INVITE|REGISTER|OPTIONS|BYE|ACK|CANCEL|SUBSCRIBE|NOTIFY|MESSAGE) sips?:[!-~]+ SIP/2\.0\r\n|SIP/2\.0 [1-6][0-9][0-9] )";
    "rtsp", "RTSP request or status line (RFC 2326 §6, §7)",
        r"(?s-u)\A(?:(?:OPTIONS|DESCRIBE|SETUP|PLAY|PAUSE|TEARDOWN|ANNOUNCE|RECORD|GET_PARAMETER|SET_PARAMETER) (?:rtsp://[!-~]+|\*) RTSP/1\.0\r\n|RTSP/1\.0 [1-5][0-9][0-9] )";
    "mqtt", "MQTT CONNECT packet, protocol name MQTT (3.1.1, 5) or MQIsdp (3.1) (MQTT 5.0 §3.1.2.1)",
        r"(?s-u)\A\x10(?:[\x80-\xff]{0,3}[\x00-\x7f])(?:\x00\x04MQTT[\x04\x05]|\x00\x06MQIsdp\x03)";
    "redis", "RESP array of bulk strings, the form of every client command (Redis protocol spec)",
        r"(?s-u)\A\*[1-9][0-9]{0,5}\r\n\$[0-9]{1,9}\r\n";
    "postgresql", "PostgreSQL StartupMessage (protocol 3.0) or SSLRequest (protocol docs §55.2, §55.7)",
        r"(?s-u)\A(?:....\x00\x03\x00\x00(?:user|database|options|application_name)\x00|\x00\x00\x00\x08\x04\xd2\x16\x2f)";
    "mysql", "MySQL server greeting, protocol 10 (Initial Handshake Packet)",
        r"(?s-u)\A...\x00\x0a[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{1,3}[\x20-\x7e]*\x00";
    "netbios-ssn", "NetBIOS session request with the called name (RFC 1002 §4.3.2), or a positive session response (§4.3.3)",
        r"(?s-u)\A(?:\x81\x00..\x20[A-P]{32}|\x82\x00\x00\x00\z)";
    "smb", "SMB1 or SMB2/3 header after a NetBIOS session header (MS-SMB2 §2.2.1)",
        r"(?s-u)\A\x00...[\xfe\xff]SMB";
    "rdp", "TPKT with an X.224 Connection Request (MS-RDPBCGR §2.2.1.1)",
        r"(?s-u)\A\x03\x00..[\x06-\xff]\xe0\x00\x00";
    "bittorrent", "BitTorrent handshake (BEP 3)",
        r"(?s-u)\A\x13BitTorrent protocol";
    "quic", "QUIC long-header Initial packet of version 1 or 2 (RFC 9000 §17.2.2, RFC 9369)",
        r"(?s-u)\A(?:[\xc0-\xcf]\x00\x00\x00\x01|[\xd0-\xdf]\x6b\x33\x43\xcf)";
    "ntp", "NTP v3/v4 client or server packet of 48 bytes (RFC 5905 §7.3)",
        r"(?s-u)\A[\x1b\x1c\x23\x24\xe3\xe4\xdb\xdc][\x00-\x10].{46}\z";
    "dhcp", "BOOTP message with the DHCP magic cookie (RFC 2131 §2, §3)",
        r"(?s-u)\A[\x01\x02]\x01\x06.{233}\x63\x82\x53\x63";
    "telnet", "Telnet option negotiation (RFC 854), or a subnegotiation (RFC 855) where a capture starts with one",
        r"(?s-u)\A\xff(?:[\xfb-\xfe]|\xfa)[\x00-\x2f]";
    "xmpp", "XMPP stream header (RFC 6120 §4.2)",
        r"(?s-u)\A(?:<\?xml[^>]{0,100}\?>\s*)?<stream:stream[\s>]";
}
