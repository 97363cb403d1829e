//! `switchyard reproduce dou-cacheflow`: prints the Cacheflow reproduction
//! (`switchyard_experiments::cacheflow`) beside the thesis's figures.

use std::io::Write;

use anyhow::Result;
use switchyard_experiments::cacheflow::{self, PUBLISHED, RealSetup, Setup, WHY};

pub(crate) fn run_rows(seed: u64, threads: usize, real: Option<(usize, usize)>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Cacheflow (Dou 2011 ch. 4) in the simulator: 6 servers × 3 clients, 5,000 objects of 50 KB, 1,000 sets of 100 (80/20), \
         a request every 5 s per client, 30 min runs measured after 5 min; seed {seed}\n"
    )?;
    let cases = cacheflow::simulated(&Setup::thesis(seed, threads))?;
    writeln!(
        out,
        "{:<42} {:>8} {:>10} {:>12} {:>11} {:>11} {:>10} {:>11}",
        "case", "hit rate", "model", "published", "local/req", "remote/req", "delivered", "duplicates"
    )?;
    for c in &cases {
        let total = &c.outcome.total;
        writeln!(
            out,
            "{:<42} {:>7.1}% {:>10} {:>12} {:>11.1} {:>11.1} {:>9.1}% {:>11.2}",
            c.name,
            100.0 * c.outcome.hit_rate(),
            c.model.map_or("-".to_string(), |m| format!("{:.1}%", 100.0 * m)),
            c.published.unwrap_or("-"),
            c.per_request(total.local_hits),
            c.per_request(total.remote_hits),
            100.0 * c.outcome.delivered(),
            c.per_request(total.duplicates)
        )?;
    }
    writeln!(out, "\n{PUBLISHED}\n\nwhy ours differ:\n{WHY}")?;
    if let Some((object_kb, requests)) = real {
        writeln!(
            out,
            "\non real gateways (HTTP on loopback, this process): 6 gateways, an origin of 5,000 objects of {object_kb} KB, 18 clients \
             making {requests} requests each ({} not counted), 10 ms apart\n",
            requests / 5
        )?;
        writeln!(
            out,
            "{:<34} {:>8} {:>12} {:>11} {:>11} {:>10} {:>11} {:>8}",
            "case", "hit rate", "published", "local/req", "remote/req", "delivered", "duplicates", "time"
        )?;
        for c in cacheflow::on_gateways(&RealSetup { seed, object_kb, requests })? {
            let r = &c.outcome;
            writeln!(
                out,
                "{:<34} {:>7.1}% {:>12} {:>11.1} {:>11.1} {:>9.1}% {:>11.2} {:>7.1}s",
                c.name,
                100.0 * r.hit_rate(),
                c.published,
                c.per_request(r.local_hits),
                c.per_request(r.remote_hits),
                100.0 * (1.0 - r.mispredicted as f64 / r.asked.max(1) as f64),
                c.per_request(r.duplicates),
                c.elapsed.as_secs_f64()
            )?;
        }
    }
    Ok(())
}

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
    run_rows(a.seed, crate::reproduce::threads(a.threads), a.real.then_some((a.object_kb, a.requests)))
}
