//! `switchyard reproduce yates-clp`'s options; the run and its report are
//! `switchyard_experiments::clp`'s.

use anyhow::Result;
use clap::ValueEnum;
use switchyard_experiments::clp::{self, Part};

/// The parts of the reproduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PartArg {
    /// Per-thread and per-connection fairness against threads, UDP and TCP bulk (Ch. 3).
    Fairness,
    /// Soft throughput-based scheduling, off and on (Ch. 4).
    Soft,
    /// Hard throughput-based scheduling: 4 Mb/s on every connection (Ch. 4), over UDP (the
    /// thesis's) and TCP, each paced `fine`, by `quota` and by the kernel (TCP's own pacing
    /// under SO_MAX_PACING_RATE; UDP's needs the fq qdisc). A case the kernel cannot pace here
    /// gets a row saying why, and the run goes on.
    Hard,
    /// Processor scaling, 1 to 20 processors, in the simulator (Ch. 2).
    Scaling,
}

impl From<PartArg> for Part {
    fn from(p: PartArg) -> Self {
        match p {
            PartArg::Fairness => Self::Fairness,
            PartArg::Soft => Self::Soft,
            PartArg::Hard => Self::Hard,
            PartArg::Scaling => Self::Scaling,
        }
    }
}

/// `reproduce yates-clp`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The parts to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PartArg::Fairness, PartArg::Soft, PartArg::Hard, PartArg::Scaling])]
    clp_parts: Vec<PartArg>,

    /// Thread counts for the fairness part (the thesis: 12 to 384; this machine's core count is
    /// added).
    #[arg(long, value_delimiter = ',', default_values_t = [12, 24, 48, 96, 192, 384])]
    clp_threads: Vec<usize>,

    /// Thread counts for the hard part (the thesis: 12, 24 and 48; this machine's core count is
    /// added). Each runs six cases: UDP and TCP, each paced fine, by quota and by the kernel.
    #[arg(long, value_delimiter = ',', default_values_t = [12, 24, 48])]
    clp_hard_threads: Vec<usize>,

    /// Connections (the thesis: 384, and 3,072).
    #[arg(long, default_value_t = 384)]
    clp_conns: usize,

    /// Seconds measured per case, after a second's warm-up (the thesis: 45 and 45).
    #[arg(long, default_value_t = 3.0)]
    clp_seconds: f64,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let setup = clp::Setup {
        parts: a.clp_parts.iter().map(|p| Part::from(*p)).collect(),
        threads: a.clp_threads.clone(),
        hard_threads: a.clp_hard_threads.clone(),
        conns: a.clp_conns,
        seconds: a.clp_seconds,
        kernel: None,
    };
    let bar = crate::print::Bar::new();
    let run = clp::run(&setup, &bar)?;
    drop(bar);
    a.output.emit(&run.report(&setup))
}
