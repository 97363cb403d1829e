//! `switchyard bench deliver`'s options; the run and its report are
//! `switchyard_experiments::bench::deliver`'s.

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use switchyard_experiments::bench::deliver::{Clients, PacingPath, Setup, report, run as bench};
use switchyard_experiments::bench::peers::found;

/// Paced streams and bulk connections, served by Switchyard's delivery server, by a tokio
/// multi-threaded server and by nginx (`limit_rate`), to the same clients.
///
/// The clients run as a child process (`switchyard deliver load`), so the servers and the clients
/// do not share a descriptor limit, and each server's CPU time is its own. Paced servers get
/// --cores cores (pinned to the first ones); bulk servers get every core. Ours serves each paced
/// case once per pacing path of --pacings (fine, quota, kernel), a row each, every row judged
/// against issue 42's goals; a path that cannot run here keeps its row, which says why.
///
/// nginx comes from Debian (`bench/install-peers.sh`); without it its rows are left out and the
/// report says so in a note.
///
/// Example:
///
///   switchyard bench deliver --conns 10000 --rate 64k --seconds 10
///   switchyard bench deliver --pacings fine,kernel --wire    # root: the wire's view judges
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct DeliverBench {
    /// Paced streams (the goal: 10,000 per core).
    #[arg(long, default_value_t = 10_000)]
    conns: usize,
    /// Each stream's rate, bits per second.
    #[arg(long, default_value = "64k", value_parser = crate::deliver::parse_bits)]
    rate: u64,
    /// Cores the paced servers get.
    #[arg(long, default_value_t = 1)]
    cores: usize,
    /// Our pacer's grain and the tokio server's tick, ms: each send carries this much of the
    /// stream (more sends per second cost CPU; fewer make each window lumpier).
    #[arg(long, default_value_t = 100.0)]
    grain_ms: f64,
    /// The accuracy case: streams on the same core(s), few enough to send every millisecond.
    #[arg(long, default_value_t = 100)]
    accurate_conns: usize,
    /// The accuracy case: each stream's rate, bits per second.
    #[arg(long, default_value = "4Mbit", value_parser = crate::deliver::parse_bits)]
    accurate_rate: u64,
    /// The accuracy case: grain and tick, ms.
    #[arg(long, default_value_t = 1.0)]
    accurate_grain_ms: f64,
    /// Seconds measured per run, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Seconds of warm-up.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Bulk connections.
    #[arg(long, default_value_t = 384)]
    bulk_conns: usize,
    /// Seconds measured per bulk run.
    #[arg(long, default_value_t = 5.0)]
    bulk_seconds: f64,
    /// Also measure the paced streams as the wire carried them: an AF_PACKET capture of each
    /// server's segments on --wire-interface, each timed by the kernel as it left, beside the
    /// clients' view (wire columns in the paced table), and issue 42's goals judged on the
    /// wire's figures (the goal lines say which view judged: the clients share the cores with
    /// the servers, and a client late to read blurs its own view only). Needs root
    /// (CAP_NET_RAW); where no capture can be opened, the rows have no wire figures and a note
    /// says why. nginx's rows have none (HTTP; the capture follows our protocol's answer).
    #[arg(long)]
    wire: bool,
    /// The interface the streams cross, for --wire: lo, as the servers here listen on loopback.
    #[arg(long, default_value = "lo", requires = "wire")]
    wire_interface: String,
    /// Leave out the memory table. By default each server is run once more as a process of its
    /// own (ours as `deliver serve`) with --conns streams, and measured idle and with the
    /// streams flowing: its RSS and PSS per stream (from /proc/PID/smaps_rollup), its peak
    /// (VmHWM), the kernel's memory for its sockets (ss -tm) and its CPU per stream-second.
    /// That adds a run per server (warm-up, --seconds and the streams' opening).
    #[arg(long)]
    no_memory: bool,
    /// Our pacing paths, a row each in the paced cases, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "fine,quota,kernel")]
    pacings: Vec<PacingArg>,

    #[command(flatten)]
    output: crate::print::Output,
}

/// How ours holds its streams to their rates in the paced cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PacingArg {
    /// Each stream's own credit, sent every --grain-ms (`deliver serve --pacing fine`).
    Fine,
    /// The thesis's quota: each thread sends its streams' packets in rounds, one round every
    /// --grain-ms (as the others wake; `deliver serve`'s --tick-ms is 10 by default).
    Quota,
    /// TCP's own pacing under SO_MAX_PACING_RATE (Linux 4.13+, no qdisc), each stream written
    /// a packet at a time. The kernel is asked first; where it refuses, the row says so.
    Kernel,
}

impl From<PacingArg> for PacingPath {
    fn from(p: PacingArg) -> Self {
        match p {
            PacingArg::Fine => Self::Fine,
            PacingArg::Quota => Self::Quota,
            PacingArg::Kernel => Self::Kernel,
        }
    }
}

pub(crate) fn run(a: &DeliverBench) -> Result<()> {
    let setup = Setup {
        conns: a.conns,
        rate: a.rate,
        cores: a.cores,
        grain_ms: a.grain_ms,
        accurate_conns: a.accurate_conns,
        accurate_rate: a.accurate_rate,
        accurate_grain_ms: a.accurate_grain_ms,
        seconds: a.seconds,
        warmup: a.warmup,
        bulk_conns: a.bulk_conns,
        bulk_seconds: a.bulk_seconds,
        nginx: found("nginx"),
        clients: Clients::Program(std::env::current_exe().context("finding this program")?),
        wire: a.wire.then(|| a.wire_interface.clone()),
        memory: !a.no_memory,
        pacings: a.pacings.iter().map(|&p| p.into()).collect(),
        kernel: None,
    };
    let all = bench(&setup, &crate::print::Bar::new())?;
    a.output.emit(&report(&setup, &all))
}

/// The tokio peer of `bench deliver` as a program of its own, so that its memory is its own
/// (`bench deliver`'s memory table starts it): serves the delivery protocol's `stream` and
/// `bulk` lines until stopped.
#[derive(Args, Debug)]
pub(crate) struct TokioPeer {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7400")]
    listen: std::net::SocketAddr,
    /// Worker threads (pinned to the first cores when fewer than every core).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Each stream wakes this often, ms, and writes what its rate owes.
    #[arg(long, default_value_t = 100.0)]
    grain_ms: f64,
}

pub(crate) fn run_tokio_peer(a: &TokioPeer) -> Result<()> {
    switchyard_experiments::bench::deliver_memory::serve_tokio_peer(a.listen, a.threads, a.grain_ms)
}
