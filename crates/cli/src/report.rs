//! Printing results as an aligned table, JSON or CSV.

use std::io::Write;

use anyhow::Result;
use clap::ValueEnum;
use switchyard_experiments::placement::Row;

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns for a person.
    Table,
    /// An array of objects, one per policy.
    Json,
    /// A header line and one line per policy.
    Csv,
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.digits$}"))
}

pub(crate) fn print_rows(out: &mut impl Write, rows: &[Row], format: Format) -> Result<()> {
    match format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(rows)?)?,
        Format::Csv => {
            writeln!(out, "policy,workers,keys,max_over_mean,cov,jain,moved_on_remove,moved_on_add,ns_per_decision")?;
            for r in rows {
                let o = |v: Option<f64>| v.map_or_else(String::new, |v| v.to_string());
                writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{}",
                    r.policy,
                    r.workers,
                    r.keys,
                    r.max_over_mean,
                    r.cov,
                    r.jain,
                    o(r.moved_on_remove),
                    o(r.moved_on_add),
                    r.ns_per_decision
                )?;
            }
        }
        Format::Table => {
            writeln!(
                out,
                "{:<18} {:>8} {:>7} {:>7} {:>9} {:>9} {:>11}",
                "policy", "max/mean", "CoV", "Jain", "moved-rm", "moved-add", "ns/decision"
            )?;
            for r in rows {
                writeln!(
                    out,
                    "{:<18} {:>8.3} {:>7.3} {:>7.4} {:>9} {:>9} {:>11.1}",
                    r.policy,
                    r.max_over_mean,
                    r.cov,
                    r.jain,
                    opt(r.moved_on_remove, 4),
                    opt(r.moved_on_add, 4),
                    r.ns_per_decision
                )?;
            }
        }
    }
    Ok(())
}

/// Prints each published claim with our figure, the difference and its explanation.
/// Each published claim beside ours, with the difference and why.
pub(crate) fn print_claims(out: &mut impl Write, claims: &[switchyard_experiments::claim::Claim]) -> Result<()> {
    for c in claims {
        let diff = c.difference().map_or(String::new(), |d| format!("  (difference {:+.1}%)", d * 100.0));
        writeln!(
            out,
            "- {}\n  published {} ({})\n  ours      {}{diff}\n  why: {}",
            c.claim,
            c.published_text,
            c.source,
            c.ours_text(),
            c.why
        )?;
    }
    Ok(())
}

/// One line per name (in the order names first appear in `rows`), through the points `point`
/// gives for that name's rows (`None` leaves a row out); names with no point are dropped.
pub(crate) fn series_by_name<T>(
    rows: &[T],
    name: impl Fn(&T) -> &str,
    point: impl Fn(&T) -> Option<(f64, f64)>,
) -> Vec<switchyard_sim::report::Series> {
    let mut names: Vec<&str> = Vec::new();
    for r in rows {
        if !names.contains(&name(r)) {
            names.push(name(r));
        }
    }
    names
        .into_iter()
        .map(|n| switchyard_sim::report::Series {
            name: n.to_string(),
            points: rows.iter().filter(|r| name(r) == n).filter_map(&point).collect(),
            style: switchyard_sim::report::Style::Measured,
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}
