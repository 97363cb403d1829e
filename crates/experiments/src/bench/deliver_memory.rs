//! `bench deliver`'s memory table: what each server holds per paced stream, in its own memory
//! and in the kernel's socket buffers, and the CPU it spends per stream-second (issue 42).
//!
//! In-process servers cannot be told apart from the bench by their resident set, so each
//! server runs here as a child process of its own: ours as `switchyard deliver serve`, the
//! tokio peer as the hidden `switchyard bench deliver-tokio-peer` (the same code as the paced
//! table's, and the same allocator, jemalloc, as ours), nginx as in the paced table. Each is
//! measured idle, then with the streams open and flowing (the clients are `deliver load`, a
//! process of their own): its memory from `/proc/PID/smaps_rollup` (Rss and Pss, summed over
//! the process tree, so nginx's master counts with its workers and Pss counts shared pages
//! once), its peak (`VmHWM`), the kernel's memory for its sockets (`ss -tm`: each established
//! socket on its port, receive, queued-send and forward-allocated bytes) and its CPU time.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::deliver::{Case, Served, clients_apart, start_nginx};
use super::memory::children;
use super::peers::{Reaped, free_port, listening};
use crate::report::{self, ColumnSpec, Table, TableSpec};

/// What to measure.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Streams open at once.
    pub streams: usize,
    /// Each stream's rate, bits per second.
    pub rate: u64,
    /// Cores (and threads, nginx workers) each server gets.
    pub cores: usize,
    /// Our pacer's grain and the tokio peer's tick, ms.
    pub grain_ms: f64,
    /// Seconds after the last stream opened before measuring.
    pub warmup: f64,
    /// Seconds measured (memory sampled about once a second, CPU over the whole).
    pub seconds: f64,
    /// The `switchyard` program: the server (ours and the tokio peer) and the clients.
    pub program: PathBuf,
    /// nginx, if it is to be run.
    pub nginx: Option<PathBuf>,
}

/// A process tree's memory at one moment, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resident {
    /// Resident set, summed over the processes (pages they share counted in each).
    pub rss: u64,
    /// Proportional set of the memory the processes made (`Pss_Anon` and `Pss_Shmem`): pages
    /// they share split between them. The program's file pages are left out: their share
    /// moves as other processes map the same program (the clients are this program too, and
    /// ours lost 8 MB of PSS as they started), which says nothing of the server.
    pub pss: u64,
}

/// One server's measurement.
#[derive(Clone, Debug)]
pub struct Row {
    /// `switchyard`, `tokio` or `nginx`.
    pub server: &'static str,
    /// Streams open while measured.
    pub streams: usize,
    /// Listening, no connection.
    pub idle: Resident,
    /// With the streams open and flowing: the median of the samples.
    pub flowing: Resident,
    /// Samples taken.
    pub samples: usize,
    /// The largest resident set each process reached (`VmHWM`), summed over the tree.
    pub peak: u64,
    /// The kernel's memory for the server's established sockets, bytes (the median sample):
    /// `None` where `ss` could not be run.
    pub sockets: Option<u64>,
    /// The whole machine's TCP memory (`/proc/net/sockstat`), bytes, idle and flowing (the
    /// median sample): both ends of each stream, and every other program's sockets.
    pub sockstat: Option<(u64, u64)>,
    /// CPU seconds the server spent over the measured time.
    pub cpu_s: f64,
    /// Seconds the CPU time was taken over.
    pub seconds: f64,
    /// What the clients received, all streams together, bits per second.
    pub aggregate_bps: f64,
}

impl Row {
    /// Bytes of proportional set per stream: flowing less idle, over the streams.
    pub fn pss_per_stream(&self) -> f64 {
        (self.flowing.pss as f64 - self.idle.pss as f64) / self.streams as f64
    }
    /// The same for the resident set.
    pub fn rss_per_stream(&self) -> f64 {
        (self.flowing.rss as f64 - self.idle.rss as f64) / self.streams as f64
    }
    /// The peak over idle, per stream.
    pub fn peak_per_stream(&self) -> f64 {
        (self.peak as f64 - self.idle.rss as f64) / self.streams as f64
    }
    /// The kernel's bytes per stream for the server's sockets.
    pub fn sockets_per_stream(&self) -> Option<f64> {
        self.sockets.map(|b| b as f64 / self.streams as f64)
    }
    /// µs of CPU per stream per second served.
    pub fn cpu_us_per_stream_second(&self) -> f64 {
        self.cpu_s * 1e6 / (self.streams as f64 * self.seconds)
    }
}

/// Measures ours, the tokio peer and nginx (where it is) in turn, each with the same clients.
pub fn run(s: &Setup, dir: &Path, progress: &dyn report::Progress) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    let port = free_port()?;
    let mut cmd = Command::new(&s.program);
    cmd.args(["deliver", "serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--threads", &s.cores.to_string(), "--grain-ms", &s.grain_ms.to_string(), "--burst", "16"])
        // The peers refuse nothing; neither does ours here, as in the paced table.
        .args(["--max-late-ms", "1e12"])
        // Its table of threads is not wanted: drawing it would be CPU charged to ours.
        .args(["--every", "3600"])
        .args(pin(s.cores));
    let log = dir.join("ours.log");
    let ours = spawn(&mut cmd, &log)?;
    rows.push(measure("switchyard", ours, port, s, dir, Some(&log)).context("measuring ours (deliver serve)")?);
    progress.advance(1);
    let port = free_port()?;
    let mut cmd = Command::new(&s.program);
    cmd.args(["bench", "deliver-tokio-peer", "--listen", &format!("127.0.0.1:{port}")]).args([
        "--threads",
        &s.cores.to_string(),
        "--grain-ms",
        &s.grain_ms.to_string(),
    ]);
    let log = dir.join("tokio.log");
    let tokio = spawn(&mut cmd, &log)?;
    rows.push(measure("tokio", tokio, port, s, dir, Some(&log)).context("measuring the tokio peer")?);
    progress.advance(1);
    if let Some(n) = &s.nginx {
        let (child, addr) = start_nginx(n, &dir.join("nginx-memory"), s.cores, Some(s.rate / 8))?;
        rows.push(measure("nginx", child, addr.port(), s, dir, None).context("measuring nginx (limit_rate)")?);
        progress.advance(1);
    }
    Ok(rows)
}

/// `--pin` where the server gets fewer than every core, as the paced table's servers are.
fn pin(cores: usize) -> Vec<&'static str> {
    if cores < super::cores() { vec!["--pin"] } else { Vec::new() }
}

/// Starts `cmd` with its output in `log`, stopped when the handle is dropped.
fn spawn(cmd: &mut Command, log: &Path) -> Result<Reaped> {
    let out = std::fs::File::create(log)?;
    let child = cmd.stdout(Stdio::null()).stderr(out).spawn().with_context(|| format!("starting {cmd:?}"))?;
    Ok(Reaped(child))
}

/// What a failed server said (its log's first lines), for the error.
fn said(log: Option<&Path>) -> String {
    let text = log.and_then(|l| std::fs::read_to_string(l).ok()).unwrap_or_default();
    text.lines().take(5).collect::<Vec<_>>().join("; ")
}

/// One server idle, then with the streams flowing; `log` is where it writes (none: nginx, whose
/// log is its own), and nginx speaks HTTP.
fn measure(
    name: &'static str,
    mut server: Reaped,
    port: u16,
    s: &Setup,
    dir: &Path,
    log: Option<&Path>,
) -> Result<Row> {
    let http = name == "nginx";
    let addr = listening(port, name, Duration::from_secs(10))
        .with_context(|| format!("the server's first words: {}", said(log)))?;
    // The accept probe `listening` made is gone, and the server has settled.
    std::thread::sleep(Duration::from_millis(500));
    let pid = server.0.id();
    let idle = resident(pid);
    let sockstat_idle = sockstat();
    // The clients run a second past the measurement, so it ends with every stream flowing.
    let case = Case {
        name: "memory",
        conns: s.streams,
        rate: Some(s.rate),
        grain_ms: s.grain_ms,
        seconds: s.seconds + 1.0,
        threads: s.cores,
    };
    let (row, served) = std::thread::scope(|scope| -> Result<(Row, Served)> {
        let clients = scope.spawn(|| clients_apart(&s.program, addr, &case, http, s.warmup, dir, None));
        // Time counts from the last stream's opening: a thousand connections take a while.
        let deadline = Instant::now() + Duration::from_secs(30) + Duration::from_millis(10 * s.streams as u64);
        while established(port).unwrap_or(0) < s.streams {
            if clients.is_finished() || Instant::now() > deadline {
                let open = established(port).unwrap_or(0);
                let why = match clients.join() {
                    Ok(Err(e)) => format!("{e:#}"),
                    _ => "the clients were still opening them".into(),
                };
                bail!("{open} of {} streams opened to {name}: {why}", s.streams);
            }
            if let Ok(Some(st)) = server.0.try_wait() {
                bail!("{name} exited ({st}) as the streams opened: {}", said(log));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_secs_f64(s.warmup));
        let started = Instant::now();
        let cpu = cpu_time(pid);
        let n = (s.seconds.round() as usize).max(1);
        let mut samples = Vec::with_capacity(n);
        for i in 1..=n {
            let due = started + Duration::from_secs_f64(s.seconds * i as f64 / n as f64);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
            samples.push((resident(pid), socket_memory(port), sockstat()));
        }
        let cpu_s = cpu_time(pid) - cpu;
        let seconds = started.elapsed().as_secs_f64();
        let peak = tree(pid).iter().map(|p| status_kib(*p, "VmHWM:") * 1024).sum();
        let served = clients.join().map_err(|_| anyhow::anyhow!("the clients' thread panicked"))??;
        let median = |mut v: Vec<u64>| {
            v.sort_unstable();
            v[v.len() / 2]
        };
        let flowing = Resident {
            rss: median(samples.iter().map(|x| x.0.rss).collect()),
            pss: median(samples.iter().map(|x| x.0.pss).collect()),
        };
        let sockets = samples.iter().map(|x| x.1).collect::<Option<Vec<u64>>>().map(median);
        let during = samples.iter().map(|x| x.2).collect::<Option<Vec<u64>>>().map(median);
        let row = Row {
            server: name,
            streams: s.streams,
            idle,
            flowing,
            samples: samples.len(),
            peak,
            sockets,
            sockstat: sockstat_idle.zip(during),
            cpu_s,
            seconds,
            aggregate_bps: served.aggregate_bps,
        };
        Ok((row, served))
    })?;
    if served.conns != s.streams {
        bail!("{name} served {} of {} streams", served.conns, s.streams);
    }
    Ok(row)
}

/// `pid` and every process below it.
fn tree(pid: u32) -> Vec<u32> {
    let mut pids = vec![pid];
    let mut i = 0;
    while i < pids.len() {
        pids.extend(children(pids[i]));
        i += 1;
    }
    pids
}

/// CPU seconds every thread of `pid` and of the processes below it has run so far, from
/// `/proc/…/task/*/schedstat` (nanoseconds): `/proc/…/stat`'s ticks of 10 ms are more than
/// nginx spends on 200 streams in 2 s.
fn cpu_time(pid: u32) -> f64 {
    let mut ns = 0u64;
    for p in tree(pid) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for t in tasks.flatten() {
            let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
            ns += text.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    ns as f64 * 1e-9
}

/// A `kB` field of a `/proc` file, kibibytes (0 where it cannot be read).
fn kib_field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn status_kib(pid: u32, key: &str) -> u64 {
    kib_field(&std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default(), key)
}

/// The process tree's resident and proportional sets.
fn resident(pid: u32) -> Resident {
    tree(pid).iter().fold(Resident::default(), |r, p| {
        let text = std::fs::read_to_string(format!("/proc/{p}/smaps_rollup")).unwrap_or_default();
        let pss = kib_field(&text, "Pss_Anon:") + kib_field(&text, "Pss_Shmem:");
        Resident { rss: r.rss + kib_field(&text, "Rss:") * 1024, pss: r.pss + pss * 1024 }
    })
}

/// `ss`'s report of the established TCP sockets on local `port` (`-m` for their memory).
fn ss(port: u16, memory: bool) -> Option<String> {
    let out = Command::new("ss")
        .args([if memory { "-tmnH" } else { "-tnH" }, "state", "established", "sport", "=", &format!(":{port}")])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Established connections on local `port`.
fn established(port: u16) -> Option<usize> {
    ss(port, false).map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
}

/// The kernel's bytes for the established sockets on local `port`: what each has received and
/// not yet been read (`r`), queued to send, sent or not (`w`), and set aside for either
/// (forward-allocated, `f`), as `ss -m` reads them from the kernel (sock_diag). These are what
/// the kernel charges to TCP's memory (`/proc/net/sockstat`'s `mem`).
fn socket_memory(port: u16) -> Option<u64> {
    ss(port, true).map(|t| skmem_bytes(&t))
}

/// The sum of `r`, `w` and `f` over every `skmem:(…)` in `ss -m`'s output.
fn skmem_bytes(text: &str) -> u64 {
    text.split("skmem:(")
        .skip(1)
        .map(|s| {
            let inner = s.split(')').next().unwrap_or("");
            inner
                .split(',')
                .filter_map(|f| {
                    let key = f.trim_end_matches(|c: char| c.is_ascii_digit());
                    matches!(key, "r" | "w" | "f").then(|| f[key.len()..].parse::<u64>().ok()).flatten()
                })
                .sum::<u64>()
        })
        .sum()
}

/// The machine's TCP memory, bytes (`/proc/net/sockstat`'s `TCP: … mem PAGES`).
fn sockstat() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    sockstat_pages(&text).map(|p| p * page_size())
}

fn sockstat_pages(text: &str) -> Option<u64> {
    let tcp = text.lines().find(|l| l.starts_with("TCP:"))?;
    let f: Vec<&str> = tcp.split_whitespace().collect();
    f.iter().position(|w| *w == "mem").and_then(|i| f.get(i + 1)?.parse().ok())
}

/// The size of one TCP socket's object in the kernel's slab (`/proc/slabinfo`, root only).
fn tcp_slab() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/slabinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("TCP "))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().map_or(4096, |p| p as u64)
}

/// The tokio peer as a program of its own, serving on `listen` until it is stopped: the same
/// server the paced table runs in-process (`switchyard bench deliver-tokio-peer`).
pub fn serve_tokio_peer(listen: SocketAddr, threads: usize, grain_ms: f64) -> Result<()> {
    if threads == 0 || !grain_ms.is_finite() || grain_ms <= 0.0 {
        bail!("--threads must be above 0 and --grain-ms a number above 0");
    }
    switchyard_runtime::deliver::raise_file_limit();
    let rt = super::deliver::tokio_runtime(threads)?;
    let listener =
        rt.block_on(tokio::net::TcpListener::bind(listen)).with_context(|| format!("cannot listen on {listen}"))?;
    eprintln!("serving on {}", listener.local_addr()?);
    rt.block_on(super::deliver::tokio_peer(listener, Duration::from_secs_f64(grain_ms / 1e3)));
    Ok(())
}

/// The memory table: a row per server.
pub const MEMORY: TableSpec = TableSpec::new(
    "memory",
    "Memory and CPU per paced stream: each server as a process of its own, idle and with the streams flowing",
    &[
        ColumnSpec::text("server"),
        ColumnSpec::int("streams"),
        ColumnSpec::num("throughput", 1).unit("Mb/s").about("what the clients received, all streams together"),
        ColumnSpec::num("rss_idle", 1).header("RSS idle").unit("MiB").about("resident set, listening, no connection"),
        ColumnSpec::num("pss_idle", 1)
            .header("PSS idle")
            .unit("MiB")
            .about("proportional set of the memory the server made (Pss_Anon + Pss_Shmem), the same moment"),
        ColumnSpec::num("rss", 1).header("RSS").unit("MiB").about("resident set with the streams flowing (median sample)"),
        ColumnSpec::num("pss", 1).header("PSS").unit("MiB").about("proportional set, the same samples"),
        ColumnSpec::num("rss_per_stream", 0)
            .header("RSS/stream")
            .unit("B")
            .about("(RSS − RSS idle) / streams"),
        ColumnSpec::num("pss_per_stream", 0)
            .header("PSS/stream")
            .unit("B")
            .about("(PSS − PSS idle) / streams: the figure (pages nginx's processes share counted once)"),
        ColumnSpec::num("vs_ours_pss", 2).header("×ours PSS").about("PSS per stream over ours"),
        ColumnSpec::num("peak", 1).unit("MiB").about("the most resident each process ever was (VmHWM), summed"),
        ColumnSpec::num("peak_per_stream", 0).header("peak/stream").unit("B").about("(peak − RSS idle) / streams"),
        ColumnSpec::num("kernel_per_stream", 0).header("kernel/stream").unit("B").about(
            "the kernel's bytes for each of the server's sockets (ss -tm: received, queued to send, forward-allocated), not in the RSS",
        ),
        ColumnSpec::num("sockstat", 1).header("machine TCP").unit("MiB").about(
            "the machine's TCP memory (/proc/net/sockstat) flowing less idle: both ends of every stream, and other programs' sockets",
        ),
        ColumnSpec::num("cpu_us", 2)
            .header("CPU/stream")
            .unit("µs/s")
            .about("µs of CPU per stream per second served"),
        ColumnSpec::num("vs_ours_cpu", 2).header("×ours CPU").about("CPU per stream over ours"),
    ],
)
.optional();

/// The memory table and what its figures include.
pub fn table(s: &Setup, rows: &[Row]) -> Table {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let mut t = Table::new(&MEMORY);
    let ours = rows.iter().find(|r| r.server == "switchyard");
    for r in rows {
        t.push(vec![
            r.server.into(),
            r.streams.into(),
            (r.aggregate_bps / 1e6).into(),
            mib(r.idle.rss).into(),
            mib(r.idle.pss).into(),
            mib(r.flowing.rss).into(),
            mib(r.flowing.pss).into(),
            r.rss_per_stream().into(),
            r.pss_per_stream().into(),
            ours.map(|o| r.pss_per_stream() / o.pss_per_stream()).into(),
            mib(r.peak).into(),
            r.peak_per_stream().into(),
            r.sockets_per_stream().into(),
            r.sockstat.map(|(idle, during)| (during as f64 - idle as f64) / (1u64 << 20) as f64).into(),
            r.cpu_us_per_stream_second().into(),
            ours.map(|o| r.cpu_us_per_stream_second() / o.cpu_us_per_stream_second()).into(),
        ]);
    }
    let seconds = rows.first().map_or(s.seconds, |r| r.seconds);
    t.note(format!(
        "{} streams at {} b/s, each server a process of its own on {} core(s), the clients another; measured {:.1} s after every stream opened and {} s of warm-up, memory sampled {} times (the median is given), CPU over the whole",
        s.streams,
        s.rate,
        s.cores,
        seconds,
        s.warmup,
        rows.first().map_or(0, |r| r.samples)
    ));
    t.note(
        "per stream is the process tree's memory with the streams flowing less its memory idle, over the streams: what each stream adds in user space (its state, its buffers, the allocator's share), not what a server reserves at start (nginx allocates its worker_connections 30000 slots then, so they are in its idle figure); the kernel's socket buffers are not in the RSS and are given apart",
    );
    t.note(format!(
        "PSS is Pss_Anon + Pss_Shmem from /proc/PID/smaps_rollup: the program's file pages are left out (their share falls as other processes map the same program, the clients among them); RSS counts them, and pages nginx's processes share in each. Not counted anywhere: the kernel's fixed structures for each socket, the same for every server ({})",
        tcp_slab().map_or_else(|| "the TCP slab's object size could not be read".to_string(), |b| format!("its TCP socket alone is {b} B in the TCP slab here")),
    ));
    t.note(
        "ours and the tokio peer run from the same program with the same allocator (jemalloc); nginx is Debian's, with limit_rate and sendfile",
    );
    // CPU per stream-second is what each spent at the rate it kept: one that fell behind did
    // less work for its CPU, and the row should say so.
    let promised = s.streams as f64 * s.rate as f64;
    for r in rows.iter().filter(|r| r.aggregate_bps < 0.9 * promised) {
        t.note(format!(
            "{} delivered {:.0}% of the streams' promised rate: its CPU per stream is for that, not for the full rate",
            r.server,
            r.aggregate_bps / promised * 100.0
        ));
    }
    t.note(
        "kernel/stream is the median sample of each socket's queues: at a few packets a second they are empty between sends; machine TCP is /proc/net/sockstat for the whole machine, so other programs' sockets come and go in it (on a shared machine it can fall while the streams flow)",
    );
    if rows.iter().any(|r| r.sockets.is_none()) {
        t.note("kernel/stream is missing where `ss` (iproute2) could not be run");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's bytes for a socket are its received, queued and forward-allocated bytes;
    /// the buffer sizes (`rb`, `tb`) and the in-flight `t` (inside `w`) are not added.
    #[test]
    fn skmem_counts_received_queued_and_forward_allocated_bytes() {
        let text = "0 0 127.0.0.1:7400 127.0.0.1:5000\n\t skmem:(r0,rb131072,t0,tb87040,f3328,w768,o0,bl0,d0)\n\
                    0 800 127.0.0.1:7400 127.0.0.1:5001\n\t skmem:(r10,rb131072,t4864,tb87040,f0,w4864,o0,bl0,d0)\n";
        assert_eq!(skmem_bytes(text), 3328 + 768 + 10 + 4864);
        assert_eq!(skmem_bytes(""), 0);
    }

    #[test]
    fn sockstat_gives_tcps_pages() {
        let text = "sockets: used 29\nTCP: inuse 3 orphan 0 tw 0 alloc 3 mem 65\nUDP: inuse 0 mem 7\n";
        assert_eq!(sockstat_pages(text), Some(65));
    }
}
