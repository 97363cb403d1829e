//! `bench memory`: what a caching server's memory does under a flood of distinct URLs (issue
//! 38's measurement). An origin in this process answers every path with the same size of
//! body, public for an hour, so every request is a miss that a cache would store; each cache
//! runs as a process of its own with the same byte bound — the gateway (`switchyard gateway
//! serve --max-memory`), Varnish (`-s malloc,SIZE`) and nginx (`proxy_cache_path …
//! max_size=SIZE`, which keeps bodies on disk) — and is flooded in turn by the same clients
//! for the same time, its proportional set size (PSS, so that memory its processes share is
//! counted once) sampled every half second over its whole process tree.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::Router;
use axum::http::Uri;

use super::peers::{Reaped, free_port, launch_nginx_cache, launch_varnish, listening};
use crate::ExperimentError;
use crate::report::{self, ColumnSpec, Progress, ReportSpec, Table, TableSpec};

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Seconds of flood per server.
    pub seconds: f64,
    /// Clients requesting at once.
    pub connections: usize,
    /// Each cache's bound on what it stores, bytes.
    pub bound: u64,
    /// Bytes in each of the origin's answers.
    pub body: usize,
    /// The `switchyard` executable whose gateway is measured.
    pub gateway: PathBuf,
    /// Varnish's `varnishd`, if it is to be run.
    pub varnishd: Option<PathBuf>,
    /// nginx, if it is to be run.
    pub nginx: Option<PathBuf>,
}

/// One server's flood.
#[derive(Clone, Debug)]
pub struct Row {
    /// The server.
    pub name: &'static str,
    /// Requests answered 200.
    pub answered: u64,
    /// Requests answered otherwise, or not at all.
    pub failed: u64,
    /// Seconds the flood lasted.
    pub seconds: f64,
    /// PSS before the flood, bytes.
    pub before: u64,
    /// PSS at the flood's end.
    pub end: u64,
    /// The largest PSS sampled.
    pub peak: u64,
    /// What the server says it stores, where it says (the gateway's `gateway_stored_bytes`).
    pub stored: Option<u64>,
}

/// The table: a row per server.
pub const FLOOD: TableSpec = TableSpec::new(
    "flood",
    "Memory under a flood of distinct URLs, every answer storable, the same byte bound for each",
    &[
        ColumnSpec::text("server"),
        ColumnSpec::int("answered").about("requests answered 200 during the flood"),
        ColumnSpec::int("failed").about("requests answered otherwise or not at all"),
        ColumnSpec::num("rate", 0).unit("req/s"),
        ColumnSpec::num("before_mib", 1).header("before").unit("MiB").about("PSS of the process tree before the flood"),
        ColumnSpec::num("end_mib", 1).header("at end").unit("MiB"),
        ColumnSpec::num("peak_mib", 1).header("peak").unit("MiB").about("the largest PSS sampled (every 0.5 s)"),
        ColumnSpec::num("bound_mib", 1).header("bound").unit("MiB"),
        ColumnSpec::num("peak_over_bound", 2).header("peak / bound"),
        ColumnSpec::num("growth_over_bound", 2)
            .header("(peak − before) / bound")
            .about("what the flood added over the bound; issue 38's goal for the gateway: at most 1.15"),
        ColumnSpec::num("stored_mib", 1)
            .header("stored (own count)")
            .unit("MiB")
            .about("what the server counts as stored, where it says"),
    ],
);

/// What `bench memory` reports.
pub const SPEC: ReportSpec =
    ReportSpec { name: "bench-memory", title: "Caches' memory under a flood of distinct URLs", tables: &[&FLOOD] };

/// Runs the floods; `progress` hears of each server.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>, ExperimentError> {
    if s.seconds <= 0.0 || s.connections == 0 || s.bound == 0 {
        return Err(ExperimentError::Input("--seconds, --connections and --max-memory must be above 0".into()));
    }
    Ok(floods(s, progress)?)
}

fn floods(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let origin = runtime.block_on(origin(s.body))?;
    let dir = std::env::temp_dir().join(format!("switchyard-bench-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mib = s.bound.div_ceil(1 << 20);
    let mut rows = Vec::new();
    let servers = 1 + usize::from(s.varnishd.is_some()) + usize::from(s.nginx.is_some());
    let mut done = 0;
    let mut step = |name: &str| {
        done += 1;
        progress.stage(&format!("flooding {name} ({done} of {servers})"), 1);
    };

    step("switchyard gateway");
    let port = free_port()?;
    let child = Command::new(&s.gateway)
        .args(["gateway", "serve", "--origin", &format!("http://{origin}"), "--listen", &format!("127.0.0.1:{port}")])
        .args(["--max-memory", &format!("{mib}MiB")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} gateway serve", s.gateway.display()))?;
    let gateway = Reaped(child);
    let addr = listening(port, "the gateway", Duration::from_secs(10))?;
    rows.push(runtime.block_on(flood("switchyard gateway", gateway.0.id(), addr, s, true))?);
    drop(gateway);

    if let Some(varnishd) = &s.varnishd {
        step("varnish");
        let (varnish, addr) = launch_varnish(varnishd, &dir.join("varnish"), origin, mib, None, &[])?;
        rows.push(runtime.block_on(flood("varnish (malloc)", varnish.0.id(), addr, s, false))?);
    }

    if let Some(nginx) = &s.nginx {
        step("nginx");
        let cache_path = format!("max_size={mib}m inactive=60m");
        let (nginx, addr) = launch_nginx_cache(nginx, &dir.join("nginx"), origin, &cache_path, "")?;
        rows.push(runtime.block_on(flood("nginx proxy_cache (disk)", nginx.0.id(), addr, s, false))?);
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(rows)
}

/// The origin: every path answered with `body` bytes, public for an hour.
async fn origin(body: usize) -> Result<SocketAddr> {
    let app = Router::new().fallback(move |uri: Uri| async move {
        let fill = uri.path().bytes().last().unwrap_or(b'x');
        ([("cache-control", "public, max-age=3600")], vec![fill; body])
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// Floods `addr` with distinct URLs for the setup's time, sampling the PSS of `pid`'s tree.
async fn flood(name: &'static str, pid: u32, addr: SocketAddr, s: &Setup, own_count: bool) -> Result<Row> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(s.connections).build()?;
    let before = tree_pss(pid);
    let (next, answered, failed) =
        (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let clients: Vec<_> = (0..s.connections)
        .map(|_| {
            let (client, next, answered, failed, stop) =
                (client.clone(), Arc::clone(&next), Arc::clone(&answered), Arc::clone(&failed), Arc::clone(&stop));
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let ok = match client.get(format!("http://{addr}/flood/{n}")).send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    if ok { &answered } else { &failed }.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut peak = before;
    let mut end = before;
    let until = start + Duration::from_secs_f64(s.seconds);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        end = tokio::task::spawn_blocking(move || tree_pss(pid)).await?;
        peak = peak.max(end);
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let stored = if own_count {
        let text = client.get(format!("http://{addr}/metrics")).send().await?.text().await?;
        text.lines().find_map(|l| l.strip_prefix("gateway_stored_bytes ")).and_then(|v| v.trim().parse().ok())
    } else {
        None
    };
    Ok(Row {
        name,
        answered: answered.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        seconds,
        before,
        end,
        peak,
        stored,
    })
}

/// The proportional set size of `pid` and all its descendants, bytes (0 for what cannot be
/// read): shared pages, such as nginx's cache zone, counted once over the processes.
fn tree_pss(pid: u32) -> u64 {
    let mut pids = vec![pid];
    let mut i = 0;
    while i < pids.len() {
        pids.extend(children(pids[i]));
        i += 1;
    }
    pids.iter().map(|p| pss(*p)).sum()
}

/// The direct children of `pid`, over all its threads.
pub(super) fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| text.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<u32>>())
        .collect()
}

fn pss(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The report.
pub fn report(s: &Setup, rows: &[Row]) -> report::Report {
    let mut r = report::Report::new(&SPEC);
    r.param("seconds", s.seconds, "seconds of flood per server")
        .param("connections", s.connections, "clients requesting at once")
        .param("bound_bytes", s.bound, "each cache's bound on what it stores")
        .param("body", s.body, "bytes in each answer");
    r.machine = Some(crate::machine::describe());
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let mut t = Table::new(&FLOOD);
    for row in rows {
        t.push(vec![
            row.name.into(),
            row.answered.into(),
            row.failed.into(),
            (row.answered as f64 / row.seconds).into(),
            mib(row.before).into(),
            mib(row.end).into(),
            mib(row.peak).into(),
            mib(s.bound).into(),
            (row.peak as f64 / s.bound as f64).into(),
            (row.peak.saturating_sub(row.before) as f64 / s.bound as f64).into(),
            row.stored.map(mib).into(),
        ]);
    }
    r.tables.push(t);
    if s.varnishd.is_none() {
        r.note("Varnish was not run: varnishd not found (bench/install-peers.sh installs it).");
    }
    if s.nginx.is_none() {
        r.note("nginx was not run: not found (bench/install-peers.sh installs it).");
    }
    r.note(
        "nginx keeps bodies on disk (max_size bounds the disk) and in the page cache, which no process's PSS counts: its figure is not the memory its cache uses.",
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_tree_has_a_pss() {
        let me = std::process::id();
        assert!(tree_pss(me) > 1 << 20, "a test binary takes more than a MiB");
        assert!(pss(u32::MAX) == 0, "a process that is not there counts nothing");
    }
}
