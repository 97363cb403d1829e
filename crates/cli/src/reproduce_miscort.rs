//! `switchyard reproduce dou-miscort`: prints MiscoRT's reproduction
//! (`switchyard_experiments::miscort`) beside the thesis's figures, and writes its CSV and
//! charts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use switchyard_experiments::miscort::{self, MAP_TIME, REDUCE_TIME, Row, Setup, WHY};
use switchyard_sim::report::line_chart;

use crate::report::series_by_name;

pub(crate) fn run_rows(
    runs: u64,
    seed: u64,
    poisson: bool,
    presume: f64,
    threads: usize,
    dir: Option<&Path>,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let setup = Setup { runs, seed, poisson, presume_factor: presume, ..Setup::thesis(threads) };
    writeln!(
        out,
        "MiscoRT (Dou 2011 ch. 3) in the simulator: 11 applications (8 × 4 maps, 3 × 40 maps, 2 reduces each; a map {MAP_TIME} s, \
         a reduce {REDUCE_TIME} s), deadlines 100–550 s, 30 workers; failures {}; presumed failed past {presume} × the mean task time; \
         {runs} runs a point from seed {seed}\n",
        if poisson { "Poisson at λ = p / 20 s" } else { "per run with probability p, at a uniform point" }
    )?;
    let total = setup.regimes.len() * setup.schedulers.len() * runs as usize;
    let bar = ProgressBar::new(total as u64);
    bar.set_style(ProgressStyle::with_template("dou-miscort [{bar:30}] {pos}/{len} runs {elapsed}").expect("static"));
    let rows = miscort::run(&setup, &|done| bar.set_position(done as u64));
    bar.finish_and_clear();
    let rows = rows?;
    for (family, title, x) in [
        ("all", "Every worker at failure rate p (Figs. 3.7, 3.9, 3.13)", "p"),
        ("half", "Half the workers at p, half reliable (Figs. 3.8, 3.10, 3.15–3.19)", "p"),
        ("lognormal", "Table 3.1's log-normal sets (Figs. 3.11–3.12, 3.15–3.19)", "set"),
        ("deadlines", "Deadlines scaled, p = 0.2 (Fig. 3.23)", "scale"),
    ] {
        writeln!(out, "{title}")?;
        writeln!(
            out,
            "{:>6} {:<15} {:>7} {:>12} {:>7} {:>13} {:>9}",
            x, "scheduler", "missed", "end-to-end s", "waste", "repeats/app", "failures"
        )?;
        for r in rows.iter().filter(|r| r.regime.axis().0 == family) {
            writeln!(
                out,
                "{:>6} {:<15} {:>6.0}% {:>12.0} {:>6.0}% {:>13.1} {:>9.0}",
                r.regime.axis().1,
                r.scheduler,
                r.miss_rate * 100.0,
                r.end_to_end,
                r.waste * 100.0,
                r.repeats,
                r.failures
            )?;
        }
        writeln!(out)?;
    }
    writeln!(out, "published beside ours (notes 003 §5.2)")?;
    for c in miscort::claims(&rows) {
        writeln!(out, "- {} — published: {} | ours: {}", c.figure, c.published, c.ours)?;
    }
    writeln!(out, "{WHY}")?;
    if let Some(d) = dir {
        write_outputs(d, &rows)?;
        writeln!(
            out,
            "\nwrote dou-miscort.csv and dou-miscort-{{all,half,deadlines}}-{{missed,end-to-end,waste}}.svg in {}",
            d.display()
        )?;
    }
    Ok(())
}

fn write_outputs(dir: &Path, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut csv = String::from("regime,x,scheduler,miss_rate,end_to_end_s,waste,repeats_per_app,failures\n");
    for r in rows {
        let (family, x) = r.regime.axis();
        csv.push_str(&format!(
            "{family},{x},{},{:.4},{:.1},{:.4},{:.2},{:.1}\n",
            r.scheduler, r.miss_rate, r.end_to_end, r.waste, r.repeats, r.failures
        ));
    }
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).with_context(|| format!("cannot write {name} in {}", dir.display()))
    };
    write("dou-miscort.csv", &csv)?;
    for family in ["all", "half", "deadlines"] {
        for (metric, label, value) in [
            ("missed", "deadlines missed (%)", (|r: &Row| r.miss_rate * 100.0) as fn(&Row) -> f64),
            ("end-to-end", "end-to-end time (s)", |r: &Row| r.end_to_end),
            ("waste", "worker time wasted (%)", |r: &Row| r.waste * 100.0),
        ] {
            // In the order they were run (MiscoRT, EDF, then the others).
            let series = series_by_name(
                rows,
                |r| r.scheduler,
                |r| (r.regime.axis().0 == family).then(|| (r.regime.axis().1, value(r))),
            );
            if series.is_empty() {
                continue;
            }
            let x = if family == "deadlines" { "deadline scale" } else { "failure rate p" };
            let svg = line_chart(&format!("{label}, {family}"), x, label, &series).map_err(anyhow::Error::msg)?;
            write(&format!("dou-miscort-{family}-{metric}.svg"), &svg)?;
        }
    }
    Ok(())
}

/// `reproduce dou-miscort --real`: the same workload on the real coordinator, beside the
/// simulator.
pub(crate) fn run_real(seed: u64, presume: f64, sim_runs: u64) -> Result<()> {
    use switchyard_experiments::miscort_real::{self, By, kendall_tau, ranking};
    let mut out = std::io::stdout().lock();
    let setup = miscort_real::Setup { seed, presume_factor: presume, sim_runs, ..miscort_real::Setup::thesis() };
    writeln!(
        out,
        "dou-miscort's workload on the real jobs coordinator (HTTP on loopback, SQLite, 30 polling workers crashing at \
         λ = {} / {MAP_TIME} s and recovering in 30 s on average, tasks that sleep their length), at 1/{:.0} of real time, \
         one run per scheduler; beside the simulator, {sim_runs} runs per scheduler. Times in simulated seconds.\n",
        setup.p,
        1.0 / setup.scale
    )?;
    writeln!(
        out,
        "{:<15} {:>12} {:>11} {:>14} {:>13} {:>13} {:>12}",
        "scheduler", "missed real", "missed sim", "end-to-end real", "end-to-end sim", "attempts/app", "(sim)"
    )?;
    let rows = miscort_real::run(&setup, &mut |r| {
        let _ = writeln!(
            out,
            "{:<15} {:>12} {:>11.1} {:>14.0} {:>13.0} {:>13.1} {:>12.1}",
            r.scheduler,
            r.real_missed,
            r.sim_missed,
            r.real_end_to_end,
            r.sim_end_to_end,
            r.real_attempts,
            r.sim_attempts
        );
    })?;
    for (by, what) in [
        (By::Misses, "fewer deadline misses, then a shorter end-to-end time"),
        (By::EndToEnd, "a shorter end-to-end time"),
    ] {
        let (real, sim) = (ranking(&rows, true, by), ranking(&rows, false, by));
        writeln!(out, "\nranked by {what}, best first:")?;
        writeln!(out, "  real:      {}", real.join(" < "))?;
        writeln!(out, "  simulated: {}", sim.join(" < "))?;
        writeln!(out, "  Kendall's τ between them: {:.2} (1: the same order, 0: unrelated)", kendall_tau(&real, &sim))?;
    }
    writeln!(out, "\n{}", miscort_real::GAP)?;
    Ok(())
}

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
    /// simulator's runs of it, and compare the schedulers' rankings.
    #[arg(long)]
    pub(crate) real: bool,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    if a.real {
        return run_real(a.seed, a.presume, a.runs.unwrap_or(10));
    }
    run_rows(
        a.runs.unwrap_or(5),
        a.seed,
        a.poisson,
        a.presume,
        crate::reproduce::threads(a.threads),
        a.output.out.as_deref(),
    )
}
