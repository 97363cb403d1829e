//! What you simulate is what you run: the dou-miscort workload (11 applications, 30 workers,
//! Poisson failures) on the real jobs coordinator over loopback — HTTP, SQLite, polling
//! workers that crash and recover as the simulator's do, tasks that sleep their length — in
//! compressed time, beside the simulator's runs of the same workload at full scale. The
//! schedulers are ranked by deadline misses, then end-to-end time, on each side.
//!
//! Time is compressed by `scale` (a map of 20 s runs 20 × `scale` s), and with it every
//! quantity with a time in it: deadlines, arrival, recovery, the idle workers' poll interval,
//! the board's default task time and its priors; failure rates grow by 1 / `scale`. The model
//! is then the same; what differs is what the simulator leaves out: HTTP and database time,
//! the tokio scheduler, and one seed's luck against the simulator's mean over several.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use switchyard_core::measure::EstimateConfig;
use switchyard_core::place::tasks::BoardConfig;
use switchyard_jobs::Submission;
use switchyard_jobs::client::Submitter;
use switchyard_jobs::server::{Limits, serve};
use switchyard_jobs::wire::AppView;
use switchyard_jobs::{Allowed, Coordinator, Failures, Shared, Store, Sync, WorkerConfig};
use switchyard_sim::models::jobs::{Injector, Jobs, JobsParams, WorkerSpec};

use crate::miscort::{MAP_TIME, REDUCE_TIME, Scheduler, applications};
use crate::report::{ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec};

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The schedulers, each run once for real and `sim_runs` times simulated.
    pub schedulers: Vec<Scheduler>,
    /// Every worker's failure probability per map time (λ = p / 20 s, Poisson, as
    /// `reproduce dou-miscort --poisson`).
    pub p: f64,
    /// Real seconds per simulated second.
    pub scale: f64,
    /// Simulated runs per scheduler (seeds `seed`, `seed + 1`, …).
    pub sim_runs: u64,
    /// Root seed (the real workers' injectors use `seed + i`).
    pub seed: u64,
    /// Presume an attempt failed past this many times its task's mean time.
    pub presume_factor: f64,
    /// Real seconds after which a real run is cut off (open applications count as misses).
    pub horizon: f64,
}

impl Setup {
    /// Every scheduler of `reproduce dou-miscort`, at p = 0.4, 1/40 of real time.
    pub fn thesis() -> Self {
        Self {
            schedulers: crate::miscort::SCHEDULERS.to_vec(),
            p: 0.4,
            scale: 1.0 / 40.0,
            sim_runs: 10,
            seed: 1,
            presume_factor: 3.0,
            horizon: 120.0,
        }
    }
}

/// One scheduler's figures on both sides, in simulated seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The scheduler.
    pub scheduler: &'static str,
    /// Applications that missed their deadline on the real coordinator, of 11.
    pub real_missed: usize,
    /// The real run's end-to-end time, scaled back to simulated seconds.
    pub real_end_to_end: f64,
    /// Attempts handed out per application on the real coordinator.
    pub real_attempts: f64,
    /// Mean misses over the simulated runs.
    pub sim_missed: f64,
    /// Mean end-to-end time over the simulated runs, seconds.
    pub sim_end_to_end: f64,
    /// Mean attempts per application over the simulated runs.
    pub sim_attempts: f64,
}

/// Where the two sides can differ, and why; printed with the figures.
pub const GAP: &str = "Where the sides differ: the real run is one seed (the simulated figures are means), so a \
scheduler's misses differ by an application or two from run to run, and schedulers whose end-to-end times are within a \
few per cent of each other can swap places; the real coordinator adds HTTP, SQLite and the tokio scheduler's time to \
every poll (about a millisecond, against tasks of 500 ms at 1/40), and real workers wake from an idle wait a little late; \
the simulator's failures are drawn per worker from one stream, the real workers' from their own seeds.";

const WORKERS: usize = 30;
const POLL_EVERY: f64 = 2.0;
const RECOVERY: f64 = 30.0;

fn board(s: &Setup, scheduler: Scheduler, scale: f64, seed: u64) -> BoardConfig {
    let d = EstimateConfig::default();
    let defaults = BoardConfig::default();
    BoardConfig {
        order: scheduler.order,
        rule: scheduler.rule,
        seed,
        presume_factor: s.presume_factor,
        default_task_time: defaults.default_task_time * scale,
        estimates: EstimateConfig {
            prior_rate: d.prior_rate / scale,
            prior_exposure: d.prior_exposure * scale,
            prior_recovery: d.prior_recovery * scale,
            ..d
        },
        ..defaults
    }
}

/// The simulator's side: the same workload at full scale.
fn simulated(s: &Setup, scheduler: Scheduler) -> Result<(f64, f64, f64)> {
    let mut sums = (0.0, 0.0, 0.0);
    for run in 0..s.sim_runs {
        let seed = s.seed + run;
        let p = JobsParams {
            workers: vec![WorkerSpec { slowness: 1.0, rate: s.p / MAP_TIME }; WORKERS],
            injector: Injector::Poisson { recovery: RECOVERY },
            apps: applications(1.0),
            poll_every: POLL_EVERY,
            board: board(s, scheduler, 1.0, seed),
            seed,
            horizon: s.horizon / s.scale,
        };
        let o = Jobs::simulate(&p)?;
        sums.0 += o.missed as f64;
        sums.1 += o.end_to_end;
        sums.2 += o.attempts as f64 / o.apps.len().max(1) as f64;
    }
    let n = s.sim_runs.max(1) as f64;
    Ok((sums.0 / n, sums.1 / n, sums.2 / n))
}

/// The real side: a coordinator on loopback, 30 workers in this process, the applications
/// submitted at their (scaled) arrival times.
fn real(s: &Setup, scheduler: Scheduler) -> Result<(usize, f64, f64)> {
    let dir = std::env::temp_dir().join(format!("switchyard-miscort-real-{}-{}", std::process::id(), scheduler.name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let store = Store::open(&dir.join("jobs.db"), Sync::Normal)?;
    let idle = Duration::from_secs_f64(POLL_EVERY * s.scale);
    // The coordinator lets idle workers poll a little more often than they do.
    let coordinator = Coordinator::open(store, board(s, scheduler, s.scale, s.seed), idle / 2)?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let shared: Arc<Shared> = Shared::new(coordinator, "real".into());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut stop_server = stop_rx.clone();
        let server = tokio::spawn(serve(listener, shared, Limits::default(), async move {
            let _ = stop_server.changed().await;
        }));
        let mut workers = Vec::new();
        for i in 0..WORKERS {
            let config = WorkerConfig {
                coordinator: base.clone(),
                token: "real".into(),
                name: format!("w{i:02}"),
                idle,
                failures: Failures::Poisson { rate: s.p / MAP_TIME / s.scale, recovery: RECOVERY * s.scale },
                seed: s.seed.wrapping_mul(1000) + i as u64,
                allowed: Allowed::default(),
                max_tasks: None,
                site: None,
                store: None,
            };
            workers.push(switchyard_jobs::worker::spawn(config, stop_rx.clone()));
        }
        let http = reqwest::Client::new();
        let submitter = Submitter::new(&base, "real");
        let start = Instant::now();
        let apps = applications(1.0);
        let arg = format!("{},{}", MAP_TIME * s.scale, REDUCE_TIME * s.scale);
        for app in &apps {
            tokio::time::sleep_until((start + Duration::from_secs_f64(app.arrival * s.scale)).into()).await;
            let input = "x\n".repeat(app.maps as usize).into_bytes();
            let a = Submission {
                name: String::new(),
                program: "sleep".into(),
                arg: arg.clone(),
                reduces: app.reduces,
                deadline: app.deadline * s.scale,
                split: 1,
                estimate: Some(MAP_TIME * s.scale),
            };
            submitter.submit(&a, input).await.context("submitting")?;
        }
        let views: Vec<AppView> = loop {
            let v: Vec<AppView> = http.get(format!("{base}/v1/apps")).bearer_auth("real").send().await?.json().await?;
            // Done, not merely decided: a missed application still runs to its end, which
            // the end-to-end time counts, as the simulator's does.
            if v.iter().all(|a| a.took.is_some()) || start.elapsed().as_secs_f64() > s.horizon {
                break v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let _ = stop_tx.send(true);
        for w in workers {
            w.await?.context("a worker")?;
        }
        server.await??;
        let missed = views.iter().filter(|v| v.verdict != "met").count();
        let end = views.iter().filter_map(|v| v.took).fold(0.0f64, f64::max) / s.scale;
        let end = if views.iter().any(|v| v.took.is_none()) { s.horizon / s.scale } else { end };
        let attempts = views.iter().map(|v| v.attempts as f64).sum::<f64>() / views.len().max(1) as f64;
        Ok((missed, end, attempts))
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Runs every scheduler on both sides, advancing `progress` by one a scheduler.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>> {
    if s.schedulers.is_empty() || !(s.scale > 0.0 && s.scale <= 1.0) || s.p.is_nan() || s.p < 0.0 {
        bail!("give at least one scheduler, a time scale in (0, 1] and p ≥ 0");
    }
    progress.stage("dou-miscort --real, schedulers", s.schedulers.len() as u64);
    let mut rows = Vec::new();
    for &scheduler in &s.schedulers {
        let (sim_missed, sim_end_to_end, sim_attempts) = simulated(s, scheduler)?;
        let (real_missed, real_end_to_end, real_attempts) = real(s, scheduler)?;
        let row = Row {
            scheduler: scheduler.name,
            real_missed,
            real_end_to_end,
            real_attempts,
            sim_missed,
            sim_end_to_end,
            sim_attempts,
        };
        progress.advance(1);
        rows.push(row);
    }
    Ok(rows)
}

/// How schedulers are ranked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// Fewer deadline misses first, then a shorter end-to-end time.
    Misses,
    /// A shorter end-to-end time.
    EndToEnd,
}

/// The schedulers in order, best first.
pub fn ranking(rows: &[Row], real: bool, by: By) -> Vec<&'static str> {
    let key = |r: &Row| {
        let (missed, end) =
            if real { (r.real_missed as f64, r.real_end_to_end) } else { (r.sim_missed, r.sim_end_to_end) };
        match by {
            By::Misses => (missed, end),
            By::EndToEnd => (0.0, end),
        }
    };
    let mut v: Vec<&Row> = rows.iter().collect();
    v.sort_by(|a, b| key(a).0.total_cmp(&key(b).0).then(key(a).1.total_cmp(&key(b).1)));
    v.into_iter().map(|r| r.scheduler).collect()
}

/// Kendall's τ between two rankings of the same names: 1 when they agree on every pair, −1
/// when they disagree on every pair.
pub fn kendall_tau(a: &[&str], b: &[&str]) -> f64 {
    let pos = |x: &str, v: &[&str]| v.iter().position(|y| *y == x).unwrap_or(usize::MAX);
    let n = a.len();
    if n < 2 {
        return 1.0;
    }
    let mut score = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            let (x, y) = (a[i], a[j]);
            score += if (pos(x, b) < pos(y, b)) == (i < j) { 1 } else { -1 };
        }
    }
    score as f64 / (n * (n - 1) / 2) as f64
}

/// Each scheduler on the real coordinator beside the simulator.
pub const SCHEDULERS: TableSpec = TableSpec::new(
    "schedulers",
    "Each scheduler on the real coordinator (one run) beside the simulator (the mean of its runs); times in simulated seconds",
    &[
        ColumnSpec::text("scheduler"),
        ColumnSpec::int("real_missed")
            .header("missed real")
            .about("applications of 11 that missed their deadlines, real run"),
        ColumnSpec::num("sim_missed", 1).header("missed sim").about("the same, mean over the simulated runs"),
        ColumnSpec::num("real_end_to_end", 0)
            .header("end-to-end real")
            .unit("s")
            .about("the real run's end-to-end time, scaled back to simulated seconds"),
        ColumnSpec::num("sim_end_to_end", 0)
            .header("end-to-end sim")
            .unit("s")
            .about("mean end-to-end time over the simulated runs"),
        ColumnSpec::num("real_attempts", 1)
            .header("attempts/app real")
            .about("attempts handed out per application, real run"),
        ColumnSpec::num("sim_attempts", 1)
            .header("attempts/app sim")
            .about("attempts per application, mean over the simulated runs"),
    ],
);

/// The schedulers ranked on each side, and how alike the two orders are.
pub const RANKINGS: TableSpec = TableSpec::new(
    "rankings",
    "The schedulers ranked on each side, best first",
    &[
        ColumnSpec::text("by").about("what ranks them"),
        ColumnSpec::text("real").about("the order on the real coordinator, best first"),
        ColumnSpec::text("simulated").about("the order in the simulator"),
        ColumnSpec::num("kendall_tau", 2)
            .header("Kendall's τ")
            .about("between the two orders: 1 the same, 0 unrelated, -1 reversed"),
    ],
);

/// What `reproduce dou-miscort --real` reports: its own spec, as its tables share nothing with
/// the simulator's run (`switchyard schema reproduce dou-miscort-real`).
pub const SPEC: ReportSpec = ReportSpec {
    name: "dou-miscort-real",
    title: "dou-miscort's workload on the real jobs coordinator (HTTP on loopback, SQLite, 30 polling workers that crash and recover) beside the simulator, and the schedulers' rankings on both",
    tables: &[&SCHEDULERS, &RANKINGS],
};

/// The rows as a report: both sides by scheduler, the rankings, and where the sides differ.
pub fn report(setup: &Setup, rows: &[Row]) -> Report {
    let mut r = Report::new(&SPEC);
    r.param("p", setup.p, "every worker's failure probability per map time (Poisson, λ = p / 20 s)")
        .param("time_scale", setup.scale, "real seconds per simulated second")
        .param("sim_runs", setup.sim_runs, "simulated runs per scheduler")
        .param("seed", setup.seed, "the root seed")
        .param("presume", setup.presume_factor, "an attempt is presumed failed past this many times its task's mean time")
        .param("horizon", setup.horizon, "real seconds after which a real run is cut off (open applications count as misses)")
        .note(format!(
            "30 polling workers crashing at λ = {} / {MAP_TIME} s and recovering in {RECOVERY} s on average, tasks that sleep their length (a map {MAP_TIME} s, a reduce {REDUCE_TIME} s), at 1/{:.0} of real time; one real run per scheduler.",
            setup.p,
            1.0 / setup.scale
        ))
        .note(GAP);
    let mut t = Table::new(&SCHEDULERS);
    for row in rows {
        t.push(vec![
            row.scheduler.into(),
            row.real_missed.into(),
            row.sim_missed.into(),
            row.real_end_to_end.into(),
            row.sim_end_to_end.into(),
            row.real_attempts.into(),
            row.sim_attempts.into(),
        ]);
    }
    r.tables.push(t);
    let mut ranks = Table::new(&RANKINGS);
    for (by, what) in [(By::Misses, "fewer misses, then shorter end-to-end"), (By::EndToEnd, "shorter end-to-end")] {
        let (real, sim) = (ranking(rows, true, by), ranking(rows, false, by));
        ranks.push(vec![what.into(), real.join(" < ").into(), sim.join(" < ").into(), kendall_tau(&real, &sim).into()]);
    }
    r.tables.push(ranks);
    r
}
