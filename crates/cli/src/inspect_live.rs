//! `switchyard inspect --interface`: prints what `switchyard_runtime::live` finds on a live
//! interface, every second and at the end.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use switchyard_ingest::ConnConfig;
use switchyard_ingest::live::RingConfig;
use switchyard_runtime::live::{LiveCounts, inspect_live};

use crate::inspect::{InspectArgs, finish, print_protocols};

pub(crate) fn run(args: &InspectArgs, interface: &str) -> Result<()> {
    let workers = args.workers.unwrap_or(1) as usize;
    if workers == 0 {
        bail!("--workers 0: at least one worker is needed");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("installing the Ctrl-C handler")?;
    }
    let inspector = args.kernel.inspector();
    let conn = ConnConfig { max_packets: args.packets, max_bytes: args.bytes, ..ConnConfig::default() };
    let counts = LiveCounts::default();
    let started = Instant::now();
    eprintln!(
        "inspecting {interface} on {workers} worker{} ({}); Ctrl-C to stop",
        if workers == 1 { "" } else { "s" },
        if workers == 1 { "one AF_PACKET ring" } else { "a ring each, shared by flow hash" }
    );
    let report = std::thread::scope(|s| {
        let reading =
            s.spawn(|| inspect_live(interface, workers, RingConfig::default(), conn, &inspector, &stop, &counts));
        let mut last = Instant::now();
        while !reading.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
            if last.elapsed() >= Duration::from_secs(1) {
                last = Instant::now();
                let ring = counts.ring_totals();
                let named: Vec<String> =
                    counts.by_protocol().iter().take(8).map(|(p, n)| format!("{} {n}", p.name())).collect();
                eprintln!(
                    "{:>6.1} s  frames {} dropped {}  named: {}",
                    started.elapsed().as_secs_f64(),
                    ring.packets,
                    ring.drops,
                    if named.is_empty() { "none yet".into() } else { named.join(", ") }
                );
            }
        }
        reading.join().expect("the live run does not panic")
    });
    let mut report = report.with_context(|| format!("inspecting `{interface}`"))?;
    let check = finish(args, &mut report.summary.conns)?;
    let s = &report.summary;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{interface}: {} packets, {} connections in {:.1} s on {workers} worker{}; frames received {}, dropped {}",
        s.packets,
        s.conns.len(),
        report.elapsed.as_secs_f64(),
        if workers == 1 { "" } else { "s" },
        report.ring.packets,
        report.ring.drops
    )?;
    writeln!(
        out,
        "buffers inspected {}, skipped as classified {}, packets only marked {}; left out by the reader: {}",
        s.inspected, s.skipped_classified, s.marked, s.skipped
    )?;
    print_protocols(&mut out, &s.conns)?;
    if let Some((checked, missed)) = check {
        writeln!(out, "labels: {} of {checked} connections named as labelled", checked - missed.len())?;
        for m in missed.iter().take(10) {
            writeln!(out, "  miss: {m}")?;
        }
    }
    if report.ring.drops > 0 {
        writeln!(out, "the kernel dropped {} frames at full rings: verdicts may be missing", report.ring.drops)?;
    }
    stop.store(true, Ordering::Relaxed);
    Ok(())
}
