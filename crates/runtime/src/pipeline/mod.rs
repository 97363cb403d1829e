//! The parallel pipeline (Guo §2.4 made real): one producer thread reads the capture, tracks
//! connections and places every connection buffer with a core [`Placer`] on a bounded queue of
//! one of N worker threads; each worker reassembles and inspects what it is given.
//!
//! - **The producer only sorts.** It reads each packet, numbers it within its connection and
//!   places the buffer unit. It does not reassemble: it leaves the packet's payload in the
//!   connection's slot for its number, and whichever worker next inspects the connection feeds
//!   the slots to the connection's [`Assembly`](switchyard_ingest::Assembly) (under the
//!   connection's lock, in packet order) before it scans. In the thesis the preprocessing
//!   thread (libnids) also reassembled; with a fast kernel that left the producer doing three
//!   quarters of the single thread's work, and a
//!   pipeline can go no faster than its producer. Because the assembly only grows, the buffer
//!   of packet `i` is the first `len[i]` bytes of the assembly, whoever fed it and in whatever
//!   order the workers run: the same bytes the serial pipeline scans.
//!
//! - **Load view.** A worker's queue length is what the producer has given it less what it has
//!   finished. The producer keeps the first count to itself; each worker publishes the second
//!   (every [`PUBLISH_EVERY`] buffers and at the end of each batch) on a cache line of its own,
//!   which only it writes. The placer reads the difference through a [`LoadView`], as in the
//!   simulator. One counter that both sides added to and took from moved its cache line between
//!   the cores twice a buffer. A policy that places by the flow alone
//!   ([`Policy::by_flow_alone`](switchyard_core::Policy::by_flow_alone)) is asked once a
//!   connection and reads no load view.
//! - **Nothing shared is counted.** A connection's shared state lives in an arena that outlives
//!   the workers, so a buffer unit carries a plain reference to it: no reference count for the
//!   producer and the worker to pass back and forth. The producer hands a packet over by writing
//!   it, once, into the connection's slot for that packet number; the worker reads the slots up
//!   to its buffer's number. No lock is on the producer's path.
//! - **Full queues.** The producer blocks (the thesis's preprocessing thread sleeps) or, with
//!   [`OnFull::Drop`], drops the buffer and counts it.
//! - **Stale buffers.** Before scanning, a worker checks whether an earlier buffer of the same
//!   connection has already matched, and skips the buffer if so (Guo's MT re-checks the
//!   connection's state). The check is against the *index* of the earliest matching buffer, so
//!   the verdict is the one the serial pipeline gives, whatever the number of workers or the
//!   order in which workers finish: every buffer before the first matching one is scanned.
//! - **Duplicated matches.** A worker that matches a buffer of a connection whose earlier buffer
//!   matched meanwhile on another worker did the work twice; that is counted.
//! - **Pinning.** Workers are pinned to cores where the OS allows, round robin over the cores,
//!   and the producer (the calling thread, for the run) to a core no worker has, if one is left.
//!
//! Here: the producer ([`run_with_progress`]) and the report. What it hands the workers (a
//! connection's shared state and packet slots, the buffer units) is in `shared`; the workers'
//! loop in `worker`.

use std::ops::ControlFlow;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use switchyard_core::{FlowId, FlowKey, LoadView, Placer, Unit, WorkerId};
use switchyard_ingest::{ConnConfig, ConnTable, IngestError, Packet, Packets, SliceReader, Step};
use typed_arena::Arena;

use crate::inspect::{Inspector, Ports};
use crate::serial::{ConnResult, Summary, Verdict};

mod shared;
mod worker;

use shared::{Job, Padded, Piece, PieceSlot, Pieces, Shared};
pub use switchyard_core::OnFull;
pub use worker::PUBLISH_EVERY;
use worker::{Done, WorkerEnd, worker};

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

#[derive(Debug, Default)]
struct Slot<'s, 'a> {
    /// Allocated at the connection's first buffer.
    shared: Option<&'s Shared<'s, 'a>>,
    /// The connection's flow id, computed at its first buffer.
    flow: FlowId,
    last_worker: Option<WorkerId>,
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
    /// CPU time the producer thread used from its first packet to its last buffer handed
    /// over: reading, tracking, placing and handing over, without the workers' start and end
    /// (`None` where the OS has no per-thread CPU clock).
    pub producer_cpu: Option<Duration>,
}

/// Sends a batch, waiting for room (timed into `blocked`) or giving it back when the rule is to
/// drop.
fn hand_over<'s, 'a>(
    tx: &SyncSender<Vec<Job<'s, 'a>>>,
    jobs: Vec<Job<'s, 'a>>,
    on_full: OnFull,
    blocked: &mut Duration,
) -> Result<(), Vec<Job<'s, 'a>>> {
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

/// The calling thread's CPU time so far.
#[cfg(unix)]
fn thread_cpu() -> Option<Duration> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).ok()?;
    Some(Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
}

#[cfg(not(unix))]
fn thread_cpu() -> Option<Duration> {
    None
}

/// One placement in this many is timed, for [`RunReport::placing`].
const PLACING_SAMPLE: u64 = 32;

/// Runs `f`, adding its time (for all of the sample it stands for) to `total`. Kept out of the
/// producer's loop, which then carries no clock code: with the reads inline it ran 2–8 ns a
/// packet slower (runs interleaved with this form, producer CPU time), more than the reads
/// themselves cost (68 ns a pair, once in 32 placements).
#[cold]
#[inline(never)]
fn timed<T>(f: impl FnOnce() -> T, total: &mut Duration) -> T {
    let t = Instant::now();
    let out = f();
    *total += t.elapsed() * PLACING_SAMPLE as u32;
    out
}

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
pub fn run_with_progress<'a>(
    mut reader: SliceReader<'a>,
    placer: &mut dyn Placer,
    config: &PipelineConfig,
    inspector: &Inspector,
    progress: &mut dyn FnMut(usize),
) -> Result<RunReport, IngestError> {
    let n = placer.members().len();
    let ids: Vec<WorkerId> = placer.members().as_slice().iter().map(|m| m.id).collect();
    let max_id = ids.iter().map(|w| w.0 as usize).max().unwrap_or(0);
    let done: Vec<Done> = (0..n).map(|_| Done::default()).collect();
    // Outlive the workers, so that buffer units can borrow from them.
    let shared_arena: Arena<Shared<'_, '_>> = Arena::new();
    let piece_arena: Arena<PieceSlot<'_>> = Arena::new();
    let segment_arena: Arena<OnceLock<&[PieceSlot<'_>]>> = Arena::new();
    let segments = Pieces::segments_for(config.conn.max_packets);
    let cores = if config.pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
    let batch = config.batch.max(1);
    // The placer indexes loads by worker id.
    let mut slot_of = vec![usize::MAX; max_id + 1];
    for (i, w) in ids.iter().enumerate() {
        slot_of[w.0 as usize] = i;
    }
    // A core no worker is pinned to is the producer's: left free, the OS moved it between the
    // cores and its caches went cold with every move (the producer took 137 ns a packet free
    // and 102 pinned, on the labelled sample). With no core to spare it stays free: pinned
    // beside a worker it waited on that worker's full queue a quarter of the time.
    let producer_core = (n < cores.len()).then(|| cores[n].id);
    let by_flow_alone = placer.policy().by_flow_alone();
    let mut run = || {
        std::thread::scope(|scope| {
            let mut senders = Vec::with_capacity(n);
            let mut handles = Vec::with_capacity(n);
            for i in 0..n {
                let (tx, rx) = sync_channel(config.queue_capacity.div_ceil(batch).max(1));
                senders.push(tx);
                let end = WorkerEnd { rx, done: &done[i] };
                let core = (!cores.is_empty()).then(|| cores[i % cores.len()].id);
                let conn = &config.conn;
                // Named, so that `top -H` and profilers tell the workers apart.
                let handle = std::thread::Builder::new()
                    .name(format!("sy-worker-{i}"))
                    .spawn_scoped(scope, move || worker(end, inspector, conn, core))
                    .expect("a thread can be started");
                handles.push(handle);
            }
            let mut pending: Vec<Vec<Job<'_, '_>>> = (0..n).map(|_| Vec::with_capacity(batch)).collect();
            // Buffers and bytes given to each worker (by slot), less any dropped.
            let (mut given, mut given_bytes) = (vec![0u64; n], vec![0u64; n]);
            let mut queues = vec![0u64; max_id + 1];
            let mut queue_bytes = vec![0u64; max_id + 1];
            let mut table: ConnTable<Slot<'_, '_>> = ConnTable::new(config.conn);
            let mut s = Summary::default();
            let (mut migrations, mut dropped, mut placements) = (0, 0, 0u64);
            let (mut blocked, mut placing) = (Duration::ZERO, Duration::ZERO);
            let mut ended = Vec::new();
            let start = Instant::now();
            let cpu_start = thread_cpu();
            // The reader stops every 65,536 packets, for the sweep and a progress report.
            let paused = std::cell::Cell::new(false);
            let mut each = |p: Packet<'a>| {
                s.packets += 1;
                s.payload_bytes += p.payload.len() as u64;
                // Every packet, placed or not, counts toward the pause.
                'placed: {
                    let (conn, index, from_client) = match table.on_packet(&p) {
                        Step::Buffer { conn, index, from_client, .. } => (conn, index, from_client),
                        Step::Beyond { .. } => {
                            s.marked += 1;
                            break 'placed;
                        }
                    };
                    // A connection's first buffer makes its shared state and flow id: the only
                    // use of its tuple, which the table keeps compact and rebuilds on request.
                    if conn.data.shared.is_none() {
                        let key = conn.key();
                        let made = segment_arena.alloc_extend((0..segments).map(|_| OnceLock::new()));
                        let pieces = Pieces::new(made, config.conn.max_packets);
                        conn.data.shared = Some(shared_arena.alloc(Shared {
                            first_match: AtomicU64::new(u64::MAX),
                            lost: AtomicBool::new(false),
                            ports: Ports::of(&key),
                            pieces,
                            work: Padded::default(),
                        }));
                        conn.data.flow = FlowKey::Tuple(key.undirected()).id();
                    }
                    let shared: &Shared<'_, '_> = conn.data.shared.expect("made at the connection's first buffer");
                    let piece = Piece { from_client, tcp: p.tcp, payload: p.payload };
                    // The slot's segment is made with the connection's first packet numbered in it.
                    let alloc = |n| &*piece_arena.alloc_extend((0..n).map(|_| PieceSlot::empty()));
                    let slot = shared.pieces.slot_or_make(index, alloc);
                    // SAFETY: this thread is the producer; the table numbers each packet of a connection
                    // once; and the unit of this index, if any, is made below, after the write. Set
                    // even when no unit is made, so that a later unit (a TLS connection's, whose
                    // ServerHello is still looked for) reassembles every packet before it.
                    unsafe { slot.set(piece) };
                    let first = shared.first_match.load(Ordering::Acquire);
                    if first != u64::MAX && first & shared::MORE == 0 {
                        // Classified before this buffer was made: it is only marked (Guo §2.4, step 2).
                        s.skipped_classified += 1;
                        break 'placed;
                    }
                    let size = conn.bytes.min(config.conn.max_bytes as u64) as u32;
                    let unit = Unit::of_flow(conn.data.flow, u64::from(size)).with_seq(u64::from(index));
                    let mut place = || {
                        for (i, w) in ids.iter().enumerate() {
                            queues[w.0 as usize] = given[i] - done[i].units.load(Ordering::Acquire);
                            queue_bytes[w.0 as usize] = given_bytes[i] - done[i].bytes.load(Ordering::Acquire);
                        }
                        placer.place(&unit, &LoadView::new(&queues, &queue_bytes))
                    };
                    // A policy that places by the flow alone gives a connection's every buffer the
                    // worker it gave the first: asked once, it reads no load view (each read of a
                    // worker's counters can miss in the cache, since the worker writes them).
                    let w = match conn.data.last_worker {
                        Some(w) if by_flow_alone => w,
                        _ => {
                            let w = if placements % PLACING_SAMPLE == 0 { timed(place, &mut placing) } else { place() };
                            placements += 1;
                            w
                        }
                    };
                    if conn.data.last_worker.is_some_and(|prev| prev != w) {
                        migrations += 1;
                    }
                    conn.data.last_worker = Some(w);
                    let slot = slot_of[w.0 as usize];
                    let job = Job { shared, index, size };
                    given[slot] += 1;
                    given_bytes[slot] += u64::from(size);
                    s.inspected += 1;
                    pending[slot].push(job);
                    if pending[slot].len() >= batch {
                        let jobs = std::mem::replace(&mut pending[slot], Vec::with_capacity(batch));
                        if let Err(jobs) = hand_over(&senders[slot], jobs, config.on_full, &mut blocked) {
                            given[slot] -= jobs.len() as u64;
                            given_bytes[slot] -= jobs.iter().map(|j| u64::from(j.size)).sum::<u64>();
                            s.inspected -= jobs.len() as u64;
                            dropped += jobs.len() as u64;
                            for j in &jobs {
                                j.shared.lost.store(true, Ordering::Release);
                            }
                        }
                    }
                }
                if s.packets % 65_536 == 0 {
                    table.expire(p.time_ns);
                    ended.extend(table.take_ended());
                    paused.set(true);
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            };
            let read = loop {
                if let Err(e) = reader.for_each_kept(|_, _| false, &mut each) {
                    break Err(e);
                }
                if !paused.replace(false) {
                    break Ok(());
                }
                progress(reader.position());
            };
            for (tx, jobs) in senders.iter().zip(pending) {
                if !jobs.is_empty() {
                    tx.send(jobs).expect("workers outlive the producer");
                }
            }
            let producer_cpu = thread_cpu().zip(cpu_start).map(|(end, start)| end.saturating_sub(start));
            drop(senders);
            let workers: Vec<WorkerStats> =
                handles.into_iter().map(|h| h.join().expect("workers do not panic")).collect();
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
                    let first = c.data.shared.map_or(u64::MAX, |sh| sh.first_match.load(Ordering::Acquire));
                    let found = (first != u64::MAX).then(|| shared::found_of(first));
                    let matched = found.map(|f| f.protocol);
                    let lost = c.data.shared.is_some_and(|sh| sh.lost.load(Ordering::Acquire));
                    // A buffer dropped at a full queue was never scanned: without a match,
                    // nothing can be said of the connection (it was judged no-match).
                    let verdict = if matched.is_none() && lost {
                        Verdict::Incomplete
                    } else {
                        Verdict::of(matched, c.packets, &config.conn)
                    };
                    let (tls, app) = c.data.shared.map_or((None, None), |sh| {
                        let mut work = sh.work.0.lock().expect("workers are done");
                        work.as_mut().map_or((None, None), |w| (w.tls.take(), w.app.take().and_then(|(_, a)| a)))
                    });
                    let matched_at = matched.map(|_| shared::index_of(first) as u32);
                    ConnResult { matched_at, app, ..ConnResult::new(c.id, c.key(), found, verdict, tls) }.counted(&c)
                })
                .collect();
            Ok(RunReport {
                summary: s,
                workers,
                migrations,
                dropped,
                producer_blocked: blocked,
                placing,
                elapsed,
                producer_cpu,
            })
        })
    };
    match producer_core {
        Some(core) => crate::affinity::on_core(core, run),
        None => run(),
    }
}
