//! The gateway over four origins on loopback (issue 20 §2's bench): one fast and dear, two
//! slow and cheap, one cheap with a heavy tail, their latencies injected from the same models
//! as the simulator's [`figurehead::four_origins`], each serving 16 reads at a time. Every
//! routing policy in one run, under the same open-loop Poisson load: SLA attainment seen by
//! the client, price paid per read, each origin's share, and beside each the simulator's
//! prediction for the same origins, load and policy (cancelling, as the gateway does).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use axum::Router;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use switchyard_core::place::sla::{RouteKind, Sla, SlaRouter};
use switchyard_gateway::origin::OriginConfig;
use switchyard_gateway::origins::OriginSpec;
use switchyard_sim::models::figurehead::{BackendSpec, Outcome, Setup as SimSetup, simulate, simulate_against};
use tokio::sync::Semaphore;

use crate::ExperimentError;
use crate::figurehead::{self, SWEEP_SLA};
use crate::report::{self, ColumnSpec, Progress, ReportSpec, Table, TableSpec};

/// The bench's set-up.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Reads per policy.
    pub requests: u64,
    /// Reads per second (Poisson arrivals).
    pub rate: f64,
    /// The heavy-tailed origin's share of tail answers.
    pub tail: f64,
    /// The policies, in the order run, each with the latency its plan aims for (the SLA's,
    /// or less, to leave room for delay the gateway does not see).
    pub routes: Vec<(RouteKind, Duration)>,
    /// Random seed (origins' latencies and the simulator).
    pub seed: u64,
}

impl Default for Setup {
    fn default() -> Self {
        let mut routes: Vec<(RouteKind, Duration)> =
            figurehead::policies().into_iter().map(|r| (r, SWEEP_SLA.within)).collect();
        // OptWait again, planning for 5 ms less than the SLA's latency: the client's side of
        // the loopback and the scheduler of a shared machine add a few ms the gateway's
        // latencies do not include.
        routes.insert(2, (RouteKind::OptWait, SWEEP_SLA.within - Duration::from_millis(5)));
        Self { requests: 2000, rate: 150.0, tail: 0.08, routes, seed: 1 }
    }
}

/// What the client saw through the gateway for one policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Real {
    /// Fraction of reads answered within the SLA's latency.
    pub attained: f64,
    /// Price paid per read (routed attempts; probes are counted apart).
    pub cost: f64,
    /// Latency quantiles seen by the client.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Each origin's share of the routed attempts.
    pub share: Vec<f64>,
    /// Probes sent (reads copied to learn latencies).
    pub probes: f64,
    /// Reads that failed.
    pub failed: u64,
}

/// One policy: the real run and the simulator's prediction.
#[derive(Clone, Debug)]
pub struct Row {
    /// The policy (with the latency it planned for, if not the SLA's).
    pub route: String,
    /// The real run.
    pub real: Real,
    /// The simulator's prediction.
    pub predicted: Outcome,
}

/// The origins: the simulator's models with these names and prices.
pub fn origins(tail: f64) -> Vec<BackendSpec> {
    figurehead::four_origins(tail)
}

async fn serve(router: Router) -> Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding a loopback port")?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// An origin that serves `spec.servers` reads at a time, each after a latency drawn from
/// `spec.latency`, uncacheable.
async fn start_origin(spec: &BackendSpec, seed: u64) -> Result<SocketAddr> {
    let rng = Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed)));
    let slots = Arc::new(Semaphore::new(spec.servers));
    let latency = spec.latency;
    let app = Router::new().fallback(axum::routing::get(move || {
        let (rng, slots) = (Arc::clone(&rng), Arc::clone(&slots));
        async move {
            let _slot = slots.acquire_owned().await.expect("never closed");
            let d = latency.sample(&mut *rng.lock().expect("no panic under the lock"));
            tokio::time::sleep(d).await;
            ([("cache-control", "no-store")], "x")
        }
    }));
    serve(app).await
}

/// The sum over origins of a per-origin counter in `/metrics` text, by origin URL.
fn per_origin(metrics: &str, name: &str, urls: &[String]) -> Vec<f64> {
    urls.iter()
        .map(|u| {
            metrics
                .lines()
                .find(|l| l.starts_with(name) && l.contains(&format!("\"{u}\"")))
                .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                .unwrap_or(0.0)
        })
        .collect()
}

/// Runs every policy through the gateway, then the simulator's prediction for each;
/// `progress` advances as each policy is done.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>, ExperimentError> {
    if s.requests == 0 || !(s.rate > 0.0 && s.rate.is_finite()) {
        return Err(ExperimentError::Input("the bench needs at least one read and a positive rate".into()));
    }
    if !(0.0..=1.0).contains(&s.tail) {
        return Err(ExperimentError::Input(format!("--tail {} is not a share between 0 and 1", s.tail)));
    }
    Ok(bench(s, progress)?)
}

fn bench(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>> {
    progress.stage("routes", s.routes.len() as u64);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    let specs = origins(s.tail);
    let addrs: Vec<SocketAddr> = runtime.block_on(async {
        let mut v = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            v.push(start_origin(spec, s.seed ^ (i as u64 + 1)).await?);
        }
        anyhow::Ok(v)
    })?;
    let urls: Vec<String> = addrs.iter().map(|a| format!("http://{a}")).collect();
    let mut rows = Vec::new();
    for (k, &(route, aim)) in s.routes.iter().enumerate() {
        let planned = Sla { within: aim, ..SWEEP_SLA };
        let config = OriginConfig {
            origins: urls.iter().zip(&specs).map(|(u, b)| OriginSpec { url: u.clone(), price: b.price }).collect(),
            route,
            sla: planned,
            ..OriginConfig::new(urls[0].clone())
        };
        let real = runtime.block_on(async {
            let g = serve(switchyard_gateway::origin::router(config)).await?;
            let client = reqwest::Client::new();
            let mut rng = ChaCha8Rng::seed_from_u64(s.seed ^ 0x5eed ^ k as u64);
            let start = tokio::time::Instant::now();
            let mut at = Duration::ZERO;
            let mut tasks = Vec::new();
            for i in 0..s.requests {
                at += Duration::from_secs_f64(rand_distr::Distribution::sample(
                    &rand_distr::Exp::new(s.rate).expect("a positive rate"),
                    &mut rng,
                ));
                tokio::time::sleep_until(start + at).await;
                let (client, url) = (client.clone(), format!("http://{g}/read/{i}"));
                tasks.push(tokio::spawn(async move {
                    let t = Instant::now();
                    let ok = match client.get(&url).send().await {
                        Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                        Err(_) => false,
                    };
                    (t.elapsed(), ok)
                }));
            }
            let mut lat = Vec::new();
            let mut failed = 0;
            for t in tasks {
                let (l, ok) = t.await?;
                if ok {
                    lat.push(l);
                } else {
                    failed += 1;
                    lat.push(Duration::MAX);
                }
            }
            let metrics = client.get(format!("http://{g}/metrics")).send().await?.text().await?;
            lat.sort_unstable();
            let q = |p: f64| lat[((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1];
            let cost: f64 = per_origin(&metrics, "gateway_origin_cost_total", &urls).iter().sum();
            let attempts = per_origin(&metrics, "gateway_origin_attempts_total", &urls);
            let sent: f64 = attempts.iter().sum::<f64>().max(1.0);
            let n = s.requests as f64;
            anyhow::Ok(Real {
                attained: lat.iter().filter(|l| **l <= SWEEP_SLA.within).count() as f64 / n,
                cost: cost / n,
                p50: q(0.5),
                p99: q(0.99),
                share: attempts.iter().map(|a| a / sent).collect(),
                probes: per_origin(&metrics, "gateway_origin_probes_total", &urls).iter().sum(),
                failed,
            })
        })?;
        let sim = SimSetup {
            backends: specs.clone(),
            rate: s.rate,
            requests: s.requests.max(5000),
            cancel: true,
            oracle: false,
            replan_every: 100,
            seed: s.seed,
        };
        let router = SlaRouter::new(route, planned, specs.iter().map(|b| b.price).collect(), 1000);
        let mut predicted = simulate(&sim, router)?;
        // The simulator counted attainment against the plan's latency; the SLA's is what counts.
        if aim != SWEEP_SLA.within {
            let again = SlaRouter::new(route, planned, specs.iter().map(|b| b.price).collect(), 1000);
            predicted = simulate_against(&sim, again, SWEEP_SLA.within)?;
        }
        let name = if aim == SWEEP_SLA.within {
            route.name()
        } else {
            format!("{} (aim {} ms)", route.name(), aim.as_millis())
        };
        rows.push(Row { route: name, real, predicted });
        progress.advance(1);
    }
    Ok(rows)
}

/// The goal read off a run: where the SLA is feasible, OptWait meets it at a lower
/// price than fixed-delay hedging and Base, or the run shows when not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Goal {
    /// OptWait met the SLA, cheaper than Base and the fixed-delay hedge (or they missed it).
    Met,
    /// OptWait planned for the SLA's latency missed it, but planned lower it met it, cheaper
    /// than the others (or they missed it): the delay outside the gateway.
    MetWithMargin,
    /// OptWait met the SLA but not at the lowest price of the three.
    Dearer,
    /// OptWait missed the SLA, with or without the margin.
    Missed,
    /// The run lacks one of the routes compared.
    NotRun,
}

impl Goal {
    /// A sentence for the report.
    pub fn says(self) -> &'static str {
        match self {
            Self::Met => {
                "goal met: OptWait meets the SLA at a lower price than Base and fixed-delay hedging (or they miss it)"
            }
            Self::MetWithMargin => {
                "OptWait aimed at the SLA's latency missed it by the delay outside the gateway; aimed 5 ms lower it met \
                 it at a lower price than Base and fixed-delay hedging (or they miss it)"
            }
            Self::Dearer => "goal NOT met: OptWait met the SLA but not at the lowest price of the three",
            Self::Missed => "OptWait missed the SLA here",
            Self::NotRun => "OptWait, Base and hedge:50ms were not all run",
        }
    }
}

/// The named route's row.
pub fn row<'a>(rows: &'a [Row], route: &str) -> Option<&'a Row> {
    rows.iter().find(|r| r.route == route)
}

/// Reads the goal off `rows` (the default set-up's routes).
pub fn goal(rows: &[Row]) -> Goal {
    let (Some(w), Some(b), Some(f)) = (row(rows, "optwait"), row(rows, "base"), row(rows, "hedge:50ms")) else {
        return Goal::NotRun;
    };
    let met = |r: &Row| r.real.attained >= SWEEP_SLA.percent;
    let cheapest = |o: &Row| (!met(b) || o.real.cost < b.real.cost) && (!met(f) || o.real.cost < f.real.cost);
    let aimed = row(rows, AIMED).filter(|r| met(r));
    match (met(w), aimed) {
        (true, _) if cheapest(w) => Goal::Met,
        (true, _) => Goal::Dearer,
        (false, Some(a)) if cheapest(a) => Goal::MetWithMargin,
        _ => Goal::Missed,
    }
}

/// The name of the OptWait row planned 5 ms under the SLA's latency.
pub const AIMED: &str = "optwait (aim 95 ms)";

/// A row per route: the client's view through the gateway beside the simulator's.
pub const ROUTES: TableSpec = TableSpec::new(
    "routes",
    "Every route through the gateway under the same load, beside the simulator's prediction",
    &[
        ColumnSpec::text("route"),
        ColumnSpec::num("attained", 2)
            .percent()
            .about("share of reads answered within the SLA's latency, as the client saw it"),
        ColumnSpec::flag("met").about("whether the SLA's share was attained"),
        ColumnSpec::num("cost", 2).header("cost/read").about("price paid per read: every attempt sent, probes apart"),
        ColumnSpec::num("p50", 1).unit("ms"),
        ColumnSpec::num("p99", 1).unit("ms"),
        ColumnSpec::num("probes", 0).about("reads copied to an origin to learn its latency"),
        ColumnSpec::int("failed").about("reads that failed"),
        ColumnSpec::num("sim_attained", 2).percent().header("sim att.").about("the simulator's attainment"),
        ColumnSpec::num("sim_cost", 2).header("sim cost").about("the simulator's price per read"),
        ColumnSpec::num("sim_p99", 1).header("sim p99").unit("ms").about("the simulator's p99"),
    ],
);

/// Each origin's share of each route's attempts.
pub const SHARES: TableSpec = TableSpec::new(
    "shares",
    "Each origin's share of the routed attempts",
    &[
        ColumnSpec::text("route"),
        ColumnSpec::text("origin"),
        ColumnSpec::num("price", 1),
        ColumnSpec::num("share", 0).percent().about("share of the route's attempts sent to the origin"),
        ColumnSpec::num("sim_share", 0).percent().header("sim share").about("the simulator's share"),
    ],
);

/// Issue 20's goal, read off the routes.
pub const GOAL: TableSpec = TableSpec::new(
    "goal",
    "Issue 20's goal: where the SLA is feasible, OptWait meets it at a lower price than fixed-delay hedging and Base",
    &[ColumnSpec::text("verdict").about("met, met with margin, dearer, missed or not run")],
);

/// What `bench figurehead` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-figurehead",
    title: "The gateway over four origins of different speed and price: every routing policy for SLA attainment and price per read, beside the simulator",
    tables: &[&ROUTES, &SHARES, &GOAL],
};

impl Goal {
    /// The verdict's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Met => "met",
            Self::MetWithMargin => "met with margin",
            Self::Dearer => "dearer",
            Self::Missed => "missed",
            Self::NotRun => "not run",
        }
    }
}

/// The bench's rows as a report.
pub fn report(s: &Setup, rows: &[Row]) -> report::Report {
    let mut r = report::Report::new(&SPEC);
    r.machine = Some(crate::machine::describe());
    let specs = origins(s.tail);
    let names: Vec<String> = specs.iter().map(|o| format!("{} ({})", o.name, o.price)).collect();
    r.param("requests", s.requests, "reads per route")
        .param("rate", s.rate, "reads per second (Poisson arrivals)")
        .param("tail", s.tail, "the heavy-tailed origin's share of slow (Pareto) answers")
        .param("seed", s.seed, "seed of the origins' latencies, the arrivals and the simulator");
    r.note(format!(
        "origins (price): {}; SLA {:.0} % within {} ms",
        names.join(", "),
        SWEEP_SLA.percent * 100.0,
        SWEEP_SLA.within.as_millis()
    ));
    let ms = |d: Duration| if d == Duration::MAX { f64::NAN } else { d.as_secs_f64() * 1e3 };
    let mut t = Table::new(&ROUTES);
    let mut shares = Table::new(&SHARES).grouped_by("route");
    for row in rows {
        let (x, p) = (&row.real, &row.predicted);
        t.push(vec![
            row.route.as_str().into(),
            x.attained.into(),
            (x.attained >= SWEEP_SLA.percent).into(),
            x.cost.into(),
            ms(x.p50).into(),
            ms(x.p99).into(),
            x.probes.into(),
            x.failed.into(),
            p.attained.into(),
            p.cost.into(),
            ms(p.p99).into(),
        ]);
        for (i, o) in specs.iter().enumerate() {
            shares.push(vec![
                row.route.as_str().into(),
                o.name.as_str().into(),
                o.price.into(),
                x.share.get(i).copied().into(),
                p.share.get(i).copied().into(),
            ]);
        }
    }
    t.note(
        "Prices count every attempt sent (the paper's model; a hedge cancelled still costs its request). Probes are \
         reads copied to an origin to learn its latency, not counted in the price. A failed read counts as not \
         within the SLA; a p99 of failed reads is -.",
    );
    r.tables.push(t);
    r.tables.push(shares);
    let g = goal(rows);
    let mut t = Table::new(&GOAL);
    t.push(vec![g.name().into()]);
    if let (Some(w), Some(b), Some(f)) = (row(rows, "optwait"), row(rows, "base"), row(rows, "hedge:50ms")) {
        t.note(format!(
            "OptWait {:.2} at {:.2}%, Base {:.2} at {:.2}%, hedge:50ms {:.2} at {:.2}%",
            w.real.cost,
            w.real.attained * 100.0,
            b.real.cost,
            b.real.attained * 100.0,
            f.real.cost,
            f.real.attained * 100.0,
        ));
    }
    if let Some(a) = row(rows, AIMED) {
        t.note(format!("OptWait aimed at 95 ms: {:.2} at {:.2}%", a.real.cost, a.real.attained * 100.0));
    }
    t.note(g.says());
    r.tables.push(t);
    r
}
