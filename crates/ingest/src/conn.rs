//! The connection table: packets into connections, each packet numbered within its connection
//! (Guo §2.4: the L7-filter's connection tracking).
//!
//! - A connection is a 5-tuple taken in either direction. Its client is the sender of the first
//!   packet seen.
//! - Only a connection's first [`ConnConfig::max_packets`] packets (8 in the thesis; upstream
//!   l7-filter counts 10) are inspected. Each of those is a [`Step::Buffer`]: feed it to the
//!   connection's [`Assembly`](crate::Assembly) and inspect the buffer as it then stands, which is
//!   the unit the thesis re-queues per packet. Later packets are [`Step::Beyond`].
//! - A connection silent for [`ConnConfig::idle_timeout_ns`] ends; a packet after that starts a
//!   new one.
//!
//! The table only tracks: the bytes are gathered by an [`Assembly`](crate::Assembly), which the
//! caller keeps where it likes. The serial pipeline keeps it in the table's per-connection value
//! (`T`); the parallel one keeps it with the connection's shared state so that workers, not the
//! producer, reassemble. Nothing here decides where work goes.

// The table is an index of 4-byte slot numbers (hashbrown's `HashTable`, foldhash) over a dense
// `Vec` of connections, rather than a map from tuple to connection: a map's entries held the
// 68-byte tuple beside a ~150-byte connection, every growth moved them all, and on a short
// capture the fresh pages each larger table needed cost more than the lookups (80 page faults a
// run of the labelled sample). Reading and tracking the sample, best of 3,000 runs: 143 ns a
// packet with the map, 73 with the index. The index is never iterated into results (ended
// connections are sorted by id), so its order cannot leak.
//
// A connection keeps its tuple as the reader glimpses it (`Key`): an IPv4 connection's two
// endpoints as two words, lower first, and a bit for which one is the client; any other tuple
// boxed. The record then fits a cache line with room for the caller's state, where the 48-byte
// `FiveTuple` (aligned to 16) and its hash made it 144 bytes; a packet is matched in either
// direction by one comparison of two words, where the tuple took two of 48 bytes after
// building the reversed tuple. The producer's work a packet on the labelled sample, the old
// table and this one interleaved in one process: 0.53–0.89 of the old (median 0.77); `bench
// inspect`'s producer alone, five runs of each build in turn: 56–75 ns before, 44–65 after.
use std::hash::BuildHasher;

use hashbrown::{DefaultHashBuilder, HashTable};

use switchyard_core::flow::FiveTuple;

use crate::read::Packet;

/// How much of each connection is buffered, and when one ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnConfig {
    /// Packets per connection that are buffered (Guo: 8).
    pub max_packets: u32,
    /// Bytes per connection buffer (upstream l7-filter: 12,000).
    pub max_bytes: usize,
    /// A connection silent this long has ended.
    pub idle_timeout_ns: u64,
    /// Segments a TCP direction may hold behind a gap.
    pub max_held: usize,
}

impl Default for ConnConfig {
    /// 8 packets, 12,000 bytes, 60 s idle, 32 held segments.
    fn default() -> Self {
        Self { max_packets: 8, max_bytes: 12_000, idle_timeout_ns: 60_000_000_000, max_held: 32 }
    }
}

/// A connection and what has been gathered of it.
#[derive(Clone, Debug)]
pub struct Conn<T> {
    /// Number of the connection, in order of first packet (from 0).
    pub id: u64,
    key: Key,
    /// Capture time of the latest packet.
    pub last_ns: u64,
    /// Capture time of the first packet (the earliest, if capture times go backwards).
    pub first_ns: u64,
    /// Packets seen.
    pub packets: u64,
    /// Payload bytes seen, in both directions, buffered or not.
    pub bytes: u64,
    /// Packets and bytes on the wire each way, for flow records (EVE's `pkts_toserver`, IPFIX's
    /// delta counts): two additions a packet beside the totals above.
    pub sent: Sent,
    /// The caller's state.
    pub data: T,
}

impl<T> Conn<T> {
    /// Client to server: the first packet's direction.
    pub fn key(&self) -> FiveTuple {
        match self.key {
            Key::V4 { proto, client_low, low, high } => {
                let (client, server) = if client_low { (low, high) } else { (high, low) };
                FiveTuple::v4(proto, (client >> 16) as u32, client as u16, (server >> 16) as u32, server as u16)
            }
            Key::Other(ref key) => **key,
        }
    }
}

/// What a connection's two ends sent: packets; bytes as on the wire (each frame's length, link
/// header included, as Suricata's EVE counts them); and bytes of IP datagrams (their headers'
/// lengths, as IPFIX's `octetDeltaCount` and NetFlow collectors count them). Its server's
/// packets are the total less the client's, so only the client's are kept apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Packets from the client.
    pub client_packets: u64,
    /// Wire bytes from the client.
    pub client_wire_bytes: u64,
    /// Wire bytes from the server.
    pub server_wire_bytes: u64,
    /// IP bytes from the client.
    pub client_ip_bytes: u64,
    /// IP bytes from the server.
    pub server_ip_bytes: u64,
}

impl<T> Conn<T> {
    /// Packets from the server: the rest of them.
    pub fn server_packets(&self) -> u64 {
        self.packets - self.sent.client_packets
    }
}

/// A connection's tuple as the table keeps it.
#[derive(Clone, Debug)]
enum Key {
    /// IPv4: each endpoint as its address above its port, the lower first (as
    /// [`Glimpse::V4`](crate::Glimpse::V4) orders them), and whether the lower is the client.
    V4 { proto: u8, client_low: bool, low: u64, high: u64 },
    /// Any other tuple, client to server, boxed so that IPv4's records stay small.
    Other(Box<FiveTuple>),
}

/// A packet's tuple, put as the table compares it.
enum Probe {
    /// The packet's endpoints ordered, and whether its source is the lower.
    V4 { proto: u8, src_low: bool, low: u64, high: u64 },
    /// The packet's tuple and its reverse.
    Other { key: FiveTuple, reversed: FiveTuple },
}

impl Probe {
    #[inline]
    fn of(key: &FiveTuple) -> Self {
        match key.v4_parts() {
            Some((proto, src, sport, dst, dport)) => {
                let a = u64::from(src) << 16 | u64::from(sport);
                let b = u64::from(dst) << 16 | u64::from(dport);
                Self::V4 { proto, src_low: a <= b, low: a.min(b), high: a.max(b) }
            }
            None => Self::Other { key: *key, reversed: key.reversed() },
        }
    }

    /// Whether the connection keyed `key` is this packet's, and if so whether the packet went
    /// from its client.
    #[inline]
    fn matches(&self, key: &Key) -> Option<bool> {
        match (self, key) {
            (Self::V4 { proto, src_low, low, high }, Key::V4 { proto: p, client_low, low: l, high: h }) => {
                (low == l && high == h && proto == p).then_some(src_low == client_low)
            }
            (Self::Other { key, reversed }, Key::Other(k)) => {
                // A tuple that is its own reverse matches both ways: its packets are the client's.
                if **k == *key { Some(true) } else { (**k == *reversed).then_some(false) }
            }
            _ => None,
        }
    }

    /// The key of a connection this packet starts.
    fn key(&self) -> Key {
        match *self {
            Self::V4 { proto, src_low, low, high } => Key::V4 { proto, client_low: src_low, low, high },
            Self::Other { key, .. } => Key::Other(Box::new(key)),
        }
    }

    fn hash(&self, hasher: &DefaultHashBuilder) -> u64 {
        match self {
            Self::V4 { proto, low, high, .. } => hasher.hash_one((*low, *high, *proto)),
            Self::Other { key, .. } => hasher.hash_one(key.undirected()),
        }
    }
}

impl Key {
    /// The same hash a [`Probe`] of one of the connection's packets has.
    fn hash(&self, hasher: &DefaultHashBuilder) -> u64 {
        match self {
            Self::V4 { proto, low, high, .. } => hasher.hash_one((*low, *high, *proto)),
            Self::Other(key) => hasher.hash_one(key.undirected()),
        }
    }
}

/// What a packet was to its connection.
#[derive(Debug)]
pub enum Step<'a, T> {
    /// One of the connection's first packets: feed it to the connection's assembly and inspect
    /// the buffer as it then stands. `index` counts the connection's packets from 0.
    Buffer {
        /// The connection.
        conn: &'a mut Conn<T>,
        /// Which of its packets this was.
        index: u32,
        /// A new connection started with this packet.
        new: bool,
        /// The packet went from the client to the server.
        from_client: bool,
    },
    /// A later packet: nothing to inspect.
    Beyond {
        /// The connection.
        conn: &'a mut Conn<T>,
    },
}

/// Connections a new table has room for: growing from empty to a thousand connections re-hashed
/// the index and moved the records ten times, 0.73–0.86 of the table's time on the labelled
/// sample's 500 connections (interleaved runs). Room that is not used costs nothing until touched.
const INITIAL_CAPACITY: usize = 1024;

/// Connections by 5-tuple.
#[derive(Debug)]
pub struct ConnTable<T> {
    config: ConnConfig,
    /// Live connections, in no particular order.
    live: Vec<Conn<T>>,
    /// Positions in `live`, by the hash of the connection's undirected tuple.
    index: HashTable<u32>,
    hasher: DefaultHashBuilder,
    next_id: u64,
    ended: Vec<Conn<T>>,
}

impl<T: Default> ConnTable<T> {
    /// An empty table.
    pub fn new(config: ConnConfig) -> Self {
        Self::with_capacity(config, INITIAL_CAPACITY)
    }

    /// An empty table with room for `n` connections.
    fn with_capacity(config: ConnConfig, n: usize) -> Self {
        Self {
            config,
            live: Vec::with_capacity(n),
            index: HashTable::with_capacity(n),
            hasher: DefaultHashBuilder::default(),
            next_id: 0,
            ended: Vec::new(),
        }
    }

    /// Live connections.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether no connection is live.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Numbers the next connection made `id`, and those after it on from there. A reader that
    /// tracks only some of a capture's connections (a shard) numbers each by the capture's
    /// count of packets before its first, so that shards' numbers merge into the order a table
    /// of every connection gives.
    pub fn number_next(&mut self, id: u64) {
        self.next_id = id;
    }

    /// Takes in a packet.
    pub fn on_packet(&mut self, p: &Packet<'_>) -> Step<'_, T> {
        let cfg = self.config;
        let probe = Probe::of(&p.key);
        let hash = probe.hash(&self.hasher);
        let fresh = |id| Conn {
            id,
            key: probe.key(),
            last_ns: p.time_ns,
            first_ns: p.time_ns,
            packets: 0,
            bytes: 0,
            sent: Sent::default(),
            data: T::default(),
        };
        // One lookup per packet: the table is the producer's hottest structure.
        let live = &self.live;
        let mut from_client = true;
        let found = self.index.find(hash, |&i| match probe.matches(&live[i as usize].key) {
            Some(fc) => {
                from_client = fc;
                true
            }
            None => false,
        });
        let mut new = true;
        let conn = match found {
            Some(&i) => {
                let conn = &mut self.live[i as usize];
                if p.time_ns.saturating_sub(conn.last_ns) > cfg.idle_timeout_ns {
                    // Silent too long: that connection ended, and this packet starts another,
                    // whose client is this packet's sender.
                    let old = std::mem::replace(conn, fresh(self.next_id));
                    self.next_id += 1;
                    self.ended.push(old);
                    from_client = true;
                } else {
                    new = false;
                }
                conn
            }
            None => {
                let i = u32::try_from(self.live.len()).expect("fewer than 2^32 live connections");
                let (live, hasher) = (&self.live, &self.hasher);
                self.index.insert_unique(hash, i, |&j| live[j as usize].key.hash(hasher));
                self.live.push(fresh(self.next_id));
                self.next_id += 1;
                &mut self.live[i as usize]
            }
        };
        conn.last_ns = conn.last_ns.max(p.time_ns);
        conn.first_ns = conn.first_ns.min(p.time_ns);
        conn.bytes += p.payload.len() as u64;
        let (wire, ip) = (u64::from(p.wire_len), u64::from(p.ip_len));
        if from_client {
            conn.sent.client_packets += 1;
            conn.sent.client_wire_bytes += wire;
            conn.sent.client_ip_bytes += ip;
        } else {
            conn.sent.server_wire_bytes += wire;
            conn.sent.server_ip_bytes += ip;
        }
        let index = conn.packets;
        conn.packets += 1;
        if index >= u64::from(cfg.max_packets) {
            return Step::Beyond { conn };
        }
        Step::Buffer { conn, index: index as u32, new, from_client }
    }

    /// Ends connections silent since before `now − idle_timeout`, and reset ones; they come back
    /// from [`ConnTable::take_ended`].
    pub fn expire(&mut self, now_ns: u64) {
        let timeout = self.config.idle_timeout_ns;
        // From the back, so that the connection moved into each freed place is one already kept.
        for i in (0..self.live.len()).rev() {
            if now_ns.saturating_sub(self.live[i].last_ns) > timeout {
                let conn = self.remove(i);
                self.ended.push(conn);
            }
        }
    }

    /// Takes the connection at `i` out of `live` and the index; the last connection moves into
    /// its place.
    fn remove(&mut self, i: usize) -> Conn<T> {
        let last = self.live.len() - 1;
        let hash = self.live[i].key.hash(&self.hasher);
        let entry = self.index.find_entry(hash, |&j| j as usize == i).expect("every live connection is indexed");
        entry.remove();
        if i != last {
            let moved = self.live[last].key.hash(&self.hasher);
            *self.index.find_mut(moved, |&j| j as usize == last).expect("every live connection is indexed") = i as u32;
        }
        self.live.swap_remove(i)
    }

    /// Connections that have ended, in the order of their ids.
    pub fn take_ended(&mut self) -> Vec<Conn<T>> {
        let mut ended = std::mem::take(&mut self.ended);
        ended.sort_by_key(|c| c.id);
        ended
    }

    /// Ends every connection (at the end of a capture) and returns all that have ended, in the
    /// order of their ids.
    pub fn finish(&mut self) -> Vec<Conn<T>> {
        self.index.clear();
        self.ended.append(&mut self.live);
        self.take_ended()
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::Assembly;
    use crate::decode::Tcp;

    fn packet<'a>(t: u64, from_client: bool, seq: u32, payload: &'a [u8]) -> Packet<'a> {
        let (c, s) = ("10.0.0.1:40000".parse().unwrap(), "10.0.0.2:80".parse().unwrap());
        let key = if from_client { FiveTuple::new(6, c, s) } else { FiveTuple::new(6, s, c) };
        Packet {
            time_ns: t,
            key,
            wire_len: 60,
            ip_len: 40 + payload.len() as u32,
            payload,
            tcp: Some(Tcp { seq, ..Tcp::default() }),
        }
    }

    #[test]
    fn the_buffer_reads_as_the_conversation_and_stops_at_the_packet_limit() {
        let config = ConnConfig { max_packets: 3, ..ConnConfig::default() };
        let mut table: ConnTable<Assembly> = ConnTable::new(config);
        let steps = [
            packet(1, true, 100, b"GET / HTTP/1.1\r\n"),
            packet(2, false, 900, b"HTTP/1.1 200 OK\r\n"),
            packet(3, true, 116, b"Host: x\r\n"),
            packet(4, true, 125, b"ignored"),
        ];
        let mut seen = Vec::new();
        for p in &steps {
            match table.on_packet(p) {
                Step::Buffer { conn, index, new, from_client } => {
                    conn.data.push(&config, from_client, p.tcp, p.payload);
                    seen.push((index, new, conn.data.buffer().len()));
                }
                Step::Beyond { conn } => assert_eq!(conn.packets, 4),
            }
        }
        assert_eq!(seen, [(0, true, 16), (1, false, 33), (2, false, 42)]);
        let done = table.finish();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].data.buffer(), &b"GET / HTTP/1.1\r\nHTTP/1.1 200 OK\r\nHost: x\r\n"[..]);
        assert_eq!(done[0].key().dst().port(), 80, "the client is the first packet's sender");
    }

    /// Each direction's packets and wire bytes are counted apart, past the inspected packets
    /// too, and the connection's first and last times span all of them: what a flow record
    /// (EVE, IPFIX) reports.
    #[test]
    fn each_direction_is_counted_apart_for_flow_records() {
        let config = ConnConfig { max_packets: 2, ..ConnConfig::default() };
        let mut table: ConnTable<()> = ConnTable::new(config);
        let mut big = packet(7, true, 200, b"later");
        (big.wire_len, big.ip_len) = (1514, 1500);
        for p in [packet(5, true, 100, b"a"), packet(6, false, 900, b"bb"), big, packet(9, false, 902, b"")] {
            table.on_packet(&p);
        }
        let done = table.finish();
        let c = &done[0];
        assert_eq!((c.first_ns, c.last_ns), (5, 9));
        assert_eq!((c.sent.client_packets, c.server_packets()), (2, 2));
        assert_eq!((c.sent.client_wire_bytes, c.sent.server_wire_bytes), (60 + 1514, 60 + 60));
        assert_eq!(
            (c.sent.client_ip_bytes, c.sent.server_ip_bytes),
            (41 + 1500, 42 + 40),
            "IP bytes apart from the frames'"
        );
    }

    #[test]
    fn an_idle_connection_ends_and_its_tuple_starts_a_new_one() {
        let cfg = ConnConfig { idle_timeout_ns: 10, ..ConnConfig::default() };
        let mut table: ConnTable<u8> = ConnTable::new(cfg);
        let _ = table.on_packet(&packet(0, true, 0, b"a"));
        let Step::Buffer { new, conn, .. } = table.on_packet(&packet(100, true, 1, b"b")) else { panic!() };
        assert!(new);
        assert_eq!(conn.id, 1);
        table.expire(1_000);
        let ended = table.take_ended();
        assert_eq!(ended.iter().map(|c| c.id).collect::<Vec<_>>(), [0, 1]);
        assert!(table.is_empty());
    }

    /// The table against a plain model (a list of live connections searched in order): same
    /// connection ids, packet numbers and directions for every packet, and the same connections
    /// ended, under random traffic over a few tuples, idle gaps and expiry sweeps (which move
    /// connections inside the table).
    mod model {
        use std::net::Ipv6Addr;

        use proptest::prelude::*;

        use super::*;

        struct Model {
            live: Vec<(FiveTuple, u64, u64, u64)>, // key, id, last, packets
            next_id: u64,
            ended: Vec<u64>,
        }

        impl Model {
            fn on_packet(&mut self, p: &Packet<'_>, cfg: &ConnConfig) -> (u64, u64, bool, FiveTuple) {
                let u = p.key.undirected();
                let at = self.live.iter().position(|c| c.0.undirected() == u);
                let at = match at {
                    Some(i) if p.time_ns.saturating_sub(self.live[i].2) > cfg.idle_timeout_ns => {
                        self.ended.push(self.live[i].1);
                        self.live[i] = (p.key, self.next_id, p.time_ns, 0);
                        self.next_id += 1;
                        i
                    }
                    Some(i) => i,
                    None => {
                        self.live.push((p.key, self.next_id, p.time_ns, 0));
                        self.next_id += 1;
                        self.live.len() - 1
                    }
                };
                let c = &mut self.live[at];
                c.2 = c.2.max(p.time_ns);
                c.3 += 1;
                (c.1, c.3 - 1, p.key == c.0, c.0)
            }

            fn expire(&mut self, now: u64, cfg: &ConnConfig) {
                let (gone, kept): (Vec<_>, Vec<_>) =
                    self.live.drain(..).partition(|c| now.saturating_sub(c.2) > cfg.idle_timeout_ns);
                self.ended.extend(gone.iter().map(|c| c.1));
                self.live = kept;
            }
        }

        proptest! {
            #[test]
            fn the_table_numbers_packets_as_a_plain_list_does(
                steps in proptest::collection::vec((0u8..12, proptest::bool::ANY, 0u64..30, 0u8..8), 1..200),
            ) {
                let cfg = ConnConfig { max_packets: 3, idle_timeout_ns: 40, ..ConnConfig::default() };
                let mut table: ConnTable<()> = ConnTable::new(cfg);
                let mut model = Model { live: Vec::new(), next_id: 0, ended: Vec::new() };
                let mut now = 0;
                for (tuple, reverse, gap, sweep) in steps {
                    now += gap;
                    // IPv4 and IPv6 tuples, and one whose ends are the same (its own reverse).
                    let (a, b): (SocketAddr, SocketAddr) = match tuple {
                        0..=6 => (
                            SocketAddr::from(([10, 0, 0, tuple % 4], 1000 + u16::from(tuple))),
                            SocketAddr::from(([10, 0, 1, 1], 80)),
                        ),
                        7..=10 => (
                            SocketAddr::from((Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, u16::from(tuple % 2)), 1000 + u16::from(tuple))),
                            SocketAddr::from((Ipv6Addr::LOCALHOST, 80)),
                        ),
                        _ => (SocketAddr::from(([10, 0, 0, 1], 80)), SocketAddr::from(([10, 0, 0, 1], 80))),
                    };
                    let key = if reverse {
                        FiveTuple::new(6, b, a)
                    } else {
                        FiveTuple::new(6, a, b)
                    };
                    let p = Packet { time_ns: now, key, wire_len: 60, ip_len: 29, payload: b"x", tcp: None };
                    let want = model.on_packet(&p, &cfg);
                    let got = match table.on_packet(&p) {
                        Step::Buffer { conn, index, from_client, .. } => (conn.id, u64::from(index), from_client, conn.key()),
                        Step::Beyond { conn } => (conn.id, conn.packets - 1, p.key == conn.key(), conn.key()),
                    };
                    prop_assert_eq!(got, want);
                    if sweep == 0 {
                        table.expire(now);
                        model.expire(now, &cfg);
                    }
                    prop_assert_eq!(table.len(), model.live.len());
                }
                let mut ended: Vec<u64> = table.finish().iter().map(|c| c.id).collect();
                let mut want = model.ended;
                want.extend(model.live.iter().map(|c| c.1));
                ended.sort_unstable();
                want.sort_unstable();
                prop_assert_eq!(ended, want);
            }
        }
    }
}
