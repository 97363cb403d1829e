//! `switchyard bench shm`: prints the shared-memory ring against a Unix socket pair
//! (`switchyard_experiments::bench::shm`) beside XenSocket's published shape, and issue 25's
//! goals.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::shm::{self, GOAL_CPU, GOAL_THROUGHPUT, PUBLISHED, Row, Setup, Summary};

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
    let Some(sum) = Summary::of(&rows) else { return Ok(()) };
    let ((lo, hi), (clo, chi)) = (sum.throughput, sum.cpu);
    writeln!(out, "\npublished: {PUBLISHED}")?;
    writeln!(
        out,
        "ours: the ring {lo:.2}–{hi:.2}× the socket's throughput, {clo:.2}–{chi:.2}× its CPU per byte, 16 KiB–2 MiB"
    )?;
    writeln!(
        out,
        "issue 25's goals (≥ {GOAL_THROUGHPUT}× the throughput, ≤ {GOAL_CPU}× the CPU per byte, at every size): throughput {}, CPU {}",
        if sum.throughput_met() { "met" } else { "NOT met" },
        if sum.cpu_met() { "met" } else { "NOT met" }
    )?;
    Ok(())
}

fn line(out: &mut impl Write, r: &Row) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>7}K {:>9.1} {:>9.1} {:>7.2} {:>7.3}/{:<7.3} {:>7.3}/{:<7.3} {:>12.2}",
        r.size >> 10,
        r.uds.gbps,
        r.ring.gbps,
        r.throughput_ratio(),
        r.uds.writer_ns_per_byte,
        r.uds.reader_ns_per_byte,
        r.ring.writer_ns_per_byte,
        r.ring.reader_ns_per_byte,
        r.cpu_ratio()
    )
}
