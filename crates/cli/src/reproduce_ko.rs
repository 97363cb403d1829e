//! `switchyard reproduce ko-worker-centric`: prints the worker-centric reproduction
//! (`switchyard_experiments::ko`) beside the paper's findings, and writes its CSV and charts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use switchyard_experiments::ko::{self, FILES_PER_S, Row, Setup, UNIT_COST, WHY};
use switchyard_sim::report::line_chart;

use crate::report::series_by_name;

pub(crate) fn run_rows(runs: u64, seed: u64, scale: f64, threads: usize, dir: Option<&Path>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let setup = Setup { runs, seed, scale, ..Setup::paper(threads) };
    writeln!(
        out,
        "Worker-centric scheduling (Ko et al., Middleware 2007) in the simulator: a Coadd-like bag of {:.0} tasks on 10 sites, \
         stores of 6,000 files × {scale}, {FILES_PER_S} files/s a site, {UNIT_COST} s of computation a file; {runs} runs a point \
         from seed {seed}\n",
        6000.0 * scale
    )?;
    let total = setup.points.len() * setup.schedulers.len() * runs as usize;
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("ko-worker-centric [{bar:30}] {pos}/{len} runs {elapsed}").expect("static"),
    );
    let rows = ko::run(&setup, &|done| bar.set_position(done as u64));
    bar.finish_and_clear();
    let rows = rows?;
    for (family, title, x) in [
        ("capacity", "By data-server capacity, in the paper's files (Fig. 3)", "files"),
        ("workers-per-site", "By workers per site (Fig. 4)", "workers"),
        ("unit-cost", "By computation per file, seconds (Fig. 5)", "s/file"),
    ] {
        writeln!(out, "{title}")?;
        writeln!(
            out,
            "{:>8} {:<17} {:>11} {:>11} {:>8} {:>9}",
            x, "scheduler", "makespan h", "transfers", "util", "replicas"
        )?;
        for r in rows.iter().filter(|r| r.point.axis().0 == family) {
            writeln!(
                out,
                "{:>8} {:<17} {:>11.2} {:>11.0} {:>7.0}% {:>9.0}",
                r.point.axis().1,
                r.scheduler,
                r.makespan / 3600.0,
                r.transfers,
                r.utilisation * 100.0,
                r.replicas
            )?;
        }
        writeln!(out)?;
    }
    writeln!(out, "published beside ours (notes 004a §7(d))")?;
    for c in ko::claims(&rows) {
        writeln!(out, "- published: {} | ours: {}", c.published, c.ours)?;
    }
    writeln!(out, "{WHY}")?;
    if let Some(d) = dir {
        write_outputs(d, &rows)?;
        writeln!(
            out,
            "\nwrote ko-worker-centric.csv and ko-worker-centric-{{capacity,workers-per-site,unit-cost}}.svg in {}",
            d.display()
        )?;
    }
    Ok(())
}

fn write_outputs(dir: &Path, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut csv = String::from("sweep,x,scheduler,makespan_s,transfers,utilisation,replicas\n");
    for r in rows {
        let (family, x) = r.point.axis();
        csv.push_str(&format!(
            "{family},{x},{},{:.1},{:.1},{:.4},{:.1}\n",
            r.scheduler, r.makespan, r.transfers, r.utilisation, r.replicas
        ));
    }
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).with_context(|| format!("cannot write {name} in {}", dir.display()))
    };
    write("ko-worker-centric.csv", &csv)?;
    for (family, x) in [
        ("capacity", "store capacity (files)"),
        ("workers-per-site", "workers per site"),
        ("unit-cost", "computation (s per file)"),
    ] {
        let series = series_by_name(
            rows,
            |r| r.scheduler.as_str(),
            |r| (r.point.axis().0 == family).then(|| (r.point.axis().1, r.makespan / 3600.0)),
        );
        if series.is_empty() {
            continue;
        }
        let svg = line_chart(&format!("Makespan by {x}"), x, "makespan (h)", &series).map_err(anyhow::Error::msg)?;
        write(&format!("ko-worker-centric-{family}.svg"), &svg)?;
    }
    Ok(())
}

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
    run_rows(a.runs, a.seed, a.scale, crate::reproduce::threads(a.threads), a.output.out.as_deref())
}
