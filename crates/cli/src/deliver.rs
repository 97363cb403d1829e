//! `switchyard deliver serve|load`: the delivery server of Yates ch. 2–4 and the clients that
//! measure it, with a live table of rates and fairness.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use switchyard_core::Nanos;
use switchyard_core::measure::Deviation;
use switchyard_core::measure::{balance, spread};
use switchyard_core::order::{AdmissionConfig, PaceConfig, QuotaConfig};
use switchyard_core::place::rebalance::{Direction, Pick, RebalanceConfig};
use switchyard_core::place::steer::Steering;
use switchyard_runtime::deliver::load::{Departures, Ended, Fate, Opened, Summary};
use switchyard_runtime::deliver::{
    Handshake, KernelPacing, Load, LoadConfig, Pacing, Request, Sample, Server, ServerConfig, Transport, Windows, Wire,
    raise_file_limit,
};
use switchyard_sim::report::{Series, Style, line_chart};

/// Serve many connections from a few threads with fair shares and rate guarantees, or measure
/// such a server (Yates 2006, ch. 2–4).
///
/// Start a server, then point clients at it:
///
///   switchyard deliver serve --threads 2 --listen 127.0.0.1:7400
///   switchyard deliver load --server 127.0.0.1:7400 --conns 384 --rate 4Mbit --seconds 10
///
/// The other direction (iperf's: clients send, the server reads and counts), with each
/// connection placed on the worker pinned to the core its packets are received on:
///
///   switchyard deliver serve --mapping ppc --steer incoming-cpu
///   switchyard deliver load --upload --message 64K --conns 2 --threads 2 --pin --seconds 10
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct DeliverArgs {
    #[command(subcommand)]
    command: DeliverCommand,
}

#[derive(Subcommand)]
enum DeliverCommand {
    Serve(ServeArgs),
    Load(LoadArgs),
}

/// How connections map to threads (Yates §2.3, Fig. 2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Mapping {
    /// Processor per connection: one thread per core, pinned ("wired").
    Ppc,
    /// Thread per connection: as many threads as --conns, free to float.
    Tpc,
    /// Virtual processors: --threads threads, connections spread round-robin.
    Vp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PacingArg {
    /// Each stream paced by its own credit (the default).
    Fine,
    /// Yates's quota: n packets per thread, then a pause of k × --tick-ms.
    Quota,
    /// The kernel's: TCP's own pacing under SO_MAX_PACING_RATE (Linux 4.13+, no qdisc needed),
    /// each stream written a packet at a time as the kernel takes it. TCP only: the kernel paces
    /// UDP only under the fq qdisc, so UDP streams are refused with a message. The server prints
    /// what this kernel offers at start.
    Kernel,
}

/// Which way soft scheduling moves connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum DirectionArg {
    /// From the thread with the lowest per-connection throughput to the highest: evens shares.
    Equalise,
    /// From the highest to the lowest, as the thesis's text says (it widens the gap when a
    /// thread's throughput is set by its CPU share; see `reproduce yates-clp`).
    AsWritten,
}

impl From<DirectionArg> for Direction {
    fn from(d: DirectionArg) -> Self {
        match d {
            DirectionArg::Equalise => Self::Equalise,
            DirectionArg::AsWritten => Self::AsWritten,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PickArg {
    /// Move the connection resident longest (the thesis's FIFO, which it found best).
    Oldest,
    /// Move the newest (LIFO).
    Newest,
}

/// Run a delivery server. Clients open with one line, `bulk` or `stream <bits/s>`, over TCP or
/// UDP (same port), and get data until they leave; or `sink` (TCP), and send data the server
/// reads, counts and drops until they leave.
///
/// Receive-side steering (Guo ch. 3's interrupt affinity, what Linux's RFS does per flow):
///
///   switchyard deliver serve --mapping ppc --steer incoming-cpu
///
/// reads each new TCP connection's SO_INCOMING_CPU (the core the kernel processed its packets
/// on) and gives it to a worker pinned to that core, so the reads find the socket and the data
/// in that core's caches. `--steer other-cpu` does the opposite on purpose, to measure what
/// steering saves (`switchyard bench steer`).
#[derive(Args, Clone)]
pub(crate) struct ServeArgs {
    /// Address to listen on (TCP and UDP).
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub(crate) listen: SocketAddr,
    /// How connections map to threads.
    #[arg(long, value_enum, default_value = "vp")]
    pub(crate) mapping: Mapping,
    /// Worker threads (with --mapping vp).
    #[arg(long, default_value_t = 2)]
    pub(crate) threads: usize,
    /// Connections expected (with --mapping tpc: one thread each).
    #[arg(long)]
    pub(crate) conns: Option<usize>,
    /// Pin thread i to core i mod cores (always on with --mapping ppc).
    #[arg(long)]
    pub(crate) pin: bool,
    /// Bytes per send (bulk) and per datagram: 4096, the thesis's payload.
    #[arg(long, default_value_t = 4096)]
    pub(crate) packet: usize,
    /// Packets per turn on a bulk connection: 16 (64 KB) as in the thesis's burst runs, which
    /// carry more than 1 packet a turn (its other runs' unit) and stay fair turn by turn.
    #[arg(long, default_value_t = 16)]
    pub(crate) burst: usize,
    /// Soft throughput-based scheduling: move bulk connections between the threads with the
    /// highest and lowest measured per-connection throughput until shares even out (streams
    /// keep the thread that promised their rate).
    #[arg(long)]
    pub(crate) soft: bool,
    /// Monitor interval in ms (the thesis's 100).
    #[arg(long, default_value_t = 100)]
    pub(crate) sample_ms: u64,
    /// Soft scheduling: one move per this many ms (the thesis's 200).
    #[arg(long, default_value_t = 200)]
    pub(crate) move_ms: u64,
    /// EWMA gain on each new sample. 0.125 reads the thesis's "α = 0.875" as TCP's SRTT does
    /// (weight 0.875 on history); 0.875 is the literal reading.
    #[arg(long, default_value_t = 0.125)]
    pub(crate) ewma_gain: f64,
    /// Soft scheduling: which way connections move.
    #[arg(long, value_enum, default_value = "equalise")]
    soft_direction: DirectionArg,
    /// Soft scheduling: which connection moves.
    #[arg(long, value_enum, default_value = "oldest")]
    pick: PickArg,
    /// Soft scheduling: move only when the best per-connection share is this many times the
    /// worst (1 moves every interval, as the thesis does).
    #[arg(long, default_value_t = 1.0)]
    min_ratio: f64,
    /// How streams are held to their rates.
    #[arg(long, value_enum, default_value = "fine")]
    pacing: PacingArg,
    /// Fine pacing: a stream sends once it is owed this many ms of data, and at least half a
    /// --packet over TCP (a whole one over UDP): writes cost per call, so smaller ones would
    /// spend the cores on system calls (at 4 Mb/s and 1 ms, 500 B writes).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) grain_ms: f64,
    /// Quota pacing: the sleep granularity in ms (the thesis's 10).
    #[arg(long, default_value_t = 10)]
    tick_ms: u64,
    /// Admission: what one thread can send (e.g. 2Gbit). Without it, a stream is refused only
    /// when every thread is already late on its streams.
    #[arg(long, value_parser = parse_bits)]
    capacity: Option<u64>,
    /// Admission: the share of --capacity that may be promised.
    #[arg(long, default_value_t = 0.9)]
    headroom: f64,
    /// Admission: a thread later than this many ms on a stream is behind and takes no more.
    #[arg(long, default_value_t = 5.0)]
    max_late_ms: f64,
    /// Admission: the fastest stream a client may ask for.
    #[arg(long, default_value = "1G", value_parser = parse_bits)]
    max_stream: u64,
    /// SO_SNDBUF per connection, in bytes.
    #[arg(long)]
    send_buffer: Option<usize>,
    /// Where bulk and sink connections go relative to the core that receives their packets:
    /// none (least-loaded thread), incoming-cpu (a thread pinned to that core: RFS-style
    /// steering), other-cpu (a thread pinned to another core: the wrong place, for measuring).
    /// Anything but none pins the threads; it cannot be combined with --soft.
    #[arg(long, default_value = "none", value_parser = parse_steering)]
    pub(crate) steer: Steering,
    /// Bytes per read on sink connections (iperf's -l on the receiver): 128K, 64K, 1500.
    #[arg(long, default_value = "128K", value_parser = crate::units::parse_size)]
    pub(crate) recv_size: usize,
    /// Seconds between table updates.
    #[arg(long, default_value_t = 1.0)]
    every: f64,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    seconds: Option<f64>,
    /// Write the server's totals here as JSON at every table update (so the file holds the
    /// latest when the server is stopped): connections accepted, refused and moved, and what
    /// lateness cost the paced streams (--pacing fine) — bytes the pacer made up (owed past a
    /// stream's due time, sent late within its bound of 50 ms or two 4 KB packets, whichever is
    /// longer) and bytes it forgave (lateness past the bound, never sent: what the streams'
    /// rates truly lost), in all and for the worst stream, closed streams included.
    #[arg(long)]
    json: Option<PathBuf>,
}

impl ServeArgs {
    /// The server's settings, or why these arguments do not make one.
    pub(crate) fn config(&self) -> Result<ServerConfig> {
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let (workers, pin) = match self.mapping {
            Mapping::Ppc => (cores, true),
            Mapping::Tpc => {
                (self.conns.context("--mapping tpc needs --conns: one thread is started per connection")?, self.pin)
            }
            Mapping::Vp => (self.threads, self.pin),
        };
        if workers == 0 {
            bail!("--threads (or --conns with --mapping tpc) must be at least 1");
        }
        if self.soft && self.steer != Steering::None {
            bail!(
                "--steer {} and --soft cannot both be on: soft scheduling would move connections off the core steering chose",
                self.steer
            );
        }
        let finite = |name: &str, v: f64, ok: bool, want: &str| {
            if v.is_finite() && ok {
                Ok(())
            } else {
                Err(anyhow::anyhow!("{name} {v} is out of range: it must be {want}"))
            }
        };
        finite("--grain-ms", self.grain_ms, self.grain_ms > 0.0, "above 0")?;
        finite("--max-late-ms", self.max_late_ms, self.max_late_ms >= 0.0, "0 or more")?;
        finite("--ewma-gain", self.ewma_gain, self.ewma_gain > 0.0 && self.ewma_gain <= 1.0, "above 0 and at most 1")?;
        finite("--headroom", self.headroom, self.headroom > 0.0 && self.headroom <= 1.0, "above 0 and at most 1")?;
        finite("--min-ratio", self.min_ratio, self.min_ratio >= 1.0, "1 or more")?;
        finite("--every", self.every, self.every > 0.0, "above 0")?;
        if let Some(s) = self.seconds {
            finite("--seconds", s, s >= 0.0, "0 or more")?;
        }
        let ms = |m: f64| Nanos((m * 1e6) as u64);
        let pacing = match self.pacing {
            PacingArg::Fine => Pacing::Fine(PaceConfig { grain: ms(self.grain_ms), ..Default::default() }),
            PacingArg::Quota => Pacing::Quota(QuotaConfig {
                tick: Nanos::from_millis(self.tick_ms.max(1)),
                packet: self.packet as u64,
                gain: self.ewma_gain,
                ..Default::default()
            }),
            PacingArg::Kernel => Pacing::Kernel,
        };
        let rebalance = self.soft.then_some(RebalanceConfig {
            sample_every: Nanos::from_millis(self.sample_ms),
            move_every: Nanos::from_millis(self.move_ms),
            gain: self.ewma_gain,
            pick: match self.pick {
                PickArg::Oldest => Pick::Oldest,
                PickArg::Newest => Pick::Newest,
            },
            direction: self.soft_direction.into(),
            min_ratio: self.min_ratio,
        });
        Ok(ServerConfig {
            listen: self.listen,
            workers,
            pin,
            packet: self.packet,
            burst: self.burst,
            pacing,
            rebalance,
            admission: AdmissionConfig {
                capacity: self.capacity.map(|b| b as f64 / 8.0),
                headroom: self.headroom,
                max_late: ms(self.max_late_ms),
                max_stream: self.max_stream as f64 / 8.0,
            },
            sample_every: Duration::from_millis(self.sample_ms.max(1)),
            send_buffer: self.send_buffer,
            recv_size: self.recv_size,
            steer: self.steer,
        })
    }
}

/// Open connections to a delivery server (or any server that streams bytes after a request)
/// and measure what each receives, window by window; with --upload, send to the server's sink
/// instead and measure what each sends.
///
/// A connection that ends before the run does (closed by the server; over UDP, its port
/// unreachable — the server closed the stream or went away, which an ICMP error in answer to
/// the once-a-second keepalive tells, and a last keepalive at the end; or a socket error) is
/// counted with what it got, the summary says how many ended and why, and the command exits
/// non-zero: the figures understate the server, or it failed.
///
///   switchyard deliver load --conns 12 --seconds 10
///   switchyard deliver load --upload --message 64K --conns 2 --threads 2 --pin
#[derive(Args, Clone)]
pub(crate) struct LoadArgs {
    /// The server.
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub(crate) server: SocketAddr,
    /// Connections to open.
    #[arg(long, default_value_t = 12)]
    pub(crate) conns: usize,
    /// Ask each for a stream at this rate (bits/s: 4Mbit, 500k, 4000000). Without it, bulk.
    #[arg(long, value_parser = parse_bits)]
    pub(crate) rate: Option<u64>,
    /// UDP instead of TCP.
    #[arg(long)]
    pub(crate) udp: bool,
    /// Instead of the delivery protocol, send an HTTP GET for this path and count everything
    /// that comes back (to measure nginx or another web server).
    #[arg(long, value_name = "PATH")]
    pub(crate) http_get: Option<String>,
    /// Client threads.
    #[arg(long, default_value_t = 1)]
    pub(crate) threads: usize,
    /// Send instead of receive: ask for `sink` and write as fast as the connection takes, in
    /// writes of --message bytes (iperf's client). TCP only.
    #[arg(long, conflicts_with_all = ["rate", "udp", "http_get"])]
    pub(crate) upload: bool,
    /// With --upload: bytes per write (iperf's -l): 64K, 16K, 1500.
    #[arg(long, default_value = "64K", value_parser = crate::units::parse_size, requires = "upload")]
    pub(crate) message: usize,
    /// Pin client thread t to core t mod cores, so each connection's packets leave (and, on
    /// loopback, are received) on a known core.
    #[arg(long)]
    pub(crate) pin: bool,
    /// Seconds to measure, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) seconds: f64,
    /// Seconds to let the server settle before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) warmup: f64,
    /// Measurement window in ms (the thesis's 100).
    #[arg(long, default_value_t = 100)]
    pub(crate) window_ms: u64,
    /// SO_RCVBUF per socket, in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub(crate) recv_buffer: usize,
    /// Write every window of every connection here (CSV: window, start_s, secs, conn, bytes).
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    /// Write the summary here as JSON.
    #[arg(long)]
    pub(crate) json: Option<PathBuf>,
    /// Also summarise windows this many times longer (10: 1 s beside 100 ms), in the printout and
    /// the JSON.
    #[arg(long, default_value_t = 10)]
    pub(crate) coarsen: usize,
    /// Draw the fastest, median and slowest connection's rate over time here (SVG).
    #[arg(long)]
    pub(crate) svg: Option<PathBuf>,
    /// The server's bytes per packet (its --packet): lead and lag are also given in packets,
    /// and a window's rate error is shown only where the window holds at least 20 of a
    /// stream's packets (at 64 kb/s a 100 ms window holds 800 bytes, so one packet crossing its
    /// edge would read as an error over 100% however well the stream is paced).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) packet: u32,
    /// No live table or opening report (for scripts); the summary is still printed.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Also measure each stream's departures as the wire carried them, beside this client's
    /// view: an AF_PACKET capture on --wire-interface of the server's TCP segments, each timed
    /// by the kernel as it left (a client late to read blurs its own view, not this one), and
    /// where the two differ. Needs root (CAP_NET_RAW) and TCP streams (--rate) in the server's
    /// own protocol (not --http-get, --udp or --upload); where the capture cannot be opened the
    /// run goes on and says why the wire's view is missing.
    #[arg(long)]
    pub(crate) wire: bool,
    /// The interface the streams cross, for --wire: lo for a server on this machine's loopback.
    #[arg(long, default_value = "lo")]
    pub(crate) wire_interface: String,
}

pub(crate) fn run(args: &DeliverArgs) -> Result<()> {
    raise_file_limit();
    match &args.command {
        DeliverCommand::Serve(a) => serve(a),
        DeliverCommand::Load(a) => load(a).map(|_| ()),
    }
}

fn parse_steering(s: &str) -> Result<Steering, String> {
    s.parse().map_err(|e: switchyard_core::place::steer::SteeringError| e.to_string())
}

/// Parses a rate in bits per second: a number with an optional k, M or G (powers of 1000) and
/// an optional "bit", "b" or "bps".
pub(crate) fn parse_bits(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix("bps").or_else(|| t.strip_suffix("bit")).or_else(|| t.strip_suffix('b')).unwrap_or(t);
    let (num, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('M' | 'm') => (&t[..t.len() - 1], 1e6),
        Some('G' | 'g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale < 1e15 => Ok((v * scale).round() as u64),
        _ => Err(format!("{s:?} is not a rate: give bits per second, e.g. 4Mbit, 500k or 4000000")),
    }
}

fn serve(a: &ServeArgs) -> Result<()> {
    let cfg = a.config()?;
    let server = Server::start(cfg.clone()).with_context(|| format!("cannot serve on {}", a.listen))?;
    eprintln!(
        "serving on {} (TCP and UDP): {} threads{}, {}{}",
        server.local_addr(),
        cfg.workers,
        if cfg.pin { " pinned" } else { "" },
        match cfg.pacing {
            Pacing::Fine(p) => format!("streams paced in {:.1} ms grains", p.grain.0 as f64 / 1e6),
            Pacing::Quota(q) => format!("streams paced by quota per {} ms tick", q.tick.0 / 1_000_000),
            Pacing::Kernel => "streams paced by the kernel".into(),
        },
        if cfg.rebalance.is_some() { ", soft rebalancing on" } else { "" }
    );
    if cfg.pacing == Pacing::Kernel {
        let offers = KernelPacing::probe();
        eprintln!("kernel pacing here: {offers}");
        if !offers.tcp {
            bail!("this kernel does not pace TCP sockets (SO_MAX_PACING_RATE refused): use --pacing fine");
        }
    }
    if cfg.steer != Steering::None {
        eprintln!("steering: {} ({})", cfg.steer, worker_cores(server.worker_cores()));
    }
    let until = a.seconds.map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    let live = std::io::stderr().is_terminal();
    let mut drawn = 0;
    let mut seen = 0;
    loop {
        std::thread::sleep(Duration::from_secs_f64(a.every.max(0.1)));
        if let Some(f) = server.failure() {
            bail!("{f}");
        }
        let history = server.history();
        let text = thread_table(&history[seen.min(history.len())..], &server);
        seen = history.len();
        let mut err = std::io::stderr().lock();
        if live && drawn > 0 {
            let _ = write!(err, "\x1b[{drawn}A\x1b[J");
        }
        drawn = text.lines().count();
        let _ = err.write_all(text.as_bytes());
        if let Some(p) = &a.json {
            std::fs::write(p, serve_json(&server).to_string())
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            break;
        }
    }
    server.stop();
    Ok(())
}

/// The server's totals for `serve --json`.
fn serve_json(server: &Server) -> serde_json::Value {
    let t = server.totals();
    let d = server.pacer_debts();
    serde_json::json!({
        "accepted": t.accepted, "refused": t.refused, "moves": t.moves, "conns": t.conns,
        "pacer": {
            "made_up_bytes": d.made_up, "forgiven_bytes": d.forgiven,
            "made_up_max_bytes": d.made_up_max, "forgiven_max_bytes": d.forgiven_max,
        },
    })
}

/// Per-thread rates, CPU and lateness over `samples`, and fairness across threads.
pub(crate) fn thread_table(samples: &[Sample], server: &Server) -> String {
    let t = server.totals();
    let n = t.conns.len();
    let secs: f64 = samples.iter().map(|s| s.secs).sum::<f64>().max(1e-9);
    let sum = |f: &dyn Fn(&Sample, usize) -> u64, i: usize| samples.iter().map(|s| f(s, i)).sum::<u64>();
    // A thread's traffic either way: what it sent, and what its sink connections brought in.
    let rates: Vec<f64> = (0..n).map(|i| sum(&|s, i| s.bytes[i] + s.received[i], i) as f64 * 8.0 / secs).collect();
    let cpu: Vec<f64> = (0..n).map(|i| sum(&|s, i| s.cpu_ns[i], i) as f64 / 1e9 / secs).collect();
    let late: Vec<u64> = (0..n).map(|i| samples.iter().map(|s| s.late_ns[i]).max().unwrap_or(0)).collect();
    let mut out = format!(
        "{} connections, {} refused, {} moved; {:.1} Mb/s in all\n{:>7} {:>6} {:>10} {:>6} {:>8}\n",
        t.conns.iter().sum::<usize>(),
        t.refused,
        t.moves,
        rates.iter().sum::<f64>() / 1e6,
        "thread",
        "conns",
        "Mb/s",
        "cpu%",
        "late ms"
    );
    // A thousand threads do not fit a terminal: show the extremes and a summary line.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| rates[*b].total_cmp(&rates[*a]));
    let shown: Vec<usize> = if n <= 16 { order } else { order[..8].iter().chain(&order[n - 8..]).copied().collect() };
    for (k, i) in shown.iter().enumerate() {
        if n > 16 && k == 8 {
            out.push_str(&format!("{:>7}\n", "…"));
        }
        out.push_str(&format!(
            "{:>7} {:>6} {:>10.1} {:>6.0} {:>8.1}\n",
            format!("w{i}"),
            t.conns[*i],
            rates[*i] / 1e6,
            cpu[*i] * 100.0,
            late[*i] as f64 / 1e6
        ));
    }
    let per_conn: Vec<f64> = (0..n).filter(|i| t.conns[*i] > 0).map(|i| rates[i] / t.conns[i] as f64).collect();
    let s = spread(&rates);
    out.push_str(&format!(
        "threads: Jain {:.3}, max/min {:.2}; per-connection share max/min {:.2}; CPU max/min {:.2}\n",
        balance(&rates, None).jain,
        s.max_over_min(),
        spread(&per_conn).max_over_min(),
        spread(&cpu).max_over_min()
    ));
    if matches!(server.config().pacing, Pacing::Fine(_)) {
        let d = server.pacer_debts();
        out.push_str(&format!(
            "pacer since the start: made up {} B of lateness (the worst stream {} B), forgave {} B (the worst stream {} B)\n",
            d.made_up, d.made_up_max, d.forgiven, d.forgiven_max
        ));
    }
    out
}

/// Runs the clients and returns their windows and the connections that got nothing to measure.
pub(crate) fn load(a: &LoadArgs) -> Result<(Windows, Summary)> {
    if a.window_ms == 0 || !a.seconds.is_finite() || a.seconds <= 0.0 || a.seconds > 86_400.0 {
        bail!("--seconds must be above 0 and at most a day, and --window-ms above 0");
    }
    if !a.warmup.is_finite() || a.warmup < 0.0 || a.warmup > 3_600.0 {
        bail!("--warmup must be between 0 and 3600 seconds");
    }
    let handshake = match (&a.http_get, a.rate) {
        _ if a.upload => Handshake::Switchyard(Request::Sink),
        (Some(path), _) => Handshake::Raw(
            format!("GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: switchyard\r\n\r\n", a.server).into_bytes(),
        ),
        (None, Some(bits_per_sec)) => Handshake::Switchyard(Request::Stream { bits_per_sec }),
        (None, None) => Handshake::Switchyard(Request::Bulk),
    };
    let transport = if a.udp { Transport::Udp } else { Transport::Tcp };
    if a.wire && (a.udp || a.upload || a.http_get.is_some() || a.rate.is_none()) {
        bail!(
            "--wire follows TCP streams in the server's own protocol: give --rate, and not --udp, --upload or --http-get"
        );
    }
    // The capture starts before the first connection, so it sees every answer.
    let wire = a.wire.then(|| Wire::start(&a.wire_interface, a.server, a.rate.unwrap_or(0) as f64 / 8.0));
    let wire = match wire {
        Some(Err(e)) => {
            eprintln!("the wire's view is skipped: {e}");
            None
        }
        Some(Ok(w)) => Some(w),
        None => None,
    };
    let started = Instant::now();
    let l = Load::start(LoadConfig {
        server: a.server,
        transport,
        conns: a.conns,
        handshake,
        threads: a.threads,
        recv_buffer: Some(a.recv_buffer),
        upload: a.upload.then_some(a.message),
        pin: a.pin,
        // With --http-get the rate is what the server was told to hold (nginx's limit_rate, say).
        promised: a.rate.map(|b| b as f64 / 8.0),
    })
    .with_context(|| format!("cannot start clients for {}", a.server))?;
    let opened = l.opened();
    let skip: Vec<bool> = opened.iter().map(|o| !matches!(o, Opened::Accepted(_))).collect();
    let refused = opened.iter().filter(|o| matches!(o, Opened::Refused(_))).count();
    let failed: Vec<&String> =
        opened.iter().filter_map(|o| if let Opened::Failed(w) = o { Some(w) } else { None }).collect();
    if !a.quiet {
        eprintln!(
            "{} connections opened in {:.2} s: {} accepted, {refused} refused, {} failed",
            a.conns,
            started.elapsed().as_secs_f64(),
            a.conns - refused - failed.len(),
            failed.len()
        );
        if let Some(Opened::Refused(why)) = opened.iter().find(|o| matches!(o, Opened::Refused(_))) {
            eprintln!("  refused: {why}");
        }
        if let Some(why) = failed.first() {
            eprintln!("  failed: {why}");
        }
    }
    if refused + failed.len() == a.conns {
        bail!("no connection was accepted by {} (see above)", a.server);
    }
    let window = Duration::from_millis(a.window_ms);
    let total = (a.seconds * 1000.0 / a.window_ms as f64).ceil() as usize;
    // With --http-get the rate is what the server was told to hold (nginx's limit_rate, say).
    let target = a.rate.map(|b| b as f64 / 8.0);
    let live = std::io::stderr().is_terminal() && !a.quiet;
    let per_line = ((1000 / a.window_ms.max(1)) as usize).max(1);
    let mut drawn = 0;
    let w = l.measure(Duration::from_secs_f64(a.warmup), window, total, |k, w| {
        if !a.quiet && (k + 1) % per_line == 0 {
            let s = w.summary(k + 1 - per_line, target, &l.fates());
            let text = format!("{:>6.1} s  {}\n", (k + 1) as f64 * a.window_ms as f64 / 1e3, summary_line(&s));
            let mut err = std::io::stderr().lock();
            if live && drawn > 0 {
                let _ = write!(err, "\x1b[{drawn}A\x1b[J");
            }
            drawn = if live { 1 } else { 0 };
            let _ = err.write_all(text.as_bytes());
        }
    });
    // Measured to the end, UDP streams probed: what ended, ended during the run. The wire's
    // view ends where the clients' does, before they close.
    if let Some(w) = &wire {
        w.end_run();
    }
    let fates = l.fates();
    let lines = l.departures();
    let locals = l.local_addrs();
    l.stop();
    let wire = match wire.map(|w| w.finish(&locals)) {
        Some(Ok(v)) => Some(v),
        Some(Err(e)) => {
            eprintln!("the wire's view is lost: {e}");
            None
        }
        None => None,
    };
    let on_wire = wire.as_ref().and_then(|v| Departures::of(&v.lines, &fates).map(|d| (v, d)));
    let departures = Departures::of(&lines, &fates);
    let packet = f64::from(a.packet);
    let s = w.summary(0, target, &fates);
    if a.upload {
        println!("(uploading to the server's sink: the figures are bytes the clients sent)");
    }
    // Packets of a stream a window of `ms` holds: its error means something from 20 up.
    let holds = |ms: u64| target.map(|t| t * ms as f64 / 1e3 / packet);
    print_summary(&s, a.window_ms, holds(a.window_ms));
    let coarse_ms = a.window_ms * a.coarsen as u64;
    let coarse = (a.coarsen > 1).then(|| w.coarsen(a.coarsen).summary(0, target, &fates));
    if let Some(c) = &coarse
        && let Some([p50, p99, max]) = c.window_error
    {
        match holds(coarse_ms) {
            Some(n) if n < MEANINGFUL_WINDOW => println!("  at {coarse_ms} ms    per window: {}", too_few(n)),
            _ => println!(
                "  at {coarse_ms} ms    per window: median {:.2}%, p99 {:.2}%, worst {:.2}%",
                p50 * 100.0,
                p99 * 100.0,
                max * 100.0
            ),
        }
    }
    if let Some(d) = &departures {
        print_departures(d, packet, "as this client saw bytes arrive");
    }
    if let Some((v, d)) = &on_wire {
        print_departures(d, packet, &format!("as the wire carried them (AF_PACKET on {})", a.wire_interface));
        print_differ(&differ(&lines, &v.lines), packet, v.drops);
    }
    if let Some(p) = &a.csv {
        write_csv(p, &w).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &a.json {
        let mut j = summary_json(&s);
        j["window_ms"] = a.window_ms.into();
        j["refused"] = refused.into();
        j["failed"] = failed.len().into();
        j["ended_early"] = s.ended.total().into();
        j["ended"] = serde_json::json!({
            "closed": s.ended.closed, "unreachable": s.ended.unreachable, "errors": s.ended.errors
        });
        j["window_packets"] = holds(a.window_ms).into();
        if let Some(c) = &coarse {
            j["coarse"] = summary_json(c);
            j["coarse"]["window_ms"] = coarse_ms.into();
            j["coarse"]["window_packets"] = holds(coarse_ms).into();
        }
        if let Some(d) = &departures {
            j["departure"] = departures_json(d, &lines, packet);
        }
        if let Some((v, d)) = &on_wire {
            j["wire"] = departures_json(d, &v.lines, packet);
            j["wire"]["view"] = "wire".into();
            j["wire"]["interface"] = a.wire_interface.clone().into();
            j["wire"]["packets"] = v.packets.into();
            j["wire"]["drops"] = v.drops.into();
            let x = differ(&lines, &v.lines);
            let q = |x: [f64; 3]| serde_json::json!({"p50": x[0], "p99": x[1], "max": x[2]});
            j["wire"]["differ"] = serde_json::json!({
                "streams": x.streams, "lag_bytes": x.lag.map(q), "lead_bytes": x.lead.map(q),
                "lag_over_a_packet": x.lag_over(packet),
            });
        }
        std::fs::write(p, j.to_string()).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if let Some(p) = &a.svg {
        let svg = rate_chart(&w, &skip, target, "Connections' rate over time").map_err(anyhow::Error::msg)?;
        std::fs::write(p, svg).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if s.ended.total() > 0 {
        let error = fates.iter().find_map(|f| if let Fate::Ended(e @ Ended::Error(_)) = f { Some(e) } else { None });
        bail!(
            "{} of {} connections ended before the run did: {}{}. They count as receiving nothing from then on, so the figures above understate the server (or it failed)",
            s.ended.total(),
            s.conns,
            s.ended,
            error.map_or_else(String::new, |e| format!(" (the first error: {e})"))
        );
    }
    Ok((w, s))
}

fn summary_line(s: &Summary) -> String {
    let mut line = format!(
        "{:>9.1} Mb/s in all, {:>7.3} Mb/s each; Jain {:.4}, max/min {:.2}",
        s.aggregate_bps / 1e6,
        s.mean_bps / 1e6,
        s.jain,
        s.spread.max_over_min()
    );
    if let Some([p50, p99, _]) = s.window_error {
        line.push_str(&format!("; window error p50 {:.2}% p99 {:.2}%", p50 * 100.0, p99 * 100.0));
    }
    if s.ended.total() > 0 {
        line.push_str(&format!("; {} ended", s.ended.total()));
    }
    line
}

/// Packets of a stream a window must hold for its rate error to mean something: below it one
/// packet crossing the window's edge is over 5% of the window.
const MEANINGFUL_WINDOW: f64 = 20.0;

fn too_few(packets: f64) -> String {
    format!(
        "not shown: a window holds {packets:.1} packets of a stream, under {MEANINGFUL_WINDOW} (one packet across its edge would be {:.0}%); see the departure line",
        100.0 / packets.max(1e-9)
    )
}

/// Where the client's view of each stream and the wire's differ: client minus wire, per stream.
struct Differ {
    /// Streams seen by both.
    streams: usize,
    /// Lag (client − wire), bytes: median, p99, worst; and each stream's, for counting.
    lag: Option<[f64; 3]>,
    lags: Vec<f64>,
    /// Lead (client − wire): the same quantiles.
    lead: Option<[f64; 3]>,
}

impl Differ {
    /// Streams whose client lagged more than a packet beyond what the wire had.
    fn lag_over(&self, packet: f64) -> usize {
        self.lags.iter().filter(|x| **x > packet).count()
    }
}

fn differ(client: &[Option<Deviation>], wire: &[Option<Deviation>]) -> Differ {
    use switchyard_core::measure::quantile_sorted;
    let both: Vec<(&Deviation, &Deviation)> =
        client.iter().zip(wire).filter_map(|(c, w)| Some((c.as_ref()?, w.as_ref()?))).collect();
    let q = |mut xs: Vec<f64>| {
        xs.sort_by(f64::total_cmp);
        (!xs.is_empty()).then(|| [quantile_sorted(&xs, 0.5), quantile_sorted(&xs, 0.99), quantile_sorted(&xs, 1.0)])
    };
    let lags: Vec<f64> = both.iter().map(|(c, w)| c.lag - w.lag).collect();
    Differ {
        streams: both.len(),
        lag: q(lags.clone()),
        lags,
        lead: q(both.iter().map(|(c, w)| c.lead - w.lead).collect()),
    }
}

fn print_differ(x: &Differ, packet: f64, drops: u64) {
    println!("  differ      client − wire, per stream ({} streams seen by both):", x.streams);
    if let (Some(lag), Some(lead)) = (x.lag, x.lead) {
        println!("              lag   median {:.0} B, p99 {:.0} B, worst {:.0} B", lag[0], lag[1], lag[2]);
        println!("              lead  median {:.0} B, p99 {:.0} B, worst {:.0} B", lead[0], lead[1], lead[2]);
        println!(
            "              {} streams lagged more than a packet ({packet:.0} B) beyond the wire: the client's delay, not the server's",
            x.lag_over(packet)
        );
    }
    if drops > 0 {
        println!(
            "              the capture dropped {drops} frames (of every program's traffic on the interface): a stream missing some shows lag on the wire it did not have"
        );
    }
}

/// Lead and lag against each stream's departure line, as quantiles over streams.
fn print_departures(d: &Departures, packet: f64, view: &str) {
    let bytes = |b: f64| format!("{b:.0} B ({:.2} packets)", b / packet);
    println!("  departure   {} streams against rate × (t − start), {view}:", d.streams);
    println!("              lead  p99 {}, worst {}", bytes(d.lead[1]), bytes(d.lead[2]));
    println!("              lag   p99 {}, worst {}", bytes(d.lag[1]), bytes(d.lag[2]));
    println!(
        "              longest spell owed and sent nothing: p99 {:.1} ms, worst {:.1} ms",
        d.owed_gap[1] * 1e3,
        d.owed_gap[2] * 1e3
    );
    if let Some([_, p99, max]) = d.rate_error {
        println!(
            "              rate from first arrival to last, off the promise: p99 {:.3}%, worst {:.3}%",
            p99 * 100.0,
            max * 100.0
        );
    }
    if let Some([_, p99, max]) = d.fit_error {
        println!(
            "              rate by least squares over every arrival, off the promise: p99 {:.3}%, worst {:.3}%",
            p99 * 100.0,
            max * 100.0
        );
    }
}

fn departures_json(d: &Departures, lines: &[Option<Deviation>], packet: f64) -> serde_json::Value {
    let q = |x: [f64; 3]| serde_json::json!({"p50": x[0], "p99": x[1], "max": x[2]});
    serde_json::json!({
        "view": "client",
        "packet_bytes": packet,
        "streams": d.streams,
        "lead_bytes": q(d.lead),
        "lag_bytes": q(d.lag),
        "lead_packets": q(d.lead.map(|b| b / packet)),
        "lag_packets": q(d.lag.map(|b| b / packet)),
        "owed_gap_s": q(d.owed_gap),
        "rate_error": d.rate_error.map(q),
        "fit_rate_error": d.fit_error.map(q),
        "per_stream": lines.iter().map(|l| l.map(|d| serde_json::json!({
            "bytes": d.bytes, "secs": d.secs, "lead_bytes": d.lead, "lag_bytes": d.lag, "owed_gap_s": d.owed_gap,
            "arrival_rate": d.arrival_rate, "fit_rate": d.fit_rate, "arrivals": d.arrivals,
            "first_arrival_s": d.first_at
        }))).collect::<Vec<_>>(),
    })
}

pub(crate) fn print_summary(s: &Summary, window_ms: u64, window_packets: Option<f64>) {
    println!("{} connections over {} windows of {window_ms} ms", s.conns, s.windows);
    if s.ended.total() > 0 {
        println!(
            "  ended early {} of {} before the run's end ({}); counted with what they got",
            s.ended.total(),
            s.conns,
            s.ended
        );
    }
    println!("  aggregate   {:.1} Mb/s ({:.3} Mb/s per connection)", s.aggregate_bps / 1e6, s.mean_bps / 1e6);
    println!("  fairness    Jain {:.4}, max/min {:.3}", s.jain, s.spread.max_over_min());
    let p = s.spread;
    println!(
        "  spread      (÷ mean) max {:.3}  75th {:.3}  median {:.3}  25th {:.3}  4th {:.3}  min {:.3}",
        p.max, p.p75, p.p50, p.p25, p.p4, p.min
    );
    if let (Some([p50, p99, max]), Some(run)) = (s.window_error, s.run_error) {
        match window_packets {
            Some(n) if n < MEANINGFUL_WINDOW => {
                println!("  rate error  over the run, worst connection {:.3}%", run * 100.0);
                println!("              per {window_ms} ms window: {}", too_few(n));
            }
            _ => println!(
                "  rate error  per window: median {:.2}%, p99 {:.2}%, worst {:.2}%; over the run, worst connection {:.3}%",
                p50 * 100.0,
                p99 * 100.0,
                max * 100.0,
                run * 100.0
            ),
        }
    }
}

pub(crate) fn summary_json(s: &Summary) -> serde_json::Value {
    let p = s.spread;
    serde_json::json!({
        "conns": s.conns, "windows": s.windows, "aggregate_bps": s.aggregate_bps, "mean_bps": s.mean_bps,
        "jain": s.jain, "max_over_min": s.spread.max_over_min(),
        "spread": {"max": p.max, "p75": p.p75, "p50": p.p50, "p25": p.p25, "p4": p.p4, "min": p.min},
        "window_error": s.window_error.map(|[a, b, c]| serde_json::json!({"p50": a, "p99": b, "max": c})),
        "run_error": s.run_error,
    })
}

fn write_csv(path: &std::path::Path, w: &Windows) -> Result<()> {
    let mut out = csv::Writer::from_path(path)?;
    out.write_record(["window", "start_s", "secs", "conn", "bytes"])?;
    for (k, (bytes, (start, secs))) in w.bytes.iter().zip(&w.times).enumerate() {
        for (c, b) in bytes.iter().enumerate() {
            out.write_record([
                k.to_string(),
                format!("{start:.4}"),
                format!("{secs:.5}"),
                c.to_string(),
                b.to_string(),
            ])?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The fastest, median and slowest connection (by mean rate) over time, with the target.
pub(crate) fn rate_chart(w: &Windows, skip: &[bool], target: Option<f64>, title: &str) -> Result<String, String> {
    let rates = w.mean_rates(0);
    let mut live: Vec<usize> = (0..rates.len()).filter(|c| !skip.get(*c).copied().unwrap_or(false)).collect();
    if live.is_empty() || w.bytes.is_empty() {
        return Err("nothing was received, so there is nothing to draw".into());
    }
    live.sort_by(|a, b| rates[*a].total_cmp(&rates[*b]));
    let picks = [("slowest", live[0]), ("median", live[live.len() / 2]), ("fastest", live[live.len() - 1])];
    let mut series: Vec<Series> = picks
        .iter()
        .map(|(name, c)| Series {
            name: format!("{name} connection (#{c})"),
            points: (0..w.bytes.len())
                .map(|k| (w.times[k].0 + w.times[k].1, w.bytes[k][*c] as f64 * 8.0 / w.times[k].1.max(1e-9) / 1e6))
                .collect(),
            style: Style::Measured,
        })
        .collect();
    if let Some(t) = target {
        let end = w.times.last().map_or(1.0, |x| x.0 + x.1);
        series.push(Series {
            name: "target".into(),
            points: vec![(0.0, t * 8.0 / 1e6), (end, t * 8.0 / 1e6)],
            style: Style::Model,
        });
    }
    line_chart(title, "seconds", "Mb/s per window", &series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_people_write_them() {
        assert_eq!(parse_bits("4Mbit"), Ok(4_000_000));
        assert_eq!(parse_bits("500k"), Ok(500_000));
        assert_eq!(parse_bits("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_bits("4000000"), Ok(4_000_000));
        assert_eq!(parse_bits("2Mbps"), Ok(2_000_000));
        assert!(parse_bits("fast").unwrap_err().contains("4Mbit"));
        assert!(parse_bits("0").is_err());
        assert!(parse_bits("-3M").is_err());
    }
}

/// Where the workers run, as a person reads it: "worker 0 on core 2, worker 1 unpinned".
fn worker_cores(cores: &[Option<u32>]) -> String {
    let each: Vec<String> = cores
        .iter()
        .enumerate()
        .map(|(w, c)| c.map_or_else(|| format!("worker {w} unpinned"), |c| format!("worker {w} on core {c}")))
        .collect();
    each.join(", ")
}

#[cfg(test)]
mod worker_cores_tests {
    #[test]
    fn cores_read_as_words_not_debug_text() {
        assert_eq!(super::worker_cores(&[Some(0), None]), "worker 0 on core 0, worker 1 unpinned");
    }
}
