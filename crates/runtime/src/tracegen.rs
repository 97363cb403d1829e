//! Labelled captures: connections of known protocols, written as a pcap with the ground truth
//! beside it, so classification can be checked and placement measured on realistic traffic.
//!
//! Each connection is one protocol of [`crate::inspect::SIGNATURES`] (the UDP ones as datagrams,
//! the rest as TCP with a three-way handshake and a closing FIN). It opens with that protocol's
//! opening message from [`crate::inspect::samples`] — sent by the server first for the protocols
//! whose servers speak first — and the other side answers with filler. Then comes bulk data: a
//! heavy-tailed number of full-size segments (Pareto, shape 1.2), mostly from the server.
//! With `elephants` > 0, that fraction of connections carries 20 times as many (the skewed trace
//! on which static hashing overloads some workers). Connections start as a Poisson process and
//! packets within one follow at exponential gaps. Everything is drawn from one seeded ChaCha
//! stream: the same spec gives the same bytes.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Pareto};
use thiserror::Error;

use crate::inspect::samples::openings;
use crate::inspect::{Opens, Over};

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSpec {
    /// Connections.
    pub connections: u32,
    /// Connections started per second.
    pub rate: f64,
    /// Fraction of connections that are elephants (20× the bulk data).
    pub elephants: f64,
    /// Most bulk packets in one (non-elephant) connection.
    pub max_bulk: u32,
    /// Seed.
    pub seed: u64,
}

impl Default for TraceSpec {
    /// 1,000 connections at 2,000 per second, no elephants, at most 40 bulk packets each.
    fn default() -> Self {
        Self { connections: 1_000, rate: 2_000.0, elephants: 0.0, max_bulk: 40, seed: 1 }
    }
}

/// The ground truth of one connection.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Label {
    /// Number of the connection, in order of its first packet.
    pub id: u64,
    /// IP protocol (6 TCP, 17 UDP).
    pub proto: u8,
    /// Client address.
    pub client: SocketAddr,
    /// Server address.
    pub server: SocketAddr,
    /// What the inspector should name.
    pub protocol: &'static str,
    /// Packets in the connection.
    pub packets: u64,
    /// Whether it was drawn as an elephant.
    pub elephant: bool,
}

/// Why a trace could not be written.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum TraceGenError {
    /// The spec is out of range.
    #[error("bad trace spec: {0}")]
    Spec(String),
    /// Writing failed.
    #[error("cannot write the capture: {0}")]
    Write(String),
}

/// Whether `protocol` is carried over UDP, its server speaks first, and its port: from its
/// signature (TCP where it runs over both).
fn shape(protocol: &str) -> (bool, bool, u16) {
    let s = crate::inspect::Protocol::by_name(protocol).expect("openings name shipped protocols").signature();
    (s.over == Over::Udp, s.opens == Opens::Server, s.ports[0])
}

struct Frame {
    at_us: u64,
    bytes: Vec<u8>,
}

/// One side's next TCP sequence number.
struct Side {
    addr: SocketAddrV4,
    seq: u32,
}

fn tcp_frame(from: &mut Side, to: &Side, syn: bool, fin: bool, payload: &[u8]) -> Vec<u8> {
    let mut b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(from.addr.ip().octets(), to.addr.ip().octets(), 64)
        .tcp(from.addr.port(), to.addr.port(), from.seq, 64_240)
        .ack(to.seq);
    if syn {
        b = b.syn();
    }
    if fin {
        b = b.fin();
    }
    let mut out = Vec::with_capacity(payload.len() + 54);
    b.write(&mut out, payload).expect("writing to a Vec cannot fail");
    from.seq = from.seq.wrapping_add(payload.len() as u32 + u32::from(syn) + u32::from(fin));
    out
}

fn udp_frame(from: SocketAddrV4, to: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 42);
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ipv4(from.ip().octets(), to.ip().octets(), 64)
        .udp(from.port(), to.port())
        .write(&mut out, payload)
        .expect("writing to a Vec cannot fail");
    out
}

/// Writes a capture of `spec` to `out` and returns its labels, in connection order.
pub fn generate(spec: &TraceSpec, out: impl Write) -> Result<Vec<Label>, TraceGenError> {
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !positive(spec.rate) || !(0.0..=1.0).contains(&spec.elephants) || spec.max_bulk == 0 {
        return Err(TraceGenError::Spec(format!(
            "rate {} (> 0), elephants {} (0 to 1), max_bulk {} (≥ 1)",
            spec.rate, spec.elephants, spec.max_bulk
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let starts = Exp::new(spec.rate).expect("checked positive");
    let gaps = Exp::new(1.0 / 0.0005).expect("positive");
    let bulk = Pareto::new(1.0, 1.2).expect("positive");
    // One opening per protocol: the first listed for it.
    let mut kinds: Vec<(&'static str, Vec<u8>)> = Vec::new();
    for (name, bytes) in openings() {
        if !kinds.iter().any(|(n, _)| *n == name) {
            kinds.push((name, bytes));
        }
    }
    let mut frames: Vec<Frame> = Vec::new();
    let mut labels = Vec::with_capacity(spec.connections as usize);
    let mut t = 1_700_000_000.0_f64;
    for i in 0..spec.connections {
        t += starts.sample(&mut rng);
        let (protocol, opening) = &kinds[rng.random_range(0..kinds.len())];
        let elephant = rng.random::<f64>() < spec.elephants;
        let base = ((bulk.sample(&mut rng) - 1.0) as u32).min(spec.max_bulk);
        let n_bulk = if elephant { base.max(1) * 20 } else { base };
        let client = SocketAddrV4::new(Ipv4Addr::new(10, 1, (i >> 8) as u8, i as u8), 32_768 + (i % 28_000) as u16);
        let (udp, server_first, port) = shape(protocol);
        let server = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1 + (i % 200) as u8), port);
        let mut at = t;
        let start = frames.len();
        let mut push = |at: &mut f64, bytes: Vec<u8>, rng: &mut ChaCha8Rng| {
            frames.push(Frame { at_us: (*at * 1e6) as u64, bytes });
            *at += gaps.sample(rng);
        };
        if udp {
            push(&mut at, udp_frame(client, server, opening), &mut rng);
            for k in 0..n_bulk.min(4) {
                let reply = vec![b'r'; 64 + (k as usize * 37) % 400];
                push(&mut at, udp_frame(server, client, &reply), &mut rng);
            }
        } else {
            let mut c = Side { addr: client, seq: rng.random() };
            let mut s = Side { addr: server, seq: rng.random() };
            let syn = tcp_frame(&mut c, &s, true, false, &[]);
            push(&mut at, syn, &mut rng);
            let synack = tcp_frame(&mut s, &c, true, false, &[]);
            push(&mut at, synack, &mut rng);
            let ack = tcp_frame(&mut c, &s, false, false, &[]);
            push(&mut at, ack, &mut rng);
            let filler = b"\x00filler-reply-\x00\x01\x02".to_vec();
            let (first, second) = if server_first {
                (tcp_frame(&mut s, &c, false, false, opening), tcp_frame(&mut c, &s, false, false, &filler))
            } else {
                (tcp_frame(&mut c, &s, false, false, opening), tcp_frame(&mut s, &c, false, false, &filler))
            };
            push(&mut at, first, &mut rng);
            push(&mut at, second, &mut rng);
            let body = vec![b'x'; 1448];
            for k in 0..n_bulk {
                let f = if k % 8 == 7 {
                    tcp_frame(&mut c, &s, false, false, &body[..100])
                } else {
                    tcp_frame(&mut s, &c, false, false, &body)
                };
                push(&mut at, f, &mut rng);
            }
            let fin = tcp_frame(&mut c, &s, false, true, &[]);
            push(&mut at, fin, &mut rng);
        }
        labels.push(Label {
            id: u64::from(i),
            proto: if udp { 17 } else { 6 },
            client: SocketAddr::V4(client),
            server: SocketAddr::V4(server),
            protocol,
            packets: (frames.len() - start) as u64,
            elephant,
        });
    }
    frames.sort_by_key(|f| f.at_us);
    let header = PcapHeader { datalink: DataLink::ETHERNET, ..PcapHeader::default() };
    let err = |e: pcap_file::PcapError| TraceGenError::Write(e.to_string());
    let mut w = PcapWriter::with_header(out, header).map_err(err)?;
    for f in &frames {
        w.write_packet(&PcapPacket::new(Duration::from_micros(f.at_us), f.bytes.len() as u32, &f.bytes))
            .map_err(err)?;
    }
    Ok(labels)
}

/// Writes the labels as CSV, one row per connection, with a header of the field names.
pub fn write_labels(labels: &[Label], out: impl Write) -> Result<(), TraceGenError> {
    let mut w = csv::Writer::from_writer(out);
    for l in labels {
        w.serialize(l).map_err(|e| TraceGenError::Write(e.to_string()))?;
    }
    w.flush().map_err(|e| TraceGenError::Write(e.to_string()))
}

/// A labels file that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// A row is not `client` and `protocol` columns (with a header), or the file cannot be read.
    #[error("row {row}")]
    Row {
        /// The row, counting the header as row 1.
        row: usize,
        /// The reader's reason.
        source: csv::Error,
    },
}

/// Verdicts checked against labels ([`check_labels`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelCheck {
    /// Labelled connections checked.
    pub checked: usize,
    /// A sentence per labelled connection not named as labelled (or not in the capture).
    pub missed: Vec<String>,
}

/// Compares verdicts with a labels CSV as [`generate`] writes it (its `client` and `protocol`
/// columns; others are ignored).
pub fn check_labels(conns: &[crate::serial::ConnResult], labels: impl std::io::Read) -> Result<LabelCheck, LabelError> {
    #[derive(serde::Deserialize)]
    struct Row {
        client: String,
        protocol: String,
    }
    let by_client: std::collections::BTreeMap<String, &crate::serial::ConnResult> =
        conns.iter().map(|c| (c.key.src().to_string(), c)).collect();
    let mut check = LabelCheck::default();
    for (line, row) in csv::Reader::from_reader(labels).deserialize::<Row>().enumerate() {
        let l = row.map_err(|source| LabelError::Row { row: line + 2, source })?;
        check.checked += 1;
        match by_client.get(&l.client) {
            None => check.missed.push(format!("{} ({}): no such connection in the capture", l.client, l.protocol)),
            Some(c) if c.verdict.name() != l.protocol => {
                check.missed.push(format!("{} labelled {}, named {}", l.client, l.protocol, c.verdict.name()));
            }
            Some(_) => {}
        }
    }
    Ok(check)
}
