//! Trace-driven workloads: the flows of a pcap or pcapng capture, replayed on virtual time.
//!
//! The capture is read once (through `switchyard-ingest`, the reader every driver shares) into
//! its flows: each flow's first-packet time and its packets' times and sizes. A run then replays
//! them: a flow starts when its first packet was captured, and each later packet follows at its
//! captured gap, all times multiplied by `time_scale` (0.5 replays twice as fast, which is how a
//! trace is made to load a machine faster than the link it came from).
//!
//! Modelling choices:
//! - A flow is a 5-tuple, direction-insensitive by default (a connection's two directions are
//!   one flow, as Guo ch. 5 keys connections), or directed by option.
//! - A unit's size is the packet's length on the wire; for DPI it is the TCP or UDP payload,
//!   which is what the connection buffer accumulates.
//! - Packets the reader cannot use (not IP, not TCP or UDP, fragments, damage) are left out and
//!   counted; [`Trace::skipped`] says how many and why.

use std::io::Read;
use std::sync::Arc;

use switchyard_core::flow::FlowKey;
use switchyard_core::{FlowId, FlowMap};
use switchyard_ingest::{CaptureReader, IngestError, SkipCounts};

/// A capture's flows, ready to replay.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// Flows in order of their first packet.
    pub(crate) flows: Vec<TraceFlow>,
    skipped: SkipCounts,
    packets: u64,
}

/// One flow of a trace.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TraceFlow {
    pub(crate) id: FlowId,
    /// First packet's time, nanoseconds after the trace's first packet.
    pub(crate) start: u64,
    /// Each packet: nanoseconds after the flow's first packet, wire length, payload length.
    pub(crate) packets: Vec<(u64, u32, u32)>,
    /// DPI: the packet (counted from 1) whose buffer a real run matched, or 0 if none did;
    /// `None` where no run has said, and the match is drawn.
    pub(crate) match_at: Option<u64>,
}

impl Trace {
    /// Reads a capture. `undirected` merges a connection's two directions into one flow.
    pub fn read(input: impl Read + Send, undirected: bool) -> Result<Self, IngestError> {
        let mut reader = CaptureReader::new(input)?;
        let mut flows: Vec<TraceFlow> = Vec::new();
        let mut index: FlowMap<u32> = FlowMap::new();
        let mut first = None;
        while let Some(p) = reader.next_packet()? {
            let t0 = *first.get_or_insert(p.time_ns);
            // Captures are nearly but not always in time order; a packet stamped earlier than the
            // first is taken to arrive with it.
            let at = p.time_ns.saturating_sub(t0);
            let key = if undirected { p.key.undirected() } else { p.key };
            let id = FlowKey::Tuple(key).id();
            let i = *index.get_or_insert_with(id, || {
                flows.push(TraceFlow { id, start: at, packets: Vec::new(), match_at: None });
                (flows.len() - 1) as u32
            });
            let f = &mut flows[i as usize];
            let rel = at.saturating_sub(f.start).max(f.packets.last().map_or(0, |p| p.0));
            f.packets.push((rel, p.wire_len, p.payload.len() as u32));
        }
        Ok(Self { flows, skipped: reader.skipped(), packets: reader.packets() })
    }

    /// Flows in the trace.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Packets replayed (TCP and UDP).
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets left out, by reason.
    pub fn skipped(&self) -> SkipCounts {
        self.skipped
    }

    /// Takes where a real inspection matched each flow (its flow id, and the packet, counted
    /// from 1, whose buffer matched, or 0 for none), so that a DPI replay classifies each
    /// connection where the real run did instead of at a drawn packet: what is simulated is then
    /// what was run. Flows not listed keep the drawn match. Returns how many flows were matched
    /// up.
    pub fn set_match_points(&mut self, points: impl IntoIterator<Item = (FlowId, u64)>) -> usize {
        let mut index: FlowMap<u32> = FlowMap::new();
        for (i, f) in self.flows.iter().enumerate() {
            index.insert(f.id, i as u32);
        }
        let mut set = 0;
        for (id, at) in points {
            if let Some(&i) = index.get(id) {
                self.flows[i as usize].match_at = Some(at);
                set += 1;
            }
        }
        set
    }

    /// Most packets in one flow.
    pub(crate) fn longest(&self) -> u64 {
        self.flows.iter().map(|f| f.packets.len() as u64).max().unwrap_or(1)
    }
}

/// A trace workload: the capture, its time scale, and optionally DPI buffering.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceReplay {
    /// The capture's flows (shared by every run of a sweep).
    pub trace: Arc<Trace>,
    /// Virtual nanoseconds per captured nanosecond (0: as fast as the producer takes them).
    pub time_scale: f64,
    /// DPI connection buffers of the first `.0` packets, `.1` of connections matching, as in
    /// [`super::workload::DpiConnections`]; `None` makes every packet a unit.
    pub dpi: Option<(u64, f64)>,
}
