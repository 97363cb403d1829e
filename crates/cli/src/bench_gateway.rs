//! `switchyard bench gateway`'s options; the run and its report are
//! `switchyard_experiments::bench::gateway`'s.

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::gateway::{Setup, run as bench};
use switchyard_experiments::bench::peers::found;

/// The gateway (in front of an HTTP origin) against nginx with proxy_cache and
/// proxy_cache_lock, and Varnish with its built-in VCL (no grace), in front of the same slow
/// origin (the sensor-field emulator, whose reads take up to 0.2 s), with the same load from
/// wrk. All are warmed, then measured in alternating rounds: requests a second on cache hits
/// and their p99 latency; then a thundering herd of concurrent requests for a key none holds,
/// and for one each held the moment it expired, counting the reads that reach the origin. Last,
/// in this process: the core's cache lookups against moka's on the same keys. The report says
/// whether issue 38's goals hold: hits ≥ 1.5× the faster peer's, p99 no worse than Varnish's.
/// Then with h2load, ours and nginx (`listen … ssl http2`) over TLS 1.3, each with HTTP/1.1
/// and HTTP/2 (--streams per connection), and ours over h2c: hits a second and p99.
///
/// nginx, Varnish, wrk and h2load come from Debian (`bench/install-peers.sh` installs them);
/// without nginx or Varnish its rows are left out, without wrk the hit rates, without h2load
/// the rows over TLS and HTTP/2, and the report says so.
///
/// Example:
///
///   switchyard bench gateway --seconds 5 --connections 64
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct GatewayBench {
    /// Seconds of load per round and server.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds, alternating the servers.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// wrk's open connections.
    #[arg(long, default_value_t = 64)]
    connections: usize,
    /// Concurrent requests in the thundering herd.
    #[arg(long, default_value_t = 200)]
    herd: usize,
    /// HTTP/2 streams h2load keeps open on each connection in the rows over HTTP/2 (TLS and
    /// h2c); HTTP/1.1 rows have one request at a time per connection.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    streams: u32,
    /// Keys for the in-process lookup comparison.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,

    #[command(flatten)]
    output: crate::print::Output,
}

pub(crate) fn run(a: &GatewayBench) -> Result<()> {
    let setup = Setup {
        seconds: a.seconds,
        rounds: a.rounds,
        connections: a.connections,
        herd: a.herd,
        keys: a.keys as usize,
        nginx: found("nginx"),
        varnishd: found("varnishd"),
        wrk: found("wrk"),
        h2load: found("h2load"),
        streams: a.streams as usize,
    };
    let report = bench(&setup, &crate::print::Bar::new())?.report(&setup);
    a.output.emit(&report)
}
