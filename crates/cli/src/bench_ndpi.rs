//! `switchyard bench inspect --peer ndpi`: prints the comparison with nDPI's ndpiReader that
//! `switchyard_experiments::bench::ndpi` runs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use switchyard_experiments::bench::ndpi::{self, PeerRun};

pub(crate) fn run(connections: u32, sample: &Path, extra: &[PathBuf], rounds: usize) -> Result<()> {
    let suite = ndpi::suite(connections, sample, extra, rounds)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "nDPI: {} (-v 2, its per-flow report); ours: inspect on one thread, --results",
        suite.reader.display()
    )?;
    for note in &suite.left_out {
        writeln!(out, "left out: {note}")?;
    }
    writeln!(out)?;
    for r in &suite.runs {
        print_run(&mut out, r)?;
    }
    for (line, met) in ndpi::goals(&suite.runs) {
        writeln!(out, "{} {line}", if met { "met:    " } else { "NOT MET:" })?;
    }
    Ok(())
}

fn print_run(out: &mut impl Write, r: &PeerRun) -> std::io::Result<()> {
    let a = &r.agreement;
    let (agree, both) = a.totals();
    writeln!(out, "== {}: {} packets", r.capture, r.packets)?;
    writeln!(
        out,
        "packets/s on one thread: ours {:.0} (reading and inspecting alone {:.0}); ndpiReader {:.0} (its own figure {})",
        r.ours_pps,
        r.ours_inspect_pps,
        r.ndpi_pps,
        r.ndpi_reported_pps.map_or("-".into(), |p| format!("{p:.0}"))
    )?;
    writeln!(out, "\nprotocol      both named  alike")?;
    for (name, (alike, both)) in &a.per_protocol {
        writeln!(out, "{name:<13} {both:>10} {alike:>6}")?;
    }
    writeln!(
        out,
        "all           {both:>10} {agree:>6}  ({})",
        a.share().map_or("-".into(), |s| format!("{:.1}%", s * 100.0))
    )?;
    let list = |m: &std::collections::BTreeMap<String, usize>| {
        if m.is_empty() {
            "none".to_string()
        } else {
            m.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
        }
    };
    for ((ours, theirs), n) in &a.disagreements {
        writeln!(out, "  differ: ours {ours}, nDPI {theirs}: {n}")?;
    }
    writeln!(out, "only ours (nDPI: unknown or by port): {}", list(&a.ours_only))?;
    writeln!(out, "only nDPI's, in our set: {}", list(&a.theirs_only))?;
    writeln!(out, "nDPI's outside our set: {}", list(&a.theirs_outside))?;
    writeln!(out, "nDPI named by port alone: {}; flows only one side reported: {}\n", a.theirs_by_port, a.unpaired)?;
    Ok(())
}
