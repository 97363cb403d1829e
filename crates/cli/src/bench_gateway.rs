//! `switchyard bench gateway`: the caching gateway against nginx (`proxy_cache` with
//! `proxy_cache_lock`) in front of the same slow origin, driven by the same load (wrk), in one
//! run; and the core's cache lookups against moka's on the same keys.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::gateway::{Setup, run as bench};
use switchyard_experiments::bench::peers::found;

/// The gateway (in front of an HTTP origin) against nginx with proxy_cache and
/// proxy_cache_lock, in front of the same slow origin (the sensor-field emulator, whose reads
/// take up to 0.2 s), with the same load from wrk. Both are warmed, then measured in
/// alternating rounds: requests a second on cache hits and their p99 latency; then a
/// thundering herd of concurrent requests for a key neither holds, counting the reads that
/// reach the origin. Last, in this process: the core's cache lookups against moka's on the same
/// keys.
///
/// nginx and wrk come from Debian (`bench/install-peers.sh` installs them); without them the
/// nginx rows are left out and the command says so.
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
    /// Keys for the in-process lookup comparison.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,
}

pub(crate) fn run(a: &GatewayBench) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let setup = Setup {
        seconds: a.seconds,
        rounds: a.rounds,
        connections: a.connections,
        herd: a.herd,
        keys: a.keys as usize,
        nginx: found("nginx"),
        wrk: found("wrk"),
    };
    writeln!(
        out,
        "loopback, {} cores shared by wrk, the servers and the origin; origin: the field emulator (reads up to 0.2 s); \
         {} rounds of {} s per server, wrk -t2 -c{}\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        a.rounds,
        a.seconds,
        a.connections
    )?;
    let r = bench(&setup)?;
    writeln!(
        out,
        "{:<22} {:>12} {:>10} {:>12} {:>24} {:>24}",
        "server", "hits/s", "×nginx", "p99 ms", "origin reads: cold herd", "herd at expiry"
    )?;
    let nginx_rate = r.servers.get(1).and_then(|s| s.hits).map(|h| h.0);
    for s in &r.servers {
        let (rate, p99) = s.hits.unwrap_or((f64::NAN, f64::NAN));
        let ratio = nginx_rate.map_or("-".to_string(), |n| format!("{:.2}", rate / n));
        let said = |(reads, bad): (f64, usize)| {
            let bad = if bad > 0 { format!(" ({bad} not 200)") } else { String::new() };
            format!("{reads:.0} of {}{bad}", a.herd)
        };
        writeln!(
            out,
            "{:<22} {rate:>12.0} {ratio:>10} {p99:>12.2} {:>24} {:>24}",
            s.name,
            said(s.cold_herd),
            said(s.expired_herd)
        )?;
    }
    if setup.nginx.is_none() || setup.wrk.is_none() {
        writeln!(
            out,
            "\nnginx or wrk not found: install them with bench/install-peers.sh (Debian's nginx-light and wrk)"
        )?;
    }
    writeln!(out, "goals: hits/s ≥ 0.8× nginx's, p99 no worse, exactly one origin read in the herd")?;
    let (mine, moka) = r.lookups;
    writeln!(
        out,
        "\nin-process lookups of {} hot keys, one thread: the core's cache under its lock {mine:.0} ns, moka::sync {moka:.0} ns ({:.2}× moka's time; goal ≤ 1)",
        a.keys,
        mine / moka
    )?;
    writeln!(
        out,
        "the herd at expiry: a key kept 2 s, asked by {} at once just after; nginx's proxy_cache_lock covers new entries only \
         (its remedy for expired ones is proxy_cache_use_stale updating, which answers stale: our --stale-while-revalidate)",
        a.herd
    )?;
    Ok(())
}
