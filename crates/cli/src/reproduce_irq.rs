//! `switchyard reproduce guo-interrupt-affinity`'s options; the run and its report are
//! `switchyard_experiments::guo_irq`'s.

use anyhow::Result;
use switchyard_experiments::guo_irq::{self, Setup};

/// `reproduce guo-interrupt-affinity`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
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
    let setup = Setup::guo(a.seed, crate::reproduce::threads(a.threads));
    let report = guo_irq::run(&setup)?.report(&setup);
    a.output.emit(&report)
}
