//! The sharded design: no producer. Every worker reads the whole capture (mapped, so the bytes
//! are shared, not copied) and keeps only its own connections, those a placement policy of
//! the core (one that places by the flow alone, [`Policy::by_flow_alone`]: static
//! hash, HRW, jump or Maglev hashing of the connection's undirected 5-tuple) gives it;
//! it tracks, reassembles and scans them as the single thread does, and the shards' results are
//! merged into the single thread's numbering. Nothing is handed over and nothing is shared
//! while the run goes: each worker's only extra cost is glimpsing the other shards' packets
//! (their record and header fields, [`Packets::next_kept`](switchyard_ingest::Packets::next_kept),
//! not decoded) and placing their connections, a few tens of nanoseconds a packet. Live capture's fanout groups are the same design
//! with the kernel doing the sharding ([`crate::live`]).
//!
//! The producer design ([`crate::pipeline`]) can place by load (affinity, AHRW, bounded loads);
//! this one cannot, since workers do not share a load view while they run. On two cores, where
//! a producer sharing a core with a worker was most of the time per packet, it is the design
//! that reaches issue 21's goals (`switchyard bench inspect` measures both).

use std::time::{Duration, Instant};

use switchyard_core::flow::FiveTuple;
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowKey, LoadView, Placer, Policy, Unit, WorkerId};
use switchyard_ingest::{ConnConfig, Glimpse, IngestError, SliceReader};

use crate::inspect::Inspector;
use crate::serial::{Summary, inspect_shard};

/// Why a sharded run could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardError {
    /// The policy places by load or by earlier placements, which shards cannot share.
    #[error(
        "policy {policy} places by load or by earlier placements, which the sharded design cannot see while it runs: use one of {by_flow}, or the producer design"
    )]
    NeedsLoad {
        /// The policy asked for.
        policy: &'static str,
        /// Those the sharded design takes.
        by_flow: String,
    },
    /// The policy could not be built.
    #[error("{0}")]
    Policy(String),
    /// Reading the capture failed.
    #[error(transparent)]
    Ingest(#[from] IngestError),
}

/// A shard's memo of which connections are its own, by the connection's [`Glimpse`]: a
/// connection's packets come close together, and the flow's digest and the policy's choice
/// cost several times what glimpsing a packet does (leaving every packet of the labelled
/// sample cost 21 ns a packet with the memo, deciding once a connection).
/// Direct-mapped, 4,096 entries for IPv4 (24 bytes each, so that the memo stays in a core's
/// second-level cache) and 512 for the rest: a collision only costs deciding again.
struct Owners {
    v4: Vec<V4Slot>,
    other: Vec<Option<(FiveTuple, bool)>>,
    hasher: hashbrown::DefaultHashBuilder,
}

/// An IPv4 connection's endpoints and, in `tag`, its protocol (bits 0–7), whose it is (bit 8)
/// and whether the slot is filled (bit 9).
#[derive(Clone, Copy, Default)]
struct V4Slot {
    low: u64,
    high: u64,
    tag: u32,
}

const V4_SLOTS: usize = 4096;
const OTHER_SLOTS: usize = 512;
const FILLED: u32 = 1 << 9;
const MINE: u32 = 1 << 8;

impl Default for Owners {
    fn default() -> Self {
        Self {
            v4: vec![V4Slot::default(); V4_SLOTS],
            other: vec![None; OTHER_SLOTS],
            hasher: hashbrown::DefaultHashBuilder::default(),
        }
    }
}

impl Owners {
    #[inline]
    fn mine(&mut self, glimpse: &Glimpse, decide: impl FnOnce(FiveTuple) -> bool) -> bool {
        use std::hash::BuildHasher;
        match *glimpse {
            Glimpse::V4 { proto, low, high } => {
                // A multiplicative hash of the endpoints: the memo needs spread, not resistance
                // to chosen keys (a collision costs a decision, never a wrong answer).
                let h = (low ^ high.rotate_left(32) ^ u64::from(proto)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let slot = &mut self.v4[(h >> 52) as usize % V4_SLOTS];
                let tag = u32::from(proto) | FILLED;
                if slot.low == low && slot.high == high && slot.tag & !MINE == tag {
                    return slot.tag & MINE != 0;
                }
                let mine = decide(glimpse.undirected());
                *slot = V4Slot { low, high, tag: tag | if mine { MINE } else { 0 } };
                mine
            }
            Glimpse::Tuple(undirected) => {
                let slot = &mut self.other[self.hasher.hash_one(undirected) as usize % OTHER_SLOTS];
                match *slot {
                    Some((k, mine)) if k == undirected => mine,
                    _ => {
                        let mine = decide(undirected);
                        *slot = Some((undirected, mine));
                        mine
                    }
                }
            }
        }
    }
}

/// One shard's figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct ShardStats {
    /// The core it ran on, if pinned.
    pub core: Option<usize>,
    /// Packets it kept.
    pub packets: u64,
    /// Buffers it scanned, and their bytes.
    pub scanned: (u64, u64),
    /// Buffers of connections already classified, not scanned.
    pub skipped: u64,
    /// How long it ran.
    pub busy: Duration,
}

/// A sharded run's results.
#[derive(Clone, Debug)]
pub struct ShardedReport {
    /// The merged results, as the single thread gives them.
    pub summary: Summary,
    /// Each shard's figures.
    pub shards: Vec<ShardStats>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

/// Inspects the capture `bytes` on `workers` shards placed by `policy`, each pinned to a core
/// where `pin`.
pub fn run(
    bytes: &[u8],
    workers: u32,
    policy: Policy,
    conn: ConnConfig,
    inspector: &Inspector,
    pin: bool,
) -> Result<ShardedReport, ShardError> {
    if !policy.by_flow_alone() {
        return Err(ShardError::NeedsLoad { policy: policy.name(), by_flow: Policy::by_flow_alone_names() });
    }
    let workers = workers.max(1);
    let ids: Vec<WorkerId> = (0..workers).map(WorkerId).collect();
    // Checked once here, so that each shard's own build cannot fail.
    place::build(policy, &PlaceConfig::default(), &ids).map_err(|e| ShardError::Policy(e.to_string()))?;
    let cores = if pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
    let started = Instant::now();
    let results: Vec<Result<(Summary, ShardStats), IngestError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = ids
            .iter()
            .map(|&me| {
                let core = (!cores.is_empty()).then(|| cores[me.0 as usize % cores.len()].id);
                let ids = &ids;
                std::thread::Builder::new()
                    .name(format!("sy-shard-{}", me.0))
                    .spawn_scoped(scope, move || {
                        let core = core.filter(|&id| core_affinity::set_for_current(core_affinity::CoreId { id }));
                        let t = Instant::now();
                        let mut placer = place::build(policy, &PlaceConfig::default(), ids).expect("built once above");
                        let mut mine = ownership(placer.as_mut(), me);
                        let summary = inspect_shard(SliceReader::new(bytes)?, conn, inspector, &mut mine)?;
                        let stats = ShardStats {
                            core,
                            packets: summary.packets,
                            scanned: (summary.inspected, summary.scanned_bytes),
                            skipped: summary.skipped_classified,
                            busy: t.elapsed(),
                        };
                        Ok((summary, stats))
                    })
                    .expect("a thread can be started")
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("shards do not panic")).collect()
    });
    let elapsed = started.elapsed();
    let mut summary = Summary::default();
    let mut shards = Vec::with_capacity(results.len());
    for (i, r) in results.into_iter().enumerate() {
        let (s, stats) = r?;
        let skipped = summary.absorb(s);
        if i == 0 {
            // Every shard reads every packet: the reader's counts are one shard's.
            summary.skipped = skipped;
        }
        shards.push(stats);
    }
    summary.conns.sort_by_key(|c| c.id);
    summary.renumber();
    Ok(ShardedReport { summary, shards, elapsed })
}

/// Whether a packet's connection is `me`'s under `placer`, remembered per connection.
fn ownership(placer: &mut dyn Placer, me: WorkerId) -> impl FnMut(&Glimpse) -> bool + '_ {
    let empty = LoadView::new(&[], &[]);
    let mut owners = Owners::default();
    move |glimpse: &Glimpse| {
        owners
            .mine(glimpse, |undirected| placer.place(&Unit::of_flow(FlowKey::Tuple(undirected).id(), 0), &empty) == me)
    }
}

/// What a shard pays for the packets other shards keep: one shard of `workers` under `policy`
/// reading the whole capture, deciding each connection's owner as [`run`]'s shards do, and
/// keeping none. Timed on the calling thread.
pub fn leave_all(
    bytes: &[u8],
    workers: u32,
    policy: Policy,
    conn: ConnConfig,
    inspector: &Inspector,
) -> Result<Duration, ShardError> {
    let ids: Vec<WorkerId> = (0..workers.max(1)).map(WorkerId).collect();
    let mut placer =
        place::build(policy, &PlaceConfig::default(), &ids).map_err(|e| ShardError::Policy(e.to_string()))?;
    let t = Instant::now();
    // A worker that is not in the set: every connection is another's.
    let mut mine = ownership(placer.as_mut(), WorkerId(u32::MAX));
    inspect_shard(SliceReader::new(bytes)?, conn, inspector, &mut mine)?;
    Ok(t.elapsed())
}

impl From<ShardedReport> for crate::pipeline::RunReport {
    /// As the producer design reports: a worker per shard, and nothing placed, handed over,
    /// waited for or dropped.
    fn from(r: ShardedReport) -> Self {
        Self {
            summary: r.summary,
            workers: r
                .shards
                .iter()
                .map(|s| crate::pipeline::WorkerStats {
                    scanned: s.scanned.0,
                    scanned_bytes: s.scanned.1,
                    skipped: s.skipped,
                    duplicated: 0,
                    busy: s.busy,
                    core: s.core,
                })
                .collect(),
            migrations: 0,
            dropped: 0,
            producer_blocked: Duration::ZERO,
            placing: Duration::ZERO,
            elapsed: r.elapsed,
            producer_cpu: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serial::inspect_serial;
    use crate::tracegen::{TraceSpec, generate};

    #[test]
    fn shards_give_the_single_thread_s_results_for_every_count_and_policy_by_flow() {
        let mut pcap = Vec::new();
        generate(&TraceSpec { connections: 300, elephants: 0.05, ..TraceSpec::default() }, &mut pcap).unwrap();
        let inspector = Inspector::new();
        let reference = inspect_serial(SliceReader::new(&pcap).unwrap(), ConnConfig::default(), &inspector).unwrap();
        let view = |s: &Summary| {
            s.conns.iter().map(|c| (c.id, c.key, c.verdict, c.matched_at, c.packets, c.tls.clone())).collect::<Vec<_>>()
        };
        for policy in Policy::ALL.iter().copied().filter(|p| p.by_flow_alone()) {
            for workers in [1, 2, 3, 5] {
                let r = run(&pcap, workers, policy, ConnConfig::default(), &inspector, false).unwrap();
                assert_eq!(view(&r.summary), view(&reference), "{} on {workers}", policy.name());
                assert_eq!(r.summary.packets, reference.packets);
                assert_eq!(r.summary.payload_bytes, reference.payload_bytes);
                assert_eq!(r.shards.iter().map(|s| s.packets).sum::<u64>(), reference.packets);
                if workers > 1 {
                    assert!(r.shards.iter().all(|s| s.packets > 0), "every shard has work: {:?}", r.shards);
                }
            }
        }
    }

    /// With a short idle timeout, connections end and start again mid-capture, and past 65,536
    /// packets read the tables are swept (a shard sweeps on another shard's packet, glimpsed
    /// and not decoded, as on its own): the shards number the restarted connections and give
    /// their results as the single thread does. (A sweep only bounds the table: a connection
    /// idle too long is ended by its next packet anyway, so results cannot show a sweep.)
    #[test]
    fn shards_end_and_restart_idle_connections_as_the_single_thread_does() {
        let mut pcap = Vec::new();
        let spec = TraceSpec { connections: 24_000, rate: 20_000.0, ..TraceSpec::default() };
        generate(&spec, &mut pcap).unwrap();
        let conn = ConnConfig { idle_timeout_ns: 2_000_000, ..ConnConfig::default() };
        let inspector = Inspector::new();
        let reference = inspect_serial(SliceReader::new(&pcap).unwrap(), conn, &inspector).unwrap();
        assert!(reference.packets > 2 * 65_536, "{} packets: too few to sweep", reference.packets);
        let view = |s: &Summary| s.conns.iter().map(|c| (c.id, c.key, c.verdict, c.packets)).collect::<Vec<_>>();
        for workers in [2, 3] {
            let r = run(&pcap, workers, Policy::Hrw, conn, &inspector, false).unwrap();
            assert_eq!(view(&r.summary), view(&reference), "{workers} shards");
        }
    }

    #[test]
    fn a_policy_that_places_by_load_is_refused_with_the_reason() {
        let e = run(b"", 2, Policy::Ahrw, ConnConfig::default(), &Inspector::new(), false).unwrap_err();
        assert!(e.to_string().contains("places by load"), "{e}");
    }
}
