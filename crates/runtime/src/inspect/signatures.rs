//! The protocol signatures: one regular expression per protocol over the start of a connection's
//! buffer (its first bytes in conversation order; see `switchyard_ingest::conn`).
//!
//! Each is written from the protocol's specification of its opening message, not taken from the
//! l7-protocols set. All are anchored at the buffer's start (`\A`): a connection is identified by
//! how it opens, which keeps the automaton small and false matches rare. Patterns run on bytes,
//! without Unicode (`(?-u)`), and `.` matches any byte (`(?s)`).

/// A protocol the inspector can name.
#[derive(Clone, Copy, Debug)]
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
    /// What a regex cannot check, run on the bytes from the match's start once the pattern has
    /// matched: counts consistent with the message, a well-formed name, a checksum. A buffer it
    /// refuses is not this protocol's, and another signature may still name it.
    pub check: Option<fn(&[u8]) -> bool>,
    /// Run instead of [`Signature::check`] on a TCP connection, for a protocol whose forms differ
    /// by transport (STUN's classic messages travel in the clear over UDP alone).
    pub check_tcp: Option<fn(&[u8]) -> bool>,
    /// The protocol whose messages carry this one, where its opening is one of them (DNSCrypt's
    /// certificate query is a DNS query): shown beside the name, as TLS shows its server name.
    pub carrier: Option<&'static str>,
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
    (@opt) => { None };
    (@opt $x:expr) => { Some($x) };
    ($( $name:literal, $over:ident, $opens:ident, [$($port:literal),*], $needs:ident, $what:literal, $pattern:literal
        $(, check = $check:path)? $(, check_tcp = $check_tcp:path)? $(, carrier = $carrier:literal)?; )*) => {
        /// Every signature, in priority order (the first that matches names the protocol).
        pub const SIGNATURES: &[Signature] = &[ $( Signature {
            name: $name,
            what: $what,
            pattern: $pattern,
            over: Over::$over,
            opens: Opens::$opens,
            ports: &[$($port),*],
            needs: Needs::$needs,
            check: signatures!(@opt $($check)?),
            check_tcp: signatures!(@opt $($check_tcp)?),
            carrier: signatures!(@opt $($carrier)?),
        }, )* ];
    };
}

signatures! {
    "http", Tcp, Either, [80, 8080], Payload, "HTTP/1.x request line or status line (RFC 9112 §3, §4): the methods of RFC 9110 §9 and PATCH (RFC 5789), WebDAV's (RFC 4918 §9, RFC 3253 §3–§13 for versioning, RFC 3744 §8.1 ACL, RFC 4791 §5.3.1 MKCALENDAR, RFC 5323 §2 SEARCH, RFC 5842 §4–§6 BIND), UPnP's GENA over TCP (UPnP Device Architecture 2.0 §4.1.2, §4.1.4, §4.3: SUBSCRIBE, UNSUBSCRIBE, NOTIFY to a path) and RPC over HTTP's (MS-RPCH §2.1.2.1.1, §2.1.2.1.2: RPC_IN_DATA, RPC_OUT_DATA), and the status line for a capture that starts with a response. The request target may hold raw UTF-8 bytes, which clients send though RFC 3986 §2 asks them to percent-encode",
        r"(?s-u)\A(?:(?:GET|POST|HEAD|PUT|DELETE|OPTIONS|PATCH|CONNECT|TRACE|PROPFIND|PROPPATCH|MKCOL|COPY|MOVE|LOCK|UNLOCK|SEARCH|REPORT|CHECKOUT|CHECKIN|UNCHECKOUT|VERSION-CONTROL|MKWORKSPACE|MKACTIVITY|MERGE|LABEL|UPDATE|BASELINE-CONTROL|ACL|MKCALENDAR|BIND|UNBIND|REBIND|ORDERPATCH|SUBSCRIBE|UNSUBSCRIBE|NOTIFY|RPC_IN_DATA|RPC_OUT_DATA) [!-~\x80-\xff]+ HTTP/1\.[01]\r?\n|HTTP/1\.[01] [1-5][0-9][0-9])";
    "tls", Tcp, Either, [443, 853, 993, 995, 465, 8443], Payload, "TLS record of type handshake carrying a ClientHello or a ServerHello (RFC 8446 §5.1, §4.1.2, §4.1.3); or, for a capture that starts mid-connection or shows one side, any record (change_cipher_spec, alert, handshake, application_data) whose record-layer version is 1.0–1.2 (1.3 records say 1.2, §5.1) and whose length fits a record (at most 2^14 + 256 bytes, §5.2; SSL 3.0's records too, RFC 6101 §5.2); or an SSL 2.0 CLIENT-HELLO, as clients that also speak SSL 2.0 open (RFC 6101 Appendix E.1, E.2; RFC 5246 Appendix E.2): a two-byte header of a short message, type 1, version 2.0 or 3.x, cipher-spec length, a session id of 0 or 16 bytes (32 in practice), a challenge of 16–32",
        r"(?s-u)\A(?:\x16\x03[\x00-\x04]..[\x01\x02]...\x03[\x00-\x04]|[\x14-\x17]\x03[\x00-\x03][\x00-\x48].|[\x80\x81].\x01(?:\x00\x02|\x03[\x00-\x03])\x00[\x03-\xff]\x00[\x00\x10\x20]\x00[\x10-\x20])";
    "ssh", Tcp, Either, [22], Payload, "SSH identification string (RFC 4253 §4.2)",
        r"(?s-u)\ASSH-(?:2\.0|1\.99|1\.5)-[!-~]";
    "netbios-ns", Udp, Either, [137], Payload, "NetBIOS name service packet (RFC 1002 §4.2): a DNS-shaped header, then a question name of 32 letters A–P (the first-level encoding of a 16-byte NetBIOS name, RFC 1001 §14.1) of type NB or NBSTAT, class IN. Before dns, whose signature its queries also match",
        r"(?s-u)\A.{12}\x20[A-P]{32}(?:[\x01-\x3f][!-~]{1,63})*\x00\x00[\x20\x21]\x00\x01";
    "dns", Both, Either, [53], Payload, "DNS message (RFC 1035 §4.1), over UDP or after TCP's two-byte length (§4.2.2): a query (opcode QUERY, NOTIFY of RFC 1996 §3 or UPDATE of RFC 2136 §2) or a response, whose header's counts fit the message (each question at least 5 bytes, each record 11) and whose first question is a name of labels of 1–63 bytes, 255 in all, the first starting with a printable character and the bytes after it printable, spaces or UTF-8 (RFC 6763 §4.1.1's instance names, RFC 6762 §16, RFC 4795 §2.4), then a known QTYPE and QCLASS — checked in code after the pattern, so that encrypted bytes with a DNS-like header are not named. A first label of 32 characters may not start with A–P: that is NetBIOS's encoding (netbios-ns). DNSCrypt's certificate queries are dnscrypt's",
        r"(?s-u)\A(?:..)?..(?:[\x00-\x07\x20-\x2f][\x00\x10\x20\x30]\x00[\x01-\x08]\x00[\x00-\x0f]\x00[\x00-\x0f]\x00[\x00-\x03]|[\x80-\x87\xa0-\xaf][\x00-\x0a\x10-\x1a\x20-\x2a\x30-\x3a\x80-\x8a\x90-\x9a\xa0-\xaa\xb0-\xba]\x00[\x01-\x08][\x00-\x17].\x00.\x00.)(?:[\x01-\x1f\x21-\x3f][!-~]|\x20[!-@Q-~]|\x00)",
        check = super::dns::is_plain;
    "ftp", Tcp, Server, [21], Payload, "FTP server greeting naming FTP (RFC 959 §4.2)",
        r"(?s-u)\A220[ -][^\r\n]*(?i:ftp)";
    "smtp", Tcp, Either, [25, 587], Payload, "SMTP greeting naming (E)SMTP, or a client's EHLO/HELO (RFC 5321 §4.2, §4.1.1.1)",
        r"(?s-u)\A(?:220[ -][^\r\n]*(?i:e?smtp)|(?i:ehlo|helo) [!-~])";
    "imap", Tcp, Server, [143], Payload, "IMAP untagged greeting naming IMAP (RFC 9051 §7.1)",
        r"(?s-u)\A\* (?:OK|PREAUTH)[^\r\n]*(?i:imap)";
    "pop3", Tcp, Server, [110], Payload, "POP3 positive greeting (RFC 1939 §4)",
        r"(?s-u)\A\+OK[^\r\n]*(?i:pop|ready|dovecot)";
    "sip", Both, Either, [5060], Payload, "SIP request line or status line (RFC 3261 §7.1, §7.2), with the methods of RFC 3261, INFO (RFC 6086), PRACK (RFC 3262), SUBSCRIBE and NOTIFY (RFC 6665), UPDATE (RFC 3311), MESSAGE (RFC 3428), REFER (RFC 3515) and PUBLISH (RFC 3903), a SIP, SIPS, tel (RFC 3966) or service URN (RFC 5031 §4, as emergency calls are addressed: `urn:service:sos`) URI, the line ended by CRLF or a bare LF (RFC 3261 §7.5 asks receivers to accept one); over TCP, after any CRLF keep-alives (RFC 5626 §3.5.1)",
        r"(?s-u)\A(?:\r\n)*(?:(?:INVITE|REGISTER|OPTIONS|BYE|ACK|CANCEL|SUBSCRIBE|NOTIFY|MESSAGE|INFO|PRACK|UPDATE|REFER|PUBLISH) (?:sips?|tel|urn):[!-~]+ SIP/2\.0\r?\n|SIP/2\.0 [1-6][0-9][0-9] )";
    "rtsp", Tcp, Either, [554], Payload, "RTSP request or status line (RFC 2326 §6, §7, with REDIRECT §10.10; RFC 7826 §7, §8 for RTSP 2.0 and PLAY_NOTIFY), to an rtsp, rtsps or rtspu URL (the scheme in any case, RFC 3986 §3.1) or `*`",
        r"(?s-u)\A(?:(?:OPTIONS|DESCRIBE|SETUP|PLAY|PAUSE|TEARDOWN|ANNOUNCE|RECORD|GET_PARAMETER|SET_PARAMETER|REDIRECT|PLAY_NOTIFY) (?:(?i:rtsp[su]?)://[!-~]+|\*) RTSP/[12]\.0\r\n|RTSP/[12]\.0 [1-5][0-9][0-9] )";
    "mqtt", Tcp, Client, [1883], Payload, "MQTT CONNECT packet, protocol name MQTT (3.1.1, 5) or MQIsdp (3.1) (MQTT 5.0 §3.1.2.1)",
        r"(?s-u)\A\x10(?:[\x80-\xff]{0,3}[\x00-\x7f])(?:\x00\x04MQTT[\x04\x05]|\x00\x06MQIsdp\x03)";
    "redis", Tcp, Client, [6379], Payload, "RESP array of bulk strings, the form of every client command (Redis protocol spec)",
        r"(?s-u)\A\*[1-9][0-9]{0,5}\r\n\$[0-9]{1,9}\r\n";
    "postgresql", Tcp, Client, [5432], Payload, "PostgreSQL StartupMessage (protocol 3.0) or SSLRequest (protocol docs §55.2, §55.7)",
        r"(?s-u)\A(?:....\x00\x03\x00\x00(?:user|database|options|application_name)\x00|\x00\x00\x00\x08\x04\xd2\x16\x2f)";
    "mysql", Tcp, Server, [3306], Payload, "MySQL server greeting, protocol 10 (Initial Handshake Packet)",
        r"(?s-u)\A...\x00\x0a[0-9]{1,2}\.[0-9]{1,2}\.[0-9]{1,3}[\x20-\x7e]*\x00";
    "netbios-ssn", Tcp, Either, [139], Payload, "NetBIOS session request with the called name (RFC 1002 §4.3.2; its flags' E bit extends the length, §4.3.1), or a positive session response (§4.3.3); a negative session response with its error code (§4.3.4), a retarget response (§4.3.5) or a keep-alive (§4.3.7), each a whole packet, as a capture that starts mid-session sees them",
        r"(?s-u)\A(?:\x81[\x00\x01]..\x20[A-P]{32}|\x82\x00\x00\x00\z|\x83\x00\x00\x01[\x80-\x83\x8f]\z|\x84\x00\x00\x06.{6}\z|\x85\x00\x00\x00\z)";
    "smb", Tcp, Either, [445], Payload, "SMB1 or SMB2/3 header after a NetBIOS session header (MS-SMB2 §2.2.1), or SMB 3's transform headers there: encrypted (0xFD 'SMB', §2.2.41) or compressed (0xFC 'SMB', §2.2.42)",
        r"(?s-u)\A\x00...[\xfc-\xff]SMB";
    "rdp", Tcp, Client, [3389], Payload, "TPKT (RFC 1006 §6) with an X.224 Connection Request whose user data is what makes it RDP's (MS-RDPBCGR §2.2.1.1): a cookie (`Cookie: mstshash=`), a routing token (`Cookie: msts=`) or an RDP Negotiation Request (§2.2.1.1.1: type 1, length 8, requested protocols). Other protocols open over TPKT too (S7comm, MMS); an RDP request with none of the three (RDP 4.0 and 5.0 clients may send one) is not named",
        r"(?s-u)\A\x03\x00..[\x06-\xff]\xe0\x00\x00..\x00(?:Cookie: msts(?:hash)?=|\x01[\x00-\x0f]\x08\x00[\x00-\x3f]\x00\x00\x00)";
    "bittorrent", Both, Either, [6881], Payload, "BitTorrent peer handshake (BEP 3); a DHT message (BEP 5, \"KRPC Protocol\"): a bencoded dictionary whose first key, keys sorted, is a query's arguments `a` or a response's `r` with the node's 20-byte `id`, or an error `e`, or BEP 42's `ip` before a response; a UDP tracker's connect request with its protocol id (BEP 15); or a uTP SYN (BEP 29: type ST_SYN, version 1, a known extension, timestamp difference 0, a non-zero window, its extensions whole), checked in code",
        r"(?s-u)\A(?:\x13BitTorrent protocol|d1:[ar]d2:id20:|d2:ip(?:6:.{6}|18:.{18})1:rd2:id20:|d1:eli[0-9]{3}e|\x00\x00\x04\x17\x27\x10\x19\x80\x00\x00\x00\x00|\x41[\x00-\x02])",
        check = super::checks::bittorrent;
    "quic", Udp, Either, [443], Payload, "QUIC long-header packet (RFC 9000 §17.2, RFC 8999 §5.1): version 1, 2 (RFC 9369 §3.1), an IETF draft (0xff0000xx, draft-ietf-quic-transport §15) or mvfst's (0xfaceb00x), with a destination connection id of at most 20 bytes; Google QUIC Q046–Q059 and T050/T051 in the IETF-style long header, and Q024–Q045 in the public header (flags with the version and 8-byte connection id bits, the id, the version tag: Chromium's quic_versions.h and \"QUIC Wire Layout\"); or a version negotiation packet (version 0, §17.2.1) whose listed versions are all QUIC's, checked in code",
        r"(?s-u)\A(?:[\xc0-\xff](?:\x00\x00\x00\x01|\x6b\x33\x43\xcf|\xff\x00\x00[\x01-\x22]|\xfa\xce\xb0[\x01-\x0f])[\x00-\x14]|[\xc0-\xff](?:Q04[6-9]|Q05[0-9]|T05[01])|[\x09\x0d\x19\x1d\x29\x2d\x39\x3d\x49\x4d\x59\x5d\x69\x6d\x79\x7d].{8}Q0(?:[23][0-9]|4[0-5])|[\x80-\xff]\x00\x00\x00\x00[\x00-\x14])",
        check = super::checks::quic;
    "ntp", Udp, Either, [123], Payload, "NTP v3/v4 client or server packet (RFC 5905 §7.3) of 48 bytes, or with its key id and message digest (§7.3, Figure 8: 52 for a crypto-NAK, 68 with MD5, 72 with SHA-1), a whole datagram; or an NTP control message (mode 6; RFC 9327 §2, after RFC 1305 Appendix B): a 12-byte header with an opcode of 1–31 and a count the datagram holds, with at most its padding and a MAC after it; both checked in code",
        r"(?s-u)\A(?:[\x1b\x1c\x23\x24\xe3\xe4\xdb\xdc][\x00-\x10].{46}|[\x0e\x16\x1e\x26][\x01-\x1f\x81-\x9f\xc1-\xdf\xa1-\xbf\xe1-\xff]..\x00.{7})",
        check = super::checks::ntp;
    "dhcp", Udp, Either, [67, 68], Payload, "BOOTP message with the DHCP magic cookie (RFC 2131 §2, §3): any hardware type (IANA's ARP hardware types: InfiniBand's hlen is 0, RFC 4390 §2.1), an address length and a hop count of at most 16",
        r"(?s-u)\A[\x01\x02].[\x00-\x10][\x00-\x10].{232}\x63\x82\x53\x63";
    "telnet", Tcp, Either, [23], Payload, "Telnet option negotiation (RFC 854), or a subnegotiation (RFC 855) where a capture starts with one",
        r"(?s-u)\A\xff(?:[\xfb-\xfe]|\xfa)[\x00-\x2f]";
    "ssdp", Udp, Either, [1900], Payload, "SSDP search or announcement (UPnP Device Architecture 2.0 §1.2.2, §1.3.2): HTTP over UDP with the methods HTTP does not have; or a search response (§1.3.3), the status line `HTTP/1.1 200` over UDP (HTTP's is over TCP); HTTP/1.0 too, as UPnP 1.0 stacks send",
        r"(?s-u)\A(?:(?:M-SEARCH|NOTIFY) \* HTTP/1\.[01]\r\n|HTTP/1\.[01] 200 )";
    "syslog", Both, Client, [514], Payload, "syslog message: a priority in angle brackets (RFC 5424 §6.2.1), then version 1 (§6.2.2), a BSD timestamp (RFC 3164 §4.1.2), an RFC 3339 timestamp without the version (as many senders write RFC 3164's header), or no header and a TAG ending in `:` or `[pid]:` (RFC 3164 §4.1.3, a message a relay passes on as it is, §4.3.3), or any eight printable characters (§4.1.3: the MSG part is printable text, and §4.3.3 has collectors take what follows a valid PRI whatever it is); over TCP, optionally after the octet count (RFC 6587 §3.4.1)",
        r"(?s-u)\A(?:[1-9][0-9]{0,5} )?<(?:[0-9]|[1-9][0-9]|1[0-8][0-9]|19[01])>(?:1 |(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ 0-3][0-9] [0-2][0-9]:|[12][0-9]{3}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:|[A-Za-z][-.0-9A-Za-z_/]{0,47}(?:\[[0-9]{1,10}\])?: |[\t\x20-\x7e]{8})";
    "snmp", Udp, Either, [161, 162], Payload, "SNMP message: a BER SEQUENCE holding version 1, 2c (then the community string) or 3 (then its global data) (RFC 3416 §3, RFC 3412 §6)",
        r"(?s-u)\A\x30(?:[\x00-\x7f]|\x81.|\x82..)\x02\x01(?:[\x00\x01]\x04|\x03\x30)";
    "ldap", Both, Either, [389], Payload, "LDAP message: a BER SEQUENCE, a message ID, then a protocol operation's application tag (RFC 4511 §4.1.1, §4.2)",
        r"(?s-u)\A\x30(?:[\x00-\x7f]|\x81.|\x82..|\x84....)\x02(?:\x01.|\x02..|\x03...|\x04....)[\x42\x4a\x60-\x78]";
    "kerberos", Both, Either, [88], Payload, "Kerberos 5 KDC request (AS-REQ, TGS-REQ: pvno 5 at tag [1]), reply or error (pvno at tag [0]), over UDP or with TCP's length prefix (RFC 4120 §5.4.1, §5.4.2, §5.9.1, §7.2.2)",
        r"(?s-u)\A(?:\x00...)?(?:[\x6a\x6c](?:[\x00-\x7f]|\x81.|\x82..)\x30(?:[\x00-\x7f]|\x81.|\x82..)\xa1\x03\x02\x01\x05\xa2\x03\x02\x01[\x0a\x0c]|[\x6b\x6d\x7e](?:[\x00-\x7f]|\x81.|\x82..)\x30(?:[\x00-\x7f]|\x81.|\x82..)\xa0\x03\x02\x01\x05\xa1\x03\x02\x01[\x0b\x0d\x1e])";
    "stun", Both, Either, [3478], Payload, "STUN message: class and method, a length that is a multiple of 4, the magic cookie 0x2112A442 (RFC 8489 §5), over TCP also after RFC 4571's two-byte framing, as ICE-TCP sends it (RFC 6544 §3); or, over UDP only, a classic STUN message without it (RFC 3489 §11.1: Binding or Shared Secret request, response or error response, a 128-bit transaction id) whose attributes (§11.2, types 0x0001–0x000b, those IANA's STUN registry assigned up to 0x0030, or comprehension-optional ones) walk to the length the header gives, checked in code. RFC 3489 sends Binding Requests over UDP (§8.1) and Shared Secret Requests over TLS (§9.2), so over TCP the cookie is required (RFC 8489 §6.2.2): Modbus/TCP's requests open with the same bytes as a classic Binding Request",
        r"(?s-u)\A(?:(?:..)?[\x00\x01].[\x00-\x0f][\x00\x04\x08\x0c\x10\x14\x18\x1c\x20\x24\x28\x2c\x30\x34\x38\x3c\x40\x44\x48\x4c\x50\x54\x58\x5c\x60\x64\x68\x6c\x70\x74\x78\x7c\x80\x84\x88\x8c\x90\x94\x98\x9c\xa0\xa4\xa8\xac\xb0\xb4\xb8\xbc\xc0\xc4\xc8\xcc\xd0\xd4\xd8\xdc\xe0\xe4\xe8\xec\xf0\xf4\xf8\xfc]\x21\x12\xa4\x42|(?:\x00[\x01\x02]|\x01[\x01\x02\x11\x12])[\x00-\x01][\x00\x04\x08\x0c\x10\x14\x18\x1c\x20\x24\x28\x2c\x30\x34\x38\x3c\x40\x44\x48\x4c\x50\x54\x58\x5c\x60\x64\x68\x6c\x70\x74\x78\x7c\x80\x84\x88\x8c\x90\x94\x98\x9c\xa0\xa4\xa8\xac\xb0\xb4\xb8\xbc\xc0\xc4\xc8\xcc\xd0\xd4\xd8\xdc\xe0\xe4\xe8\xec\xf0\xf4\xf8\xfc].{16})",
        check = super::checks::stun, check_tcp = super::checks::stun_tcp;
    "tftp", Udp, Either, [69], Payload, "TFTP read or write request: opcode 1 or 2, a file name, a mode (RFC 1350 §5), or where the transfer's own ports start a connection of their own (§4: the server answers from a new port): the first DATA block (opcode 3, block 1, at most 512 bytes of data, checked in code), a write request's ACK of block 0 (opcode 4), an option acknowledgment (opcode 6, RFC 2347) or an error packet (opcode 5, codes 0–8)",
        r"(?s-u)\A(?:\x00[\x01\x02][!-~]{1,255}\x00(?i:netascii|octet|mail)\x00|\x00\x03\x00\x01|\x00\x04\x00\x00(?:\z|\x00\x03\x00\x01)|\x00\x06[A-Za-z]{3,16}\x00[0-9]{1,10}\x00|\x00\x05\x00[\x00-\x08][\x20-\x7e]*\x00)",
        check = super::checks::tftp;
    "bgp", Tcp, Either, [179], Payload, "BGP message header: 16-byte marker of all ones, a length, a type 1–5 (RFC 4271 §4.1, RFC 2918)",
        r"(?s-u)\A\xff{16}[\x00-\x10].[\x01-\x05]";
    "amqp", Tcp, Client, [5672], Payload, "AMQP protocol header: the letters AMQP, then protocol id and version (AMQP 0-9-1 §4.2.2; AMQP 1.0 §2.2)",
        r"(?s-u)\AAMQP[\x00-\x03](?:\x00\x09\x01|\x01\x00\x00)";
    "vnc", Tcp, Either, [5900], Payload, "RFB protocol version handshake (RFC 6143 §7.1.1)",
        r"(?s-u)\ARFB 00[34]\.00[0-9]\n";
    "irc", Tcp, Either, [6667], Payload, "IRC registration (NICK, USER) or a server's first NOTICE (RFC 2812 §3.1)",
        r"(?s-u)\A(?:NICK [!-~]{1,64}\r?\n|USER [!-~]+ [!-~]+ [!-~]+ :|:[!-~]+ NOTICE (?:AUTH|\*) :)";
    "git", Tcp, Either, [9418], Payload, "Git protocol request: a pkt-line naming git-upload-pack or git-receive-pack (gitprotocol-pack, \"Git Transport\"); or, where a capture holds the server's side first, its protocol v2 capability advertisement (gitprotocol-v2, \"Capability Advertisement\": `version 2`), a v2 command request (`command=ls-refs`, `fetch`, `object-info`), or a v0/v1 reference advertisement (gitprotocol-pack, \"Reference Discovery\": an object id and a ref)",
        r"(?s-u)\A(?:[0-9a-f]{4}git-(?:upload|receive|upload-archive)-pack |[0-9a-f]{4}version [12]\n|[0-9a-f]{4}command=(?:ls-refs|fetch|object-info)\n|[0-9a-f]{4}[0-9a-f]{40} (?:HEAD|refs/))";
    "wireguard", Udp, Either, [51820], Payload, "WireGuard message (WireGuard whitepaper §5.4): a handshake initiation (type 1, three zero bytes, 148 bytes in all, §5.4.2), a response (type 2, 92 bytes, §5.4.3), a cookie reply (type 3, 64 bytes, §5.4.7), or transport data (type 4, §5.4.6: a 16-byte header, then an encrypted packet padded to 16 bytes with its 16-byte tag, so at least 32 bytes and a multiple of 16), each a whole datagram, checked in code",
        r"(?s-u)\A(?:\x01\x00\x00\x00.{144}\z|\x02\x00\x00\x00.{88}\z|\x03\x00\x00\x00.{60}\z|\x04\x00\x00\x00.{28})",
        check = super::checks::wireguard;
    "memcached", Both, Client, [11211], Payload, "memcached text protocol command (protocol.txt, \"Commands\")",
        r"(?s-u)\A(?:(?:get|gets|gat|gats|set|add|replace|append|prepend|cas|delete|incr|decr|touch) [!-~]{1,250}(?: [0-9]+){0,4}(?: noreply)?\r\n|(?:stats|version|flush_all)\r\n)";
    "nats", Tcp, Server, [4222], Payload, "NATS server greeting: INFO and a JSON object (NATS client protocol, \"INFO\")",
        r"(?s-u)\AINFO \{";
    "mongodb", Tcp, Either, [27017], Payload, "MongoDB wire protocol message header: a length of 16 bytes to 4 MB, then opcode OP_MSG (2013) or OP_QUERY (2004) (MongoDB Wire Protocol, \"Standard Message Header\")",
        r"(?s-u)\A(?:[\x10-\xff].|[\x00-\x0f][\x01-\xff])[\x00-\x3f]\x00.{8}[\xd4\xdd]\x07\x00\x00";
    "xmpp", Tcp, Either, [5222], Payload, "XMPP stream header (RFC 6120 §4.2); or, where a capture starts after it, a first-level element of the stream (features §4.3.2, STARTTLS §5.4.2, SASL §6.4, stanzas §8) whose first 200 bytes declare an XMPP namespace (`urn:ietf:params:xml:ns:xmpp-*`, `jabber:*`, §4.8.1)",
        r"(?s-u)\A(?:(?:<\?xml[^>]{0,100}\?>\s*)?<stream:stream[\s>]|<(?:stream:features|starttls|proceed|failure|auth|success|challenge|response|iq|presence|message)[\s>/][^\x00]{0,200}?xmlns=['\x22](?:urn:ietf:params:xml:ns:xmpp-|jabber:))";
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
    "socks", Tcp, Either, [1080], PayloadOnPort, "SOCKS 5 method selection and the server's choice (RFC 1928 §3), a SOCKS 5 request or reply (§4, §6: an IPv4, IPv6 or domain-name address), as a capture that starts after the method exchange sees it; a SOCKS 4 or 4A CONNECT/BIND request (SOCKS 4 protocol, \"CONNECT\"; SOCKS 4A) or its 8-byte reply (codes 90–93): a few bytes with no magic, so only on SOCKS's port, and a SOCKS 5 message must be whole (checked in code)",
        r"(?s-u)\A(?:\x05[\x01-\x0a][\x00-\x03\x80-\xfe]|\x04[\x01\x02]......[!-~]{0,255}\x00|\x05[\x00-\x02\xff]\z|\x00[\x5a-\x5d]......\z|\x05[\x00-\x08]\x00(?:\x01.{6}|\x04.{18}|\x03[\x01-\xff][!-~]))",
        check = super::checks::socks;
    "dnscrypt", Both, Either, [443, 5443], Payload, "DNSCrypt (\"DNSCrypt version 2\" protocol specification): a client's certificate query, TXT for `2.dnscrypt-cert.<provider>` (§\"Certificates\"), or the answer to one — a DNS message, so `dns` is its carrier — or an encrypted response, which opens with the resolver's magic `r6fnvWj8` (§\"Encrypted responses\"), over UDP or after TCP's two-byte length. Only what the connection's own bytes say: the queries that follow the certificate's are encrypted and begin with a magic of the provider's own, which no signature can know",
        r"(?s-u)\A(?:(?:..)?..(?:[\x00\x01][\x00\x10\x20\x30]\x00\x01\x00\x00\x00\x00\x00[\x00\x01]|[\x80-\x87][\x00-\x0a\x80-\x8a\xa0-\xaa]\x00\x01\x00.\x00.\x00.)\x012\x0d(?i:dnscrypt-cert)[\x01-\x3f]|(?:..)?r6fnvWj8)",
        check = super::dns::is_dnscrypt, carrier = "dns";
    "s7comm", Tcp, Either, [102], Payload, "S7comm over ISO-on-TCP (RFC 1006 §6, ISO 8073 §13.3): a COTP Connection Request or Confirm whose called TSAP (parameter 0xC2) is an S7 one — two bytes, connection type 1–3 (PG, OP, S7 basic) then rack and slot — or S7comm-plus's `SIMATIC-ROOT-*`; or a COTP Data TPDU carrying an S7 PDU (protocol id 0x32, ROSCTR job, ack, ack-data or userdata, reserved zero) or an S7comm-plus one (0x72). Siemens publishes no specification: the layout is that of Wireshark's S7comm dissector (packet-s7comm.c) and Snap7's documentation (\"The S7 Protocol\")",
        r"(?s-u)\A\x03\x00..(?:[\x06-\xff](?:\xe0\x00\x00|\xd0....)..\x00(?:\xc0\x01.|\xc1[\x02\x04][\x00-\xff]{2}(?:[\x00-\xff]{2})?)*\xc2(?:\x02[\x01-\x03].|[\x0e-\x14]SIMATIC-ROOT-)|\x02\xf0\x80(?:\x32[\x01-\x03\x07]\x00\x00|\x72[\x01-\x03]))";
    "mms", Tcp, Either, [102], Payload, "IEC 61850 / ISO 9506 MMS association over ISO-on-TCP (RFC 1006 §6): a COTP Data TPDU carrying an ISO 8327 session CONNECT or ACCEPT SPDU (SI 13, 14; X.225 §8.3.1, §8.3.2) whose presentation and ACSE content names MMS's abstract syntax or application context (1.0.9506.2.1 or 1.0.9506.2.3, ISO 9506-2 Annex A) in its first 300 bytes",
        r"(?s-u)\A\x03\x00..\x02\xf0\x80[\x0d\x0e].{0,300}?\x06\x05\x28\xca\x22\x02[\x01\x03]";
    "dtls", Udp, Either, [4433], Payload, "DTLS record (RFC 6347 §4.1, RFC 9147 §4): content type 20–25, the first-byte range RFC 7983 §7 gives DTLS beside STUN and RTP, version 1.0 (0xfeff) or 1.2 (0xfefd, which 1.3 records also say), an epoch whose high byte is 0 and a sequence number below 2^32, a length that fits a record (2^14 + 2048)",
        r"(?s-u)\A[\x14-\x19]\xfe[\xfd\xff]\x00.\x00\x00....[\x00-\x48].";
    "rtcp", Udp, Either, [5005], Payload, "RTCP compound packet (RFC 3550 §6.1, Appendix A.2's checks): version 2 without padding, first a sender or receiver report (payload type 200, 201; RFC 7983 §7 puts RTP and RTCP at first bytes 128–191), whose length fits the datagram, and any packet after it RTCP's too (192–223, RFC 5761 §4) — checked in code",
        r"(?s-u)\A[\x80-\x9f][\xc8\xc9]\x00.",
        check = super::checks::rtcp;
    "slp", Both, Either, [427], Payload, "Service Location Protocol: a version 2 header (RFC 2608 §8) — function 1–11, a length, flags with only O, F and R, an extension offset, an XID, then a language tag of 2 or more letters — or a version 1 header (RFC 2165 §7): function 1–10, flags with the reserved bits clear, dialect 0, a two-letter language code and a character encoding (US-ASCII, ISO-8859-1, UTF-8, or ISO 10646 forms)",
        r"(?s-u)\A(?:\x02[\x01-\x0b]\x00..[\x00\x20\x40\x60\x80\xa0\xc0\xe0]\x00.....\x00[\x02-\x20][A-Za-z]{2}|\x01[\x01-\x0a]..[\x00\x08\x10\x18\x20\x28\x30\x38\x40\x48\x50\x58\x60\x68\x70\x78\x80\x88\x90\x98\xa0\xa8\xb0\xb8\xc0\xc8\xd0\xd8\xe0\xe8\xf0\xf8]\x00[a-z]{2}(?:\x00[\x03\x04\x6a]|\x03[\xe8\xe9\xf5-\xf7]))";
    "ike", Udp, Either, [500, 4500], Payload, "IKE message header (RFC 7296 §3.1 for IKEv2: version 0x20, exchange IKE_SA_INIT to INFORMATIONAL, IKE_INTERMEDIATE or IKE_FOLLOWUP_KE, flags I, V, R only; RFC 2408 §3.1 for IKEv1: version 0x10, exchanges of RFC 2409 §5 and §6), on UDP 4500 after the non-ESP marker (RFC 3948 §2.2); a length of at least 28 that the buffer holds, checked in code",
        r"(?s-u)\A(?:\x00\x00\x00\x00)?.{16}(?:[\x00\x21-\x35]\x20[\x22-\x25\x2b\x2c][\x00\x08\x10\x18\x20\x28\x30\x38]|[\x00-\x0e\x14\x15\x82-\x84]\x10[\x00-\x06\x20\x21][\x00-\x07])....\x00\x00..",
        check = super::checks::ike;
    "zabbix", Tcp, Either, [10051, 10050], Payload, "Zabbix protocol header: `ZBXD`, then flags 0x01 (Zabbix communications protocol) with 0x02 (compressed) and 0x04 (large packet) (Zabbix manual, \"Zabbix protocols: Header and data length\")",
        r"(?s-u)\AZBXD[\x01\x03\x05\x07]";
    "openvpn", Both, Either, [1194], Payload, "OpenVPN control channel reset (OpenVPN's ssl_pkt.h and \"OpenVPN wire protocol\", draft-schwabe-openvpn-wire-protocol §3): P_CONTROL_HARD_RESET_CLIENT_V2 or _V3 (opcode 7, 10, key id 0) with its session id, then no acks and message id 0 — plain, after tls-auth's HMAC (SHA-1 or SHA-256) and replay id 1, or with tls-crypt's replay id 1 — or the server's P_CONTROL_HARD_RESET_SERVER_V2 (opcode 8) acking message 0 — plain or after tls-auth's HMAC and replay id 1 — or with tls-crypt's replay id 1 (its ack list is encrypted: OpenVPN's tls_crypt.h gives the packet as opcode, session id, packet id, tag, then the encrypted rest); over TCP after a two-byte length",
        r"(?s-u)\A(?:..)?(?:[\x38\x50].{8}(?:\x00\x00\x00\x00\x00|\x00\x00\x00\x01|(?:.{20}|.{32})\x00\x00\x00\x01....\x00\x00\x00\x00\x00)|\x40.{8}(?:\x01\x00\x00\x00\x00.{8}\x00\x00\x00\x00|\x00\x00\x00\x01|(?:.{20}|.{32})\x00\x00\x00\x01....\x01\x00\x00\x00\x00))";
    "nfs", Both, Client, [2049], Payload, "ONC RPC call to NFS (RFC 5531 §9: an xid, message type CALL, RPC version 2, program 100003 (RFC 1813 §1, RFC 7530 §1), version 2–4), over TCP after the record mark (§11) of a last fragment",
        r"(?s-u)\A(?:\x80...)?....\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01\x86\xa3\x00\x00\x00[\x02-\x04]";
    "fix", Tcp, Either, [9876], Payload, "FIX message: BeginString (tag 8, FIX.x.y or FIXT.1.1), then BodyLength (9), then MsgType (35), in that order (FIX 4.4 Vol. 1 \"Message format\"; FIXT 1.1 §\"Standard message header\"). IANA assigns FIX no port: 9876 only gives --guess one",
        r"(?s-u)\A8=FIXT?\.[0-9]\.[0-9](?:SP[0-9])?\x019=[0-9]{1,7}\x0135=";
    "tds", Tcp, Either, [1433], Payload, "MS SQL TDS PRELOGIN (MS-TDS §2.2.6.5): a packet header of type 0x12 (§2.2.3.1.1) and end-of-message status, or the server's reply, type 0x04, whose option list opens with VERSION (token 0, a 6-byte value)",
        r"(?s-u)\A(?:\x12|\x04)\x01..\x00\x00[\x00\x01]\x00\x00\x00[\x06-\xff]\x00\x06";
    "bacnet", Udp, Either, [47808], Payload, "BACnet/IP BVLC message (ASHRAE 135-2020 Annex J.2): type 0x81, a function carrying an NPDU (Forwarded-NPDU, Distribute-Broadcast-To-Network, Original-Unicast-NPDU, Original-Broadcast-NPDU) or a BVLC-Result; its length, and the NPDU's version and control octet, checked in code",
        r"(?s-u)\A\x81(?:[\x04\x09-\x0b][\x00-\x05].|\x00\x00\x06\x00[\x00-\x60])",
        check = super::checks::bacnet;
    "dnp3", Both, Either, [20000], Payload, "DNP3 data link frame (IEEE 1815-2012 §9.2.1): start bytes 0x05 0x64, a length of 5 or more, control, destination, source, and the header's CRC (Annex E), checked in code",
        r"(?s-u)\A\x05\x64[\x05-\xff]",
        check = super::checks::dnp3;
    "iec104", Tcp, Either, [2404], Payload, "IEC 60870-5-104 APDUs (IEC 60870-5-104 §5): start 0x68, a length of 4–253, an I-, S- or U-format control field (STARTDT, STOPDT, TESTFR act or con), an I-format's ASDU type 1–127; every whole APDU in the buffer, checked in code",
        r"(?s-u)\A\x68(?:\x04(?:[\x07\x0b\x13\x23\x43\x83]\x00\x00\x00|\x01\x00)|[\x0a-\xfd])",
        check = super::checks::iec104;
    "kafka", Tcp, Client, [9092], Payload, "Kafka request (Kafka protocol guide, \"Common Request and Response Structure\", \"Request Header\"): a size below 16 MB, an API key of 0–74, an API version of 0–31, a correlation id, and a client id that fits the size and is printable, checked in code",
        r"(?s-u)\A\x00[\x00-\xff]..\x00[\x00-\x4a]\x00[\x00-\x1f]....(?:\xff\xff|\x00[\x00-\x7f])",
        check = super::checks::kafka;
    "gnutella", Both, Either, [6346, 6347], Payload, "Gnutella: a 0.4 or 0.6 connection handshake or its answer (\"The Annotated Gnutella Protocol Specification v0.4\" §2.2; RFC-Gnutella 0.6 draft §2.2: `GNUTELLA CONNECT/0.6`, `GNUTELLA/0.6 200`); a descriptor (v0.4 §2.2.1, \"Descriptor Header\": a 16-byte id, Ping, Pong, Bye, Push, Query or QueryHit, a TTL of 1 or more, TTL plus hops at most 16, a little-endian payload length the buffer holds, at least the descriptor's smallest payload; a Ping's empty or a GGEP block, GGEP 0.51 §2); or a Gnutella2 UDP packet (\"G2 UDP Transceiver\": `GND`, flags, sequence, part of count), checked in code",
        r"(?s-u)\A(?:GNUTELLA CONNECT/0\.[46]\r?\n|GNUTELLA/0\.6 [1-5][0-9][0-9] |GNUTELLA OK\n\n|GND[\x00-\x0f]..[\x01-\xff][\x01-\xff]|.{16}[\x00\x01\x02\x40\x80\x81][\x01-\x10][\x00-\x0f])",
        check = super::checks::gnutella;
    "mgcp", Udp, Client, [2427, 2727], Payload, "MGCP command line (RFC 3435 §3.2.1): one of its nine verbs, a transaction id of 1–9 digits (§3.2.1.2), an endpoint name, then `MGCP 1.0`",
        r"(?s-u)\A(?:EPCF|CRCX|MDCX|DLCX|RQNT|NTFY|AUEP|AUCX|RSIP) [0-9]{1,9} [!-~]+ MGCP 1\.0";
    "raknet", Udp, Either, [19132, 7777], Payload, "RakNet offline message (RakNet's MessageIdentifiers.h and RakPeer.cpp, which define it; no RFC): unconnected ping (0x01, 0x02) after its time, unconnected pong (0x1C) after time and GUID, open connection request or reply 1 and 2 (0x05–0x08), incompatible protocol version (0x19): each carrying the 16-byte OFFLINE_MESSAGE_DATA_ID magic `00 FF FF 00 FE FE FE FE FD FD FD FD 12 34 56 78`",
        r"(?s-u)\A(?:[\x01\x02].{8}|[\x05-\x08]|\x1c.{16}|\x19.)\x00\xff\xff\x00\xfe\xfe\xfe\xfe\xfd\xfd\xfd\xfd\x12\x34\x56\x78";
    "bitcoin", Tcp, Either, [8333, 18333, 38333, 18444], Payload, "Bitcoin P2P message header (Bitcoin Developer Reference, \"P2P Network: Message Headers\"; Bitcoin Core's protocol.h): the start string of mainnet, testnet3, signet or regtest, a command of lower-case ASCII padded with NULs to 12 bytes, a payload size up to 32 MiB (MAX_SIZE), checked in code",
        r"(?s-u)\A(?:\xf9\xbe\xb4\xd9|\x0b\x11\x09\x07|\x0a\x03\xcf\x40|\xfa\xbf\xb5\xda)[a-z]{1,12}",
        check = super::checks::bitcoin;
    "rtp", Udp, Either, [5004], Payload, "RTP data packets (RFC 3550 §5.1): version 2, a payload type outside 72–76, which RFC 5761 §4 leaves to RTCP (RFC 7983 §7 puts RTP at first bytes 128–191, beside DTLS and STUN), the header's CSRCs within the packet; and, since one header alone is twelve bytes anyone may send, the same stream's next packet in the buffer — the same SSRC with a sequence number 1–8 ahead (§A.1's probation: a source is valid after consecutive packets) — checked in code",
        r"(?s-u)\A[\x80-\xbf][\x00-\x47\x4d-\xc7\xcd-\xff]",
        check = super::checks::rtp;
    "natpmp", Udp, Either, [5351], PayloadOnPort, "NAT-PMP (RFC 6886 §3.2, §3.3): version 0, an external address request (2 bytes) or a mapping request (12 bytes), or their responses (opcode + 128, a result code 0–5; 12 and 16 bytes), each a whole datagram. A few bytes without magic: only on NAT-PMP's port",
        r"(?s-u)\A\x00(?:\x00\z|[\x01\x02]\x00\x00.{8}\z|\x80\x00[\x00-\x05].{8}\z|[\x81\x82]\x00[\x00-\x05].{12}\z)";
    "someip", Both, Either, [30490, 30491, 30501], PayloadOnPort, "SOME/IP message header (AUTOSAR PRS_SOMEIPProtocol, §4.1.2 \"Header\"): message id, a length of at least 8 that the buffer holds (checked in code), request id, protocol version 1, an interface version, a message type of the specification's (request, notification, response, error, their ACK and TP forms) and a return code below 0x5F. A 16-byte header of few fixed bits: only on the ports its specification and SOME/IP-SD's give",
        r"(?s-u)\A.{4}\x00\x00..(?s:.{4})\x01.[\x00-\x02\x20-\x22\x40-\x42\x60-\x62\x80\x81\xa0\xa1\xc0\xc1][\x00-\x5e]",
        check = super::checks::someip;
    "netbios-dgm", Udp, Either, [138], Payload, "NetBIOS datagram service (RFC 1002 §4.4.1–§4.4.3): a direct unique, direct group or broadcast datagram (types 0x10–0x12) of a first fragment (offset 0) with its source name, or a datagram query request (0x14) with its destination name, 32 letters A–P (RFC 1001 §14.1)",
        r"(?s-u)\A(?:[\x10-\x12][\x00-\x0f].{10}\x00\x00|\x14[\x00-\x0f].{8})\x20[A-P]{32}";
    "dhcpv6", Udp, Either, [547, 546], PayloadOnPort, "DHCPv6 message (RFC 8415 §7.3 message types 1–11, §8 header; relay-forward and -reply, 12 and 13, §9) whose options (§21.1) walk to the datagram's end, checked in code. A 4-byte header of few fixed bits: only on DHCPv6's ports",
        r"(?s-u)\A(?:[\x01-\x0b]...\x00[\x01-\xff]|[\x0c\x0d][\x00-\x20].{32}\x00[\x01-\xff])",
        check = super::checks::dhcpv6;
    "modbus", Tcp, Either, [502], PayloadOnPort, "Modbus/TCP ADUs (Modbus Messaging on TCP/IP Implementation Guide v1.0b §3.1.3): an MBAP header of a transaction id, protocol id 0 (Modbus), a length of 2–254 (the unit id and a PDU of at most 253 bytes, Modbus Application Protocol v1.1b3 §4.1), the unit id; then a function code of the public ones (§5.1: 1–8, 11, 12, 15–17, 20–24, 43) or their exception responses (code + 0x80, §7); every whole ADU in the buffer the same, checked in code. An 8-byte header of few fixed bits: only on Modbus's port",
        r"(?s-u)\A..\x00\x00\x00[\x02-\xfe].[\x01-\x08\x0b\x0c\x0f-\x11\x14-\x18\x2b\x81-\x88\x8b\x8c\x8f-\x91\x94-\x98\xab]",
        check = super::checks::modbus;
}
