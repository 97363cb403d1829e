//! The parallel pipeline (Guo §2.4 made real): one producer thread reads the capture, tracks
//! connections and places every connection buffer with a core [`Placer`] on a bounded queue of
//! one of N worker threads; each worker reassembles and inspects what it is given.
//!
//! - **The producer only sorts.** It reads each packet, numbers it within its connection and
//!   places the buffer unit. It does not reassemble: it leaves the packet's payload in the
//!   connection's slot for its number, and whichever worker next inspects the connection feeds
//!   the slots to the connection's [`Assembly`] (under the connection's lock, in packet order)
//!   before it scans. In the thesis the preprocessing thread (libnids) also reassembled; with a fast
//!   kernel that left the producer doing three quarters of the single thread's work, and a
//!   pipeline can go no faster than its producer. Because the assembly only grows, the buffer
//!   of packet `i` is the first `len[i]` bytes of the assembly, whoever fed it and in whatever
//!   order the workers run: the same bytes the serial pipeline scans.
//!
//! - **Load view.** A worker's queue length is what the producer has given it less what it has
//!   finished. The producer keeps the first count to itself; each worker publishes the second
//!   (every [`PUBLISH_EVERY`] buffers and at the end of each batch) on a cache line of its own,
//!   which only it writes. The placer reads the difference through a [`LoadView`], as in the
//!   simulator. One counter that both sides added to and took from moved its cache line between
//!   the cores twice a buffer.
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

use std::cell::UnsafeCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use switchyard_core::{FlowId, FlowKey, LoadView, Placer, Unit, WorkerId};
use switchyard_ingest::{Assembly, ConnConfig, ConnTable, IngestError, Packets, SliceReader, Step, Tcp};

use typed_arena::Arena;

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

/// The shared state of one connection, allocated in the run's arena.
///
/// `first_match` is the earliest matching buffer, packed as `index << 16 | protocol`, or
/// `u32::MAX` while none has matched. The producer reads it for every packet and writes each
/// of `pieces` once; workers take `work`'s lock, feed the assembly from `pieces` and scan. The
/// lock sits on cache lines of its own so that taking it does not evict what the producer reads.
#[derive(Debug)]
struct Shared<'s, 'a> {
    first_match: AtomicU32,
    /// The connection's buffered packets, by number: slot `i` is set before buffer `i` is sent.
    pieces: &'s [PieceSlot<'a>],
    work: Padded<Mutex<Assembled>>,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// A packet the producer has numbered and no worker has yet fed to the assembly. Its payload
/// is borrowed from the capture, which outlives the workers: nothing is copied.
#[derive(Clone, Copy, Debug, Default)]
struct Piece<'a> {
    from_client: bool,
    tcp: Option<Tcp>,
    payload: &'a [u8],
}

/// Where the producer leaves a connection's packet `i` for the workers: written once, by the
/// producer, before any buffer unit of index `i` or later exists; read by a worker only once it
/// holds such a unit, received through its queue. The queue orders the two (its send releases
/// what the producer wrote before, its receive acquires it), so the slot needs no lock and no
/// atomic of its own. A `OnceLock` per slot did the same with a compare-and-swap and a closure
/// call per packet, 3–5% of the producer's time.
struct PieceSlot<'a>(UnsafeCell<Piece<'a>>);

// SAFETY: shared between the producer and the workers under the protocol of `set` and `get`:
// one write, ordered before every read by the worker queues' release and acquire.
unsafe impl Sync for PieceSlot<'_> {}

impl<'a> PieceSlot<'a> {
    fn empty() -> Self {
        Self(UnsafeCell::new(Piece::default()))
    }

    /// # Safety
    /// Only the producer calls this, at most once per slot, and before it creates any buffer
    /// unit whose index is this slot's or later (so no worker can be reading the slot).
    unsafe fn set(&self, piece: Piece<'a>) {
        // SAFETY: by the contract, no other thread accesses the slot now.
        unsafe { *self.0.get() = piece }
    }

    /// # Safety
    /// The caller received, through a worker queue, a buffer unit of this connection whose
    /// index is this slot's or later: the slot was written before that unit was sent and is
    /// never written again.
    unsafe fn get(&self) -> Piece<'a> {
        // SAFETY: by the contract, the write happened before, and no write can follow.
        unsafe { *self.0.get() }
    }
}

impl std::fmt::Debug for PieceSlot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PieceSlot")
    }
}

/// The connection's assembly, its length after each packet fed to it, and the TLS server name
/// if a worker found one.
#[derive(Debug, Default)]
struct Assembled {
    assembly: Assembly,
    len_after: Vec<u32>,
    server_name: Option<String>,
}

impl Assembled {
    /// Feeds the packets up to number `index`, in order, from the connection's slots.
    fn take_in(&mut self, pieces: &[PieceSlot<'_>], index: usize, config: &ConnConfig) {
        while self.len_after.len() <= index {
            // SAFETY: the caller holds the connection's buffer unit `index`, received through
            // its queue, and feeds only slots up to it.
            let piece = unsafe { pieces[self.len_after.len()].get() };
            let len = self.assembly.push(config, piece.from_client, piece.tcp, piece.payload);
            self.len_after.push(len as u32);
        }
    }
}

#[derive(Debug, Default)]
struct Slot<'s, 'a> {
    /// Allocated at the connection's first buffer.
    shared: Option<&'s Shared<'s, 'a>>,
    /// The connection's flow id, computed at its first buffer.
    flow: Option<FlowId>,
    last_worker: Option<WorkerId>,
}

struct Job<'s, 'a> {
    shared: &'s Shared<'s, 'a>,
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
    /// CPU time the producer thread used from its first packet to its last buffer handed
    /// over: reading, tracking, placing and handing over, without the workers' start and end
    /// (`None` where the OS has no per-thread CPU clock).
    pub producer_cpu: Option<Duration>,
}

/// One worker's end of its queue, and its count of finished buffers in the load view.
struct WorkerEnd<'s, 'a> {
    rx: Receiver<Vec<Job<'s, 'a>>>,
    done: &'s Done,
}

/// Buffers a worker has finished, and their bytes: written only by the worker, read by the
/// producer. Each worker's pair has a cache line of its own, so one worker's progress does not
/// evict the line the producer reads for the other.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Done {
    units: AtomicU64,
    bytes: AtomicU64,
}

/// A worker publishes its progress after this many buffers (and at the end of each batch):
/// often enough for a load-aware placer to see a queue drain within a batch, rarely enough that
/// the producer's reads seldom miss.
pub const PUBLISH_EVERY: u64 = 16;

fn worker(end: WorkerEnd<'_, '_>, inspector: &Inspector, config: &ConnConfig, core: Option<usize>) -> WorkerStats {
    let mut stats = WorkerStats { core, ..WorkerStats::default() };
    if let Some(id) = core {
        stats.core = core_affinity::set_for_current(core_affinity::CoreId { id }).then_some(id);
    }
    let (mut units, mut bytes) = (0u64, 0u64);
    let publish = |units: u64, bytes: u64| {
        end.done.units.store(units, Ordering::Release);
        end.done.bytes.store(bytes, Ordering::Release);
    };
    // Timed per batch, not per buffer: reading the clock twice per buffer was 6% of the run.
    while let Some(batch) = next_batch(&end.rx) {
        let started = Instant::now();
        for job in batch {
            inspect(&job, inspector, config, &mut stats);
            units += 1;
            bytes += u64::from(job.size);
            if units % PUBLISH_EVERY == 0 {
                publish(units, bytes);
            }
        }
        publish(units, bytes);
        stats.busy += started.elapsed();
    }
    stats
}

/// How long an idle worker keeps looking for its next batch before it sleeps.
const IDLE_SPIN: Duration = Duration::from_micros(50);

/// The worker's next batch, `None` when the producer is done. A worker that finds its queue
/// empty yields its core for a while before it sleeps: a sleeping worker must be woken by the
/// producer with a system call, which on a virtual machine cost more than the batch's scanning
/// (a tenth of the producer's time went to waking workers).
fn next_batch<'s, 'a>(rx: &Receiver<Vec<Job<'s, 'a>>>) -> Option<Vec<Job<'s, 'a>>> {
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
fn inspect(job: &Job<'_, '_>, inspector: &Inspector, config: &ConnConfig, stats: &mut WorkerStats) {
    let first = job.shared.first_match.load(Ordering::Acquire);
    if first >> 16 < job.index {
        stats.skipped += 1;
        return;
    }
    let mut assembled = job.shared.work.0.lock().expect("no thread panics holding it");
    assembled.take_in(job.shared.pieces, job.index as usize, config);
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
            assembled.server_name = Some(name.to_owned());
        }
    }
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
    let done: Vec<Done> = (0..n).map(|_| Done::default()).collect();
    // Outlive the workers, so that buffer units can borrow from them.
    let shared_arena: Arena<Shared<'_, '_>> = Arena::new();
    let piece_arena: Arena<PieceSlot<'_>> = Arena::new();
    let max_packets = config.conn.max_packets as usize;
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
                let shared: &Shared<'_, '_> = conn.data.shared.get_or_insert_with(|| {
                    let pieces = piece_arena.alloc_extend((0..max_packets).map(|_| PieceSlot::empty()));
                    shared_arena.alloc(Shared {
                        first_match: AtomicU32::new(u32::MAX),
                        pieces,
                        work: Padded::default(),
                    })
                });
                if shared.first_match.load(Ordering::Acquire) != u32::MAX {
                    // Classified before this buffer was made: it is only marked (Guo §2.4, step 2).
                    s.skipped_classified += 1;
                    continue;
                }
                let piece = Piece { from_client, tcp: p.tcp, payload: p.payload };
                // SAFETY: this thread is the producer; the table numbers each packet of a connection
                // once; and the unit of this index is made below, after the write.
                unsafe { shared.pieces[index as usize].set(piece) };
                let size = conn.bytes.min(config.conn.max_bytes as u64) as u32;
                let key = conn.key;
                let flow = *conn.data.flow.get_or_insert_with(|| FlowKey::Tuple(key.undirected()).id());
                let unit = Unit::of_flow(flow, u64::from(size)).with_seq(u64::from(index));
                let mut place = || {
                    for (i, w) in ids.iter().enumerate() {
                        queues[w.0 as usize] = given[i] - done[i].units.load(Ordering::Acquire);
                        queue_bytes[w.0 as usize] = given_bytes[i] - done[i].bytes.load(Ordering::Acquire);
                    }
                    placer.place(&unit, &LoadView::new(&queues, &queue_bytes))
                };
                let w = if placements % PLACING_SAMPLE == 0 { timed(place, &mut placing) } else { place() };
                placements += 1;
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
                    let first = c.data.shared.map_or(u32::MAX, |sh| sh.first_match.load(Ordering::Acquire));
                    let matched = (first != u32::MAX).then_some(Protocol((first & 0xffff) as u16));
                    let verdict = Verdict::of(matched, c.packets, &config.conn);
                    let server_name =
                        c.data.shared.and_then(|sh| sh.work.0.lock().expect("workers are done").server_name.take());
                    let matched_at = matched.map(|_| first >> 16);
                    ConnResult {
                        id: c.id,
                        key: c.key,
                        verdict,
                        server_name,
                        matched_at,
                        packets: c.packets,
                        bytes: c.bytes,
                    }
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
