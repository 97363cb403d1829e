//! `switchyard reproduce guo-xen-credit`: prints Guo ch. 8's cache-aware credit scheduling
//! (`switchyard_experiments::guo_xen`) by workload and rule, then each published claim beside ours.

use std::io::Write;

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use switchyard_experiments::guo_xen::{self, Setup};
use switchyard_sim::models::xen::{Charge, Move, Rule};

pub(crate) fn run_rows(seed: u64, runs: u64, scale: f64, app_kib: Option<u64>, threads: usize) -> Result<()> {
    let setup = Setup { scale, runs, app_bytes: app_kib.map(|k| k << 10), ..Setup::guo(seed, threads) };
    eprintln!(
        "searching the session capacity of {} workloads under {} rules, {runs} seeds each ({} simulated seconds a run)…",
        setup.workloads.len(),
        Rule::ALL.len(),
        1.2 * scale
    );
    let bar = ProgressBar::new(guo_xen::searches(&setup) as u64);
    bar.set_style(
        ProgressStyle::with_template("guo-xen-credit [{bar:30}] {pos}/{len} searches {elapsed}").expect("static"),
    );
    let repro = guo_xen::run_with(&setup, &|done| bar.set_position(done as u64));
    bar.finish_and_clear();
    let repro = repro?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Guo ch. 8 in the simulator: a web server in DomU (4 VCPUs) behind Dom0 (8 VCPUs) on a Xeon E5335 \
         (L2 shared by core pairs), VCPUs placed by Xen's credit scheduler or by Table 8.3's cache-aware rule; \
         capacity = the most sessions (to {}) with {:.0}% of answers within 10 ms, mean of seeds {seed}–{}\n",
        setup.step,
        setup.target * 100.0,
        seed + runs - 1
    )?;
    if let Some(kib) = app_kib {
        writeln!(
            out,
            "(the application's working set per request: {kib} KiB on every workload, in place of the mixes' own)\n"
        )?;
    }
    writeln!(
        out,
        "{:<10} {:<24} {:>9} {:>8} {:>9} {:>6} {:>13} {:>10} {:>10} {:>10} {:>11}",
        "workload",
        "rule",
        "sessions",
        "vs credit",
        "answers/s",
        "busy",
        "busiest VCPU",
        "moves/s",
        "leave L2",
        "L2/answer",
        "miss share"
    )?;
    for r in &repro.rows {
        let c = &r.capacity.at;
        let e = &r.at_credit_capacity;
        writeln!(
            out,
            "{:<10} {:<24} {:>9.0} {:>+7.1}% {:>9.0} {:>6.2} {:>8} {:>3.0}% {:>10.0} {:>9.0}% {:>10.0} {:>10.1}%",
            r.workload.name(),
            r.rule.name(),
            r.mean_sessions(),
            (repro.gain(r.workload, r.rule).unwrap_or(1.0) - 1.0) * 100.0,
            c.answers_per_s,
            c.busy_pcpus,
            c.busiest_vcpu.0,
            c.busiest_vcpu.1 * 100.0,
            e.moves_per_s,
            e.moves_leaving_l2 * 100.0,
            e.l2_per_answer(),
            e.miss_share * 100.0
        )?;
        if r.rule == Rule::CacheAwareSteals {
            writeln!(out)?;
        }
    }
    writeln!(
        out,
        "(sessions: mean over the seeds; answers/s, busy PCPUs and the busiest VCPU at the first seed's capacity; moves/s, \
         leave L2, L2/answer and miss share at the credit scheduler's capacity, first seed, for every rule)\n"
    )?;
    writeln!(out, "VCPU moves by cause at the credit scheduler's capacity (per second, and the share leaving the L2)")?;
    for r in &repro.rows {
        let parts: Vec<String> = Move::ALL
            .iter()
            .map(|&m| {
                let (per_s, leaving) = r.at_credit_capacity.moves_by_cause[m as usize];
                format!("{} {per_s:.0}/s ({:.0}%)", m.name(), leaving * 100.0)
            })
            .collect();
        writeln!(out, "  {:<10} {:<24} {}", r.workload.name(), r.rule.name(), parts.join(", "))?;
    }
    writeln!(out)?;
    writeln!(out, "L2 misses by function under the credit scheduler at its capacity (Table 8.2's grouping)")?;
    for w in &setup.workloads {
        let Some(row) = repro.row(*w, Rule::Credit) else { continue };
        let o = &row.at_credit_capacity;
        let parts: Vec<String> =
            Charge::ALL.iter().map(|&c| format!("{} {:.1}%", c.name(), o.l2_share(c) * 100.0)).collect();
        writeln!(out, "  {:<10} {}", w.name(), parts.join(", "))?;
    }
    writeln!(out, "\npublished beside ours")?;
    crate::report::print_claims(&mut out, &repro.claims)
}

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
    run_rows(a.seed, a.runs, a.scale, a.app_kib, crate::reproduce::threads(a.threads))
}
