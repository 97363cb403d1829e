//! The `switchyard` command: one binary whose subcommands front Switchyard's drivers.
//!
//! What lives here is argument parsing, printing (tables, JSON, CSV, charts) and the live
//! displays. What does not: policy logic (every decision is made by `switchyard-core`), and any
//! experiment, benchmark or measurement (`switchyard-experiments` runs them and returns rows,
//! which this binary prints).

/// jemalloc, not the system's allocator: under a flood of distinct URLs, with what is stored
/// held at `--max-memory`, glibc's heap fragmented until the gateway's process was 17–26%
/// past the bound; with jemalloc 5% (`switchyard bench memory`, the same build run under each
/// allocator; issue 38's goal is 15%).
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod bench;
mod bench_blocklog;
mod bench_deliver;
mod bench_eviction;
mod bench_figurehead;
mod bench_gateway;
mod bench_jobs;
#[cfg(target_os = "linux")]
mod bench_live;
mod bench_memory;
mod bench_mux;
mod bench_ndpi;
mod bench_shm;
#[cfg(target_os = "linux")]
mod bench_steer;
mod bench_transcode;
mod blocklog;
mod deliver;
#[cfg(target_os = "linux")]
mod feed;
mod gateway;
mod inspect;
#[cfg(target_os = "linux")]
mod inspect_live;
mod jobs;
mod place;
mod print;
mod reproduce;
mod reproduce_cache;
mod reproduce_cacheflow;
mod reproduce_clp;
mod reproduce_figurehead;
mod reproduce_irq;
mod reproduce_ko;
mod reproduce_miscort;
mod reproduce_mux;
mod reproduce_rgedf;
mod reproduce_xen;
mod schema;
mod sim;
mod tracegen;
mod transcode;
mod tunnel;
mod units;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Switchyard puts network work where it should run: flows on cores, channels on connections,
/// requests on back-ends — and measures how well.
#[derive(Parser)]
#[command(name = "switchyard", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Place(place::PlaceArgs),
    Sim(sim::SimArgs),
    Inspect(inspect::InspectArgs),
    #[cfg(target_os = "linux")]
    Feed(feed::FeedArgs),
    Bench(bench::BenchArgs),
    Reproduce(reproduce::ReproduceArgs),
    TraceGen(tracegen::TraceGenArgs),
    Tunnel(tunnel::TunnelArgs),
    Transcode(transcode::TranscodeArgs),
    Field(gateway::FieldArgs),
    Gateway(gateway::GatewayArgs),
    Deliver(deliver::DeliverArgs),
    Jobs(jobs::JobsArgs),
    Blocklog(blocklog::BlocklogArgs),
    Schema(schema::SchemaArgs),
}

fn main() -> ExitCode {
    // The matches are kept for `gateway serve`, whose flags given on the command line
    // override its --config file's keys, and whose defaults must not.
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let cli = <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Place(args) => place::run(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        #[cfg(target_os = "linux")]
        Command::Feed(args) => feed::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Reproduce(args) => reproduce::run(&args),
        Command::TraceGen(args) => tracegen::run(&args),
        Command::Tunnel(args) => tunnel::run(&args),
        Command::Transcode(args) => transcode::run(&args),
        Command::Field(args) => gateway::run_field(&args),
        Command::Gateway(args) => gateway::run_gateway(&args, matches.subcommand_matches("gateway")),
        Command::Deliver(args) => deliver::run(&args),
        Command::Jobs(args) => jobs::run(&args),
        Command::Schema(args) => schema::run(&args),
        // `blocklog read`'s verdict is its exit status (its --help lists them).
        Command::Blocklog(args) => match blocklog::run(&args) {
            Ok(code) => return code,
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that stops early (`| head`) is not an error.
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) => {
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("switchyard: {}", describe(&e));
            ExitCode::from(2)
        }
    }
}

/// An error and its causes on one line, each said once. Many library errors print their cause
/// in their own message and also return it as their `source()` (thiserror's `{source}`), so
/// `{:#}` would say it twice ("Address already in use (os error 98): Address already in use (os
/// error 98)"); a cause whose text already ends the line is left out.
fn describe(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::describe;

    /// Like a thiserror error with `#[error("...: {source}")]`: the cause in its text and as its
    /// source.
    #[derive(Debug)]
    struct Listen {
        source: std::io::Error,
    }
    impl std::fmt::Display for Listen {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "listening on 127.0.0.1:1: {}", self.source)
        }
    }
    impl std::error::Error for Listen {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use (os error 98)");
        let e = anyhow::Error::new(Listen { source: io }).context("tunnel");
        assert_eq!(describe(&e), "tunnel: listening on 127.0.0.1:1: Address already in use (os error 98)");
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(describe(&plain), "outer: inner");
    }
}
