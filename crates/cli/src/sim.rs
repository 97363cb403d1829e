//! `switchyard sim`: run a scenario file (and its sweep) in the simulator.

use std::fs;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use switchyard_experiments::scenarios::{self, Reproduction};
use switchyard_sim::report;
use switchyard_sim::scenario::{Comparison, Scenario};
use switchyard_sim::summary::RunSummary;

use switchyard_experiments::report::Progress as _;

use crate::report::{Format, print_comparisons};

/// Run a scenario in the deterministic simulator.
///
/// A scenario is a TOML file: a machine (topology, run-queues, service and migration costs), a
/// workload, the policies to compare, and optionally a [sweep] of parameters (see
/// scenarios/*.toml and the switchyard-sim `scenario` module docs). Every combination of the
/// sweep runs once per policy; runs go in parallel across cores, and the results are the same
/// byte for byte whatever the number of threads.
///
/// Example:
///
///   switchyard sim scenarios/xeon-flows.toml --out results/xeon
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct SimArgs {
    /// The scenario file.
    scenario: PathBuf,

    /// Root seed, replacing the file's (a swept `seed` still wins).
    #[arg(long)]
    seed: Option<u64>,

    /// Directory for runs.csv, runs.json, report.html and the charts (created if missing).
    #[arg(long)]
    out: Option<PathBuf>,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,

    /// Output format on standard output.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    format: Format,
}

pub(crate) fn run(args: &SimArgs) -> Result<()> {
    let origin = args.scenario.display().to_string();
    let text = fs::read_to_string(&args.scenario).with_context(|| format!("cannot read scenario `{origin}`"))?;
    let scenario = Scenario::parse(&text, &origin, args.seed)?;
    let comparisons = run_scenario(&scenario, args.threads, args.out.as_deref(), args.format)?;
    if args.format == Format::Table && !comparisons.is_empty() {
        print_comparisons(&comparisons)?;
    }
    Ok(())
}

/// Runs `scenario`; with `out_dir`, writes `runs.csv`, `runs.json`, `report.html` and one SVG
/// chart per plotted metric there; prints the runs in `format`; returns the published figures
/// beside ours.
pub(crate) fn run_scenario(
    scenario: &Scenario,
    threads: Option<usize>,
    out_dir: Option<&std::path::Path>,
    format: Format,
) -> Result<Vec<Comparison>> {
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let bar = crate::print::Bar::new();
    bar.stage(&format!("{}: runs", scenario.name), scenario.cases.len() as u64);
    let Reproduction { rows, comparisons } = scenarios::run(scenario, threads, &|| bar.advance(1))?;
    drop(bar);

    if let Some(dir) = out_dir {
        let write = |name: &str, text: &str| -> Result<()> {
            let path = dir.join(name);
            fs::write(&path, text).with_context(|| format!("cannot write `{}`", path.display()))
        };
        fs::create_dir_all(dir).with_context(|| format!("cannot create output directory `{}`", dir.display()))?;
        let mut csv = Vec::new();
        write_csv(&mut csv, &rows)?;
        write("runs.csv", &String::from_utf8(csv)?)?;
        write("runs.json", &(serde_json::to_string_pretty(&rows)? + "\n"))?;
        for (field, title) in report::PLOTTED {
            write(&format!("{field}.svg"), &report::bar_chart(&rows, field, title).map_err(anyhow::Error::msg)?)?;
        }
        write("report.html", &report::html(&scenario.name, &rows, &comparisons).map_err(anyhow::Error::msg)?)?;
    }
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?,
        Format::Csv => write_csv(&mut out, &rows)?,
        Format::Table => {
            writeln!(out, "{}: {} runs", scenario.name, rows.len())?;
            writeln!(
                out,
                "{:<14} {:<24} {:>10} {:>6} {:>8} {:>8} {:>8} {:>10} {:>10}",
                "policy", "swept", "units/s", "util", "busy m/m", "migr", "reorder", "p50 µs", "p99 µs"
            )?;
            for r in &rows {
                writeln!(
                    out,
                    "{:<14} {:<24} {:>10.0} {:>6.2} {:>8.3} {:>8} {:>8} {:>10.1} {:>10.1}",
                    r.policy,
                    if r.swept.is_empty() { "-" } else { &r.swept },
                    r.units_per_s,
                    r.utilisation_mean,
                    r.busy_max_over_mean,
                    r.migrations,
                    r.out_of_order,
                    r.latency_p50_us,
                    r.latency_p99_us
                )?;
            }
        }
    }
    out.flush()?;
    Ok(comparisons)
}

/// One CSV row per run, with a header row of the field names.
fn write_csv(w: &mut impl Write, rows: &[RunSummary]) -> Result<()> {
    let mut csv = csv::Writer::from_writer(w);
    for r in rows {
        csv.serialize(r)?;
    }
    csv.flush()?;
    Ok(())
}
