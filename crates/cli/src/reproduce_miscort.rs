//! `switchyard reproduce dou-miscort`'s options; the runs and their reports are
//! `switchyard_experiments::miscort`'s (the simulator) and `miscort_real`'s (`--real`).

use anyhow::Result;
use switchyard_experiments::{miscort, miscort_real};

/// `reproduce dou-miscort`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Runs per point and scheduler (seeds --seed, --seed + 1, …; default 5, or 10 simulated
    /// runs beside the real one with --real).
    #[arg(long)]
    pub(crate) runs: Option<u64>,

    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// Failures as a Poisson process of rate p / 20 s instead of a per-run probability p (the
    /// notes' §3.2: the two readings diverge at high rates).
    #[arg(long)]
    pub(crate) poisson: bool,

    /// Presume an attempt failed once it has run this many times its task's mean time (the
    /// thesis says only "significantly higher").
    #[arg(long, default_value_t = 3.0)]
    pub(crate) presume: f64,

    /// Run the workload on the real jobs coordinator over loopback instead (30 workers that
    /// crash and recover, at p = 0.4 and 1/40 of real time, about 2 minutes), beside the
    /// simulator's runs of it, and compare the schedulers' rankings. Its report is
    /// `dou-miscort-real` (`switchyard schema reproduce dou-miscort-real`).
    #[arg(long)]
    pub(crate) real: bool,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let progress = crate::print::Bar::new();
    if a.real {
        let setup = miscort_real::Setup {
            seed: a.seed,
            presume_factor: a.presume,
            sim_runs: a.runs.unwrap_or(10),
            ..miscort_real::Setup::thesis()
        };
        let rows = miscort_real::run(&setup, &progress)?;
        return a.output.emit(&miscort_real::report(&setup, &rows));
    }
    let setup = miscort::Setup {
        runs: a.runs.unwrap_or(5),
        seed: a.seed,
        poisson: a.poisson,
        presume_factor: a.presume,
        ..miscort::Setup::thesis(crate::reproduce::threads(a.threads))
    };
    let rows = miscort::run(&setup, &progress)?;
    a.output.emit(&miscort::report(&setup, &rows))
}
