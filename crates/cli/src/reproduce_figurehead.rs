//! `switchyard reproduce figurehead`'s options; the runs and their report are
//! `switchyard_experiments::figurehead`'s.

use anyhow::{Result, bail};
use switchyard_experiments::figurehead;

/// `reproduce figurehead`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Requests per simulated run (9 scenarios × 9 policy runs).
    #[arg(long, default_value_t = 20_000)]
    pub(crate) requests: u64,

    /// Plan Base and OptWait from the back-ends' model CDFs (the paper's "oracle CDFs") instead
    /// of from latencies observed during the run.
    #[arg(long)]
    pub(crate) oracle: bool,

    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// Threads to run the policy runs on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    if a.requests == 0 {
        bail!("--requests 0: a run needs at least one request");
    }
    let table = figurehead::table2(a.seed);
    let bar = crate::print::Bar::new();
    let rows = figurehead::sweep(
        &figurehead::scenarios(),
        a.requests,
        a.oracle,
        a.seed,
        crate::reproduce::threads(a.threads),
        &bar,
    )?;
    drop(bar);
    a.output.emit(&figurehead::report(&table, &rows, a.requests, a.oracle, a.seed))
}
