//! Printing results as an aligned table, JSON or CSV.

use std::io::Write;

use anyhow::Result;
use clap::ValueEnum;

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

/// Prints each published claim with our figure, the difference and its explanation.
/// Each published claim beside ours, with the difference and why.
#[allow(
    dead_code,
    reason = "guo-xen-credit was its last caller on this branch; other branches of issue 36 may still call it until report.rs goes"
)]
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
