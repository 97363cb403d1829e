//! `bench jobs`: the jobs coordinator's task assignments per second — a poll answered with a
//! task, the result uploaded and kept, every decision committed to SQLite — and the latency
//! of its polls, beside Celery (Redis broker and result backend) running the same trivial
//! tasks on this machine in alternating rounds.
//!
//! Ours runs in this process: the coordinator on loopback HTTP and the workers as tasks of the
//! same runtime, each polling, uploading an empty result and polling again. The peer runs as
//! `bench/celery_peer.py` against a redis-server this bench starts. Both sides share the two
//! cores with their own clients, as a single-machine deployment would.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use switchyard_core::place::tasks::BoardConfig;
use switchyard_jobs::server::{Limits, serve};
use switchyard_jobs::wire::{Grant, encode_parts};
use switchyard_jobs::{Coordinator, Shared, Store, Submission, Sync};

use super::peers::{Reaped, free_port};
use crate::report::{self, ColumnSpec, Progress, ReportSpec, Table, TableSpec};

/// What to benchmark.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Seconds measured per round and side.
    pub seconds: f64,
    /// Rounds, alternating the sides.
    pub rounds: usize,
    /// Polling workers (ours) and Celery's concurrency and tasks in flight (theirs).
    pub workers: usize,
    /// Celery's peer, if it is to be run.
    pub celery: Option<Celery>,
}

/// Where Celery's peer is.
#[derive(Clone, Debug)]
pub struct Celery {
    /// A Python with celery and redis installed (bench/install-peers.sh's venv).
    pub python: PathBuf,
    /// redis-server.
    pub redis: PathBuf,
    /// bench/celery_peer.py.
    pub script: PathBuf,
}

/// One round of one side.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Round {
    /// Tasks assigned and completed per second.
    pub rate: f64,
    /// Median latency, ms: of a poll (ours), of a task from send to result (Celery).
    pub p50_ms: f64,
    /// 99th percentile of the same, ms.
    pub p99_ms: f64,
    /// Tasks in the round.
    pub tasks: u64,
}

/// Issue 19's goals for the coordinator on this machine: task assignments a second, and the
/// 99th percentile of a poll's latency in ms.
pub const GOAL_RATE: f64 = 5000.0;
/// See [`GOAL_RATE`].
pub const GOAL_P99_MS: f64 = 10.0;

impl Round {
    /// Whether the round reached [`GOAL_RATE`] and [`GOAL_P99_MS`].
    pub fn goals(&self) -> (bool, bool) {
        (self.rate >= GOAL_RATE, self.p99_ms <= GOAL_P99_MS)
    }
}

/// What the bench measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Our rounds.
    pub ours: Vec<Round>,
    /// Celery's rounds (empty when it did not run).
    pub celery: Vec<Round>,
}

/// The median round by rate.
pub fn median(rounds: &[Round]) -> Option<Round> {
    let mut v = rounds.to_vec();
    v.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    v.get(v.len() / 2).copied()
}

/// Our side's name in the report.
pub const OURS: &str = "switchyard jobs (SQLite)";
/// Celery's side's name in the report.
pub const CELERY: &str = "celery (redis)";

/// Runs the bench; `progress` advances as each round of each side ends.
pub fn run(setup: &Setup, progress: &dyn Progress) -> Result<Report> {
    if setup.workers == 0 || setup.rounds == 0 || setup.seconds.is_nan() || setup.seconds <= 0.0 {
        bail!("bench jobs: give at least one worker, one round and a positive time");
    }
    let sides = 1 + usize::from(setup.celery.is_some());
    progress.stage("rounds", (setup.rounds * sides) as u64);
    let mut report = Report { ours: Vec::new(), celery: Vec::new() };
    for round in 0..setup.rounds {
        report.ours.push(ours(setup, round)?);
        progress.advance(1);
        if let Some(c) = &setup.celery {
            report.celery.push(celery(setup, c)?);
            progress.advance(1);
        }
    }
    Ok(report)
}

fn ours(setup: &Setup, round: usize) -> Result<Round> {
    let dir = std::env::temp_dir().join(format!("switchyard-bench-jobs-{}-{round}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let db = dir.join("jobs.db");
    let store = Store::open(&db, Sync::Normal)?;
    let mut coordinator = Coordinator::open(store, BoardConfig::default(), Duration::from_millis(1))?;
    // One task per line; more than the round can use, at a generous guess of its rate.
    let tasks = ((setup.seconds + 1.0) * 30_000.0) as usize;
    let input = "x\n".repeat(tasks);
    let sub = Submission {
        name: "bench".into(),
        program: "grep".into(),
        arg: "x".into(),
        reduces: 0,
        deadline: 3600.0,
        split: 1,
        estimate: Some(0.001),
    };
    coordinator.submit(sub, input.as_bytes(), switchyard_jobs::server::now())?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let shared: Arc<Shared> = Shared::new(coordinator, "bench".into());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, shared, Limits::default(), async {
            let _ = stop_rx.await;
        }));
        let warm = Duration::from_millis(300);
        let start = Instant::now() + warm;
        let end = start + Duration::from_secs_f64(setup.seconds);
        let mut clients = Vec::new();
        for w in 0..setup.workers {
            let base = base.clone();
            clients.push(tokio::spawn(async move { client(&base, &format!("bench-{w}"), start, end).await }));
        }
        let mut hist = hdrhistogram::Histogram::<u64>::new(3).expect("3 significant figures is valid");
        let mut done = 0;
        for c in clients {
            let (n, h) = c.await??;
            done += n;
            hist.add(h).expect("same bounds");
        }
        let _ = stop_tx.send(());
        server.await??;
        Ok::<_, anyhow::Error>(Round {
            rate: done as f64 / setup.seconds,
            p50_ms: hist.value_at_quantile(0.5) as f64 / 1e3,
            p99_ms: hist.value_at_quantile(0.99) as f64 / 1e3,
            tasks: done,
        })
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// One worker: poll, upload an empty result, again; counted and timed between `start` and
/// `end`. Returns the results kept and the polls' latencies in µs.
async fn client(base: &str, name: &str, start: Instant, end: Instant) -> Result<(u64, hdrhistogram::Histogram<u64>)> {
    let http = reqwest::Client::new();
    let mut hist = hdrhistogram::Histogram::<u64>::new(3).expect("valid");
    let poll = format!("{{\"worker\":\"{name}\"}}");
    let empty = encode_parts(&[Vec::new()]);
    let mut done = 0;
    loop {
        let now = Instant::now();
        if now >= end {
            return Ok((done, hist));
        }
        let r = http.post(format!("{base}/v1/poll")).bearer_auth("bench").body(poll.clone()).send().await?;
        let status = r.status();
        if status != reqwest::StatusCode::OK {
            bail!("bench jobs: a poll was answered {status}: {}", r.text().await.unwrap_or_default());
        }
        let g: Grant = r.json().await?;
        let polled = now.elapsed();
        let r = http
            .post(format!("{base}/v1/attempts/{}/result?worker={name}", g.attempt))
            .bearer_auth("bench")
            .body(empty.clone())
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("bench jobs: a result was answered {}: {}", r.status(), r.text().await.unwrap_or_default());
        }
        if now >= start {
            done += 1;
            hist.record(polled.as_micros() as u64).expect("auto-resizing");
        }
    }
}

fn celery(setup: &Setup, c: &Celery) -> Result<Round> {
    let port = free_port()?;
    let redis = Reaped(
        Command::new(&c.redis)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", c.redis.display()))?,
    );
    wait_listening(port)?;
    let dir = c.script.parent().unwrap_or(Path::new("."));
    let worker = Reaped(
        Command::new(&c.python)
            .arg(&c.script)
            .args(["worker", &port.to_string(), &setup.workers.to_string()])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting Celery's worker with {}", c.python.display()))?,
    );
    let out = Command::new(&c.python)
        .arg(&c.script)
        .args(["produce", &port.to_string(), &setup.seconds.to_string(), &(setup.workers * 2).to_string()])
        .current_dir(dir)
        .output()
        .context("running Celery's producer")?;
    drop(worker);
    drop(redis);
    if !out.status.success() {
        bail!("Celery's producer failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).context("reading Celery's producer's line")?;
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    Ok(Round { rate: f("rate"), p50_ms: f("p50_ms"), p99_ms: f("p99_ms"), tasks: f("tasks") as u64 })
}

fn wait_listening(port: u16) -> Result<()> {
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if t.elapsed() > Duration::from_secs(10) {
            bail!("redis-server did not listen on {port}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Celery's peer as `bench/install-peers.sh` installs it, if it is there.
pub fn find_celery(root: &Path) -> Option<Celery> {
    let python = root.join("target/peers/venv/bin/python");
    let script = root.join("bench/celery_peer.py");
    let redis = super::peers::found("redis-server")?;
    (python.is_file() && script.is_file()).then_some(Celery { python, redis, script })
}

/// Every round of every side, in the order run.
pub const ROUNDS: TableSpec = TableSpec::new(
    "rounds",
    "Every round, in the order run",
    &[
        ColumnSpec::text("side"),
        ColumnSpec::int("round").about("the round, from 1; the sides alternate within a round"),
        ColumnSpec::num("rate", 0).header("tasks/s").about("tasks assigned and completed per second"),
        ColumnSpec::num("p50", 2)
            .unit("ms")
            .about("median latency: a poll's (ours), a task's from send to result (Celery)"),
        ColumnSpec::num("p99", 2).unit("ms").about("99th percentile of the same"),
        ColumnSpec::int("tasks").about("tasks in the round"),
    ],
);

/// Each side's median round.
pub const MEDIANS: TableSpec = TableSpec::new(
    "medians",
    "Each side's median round (by rate)",
    &[
        ColumnSpec::text("side"),
        ColumnSpec::num("rate", 0).header("tasks/s").about("tasks assigned and completed per second"),
        ColumnSpec::num("vs_celery", 2).header("×celery").about("tasks a second over Celery's"),
        ColumnSpec::num("p50", 2)
            .unit("ms")
            .about("median latency: a poll's (ours), a task's from send to result (Celery)"),
        ColumnSpec::num("p99", 2).unit("ms").about("99th percentile of the same"),
        ColumnSpec::int("tasks").about("tasks in the round"),
    ],
);

/// Issue 19's goals against our median round.
pub const GOALS: TableSpec = TableSpec::new(
    "goals",
    "Issue 19's goals, our median round",
    &[ColumnSpec::text("goal"), ColumnSpec::num("target", 0), ColumnSpec::num("ours", 2), ColumnSpec::flag("reached")],
);

/// What `bench jobs` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-jobs",
    title: "Task assignments a second through the jobs coordinator, and its poll latency, beside Celery with Redis",
    tables: &[&ROUNDS, &MEDIANS, &GOALS],
};

impl Report {
    /// The bench as a report.
    pub fn report(&self, setup: &Setup) -> report::Report {
        let mut r = report::Report::new(&SPEC);
        r.machine = Some(crate::machine::describe());
        r.param("seconds", setup.seconds, "seconds measured per round and side")
            .param("rounds", setup.rounds, "rounds, alternating the sides")
            .param("workers", setup.workers, "polling workers (ours); Celery's concurrency, twice as many in flight");
        r.note(format!("loopback, {} cores shared by the coordinator and its clients", super::cores()));
        let row = |side: &str, x: &Round| -> Vec<report::Value> {
            vec![side.into(), x.rate.into(), x.p50_ms.into(), x.p99_ms.into(), x.tasks.into()]
        };
        let mut t = Table::new(&ROUNDS);
        for (i, ours) in self.ours.iter().enumerate() {
            let mut cells = row(OURS, ours);
            cells.insert(1, (i + 1).into());
            t.push(cells);
            if let Some(c) = self.celery.get(i) {
                let mut cells = row(CELERY, c);
                cells.insert(1, (i + 1).into());
                t.push(cells);
            }
        }
        r.tables.push(t);
        let (ours, theirs) = (median(&self.ours), median(&self.celery));
        let mut t = Table::new(&MEDIANS);
        for (side, m) in [(OURS, ours), (CELERY, theirs)] {
            if let Some(m) = m {
                let mut cells = row(side, &m);
                cells.insert(2, theirs.map(|c| m.rate / c.rate).into());
                t.push(cells);
            }
        }
        t.note("celery's latency is a task's, from send to result; ours is a poll's: poll → task handed out");
        r.tables.push(t);
        if theirs.is_none() {
            r.note(
                "celery: not run (no target/peers/venv with celery, or no redis-server): bench/install-peers.sh installs them",
            );
        }
        let mut t = Table::new(&GOALS);
        if let Some(m) = ours {
            let (rate_ok, p99_ok) = m.goals();
            t.push(vec!["assignments a second, at least".into(), GOAL_RATE.into(), m.rate.into(), rate_ok.into()]);
            t.push(vec!["p99 poll (ms), at most".into(), GOAL_P99_MS.into(), m.p99_ms.into(), p99_ok.into()]);
        }
        r.tables.push(t);
        r
    }
}
