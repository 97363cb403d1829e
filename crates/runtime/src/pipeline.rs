//! The parallel pipeline (Guo §2.4 made real): one producer thread reads the capture, tracks
//! connections and places every connection buffer with a core [`Placer`] on a bounded queue of
//! one of N worker threads; each worker inspects what it is given.
//!
//! - **Load view.** Each worker's queue length is an atomic counter: the producer adds one when it
//!   enqueues, the worker takes one off when it finishes. The placer reads them through a
//!   [`LoadView`], as in the simulator.
//! - **Full queues.** The producer blocks (the thesis's preprocessing thread sleeps) or, with
//!   [`OnFull::Drop`], drops the buffer and counts it.
//! - **Stale buffers.** Before scanning, a worker checks whether an earlier buffer of the same
//!   connection has already matched, and skips the buffer if so (Guo's MT re-checks the
//!   connection's state). The check is against the *index* of the earliest matching buffer, so
//!   the verdict is the one the serial pipeline gives, whatever the number of workers or the
//!   order in which workers finish: every buffer before the first matching one is scanned.
//! - **Duplicated matches.** A worker that matches a buffer of a connection whose earlier buffer
//!   matched meanwhile on another worker did the work twice; that is counted.
//! - **Pinning.** Workers are pinned to cores where the OS allows, round robin over the cores.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use switchyard_core::{FlowKey, LoadView, Placer, Unit, WorkerId};
use switchyard_ingest::{ConnConfig, ConnTable, IngestError, Packets, Step};

use crate::inspect::{Inspector, Protocol, tls};
use crate::serial::{ConnResult, Summary, Verdict};

pub use switchyard_core::OnFull;

/// How to run.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// Connection tracking.
    pub conn: ConnConfig,
    /// Buffers a worker's queue holds.
    pub queue_capacity: usize,
    /// Full-queue rule.
    pub on_full: OnFull,
    /// Pin workers to cores.
    pub pin: bool,
    /// Buffers handed to a worker at once, and at the end of the capture. Handing them over one
    /// by one wakes a sleeping worker per buffer, which costs more than a small buffer's scan;
    /// batches amortise the wake-up (measured: 2 workers went from 0.25× to about 0.5× the single
    /// thread). A batch waits until it is full, which suits captures, where the producer runs
    /// ahead; on a live link a slow trickle of packets would wait for its batch to fill. Its
    /// buffers count as queued in the load view from the moment they join it.
    pub batch: usize,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self { conn: ConnConfig::default(), queue_capacity: 64, on_full: OnFull::Block, pin: true, batch: 16 }
    }
}

/// The shared state of one connection: the earliest matching buffer, packed as
/// `index << 16 | protocol`, or `u32::MAX` while none has matched; and the connection's bytes.
///
/// The bytes only grow, so a buffer handed to a worker is a length, not a copy: the worker scans
/// the first `len` bytes. The producer appends only each packet's new bytes (under the write
/// lock, briefly), where a copy per buffer would copy the whole prefix again every time.
#[derive(Debug)]
struct Shared {
    first_match: AtomicU32,
    server_name: Mutex<Option<String>>,
    bytes: RwLock<Vec<u8>>,
}

impl Default for Shared {
    fn default() -> Self {
        Self { first_match: AtomicU32::new(u32::MAX), server_name: Mutex::new(None), bytes: RwLock::new(Vec::new()) }
    }
}

#[derive(Debug, Default)]
struct Slot {
    shared: Arc<Shared>,
    last_worker: Option<WorkerId>,
}

struct Job {
    shared: Arc<Shared>,
    index: u32,
    /// The buffer is the connection's first `len` bytes.
    len: usize,
}

/// What one worker did.
#[derive(Clone, Copy, Debug, Default)]
pub struct WorkerStats {
    /// Buffers scanned.
    pub scanned: u64,
    /// Bytes scanned.
    pub scanned_bytes: u64,
    /// Buffers skipped because an earlier one of the connection had matched.
    pub skipped: u64,
    /// Matches made after an earlier buffer of the same connection had matched elsewhere.
    pub duplicated: u64,
    /// Time spent scanning.
    pub busy: Duration,
    /// The core it was pinned to, if pinning worked.
    pub core: Option<usize>,
}

/// What a parallel run found and how it went.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The per-connection results and totals (as the serial pipeline reports them).
    pub summary: Summary,
    /// Per worker.
    pub workers: Vec<WorkerStats>,
    /// Buffers placed on a different worker than their connection's previous buffer.
    pub migrations: u64,
    /// Buffers dropped at full queues.
    pub dropped: u64,
    /// Time the producer waited on full queues.
    pub producer_blocked: Duration,
    /// Time the producer spent placing buffers (the placer's decisions only).
    pub placing: Duration,
    /// Wall time from the first packet read to the last worker done.
    pub elapsed: Duration,
}

fn worker(
    rx: Receiver<Vec<Job>>,
    (depth, depth_bytes): (Arc<AtomicU64>, Arc<AtomicU64>),
    inspector: Arc<Inspector>,
    core: Option<usize>,
) -> WorkerStats {
    let mut stats = WorkerStats { core, ..WorkerStats::default() };
    if let Some(id) = core {
        stats.core = core_affinity::set_for_current(core_affinity::CoreId { id }).then_some(id);
    }
    for job in rx.into_iter().flatten() {
        let first = job.shared.first_match.load(Ordering::Acquire);
        if first >> 16 < job.index {
            stats.skipped += 1;
        } else {
            let started = Instant::now();
            stats.scanned += 1;
            stats.scanned_bytes += job.len as u64;
            let bytes = job.shared.bytes.read().expect("no thread panics holding it");
            let buffer = &bytes[..job.len];
            if let Some(p) = inspector.classify(buffer) {
                let packed = (job.index << 16) | u32::from(p.0);
                let before = job.shared.first_match.fetch_min(packed, Ordering::AcqRel);
                if before < packed {
                    stats.duplicated += 1;
                } else if p.name() == "tls"
                    && let Some(name) = tls::server_name(buffer)
                {
                    *job.shared.server_name.lock().expect("no worker panics holding it") = Some(name.to_owned());
                }
            }
            stats.busy += started.elapsed();
        }
        depth.fetch_sub(1, Ordering::Release);
        depth_bytes.fetch_sub(job.len as u64, Ordering::Release);
    }
    stats
}

/// Sends a batch, waiting for room (timed into `blocked`) or giving it back when the rule is to
/// drop.
fn hand_over(
    tx: &SyncSender<Vec<Job>>,
    jobs: Vec<Job>,
    on_full: OnFull,
    blocked: &mut Duration,
) -> Result<(), Vec<Job>> {
    match tx.try_send(jobs) {
        Ok(()) => Ok(()),
        Err(TrySendError::Full(jobs)) if on_full == OnFull::Block => {
            let t = Instant::now();
            tx.send(jobs).expect("workers outlive the producer");
            *blocked += t.elapsed();
            Ok(())
        }
        Err(TrySendError::Full(jobs)) => Err(jobs),
        Err(TrySendError::Disconnected(_)) => unreachable!("workers outlive the producer"),
    }
}

/// Reads `reader` to the end on the calling thread, placing every connection buffer with
/// `placer` on one of its workers' threads.
pub fn run(
    mut reader: impl Packets,
    placer: &mut dyn Placer,
    config: &PipelineConfig,
    inspector: Arc<Inspector>,
) -> Result<RunReport, IngestError> {
    let n = placer.members().len();
    let ids: Vec<WorkerId> = placer.members().as_slice().iter().map(|m| m.id).collect();
    let max_id = ids.iter().map(|w| w.0 as usize).max().unwrap_or(0);
    let depths: Vec<Arc<AtomicU64>> = (0..n).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let depth_bytes: Vec<Arc<AtomicU64>> = (0..n).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let cores = if config.pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
    let batch = config.batch.max(1);
    let mut senders: Vec<SyncSender<Vec<Job>>> = Vec::with_capacity(n);
    let mut pending: Vec<Vec<Job>> = (0..n).map(|_| Vec::with_capacity(batch)).collect();
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, rx) = sync_channel(config.queue_capacity.div_ceil(batch).max(1));
        senders.push(tx);
        let depth = (Arc::clone(&depths[i]), Arc::clone(&depth_bytes[i]));
        let inspector = Arc::clone(&inspector);
        let core = (!cores.is_empty()).then(|| cores[i % cores.len()].id);
        handles.push(std::thread::spawn(move || worker(rx, depth, inspector, core)));
    }
    // The placer indexes loads by worker id.
    let mut slot_of = vec![usize::MAX; max_id + 1];
    for (i, w) in ids.iter().enumerate() {
        slot_of[w.0 as usize] = i;
    }
    let mut queues = vec![0u64; max_id + 1];
    let mut queue_bytes = vec![0u64; max_id + 1];
    let mut table: ConnTable<Slot> = ConnTable::new(config.conn);
    let mut s = Summary::default();
    let (mut migrations, mut dropped) = (0, 0);
    let (mut blocked, mut placing) = (Duration::ZERO, Duration::ZERO);
    let mut ended = Vec::new();
    let start = Instant::now();
    while let Some(p) = reader.next_packet()? {
        s.packets += 1;
        s.payload_bytes += p.payload.len() as u64;
        let (conn, index) = match table.on_packet(&p) {
            Step::Buffer { conn, index, .. } => (conn, index),
            Step::Beyond { .. } => {
                s.marked += 1;
                continue;
            }
        };
        if conn.data.shared.first_match.load(Ordering::Acquire) != u32::MAX {
            // Classified before this buffer was made: it is only marked (Guo §2.4, step 2).
            s.skipped_classified += 1;
            continue;
        }
        let t = Instant::now();
        for (w, d) in ids.iter().zip(&depths) {
            queues[w.0 as usize] = d.load(Ordering::Acquire);
        }
        for (w, d) in ids.iter().zip(&depth_bytes) {
            queue_bytes[w.0 as usize] = d.load(Ordering::Acquire);
        }
        let flow = FlowKey::Tuple(conn.key.undirected()).id();
        let unit = Unit::of_flow(flow, conn.buffer().len() as u64).with_seq(u64::from(index));
        let w = placer.place(&unit, &LoadView::new(&queues, &queue_bytes));
        placing += t.elapsed();
        if conn.data.last_worker.is_some_and(|prev| prev != w) {
            migrations += 1;
        }
        conn.data.last_worker = Some(w);
        let slot = slot_of[w.0 as usize];
        let len = conn.buffer().len();
        {
            let mut bytes = conn.data.shared.bytes.write().expect("no thread panics holding it");
            let have = bytes.len();
            bytes.extend_from_slice(&conn.buffer()[have..]);
        }
        let job = Job { shared: Arc::clone(&conn.data.shared), index, len };
        depths[slot].fetch_add(1, Ordering::AcqRel);
        depth_bytes[slot].fetch_add(len as u64, Ordering::AcqRel);
        s.inspected += 1;
        pending[slot].push(job);
        if pending[slot].len() >= batch {
            let jobs = std::mem::replace(&mut pending[slot], Vec::with_capacity(batch));
            match hand_over(&senders[slot], jobs, config.on_full, &mut blocked) {
                Ok(()) => {}
                Err(jobs) => {
                    for job in &jobs {
                        depths[slot].fetch_sub(1, Ordering::AcqRel);
                        depth_bytes[slot].fetch_sub(job.len as u64, Ordering::AcqRel);
                    }
                    s.inspected -= jobs.len() as u64;
                    dropped += jobs.len() as u64;
                }
            }
        }
        if s.packets % 65_536 == 0 {
            table.expire(p.time_ns);
            ended.extend(table.take_ended());
        }
    }
    for (tx, jobs) in senders.iter().zip(pending) {
        if !jobs.is_empty() {
            tx.send(jobs).expect("workers outlive the producer");
        }
    }
    drop(senders);
    let workers: Vec<WorkerStats> = handles.into_iter().map(|h| h.join().expect("workers do not panic")).collect();
    let elapsed = start.elapsed();
    s.skipped = reader.skipped();
    ended.extend(table.finish());
    ended.sort_by_key(|c| c.id);
    s.scanned_bytes = workers.iter().map(|w| w.scanned_bytes).sum();
    s.skipped_classified += workers.iter().map(|w| w.skipped).sum::<u64>();
    s.inspected -= workers.iter().map(|w| w.skipped).sum::<u64>();
    s.conns = ended
        .into_iter()
        .map(|c| {
            let first = c.data.shared.first_match.load(Ordering::Acquire);
            let matched = (first != u32::MAX).then_some(Protocol((first & 0xffff) as u16));
            let verdict = Verdict::of(matched, c.packets, &config.conn);
            let server_name = c.data.shared.server_name.lock().expect("workers are done").clone();
            ConnResult { id: c.id, key: c.key, verdict, server_name, packets: c.packets, bytes: c.bytes }
        })
        .collect();
    Ok(RunReport { summary: s, workers, migrations, dropped, producer_blocked: blocked, placing, elapsed })
}
