//! `switchyard reproduce`: run a reproduction scenario and print our figures beside the published
//! ones, with the difference and why it arises.

use std::io::Write;
use std::path::PathBuf;

use crate::reproduce_mux::MuxScheme;
use anyhow::{Result, bail};
use clap::Args;
use switchyard_sim::scenario::{Comparison, Scenario};

use crate::report::Format;
use crate::sim::run_scenario;

/// The reproduction scenarios, built into the binary (their files are in scenarios/reproduce/).
const REPRODUCTIONS: &[(&str, &str)] = &[
    ("dpi-affinity", include_str!("../../../scenarios/reproduce/dpi-affinity.toml")),
    ("niagara-hierarchy", include_str!("../../../scenarios/reproduce/niagara-hierarchy.toml")),
    ("gop-cache-aware", include_str!("../../../scenarios/reproduce/gop-cache-aware.toml")),
    ("ps-shares", include_str!("../../../scenarios/reproduce/ps-shares.toml")),
];

/// Reproduce a published result in the simulator (or, for iwashima-m, on the link emulator).
///
/// Runs a scenario from scenarios/reproduce/ and prints, for each published claim, the published
/// figure, ours, the difference, and an explanation of it. iwashima-m runs real TCP sessions
/// in network namespaces joined by an emulated bottleneck, and needs root. Absolute numbers are not expected to
/// match (the model is not the authors' hardware); the ranking and the rough size of each effect
/// are what should reproduce.
///
/// Examples:
///
///   switchyard reproduce --list
///
///   switchyard reproduce dpi-affinity --out results/dpi
///
///   switchyard reproduce iwashima-m --m 5,14 --seconds 20
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct ReproduceArgs {
    /// The reproduction to run (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,

    /// List the reproductions.
    #[arg(long)]
    list: bool,

    /// Directory for runs.csv, runs.json, report.html and the charts.
    #[arg(long)]
    out: Option<PathBuf>,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,

    /// iwashima-m: the connection counts to run.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 5, 10, 14])]
    m: Vec<usize>,

    /// iwashima-m: seconds measured per run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,

    /// iwashima-m: size each connection's send buffer by the thesis's Eq 7.5,
    /// max(5000, B·RTT/(m+2)), instead of leaving it to the kernel.
    #[arg(long)]
    eq75: bool,

    /// iwashima-m: the schemes to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [MuxScheme::Stripe, MuxScheme::Earliest, MuxScheme::Pin, MuxScheme::PinRates, MuxScheme::PinService])]
    schemes: Vec<MuxScheme>,
}

/// The reproduction that runs real TCP on the link emulator rather than in the simulator.
const EMULATED: (&str, &str) = (
    "iwashima-m",
    "Iwashima ch. 7: striping and pinning against m over an emulated 10 Mb/s RED bottleneck (real TCP; needs root)",
);

pub(crate) fn run(args: &ReproduceArgs) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if args.list {
        for (name, text) in REPRODUCTIONS {
            let s = Scenario::parse(text, name, None)?;
            writeln!(out, "{name:<20} {} ({} published figures)", s.title, s.published.len())?;
        }
        writeln!(out, "{:<20} {}", EMULATED.0, EMULATED.1)?;
        return Ok(());
    }
    let name = args.name.as_deref().unwrap_or_default();
    if name == EMULATED.0 {
        return crate::reproduce_mux::run(&args.m, args.seconds, args.eq75, &args.schemes, args.out.as_deref());
    }
    let Some((_, text)) = REPRODUCTIONS.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = REPRODUCTIONS.iter().map(|(n, _)| *n).chain([EMULATED.0]).collect();
        bail!("no reproduction `{name}`; there are: {}", names.join(", "));
    };
    let scenario = Scenario::parse(text, &format!("scenarios/reproduce/{name}.toml"), None)?;
    drop(out);
    let comparisons = run_scenario(&scenario, args.threads, args.out.as_deref(), Format::Table)?;
    print_comparisons(&comparisons)
}

/// Prints each published claim with our figure, the difference and its explanation.
pub(crate) fn print_comparisons(comparisons: &[Comparison]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "\npublished beside ours")?;
    for c in comparisons {
        let p = &c.published;
        match &c.ours {
            Ok(ours) => writeln!(
                out,
                "- {}\n  published {:.3} ({})\n  ours      {:.3}  ({})",
                p.claim,
                p.value,
                p.source,
                ours,
                c.difference_text()
            )?,
            Err(e) => writeln!(out, "- {}: cannot compute ours: {e}", p.claim)?,
        }
        if !p.explain.is_empty() {
            writeln!(out, "  why: {}", p.explain)?;
        }
    }
    Ok(())
}
