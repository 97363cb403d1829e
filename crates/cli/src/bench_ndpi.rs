//! `switchyard bench inspect --peer ndpi`: prints the comparison with nDPI's ndpiReader that
//! `switchyard_experiments::bench::ndpi` runs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use switchyard_experiments::bench::ndpi::{self, PeerRun};
use switchyard_experiments::bench::peers::found;
use switchyard_runtime::tracegen::{TraceSpec, generate};

pub(crate) fn run(connections: u32, sample: &Path, extra: &[PathBuf], rounds: usize) -> Result<()> {
    let Some(reader) = found("ndpiReader") else {
        bail!("ndpiReader is not installed: bench/install-peers.sh installs it (Debian's libndpi-bin)");
    };
    let mut out = std::io::stdout().lock();
    let dir = std::env::temp_dir().join(format!("switchyard-ndpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let generated = dir.join("uniform.pcap");
    let spec = TraceSpec { connections, ..TraceSpec::default() };
    generate(&spec, std::io::BufWriter::new(std::fs::File::create(&generated)?)).context("writing a trace")?;
    let mut captures = Vec::new();
    if sample.is_file() {
        captures.push(("sample".to_string(), sample.to_path_buf()));
    } else {
        writeln!(out, "sample {}: not there; comparing on the others", sample.display())?;
    }
    captures.push((format!("uniform ({connections} connections)"), generated));
    // Real clients and servers, recorded by tcpdump (bench/record-conversations.sh).
    let recorded = sample.with_file_name("conversations.pcap");
    if recorded.is_file() {
        captures.push(("conversations (recorded)".to_string(), recorded));
    }
    captures.extend(extra.iter().map(|p| (p.display().to_string(), p.clone())));
    writeln!(out, "nDPI: {} (-v 2, its per-flow report); ours: inspect on one thread, --results\n", reader.display())?;
    let runs = ndpi::run(&reader, &captures, rounds);
    let _ = std::fs::remove_dir_all(&dir);
    let runs = runs?;
    for r in &runs {
        print_run(&mut out, r)?;
    }
    for (line, met) in ndpi::goals(&runs) {
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
