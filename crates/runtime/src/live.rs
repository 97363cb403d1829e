//! Live inspection (`switchyard inspect --interface`): connections inspected as they cross an
//! interface, read from `AF_PACKET` rings ([`switchyard_ingest::live`]).
//!
//! One worker reads one ring and runs the serial kernel on it. With several, each worker has a
//! ring of its own in one fanout group: the kernel shares the interface's frames between them
//! by flow hash, the same for both directions of a connection, so every connection is whole on
//! one worker and the workers share nothing. (The file pipeline's producer design, one reader
//! placing buffers by a core policy, borrows payloads from a mapped capture for the whole run;
//! a ring's blocks go back to the kernel, so live capture places by the kernel's hash instead.)
//! Matches are counted as they happen for a live view; the run ends when `stop` is set, with
//! the same summary a file gives, and the kernel's counts of frames received and dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use switchyard_ingest::live::{Ring, RingConfig, RingCounters, RingStats};
use switchyard_ingest::{ConnConfig, IngestError};

use crate::inspect::{Inspector, Protocol, SIGNATURES};
use crate::serial::{Summary, inspect_serial_counting};

/// What a live run has counted so far, readable while it runs.
#[derive(Debug)]
pub struct LiveCounts {
    /// Connections matched, by protocol (indexed as [`SIGNATURES`]).
    pub matched: Vec<AtomicU64>,
    /// Each ring's counts from the kernel, once the rings are open.
    pub rings: std::sync::Mutex<Vec<Arc<RingCounters>>>,
}

impl Default for LiveCounts {
    fn default() -> Self {
        Self { matched: SIGNATURES.iter().map(|_| AtomicU64::new(0)).collect(), rings: Default::default() }
    }
}

impl LiveCounts {
    /// The protocols matched so far, most first, with their counts.
    pub fn by_protocol(&self) -> Vec<(Protocol, u64)> {
        let mut v: Vec<(Protocol, u64)> = self
            .matched
            .iter()
            .enumerate()
            .map(|(i, n)| (Protocol(i as u16), n.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Frames received and dropped so far, every ring's, as the kernel last said.
    pub fn ring_totals(&self) -> RingStats {
        let rings = self.rings.lock().map(|r| r.clone()).unwrap_or_default();
        rings.iter().fold(RingStats::default(), |t, r| RingStats {
            packets: t.packets + r.packets.load(Ordering::Relaxed),
            drops: t.drops + r.drops.load(Ordering::Relaxed),
        })
    }
}

/// A live run's result.
#[derive(Clone, Debug)]
pub struct LiveReport {
    /// Every worker's connections and counts, as a file's run gives them (connections numbered
    /// anew across workers, worker by worker).
    pub summary: Summary,
    /// The kernel's counts, every ring's.
    pub ring: RingStats,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Inspects `interface` on `workers` threads until `stop` is set.
pub fn inspect_live(
    interface: &str,
    workers: usize,
    ring: RingConfig,
    conn: ConnConfig,
    inspector: &Inspector,
    stop: &Arc<AtomicBool>,
    counts: &LiveCounts,
) -> Result<LiveReport, IngestError> {
    let workers = workers.max(1);
    let group = (workers > 1).then(|| (std::process::id() & 0xffff) as u16);
    // Every ring is open before any frame is read, so none misses a connection's start.
    let rings = (0..workers)
        .map(|_| Ring::open(interface, RingConfig { fanout: group, ..ring }, Arc::clone(stop)))
        .collect::<Result<Vec<_>, _>>()?;
    if let Ok(mut watched) = counts.rings.lock() {
        *watched = rings.iter().map(Ring::counters).collect();
    }
    let started = Instant::now();
    let (summary, mut rings) = inspect_each(rings, "sy-live", counts, |ring, on_match| {
        inspect_serial_counting(&mut *ring, conn, inspector, on_match)
    })?;
    let total = rings
        .iter_mut()
        .map(Ring::stats)
        .fold(RingStats::default(), |t, s| RingStats { packets: t.packets + s.packets, drops: t.drops + s.drops });
    Ok(LiveReport { summary, ring: total, elapsed: started.elapsed() })
}

/// Runs `work` on each source on a thread of its own (named `name-i`), counting each match in
/// `counts`, and merges the summaries as a file's run numbers its connections; gives the
/// sources back, for their own counts.
pub(crate) fn inspect_each<S: Send>(
    mut sources: Vec<S>,
    name: &str,
    counts: &LiveCounts,
    work: impl Fn(&mut S, &mut dyn FnMut(Protocol)) -> Result<Summary, IngestError> + Sync,
) -> Result<(Summary, Vec<S>), IngestError> {
    let results: Vec<Result<Summary, IngestError>> = std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = sources
            .iter_mut()
            .enumerate()
            .map(|(i, source)| {
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn_scoped(scope, move || {
                        work(source, &mut |p: Protocol| {
                            counts.matched[p.0 as usize].fetch_add(1, Ordering::Relaxed);
                        })
                    })
                    .expect("a thread can be started")
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("inspection workers do not panic")).collect()
    });
    let mut summary = Summary::default();
    for r in results {
        // Each source reads packets of its own: what the readers left out adds up.
        let skipped = summary.absorb(r?);
        summary.skipped.merge(&skipped);
    }
    summary.renumber();
    Ok((summary, sources))
}
