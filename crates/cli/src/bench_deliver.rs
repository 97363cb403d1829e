//! `switchyard bench deliver`: the delivery server against a tokio multi-threaded server and
//! nginx with `limit_rate`, serving the same streams to the same clients in one run.

use std::io::Write;

use anyhow::{Context, Result};
use clap::Args;
use switchyard_experiments::bench::deliver::{Case, Clients, Progress, Row, Setup, run as bench};
use switchyard_experiments::bench::peers::found;

/// Paced streams and bulk connections, served by Switchyard's delivery server, by a tokio
/// multi-threaded server and by nginx (`limit_rate`), to the same clients.
///
/// The clients run as a child process (`switchyard deliver load`), so the servers and the clients
/// do not share a descriptor limit, and each server's CPU time is its own. Paced servers get
/// --cores cores (pinned to the first ones); bulk servers get every core.
///
/// nginx comes from Debian (`bench/install-peers.sh`); without it its rows are left out and the
/// command says so.
///
/// Example:
///
///   switchyard bench deliver --conns 10000 --rate 64k --seconds 10
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct DeliverBench {
    /// Paced streams (the goal: 10,000 per core).
    #[arg(long, default_value_t = 10_000)]
    conns: usize,
    /// Each stream's rate, bits per second.
    #[arg(long, default_value = "64k", value_parser = crate::deliver::parse_bits)]
    rate: u64,
    /// Cores the paced servers get.
    #[arg(long, default_value_t = 1)]
    cores: usize,
    /// Our pacer's grain and the tokio server's tick, ms: each send carries this much of the
    /// stream (more sends per second cost CPU; fewer make each window lumpier).
    #[arg(long, default_value_t = 100.0)]
    grain_ms: f64,
    /// The accuracy case: streams on the same core(s), few enough to send every millisecond.
    #[arg(long, default_value_t = 100)]
    accurate_conns: usize,
    /// The accuracy case: each stream's rate, bits per second.
    #[arg(long, default_value = "4Mbit", value_parser = crate::deliver::parse_bits)]
    accurate_rate: u64,
    /// The accuracy case: grain and tick, ms.
    #[arg(long, default_value_t = 1.0)]
    accurate_grain_ms: f64,
    /// Seconds measured per run, after the warm-up.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Seconds of warm-up.
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Bulk connections.
    #[arg(long, default_value_t = 384)]
    bulk_conns: usize,
    /// Seconds measured per bulk run.
    #[arg(long, default_value_t = 5.0)]
    bulk_seconds: f64,
}

pub(crate) fn run(a: &DeliverBench) -> Result<()> {
    let setup = Setup {
        conns: a.conns,
        rate: a.rate,
        cores: a.cores,
        grain_ms: a.grain_ms,
        accurate_conns: a.accurate_conns,
        accurate_rate: a.accurate_rate,
        accurate_grain_ms: a.accurate_grain_ms,
        seconds: a.seconds,
        warmup: a.warmup,
        bulk_conns: a.bulk_conns,
        bulk_seconds: a.bulk_seconds,
        nginx: found("nginx"),
        clients: Clients::Program(std::env::current_exe().context("finding this program")?),
    };
    setup.check()?;
    let mut out = std::io::stdout().lock();
    let mut failed = None;
    bench(&setup, &mut |p| {
        let printed = match p {
            Progress::Starting(c) => print_heading(&mut out, c),
            Progress::Done(c, rows) => print_case(&mut out, c, rows),
        };
        if let Err(e) = printed {
            failed.get_or_insert(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    if setup.nginx.is_none() {
        writeln!(out, "\nnginx not found: install it with bench/install-peers.sh (Debian's nginx-light)")?;
    }
    writeln!(
        out,
        "\ngoals: ≥ 10,000 paced streams per core with p99 per-window error ≤ 1%; Jain ≥ 0.99 at equal targets; bulk ≥ tokio's"
    )?;
    Ok(())
}

/// What a case is, printed before it runs (each takes seconds to minutes).
fn print_heading(out: &mut impl Write, c: &Case) -> std::io::Result<()> {
    match c.rate {
        Some(rate) => writeln!(
            out,
            "Paced ({}): {} streams at {rate} b/s on {} core(s), {} s measured; our grain and tokio's tick {} ms",
            c.name, c.conns, c.threads, c.seconds, c.grain_ms
        ),
        None => writeln!(
            out,
            "Bulk: {} connections on every core, {} s measured; ours sends 4 KB packets 16 a turn (×1: one a turn), tokio 4 KB writes, nginx sendfile",
            c.conns, c.seconds
        ),
    }
}

fn print_case(out: &mut impl Write, c: &Case, rows: &[Row]) -> std::io::Result<()> {
    let pct = |e: Option<(f64, f64)>, which: usize| {
        e.map_or("-".to_owned(), |e| format!("{:.1}%", if which == 0 { e.0 } else { e.1 } * 100.0))
    };
    if c.rate.is_none() {
        writeln!(out, "{:>14} {:>8} {:>11} {:>9} {:>8} {:>9}", "server", "conns", "Mb/s", "×tokio", "Jain", "max/min")?;
        let tokio_rate = rows.iter().find(|r| r.server == "tokio").map_or(f64::NAN, |r| r.served.aggregate_bps);
        for r in rows {
            let v = &r.served;
            writeln!(
                out,
                "{:>14} {:>8} {:>11.1} {:>9.2} {:>8.4} {:>9.2}",
                r.server,
                v.conns,
                v.aggregate_bps / 1e6,
                v.aggregate_bps / tokio_rate,
                v.jain,
                v.max_over_min
            )?;
        }
        return Ok(());
    };
    writeln!(
        out,
        "{:>11} {:>8} {:>11} {:>8} {:>15} {:>15} {:>11} {:>9} {:>9}",
        "server", "streams", "Mb/s", "Jain", "100 ms p50/p99", "1 s p50/p99", "worst/run", "CPU s", "×ours CPU"
    )?;
    let our_cpu = rows.first().map_or(f64::NAN, |r| r.cpu_s);
    for r in rows {
        let v = &r.served;
        writeln!(
            out,
            "{:>11} {:>8} {:>11.1} {:>8.4} {:>15} {:>15} {:>10.2}% {:>9.2} {:>9.2}",
            r.server,
            v.conns,
            v.aggregate_bps / 1e6,
            v.jain,
            format!("{}/{}", pct(v.error_fine, 0), pct(v.error_fine, 1)),
            format!("{}/{}", pct(v.error_coarse, 0), pct(v.error_coarse, 1)),
            v.run_error.unwrap_or(f64::NAN) * 100.0,
            r.cpu_s,
            r.cpu_s / our_cpu
        )?;
    }
    writeln!(
        out,
        "  a send carries {} ms of a stream, so quantisation alone can put a 100 ms window {:.0}% off and a 1 s window {:.1}% off\n",
        c.grain_ms,
        (c.grain_ms / 100.0).min(1.0) * 100.0,
        (c.grain_ms / 1000.0).min(1.0) * 100.0
    )
}
