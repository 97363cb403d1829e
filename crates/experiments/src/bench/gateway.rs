//! `bench gateway`: the caching gateway against nginx (`proxy_cache` with `proxy_cache_lock`) and
//! Varnish (its built-in VCL: request coalescing, no grace) in front of the same slow origin (the sensor-field emulator, whose reads take up to 0.2 s),
//! driven by the same load (wrk), in alternating rounds: requests a second on cache hits and
//! their p99 latency; then a thundering herd of concurrent requests for a key neither holds,
//! and for a key both held the moment it expired, counting the reads that reach the origin.
//! Over TLS (h2load): hits a second and p99 with HTTP/1.1 and HTTP/2 to ours and to nginx
//! (`listen … ssl http2`), and ours over cleartext HTTP/2 (h2c).
//! Last, in this process: the core's cache lookups against moka's on the same keys.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use switchyard_core::cache::Eviction;
use switchyard_core::measure::median_of_rounds;
use switchyard_gateway::field::FieldConfig;
use switchyard_gateway::origin::OriginConfig;
use switchyard_models::{ChangeModel, FieldSpec, Stations};

use super::peers::{Reaped, launch_nginx_cache, launch_nginx_cache_tls, launch_varnish};
use crate::ExperimentError;
use crate::report::{self, ColumnSpec, Progress, ReportSpec, Table, TableSpec};
use switchyard_gateway::listener::ServeOptions;

/// What to benchmark.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Seconds of load per round and server.
    pub seconds: f64,
    /// Rounds, alternating the servers.
    pub rounds: usize,
    /// wrk's open connections.
    pub connections: usize,
    /// Concurrent requests in each thundering herd.
    pub herd: usize,
    /// Keys for the in-process lookup comparison (at least 1).
    pub keys: usize,
    /// nginx, if it is to be run (else its rows are left out).
    pub nginx: Option<PathBuf>,
    /// Varnish's `varnishd`, if it is to be run (else its rows are left out).
    pub varnishd: Option<PathBuf>,
    /// wrk, if the hit rates are to be measured (else they are left out).
    pub wrk: Option<PathBuf>,
    /// h2load (nghttp2-client), if the rates over TLS and HTTP/2 are to be measured (else
    /// that table is left out).
    pub h2load: Option<PathBuf>,
    /// HTTP/2 streams h2load keeps open on each connection (`-m`).
    pub streams: usize,
}

/// One server and protocol under h2load.
#[derive(Clone, Debug)]
pub struct ProtocolRow {
    /// `switchyard gateway` or `nginx proxy_cache`.
    pub name: &'static str,
    /// What was spoken, as h2load negotiated it: `HTTP/2 over TLSv1.3`, `h2c`, ...
    pub protocol: String,
    /// The cipher suite negotiated (empty without TLS).
    pub cipher: String,
    /// Requests a second on hits and their p99 latency in ms (median rounds).
    pub hits: (f64, f64),
}

/// One server's figures.
#[derive(Clone, Debug)]
pub struct ServerRow {
    /// `switchyard gateway`, `nginx proxy_cache` or `varnish (malloc)`.
    pub name: &'static str,
    /// Requests a second on hits and their p99 latency in ms (median rounds); `None` without wrk.
    pub hits: Option<(f64, f64)>,
    /// The herd for a key nobody held: reads that reached the origin, answers that were not 200.
    pub cold_herd: (f64, usize),
    /// The same for a key asked the moment it expired.
    pub expired_herd: (f64, usize),
}

/// What the bench measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Ours first, then nginx and Varnish where they ran.
    pub servers: Vec<ServerRow>,
    /// ns per lookup of a hot key: the core's cache under its lock, and moka's.
    pub lookups: (f64, f64),
    /// Hits over TLS and HTTP/2 (h2load); empty without h2load.
    pub protocols: Vec<ProtocolRow>,
}

/// Runs the bench; `progress` hears of each wrk run, each herd and the lookups.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Report, ExperimentError> {
    if s.keys == 0 {
        return Err(ExperimentError::Input("the lookup comparison needs at least one key".into()));
    }
    Ok(bench(s, progress)?)
}

fn bench(a: &Setup, progress: &dyn Progress) -> Result<Report> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    // The origin: the field emulator, reads taking up to 0.2 s.
    let spec =
        FieldSpec::Lattice { model: ChangeModel::Correlated, rate: 90.0, stations: Stations::Quadrants, rule: None };
    let field = switchyard_gateway::field::router(FieldConfig {
        spec,
        seed: 1,
        time_scale: 0.1,
        link_capacity: 1e6,
        max_wait_s: 2.0,
    })?;
    // Two pairs of servers: one keeping answers an hour (the hits and the cold herd), one two
    // seconds (the herd at expiry).
    let origin = runtime.block_on(serve(field))?;
    // One folder per run, not per process: two runs in one process (tests side by side) must
    // not remove each other's files when they end.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("switchyard-bench-nginx-{}-{run}", std::process::id()));
    // Served as `switchyard gateway serve` serves it (its own loop and service, no router).
    let start_ours = |ttl: Duration| {
        runtime.block_on(serve_ours(switchyard_gateway::origin::service(OriginConfig {
            // The field's answers state no freshness: the same fixed lifetime nginx is
            // given with proxy_cache_valid.
            heuristic: switchyard_core::cache::http::Heuristic { default: Some(ttl), ..Default::default() },
            ..OriginConfig::new(format!("http://{origin}"))
        })))
    };
    let (ours, ours_short) = (start_ours(Duration::from_secs(3600))?, start_ours(Duration::from_secs(2))?);
    let (theirs, theirs_short) = match &a.nginx {
        Some(path) => (
            Some(start_nginx(path, &dir.join("long"), origin, 3600)?),
            Some(start_nginx(path, &dir.join("short"), origin, 2)?),
        ),
        None => (None, None),
    };
    // Varnish as Debian ships it, given the same lifetimes for answers that state none (`-t`)
    // and no grace, so that it answers nothing stale, as neither of the others does here.
    let varnish = |ttl: u64, name: &str| {
        a.varnishd.as_ref().map(|v| launch_varnish(v, &dir.join(name), origin, 256, Some(ttl), &["default_grace=0"]))
    };
    let (varnish_long, varnish_short) =
        (varnish(3600, "varnish-long").transpose()?, varnish(2, "varnish-short").transpose()?);
    let client = reqwest::Client::new();
    let mut servers: Vec<(&'static str, SocketAddr, SocketAddr)> = vec![(OURS, ours, ours_short)];
    if let (Some((_, long)), Some((_, short))) = (&theirs, &theirs_short) {
        servers.push((NGINX, *long, *short));
    }
    if let (Some((_, long)), Some((_, short))) = (&varnish_long, &varnish_short) {
        servers.push((VARNISH, *long, *short));
    }
    // Warm both on the measured key.
    runtime.block_on(async {
        for (_, s, _) in &servers {
            client.get(format!("http://{s}/v1/sensors/7")).send().await?.error_for_status()?;
        }
        anyhow::Ok(())
    })?;
    let mut rates = vec![Vec::new(); servers.len()];
    let mut p99s = vec![Vec::new(); servers.len()];
    if let Some(wrk_path) = &a.wrk {
        progress.stage("hits (wrk)", (a.rounds * servers.len()) as u64);
        for _ in 0..a.rounds {
            for (i, (_, s, _)) in servers.iter().enumerate() {
                let (rate, p99) = wrk(wrk_path, &format!("http://{s}/v1/sensors/7"), a.connections, a.seconds)?;
                rates[i].push(rate);
                p99s[i].push(p99);
                progress.advance(1);
            }
        }
    }
    progress.stage("herds", servers.len() as u64);
    // The herds: a key neither holds, asked by many at once; and a key both held, asked by
    // many at once the moment it expired.
    let herds: Vec<((f64, usize), (f64, usize))> = runtime.block_on(async {
        let mut v = Vec::new();
        for (i, (_, long, short)) in servers.iter().enumerate() {
            let cold = herd(&client, *long, origin, &format!("/v1/sensors/{}", 500 + i), a.herd).await?;
            let key = format!("/v1/sensors/{}", 600 + i);
            client.get(format!("http://{short}{key}")).send().await?.error_for_status()?;
            // nginx keeps time in whole seconds, so its two seconds may last almost three.
            tokio::time::sleep(Duration::from_millis(3_500)).await;
            let expired = herd(&client, *short, origin, &key, a.herd).await?;
            v.push((cold, expired));
            progress.advance(1);
        }
        anyhow::Ok(v)
    })?;
    let rows = servers
        .iter()
        .enumerate()
        .map(|(i, (name, _, _))| ServerRow {
            name,
            hits: (!rates[i].is_empty())
                .then(|| (median_of_rounds(rates[i].clone()), median_of_rounds(p99s[i].clone()))),
            cold_herd: herds[i].0,
            expired_herd: herds[i].1,
        })
        .collect();
    // The servers measured so far stop here: they would only take CPU from the next ones.
    drop((theirs, theirs_short, varnish_long, varnish_short));
    let protocols = match &a.h2load {
        Some(h2load) => over_tls(a, &runtime, h2load, origin, &dir.join("tls"), progress)?,
        None => Vec::new(),
    };
    let _ = std::fs::remove_dir_all(&dir);
    progress.stage("lookups", 1);
    let lookups = lookups(a.keys);
    progress.advance(1);
    Ok(Report { servers: rows, lookups, protocols })
}

/// Hits over TLS (HTTP/1.1 and HTTP/2) to ours and to nginx, and over h2c to ours, measured by
/// h2load in alternating rounds. Each server is a cache of its own in front of `origin`,
/// keeping answers an hour, warmed on the key first.
fn over_tls(
    a: &Setup,
    runtime: &tokio::runtime::Runtime,
    h2load: &Path,
    origin: SocketAddr,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<Vec<ProtocolRow>> {
    std::fs::create_dir_all(dir)?;
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
    let (cert, key) = (dir.join("site.crt"), dir.join("site.key"));
    std::fs::write(&cert, made.cert.pem())?;
    std::fs::write(&key, made.signing_key.serialize_pem())?;
    let service = || {
        switchyard_gateway::origin::service(OriginConfig {
            heuristic: switchyard_core::cache::http::Heuristic {
                default: Some(Duration::from_secs(3600)),
                ..Default::default()
            },
            ..OriginConfig::new(format!("http://{origin}"))
        })
    };
    let tls = switchyard_gateway::tls::TlsFiles::load(&cert, &key)?;
    let ours_tls =
        runtime.block_on(serve_with(service(), ServeOptions { tls: Some(tls), ..ServeOptions::default() }))?;
    let ours_h2c = runtime.block_on(serve_with(service(), ServeOptions { h2c: true, ..ServeOptions::default() }))?;
    let location = "proxy_cache_valid 200 404 3600s;\n      proxy_cache_lock on;";
    let nginx = a
        .nginx
        .as_deref()
        .map(|n| launch_nginx_cache_tls(n, &dir.join("nginx"), origin, "inactive=10m", location, (&cert, &key)))
        .transpose()?;
    // (server, URL, HTTP/1.1 only)
    let mut runs: Vec<(&'static str, String, bool)> = vec![
        (OURS, format!("https://127.0.0.1:{}/v1/sensors/7", ours_tls.port()), true),
        (OURS, format!("https://127.0.0.1:{}/v1/sensors/7", ours_tls.port()), false),
        (OURS, format!("http://{ours_h2c}/v1/sensors/7"), false),
    ];
    if let Some((_, addr)) = &nginx {
        runs.push((NGINX, format!("https://{addr}/v1/sensors/7"), true));
        runs.push((NGINX, format!("https://{addr}/v1/sensors/7"), false));
    }
    // Warm each on the key: a miss takes up to 0.2 s, which must not count among the hits.
    for (_, url, h1) in &runs {
        h2load_run(h2load, url, *h1, 1, 1, None, &dir.join("warm.log"))?;
    }
    progress.stage("over TLS and HTTP/2 (h2load)", (a.rounds * runs.len()) as u64);
    let mut measured: Vec<Vec<H2load>> = vec![Vec::new(); runs.len()];
    for _ in 0..a.rounds {
        for (i, (_, url, h1)) in runs.iter().enumerate() {
            let streams = if *h1 { 1 } else { a.streams };
            measured[i].push(h2load_run(
                h2load,
                url,
                *h1,
                a.connections,
                streams,
                Some(a.seconds),
                &dir.join("requests.log"),
            )?);
            progress.advance(1);
        }
    }
    drop(nginx);
    Ok(runs
        .iter()
        .zip(measured)
        .map(|((name, url, h1), m)| {
            let http = if *h1 { "HTTP/1.1" } else { "HTTP/2" };
            let protocol = match m[0].tls.as_str() {
                "" if url.starts_with("http:") => "HTTP/2 cleartext (h2c)".to_string(),
                tls => format!("{http} over {tls}"),
            };
            ProtocolRow {
                name,
                protocol,
                cipher: m[0].cipher.clone(),
                hits: (
                    median_of_rounds(m.iter().map(|r| r.rate).collect()),
                    median_of_rounds(m.iter().map(|r| r.p99).collect()),
                ),
            }
        })
        .collect())
}

/// One h2load run's figures.
#[derive(Clone, Debug)]
struct H2load {
    rate: f64,
    /// ms, from its per-request log.
    p99: f64,
    /// `TLSv1.3` and the like; empty without TLS.
    tls: String,
    cipher: String,
}

/// h2load against `url` (HTTP/1.1 by ALPN where `h1`), for `seconds` (else one request on
/// each connection); its rate, and the p99 of the times its per-request log holds.
fn h2load_run(
    h2load: &Path,
    url: &str,
    h1: bool,
    connections: usize,
    streams: usize,
    seconds: Option<f64>,
    log: &Path,
) -> Result<H2load> {
    let mut command = Command::new(h2load);
    // h2load wants no more threads than connections.
    let threads = connections.min(2);
    command.args(["-t", &threads.to_string(), "-c", &connections.to_string(), "-m", &streams.to_string()]);
    match seconds {
        Some(s) => command.args(["-D", &format!("{}", s.ceil() as u64)]),
        None => command.args(["-n", &connections.to_string()]),
    };
    if h1 {
        command.arg("--h1");
    }
    let out = command
        .arg(format!("--log-file={}", log.display()))
        .arg(url)
        .output()
        .with_context(|| format!("running {}", h2load.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let field = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix)).map(str::trim);
    let rate = field("finished in ")
        .and_then(|l| l.split(", ").nth(1))
        .and_then(|r| r.strip_suffix(" req/s"))
        .and_then(|r| r.parse::<f64>().ok())
        .with_context(|| format!("h2load printed no rate against {url}:\n{text}"))?;
    let requests = field("requests: ").with_context(|| format!("h2load printed no request counts:\n{text}"))?;
    let statuses = field("status codes: ").unwrap_or("");
    if !requests.contains(" 0 failed, 0 errored, 0 timeout") || !statuses.contains(" 0 3xx, 0 4xx, 0 5xx") {
        bail!("h2load saw errors against {url}:\n{text}");
    }
    let mut times: Vec<u64> = std::fs::read_to_string(log)
        .with_context(|| format!("reading h2load's log {}", log.display()))?
        .lines()
        .filter_map(|l| l.split('\t').nth(2)?.trim().parse().ok())
        .collect();
    if times.is_empty() {
        bail!("h2load logged no request against {url}");
    }
    times.sort_unstable();
    let p99 = times[(times.len() * 99).div_ceil(100) - 1] as f64 / 1e3;
    Ok(H2load {
        rate,
        p99,
        tls: field("TLS Protocol:").unwrap_or("").to_string(),
        cipher: field("Cipher:").unwrap_or("").to_string(),
    })
}

/// Varnish's rows' name.
const VARNISH: &str = "varnish (malloc)";
/// nginx's rows' name.
const NGINX: &str = "nginx proxy_cache";
/// Our rows' name.
const OURS: &str = "switchyard gateway";

/// Ours on a loopback port, served as `gateway serve` serves it (cleartext HTTP/1.1).
async fn serve(router: axum::Router) -> Result<SocketAddr> {
    serve_with(router, ServeOptions::default()).await
}

async fn serve_with(router: impl switchyard_gateway::listener::Served, options: ServeOptions) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(switchyard_gateway::listener::serve(listener, router, options, std::future::pending()));
    Ok(addr)
}

async fn serve_ours(service: switchyard_gateway::origin::OriginService) -> Result<SocketAddr> {
    serve_with(service, ServeOptions::default()).await
}

/// nginx in front of `origin`, keeping answers `ttl_s` seconds, one request at a time to the
/// origin per key (proxy_cache_lock).
fn start_nginx(nginx: &Path, dir: &Path, origin: SocketAddr, ttl_s: u64) -> Result<(Reaped, SocketAddr)> {
    let location = format!(
        "proxy_cache_valid 200 404 {ttl_s}s;\n      proxy_cache_lock on;\n      proxy_cache_lock_timeout 5s;\n\
         add_header X-Cache $upstream_cache_status;"
    );
    launch_nginx_cache(nginx, dir, origin, "inactive=10m", &location)
}

/// wrk's requests a second and p99 latency (ms) against `url`.
fn wrk(wrk: &Path, url: &str, connections: usize, seconds: f64) -> Result<(f64, f64)> {
    let out = Command::new(wrk)
        .args(["-t2", &format!("-c{connections}"), &format!("-d{}s", seconds.ceil() as u64), "--latency", url])
        .output()
        .with_context(|| format!("running {}", wrk.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rate = text
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .with_context(|| format!("wrk printed no rate:\n{text}"))?;
    let p99 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("99%"))
        .and_then(|v| {
            let v = v.trim();
            let (n, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic())?);
            let n: f64 = n.parse().ok()?;
            Some(match unit {
                "us" => n / 1e3,
                "ms" => n,
                "s" => n * 1e3,
                _ => return None,
            })
        })
        .with_context(|| format!("wrk printed no 99th percentile:\n{text}"))?;
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        bail!("wrk saw errors against {url}:\n{text}");
    }
    Ok((rate, p99))
}

async fn origin_reads(client: &reqwest::Client, origin: SocketAddr) -> Result<f64> {
    let text = client.get(format!("http://{origin}/metrics")).send().await?.text().await?;
    text.lines()
        .find_map(|l| l.strip_prefix("field_reads_total "))
        .and_then(|v| v.trim().parse().ok())
        .context("the origin's /metrics has no field_reads_total")
}

/// Fires `n` concurrent requests for `path` at `server`; returns how many reads reached the
/// origin and how many answers were not 200.
async fn herd(
    client: &reqwest::Client,
    server: SocketAddr,
    origin: SocketAddr,
    path: &str,
    n: usize,
) -> Result<(f64, usize)> {
    let before = origin_reads(client, origin).await?;
    let asks: Vec<_> = (0..n)
        .map(|_| {
            let (client, url) = (client.clone(), format!("http://{server}{path}"));
            tokio::spawn(async move { client.get(url).send().await.map(|r| r.status().as_u16()) })
        })
        .collect();
    let mut bad = 0;
    for a in asks {
        bad += usize::from(!matches!(a.await, Ok(Ok(200))));
    }
    Ok((origin_reads(client, origin).await? - before, bad))
}

/// ns per lookup of a hot key, ours (a gateway hit: the core's cache under its lock, a clock
/// reading and `use_entry`) and moka's `get`: `bench eviction`'s hot-key timing
/// ([`super::eviction::hot_lookup`]), so that both reports time the same thing the same way.
fn lookups(keys: usize) -> (f64, f64) {
    let l = super::eviction::hot_lookup(keys);
    (l.hit_ns, l.moka_ns)
}

/// A row per server: hits and the herds.
pub const SERVERS: TableSpec = TableSpec::new(
    "servers",
    "Cache hits under wrk and the thundering herds, per server",
    &[
        ColumnSpec::text("server"),
        ColumnSpec::num("hits_per_s", 0).header("hits/s").about("requests a second on cache hits (median round)"),
        ColumnSpec::num("vs_best_peer", 2)
            .header("×faster peer")
            .about("hits a second over the faster of nginx's and Varnish's (those that ran)"),
        ColumnSpec::num("p99", 2).header("p99").unit("ms").about("99th percentile latency of the hits (median round)"),
        ColumnSpec::num("cold_herd_reads", 0)
            .header("cold herd: origin reads")
            .about("reads that reached the origin when the herd asked for a key nobody held"),
        ColumnSpec::int("cold_herd_not_200").header("not 200").about("answers of the cold herd that were not 200"),
        ColumnSpec::num("expired_herd_reads", 0)
            .header("herd at expiry: origin reads")
            .about("reads that reached the origin when the herd asked for a key the moment it expired"),
        ColumnSpec::int("expired_herd_not_200")
            .header("not 200")
            .about("answers of the herd at expiry that were not 200"),
    ],
);

/// The in-process lookups: the core's cache against moka.
pub const LOOKUPS: TableSpec = TableSpec::new(
    "lookups",
    "In-process lookups of hot keys, one thread, in its CPU time",
    &[
        ColumnSpec::text("cache"),
        ColumnSpec::num("lookup", 0)
            .header("lookup")
            .unit("ns")
            .about("CPU time per lookup (median of 7 alternating rounds, as in bench eviction)"),
        ColumnSpec::num("vs_moka", 2).header("×moka").about("time per lookup over moka's"),
    ],
);

/// Hits over TLS and HTTP/2, per server and protocol.
pub const PROTOCOLS: TableSpec = TableSpec::new(
    "protocols",
    "Cache hits over TLS and HTTP/2 under h2load, per server and protocol",
    &[
        ColumnSpec::text("server"),
        ColumnSpec::text("protocol").about("as h2load negotiated it (ALPN, TLS version)"),
        ColumnSpec::num("hits_per_s", 0).header("hits/s").about("requests a second on cache hits (median round)"),
        ColumnSpec::num("vs_nginx", 2)
            .header("×nginx")
            .about("hits a second over nginx's with the same protocol (where nginx ran)"),
        ColumnSpec::num("p99", 2)
            .header("p99")
            .unit("ms")
            .about("99th percentile latency of the hits, from h2load's per-request log (median round)"),
        ColumnSpec::text("cipher").about("the TLS cipher suite negotiated"),
    ],
);

/// What `bench gateway` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-gateway",
    title: "The caching gateway against nginx's proxy_cache and Varnish in front of the same slow origin, and the core's cache against moka",
    tables: &[&SERVERS, &PROTOCOLS, &LOOKUPS],
};

impl Report {
    /// The bench as a report.
    pub fn report(&self, setup: &Setup) -> report::Report {
        let mut r = report::Report::new(&SPEC);
        r.machine = Some(crate::machine::describe());
        r.param("seconds", setup.seconds, "seconds of load per round and server")
            .param("rounds", setup.rounds, "rounds, alternating the servers")
            .param("connections", setup.connections, "wrk's open connections (wrk -t2)")
            .param("herd", setup.herd, "concurrent requests in each thundering herd")
            .param("streams", setup.streams, "HTTP/2 streams h2load keeps open on each connection")
            .param("keys", setup.keys, "keys in the lookup comparison");
        r.note(format!(
            "loopback, {} cores shared by wrk, the servers and the origin; origin: the field emulator (reads up to 0.2 s)",
            super::cores()
        ));
        let missing: Vec<&str> = [
            ("nginx", setup.nginx.is_none()),
            ("varnishd", setup.varnishd.is_none()),
            ("wrk", setup.wrk.is_none()),
            ("h2load", setup.h2load.is_none()),
        ]
        .iter()
        .filter(|m| m.1)
        .map(|m| m.0)
        .collect();
        if !missing.is_empty() {
            let left_out: Vec<&str> = [
                (setup.nginx.is_none(), "no nginx row"),
                (setup.varnishd.is_none(), "no Varnish row"),
                (setup.wrk.is_none(), "no hit rates"),
                (setup.h2load.is_none(), "no rates over TLS and HTTP/2"),
            ]
            .iter()
            .filter(|m| m.0)
            .map(|m| m.1)
            .collect();
            r.note(format!(
                "{} not found, so {}: install them with bench/install-peers.sh (Debian's nginx-light, varnish, wrk and nghttp2-client)",
                missing.join(", "),
                left_out.join(", ")
            ));
        }
        let peers = || self.servers.iter().filter(|s| s.name != "switchyard gateway");
        let best_peer = peers().filter_map(|s| s.hits).map(|h| h.0).reduce(f64::max);
        let mut t = Table::new(&SERVERS);
        for s in &self.servers {
            let rate = s.hits.map(|h| h.0);
            t.push(vec![
                s.name.into(),
                rate.into(),
                rate.zip(best_peer).map(|(a, b)| a / b).into(),
                s.hits.map(|h| h.1).into(),
                s.cold_herd.0.into(),
                s.cold_herd.1.into(),
                s.expired_herd.0.into(),
                s.expired_herd.1.into(),
            ]);
        }
        t.note(format!(
            "each herd is {} requests at once; goals (issue 38): hits/s ≥ 1.5× the faster peer's, p99 no worse than \
             Varnish's, exactly one origin read in each herd",
            setup.herd
        ));
        r.tables.push(t);
        // The goals, where the figures they need were measured.
        let ours = self.servers.first().and_then(|s| s.hits);
        let met = |m: bool| if m { "met:    " } else { "NOT MET:" };
        if let (Some((rate, _)), Some(best)) = (ours, best_peer) {
            r.note(format!(
                "{} hits {rate:.0}/s, {:.2}× the faster peer's {best:.0}/s (goal ≥ 1.5×)",
                met(rate >= 1.5 * best),
                rate / best
            ));
        }
        let varnish_p99 = self.servers.iter().find(|s| s.name == VARNISH).and_then(|s| s.hits).map(|h| h.1);
        if let (Some((_, p99)), Some(theirs)) = (ours, varnish_p99) {
            r.note(format!("{} p99 {p99:.2} ms against Varnish's {theirs:.2} ms (goal: no worse)", met(p99 <= theirs)));
        }
        // Empty without h2load (a note says so).
        {
            let mut t = Table::new(&PROTOCOLS);
            for row in &self.protocols {
                let nginx = self.protocols.iter().find(|n| n.name == NGINX && n.protocol == row.protocol);
                t.push(vec![
                    row.name.into(),
                    row.protocol.clone().into(),
                    row.hits.0.into(),
                    nginx.map(|n| row.hits.0 / n.hits.0).into(),
                    row.hits.1.into(),
                    row.cipher.clone().into(),
                ]);
            }
            t.note(format!(
                "h2load -t2 -c{c}, one stream per connection with HTTP/1.1 and {s} with HTTP/2 (-m{s}); a self-signed \
                 P-256 certificate; nginx 1.22 `listen … ssl http2`, proxy_cache as above",
                c = setup.connections,
                s = setup.streams
            ));
            r.tables.push(t);
        }
        let (mine, moka) = self.lookups;
        let mut t = Table::new(&LOOKUPS);
        t.push(vec![
            "switchyard core (a hit: lock, clock, one lookup and its use)".into(),
            mine.into(),
            (mine / moka).into(),
        ]);
        t.push(vec!["moka::sync".into(), moka.into(), 1.0.into()]);
        t.note(format!(
            "{} hot keys; CPU time of the measuring thread (time spent waiting for a core on a loaded machine is not counted); ours bounded by {} as the gateway's cache; goal: the core's time ≤ 1× moka's",
            setup.keys,
            Eviction::DEFAULT
        ));
        r.tables.push(t);
        r.note(format!(
            "the herd at expiry: a key kept 2 s, asked by {} at once just after; nginx's proxy_cache_lock covers new entries only \
             (its remedy for expired ones is proxy_cache_use_stale updating, which answers stale: our --stale-while-revalidate)",
            setup.herd
        ));
        r
    }
}
