//! `bench shm`: the shared-memory ring (`switchyard-shmring`) against the carries a program on one
//! host would otherwise use, in one run: a Unix domain socket pair, loopback TCP, and a `memfd`
//! written and read with system calls, its slots handed over through pipes. XenSocket's
//! comparison (notes 004a §10 (d)) for messages of 512 B to 64 MiB, with each side's CPU time per
//! byte beside the throughput, and the round-trip time of a 64-byte ping-pong.
//!
//! As netperf did there, the writer sends the same buffer again and again and the reader takes
//! whole messages into one buffer, so the data stays in cache: the figures are of the carry,
//! not of memory. Each case is run `runs` times, each carry in turn so that all meet the
//! machine in the same moods, and the median run is kept.
//!
//! The `memfd` + pipe baseline is the ring's idea done with the kernel's help at every step: the
//! same shared file, but each slot is copied in with `pwrite`, out with `pread`, and announced
//! with a one-byte pipe write each way. What the ring saves over it is the system calls and
//! the wake-ups, not the sharing.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use switchyard_shmring::{Reader, RingError, Writer, channel};

use crate::report::{Chart, Claim, ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec, Value};

/// One way of carrying bytes between two threads of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// The shared-memory ring.
    Ring,
    /// An `AF_UNIX` stream socket pair with the kernel's default buffers.
    Unix,
    /// A TCP connection over loopback, Nagle off.
    Tcp,
    /// A `memfd` of four slots, `pwrite`/`pread`, slots announced through two pipes.
    MemfdPipe,
}

impl Kind {
    /// Every carry, in the order printed.
    pub const ALL: [Self; 4] = [Self::Ring, Self::Unix, Self::Tcp, Self::MemfdPipe];

    /// The name printed.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ring => "ring",
            Self::Unix => "unix",
            Self::Tcp => "tcp",
            Self::MemfdPipe => "memfd+pipe",
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Message sizes, bytes.
    pub sizes: Vec<usize>,
    /// Bytes moved per run (at least one message; at most `max_messages`).
    pub bytes: usize,
    /// The most messages in one run, so that small messages do not take minutes.
    pub max_messages: usize,
    /// Runs per case (the median is kept).
    pub runs: usize,
    /// The ring's data area, bytes (XenSocket's was 128 KB).
    pub ring: usize,
}

/// The message sizes run by default: XenSocket's figure's range, denser where issue 25's goals
/// are judged (16 KiB to 2 MiB).
pub const SIZES: [usize; 12] =
    [512, 2 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 8 << 20, 64 << 20];

impl Default for Setup {
    /// [`SIZES`], 256 MiB (or 100,000 messages) a run, 3 runs, a 256 KiB ring.
    ///
    /// The ring is twice XenSocket's: here, with 128 KiB, the CPU ratio at some sizes came out
    /// at 0.54–0.59 in runs where 256 KiB gave 0.42–0.43 (alternating runs, same sizes); each
    /// side then copies 64 KiB between handovers instead of 32 KiB.
    fn default() -> Self {
        Self { sizes: SIZES.to_vec(), bytes: 256 << 20, max_messages: 100_000, runs: 3, ring: 256 << 10 }
    }
}

/// One carry at one message size (the median run).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Carry {
    /// Gigabits per second.
    pub gbps: f64,
    /// The writer's CPU time per byte, ns.
    pub writer_ns_per_byte: f64,
    /// The reader's CPU time per byte, ns.
    pub reader_ns_per_byte: f64,
}

impl Carry {
    /// Both sides' CPU time per byte, ns.
    pub fn ns_per_byte(&self) -> f64 {
        self.writer_ns_per_byte + self.reader_ns_per_byte
    }
}

/// Every carry at one message size.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The message size, bytes.
    pub size: usize,
    /// Each carry run, in [`Kind::ALL`]'s order.
    pub carries: Vec<(Kind, Carry)>,
}

impl Row {
    /// The carry of `kind`, if it was run.
    pub fn get(&self, kind: Kind) -> Option<Carry> {
        self.carries.iter().find(|(k, _)| *k == kind).map(|&(_, c)| c)
    }

    /// The ring's throughput over the Unix socket's.
    pub fn throughput_ratio(&self) -> Option<f64> {
        Some(self.get(Kind::Ring)?.gbps / self.get(Kind::Unix)?.gbps)
    }

    /// Both sides' CPU per byte, the ring's over the Unix socket's.
    pub fn cpu_ratio(&self) -> Option<f64> {
        Some(self.get(Kind::Ring)?.ns_per_byte() / self.get(Kind::Unix)?.ns_per_byte())
    }
}

/// Issue 25's goals, at every message size in [`GOAL_SIZES`]: at least this times the Unix
/// socket's throughput...
pub const GOAL_THROUGHPUT: f64 = 2.0;
/// ...and at most this times its CPU per byte.
pub const GOAL_CPU: f64 = 0.5;
/// The message sizes the goals are judged at, bytes.
pub const GOAL_SIZES: std::ops::RangeInclusive<usize> = (16 << 10)..=(2 << 20);

/// The ratios' ranges over the sizes in [`GOAL_SIZES`], and whether the goals were met.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// The ring's throughput over the socket's, lowest and highest.
    pub throughput: (f64, f64),
    /// The ring's CPU per byte over the socket's, lowest and highest.
    pub cpu: (f64, f64),
}

impl Summary {
    /// Over the `rows` in [`GOAL_SIZES`] that ran both the ring and the socket; `None` when
    /// there are none.
    pub fn of(rows: &[Row]) -> Option<Self> {
        let judged: Vec<&Row> = rows.iter().filter(|r| GOAL_SIZES.contains(&r.size)).collect();
        let range = |f: fn(&Row) -> Option<f64>| {
            let values: Vec<f64> = judged.iter().filter_map(|r| f(r)).collect();
            let lo = values.iter().copied().reduce(f64::min)?;
            Some((lo, values.iter().copied().fold(lo, f64::max)))
        };
        Some(Self { throughput: range(Row::throughput_ratio)?, cpu: range(Row::cpu_ratio)? })
    }

    /// At least [`GOAL_THROUGHPUT`] at every judged size.
    pub fn throughput_met(&self) -> bool {
        self.throughput.0 >= GOAL_THROUGHPUT
    }

    /// At most [`GOAL_CPU`] at every judged size.
    pub fn cpu_met(&self) -> bool {
        self.cpu.1 <= GOAL_CPU
    }
}

/// Round trips of a 64-byte message over one carry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latency {
    /// The carry.
    pub kind: Kind,
    /// The median round trip, µs.
    pub median_us: f64,
    /// The 99th percentile, µs.
    pub p99_us: f64,
}

/// The ping-pong's message size, bytes.
pub const PING: usize = 64;

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum ShmError {
    /// The ring refused.
    #[error("ring: {0}")]
    Ring(#[from] RingError),
    /// A socket, pipe or memfd failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A side's thread panicked.
    #[error("a {0} thread panicked")]
    Panicked(&'static str),
}

impl From<nix::errno::Errno> for ShmError {
    fn from(e: nix::errno::Errno) -> Self {
        Self::Io(e.into())
    }
}

/// Runs every size, advancing `progress` per run of a carry.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>, ShmError> {
    let mut rows = Vec::new();
    progress.stage("bench shm: runs", (s.sizes.len() * s.runs.max(1) * Kind::ALL.len()) as u64);
    for &size in &s.sizes {
        let count = (s.bytes / size).clamp(1, s.max_messages.max(1));
        let mut runs: Vec<(Kind, Vec<Carry>)> = Kind::ALL.iter().map(|&k| (k, Vec::new())).collect();
        for _ in 0..s.runs.max(1) {
            for (kind, done) in &mut runs {
                done.push(carry_one(*kind, size, count, s.ring)?);
                progress.advance(1);
            }
        }
        rows.push(Row { size, carries: runs.into_iter().map(|(k, r)| (k, median(r))).collect() });
    }
    Ok(rows)
}

fn median(mut runs: Vec<Carry>) -> Carry {
    runs.sort_by(|a, b| a.gbps.total_cmp(&b.gbps));
    runs[runs.len() / 2]
}

fn carry_one(kind: Kind, size: usize, count: usize, ring: usize) -> Result<Carry, ShmError> {
    match kind {
        Kind::Ring => {
            let (writer, reader) = channel(ring)?;
            timed(size, count, Box::new(writer), Box::new(reader))
        }
        Kind::Unix => {
            let (tx, rx) = UnixStream::pair()?;
            timed(size, count, Box::new(tx), Box::new(rx))
        }
        Kind::Tcp => {
            let (tx, rx) = tcp_pair()?;
            timed(size, count, Box::new(tx), Box::new(rx))
        }
        Kind::MemfdPipe => {
            let (tx, rx) = memfd_pipe(size)?;
            timed(size, count, Box::new(tx), Box::new(rx))
        }
    }
}

/// The sending side of a carry, as the bench drives it.
trait Tx: Send {
    fn send(&mut self, msg: &[u8]) -> Result<(), ShmError>;
}

/// The receiving side: fills `buf` with exactly one message.
trait Rx {
    fn receive(&mut self, buf: &mut [u8]) -> Result<(), ShmError>;
}

impl Tx for Writer {
    fn send(&mut self, msg: &[u8]) -> Result<(), ShmError> {
        Ok(self.write_all(msg)?)
    }
}

impl Rx for Reader {
    fn receive(&mut self, buf: &mut [u8]) -> Result<(), ShmError> {
        let mut got = 0;
        while got < buf.len() {
            match self.read(&mut buf[got..])? {
                0 => return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into()),
                n => got += n,
            }
        }
        Ok(())
    }
}

/// Sockets and pipes: `write_all` and `read_exact`.
macro_rules! stream_carry {
    ($($t:ty),*) => {$(
        impl Tx for $t {
            fn send(&mut self, msg: &[u8]) -> Result<(), ShmError> {
                Ok(self.write_all(msg)?)
            }
        }
        impl Rx for $t {
            fn receive(&mut self, buf: &mut [u8]) -> Result<(), ShmError> {
                Ok(self.read_exact(buf)?)
            }
        }
    )*};
}
stream_carry!(UnixStream, TcpStream);

/// A loopback TCP connection's two ends, Nagle off (as a program sending messages would).
fn tcp_pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let tx = TcpStream::connect(listener.local_addr()?)?;
    let (rx, _) = listener.accept()?;
    for s in [&tx, &rx] {
        s.set_nodelay(true)?;
    }
    Ok((tx, rx))
}

/// Slots in the `memfd` baseline: enough that the writer fills one while the reader empties
/// another.
const SLOTS: usize = 4;
/// The largest slot: bigger messages go through in slot-sized pieces, as through a ring.
const SLOT_MAX: usize = 256 << 10;

/// One side of the `memfd` + pipe baseline: the shared file, the pipe it takes slot numbers
/// from and the one it gives them to.
struct MemfdEnd {
    file: File,
    slot: usize,
    take: std::io::PipeReader,
    give: std::io::PipeWriter,
}

impl MemfdEnd {
    fn take(&mut self) -> Result<u64, ShmError> {
        let mut token = [0u8];
        self.take.read_exact(&mut token)?;
        Ok(u64::from(token[0]) * self.slot as u64)
    }

    fn give(&mut self, offset: u64) -> Result<(), ShmError> {
        match self.give.write_all(&[(offset / self.slot as u64) as u8]) {
            // The writer has sent its last slot and gone: nobody needs this one back.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            done => Ok(done?),
        }
    }
}

/// The writer's and the reader's ends of the baseline for messages of `size` bytes.
fn memfd_pipe(size: usize) -> Result<(MemfdEnd, MemfdEnd), ShmError> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let slot = size.clamp(1, SLOT_MAX);
    let file = File::from(memfd_create("switchyard-bench", MFdFlags::MFD_CLOEXEC)?);
    file.set_len((SLOTS * slot) as u64)?;
    let (full_rx, full_tx) = std::io::pipe()?;
    let (free_rx, mut free_tx) = std::io::pipe()?;
    free_tx.write_all(&(0..SLOTS as u8).collect::<Vec<_>>())?;
    let writer = MemfdEnd { file: file.try_clone()?, slot, take: free_rx, give: full_tx };
    Ok((writer, MemfdEnd { file, slot, take: full_rx, give: free_tx }))
}

impl Tx for MemfdEnd {
    fn send(&mut self, msg: &[u8]) -> Result<(), ShmError> {
        for piece in msg.chunks(self.slot) {
            let at = self.take()?;
            self.file.write_all_at(piece, at)?;
            self.give(at)?;
        }
        Ok(())
    }
}

impl Rx for MemfdEnd {
    fn receive(&mut self, buf: &mut [u8]) -> Result<(), ShmError> {
        let slot = self.slot;
        for piece in buf.chunks_mut(slot) {
            let at = self.take()?;
            self.file.read_exact_at(piece, at)?;
            self.give(at)?;
        }
        Ok(())
    }
}

/// The calling thread's CPU time so far.
fn thread_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(Duration::ZERO, |t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
}

/// Times one transfer of `count` messages of `size` bytes: the sender on a thread of its own,
/// the receiver on this one.
fn timed(
    size: usize,
    count: usize,
    mut tx: Box<dyn Tx + 'static>,
    mut rx: Box<dyn Rx + '_>,
) -> Result<Carry, ShmError> {
    let start = Instant::now();
    let sender = std::thread::spawn(move || {
        let cpu = thread_cpu();
        let msg = vec![0x5au8; size];
        (0..count).try_for_each(|_| tx.send(&msg)).map(|()| thread_cpu() - cpu)
    });
    let cpu = thread_cpu();
    let mut buf = vec![0u8; size];
    let received = (0..count).try_for_each(|_| rx.receive(&mut buf));
    let reader_cpu = thread_cpu() - cpu;
    let elapsed = start.elapsed();
    // A failed receiver drops its end first, so that a sender waiting on it fails too.
    drop(rx);
    let writer_cpu = sender.join().map_err(|_| ShmError::Panicked("writer"))?;
    received?;
    let writer_cpu = writer_cpu?;
    let bytes = (size * count) as f64;
    Ok(Carry {
        gbps: bytes * 8.0 / elapsed.as_secs_f64() / 1e9,
        writer_ns_per_byte: writer_cpu.as_nanos() as f64 / bytes,
        reader_ns_per_byte: reader_cpu.as_nanos() as f64 / bytes,
    })
}

/// The 64-byte ping-pong over every carry, `rounds` round trips each (after a tenth as many
/// to warm up), advancing `progress` per carry.
pub fn ping_pong(rounds: usize, ring: usize, progress: &dyn Progress) -> Result<Vec<Latency>, ShmError> {
    progress.stage("bench shm: ping-pong", Kind::ALL.len() as u64);
    Kind::ALL
        .iter()
        .map(|&kind| {
            let l = ping_pong_one(kind, rounds, ring);
            progress.advance(1);
            l
        })
        .collect()
}

fn ping_pong_one(kind: Kind, rounds: usize, ring: usize) -> Result<Latency, ShmError> {
    type Pair = (Box<dyn Tx>, Box<dyn Rx + Send>);
    fn ring_pair(capacity: usize) -> Result<(Pair, Pair), ShmError> {
        let (w1, r1) = channel(capacity)?;
        let (w2, r2) = channel(capacity)?;
        Ok(((Box::new(w1), Box::new(r2)), (Box::new(w2), Box::new(r1))))
    }
    fn streams<S: Tx + Rx + Send + 'static>(
        a: S,
        b: S,
        clone: impl Fn(&S) -> std::io::Result<S>,
    ) -> Result<(Pair, Pair), ShmError> {
        Ok(((Box::new(clone(&a)?), Box::new(a)), (Box::new(clone(&b)?), Box::new(b))))
    }
    let (mut here, there): (Pair, Pair) = match kind {
        Kind::Ring => ring_pair(ring)?,
        Kind::Unix => {
            let (a, b) = UnixStream::pair()?;
            streams(a, b, UnixStream::try_clone)?
        }
        Kind::Tcp => {
            let (a, b) = tcp_pair()?;
            streams(a, b, TcpStream::try_clone)?
        }
        Kind::MemfdPipe => {
            let (w1, r1) = memfd_pipe(PING)?;
            let (w2, r2) = memfd_pipe(PING)?;
            ((Box::new(w1), Box::new(r2)), (Box::new(w2), Box::new(r1)))
        }
    };
    let warm = rounds / 10;
    let total = warm + rounds;
    let echo = std::thread::spawn(move || {
        let (mut tx, mut rx) = there;
        let mut buf = [0u8; PING];
        (0..total).try_for_each(|_| {
            rx.receive(&mut buf)?;
            tx.send(&buf)
        })
    });
    // Bounds given: with an auto-sized histogram, `saturating_record` did not grow it, and
    // every round trip over a socket read back as 2 ns.
    let mut hist = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    let mut buf = [0x5au8; PING];
    let pinged = (0..total).try_for_each(|i| {
        let start = Instant::now();
        here.0.send(&buf)?;
        here.1.receive(&mut buf)?;
        if i >= warm {
            hist.saturating_record(start.elapsed().as_nanos() as u64);
        }
        Ok::<(), ShmError>(())
    });
    drop(here);
    let echoed = echo.join().map_err(|_| ShmError::Panicked("echo"))?;
    pinged?;
    echoed?;
    Ok(Latency {
        kind,
        median_us: hist.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: hist.value_at_quantile(0.99) as f64 / 1e3,
    })
}

/// XenSocket's published shape (notes 004a §10 (d)), printed beside ours.
pub const PUBLISHED: &str = "XenSocket (2007, between Xen VMs): peak near 16 KB messages (72× Xen's inter-VM TCP there), \
+33% over a Unix socket at 2 MB and 33% below it at 16 KB";

/// A message size as people write it: `512B`, `16K`, `64M`.
pub fn size_text(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => format!("{b}B"),
    }
}

/// Throughput and both sides' CPU per byte by message size, each carry.
pub const THROUGHPUT: TableSpec = TableSpec::new(
    "throughput",
    "Throughput (Gb/s) and CPU per byte (ns, writer and reader together) by message size",
    &[
        ColumnSpec::text("message"),
        ColumnSpec::int("bytes").unit("B").about("the message size"),
        ColumnSpec::num("ring_gbps", 2).header("ring").unit("Gb/s"),
        ColumnSpec::num("unix_gbps", 2).header("unix").unit("Gb/s"),
        ColumnSpec::num("tcp_gbps", 2).header("tcp").unit("Gb/s"),
        ColumnSpec::num("memfd_pipe_gbps", 2).header("memfd+pipe").unit("Gb/s"),
        ColumnSpec::num("ring_over_unix", 2).header("ring/unix").about("the ring's throughput over the Unix socket's"),
        ColumnSpec::num("ring_ns", 3).header("ring").unit("ns/B").about("both sides' CPU time per byte"),
        ColumnSpec::num("unix_ns", 3).header("unix").unit("ns/B"),
        ColumnSpec::num("tcp_ns", 3).header("tcp").unit("ns/B"),
        ColumnSpec::num("memfd_pipe_ns", 3).header("memfd+pipe").unit("ns/B"),
        ColumnSpec::num("cpu_ring_over_unix", 2)
            .header("CPU ring/unix")
            .about("the ring's CPU per byte over the Unix socket's"),
    ],
);

/// Each side's CPU per byte apart.
pub const SIDES: TableSpec = TableSpec::new(
    "sides",
    "CPU per byte on each side (writer / reader)",
    &[
        ColumnSpec::text("message"),
        ColumnSpec::int("bytes").unit("B"),
        ColumnSpec::num("ring_writer", 3).header("ring writer").unit("ns/B"),
        ColumnSpec::num("ring_reader", 3).header("ring reader").unit("ns/B"),
        ColumnSpec::num("unix_writer", 3).header("unix writer").unit("ns/B"),
        ColumnSpec::num("unix_reader", 3).header("unix reader").unit("ns/B"),
        ColumnSpec::num("tcp_writer", 3).header("tcp writer").unit("ns/B"),
        ColumnSpec::num("tcp_reader", 3).header("tcp reader").unit("ns/B"),
        ColumnSpec::num("memfd_pipe_writer", 3).header("memfd+pipe writer").unit("ns/B"),
        ColumnSpec::num("memfd_pipe_reader", 3).header("memfd+pipe reader").unit("ns/B"),
    ],
);

/// The ping-pong's round trips (a run with `--pings 0` leaves it out).
pub const PING_PONG: TableSpec = TableSpec::new(
    "ping_pong",
    "64-byte ping-pong: round trip",
    &[
        ColumnSpec::text("carry"),
        ColumnSpec::num("median", 2).unit("µs").about("the median round trip"),
        ColumnSpec::num("p99", 2).unit("µs").about("the 99th percentile round trip"),
    ],
)
.optional();

/// What `bench shm` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-shm",
    title: "The shared-memory ring against a Unix socket pair, loopback TCP and memfd + pipes, one writer and one reader thread",
    tables: &[&THROUGHPUT, &SIDES, &PING_PONG],
};

/// The bench as a report: the rows of [`run`], the round trips of [`ping_pong`] (`pings` of
/// them each; none when `pings` is 0), XenSocket's shape beside ours and issue 25's goals.
pub fn report(s: &Setup, rows: &[Row], pings: usize, latencies: &[Latency]) -> Report {
    let mut r = Report::new(&SPEC);
    r.param("mib", s.bytes >> 20, "MiB moved per run")
        .param("max_messages", s.max_messages, "the most messages in one run")
        .param("runs", s.runs, "runs per case (the median is kept)")
        .param("ring_kib", s.ring >> 10, "the ring's data area, KiB")
        .param("pings", pings, "round trips timed for the 64-byte ping-pong");
    r.machine = Some(crate::machine::describe());
    let carry = |row: &Row, k: Kind, f: fn(&Carry) -> f64| -> Value { row.get(k).map(|c| f(&c)).into() };
    let mut t = Table::new(&THROUGHPUT);
    let mut sides = Table::new(&SIDES);
    for row in rows {
        let mut cells: Vec<Value> = vec![size_text(row.size).into(), row.size.into()];
        cells.extend(Kind::ALL.iter().map(|&k| carry(row, k, |c| c.gbps)));
        cells.push(row.throughput_ratio().into());
        cells.extend(Kind::ALL.iter().map(|&k| carry(row, k, Carry::ns_per_byte)));
        cells.push(row.cpu_ratio().into());
        t.push(cells);
        let mut cells: Vec<Value> = vec![size_text(row.size).into(), row.size.into()];
        for &k in &Kind::ALL {
            cells.push(carry(row, k, |c| c.writer_ns_per_byte));
            cells.push(carry(row, k, |c| c.reader_ns_per_byte));
        }
        sides.push(cells);
    }
    let judged = format!("{}–{}", size_text(*GOAL_SIZES.start()), size_text(*GOAL_SIZES.end()));
    match Summary::of(rows) {
        Some(sum) => {
            let ((lo, hi), (clo, chi)) = (sum.throughput, sum.cpu);
            t.note(format!(
                "ours: the ring {lo:.2}–{hi:.2}× the Unix socket's throughput, {clo:.2}–{chi:.2}× its CPU per byte, {judged}"
            ));
            t.note(format!(
                "issue 25's goals (≥ {GOAL_THROUGHPUT}× the throughput, ≤ {GOAL_CPU}× the CPU per byte, at every size {judged}): throughput {}, CPU {}",
                if sum.throughput_met() { "met" } else { "NOT met" },
                if sum.cpu_met() { "met" } else { "NOT met" }
            ));
        }
        None => t.note(format!("issue 25's goals are judged at {judged}: no size run there")),
    }
    r.tables.push(t);
    r.tables.push(sides);
    if !latencies.is_empty() {
        let mut p = Table::new(&PING_PONG);
        for l in latencies {
            p.push(vec![l.kind.name().into(), l.median_us.into(), l.p99_us.into()]);
        }
        p.note(format!("{pings} round trips each, after a tenth as many to warm up"));
        r.tables.push(p);
    }
    let peak =
        rows.iter().filter_map(|row| Some((row.size, row.get(Kind::Ring)?.gbps))).max_by(|a, b| a.1.total_cmp(&b.1));
    r.claims.push(Claim {
        claim: "where the shared-memory ring's throughput peaks, and how it stands to a Unix socket".into(),
        source: "XenSocket (2007), notes 004a §10 (d)".into(),
        published: None,
        published_text: PUBLISHED.into(),
        ours: peak.map(|p| p.1),
        ours_text: peak.map_or("no ring run".into(), |(size, gbps)| {
            format!("the ring peaks at {} messages ({gbps:.1} Gb/s)", size_text(size))
        }),
        difference: None,
        why: String::new(),
    });
    r.note("the writer sends the same buffer again and again, as netperf did for XenSocket, so the data stays in cache: the figures are of the carry, not of memory");
    r.charts.push(
        Chart::new(
            "throughput",
            "bench shm: throughput by message size",
            "throughput",
            "bytes",
            &["ring_gbps", "unix_gbps", "tcp_gbps", "memfd_pipe_gbps"],
        )
        .labels("message size (bytes)", "Gb/s")
        .log(true, false),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_run_moves_every_byte_over_every_carry() {
        let s = Setup { sizes: vec![512, 1 << 20], bytes: 4 << 20, runs: 1, ring: 64 << 10, ..Setup::default() };
        let rows = run(&s, &crate::report::Quiet).unwrap();
        assert_eq!(rows.len(), 2);
        for r in &rows {
            assert_eq!(r.carries.len(), Kind::ALL.len());
            for &(k, c) in &r.carries {
                assert!(c.gbps > 0.0 && c.writer_ns_per_byte > 0.0 && c.reader_ns_per_byte > 0.0, "{k:?} {r:?}");
            }
        }
        // 1 MiB is in the judged range; 512 B is not.
        let sum = Summary::of(&rows).unwrap();
        assert_eq!(sum.throughput.0, sum.throughput.1);
    }

    #[test]
    fn the_memfd_baseline_carries_bytes_in_order_across_its_slots() {
        let (mut tx, mut rx) = memfd_pipe(1000).unwrap();
        let msg: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let sender = std::thread::spawn(move || (0..10).try_for_each(|_| tx.send(&msg)));
        let mut buf = vec![0u8; 1000];
        for _ in 0..10 {
            rx.receive(&mut buf).unwrap();
            assert!(buf.iter().zip((0..=255u8).cycle()).all(|(a, b)| *a == b));
        }
        sender.join().unwrap().unwrap();
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(512), "512B");
        assert_eq!(size_text(64 << 20), "64M");
        assert_eq!(size_text(1536), "1536B");
    }

    #[test]
    fn every_carry_answers_a_ping() {
        let lat = ping_pong(50, 4 << 10, &crate::report::Quiet).unwrap();
        assert_eq!(lat.iter().map(|l| l.kind).collect::<Vec<_>>(), Kind::ALL);
        assert!(lat.iter().all(|l| l.median_us > 0.0 && l.p99_us >= l.median_us), "{lat:?}");
    }
}
