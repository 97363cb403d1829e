//! IPFIX export (RFC 7011) of inspect's connections over UDP to a collector
//! (`switchyard inspect --ipfix HOST:PORT`), the application protocol in the standard
//! `applicationName` information element, so that nfcapd, tshark, or any IPFIX collector reads
//! inspect's verdicts beside the flows' counts.
//!
//! Each connection is two records, one a direction, told apart by `biflowDirection` (IE 239:
//! 1 `initiator` for the client's, 2 `reverseInitiator` for the server's); a direction that sent
//! nothing has none. Two unidirectional records rather than one RFC 5103 biflow record because
//! every collector reads them: reverse elements need the collector to know RFC 5103's
//! enterprise number. Fields (IANA's IPFIX registry, types per RFC 7011 §6.1):
//!
//! | IE | name | bytes |
//! |---|---|---|
//! | 8 / 27 | sourceIPv4Address / sourceIPv6Address | 4 / 16 |
//! | 12 / 28 | destinationIPv4Address / destinationIPv6Address | 4 / 16 |
//! | 7, 11 | sourceTransportPort, destinationTransportPort | 2 each |
//! | 4 | protocolIdentifier | 1 |
//! | 239 | biflowDirection (RFC 5103 §6.3) | 1 |
//! | 152, 153 | flowStartMilliseconds, flowEndMilliseconds | 8 each |
//! | 2 | packetDeltaCount | 8 |
//! | 1 | octetDeltaCount | 8 |
//! | 352 | layer2OctetDeltaCount | 8 |
//! | 95 | applicationId (RFC 6759 §4.1) | 4 |
//! | 96 | applicationName (RFC 6759) | variable (RFC 7011 §7) |
//!
//! Bytes are counted twice, as collectors differ in what they read: `octetDeltaCount` is the
//! IP datagrams' lengths (their headers' length fields: no link header, no Ethernet padding),
//! which nfdump and every NetFlow-era collector show as a flow's bytes; `layer2OctetDeltaCount`
//! is each frame's length as captured, link header included, the count EVE's `bytes_toserver`
//! gives. Both directions' records carry the connection's first and last times (the table keeps
//! them per connection, not per direction).
//!
//! The application is named twice too. `applicationName` is the protocol a signature named by
//! payload (an empty string for a connection nothing named). Collectors that key applications
//! by number (nfdump's `%nbid`/`%nbnam`, as for Cisco's NBAR) read `applicationId` instead:
//! Classification Engine ID 6, "User Defined" (RFC 6759 §4.1, Table 1), then a 3-byte
//! selector, the protocol's place in inspect's signature list plus one (0 for none). Such ids
//! mean something only with their names, so each export also sends an options template
//! ([`TEMPLATE_NAMES`], RFC 7011 §3.4.2.2: scope `applicationId`, field `applicationName`
//! in [`NAME_FIELD`] bytes, padded with zero bytes) and one options record for each protocol
//! its flows name, the way RFC 6759 §5 has an exporter announce its application table.
//!
//! Messages (RFC 7011 §3.1 header, §3.3 sets) stay within [`IpfixConfig::max_message`] bytes,
//! under a path MTU, since a UDP message is one datagram and a fragment lost loses it whole
//! (RFC 7011 §10.3.3). Over UDP the collector may have missed the templates, so they are sent
//! again in every export's first message and then every [`IpfixConfig::template_every`]
//! messages (RFC 7011 §8.4).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use crate::inspect::Protocol;
use crate::serial::{ConnResult, Sent, Verdict};

/// IPFIX's version number (RFC 7011 §3.1).
const VERSION: u16 = 10;
/// The Set ID of a template set (RFC 7011 §3.3.2).
const TEMPLATE_SET: u16 = 2;
/// The template of IPv4 records; the first ID data sets may use (RFC 7011 §3.4.1).
pub const TEMPLATE_V4: u16 = 256;
/// The template of IPv6 records.
pub const TEMPLATE_V6: u16 = 257;
/// The options template of the records that name application ids.
pub const TEMPLATE_NAMES: u16 = 258;
/// The Set ID of an options template set (RFC 7011 §3.3.2).
const OPTIONS_TEMPLATE_SET: u16 = 3;
/// RFC 6759 §4.1's Classification Engine ID for ids an exporter defines itself.
const USER_DEFINED_ENGINE: u8 = 6;
/// The fixed length of `applicationName` in the naming options records: longer than any
/// signature's name (a test checks), since nfdump reads those records only at fixed lengths.
pub const NAME_FIELD: usize = 24;
/// A variable-length field's length in a template (RFC 7011 §7).
const VARIABLE: u16 = 0xffff;
/// The longest application name sent: long enough for any protocol's, short enough that a
/// record always fits a message.
const MAX_NAME: usize = 64;

/// Header bytes of a message (RFC 7011 §3.1) and of a set (§3.3.2).
const MESSAGE_HEADER: usize = 16;
const SET_HEADER: usize = 4;

/// The fields of a record after its two addresses, as (IE, length).
const COMMON_FIELDS: [(u16, u16); 11] = [
    (7, 2),         // sourceTransportPort
    (11, 2),        // destinationTransportPort
    (4, 1),         // protocolIdentifier
    (239, 1),       // biflowDirection
    (152, 8),       // flowStartMilliseconds
    (153, 8),       // flowEndMilliseconds
    (2, 8),         // packetDeltaCount
    (1, 8),         // octetDeltaCount
    (352, 8),       // layer2OctetDeltaCount
    (95, 4),        // applicationId
    (96, VARIABLE), // applicationName
];

/// The application id of a connection's verdict (see the module's doc): engine, then the
/// 3-byte selector; all zeros (engine 0, "Invalid") for a connection nothing named.
fn application_id(verdict: Verdict) -> [u8; 4] {
    match verdict {
        Verdict::Matched(p) => {
            let [_, a, b, c] = (u32::from(p.0) + 1).to_be_bytes();
            [USER_DEFINED_ENGINE, a, b, c]
        }
        _ => [0; 4],
    }
}

/// How the exporter frames its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpfixConfig {
    /// The Observation Domain ID every message carries (RFC 7011 §3.1).
    pub observation_domain: u32,
    /// The longest message, in bytes: a UDP datagram's payload that crosses an Ethernet path
    /// unfragmented with room for IPv6's header and a tunnel's.
    pub max_message: usize,
    /// Messages between two that carry the templates again.
    pub template_every: u32,
}

impl Default for IpfixConfig {
    /// Domain 0, 1,400-byte messages, templates every 16 messages.
    fn default() -> Self {
        Self { observation_domain: 0, max_message: 1400, template_every: 16 }
    }
}

/// One direction of a connection, as a data record.
struct Record<'a> {
    conn: &'a ConnResult,
    /// From the server (biflowDirection 2): its addresses turned round.
    reverse: bool,
    sent: Sent,
}

impl Record<'_> {
    fn template(&self) -> u16 {
        if self.conn.key.src().is_ipv4() { TEMPLATE_V4 } else { TEMPLATE_V6 }
    }

    fn name(&self) -> &[u8] {
        let name = match self.conn.verdict {
            Verdict::Matched(p) => p.name().as_bytes(),
            _ => b"",
        };
        &name[..name.len().min(MAX_NAME)]
    }

    fn len(&self) -> usize {
        let addresses = if self.template() == TEMPLATE_V4 { 8 } else { 32 };
        addresses + 2 + 2 + 1 + 1 + 8 + 8 + 8 + 8 + 8 + 4 + 1 + self.name().len()
    }

    fn write(&self, out: &mut Vec<u8>) {
        let key = if self.reverse { self.conn.key.reversed() } else { self.conn.key };
        let (src, dst) = (key.src(), key.dst());
        for ip in [src.ip(), dst.ip()] {
            match ip {
                std::net::IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                std::net::IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            }
        }
        out.extend_from_slice(&src.port().to_be_bytes());
        out.extend_from_slice(&dst.port().to_be_bytes());
        out.push(key.proto);
        out.push(if self.reverse { 2 } else { 1 });
        out.extend_from_slice(&(self.conn.first_ns / 1_000_000).to_be_bytes());
        out.extend_from_slice(&(self.conn.last_ns / 1_000_000).to_be_bytes());
        out.extend_from_slice(&self.sent.packets.to_be_bytes());
        out.extend_from_slice(&self.sent.ip_bytes.to_be_bytes());
        out.extend_from_slice(&self.sent.wire_bytes.to_be_bytes());
        out.extend_from_slice(&application_id(self.conn.verdict));
        let name = self.name();
        out.push(name.len() as u8); // under 255: the one-byte length of RFC 7011 §7
        out.extend_from_slice(name);
    }
}

/// Turns connections into IPFIX messages (no I/O: [`Exporter`] sends them). Keeps the sequence
/// number, which counts the data records sent in the domain (RFC 7011 §3.1), across exports.
#[derive(Debug)]
pub struct Encoder {
    config: IpfixConfig,
    /// Data records sent before the next message.
    sequence: u32,
}

impl Encoder {
    /// An encoder that has sent nothing.
    pub fn new(config: IpfixConfig) -> Self {
        Self { config, sequence: 0 }
    }

    /// The messages that export `conns` at `export_time` (seconds since the Unix epoch): the
    /// names of the application ids the flows carry first, then the flows.
    pub fn encode(&mut self, conns: &[ConnResult], export_time: u32) -> Vec<Vec<u8>> {
        let mut named: Vec<Protocol> = conns
            .iter()
            .filter_map(|c| match c.verdict {
                Verdict::Matched(p) => Some(p),
                _ => None,
            })
            .collect();
        named.sort_unstable();
        named.dedup();
        let flows = conns.iter().flat_map(|c| {
            [
                Record { conn: c, reverse: false, sent: c.to_server },
                Record { conn: c, reverse: true, sent: c.to_client },
            ]
            .into_iter()
            .filter(|r| r.sent.packets > 0)
        });
        let items = named.into_iter().map(Item::Name).chain(flows.map(Item::Flow));
        let mut messages = Vec::new();
        let mut m = Message::start(self, export_time, true);
        for item in items {
            let opens_set = m.set_template != Some(item.template());
            let needs = item.len() + if opens_set { SET_HEADER } else { 0 };
            if m.bytes.len() + needs > self.config.max_message && m.records > 0 {
                let templates = (messages.len() + 1).is_multiple_of(self.config.template_every.max(1) as usize);
                messages.push(m.finish());
                m = Message::start(self, export_time, templates);
            }
            m.push(&item);
            self.sequence = self.sequence.wrapping_add(1);
        }
        if m.records > 0 || messages.is_empty() {
            messages.push(m.finish());
        }
        messages
    }
}

/// A data record of either kind.
enum Item<'a> {
    /// An options record naming a protocol's application id.
    Name(Protocol),
    /// One direction of a connection.
    Flow(Record<'a>),
}

impl Item<'_> {
    fn template(&self) -> u16 {
        match self {
            Self::Name(_) => TEMPLATE_NAMES,
            Self::Flow(r) => r.template(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Name(_) => 4 + NAME_FIELD,
            Self::Flow(r) => r.len(),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Self::Name(p) => {
                out.extend_from_slice(&application_id(Verdict::Matched(*p)));
                let name = p.name().as_bytes();
                let name = &name[..name.len().min(NAME_FIELD)];
                out.extend_from_slice(name);
                out.resize(out.len() + NAME_FIELD - name.len(), 0);
            }
            Self::Flow(r) => r.write(out),
        }
    }
}

/// A message being filled.
struct Message {
    bytes: Vec<u8>,
    /// Where the open data set's header is, and its template.
    set_at: usize,
    set_template: Option<u16>,
    records: usize,
}

impl Message {
    fn start(encoder: &Encoder, export_time: u32, templates: bool) -> Self {
        let mut bytes = Vec::with_capacity(encoder.config.max_message);
        bytes.extend_from_slice(&VERSION.to_be_bytes());
        bytes.extend_from_slice(&[0, 0]); // length, set when finished
        bytes.extend_from_slice(&export_time.to_be_bytes());
        bytes.extend_from_slice(&encoder.sequence.to_be_bytes());
        bytes.extend_from_slice(&encoder.config.observation_domain.to_be_bytes());
        debug_assert_eq!(bytes.len(), MESSAGE_HEADER);
        if templates {
            write_templates(&mut bytes);
        }
        Self { set_at: 0, set_template: None, records: 0, bytes }
    }

    fn push(&mut self, item: &Item<'_>) {
        if self.set_template != Some(item.template()) {
            self.close_set();
            self.set_at = self.bytes.len();
            self.bytes.extend_from_slice(&item.template().to_be_bytes());
            self.bytes.extend_from_slice(&[0, 0]);
            self.set_template = Some(item.template());
        }
        item.write(&mut self.bytes);
        self.records += 1;
    }

    fn close_set(&mut self) {
        if self.set_template.take().is_some() {
            let len = (self.bytes.len() - self.set_at) as u16;
            self.bytes[self.set_at + 2..self.set_at + 4].copy_from_slice(&len.to_be_bytes());
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.close_set();
        let len = self.bytes.len() as u16;
        self.bytes[2..4].copy_from_slice(&len.to_be_bytes());
        self.bytes
    }
}

/// The template set (RFC 7011 §3.4.1: both flow templates), then the options template set
/// (§3.4.2.2: the naming records' template, its one scope field first).
fn write_templates(out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&TEMPLATE_SET.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    for (id, addresses) in [(TEMPLATE_V4, [(8, 4), (12, 4)]), (TEMPLATE_V6, [(27, 16), (28, 16)])] {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&((addresses.len() + COMMON_FIELDS.len()) as u16).to_be_bytes());
        for (ie, len) in addresses.into_iter().chain(COMMON_FIELDS) {
            out.extend_from_slice(&u16::to_be_bytes(ie));
            out.extend_from_slice(&u16::to_be_bytes(len));
        }
    }
    let len = (out.len() - at) as u16;
    out[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
    let at = out.len();
    out.extend_from_slice(&OPTIONS_TEMPLATE_SET.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&TEMPLATE_NAMES.to_be_bytes());
    out.extend_from_slice(&2u16.to_be_bytes()); // fields
    out.extend_from_slice(&1u16.to_be_bytes()); // of which scope fields
    for (ie, len) in [(95u16, 4u16), (96, NAME_FIELD as u16)] {
        out.extend_from_slice(&ie.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
    }
    let len = (out.len() - at) as u16;
    out[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum IpfixError {
    /// The collector's address did not resolve.
    #[error("--ipfix {addr}: cannot resolve the collector (give HOST:PORT, e.g. 127.0.0.1:4739): {source}")]
    Resolve {
        /// As given.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// A socket call failed.
    #[error("--ipfix {addr}: {what}: {source}")]
    Socket {
        /// The collector.
        addr: String,
        /// What was being done.
        what: &'static str,
        /// Why.
        source: io::Error,
    },
}

/// Messages sent at once before a pause: a burst larger than a collector's socket buffer
/// (nfcapd's default is about 200 KiB) would be dropped by the collector's kernel.
const BURST: usize = 64;

/// An exporter sending to one collector over UDP.
#[derive(Debug)]
pub struct Exporter {
    socket: UdpSocket,
    addr: String,
    encoder: Encoder,
}

/// What an export sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// Messages (datagrams).
    pub messages: usize,
    /// Data records.
    pub records: u64,
}

impl Exporter {
    /// An exporter to the collector at `addr` (`HOST:PORT`).
    pub fn connect(addr: &str, config: IpfixConfig) -> Result<Self, IpfixError> {
        let resolve = |source| IpfixError::Resolve { addr: addr.to_string(), source };
        let to: SocketAddr = addr
            .to_socket_addrs()
            .map_err(resolve)?
            .next()
            .ok_or_else(|| resolve(io::Error::new(io::ErrorKind::NotFound, "no address")))?;
        let socket = |what| move |source| IpfixError::Socket { addr: addr.to_string(), what, source };
        let local: SocketAddr = if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().expect("static");
        let udp = UdpSocket::bind(local).map_err(socket("binding a UDP socket"))?;
        udp.connect(to).map_err(socket("connecting the UDP socket"))?;
        Ok(Self { socket: udp, addr: addr.to_string(), encoder: Encoder::new(config) })
    }

    /// Sends `conns`' records, stamped `export_time` (seconds since the Unix epoch).
    pub fn export(&mut self, conns: &[ConnResult], export_time: u32) -> Result<Exported, IpfixError> {
        let before = self.encoder.sequence;
        let messages = self.encoder.encode(conns, export_time);
        for (i, m) in messages.iter().enumerate() {
            if i > 0 && i.is_multiple_of(BURST) {
                std::thread::sleep(Duration::from_millis(2));
            }
            self.socket.send(m).map_err(|source| IpfixError::Socket {
                addr: self.addr.clone(),
                what: "sending to the collector",
                source,
            })?;
        }
        Ok(Exported { messages: messages.len(), records: u64::from(self.encoder.sequence.wrapping_sub(before)) })
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::flow::FiveTuple;

    use super::*;

    fn conn(client: &str, server: &str, name: Option<&str>, to_server: u64, to_client: u64) -> ConnResult {
        let key = FiveTuple::new(6, client.parse().unwrap(), server.parse().unwrap());
        let verdict = name.map_or(Verdict::NoMatch, |n| Verdict::Matched(Protocol::by_name(n).expect("shipped")));
        ConnResult {
            first_ns: 1_700_000_000_123_456_789,
            last_ns: 1_700_000_002_500_000_000,
            to_server: Sent { packets: to_server, wire_bytes: 100 * to_server, ip_bytes: 86 * to_server },
            to_client: Sent { packets: to_client, wire_bytes: 1000 * to_client, ip_bytes: 986 * to_client },
            ..ConnResult::new(7, key, None, verdict, None)
        }
    }

    fn u16_at(b: &[u8], at: usize) -> u16 {
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
    }

    /// One IPv4 connection, laid out byte by byte as RFC 7011 has it: the 16-byte message
    /// header (§3.1: version 10, length, export time, sequence, domain), a template set (§3.3.2,
    /// Set ID 2; §3.4.1 records: ID, field count, then IE and length, 65535 for variable), an
    /// options template set (Set ID 3; §3.4.2.2: ID, field count, scope field count, fields), a
    /// data set of template 258 naming the one application id, and a data set of template 256
    /// holding the client's record, then the server's with the addresses turned round, each
    /// name prefixed by its one-byte length (§7).
    #[test]
    fn a_message_is_laid_out_as_rfc_7011_says() {
        let config = IpfixConfig { observation_domain: 42, ..IpfixConfig::default() };
        let mut enc = Encoder::new(config);
        let messages = enc.encode(&[conn("10.0.0.1:40000", "192.0.2.80:443", Some("tls"), 3, 2)], 1_800_000_000);
        assert_eq!(messages.len(), 1);
        let m = &messages[0];
        assert_eq!(u16_at(m, 0), 10, "version");
        assert_eq!(usize::from(u16_at(m, 2)), m.len(), "length is the whole message");
        assert_eq!(u32_at(m, 4), 1_800_000_000, "export time");
        assert_eq!(u32_at(m, 8), 0, "no data record before this message");
        assert_eq!(u32_at(m, 12), 42, "observation domain");
        // The template set.
        assert_eq!(u16_at(m, 16), 2);
        let tset = usize::from(u16_at(m, 18));
        assert_eq!((u16_at(m, 20), u16_at(m, 22)), (256, 13), "template 256, 13 fields");
        let fields: Vec<(u16, u16)> = (0..13).map(|i| (u16_at(m, 24 + 4 * i), u16_at(m, 26 + 4 * i))).collect();
        assert_eq!(
            fields,
            [
                (8, 4),
                (12, 4),
                (7, 2),
                (11, 2),
                (4, 1),
                (239, 1),
                (152, 8),
                (153, 8),
                (2, 8),
                (1, 8),
                (352, 8),
                (95, 4),
                (96, 65535)
            ]
        );
        let v6 = 24 + 52;
        assert_eq!((u16_at(m, v6), u16_at(m, v6 + 2)), (257, 13));
        assert_eq!((u16_at(m, v6 + 4), u16_at(m, v6 + 6)), (27, 16));
        assert_eq!(tset, 4 + 2 * (4 + 52), "the set's length covers both templates");
        // The options template set: template 258, two fields of which one is the scope.
        let o = 16 + tset;
        assert_eq!((u16_at(m, o), u16_at(m, o + 2)), (3, 18));
        assert_eq!((u16_at(m, o + 4), u16_at(m, o + 6), u16_at(m, o + 8)), (258, 2, 1));
        assert_eq!((u16_at(m, o + 10), u16_at(m, o + 12), u16_at(m, o + 14), u16_at(m, o + 16)), (95, 4, 96, 24));
        // The naming record: engine 6 ("User Defined"), tls's selector, its name padded.
        let n = o + 18;
        assert_eq!((u16_at(m, n), u16_at(m, n + 2)), (258, 4 + 28));
        let tls = u32::from(Protocol::by_name("tls").unwrap().0) + 1;
        assert_eq!(u32_at(m, n + 4), (6 << 24) | tls);
        assert_eq!(&m[n + 8..n + 32], b"tls\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        // The data set.
        let d = n + 32;
        assert_eq!(u16_at(m, d), 256);
        assert_eq!(usize::from(u16_at(m, d + 2)), m.len() - d, "the data set runs to the end");
        let r = d + 4;
        assert_eq!(&m[r..r + 8], &[10, 0, 0, 1, 192, 0, 2, 80]);
        assert_eq!((u16_at(m, r + 8), u16_at(m, r + 10), m[r + 12], m[r + 13]), (40000, 443, 6, 1));
        assert_eq!((u64_at(m, r + 14), u64_at(m, r + 22)), (1_700_000_000_123, 1_700_000_002_500));
        assert_eq!(
            (u64_at(m, r + 30), u64_at(m, r + 38), u64_at(m, r + 46)),
            (3, 3 * 86, 300),
            "packets, IP bytes, frames' bytes"
        );
        assert_eq!(u32_at(m, r + 54), (6 << 24) | tls, "the application id the naming record names");
        assert_eq!(&m[r + 58..r + 62], &[3, b't', b'l', b's']);
        let r = r + 62;
        assert_eq!(&m[r..r + 8], &[192, 0, 2, 80, 10, 0, 0, 1], "the server's record turned round");
        assert_eq!((u16_at(m, r + 8), u16_at(m, r + 10), m[r + 13]), (443, 40000, 2));
        assert_eq!((u64_at(m, r + 30), u64_at(m, r + 38), u64_at(m, r + 46)), (2, 2 * 986, 2000));
        assert_eq!(r + 62, m.len());
        // The next export's sequence number counts the three data records sent.
        let next = enc.encode(&[], 1_800_000_001);
        assert_eq!(u32_at(&next[0], 8), 3);
    }

    /// Every signature's name fits the naming records' fixed field whole.
    #[test]
    fn every_name_fits_the_naming_field() {
        for s in crate::inspect::SIGNATURES {
            assert!(s.name.len() <= NAME_FIELD, "{:?} is longer than {NAME_FIELD} bytes", s.name);
        }
    }

    /// Many connections: no message over the limit, every record sent once, sequence numbers
    /// counting records, templates in the first message and again every `template_every`, a
    /// silent server direction left out, and IPv6 records in sets of template 257.
    #[test]
    fn messages_stay_under_the_limit_and_templates_come_back() {
        let config = IpfixConfig { max_message: 512, template_every: 4, ..IpfixConfig::default() };
        let mut conns: Vec<ConnResult> =
            (0..100).map(|i| conn(&format!("10.0.0.1:{}", 1000 + i), "192.0.2.80:80", Some("tls"), 2, 1)).collect();
        conns.push(conn("[2001:db8::1]:5000", "[2001:db8::2]:53", None, 1, 0));
        let messages = Encoder::new(config).encode(&conns, 0);
        let mut records = 0;
        for (i, m) in messages.iter().enumerate() {
            assert!(m.len() <= 512, "message {i} is {} bytes", m.len());
            assert_eq!(u32_at(m, 8), records as u32, "message {i}'s sequence number");
            let mut at = 16;
            let mut templates = false;
            while at < m.len() {
                let (id, len) = (u16_at(m, at), usize::from(u16_at(m, at + 2)));
                match id {
                    2 => templates = true,
                    3 => assert!(templates, "the options template comes with the templates"),
                    258 => {
                        assert_eq!(i, 0, "names come first");
                        records += (len - 4) / 28;
                    }
                    256 => records += (len - 4) / 62,
                    257 => {
                        records += (len - 4) / 83;
                        assert_eq!(&m[at + 4 + 15], &1, "the IPv6 source's last byte");
                        assert_eq!(
                            &m[at + 4 + 78..at + 4 + 83],
                            &[0; 5],
                            "no id and no name for an unnamed connection"
                        );
                    }
                    other => panic!("set {other}"),
                }
                at += len;
            }
            assert_eq!(at, m.len());
            assert_eq!(templates, i % 4 == 0, "message {i}");
        }
        assert_eq!(records, 1 + 100 * 2 + 1, "tls's name, then the flows");
    }
}
