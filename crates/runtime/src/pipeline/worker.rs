//! A worker thread: it takes batches of buffer units from its queue, feeds each connection's
//! assembly and scans, and publishes how many buffers it has finished.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use switchyard_ingest::ConnConfig;

use super::WorkerStats;
use super::shared::Job;
use crate::app_fields;
use crate::inspect::{Inspector, Scratch, tls};

/// One worker's end of its queue, and its count of finished buffers in the load view.
pub(super) struct WorkerEnd<'s, 'a> {
    pub(super) rx: Receiver<Vec<Job<'s, 'a>>>,
    pub(super) done: &'s Done,
}

/// Buffers a worker has finished, and their bytes: written only by the worker, read by the
/// producer. Each worker's pair has a cache line of its own, so one worker's progress does not
/// evict the line the producer reads for the other.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct Done {
    pub(super) units: AtomicU64,
    pub(super) bytes: AtomicU64,
}

/// A worker publishes its progress after this many buffers (and at the end of each batch):
/// often enough for a load-aware placer to see a queue drain within a batch, rarely enough that
/// the producer's reads seldom miss.
pub const PUBLISH_EVERY: u64 = 16;

pub(super) fn worker(
    end: WorkerEnd<'_, '_>,
    inspector: &Inspector,
    config: &ConnConfig,
    core: Option<usize>,
) -> WorkerStats {
    let mut stats = WorkerStats { core, ..WorkerStats::default() };
    if let Some(id) = core {
        stats.core = core_affinity::set_for_current(core_affinity::CoreId { id }).then_some(id);
    }
    let mut scratch = inspector.scratch();
    let (mut units, mut bytes) = (0u64, 0u64);
    let publish = |units: u64, bytes: u64| {
        end.done.units.store(units, Ordering::Release);
        end.done.bytes.store(bytes, Ordering::Release);
    };
    // Timed per batch, not per buffer: reading the clock twice per buffer was 6% of the run.
    while let Some(batch) = next_batch(&end.rx) {
        let started = Instant::now();
        for job in batch {
            inspect(&job, inspector, &mut scratch, config, &mut stats);
            units += 1;
            bytes += u64::from(job.size);
            if units % PUBLISH_EVERY == 0 {
                publish(units, bytes);
            }
        }
        publish(units, bytes);
        stats.busy += started.elapsed();
    }
    inspector.give_back(scratch);
    stats
}

/// How long an idle worker keeps looking for its next batch before it sleeps.
pub(super) const IDLE_SPIN: Duration = Duration::from_micros(50);

/// The worker's next batch, `None` when the producer is done. A worker that finds its queue
/// empty yields its core for a while before it sleeps: a sleeping worker must be woken by the
/// producer with a system call, which on a virtual machine cost more than the batch's scanning
/// (a tenth of the producer's time went to waking workers).
pub(super) fn next_batch<'s, 'a>(rx: &Receiver<Vec<Job<'s, 'a>>>) -> Option<Vec<Job<'s, 'a>>> {
    let idle = Instant::now();
    loop {
        match rx.try_recv() {
            Ok(batch) => return Some(batch),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
            Err(std::sync::mpsc::TryRecvError::Empty) if idle.elapsed() < IDLE_SPIN => std::thread::yield_now(),
            Err(std::sync::mpsc::TryRecvError::Empty) => return rx.recv().ok(),
        }
    }
}

/// One buffer: skipped if an earlier buffer of its connection has matched, otherwise
/// reassembled as far as it reaches and scanned.
pub(super) fn inspect(
    job: &Job<'_, '_>,
    inspector: &Inspector,
    scratch: &mut Scratch,
    config: &ConnConfig,
    stats: &mut WorkerStats,
) {
    let first = job.shared.first_match.load(Ordering::Acquire);
    let details_only = super::shared::index_of(first) < u64::from(job.index);
    if details_only && first & super::shared::MORE == 0 {
        stats.skipped += 1;
        return;
    }
    let mut work = job.shared.work.0.lock().expect("no thread panics holding it");
    let assembled = work.get_or_insert_with(Box::default);
    assembled.take_in(&job.shared.pieces, job.index as usize, config);
    let len = assembled.len_after[job.index as usize] as usize;
    let buffer = &assembled.assembly.buffer()[..len];
    let starts = assembled.assembly.starts();
    stats.scanned += 1;
    stats.scanned_bytes += len as u64;
    if details_only {
        // A TLS connection matched on an earlier buffer: only its ServerHello is looked for.
        if let Some(seen) = assembled.tls.as_mut()
            && !seen.read(buffer, starts)
        {
            job.shared.first_match.fetch_and(!super::shared::MORE, Ordering::AcqRel);
        }
        return;
    }
    if let Some(found) = inspector.classify_conn(scratch, buffer, starts, job.shared.ports) {
        let mut seen = (found.protocol.name() == "tls").then(Box::<tls::Seen>::default);
        let more = seen.as_mut().is_some_and(|s| s.read(buffer, starts));
        let packed = super::shared::pack(job.index, found, more);
        let before = job.shared.first_match.fetch_min(packed, Ordering::AcqRel);
        if before < packed {
            stats.duplicated += 1;
        } else {
            if assembled.tls.is_none() {
                // A later buffer's match, scanned first on another worker, may have read more.
                assembled.tls = seen;
            }
            if assembled.app.as_ref().is_none_or(|(at, _)| *at > job.index) {
                let tcp = job.shared.ports.proto == 6;
                assembled.app = Some((job.index, app_fields::read(found, buffer, starts, tcp)));
            }
        }
    }
}
