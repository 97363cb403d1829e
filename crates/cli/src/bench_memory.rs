//! `switchyard bench memory`'s options; the floods and their report are
//! `switchyard_experiments::bench::memory`'s.

use anyhow::{Context, Result};
use clap::Args;
use switchyard_experiments::bench::memory::{self, Setup};
use switchyard_experiments::bench::peers::found;

/// Memory under a flood of distinct URLs: the gateway (this executable's `gateway serve
/// --max-memory`), Varnish (`varnishd -s malloc,SIZE`) and nginx (`proxy_cache_path
/// max_size=SIZE`) in turn, each its own process with the same byte bound, in front of one
/// origin in this process that answers every path with --body bytes, public for an hour: every
/// request is a miss a cache would store. Each is flooded by --connections clients for
/// --seconds, asking /flood/0, /flood/1, …; its proportional set size (PSS: shared pages
/// counted once) is sampled every 0.5 s over its whole process tree. Issue 38's goal for the
/// gateway: the peak within the bound plus 15%.
///
/// Varnish and nginx come from Debian (bench/install-peers.sh); where one is missing its row is
/// left out and the report says so. nginx keeps bodies on disk, so its PSS is not its cache's
/// memory (the page cache holds them, counted by no process).
///
/// Examples:
///
///   switchyard bench memory
///   switchyard bench memory --seconds 60 --max-memory 512MiB --body 100000
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct MemoryBench {
    /// Seconds of flood per server.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Clients requesting at once.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Each cache's bound on what it stores (e.g. 256MiB).
    #[arg(long, default_value = "256MiB", value_parser = crate::units::parse_size)]
    max_memory: usize,
    /// Bytes in each of the origin's answers.
    #[arg(long, default_value_t = 10_000)]
    body: usize,
    #[command(flatten)]
    output: crate::print::Output,
}

pub(crate) fn run(a: &MemoryBench) -> Result<()> {
    let setup = Setup {
        seconds: a.seconds,
        connections: a.connections,
        bound: a.max_memory as u64,
        body: a.body,
        gateway: std::env::current_exe().context("finding this executable, whose gateway is measured")?,
        varnishd: found("varnishd"),
        nginx: found("nginx"),
    };
    let rows = memory::run(&setup, &crate::print::Bar::new())?;
    a.output.emit(&memory::report(&setup, &rows))
}
