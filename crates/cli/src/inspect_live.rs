//! `switchyard inspect --interface` and `--feed`: prints what `switchyard_runtime::live` finds
//! on a live interface, or `switchyard_runtime::feed` in what another process feeds, every
//! second and at the end.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use switchyard_ingest::ConnConfig;
use switchyard_ingest::live::RingConfig;
use switchyard_runtime::feed::{FeedListener, inspect_feed};
use switchyard_runtime::live::{LiveCounts, LiveReport, inspect_live};

use crate::inspect::{InspectArgs, finish, print_protocols, summary_out};

pub(crate) fn run(args: &InspectArgs, interface: &str) -> Result<()> {
    let workers = workers(args, 1)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("installing the Ctrl-C handler")?;
    }
    let inspector = args.kernel.inspector();
    let conn = ConnConfig { max_packets: args.packets, max_bytes: args.bytes, ..ConnConfig::default() };
    let counts = LiveCounts::default();
    eprintln!(
        "inspecting {interface} on {workers} worker{} ({}); Ctrl-C to stop",
        if workers == 1 { "" } else { "s" },
        if workers == 1 { "one AF_PACKET ring" } else { "a ring each, shared by flow hash" }
    );
    let report = watch(&counts, true, || {
        inspect_live(interface, workers, RingConfig::default(), conn, &inspector, &stop, &counts)
    });
    let report = report.with_context(|| format!("inspecting `{interface}`"))?;
    print_report(args, interface, workers, report, true)?;
    stop.store(true, Ordering::Relaxed);
    Ok(())
}

/// `switchyard inspect --feed PATH`: waits for a feeder at `path`, then inspects what it sends.
pub(crate) fn run_feed(args: &InspectArgs, path: &Path, ring_kib: usize) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let workers = workers(args, cores)?;
    let capacity = ring_kib
        .checked_mul(1 << 10)
        .filter(|c| c.is_power_of_two())
        .with_context(|| format!("--feed-ring-kib {ring_kib}: a ring's size is a power of two in KiB (e.g. 4096)"))?;
    let listener = FeedListener::bind(path)?;
    eprintln!(
        "waiting for a feeder at {p} (switchyard feed CAPTURE --to {p}); {workers} ring{} of {ring_kib} KiB",
        if workers == 1 { "" } else { "s" },
        p = path.display()
    );
    let rings = listener.accept(workers, capacity)?;
    eprintln!("a feeder connected; inspecting what it sends");
    let inspector = args.kernel.inspector();
    let conn = ConnConfig { max_packets: args.packets, max_bytes: args.bytes, ..ConnConfig::default() };
    let counts = LiveCounts::default();
    let report = watch(&counts, false, || inspect_feed(rings, conn, &inspector, &counts));
    let report = report.with_context(|| format!("inspecting the feed at {}", path.display()))?;
    print_report(args, &format!("feed {}", path.display()), workers, report, false)
}

fn workers(args: &InspectArgs, default: u32) -> Result<usize> {
    match args.workers.unwrap_or(default) {
        0 => bail!("--workers 0: at least one worker is needed"),
        n => Ok(n as usize),
    }
}

/// Runs `inspect` on a thread of its own, printing what `counts` says every second.
fn watch<R: Send>(counts: &LiveCounts, kernel: bool, inspect: impl FnOnce() -> R + Send) -> R {
    let started = Instant::now();
    std::thread::scope(|s| {
        let reading = s.spawn(inspect);
        let mut last = Instant::now();
        while !reading.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
            if last.elapsed() >= Duration::from_secs(1) {
                last = Instant::now();
                let ring = counts.ring_totals();
                let named: Vec<String> =
                    counts.by_protocol().iter().take(8).map(|(p, n)| format!("{} {n}", p.name())).collect();
                let seen = if kernel {
                    format!("frames {} dropped {}", ring.packets, ring.drops)
                } else {
                    format!("packets {}", ring.packets)
                };
                eprintln!(
                    "{:>6.1} s  {seen}  named: {}",
                    started.elapsed().as_secs_f64(),
                    if named.is_empty() { "none yet".into() } else { named.join(", ") }
                );
            }
        }
        reading.join().expect("the inspection does not panic")
    })
}

/// The summary a file's run prints, with the kernel's frame counts where `kernel`.
fn print_report(args: &InspectArgs, what: &str, workers: usize, mut report: LiveReport, kernel: bool) -> Result<()> {
    let check = finish(args, &mut report.summary.conns)?;
    let s = &report.summary;
    let mut out = summary_out(args);
    write!(
        out,
        "{what}: {} packets, {} connections in {:.1} s on {workers} worker{}",
        s.packets,
        s.conns.len(),
        report.elapsed.as_secs_f64(),
        if workers == 1 { "" } else { "s" },
    )?;
    if kernel {
        writeln!(out, "; frames received {}, dropped {}", report.ring.packets, report.ring.drops)?;
    } else {
        writeln!(out)?;
    }
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
    Ok(())
}
