//! Impairments of single connections on top of the link, for tests that must break one TCP
//! connection of several without touching the others: its packets dropped from now on
//! (silenced: TCP sees nothing, not even a close, and retries for minutes), held back
//! (slowed), or the connection reset (an RST forged to each end, as a middlebox that kills a
//! connection does).
//!
//! A connection is named by one of its ports, which a test finds among the connections the
//! link has carried ([`Impairments::connections`]). Only IPv4 TCP is looked at; anything else
//! passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

/// What happens to a connection's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impairment {
    /// Dropped, both ways, until cleared.
    Silence,
    /// Each held back this much before it enters the link, both ways, until cleared.
    Slow(Duration),
    /// At its next packet (which is dropped), an RST is forged to each end; then cleared.
    Reset,
}

/// A TCP connection the link has carried, by its ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conn {
    /// The lower-addressed side's port (see [`Conn::of`]).
    pub a: u16,
    /// The other side's port.
    pub b: u16,
}

impl Conn {
    /// Whether either side uses `port`.
    pub fn has(&self, port: u16) -> bool {
        self.a == port || self.b == port
    }
}

/// What to do with one packet.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Pass,
    Drop,
    Delay(Duration),
    /// Drop it, and write these to the side it came from and the side it was going to.
    Reset {
        to_source: Vec<u8>,
        to_destination: Vec<u8>,
    },
}

#[derive(Debug, Default)]
struct State {
    rules: HashMap<u16, Impairment>,
    seen: HashMap<Conn, Instant>,
    dropped: u64,
    resets: u64,
}

/// The impairments in force, shared between a test and the link's forwarder.
#[derive(Clone, Debug, Default)]
pub struct Impairments {
    state: Arc<Mutex<State>>,
}

/// TCP header fields an impairment needs.
struct Tcp {
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    seq: u32,
    ack: u32,
    rst: bool,
}

fn tcp_of(packet: &[u8]) -> Option<Tcp> {
    let sliced = SlicedPacket::from_ip(packet).ok()?;
    let Some(NetSlice::Ipv4(ip)) = sliced.net else { return None };
    let Some(TransportSlice::Tcp(tcp)) = sliced.transport else { return None };
    let h = ip.header();
    Some(Tcp {
        src: (h.source(), tcp.source_port()),
        dst: (h.destination(), tcp.destination_port()),
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        rst: tcp.rst(),
    })
}

/// An RST from `from` to `to` with sequence number `seq`.
fn rst(from: ([u8; 4], u16), to: ([u8; 4], u16), seq: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(40);
    PacketBuilder::ipv4(from.0, to.0, 64)
        .tcp(from.1, to.1, seq, 0)
        .rst()
        .write(&mut out, &[])
        .expect("writing to a Vec cannot fail");
    out
}

impl Impairments {
    /// No impairments.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("no thread panics holding it")
    }

    /// From now on, `what` for the connection with a side on `port`.
    pub fn set(&self, port: u16, what: Impairment) {
        self.state().rules.insert(port, what);
    }

    /// Ends the impairment of the connection on `port`.
    pub fn clear(&self, port: u16) {
        self.state().rules.remove(&port);
    }

    /// Ends every impairment.
    pub fn clear_all(&self) {
        self.state().rules.clear();
    }

    /// TCP connections with a packet in the last `within`, each once.
    pub fn connections(&self, within: Duration) -> Vec<Conn> {
        let now = Instant::now();
        let mut v: Vec<Conn> =
            self.state().seen.iter().filter(|(_, t)| now.duration_since(**t) <= within).map(|(c, _)| *c).collect();
        v.sort_by_key(|c| (c.a, c.b));
        v
    }

    /// Packets dropped by impairments, and connections reset.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.state();
        (s.dropped, s.resets)
    }

    /// Judges one packet on its way through the link.
    pub(crate) fn judge(&self, packet: &[u8]) -> Verdict {
        let Some(tcp) = tcp_of(packet) else { return Verdict::Pass };
        let conn =
            if tcp.src <= tcp.dst { Conn { a: tcp.src.1, b: tcp.dst.1 } } else { Conn { a: tcp.dst.1, b: tcp.src.1 } };
        let mut s = self.state();
        s.seen.insert(conn, Instant::now());
        if s.seen.len() > 4096 {
            // A long run makes many connections: the oldest are forgotten.
            let now = Instant::now();
            s.seen.retain(|_, t| now.duration_since(*t) < Duration::from_secs(10));
        }
        let rule = s.rules.get(&conn.a).or_else(|| s.rules.get(&conn.b)).copied();
        match rule {
            None => Verdict::Pass,
            Some(Impairment::Silence) => {
                s.dropped += 1;
                Verdict::Drop
            }
            Some(Impairment::Slow(d)) => Verdict::Delay(d),
            // An RST in flight is left alone (it is the end the rule asked for).
            Some(Impairment::Reset) if tcp.rst => Verdict::Pass,
            Some(Impairment::Reset) => {
                s.rules.remove(&conn.a);
                s.rules.remove(&conn.b);
                s.resets += 1;
                s.dropped += 1;
                // The source expects `ack` next from the destination, and the destination
                // expects `seq` from the source (exactly, once what went before has arrived;
                // within its window otherwise, and the source's kernel resets it on its next
                // packet anyway, having no connection left).
                Verdict::Reset {
                    to_source: rst(tcp.dst, tcp.src, tcp.ack),
                    to_destination: rst(tcp.src, tcp.dst, tcp.seq),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(sport: u16, dport: u16, seq: u32, ack: u32) -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(sport, dport, seq, 1000)
            .ack(ack)
            .write(&mut out, b"payload")
            .unwrap();
        out
    }

    #[test]
    fn impairments_apply_to_the_named_connection_only_and_a_reset_fires_once() {
        let imp = Impairments::new();
        assert_eq!(imp.judge(&packet(40000, 7100, 1, 2)), Verdict::Pass);
        assert_eq!(imp.judge(&packet(40001, 7100, 1, 2)), Verdict::Pass);
        assert_eq!(imp.connections(Duration::from_secs(1)).len(), 2);
        imp.set(40000, Impairment::Silence);
        assert_eq!(imp.judge(&packet(40000, 7100, 1, 2)), Verdict::Drop);
        assert_eq!(imp.judge(&packet(7100, 40000, 1, 2)), Verdict::Drop, "both ways");
        assert_eq!(imp.judge(&packet(40001, 7100, 1, 2)), Verdict::Pass);
        imp.set(40000, Impairment::Slow(Duration::from_millis(30)));
        assert_eq!(imp.judge(&packet(40000, 7100, 1, 2)), Verdict::Delay(Duration::from_millis(30)));
        imp.set(40001, Impairment::Reset);
        let Verdict::Reset { to_source, to_destination } = imp.judge(&packet(40001, 7100, 500, 900)) else {
            panic!("a reset")
        };
        let back = tcp_of(&to_source).unwrap();
        assert_eq!((back.src.1, back.dst.1, back.seq, back.rst), (7100, 40001, 900, true));
        let on = tcp_of(&to_destination).unwrap();
        assert_eq!((on.src.1, on.dst.1, on.seq, on.rst), (40001, 7100, 500, true));
        assert_eq!(imp.judge(&packet(40001, 7100, 507, 900)), Verdict::Pass, "once");
        assert_eq!(imp.counts(), (3, 1));
        // Not TCP, or not a packet at all: passes.
        assert_eq!(imp.judge(b"not a packet"), Verdict::Pass);
    }
}
