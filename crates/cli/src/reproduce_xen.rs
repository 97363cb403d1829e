//! `switchyard reproduce guo-xen-credit`'s options; the run and its report are
//! `switchyard_experiments::guo_xen`'s.

use anyhow::{Context, Result};
use switchyard_experiments::guo_xen::{self, Setup};

/// `reproduce guo-xen-credit`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Runs per point and scheduler (seeds --seed, --seed + 1, …).
    #[arg(long, default_value_t = 3)]
    pub(crate) runs: u64,

    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// Simulated time per run against the default 1.2 s (smaller is faster and noisier).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,

    /// The application's working set per request on its VCPU, in KiB, for every workload in
    /// place of the fitted 1,024 (`switchyard_sim::models::xen::APP_BYTES`): how the results
    /// depend on it.
    #[arg(long)]
    pub(crate) app_kib: Option<u64>,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let app_bytes =
        a.app_kib.map(|k| k.checked_mul(1024).with_context(|| format!("--app-kib {k} is too large"))).transpose()?;
    let setup =
        Setup { scale: a.scale, runs: a.runs, app_bytes, ..Setup::guo(a.seed, crate::reproduce::threads(a.threads)) };
    let repro = guo_xen::run_with(&setup, &crate::print::Bar::new())?;
    a.output.emit(&repro.report(&setup))
}
