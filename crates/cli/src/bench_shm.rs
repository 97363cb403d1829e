//! `switchyard bench shm`'s options; the runs and their report are
//! `switchyard_experiments::bench::shm`'s.

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::shm::{self, Setup};

/// The shared-memory ring (`switchyard-shmring`) against what two processes on one host would
/// otherwise use: a Unix domain socket pair, loopback TCP, and a `memfd` copied with
/// pwrite/pread whose slots are announced through pipes. One writer and one reader thread in
/// this process, messages of 512 B to 64 MiB, each size run in alternating rounds and the
/// median kept; then the round trip of a 64-byte ping-pong over each.
///
/// Per size: gigabits per second of each, the ring's over the socket's, and both sides' CPU
/// time per byte (thread CPU clocks), then each side's apart. The writer sends the same buffer
/// again and again, as netperf did for XenSocket, so the data stays in cache. Issue 25's goals
/// (at least 2× the socket's throughput and at most half its CPU per byte) are judged at
/// 16 KiB–2 MiB. On a machine with fewer free cores than two, a side that spins takes the core
/// the other needs: run it on a quiet machine.
///
/// Examples:
///
///   switchyard bench shm
///   switchyard bench shm --mib 512 --runs 5 --out shm/
///   switchyard bench shm --sizes 16K,2M --pings 0
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct ShmBench {
    /// MiB moved per run (small messages stop at 100,000 messages).
    #[arg(long, default_value_t = 256)]
    mib: usize,
    /// Runs per case (the median is kept).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The ring's data area in KiB (a power of two; XenSocket's was 128).
    #[arg(long, default_value_t = 256)]
    ring_kib: usize,
    /// Message sizes, comma-separated, with K or M for KiB and MiB (default: 512 B to 64 MiB).
    #[arg(long, value_delimiter = ',', value_parser = crate::units::parse_size)]
    sizes: Vec<usize>,
    /// Round trips timed for the 64-byte ping-pong (0 skips it).
    #[arg(long, default_value_t = 20_000)]
    pings: usize,
    #[command(flatten)]
    output: crate::print::Output,
}

pub(crate) fn run(a: &ShmBench) -> Result<()> {
    if !a.ring_kib.is_power_of_two() {
        anyhow::bail!("--ring-kib {}: the ring's size must be a power of two (e.g. 128)", a.ring_kib);
    }
    let mut setup = Setup { bytes: a.mib << 20, runs: a.runs, ring: a.ring_kib << 10, ..Setup::default() };
    if !a.sizes.is_empty() {
        setup.sizes = a.sizes.clone();
    }
    let report = {
        let bar = crate::print::Bar::new();
        let rows = shm::run(&setup, &bar)?;
        let latencies = if a.pings > 0 { shm::ping_pong(a.pings, setup.ring, &bar)? } else { Vec::new() };
        shm::report(&setup, &rows, a.pings, &latencies)
    };
    a.output.emit(&report)
}
