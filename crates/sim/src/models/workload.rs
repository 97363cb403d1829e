//! Offered work: synthetic flows, and connection buffers for deep packet inspection.
//!
//! Flows start as a Poisson process. Each flow has a heavy-tailed number of units, Pareto with
//! shape α and minimum 1, rounded down and capped. This is the "elephants and mice" of real
//! traffic that static hashing balances badly (Guo §5.1.2, the motivating example). A flow's units
//! follow one another at exponential gaps, and each unit's size is drawn from a packet-size mix.
//!
//! Randomness: flow arrivals draw from stream 0, and flow `i` draws its length, gaps and sizes
//! from stream `1 + i`, so changing one flow's parameters does not shift any other flow.

use std::sync::Arc;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Pareto};
use switchyard_core::place::score::splitmix64;
use switchyard_core::{FlowId, FlowMap, Unit};

use super::server::ServerEvent;
use super::trace::Trace;
use crate::{EventQueue, Nanos, SimError, Streams};

/// Connections inspected by a DPI engine (Guo §2.4, ch. 4: the parallel L7-filter).
///
/// Each connection's first `inspect_packets` packets (8 in the thesis; the upstream userspace
/// L7-filter's default is 10, erratum 11) each produce a new **connection buffer**: the payload
/// so far, re-queued as one unit whose size is the buffer's length. A worker scans the whole
/// buffer, unless the connection was already classified when the scan starts, in which case the
/// buffer is only checked and skipped. A connection is classified MATCHED when a buffer holding
/// its `match_at`-th packet has been scanned, or NO_MATCH after its last inspected buffer. Later
/// packets of a classified connection are marked by the producer and never queued.
///
/// This is where connection affinity pays (§4.1.3): when two buffers of one connection are
/// scanned at once on different workers, the second scan happens before the first has
/// classified the connection, and the work is duplicated.
#[derive(Clone, Debug, PartialEq)]
pub struct DpiConnections {
    /// The connections, their arrivals and packets (a unit is a packet before buffering).
    pub flows: SyntheticFlows,
    /// Packets per connection that are inspected (8 in the thesis).
    pub inspect_packets: u64,
    /// Fraction of connections whose pattern matches; each matches at a packet drawn uniformly
    /// from 1 to `inspect_packets`.
    pub match_fraction: f64,
}

/// Video streams split into GOPs for transcoding (Guo ch. 4.2, 6): each stream a flow, each GOP
/// a unit whose work is proportional to its bytes (Guo, after Bavier et al.). GOPs of a stream
/// arrive at exponential gaps of mean `interval`; with a small interval the streams are read from
/// files as fast as the producer takes them, as in the thesis's offline set-up.
#[derive(Clone, Debug, PartialEq)]
pub struct GopStreams {
    /// Concurrent streams (20 in Guo ch. 6, "for a fully loaded system").
    pub streams: u32,
    /// GOPs per stream.
    pub gops: u64,
    /// Mean gap between a stream's GOPs, in seconds.
    pub interval: f64,
    /// Smallest and largest GOP, in bytes (sizes uniform between them).
    pub bytes: (u64, u64),
    /// Work multipliers of the target profiles, taken by the streams in turn (stream `i` has
    /// `profiles[i % len]`): Guo's 20 streams transcode to four profiles, SQCIF to 4CIF, whose
    /// work differs. `[1.0]` makes every stream alike.
    pub profiles: Vec<f64>,
}

/// GOP streams whose every GOP was measured on a real run (the transcoding driver's), replayed
/// as the real pool offered them, so that what is simulated is what was run: every stream's GOP 0,
/// then every stream's GOP 1, and so on (stream `i`'s GOP `k` arrives at `k · streams + i`
/// nanoseconds, all before the first can finish), each GOP taking the time it was measured to
/// take.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredGops {
    /// Per stream: its flow (the one the real pool gave the place stage) and each GOP's input
    /// size in bytes and measured cost in nanoseconds, in order.
    pub streams: Vec<(FlowId, Vec<(u64, u64)>)>,
    /// A GOP's cost is multiplied by this when it runs on another worker than its stream's
    /// previous GOP (the measured cache effect: cold over warm; 1 for none).
    pub moved: f64,
}

/// A synthetic flow workload.
#[derive(Clone, Debug, PartialEq)]
pub struct SyntheticFlows {
    /// Number of flows.
    pub flows: u32,
    /// Flow arrival rate, per second.
    pub flow_rate: f64,
    /// Pareto shape α of units per flow (smaller is heavier-tailed; 1.2 is typical of traffic).
    pub units_shape: f64,
    /// Most units a flow may have.
    pub units_max: u64,
    /// Mean gap between a flow's units, in seconds.
    pub unit_gap: f64,
    /// Unit sizes in bytes with their relative frequencies.
    pub sizes: Vec<(u64, f64)>,
}

impl Default for SyntheticFlows {
    /// 2,000 flows at 20,000 per second, Pareto(1.2) units per flow up to 1,000, 20 µs apart;
    /// a bimodal packet mix of 64 and 1,500 bytes with some 576.
    fn default() -> Self {
        Self {
            flows: 2_000,
            flow_rate: 20_000.0,
            units_shape: 1.2,
            units_max: 1_000,
            unit_gap: 20e-6,
            sizes: vec![(64, 0.5), (576, 0.1), (1500, 0.4)],
        }
    }
}

#[derive(Debug)]
struct Flow {
    id: FlowId,
    rng: ChaCha8Rng,
    total: u64,
    next_seq: u64,
    /// Units of the flow that will be queued: all of them, or for DPI the inspected buffers.
    queued: u64,
    departed: u64,
    /// DPI: buffer length so far, the packet at which the pattern matches (0: never), and
    /// whether the connection is classified.
    buffer: u64,
    match_at: u64,
    classified: bool,
}

/// The running workload: flow state and the draws.
#[derive(Debug)]
pub(crate) struct FlowSource {
    spec: SyntheticFlows,
    streams: Streams,
    arrivals: ChaCha8Rng,
    inter: Exp<f64>,
    gap: Exp<f64>,
    length: Pareto<f64>,
    /// Cumulative size weights, for drawing a size.
    cumulative: Vec<f64>,
    flows: Vec<Flow>,
    index: FlowMap<u32>,
    started: u32,
    dpi: Option<(u64, f64)>,
    /// GOP streams: GOPs per stream and the size range.
    gop: Option<(u64, (u64, u64))>,
    /// GOP streams: each stream's work multiplier, by stream index modulo the length.
    profiles: Vec<f64>,
    /// A replayed capture and its time scale.
    trace: Option<(Arc<Trace>, f64)>,
    /// Measured GOP streams.
    measured: Option<Arc<MeasuredGops>>,
    offered: u64,
    /// Flows that finished without a departure (their last packets were only marked).
    finished: Vec<FlowId>,
}

fn check_dpi(inspect_packets: u64, match_fraction: f64) -> Result<(u64, f64), SimError> {
    if inspect_packets == 0 {
        return Err(SimError::BadParameter {
            name: "inspect_packets",
            value: "0".into(),
            expected: "at least 1 packet (8 in Guo ch. 4)",
        });
    }
    if !(0.0..=1.0).contains(&match_fraction) {
        return Err(SimError::BadParameter {
            name: "match_fraction",
            value: match_fraction.to_string(),
            expected: "a fraction from 0 to 1",
        });
    }
    Ok((inspect_packets, match_fraction))
}

/// `nanos` of captured time on the virtual clock.
fn scaled(nanos: u64, scale: f64) -> Nanos {
    Nanos((nanos as f64 * scale).round() as u64)
}

fn ns(seconds: f64) -> Nanos {
    Nanos((seconds * 1e9).round() as u64)
}

impl FlowSource {
    /// Connection buffers for DPI over the flows of `d`.
    pub(crate) fn dpi(d: &DpiConnections, streams: Streams) -> Result<Self, SimError> {
        let dpi = check_dpi(d.inspect_packets, d.match_fraction)?;
        let mut s = Self::new(&d.flows, streams)?;
        s.dpi = Some(dpi);
        Ok(s)
    }

    /// A synthetic flow's id: drawn from the root seed and its index, so runs differ by seed.
    fn flow_id(&self, i: u32) -> FlowId {
        FlowId(splitmix64(self.streams.root() ^ splitmix64(u64::from(i))))
    }

    /// GOP streams: every stream starts within the first microseconds and has exactly
    /// `g.gops` GOPs.
    pub(crate) fn gop(g: &GopStreams, streams: Streams) -> Result<Self, SimError> {
        if g.profiles.is_empty() || g.profiles.iter().any(|p| !(p.is_finite() && *p > 0.0)) {
            return Err(SimError::BadParameter {
                name: "profiles",
                value: format!("{:?}", g.profiles),
                expected: "at least one positive, finite work multiplier",
            });
        }
        if g.gops == 0 || g.bytes.0 == 0 || g.bytes.0 > g.bytes.1 {
            return Err(SimError::BadParameter {
                name: "gops/bytes",
                value: format!("{} GOPs of {:?} bytes", g.gops, g.bytes),
                expected: "at least one GOP per stream, and 1 ≤ smallest ≤ largest bytes",
            });
        }
        let flows = SyntheticFlows {
            flows: g.streams,
            flow_rate: 1e6,
            units_shape: 1.0,
            units_max: g.gops,
            unit_gap: g.interval,
            sizes: vec![(g.bytes.0, 1.0)],
        };
        let mut s = Self::new(&flows, streams)?;
        s.gop = Some((g.gops, g.bytes));
        s.profiles.clone_from(&g.profiles);
        Ok(s)
    }

    /// Measured GOP streams, replayed as [`MeasuredGops`] says.
    pub(crate) fn measured(m: &MeasuredGops, streams: Streams) -> Result<Self, SimError> {
        if m.streams.is_empty() || m.streams.iter().any(|(_, g)| g.is_empty()) {
            return Err(SimError::BadParameter {
                name: "measured",
                value: format!(
                    "{} streams of {:?} GOPs",
                    m.streams.len(),
                    m.streams.iter().map(|s| s.1.len()).collect::<Vec<_>>()
                ),
                expected: "at least one stream, each with at least one GOP",
            });
        }
        if !(m.moved.is_finite() && m.moved > 0.0) {
            return Err(SimError::BadParameter {
                name: "moved",
                value: m.moved.to_string(),
                expected: "a positive, finite cost multiplier for a GOP that changed worker",
            });
        }
        let flows = SyntheticFlows {
            flows: u32::try_from(m.streams.len()).map_err(|_| SimError::BadParameter {
                name: "measured",
                value: format!("{} streams", m.streams.len()),
                expected: "at most 2^32 − 1 streams",
            })?,
            units_max: m.streams.iter().map(|s| s.1.len() as u64).max().unwrap_or(1),
            ..SyntheticFlows::default()
        };
        let mut s = Self::new(&flows, streams)?;
        s.measured = Some(Arc::new(m.clone()));
        Ok(s)
    }

    /// The measured cost of `unit` in nanoseconds, for a measured workload.
    pub(crate) fn measured_cost(&self, unit: &Unit) -> Option<(u64, f64)> {
        let m = self.measured.as_ref()?;
        let &i = self.index.get(unit.flow)?;
        let gops = &m.streams.get(i as usize)?.1;
        Some((gops.get(unit.seq as usize)?.1, m.moved))
    }

    pub(crate) fn new(spec: &SyntheticFlows, streams: Streams) -> Result<Self, SimError> {
        let bad = |name, value: String, expected| SimError::BadParameter { name, value, expected };
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(spec.flow_rate) {
            return Err(bad("flow_rate", spec.flow_rate.to_string(), "a positive rate per second"));
        }
        if !positive(spec.unit_gap) {
            return Err(bad("unit_gap", spec.unit_gap.to_string(), "a positive mean gap in seconds"));
        }
        if !positive(spec.units_shape) {
            return Err(bad("units_shape", spec.units_shape.to_string(), "a positive Pareto shape"));
        }
        if spec.units_max == 0 {
            return Err(bad("units_max", "0".into(), "at least 1 unit per flow"));
        }
        if spec.sizes.is_empty() || spec.sizes.iter().any(|&(b, w)| b == 0 || !positive(w)) {
            return Err(bad("sizes", format!("{:?}", spec.sizes), "(bytes ≥ 1, weight > 0) pairs, at least one"));
        }
        let mut acc = 0.0;
        let cumulative = spec.sizes.iter().map(|&(_, w)| {
            acc += w;
            acc
        });
        let cumulative: Vec<f64> = cumulative.collect();
        Ok(Self {
            streams,
            arrivals: streams.stream(0),
            inter: Exp::new(spec.flow_rate).expect("checked positive"),
            gap: Exp::new(1.0 / spec.unit_gap).expect("checked positive"),
            length: Pareto::new(1.0, spec.units_shape).expect("checked positive"),
            cumulative,
            flows: Vec::with_capacity(spec.flows as usize),
            index: FlowMap::new(),
            started: 0,
            dpi: None,
            gop: None,
            profiles: Vec::new(),
            trace: None,
            measured: None,
            offered: 0,
            finished: Vec::new(),
            spec: spec.clone(),
        })
    }

    /// A capture's flows, replayed with their captured times multiplied by `time_scale`; with
    /// `dpi`, each packet's payload grows its connection's buffer as in [`DpiConnections`].
    pub(crate) fn trace(
        trace: &Arc<Trace>,
        time_scale: f64,
        dpi: Option<(u64, f64)>,
        streams: Streams,
    ) -> Result<Self, SimError> {
        if !(time_scale.is_finite() && time_scale >= 0.0) {
            return Err(SimError::BadParameter {
                name: "time_scale",
                value: time_scale.to_string(),
                expected: "a factor ≥ 0 for the captured times (0 replays as fast as possible)",
            });
        }
        let flows = SyntheticFlows {
            flows: u32::try_from(trace.flows()).map_err(|_| SimError::BadParameter {
                name: "trace",
                value: format!("{} flows", trace.flows()),
                expected: "at most 2^32 − 1 flows",
            })?,
            units_max: trace.longest(),
            ..SyntheticFlows::default()
        };
        let mut s = Self::new(&flows, streams)?;
        s.trace = Some((Arc::clone(trace), time_scale));
        if let Some((inspect, fraction)) = dpi {
            s.dpi = Some(check_dpi(inspect, fraction)?);
        }
        Ok(s)
    }

    /// Schedules the first flow.
    pub(crate) fn start(&mut self, queue: &mut EventQueue<ServerEvent>) {
        if self.spec.flows == 0 {
            return;
        }
        let first = match (&self.trace, &self.measured) {
            (Some((t, scale)), _) => scaled(t.flows[0].start, *scale),
            (None, Some(_)) => Nanos::ZERO,
            (None, None) => ns(self.inter.sample(&mut self.arrivals)),
        };
        queue.schedule_in(first, ServerEvent::FlowStart(0));
    }

    /// Flow `i` starts: draw its length, schedule its first unit and the next flow's start.
    pub(crate) fn on_flow_start(&mut self, i: u32, queue: &mut EventQueue<ServerEvent>) {
        let mut rng = self.streams.stream(1 + u64::from(i));
        let (total, id) = match (&self.trace, self.gop) {
            (Some((t, _)), _) => (t.flows[i as usize].packets.len() as u64, t.flows[i as usize].id),
            (None, _) if let Some(m) = &self.measured => {
                let (id, gops) = &m.streams[i as usize];
                (gops.len() as u64, *id)
            }
            (None, Some((gops, _))) => (gops, self.flow_id(i)),
            (None, None) => ((self.length.sample(&mut rng) as u64).clamp(1, self.spec.units_max), self.flow_id(i)),
        };
        let measured = self.trace.as_ref().and_then(|(t, _)| t.flows[i as usize].match_at);
        let (queued, match_at) = match self.dpi {
            None => (total, 0),
            Some((inspect, _)) if let Some(at) = measured => (total.min(inspect), at),
            Some((inspect, fraction)) => {
                let matches = rng.random::<f64>() < fraction;
                let at = if matches { rng.random_range(1..=inspect) } else { 0 };
                (total.min(inspect), at)
            }
        };
        self.index.insert(id, i);
        self.flows.push(Flow {
            id,
            rng,
            total,
            next_seq: 0,
            queued,
            departed: 0,
            buffer: 0,
            match_at,
            classified: false,
        });
        self.started += 1;
        queue.schedule_in(Nanos::ZERO, ServerEvent::Unit(i));
        if self.started < self.spec.flows {
            let gap = match &self.trace {
                Some((t, scale)) => {
                    let (this, next) = (&t.flows[i as usize], &t.flows[self.started as usize]);
                    scaled(next.start.saturating_sub(this.start), *scale)
                }
                // Stream i starts at i ns: the real pool places stream 0's GOP first.
                None if self.measured.is_some() => Nanos(1),
                None => ns(self.inter.sample(&mut self.arrivals)),
            };
            queue.schedule_in(gap, ServerEvent::FlowStart(self.started));
        }
    }

    /// Flow `i`'s next packet arrives: make its unit, and schedule the next packet if any.
    /// `None` for DPI when the packet is only marked (its connection is classified, or past the
    /// inspected packets).
    pub(crate) fn on_unit(&mut self, i: u32, queue: &mut EventQueue<ServerEvent>) -> Option<Unit> {
        let f = &mut self.flows[i as usize];
        let r: f64 = f.rng.random::<f64>() * self.cumulative.last().copied().unwrap_or(1.0);
        let k = self.cumulative.partition_point(|&c| c <= r).min(self.spec.sizes.len() - 1);
        let size = match (&self.trace, self.gop) {
            (None, _) if let Some(m) = &self.measured => m.streams[i as usize].1[f.next_seq as usize].0,
            (Some((t, _)), _) => {
                let (_, wire, payload) = t.flows[i as usize].packets[f.next_seq as usize];
                u64::from(if self.dpi.is_some() { payload } else { wire })
            }
            (None, Some((_, (lo, hi)))) => {
                let scale = self.profiles[i as usize % self.profiles.len()];
                (f.rng.random_range(lo..=hi) as f64 * scale).round().max(1.0) as u64
            }
            (None, None) => self.spec.sizes[k].0,
        };
        self.offered += size;
        let seq = f.next_seq;
        f.next_seq += 1;
        if f.next_seq < f.total {
            let gap = match &self.trace {
                Some((t, scale)) => {
                    let p = &t.flows[i as usize].packets;
                    scaled(p[seq as usize + 1].0 - p[seq as usize].0, *scale)
                }
                // A round of every stream's next GOP, one nanosecond apart, as the pool offers them.
                None if let Some(m) = &self.measured => Nanos(m.streams.len() as u64),
                None => ns(self.gap.sample(&mut f.rng)),
            };
            queue.schedule_in(gap, ServerEvent::Unit(i));
        }
        match self.dpi {
            None => Some(Unit::of_flow(f.id, size).with_seq(seq)),
            Some(_) if seq >= f.queued => None,
            Some(_) if f.classified => {
                // Classified before this buffer was made: it and the rest are only marked.
                f.queued = seq;
                if f.departed >= f.queued {
                    self.index.remove(f.id);
                    self.finished.push(f.id);
                }
                None
            }
            Some(_) => {
                f.buffer += size;
                Some(Unit::of_flow(f.id, f.buffer).with_seq(seq))
            }
        }
    }

    /// Bytes a worker scans for `unit` when it starts serving it: all of it, or for DPI nothing
    /// when the connection is already classified (the buffer is checked and skipped).
    pub(crate) fn work_bytes(&self, unit: &Unit) -> u64 {
        match (self.dpi, self.index.get(unit.flow)) {
            (Some(_), Some(&i)) if self.flows[i as usize].classified => 0,
            _ => unit.size,
        }
    }

    /// `unit` has been served: for DPI, the scan may classify its connection.
    pub(crate) fn on_served(&mut self, unit: &Unit) {
        if self.dpi.is_none() {
            return;
        }
        let Some(&i) = self.index.get(unit.flow) else { return };
        let f = &mut self.flows[i as usize];
        let packets = unit.seq + 1;
        if (f.match_at != 0 && packets >= f.match_at) || packets >= f.queued {
            f.classified = true;
        }
    }

    /// Flows that finished since the last call without a departure to say so.
    pub(crate) fn take_finished(&mut self) -> Vec<FlowId> {
        std::mem::take(&mut self.finished)
    }

    /// Bytes the workload offered: every packet's payload, queued or only marked (Guo's L7-filter
    /// throughput is the trace's bytes over the run).
    pub(crate) fn offered_bytes(&self) -> u64 {
        self.offered
    }

    /// A unit of `flow` departed; true when it was the flow's last to do so.
    pub(crate) fn on_departure(&mut self, flow: FlowId) -> bool {
        let Some(&i) = self.index.get(flow) else { return false };
        let f = &mut self.flows[i as usize];
        f.departed += 1;
        let done = f.departed >= f.queued && f.next_seq >= f.queued.min(f.total);
        if done {
            self.index.remove(flow);
        }
        done
    }
}
