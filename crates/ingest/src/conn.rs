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

// hashbrown's default hasher (foldhash) rather than std's SipHash: the table is looked up once
// per packet, and SipHash was 8% of the producer's time. The map is never iterated into
// results (ended connections are sorted by id), so its order cannot leak.
use hashbrown::HashMap;
use hashbrown::hash_map::Entry;

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
    /// Client to server: the first packet's direction.
    pub key: FiveTuple,
    /// Capture time of the first packet.
    pub first_ns: u64,
    /// Capture time of the latest packet.
    pub last_ns: u64,
    /// Packets seen.
    pub packets: u64,
    /// Payload bytes seen, in both directions, buffered or not.
    pub bytes: u64,
    /// The caller's state.
    pub data: T,
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

/// Connections by 5-tuple.
#[derive(Debug)]
pub struct ConnTable<T> {
    config: ConnConfig,
    conns: HashMap<FiveTuple, Conn<T>>,
    next_id: u64,
    ended: Vec<Conn<T>>,
}

impl<T: Default> ConnTable<T> {
    /// An empty table.
    pub fn new(config: ConnConfig) -> Self {
        Self { config, conns: HashMap::new(), next_id: 0, ended: Vec::new() }
    }

    /// Live connections.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Whether no connection is live.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Takes in a packet.
    pub fn on_packet(&mut self, p: &Packet<'_>) -> Step<'_, T> {
        let cfg = self.config;
        let undirected = p.key.undirected();
        let fresh = |id| Conn {
            id,
            key: p.key,
            first_ns: p.time_ns,
            last_ns: p.time_ns,
            packets: 0,
            bytes: 0,
            data: T::default(),
        };
        // One lookup per packet: the table is the producer's hottest structure.
        let mut new = true;
        let conn = match self.conns.entry(undirected) {
            Entry::Occupied(e) => {
                let conn = e.into_mut();
                if p.time_ns.saturating_sub(conn.last_ns) > cfg.idle_timeout_ns {
                    // Silent too long: that connection ended, and this packet starts another.
                    let old = std::mem::replace(conn, fresh(self.next_id));
                    self.next_id += 1;
                    self.ended.push(old);
                } else {
                    new = false;
                }
                conn
            }
            Entry::Vacant(e) => {
                self.next_id += 1;
                e.insert(fresh(self.next_id - 1))
            }
        };
        conn.last_ns = conn.last_ns.max(p.time_ns);
        conn.bytes += p.payload.len() as u64;
        let index = conn.packets;
        conn.packets += 1;
        if index >= u64::from(cfg.max_packets) {
            return Step::Beyond { conn };
        }
        let from_client = p.key == conn.key;
        Step::Buffer { conn, index: index as u32, new, from_client }
    }

    /// Ends connections silent since before `now − idle_timeout`, and reset ones; they come back
    /// from [`ConnTable::take_ended`].
    pub fn expire(&mut self, now_ns: u64) {
        let timeout = self.config.idle_timeout_ns;
        let idle: Vec<FiveTuple> =
            self.conns.iter().filter(|(_, c)| now_ns.saturating_sub(c.last_ns) > timeout).map(|(k, _)| *k).collect();
        for k in idle {
            if let Some(c) = self.conns.remove(&k) {
                self.ended.push(c);
            }
        }
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
        self.ended.extend(self.conns.drain().map(|(_, c)| c));
        self.take_ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Assembly;
    use crate::decode::Tcp;

    fn packet<'a>(t: u64, from_client: bool, seq: u32, payload: &'a [u8]) -> Packet<'a> {
        let (c, s) = ("10.0.0.1:40000".parse().unwrap(), "10.0.0.2:80".parse().unwrap());
        let key =
            if from_client { FiveTuple { proto: 6, src: c, dst: s } } else { FiveTuple { proto: 6, src: s, dst: c } };
        Packet { time_ns: t, key, wire_len: 60, payload, tcp: Some(Tcp { seq, ..Tcp::default() }) }
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
        assert_eq!(done[0].key.dst.port(), 80, "the client is the first packet's sender");
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
}
