//! `switchyard reproduce dou-cacheflow`'s options; the runs and their report are
//! `switchyard_experiments::cacheflow`'s.

use anyhow::Result;
use switchyard_experiments::cacheflow::{self, RealSetup, Setup};

/// `reproduce dou-cacheflow`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    /// Also run the experiment on real gateways (HTTP on loopback).
    #[arg(long)]
    pub(crate) real: bool,

    /// With --real: the objects' size in KB (the thesis: 50).
    #[arg(long, default_value_t = 50, requires = "real")]
    pub(crate) object_kb: usize,

    /// With --real: requests each client makes (a fifth of them warm-up).
    #[arg(long, default_value_t = 100, requires = "real")]
    pub(crate) requests: usize,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let setup = Setup::thesis(a.seed, crate::reproduce::threads(a.threads));
    let real = RealSetup { seed: a.seed, object_kb: a.object_kb, requests: a.requests };
    if a.real {
        // Before the simulated cases, so that a bad option does not wait for them.
        real.check()?;
    }
    let bar = crate::print::Bar::new();
    let cases = cacheflow::simulated(&setup, &bar)?;
    let on_gateways = if a.real { Some(cacheflow::on_gateways(&real, &bar)?) } else { None };
    drop(bar);
    a.output.emit(&cacheflow::report(&setup, &cases, on_gateways.as_deref().map(|c| (&real, c))))
}
