//! `switchyard reproduce ko-worker-centric`'s options; the run and its report are
//! `switchyard_experiments::ko`'s.

use anyhow::Result;
use switchyard_experiments::ko::{self, Setup};

/// `reproduce ko-worker-centric`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Runs per point and scheduler (seeds --seed, --seed + 1, …).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: u64,

    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// The workload's and the stores' size against the paper's (1: 6,000 tasks and 6,000-file
    /// stores; a run's time grows with the square of it).
    #[arg(long, default_value_t = 0.1)]
    pub(crate) scale: f64,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let setup =
        Setup { runs: a.runs, seed: a.seed, scale: a.scale, ..Setup::paper(crate::reproduce::threads(a.threads)) };
    let rows = ko::run(&setup, &crate::print::Bar::new())?;
    a.output.emit(&ko::report(&setup, &rows))
}
