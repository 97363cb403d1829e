//! `switchyard sim`: run a scenario file (and its sweep) in the simulator.

use std::fs;
use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use switchyard_experiments::scenarios;
use switchyard_sim::scenario::Scenario;
use switchyard_sim::summary::RunSummary;

/// What `sim` prints on standard output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// The report for a person: the runs table and the published figures beside ours.
    Table,
    /// The runs as a JSON array of objects, one per run.
    Json,
    /// The runs as CSV: a header of field names and one line per run.
    Csv,
}

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

    /// Directory for report.json, runs.json (what --format json prints), the report's tables as
    /// runs.csv and details.csv (together, what --format csv prints), and a bar chart per metric
    /// (created if missing).
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
    let bar = crate::print::Bar::new();
    let run = scenarios::run(&scenario, crate::reproduce::threads(args.threads), &bar)?;
    drop(bar);
    let report = run.report(&scenarios::SIM, &scenario);

    if let Some(dir) = &args.out {
        crate::print::write_dir(&report, dir)?;
        // runs.json stays the array `--format json` prints, as scripts read it.
        let path = dir.join("runs.json");
        fs::write(&path, serde_json::to_string_pretty(&run.rows)? + "\n")
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&run.rows)?)?,
        Format::Csv => write_csv(&mut out, &run.rows)?,
        Format::Table => {
            crate::print::human(&mut out, &report)?;
            if let Some(dir) = &args.out {
                writeln!(out, "\nreport.json, runs.json, a CSV per table and the charts written to {}", dir.display())?;
            }
        }
    }
    out.flush()?;
    Ok(())
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
