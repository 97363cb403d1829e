//! `switchyard bench deliver`: the delivery server against a tokio multi-threaded server and
//! nginx with `limit_rate`, serving the same streams to the same clients in one run.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use switchyard_core::Nanos;
use switchyard_core::order::{AdmissionConfig, PaceConfig};
use switchyard_runtime::deliver::{Pacing, Server, ServerConfig};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::bench_gateway::{Reaped, found, free_port, launch_nginx};

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

/// One server's run as the clients saw it.
struct Row {
    server: &'static str,
    json: serde_json::Value,
    cpu_s: f64,
}

fn cpu_self() -> f64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0)
}

/// CPU seconds used so far by `pid` and its children that are still running (nginx's workers).
fn cpu_tree(pid: u32) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let stat = |p: &str| -> Option<(u32, f64)> {
        let s = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        let rest = &s[s.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        Some((f.get(1)?.parse().ok()?, (f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?) / tick))
    };
    let mut total = stat(&pid.to_string()).map_or(0.0, |s| s.1);
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            if let Some((ppid, cpu)) = stat(&e.file_name().to_string_lossy())
                && ppid == pid
            {
                total += cpu;
            }
        }
    }
    total
}

/// Runs the clients against `server`; returns their JSON summary.
fn clients(
    server: SocketAddr,
    conns: usize,
    rate: Option<u64>,
    http: bool,
    seconds: f64,
    warmup: f64,
    dir: &Path,
) -> Result<serde_json::Value> {
    let json = dir.join(format!("load-{}.json", server.port()));
    let mut cmd = Command::new(std::env::current_exe().context("finding this program")?);
    cmd.args(["deliver", "load", "--quiet", "--threads", "1"])
        .args(["--server", &server.to_string(), "--conns", &conns.to_string()])
        .args(["--seconds", &seconds.to_string(), "--warmup", &warmup.to_string()])
        .arg("--json")
        .arg(&json);
    if let Some(r) = rate {
        cmd.args(["--rate", &r.to_string()]);
    }
    if http {
        cmd.args(["--http-get", "/stream"]);
    }
    let out = cmd.stderr(Stdio::piped()).stdout(Stdio::null()).output().context("running the clients")?;
    if !out.status.success() {
        bail!("the clients failed against {server}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_str(&std::fs::read_to_string(&json)?)?)
}

fn pin_to(cores: usize) {
    use nix::sched::{CpuSet, sched_setaffinity};
    let mut set = CpuSet::new();
    for c in 0..cores {
        let _ = set.set(c);
    }
    let _ = sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
}

/// The tokio peer: the same one-line protocol, a task per connection. Bulk connections write 4 KB
/// at a time as ours do; streams wake every `grain` and write what the rate owes since they
/// started, which is the same credit rule our pacer follows, left to tokio's timer wheel.
async fn tokio_peer(listener: tokio::net::TcpListener, grain: Duration) {
    loop {
        let Ok((sock, _)) = listener.accept().await else { continue };
        tokio::spawn(async move {
            let _ = sock.set_nodelay(true);
            let mut sock = BufReader::new(sock);
            let mut line = String::new();
            if sock.read_line(&mut line).await.is_err() {
                return;
            }
            let Ok(req) = switchyard_runtime::deliver::request::parse(line.as_bytes()) else { return };
            let mut sock = sock.into_inner();
            if sock.write_all(b"ok w0\n").await.is_err() {
                return;
            }
            let buf = vec![0x5au8; 256 * 1024];
            match req.bytes_per_sec() {
                None => while sock.write_all(&buf[..4096]).await.is_ok() {},
                Some(rate) => {
                    let start = tokio::time::Instant::now();
                    let mut tick = tokio::time::interval(grain);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    let mut sent = 0f64; // bytes sent or forgiven
                    loop {
                        tick.tick().await;
                        // The same bound on catching up as our pacer's: lateness past 50 ms is
                        // forgiven, not burst out later.
                        let mut owed = rate * start.elapsed().as_secs_f64() - sent;
                        let cap = rate * (grain.as_secs_f64() + 0.05);
                        if owed > cap {
                            sent += owed - cap;
                            owed = cap;
                        }
                        let owed = owed.min(buf.len() as f64);
                        if owed >= 1.0 {
                            let n = owed as usize;
                            if sock.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                            sent += n as f64;
                        }
                    }
                }
            }
        });
    }
}

fn start_tokio(threads: usize, grain: Duration) -> Result<(tokio::runtime::Runtime, SocketAddr)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .on_thread_start(move || {
            if threads < std::thread::available_parallelism().map_or(1, |c| c.get()) {
                pin_to(threads);
            }
        })
        .enable_all()
        .build()?;
    let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
    let addr = listener.local_addr()?;
    rt.spawn(tokio_peer(listener, grain));
    Ok((rt, addr))
}

/// nginx serving one large sparse file, at `limit` bytes per second per connection if given.
fn start_nginx(nginx: &Path, dir: &Path, workers: usize, limit: Option<u64>) -> Result<(Reaped, SocketAddr)> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("stream");
    std::fs::File::create(&file)?.set_len(64 << 30)?;
    let port = free_port()?;
    let mask: Vec<String> = (0..workers).map(|w| format!("{:0width$b}", 1u64 << w, width = workers)).collect();
    let conf = format!(
        "daemon off;\nworker_processes {workers};\nworker_cpu_affinity {mask};\nworker_rlimit_nofile 40000;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n{user}\
         events {{ worker_connections 30000; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  tcp_nodelay on;\n  keepalive_timeout 0;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
           server {{\n    listen 127.0.0.1:{port} backlog=4096;\n    root {d};\n    location /stream {{ {limit} }}\n  }}\n}}\n",
        mask = mask.join(" "),
        d = dir.display(),
        user = if nix::unistd::geteuid().is_root() { "user root;\n" } else { "" },
        limit = limit.map_or(String::new(), |l| format!("limit_rate {l};")),
    );
    launch_nginx(nginx, dir, &conf, port)
}

/// Our server on `workers` threads, pinned only when it is given fewer than every core (as the
/// tokio peer and nginx are confined to the same cores).
fn ours(workers: usize, grain_ms: f64, burst: usize) -> Result<Server> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    Server::start(ServerConfig {
        workers,
        burst,
        pin: workers < cores,
        pacing: Pacing::Fine(PaceConfig { grain: Nanos((grain_ms * 1e6) as u64), ..Default::default() }),
        // The peers refuse nothing; neither does ours here, so all serve the same streams.
        admission: AdmissionConfig { max_late: Nanos(u64::MAX), ..Default::default() },
        ..Default::default()
    })
    .context("starting the delivery server")
}

/// One case: who serves how many connections at what rate.
struct Case<'a> {
    name: &'a str,
    conns: usize,
    rate: Option<u64>,
    grain_ms: f64,
    seconds: f64,
    threads: usize,
}

/// Runs the three servers for one case.
fn case(a: &DeliverBench, c: &Case, nginx: Option<&PathBuf>, dir: &Path) -> Result<Vec<Row>> {
    let (conns, rate, seconds, threads) = (c.conns, c.rate, c.seconds, c.threads);
    let paced = rate.is_some();
    let mut rows = Vec::new();
    // Bulk is run twice: bursts of 16 packets a turn (the default, the thesis's burst
    // experiment) and one packet a turn (the thesis's unit in its other runs).
    let bursts: &[(usize, &'static str)] =
        if paced { &[(16, "switchyard")] } else { &[(16, "switchyard"), (1, "switchyard×1")] };
    for &(burst, name) in bursts {
        let server = ours(threads, c.grain_ms, burst)?;
        let t = cpu_self();
        let json = clients(server.local_addr(), conns, rate, false, seconds, a.warmup, dir)?;
        rows.push(Row { server: name, json, cpu_s: cpu_self() - t });
        server.stop();
    }
    let (rt, addr) = start_tokio(threads, Duration::from_secs_f64(c.grain_ms / 1e3))?;
    let t = cpu_self();
    let json = clients(addr, conns, rate, false, seconds, a.warmup, dir)?;
    rows.push(Row { server: "tokio", json, cpu_s: cpu_self() - t });
    rt.shutdown_background();
    if let Some(n) = nginx {
        let (child, addr) =
            start_nginx(n, &dir.join(format!("nginx-{}", c.name)), threads, rate.filter(|_| paced).map(|r| r / 8))?;
        let pid = child.0.id();
        let t = cpu_tree(pid);
        let json = clients(addr, conns, rate, true, seconds, a.warmup, dir)?;
        rows.push(Row { server: "nginx", json, cpu_s: cpu_tree(pid) - t });
        drop(child);
    }
    Ok(rows)
}

pub(crate) fn run(a: &DeliverBench) -> Result<()> {
    crate::deliver::raise_file_limit();
    if a.conns == 0 || a.bulk_conns == 0 || a.accurate_conns == 0 || a.cores == 0 {
        bail!("--conns, --accurate-conns, --bulk-conns and --cores must be above 0");
    }
    for (name, v) in [
        ("--grain-ms", a.grain_ms),
        ("--accurate-grain-ms", a.accurate_grain_ms),
        ("--seconds", a.seconds),
        ("--bulk-seconds", a.bulk_seconds),
    ] {
        if !v.is_finite() || v <= 0.0 {
            bail!("{name} {v} is out of range: it must be above 0");
        }
    }
    if !a.warmup.is_finite() || a.warmup < 0.0 {
        bail!("--warmup {} is out of range: it must be 0 or more", a.warmup);
    }
    let mut out = std::io::stdout().lock();
    let nginx = found("nginx");
    let dir = std::env::temp_dir().join(format!("switchyard-bench-deliver-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    let err = |v: &serde_json::Value, q: &str| {
        v["window_error"][q].as_f64().map_or("-".into(), |e| format!("{:.1}%", e * 100.0))
    };

    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let scale = Case {
        name: "scale",
        conns: a.conns,
        rate: Some(a.rate),
        grain_ms: a.grain_ms,
        seconds: a.seconds,
        threads: a.cores,
    };
    let accurate = Case {
        name: "accurate",
        conns: a.accurate_conns,
        rate: Some(a.accurate_rate),
        grain_ms: a.accurate_grain_ms,
        seconds: a.seconds,
        threads: a.cores,
    };
    for c in [&scale, &accurate] {
        writeln!(
            out,
            "Paced ({}): {} streams at {} b/s on {} core(s), {} s measured; our grain and tokio's tick {} ms",
            c.name,
            c.conns,
            c.rate.unwrap_or(0),
            c.threads,
            c.seconds,
            c.grain_ms
        )?;
        let paced = case(a, c, nginx.as_ref(), &dir)?;
        writeln!(
            out,
            "{:>11} {:>8} {:>11} {:>8} {:>15} {:>15} {:>11} {:>9} {:>9}",
            "server", "streams", "Mb/s", "Jain", "100 ms p50/p99", "1 s p50/p99", "worst/run", "CPU s", "×ours CPU"
        )?;
        let our_cpu = paced[0].cpu_s;
        for r in &paced {
            let (j, co) = (&r.json, &r.json["coarse"]);
            writeln!(
                out,
                "{:>11} {:>8} {:>11.1} {:>8.4} {:>15} {:>15} {:>10.2}% {:>9.2} {:>9.2}",
                r.server,
                j["conns"],
                f(j, "aggregate_bps") / 1e6,
                f(j, "jain"),
                format!("{}/{}", err(j, "p50"), err(j, "p99")),
                format!("{}/{}", err(co, "p50"), err(co, "p99")),
                f(j, "run_error") * 100.0,
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
        )?;
    }

    writeln!(
        out,
        "Bulk: {} connections on every core, {} s measured; ours sends 4 KB packets 16 a turn (×1: one a turn), tokio 4 KB writes, nginx sendfile",
        a.bulk_conns, a.bulk_seconds
    )?;
    let bulk_case = Case {
        name: "bulk",
        conns: a.bulk_conns,
        rate: None,
        grain_ms: a.grain_ms,
        seconds: a.bulk_seconds,
        threads: cores,
    };
    let bulk = case(a, &bulk_case, nginx.as_ref(), &dir)?;
    writeln!(out, "{:>14} {:>8} {:>11} {:>9} {:>8} {:>9}", "server", "conns", "Mb/s", "×tokio", "Jain", "max/min")?;
    let tokio_rate = bulk.iter().find(|r| r.server == "tokio").map_or(f64::NAN, |r| f(&r.json, "aggregate_bps"));
    for r in &bulk {
        let j = &r.json;
        writeln!(
            out,
            "{:>14} {:>8} {:>11.1} {:>9.2} {:>8.4} {:>9.2}",
            r.server,
            j["conns"],
            f(j, "aggregate_bps") / 1e6,
            f(j, "aggregate_bps") / tokio_rate,
            f(j, "jain"),
            f(j, "max_over_min")
        )?;
    }
    if nginx.is_none() {
        writeln!(out, "\nnginx not found: install it with bench/install-peers.sh (Debian's nginx-light)")?;
    }
    writeln!(
        out,
        "\ngoals: ≥ 10,000 paced streams per core with p99 per-window error ≤ 1%; Jain ≥ 0.99 at equal targets; bulk ≥ tokio's"
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
