//! `switchyard bench shm`: prints the shared-memory ring against a Unix socket pair
//! (`switchyard_experiments::bench::shm`) beside XenSocket's published shape, and issue 25's
//! goals.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::shm::{self, PUBLISHED, Row, Setup};

/// The shared-memory ring (`switchyard-shmring`) against a Unix domain socket pair: one writer
/// and one reader thread in this process, messages of 16 KiB to 2 MiB, each size run in
/// alternating rounds (socket, ring) and the median kept.
///
/// Per size: gigabits per second of each, the ring's over the socket's, and each side's CPU
/// time per byte (thread CPU clocks) with the ring's over the socket's. The writer sends the same
/// buffer again and again, as netperf did for XenSocket, so the data stays in cache. On a
/// machine with fewer free cores than two, a side that spins takes the core the other needs:
/// run it on a quiet machine.
///
/// Example:
///
///   switchyard bench shm --mib 512 --runs 5
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct ShmBench {
    /// MiB moved per run.
    #[arg(long, default_value_t = 256)]
    mib: usize,
    /// Runs per case (the median is kept).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The ring's data area in KiB (a power of two; XenSocket's was 128).
    #[arg(long, default_value_t = 128)]
    ring_kib: usize,
}

pub(crate) fn run(a: &ShmBench) -> Result<()> {
    let setup = Setup { bytes: a.mib << 20, runs: a.runs, ring: a.ring_kib << 10, ..Setup::default() };
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} MiB a run, median of {} runs, ring of {} KiB; CPU in ns per byte (writer / reader)\n",
        a.mib, a.runs, a.ring_kib
    )?;
    writeln!(
        out,
        "{:>8} {:>9} {:>9} {:>7} {:>15} {:>15} {:>12}",
        "message", "uds Gb/s", "ring Gb/s", "ratio", "uds cpu w/r", "ring cpu w/r", "cpu ratio"
    )?;
    let mut failed = None;
    let rows = shm::run(&setup, &mut |r| {
        if let Err(e) = line(&mut out, r) {
            failed.get_or_insert(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    let ratio = |f: fn(&Row) -> f64| {
        let v: Vec<f64> = rows.iter().map(f).collect();
        (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max))
    };
    let (lo, hi) = ratio(|r| r.ring.gbps / r.uds.gbps);
    let (clo, chi) = ratio(cpu_ratio);
    writeln!(out, "\npublished: {PUBLISHED}")?;
    writeln!(
        out,
        "ours: the ring {lo:.2}–{hi:.2}× the socket's throughput, {clo:.2}–{chi:.2}× its CPU per byte, 16 KiB–2 MiB"
    )?;
    writeln!(
        out,
        "issue 25's goals (≥ 2× the throughput, ≤ 0.5× the CPU per byte, at every size): throughput {}, CPU {}",
        if lo >= 2.0 { "met" } else { "NOT met" },
        if chi <= 0.5 { "met" } else { "NOT met" }
    )?;
    Ok(())
}

/// Both sides' CPU per byte, the ring's over the socket's.
fn cpu_ratio(r: &Row) -> f64 {
    (r.ring.writer_ns_per_byte + r.ring.reader_ns_per_byte) / (r.uds.writer_ns_per_byte + r.uds.reader_ns_per_byte)
}

fn line(out: &mut impl Write, r: &Row) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>7}K {:>9.1} {:>9.1} {:>7.2} {:>7.3}/{:<7.3} {:>7.3}/{:<7.3} {:>12.2}",
        r.size >> 10,
        r.uds.gbps,
        r.ring.gbps,
        r.ring.gbps / r.uds.gbps,
        r.uds.writer_ns_per_byte,
        r.uds.reader_ns_per_byte,
        r.ring.writer_ns_per_byte,
        r.ring.reader_ns_per_byte,
        cpu_ratio(r)
    )
}
