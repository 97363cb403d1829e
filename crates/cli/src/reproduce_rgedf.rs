//! `switchyard reproduce dou-rgedf`'s options; the run and its report are
//! `switchyard_experiments::rgedf`'s.

use anyhow::Result;
use switchyard_experiments::rgedf::{self, Setup};

/// `reproduce dou-rgedf`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Runs per point and scheduler (seeds --seed, --seed + 1, …).
    #[arg(long, default_value_t = 10)]
    pub(crate) runs: u64,

    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let setup = Setup { runs: a.runs, seed: a.seed, ..Setup::thesis(crate::reproduce::threads(a.threads)) };
    let rows = rgedf::run(&setup, &crate::print::Bar::new())?;
    a.output.emit(&rgedf::report(&setup, &rows))
}
