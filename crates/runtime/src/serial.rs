//! The single-threaded reference pipeline: every buffer inspected in capture order on the calling
//! thread. It is the baseline the parallel runtime is measured against and must agree with.

use std::cell::Cell;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use switchyard_core::flow::FiveTuple;
use switchyard_ingest::{
    Assembly, Conn, ConnConfig, ConnTable, Glimpse, IngestError, Packet, Packets, SkipCounts, Step,
};

use crate::app_fields::{self, AppFields};
use crate::inspect::{Found, Inspector, Needs, Ports, Protocol, tls};

/// How a connection ended up (Guo §2.4's three states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A signature matched.
    Matched(Protocol),
    /// All of its inspected packets were seen and none matched.
    NoMatch,
    /// It ended before its last inspected packet, unmatched.
    Open,
    /// Unmatched, but some of its buffers were dropped at full queues (`on_full = drop`)
    /// unscanned: no verdict.
    Incomplete,
    /// Nothing matched, and `--guess` named it by its ports alone ([`Inspector::guess`]), as
    /// nDPI's "guessed" does.
    Guessed(Protocol),
}

impl Verdict {
    /// The verdict on a connection that has ended: matched if a buffer matched, otherwise
    /// no-match once all its inspected packets were seen, otherwise still open.
    pub fn of(matched: Option<Protocol>, packets: u64, config: &ConnConfig) -> Self {
        match matched {
            Some(p) => Self::Matched(p),
            None if packets >= u64::from(config.max_packets) => Self::NoMatch,
            None => Self::Open,
        }
    }

    /// With `--guess`: a connection nothing matched named by its ports, if they are a
    /// protocol's well-known ones; any other verdict as it is.
    pub fn guessed(self, ports: Ports) -> Self {
        match self {
            Self::NoMatch | Self::Open => Inspector::guess(ports).map_or(self, Self::Guessed),
            v => v,
        }
    }

    /// What the verdict rests on: `payload`, `payload+port` (a signature that needs its port,
    /// [`Needs::PayloadOnPort`]), `port` (guessed), or nothing for no protocol.
    pub fn evidence(self) -> Option<&'static str> {
        match self {
            Self::Matched(p) if p.signature().needs == Needs::PayloadOnPort => Some("payload+port"),
            Self::Matched(_) => Some("payload"),
            Self::Guessed(_) => Some("port"),
            _ => None,
        }
    }

    /// The protocol whose message the matched payload was, where the protocol named is carried
    /// in another's messages (DNSCrypt's certificate query is a DNS query): shown beside the
    /// name, as a TLS connection's server name is.
    pub fn carrier(self) -> Option<&'static str> {
        match self {
            Self::Matched(p) => p.signature().carrier,
            _ => None,
        }
    }

    /// How reports show it: the name, and ` (guessed)` after a guessed one.
    pub fn shown(self) -> std::borrow::Cow<'static, str> {
        match self {
            Self::Guessed(p) => format!("{} (guessed)", p.name()).into(),
            v => v.name().into(),
        }
    }

    /// The protocol's name (a guessed one's too), `no-match`, `open` or `incomplete`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Matched(p) | Self::Guessed(p) => p.name(),
            Self::NoMatch => "no-match",
            Self::Open => "open",
            Self::Incomplete => "incomplete",
        }
    }
}

/// What the inspector found of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnResult {
    /// Number of the connection, in order of first packet.
    pub id: u64,
    /// Client to server: the first sender is taken for the client unless the signature that
    /// matched says otherwise (a server's greeting on its bytes, [`Found::roles_reversed`]).
    pub key: FiveTuple,
    /// The outcome.
    pub verdict: Verdict,
    /// For TLS, what its handshake showed.
    pub tls: Option<Box<tls::Seen>>,
    /// For DNS and HTTP, what the buffer that matched showed (a query's name; a request's host
    /// and URL).
    pub app: Option<Box<AppFields>>,
    /// The packet (numbered from 0 in the connection) whose buffer matched.
    pub matched_at: Option<u32>,
    /// Packets seen.
    pub packets: u64,
    /// Payload bytes seen.
    pub bytes: u64,
    /// Capture times of its first and last packets, nanoseconds since the Unix epoch.
    pub first_ns: u64,
    /// See [`ConnResult::first_ns`].
    pub last_ns: u64,
    /// What the client (as [`ConnResult::key`] has it) sent.
    pub to_server: Sent,
    /// What the server sent.
    pub to_client: Sent,
}

/// What one end of a connection sent: packets, and bytes as on the wire (each frame's length,
/// link header included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Packets.
    pub packets: u64,
    /// Bytes on the wire.
    pub wire_bytes: u64,
    /// Bytes of the IP datagrams (link headers and frame padding left out).
    pub ip_bytes: u64,
}

impl ConnResult {
    /// The TLS server name, for TLS with one.
    pub fn server_name(&self) -> Option<&str> {
        self.tls.as_ref()?.server_name.as_deref()
    }

    /// The result of a connection of the table (`key`: first sender to other end) whose match,
    /// if any, is `found`; its counts are left for the caller.
    pub fn new(id: u64, key: FiveTuple, found: Option<Found>, verdict: Verdict, tls: Option<Box<tls::Seen>>) -> Self {
        let key = if found.is_some_and(Found::roles_reversed) { key.reversed() } else { key };
        Self {
            id,
            key,
            verdict,
            tls,
            app: None,
            matched_at: None,
            packets: 0,
            bytes: 0,
            first_ns: 0,
            last_ns: 0,
            to_server: Sent::default(),
            to_client: Sent::default(),
        }
    }

    /// With the counts and times the table kept of `conn`, each direction's put the way round
    /// [`ConnResult::key`] is (a matched server's greeting may have turned the roles round).
    pub fn counted<T>(self, conn: &Conn<T>) -> Self {
        let client = Sent {
            packets: conn.sent.client_packets,
            wire_bytes: conn.sent.client_wire_bytes,
            ip_bytes: conn.sent.client_ip_bytes,
        };
        let server = Sent {
            packets: conn.server_packets(),
            wire_bytes: conn.sent.server_wire_bytes,
            ip_bytes: conn.sent.server_ip_bytes,
        };
        let (to_server, to_client) = if self.key == conn.key() { (client, server) } else { (server, client) };
        Self {
            packets: conn.packets,
            bytes: conn.bytes,
            first_ns: conn.first_ns,
            last_ns: conn.last_ns,
            to_server,
            to_client,
            ..self
        }
    }
}

/// A connection as a row of the results CSV (`switchyard inspect --results`).
#[derive(serde::Serialize)]
struct ResultRow<'a> {
    id: u64,
    proto: u8,
    client: String,
    server: String,
    protocol: &'a str,
    /// The protocol whose messages carry it (`dns` for `dnscrypt`), if another's do.
    carrier: Option<&'a str>,
    /// `payload`, `payload+port` or `port` (guessed).
    evidence: Option<&'a str>,
    server_name: Option<&'a str>,
    /// The ClientHello's ALPN protocols, joined by `;`.
    alpn: Option<String>,
    /// The version the ServerHello negotiated (`1.3`, `1.2`, …).
    tls_version: Option<String>,
    ja4: Option<&'a str>,
    /// The packet, counted from 1 in the connection, whose buffer matched.
    matched_packet: Option<u32>,
    packets: u64,
    bytes: u64,
}

/// Writes one CSV row per connection, with a header: `id, proto, client, server, protocol,
/// carrier, evidence, server_name, alpn, tls_version, ja4, matched_packet` (counted from 1),
/// `packets, bytes`.
pub fn write_results(conns: &[ConnResult], out: impl std::io::Write) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    for c in conns {
        w.serialize(ResultRow {
            id: c.id,
            proto: c.key.proto,
            client: c.key.src().to_string(),
            server: c.key.dst().to_string(),
            protocol: c.verdict.name(),
            carrier: c.verdict.carrier(),
            evidence: c.verdict.evidence(),
            server_name: c.server_name(),
            alpn: c.tls.as_ref().filter(|t| !t.alpn.is_empty()).map(|t| t.alpn.join(";")),
            tls_version: c.tls.as_ref().and_then(|t| t.version).map(tls::version_name),
            ja4: c.tls.as_ref().and_then(|t| t.ja4.as_deref()),
            matched_packet: c.matched_at.map(|i| i + 1),
            packets: c.packets,
            bytes: c.bytes,
        })?;
    }
    w.flush()?;
    Ok(())
}

/// What a run over a capture found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// TCP and UDP packets read.
    pub packets: u64,
    /// Packets left out by the reader, by reason.
    pub skipped: SkipCounts,
    /// Buffers inspected.
    pub inspected: u64,
    /// Bytes scanned by the inspector.
    pub scanned_bytes: u64,
    /// Buffers not inspected because their connection was already classified.
    pub skipped_classified: u64,
    /// Packets after a connection's inspected ones (only marked).
    pub marked: u64,
    /// Payload bytes of all packets.
    pub payload_bytes: u64,
    /// Every connection, in id order.
    pub conns: Vec<ConnResult>,
}

impl Summary {
    /// Adds the counts and connections of a part of a run (a live worker's, a shard's) to
    /// these, and gives back the part's reader counts: whether they add up (live rings each
    /// read their own frames) or not (shards each read every packet) is the caller's to say.
    pub fn absorb(&mut self, part: Self) -> SkipCounts {
        self.packets += part.packets;
        self.inspected += part.inspected;
        self.scanned_bytes += part.scanned_bytes;
        self.skipped_classified += part.skipped_classified;
        self.marked += part.marked;
        self.payload_bytes += part.payload_bytes;
        self.conns.extend(part.conns);
        part.skipped
    }

    /// Numbers the connections from 0, in the order they stand.
    pub fn renumber(&mut self) {
        for (i, c) in self.conns.iter_mut().enumerate() {
            c.id = i as u64;
        }
    }
}

/// Per-connection state kept in the table.
#[derive(Clone, Debug, Default)]
struct State {
    assembly: Assembly,
    found: Option<Found>,
    matched_at: Option<u32>,
    tls: Option<Box<tls::Seen>>,
    app: Option<Box<AppFields>>,
    /// A TLS connection whose ServerHello is still to come: its later buffers are read for it.
    tls_pending: bool,
}

/// Reads `reader` to the end, inspecting each connection's buffers in order until one matches.
pub fn inspect_serial(reader: impl Packets, config: ConnConfig, inspector: &Inspector) -> Result<Summary, IngestError> {
    serial(reader, config, inspector, Hooks::default())
}

/// [`inspect_serial`] of one shard: only the connections whose packets `mine` keeps, judged by a
/// [`Glimpse`] of each packet's connection, are tracked and inspected; every packet is read, and
/// only the shard's are decoded.
/// Connections are numbered by the count of the capture's packets before their first, so that
/// shards' results sorted by id are in the order [`inspect_serial`] numbers them; `packets` and
/// `payload_bytes` count the shard's packets only, `skipped` every packet the reader left out.
pub fn inspect_shard(
    reader: impl Packets,
    config: ConnConfig,
    inspector: &Inspector,
    mine: &mut dyn FnMut(&Glimpse) -> bool,
) -> Result<Summary, IngestError> {
    serial(reader, config, inspector, Hooks { mine: Some(mine), ..Hooks::default() })
}

/// What a caller of the serial loop asks of it beside the verdicts.
#[derive(Default)]
struct Hooks<'h> {
    /// Called after each buffer with its length and the time taken.
    on_scan: Option<&'h mut dyn FnMut(usize, Duration)>,
    /// Called with each connection's protocol as it is matched.
    on_match: Option<&'h mut dyn FnMut(Protocol)>,
    /// Which packets are this shard's.
    mine: Option<&'h mut dyn FnMut(&Glimpse) -> bool>,
}

/// [`inspect_serial`], calling `on_match` with each connection's protocol as it is matched (for
/// a live view of a capture that has no end, `switchyard inspect --interface`).
pub fn inspect_serial_counting(
    reader: impl Packets,
    config: ConnConfig,
    inspector: &Inspector,
    on_match: &mut dyn FnMut(Protocol),
) -> Result<Summary, IngestError> {
    serial(reader, config, inspector, Hooks { on_match: Some(on_match), ..Hooks::default() })
}

/// [`inspect_serial`], calling `on_scan(buffer length, time taken)` after each buffer, timing
/// what a parallel worker does with it: feed the packet to the assembly, then scan (for fitting
/// the simulator's service-time model to the real work). Reading the clock twice a buffer slows
/// the run by about a tenth, so time it only to fit, not to measure throughput.
pub fn inspect_serial_timed(
    reader: impl Packets,
    config: ConnConfig,
    inspector: &Inspector,
    on_scan: &mut dyn FnMut(usize, Duration),
) -> Result<Summary, IngestError> {
    serial(reader, config, inspector, Hooks { on_scan: Some(on_scan), ..Hooks::default() })
}

fn serial(
    mut reader: impl Packets,
    config: ConnConfig,
    inspector: &Inspector,
    hooks: Hooks<'_>,
) -> Result<Summary, IngestError> {
    let Hooks { mut on_scan, mut on_match, mut mine } = hooks;
    let sharded = mine.is_some();
    let mut table: ConnTable<State> = ConnTable::new(config);
    let mut scratch = inspector.scratch();
    let mut s = Summary::default();
    let mut ended = Vec::new();
    // Every packet read, the shard's or not: connections' numbers and the expiry cadence.
    let read = Cell::new(0u64);
    // A shard's packets left to other shards: the time of the one at which the table is due
    // to be swept (every 65,536 packets read, kept or left), if it was left.
    let due = Cell::new(None);
    // A shard glimpses each packet's connection and decodes only its own.
    let leave = |g: &Glimpse, time_ns: u64| {
        let n = read.get() + 1;
        read.set(n);
        let leave = mine.as_mut().is_some_and(|mine| !mine(g));
        if leave && n.is_multiple_of(65_536) {
            // Two sweeps with nothing tracked between them are one at the later time (capture
            // times can go backwards).
            due.set(Some(due.get().map_or(time_ns, |t: u64| t.max(time_ns))));
        }
        leave
    };
    let each = |p: Packet<'_>| {
        if let Some(time_ns) = due.take() {
            table.expire(time_ns);
            ended.extend(table.take_ended());
        }
        if sharded {
            table.number_next(read.get() - 1);
        }
        s.packets += 1;
        s.payload_bytes += p.payload.len() as u64;
        match table.on_packet(&p) {
            Step::Buffer { conn, .. } if conn.data.found.is_some() && !conn.data.tls_pending => {
                s.skipped_classified += 1
            }
            Step::Buffer { conn, from_client, index, .. } => {
                let ports = Ports::of(&conn.key());
                let state = &mut conn.data;
                let started = on_scan.is_some().then(Instant::now);
                state.assembly.push(&config, from_client, p.tcp, p.payload);
                let (buffer, starts) = (state.assembly.buffer(), state.assembly.starts());
                s.inspected += 1;
                s.scanned_bytes += buffer.len() as u64;
                let found = if let Some(seen) = state.tls.as_mut().filter(|_| state.tls_pending) {
                    state.tls_pending = seen.read(buffer, starts);
                    None
                } else {
                    inspector.classify_conn(&mut scratch, buffer, starts, ports)
                };
                if let (Some(on_scan), Some(started)) = (on_scan.as_mut(), started) {
                    on_scan(buffer.len(), started.elapsed());
                }
                if let Some(found) = found {
                    if let Some(on_match) = on_match.as_mut() {
                        on_match(found.protocol);
                    }
                    state.found = Some(found);
                    state.matched_at = Some(index);
                    state.app = app_fields::read(found, buffer, starts, p.tcp.is_some());
                    if found.protocol.name() == "tls" {
                        let mut seen = Box::<tls::Seen>::default();
                        state.tls_pending = seen.read(buffer, starts);
                        state.tls = Some(seen);
                    }
                }
            }
            Step::Beyond { .. } => s.marked += 1,
        }
        if read.get().is_multiple_of(65_536) {
            table.expire(p.time_ns);
            ended.extend(table.take_ended());
        }
        ControlFlow::Continue(())
    };
    reader.for_each_kept(leave, each)?;
    inspector.give_back(scratch);
    s.skipped = reader.skipped();
    ended.extend(table.finish());
    ended.sort_by_key(|c| c.id);
    s.conns = ended
        .into_iter()
        .map(|mut c| {
            let verdict = Verdict::of(c.data.found.map(|f| f.protocol), c.packets, &config);
            let (matched_at, tls, app) = (c.data.matched_at, c.data.tls.take(), c.data.app.take());
            ConnResult { matched_at, app, ..ConnResult::new(c.id, c.key(), c.data.found, verdict, tls) }.counted(&c)
        })
        .collect();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DNSCrypt connection's row names the service, and `dns` beside it as its carrier, the
    /// way a TLS row shows its server name; a protocol carried by nothing else has none.
    #[test]
    fn results_show_the_carrier_beside_a_service_carried_in_dns() {
        let key = FiveTuple::new(17, "10.0.0.2:40000".parse().unwrap(), "192.0.2.53:443".parse().unwrap());
        let named = |name| Verdict::Matched(Protocol::by_name(name).expect("shipped"));
        let conns =
            [ConnResult::new(0, key, None, named("dnscrypt"), None), ConnResult::new(1, key, None, named("dns"), None)];
        let mut out = Vec::new();
        write_results(&conns, &mut out).expect("writes to a Vec");
        let text = String::from_utf8(out).expect("CSV is UTF-8");
        let mut lines = text.lines();
        assert!(lines.next().expect("a header").starts_with("id,proto,client,server,protocol,carrier,evidence,"));
        assert!(lines.next().expect("a row").contains(",dnscrypt,dns,payload,"), "{text}");
        assert!(lines.next().expect("a row").contains(",dns,,payload,"), "{text}");
    }
}
