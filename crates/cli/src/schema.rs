//! `switchyard schema`: the JSON Schema of a reproduction's or benchmark's report, printed
//! without running anything.

use std::io::Write;

use anyhow::{Result, bail};
use clap::Args;
use switchyard_experiments::catalogue;
use switchyard_experiments::report::{ReportSpec, schema};

/// Print the JSON Schema (draft 2020-12) of a report: what `--format json` and report.json hold.
///
/// A report is named tables of typed rows (a table maps to a DataFrame: `rows` with the
/// `columns`' names), the run's parameters, the published figures beside ours, notes and charts.
/// With no arguments, lists the reports that have a schema.
///
/// Examples:
///
///   switchyard schema reproduce dou-rgedf
///
///   switchyard schema bench mux > bench-mux.schema.json
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct SchemaArgs {
    /// `reproduce` or `bench`.
    kind: Option<Kind>,

    /// The reproduction or benchmark (as in `switchyard reproduce NAME`, `switchyard bench NAME`).
    #[arg(requires = "kind")]
    name: Option<String>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Kind {
    /// A reproduction's report.
    Reproduce,
    /// A benchmark's report.
    Bench,
}

fn names(specs: &[&ReportSpec], prefix: &str) -> String {
    specs.iter().map(|s| s.name.strip_prefix(prefix).unwrap_or(s.name)).collect::<Vec<_>>().join(", ")
}

pub(crate) fn run(args: &SchemaArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let (kind, name) = match (&args.kind, &args.name) {
        (Some(k), Some(n)) => (*k, n.as_str()),
        (kind, None) => {
            if !matches!(kind, Some(Kind::Bench)) {
                writeln!(out, "reproduce: {}", names(catalogue::REPRODUCTIONS, ""))?;
            }
            if !matches!(kind, Some(Kind::Reproduce)) {
                writeln!(out, "bench: {}", names(catalogue::BENCHMARKS, "bench-"))?;
            }
            return Ok(());
        }
        (None, Some(_)) => unreachable!("clap requires the kind with a name"),
    };
    let spec = match kind {
        Kind::Reproduce => catalogue::reproduction(name),
        Kind::Bench => catalogue::benchmark(name),
    };
    let Some(spec) = spec else {
        let (what, list) = match kind {
            Kind::Reproduce => ("reproduction", names(catalogue::REPRODUCTIONS, "")),
            Kind::Bench => ("benchmark", names(catalogue::BENCHMARKS, "bench-")),
        };
        bail!("no {what} `{name}` has a report schema; these do: {list}");
    };
    writeln!(out, "{}", serde_json::to_string_pretty(&schema(spec))?)?;
    Ok(())
}
