//! `switchyard bench steer`'s options; the runs and their report are
//! `switchyard_experiments::bench::steer`'s.

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::steer::{self, Path, Setup};

/// Receive-side steering (Guo ch. 3's interrupt affinity; RFS on Linux today) measured: the
/// delivery server's `sink` connections (clients upload, the server reads and counts, like
/// iperf) placed with `--steer none` (least-loaded worker, threads left to the scheduler),
/// `incoming-cpu` (the worker pinned to the core the kernel receives the connection on, read
/// from SO_INCOMING_CPU) and `other-cpu` (pinned to another core: the wrong place on purpose),
/// one connection per core from client threads pinned one per core.
///
/// Paths: loopback; a veth pair between two network namespaces the bench makes (root and `ip`
/// needed, skipped with the reason otherwise, always deleted); and the same veth with RPS
/// sending every packet's receipt to CPU 0 (Guo's one NIC queue on one core).
///
/// Reported per path and message size: throughput, CPU per byte (this process's, and the whole
/// machine's from /proc/stat), connections placed on a worker pinned to their receiving core
/// ("placed"), whose worker ran on that core at the end ("at end"), the receiving cores seen
/// when placing, and the ratios steered/none and steered/other-cpu; then the simulator's irq model
/// of this machine (caches read from sysfs) for the same placements, and the difference
/// between measured and predicted ratios. Ratios are within one run; the modes alternate in
/// rounds and the median round is kept. The report ends with what a 2-core VM can and cannot
/// show.
///
/// Examples:
///
///   switchyard bench steer
///   switchyard bench steer --sizes 1448,64K --seconds 3 --rounds 5
///   switchyard bench steer --paths loopback --seconds 0.2 --rounds 1
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct SteerBench {
    /// Message sizes, comma-separated, with K or M (iperf's -l on both sides).
    #[arg(long, value_delimiter = ',', value_parser = crate::units::parse_size, default_value = "1448,16K,64K")]
    sizes: Vec<usize>,
    /// Seconds measured per run.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Seconds each run warms up before measuring.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Rounds of every case (the median is kept).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Paths, comma-separated: loopback, veth, veth-rps.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "loopback,veth,veth-rps")]
    paths: Vec<PathArg>,

    #[command(flatten)]
    output: crate::print::Output,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PathArg {
    /// 127.0.0.1.
    Loopback,
    /// A veth pair between two namespaces made for the run.
    Veth,
    /// The same veth with RPS steering receipt to CPU 0.
    VethRps,
}

impl From<PathArg> for Path {
    fn from(p: PathArg) -> Self {
        match p {
            PathArg::Loopback => Self::Loopback,
            PathArg::Veth => Self::Veth,
            PathArg::VethRps => Self::VethRps,
        }
    }
}

pub(crate) fn run(a: &SteerBench) -> Result<()> {
    switchyard_runtime::deliver::raise_file_limit();
    let setup = Setup {
        sizes: a.sizes.clone(),
        seconds: a.seconds,
        warmup: a.warmup,
        rounds: a.rounds,
        paths: a.paths.iter().map(|&p| p.into()).collect(),
    };
    let report = steer::run(&setup, &crate::print::Bar::new())?.report(&setup);
    a.output.emit(&report)
}
