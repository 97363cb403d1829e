//! The parallel pipeline (Guo §2.4 made real): one producer thread reads the capture, tracks
//! connections and places every connection buffer with a core [`Placer`] on a bounded queue of
//! one of N worker threads; each worker reassembles and inspects what it is given.
//!
//! - **The producer only sorts.** It reads each packet, numbers it within its connection and
//!   places the buffer unit. It does not reassemble: it appends the packet's payload to the
//!   connection's inbox, and whichever worker next inspects the connection feeds the inbox to
//!   the connection's [`Assembly`] (under the connection's lock, in packet order) before it
//!   scans. In the thesis the preprocessing thread (libnids) also reassembled; with a fast
//!   kernel that left the producer doing three quarters of the single thread's work, and a
//!   pipeline can go no faster than its producer. Because the assembly only grows, the buffer
//!   of packet `i` is the first `len[i]` bytes of the assembly, whoever fed it and in whatever
//!   order the workers run: the same bytes the serial pipeline scans.
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
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use switchyard_core::{FlowId, FlowKey, LoadView, Placer, Unit, WorkerId};
use switchyard_ingest::{Assembly, ConnConfig, ConnTable, IngestError, Packets, SliceReader, Step, Tcp};

use crate::inspect::{Inspector, Protocol, tls};
use crate::serial::{ConnResult, Summary, Verdict};

pub use switchyard_core::OnFull;

/// How to run.
#[derive(Clone, Debug)]
pub struct PipelineConfig {
    /// Connection tracking.
    pub conn: ConnConfig,
    /// Buffers a worker's queue holds (1,024 by default: with batches of 128, eight batches, so
    /// a worker has work while the producer, which shares a core with it when there are as many
    /// workers as cores, is descheduled).
    pub queue_capacity: usize,
    /// Full-queue rule.
    pub on_full: OnFull,
    /// Pin workers to cores.
    pub pin: bool,
    /// Buffers handed to a worker at once, and at the end of the capture. Handing them over one
    /// by one wakes a sleeping worker per buffer, which costs more than a small buffer's scan;
    /// batches amortise the wake-up (measured on 2 cores, 2 workers: batches of 16 in queues of 64
    /// ran at 0.25–0.6× the single thread, batches of 256 in queues of 1,024 at 0.85–1.15×). A batch waits until it is full, which suits captures, where the producer runs
    /// ahead; on a live link a slow trickle of packets would wait for its batch to fill. Its
    /// buffers count as queued in the load view from the moment they join it.
    pub batch: usize,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self { conn: ConnConfig::default(), queue_capacity: 1024, on_full: OnFull::Block, pin: true, batch: 128 }
    }
}

/// The shared state of one connection.
///
/// `first_match` is the earliest matching buffer, packed as `index << 16 | protocol`, or
/// `u32::MAX` while none has matched. The producer appends packets to `inbox`; a worker moves
/// them into `assembled` (holding its lock, then the inbox's: always in that order) and scans
/// with `assembled` held, so the producer, which takes only the inbox's lock, never waits for a
/// scan.
#[derive(Debug)]
struct Shared<'a> {
    first_match: AtomicU32,
    server_name: Mutex<Option<String>>,
    inbox: Mutex<Vec<Piece<'a>>>,
    assembled: Mutex<Assembled>,
}

impl Default for Shared<'_> {
    fn default() -> Self {
        Self {
            first_match: AtomicU32::new(u32::MAX),
            server_name: Mutex::new(None),
            inbox: Mutex::new(Vec::new()),
            assembled: Mutex::new(Assembled::default()),
        }
    }
}

/// A packet the producer has numbered and no worker has yet fed to the assembly. Its payload
/// is borrowed from the capture, which outlives the workers: nothing is copied.
#[derive(Clone, Copy, Debug)]
struct Piece<'a> {
    from_client: bool,
    tcp: Option<Tcp>,
    payload: &'a [u8],
}

/// The connection's assembly and its length after each packet fed to it.
#[derive(Debug, Default)]
struct Assembled {
    assembly: Assembly,
    len_after: Vec<u32>,
}

impl Assembled {
    /// Feeds every packet waiting in `inbox`, in the order the producer numbered them.
    fn take_in(&mut self, inbox: &mut Vec<Piece<'_>>, config: &ConnConfig) {
        for piece in inbox.drain(..) {
            let len = self.assembly.push(config, piece.from_client, piece.tcp, piece.payload);
            self.len_after.push(len as u32);
        }
    }
}

#[derive(Debug, Default)]
struct Slot<'a> {
    shared: Arc<Shared<'a>>,
    /// The connection's flow id, computed at its first buffer.
    flow: Option<FlowId>,
    last_worker: Option<WorkerId>,
}

struct Job<'a> {
    shared: Arc<Shared<'a>>,
    index: u32,
    /// What the producer counted as the buffer's length in the load view: the connection's
    /// payload bytes so far, up to the byte limit (the buffer's length unless segments were
    /// retransmitted or held behind a gap).
    size: u32,
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
    /// Time spent on its batches: reassembling, scanning, and skipping stale buffers.
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
    /// Time the producer spent placing buffers (the placer's decisions and reading the load
    /// view), estimated by timing one placement in 32 (timing each would cost as much as many
    /// of the decisions it times).
    pub placing: Duration,
    /// Wall time from the first packet read to the last worker done.
    pub elapsed: Duration,
}

/// One worker's end of its queue, and its queue-length counters in the load view.
struct WorkerEnd<'a> {
    rx: Receiver<Vec<Job<'a>>>,
    depth: &'a Depth,
}

/// A worker's queue length, in buffers and in bytes. Each worker's pair has a cache line of its
/// own: packed side by side, every buffer one worker finished would evict the line the other
/// worker and the producer were reading.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Depth {
    units: AtomicU64,
    bytes: AtomicU64,
}

impl Depth {
    fn add(&self, size: u32) {
        self.units.fetch_add(1, Ordering::AcqRel);
        self.bytes.fetch_add(u64::from(size), Ordering::AcqRel);
    }

    fn sub(&self, size: u32) {
        self.units.fetch_sub(1, Ordering::AcqRel);
        self.bytes.fetch_sub(u64::from(size), Ordering::AcqRel);
    }
}

fn worker(end: WorkerEnd<'_>, inspector: &Inspector, config: &ConnConfig, core: Option<usize>) -> WorkerStats {
    let mut stats = WorkerStats { core, ..WorkerStats::default() };
    if let Some(id) = core {
        stats.core = core_affinity::set_for_current(core_affinity::CoreId { id }).then_some(id);
    }
    // Timed per batch, not per buffer: reading the clock twice per buffer was 6% of the run.
    for batch in end.rx {
        let started = Instant::now();
        for job in batch {
            inspect(&job, inspector, config, &mut stats);
            end.depth.sub(job.size);
        }
        stats.busy += started.elapsed();
    }
    stats
}

/// One buffer: skipped if an earlier buffer of its connection has matched, otherwise
/// reassembled as far as it reaches and scanned.
fn inspect(job: &Job<'_>, inspector: &Inspector, config: &ConnConfig, stats: &mut WorkerStats) {
    let first = job.shared.first_match.load(Ordering::Acquire);
    if first >> 16 < job.index {
        stats.skipped += 1;
        return;
    }
    let mut assembled = job.shared.assembled.lock().expect("no thread panics holding it");
    if assembled.len_after.len() <= job.index as usize {
        let mut inbox = job.shared.inbox.lock().expect("no thread panics holding it");
        assembled.take_in(&mut inbox, config);
    }
    // The producer put this job's packet in the inbox before it sent the job.
    let len = assembled.len_after[job.index as usize] as usize;
    let buffer = &assembled.assembly.buffer()[..len];
    stats.scanned += 1;
    stats.scanned_bytes += len as u64;
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
}

/// Sends a batch, waiting for room (timed into `blocked`) or giving it back when the rule is to
/// drop.
fn hand_over<'a>(
    tx: &SyncSender<Vec<Job<'a>>>,
    jobs: Vec<Job<'a>>,
    on_full: OnFull,
    blocked: &mut Duration,
) -> Result<(), Vec<Job<'a>>> {
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

/// One placement in this many is timed, for [`RunReport::placing`].
const PLACING_SAMPLE: u64 = 32;

/// Reads `reader` to the end on the calling thread, placing every connection buffer with
/// `placer` on one of its workers' threads.
pub fn run(
    reader: SliceReader<'_>,
    placer: &mut dyn Placer,
    config: &PipelineConfig,
    inspector: &Inspector,
) -> Result<RunReport, IngestError> {
    run_with_progress(reader, placer, config, inspector, &mut |_| {})
}

/// [`run`], calling `progress(bytes of the capture read so far)` now and then.
pub fn run_with_progress(
    mut reader: SliceReader<'_>,
    placer: &mut dyn Placer,
    config: &PipelineConfig,
    inspector: &Inspector,
    progress: &mut dyn FnMut(usize),
) -> Result<RunReport, IngestError> {
    let n = placer.members().len();
    let ids: Vec<WorkerId> = placer.members().as_slice().iter().map(|m| m.id).collect();
    let max_id = ids.iter().map(|w| w.0 as usize).max().unwrap_or(0);
    let depths: Vec<Depth> = (0..n).map(|_| Depth::default()).collect();
    let cores = if config.pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
    let batch = config.batch.max(1);
    // The placer indexes loads by worker id.
    let mut slot_of = vec![usize::MAX; max_id + 1];
    for (i, w) in ids.iter().enumerate() {
        slot_of[w.0 as usize] = i;
    }
    std::thread::scope(|scope| {
        let mut senders = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = sync_channel(config.queue_capacity.div_ceil(batch).max(1));
            senders.push(tx);
            let end = WorkerEnd { rx, depth: &depths[i] };
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()].id);
            let conn = &config.conn;
            // Named, so that `top -H` and profilers tell the workers apart.
            let handle = std::thread::Builder::new()
                .name(format!("sy-worker-{i}"))
                .spawn_scoped(scope, move || worker(end, inspector, conn, core))
                .expect("a thread can be started");
            handles.push(handle);
        }
        let mut pending: Vec<Vec<Job<'_>>> = (0..n).map(|_| Vec::with_capacity(batch)).collect();
        let mut queues = vec![0u64; max_id + 1];
        let mut queue_bytes = vec![0u64; max_id + 1];
        let mut table: ConnTable<Slot<'_>> = ConnTable::new(config.conn);
        let mut s = Summary::default();
        let (mut migrations, mut dropped, mut placements) = (0, 0, 0u64);
        let (mut blocked, mut placing) = (Duration::ZERO, Duration::ZERO);
        let mut ended = Vec::new();
        let start = Instant::now();
        let read = loop {
            let p = match reader.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            s.packets += 1;
            s.payload_bytes += p.payload.len() as u64;
            let (conn, index, from_client) = match table.on_packet(&p) {
                Step::Buffer { conn, index, from_client, .. } => (conn, index, from_client),
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
            conn.data.shared.inbox.lock().expect("no thread panics holding it").push(Piece {
                from_client,
                tcp: p.tcp,
                payload: p.payload,
            });
            let size = conn.bytes.min(config.conn.max_bytes as u64) as u32;
            let timed = placements % PLACING_SAMPLE == 0;
            placements += 1;
            let t = timed.then(Instant::now);
            for (w, d) in ids.iter().zip(&depths) {
                queues[w.0 as usize] = d.units.load(Ordering::Acquire);
                queue_bytes[w.0 as usize] = d.bytes.load(Ordering::Acquire);
            }
            let key = conn.key;
            let flow = *conn.data.flow.get_or_insert_with(|| FlowKey::Tuple(key.undirected()).id());
            let unit = Unit::of_flow(flow, u64::from(size)).with_seq(u64::from(index));
            let w = placer.place(&unit, &LoadView::new(&queues, &queue_bytes));
            if let Some(t) = t {
                placing += t.elapsed() * PLACING_SAMPLE as u32;
            }
            if conn.data.last_worker.is_some_and(|prev| prev != w) {
                migrations += 1;
            }
            conn.data.last_worker = Some(w);
            let slot = slot_of[w.0 as usize];
            let job = Job { shared: Arc::clone(&conn.data.shared), index, size };
            depths[slot].add(size);
            s.inspected += 1;
            pending[slot].push(job);
            if pending[slot].len() >= batch {
                let jobs = std::mem::replace(&mut pending[slot], Vec::with_capacity(batch));
                if let Err(jobs) = hand_over(&senders[slot], jobs, config.on_full, &mut blocked) {
                    for job in &jobs {
                        depths[slot].sub(job.size);
                    }
                    s.inspected -= jobs.len() as u64;
                    dropped += jobs.len() as u64;
                }
            }
            if s.packets % 65_536 == 0 {
                table.expire(p.time_ns);
                ended.extend(table.take_ended());
                progress(reader.position());
            }
        };
        for (tx, jobs) in senders.iter().zip(pending) {
            if !jobs.is_empty() {
                tx.send(jobs).expect("workers outlive the producer");
            }
        }
        drop(senders);
        let workers: Vec<WorkerStats> = handles.into_iter().map(|h| h.join().expect("workers do not panic")).collect();
        read?;
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
    })
}
