//! `reproduce ko-worker-centric`: worker-centric scheduling against storage affinity, delay
//! scheduling and no locality at all (Ko, Morales and Gupta, Middleware 2007; notes 004a §7(d)),
//! in the simulator's grid model.
//!
//! # The setup, and what the paper leaves open
//!
//! The paper's defaults: 10 sites of one worker, a data server of 6,000 files at each, 25 MB
//! files over 3.4–4.6 MB/s (about 6 s a file; 0.16 files/s here), and the first 6,000 Coadd
//! tasks (53,390 files, 36–101 a task). Coadd's file lists are not public here, so a task reads
//! a window of a strip of files, neighbours overlapping as coadded sky regions do, handed out in
//! a random order. By default the run is a tenth of that (600 tasks, 5,339 files, stores of a
//! tenth the size), which keeps the whole reproduction to about a minute on two cores (the
//! scheduler scores every waiting task at every request, so a run's cost grows with the square
//! of its tasks); `scale` changes it.
//! Compute time is files × unit cost; the unit cost (10 s a file) is ours, chosen so that
//! utilisation with the defaults is above 90%, as the paper reports.
//!
//! Sweeps, as the paper's figures: data-server capacity (3k, 6k, 15k, 30k files, scaled), workers
//! per site (1, 2, 4, 6, 8), and unit cost (0.5 to 10 s a file: cheap computation makes the
//! run transfer-bound).

use switchyard_core::place::tasks::locality::Metric;
use switchyard_sim::models::grid::{Grid, GridOutcome, GridParams, Scheduler, Workload};

use crate::ExperimentError;
use crate::report::{self, Chart, ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec};

/// The schedulers compared: the paper's five worker-centric variants, its baseline, and two
/// more peers.
pub const SCHEDULERS: [Scheduler; 8] = [
    Scheduler::WorkerCentric { metric: Metric::Overlap, n: 1 },
    Scheduler::WorkerCentric { metric: Metric::Rest, n: 1 },
    Scheduler::WorkerCentric { metric: Metric::Combined { as_printed: false }, n: 1 },
    Scheduler::WorkerCentric { metric: Metric::Rest, n: 2 },
    Scheduler::WorkerCentric { metric: Metric::Combined { as_printed: false }, n: 2 },
    Scheduler::StorageAffinity,
    Scheduler::Delay(3),
    Scheduler::Fifo,
];

/// A point of a sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Point {
    /// Data-server capacity in the paper's files (scaled by the setup's scale).
    Capacity(usize),
    /// Workers per site.
    WorkersPerSite(u32),
    /// Seconds of computation per file.
    UnitCost(f64),
}

impl Point {
    /// The sweep's name and the point's x value.
    pub fn axis(self) -> (&'static str, f64) {
        match self {
            Self::Capacity(c) => ("capacity", c as f64),
            Self::WorkersPerSite(w) => ("workers-per-site", f64::from(w)),
            Self::UnitCost(u) => ("unit-cost", u),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The points.
    pub points: Vec<Point>,
    /// The schedulers.
    pub schedulers: Vec<Scheduler>,
    /// The workload's and the stores' scale against the paper's (1: 6,000 tasks).
    pub scale: f64,
    /// Runs a point, each with its own workload and draws (seeds `seed`, `seed + 1`, …).
    pub runs: u64,
    /// The first seed.
    pub seed: u64,
    /// Threads the runs are spread over.
    pub threads: usize,
}

impl Setup {
    /// The paper's sweeps at a tenth of its size, three runs a point.
    pub fn paper(threads: usize) -> Self {
        let mut points: Vec<Point> = [3000, 6000, 15_000, 30_000].into_iter().map(Point::Capacity).collect();
        points.extend([1, 2, 4, 6, 8].map(Point::WorkersPerSite));
        points.extend([0.5, 1.0, 2.5, 5.0, 10.0].map(Point::UnitCost));
        Self { points, schedulers: SCHEDULERS.to_vec(), scale: 0.1, runs: 3, seed: 1, threads }
    }
}

/// One point and scheduler, averaged over the runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The point.
    pub point: Point,
    /// The scheduler's name.
    pub scheduler: String,
    /// Seconds until the last task finished.
    pub makespan: f64,
    /// Files fetched from the file server.
    pub transfers: f64,
    /// Computation over the run, per worker.
    pub utilisation: f64,
    /// Replicas started (storage affinity).
    pub replicas: f64,
}

/// A published finding beside ours.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// What is compared.
    pub claim: &'static str,
    /// What the paper found.
    pub published: &'static str,
    /// The paper's figure, where it gives one (a share).
    pub published_figure: Option<f64>,
    /// What we measured.
    pub ours: String,
    /// Ours as a figure comparable with the paper's.
    pub ours_figure: Option<f64>,
}

/// The unit cost by default, seconds of computation per file.
pub const UNIT_COST: f64 = 10.0;
/// Files a second a site fetches (25 MB files at about 4 MB/s).
pub const FILES_PER_S: f64 = 0.16;

fn params(s: &Setup, point: Point, scheduler: Scheduler, seed: u64) -> GridParams {
    let (mut capacity, mut workers, mut unit) = (6000, 1, UNIT_COST);
    match point {
        Point::Capacity(c) => capacity = c,
        Point::WorkersPerSite(w) => workers = w,
        Point::UnitCost(u) => unit = u,
    }
    GridParams {
        sites: 10,
        workers_per_site: workers,
        capacity: ((capacity as f64 * s.scale).round() as usize).max(101),
        files_per_s: FILES_PER_S,
        unit_cost: unit,
        tasks: Workload::coadd(s.scale).generate(seed),
        scheduler,
        seed,
    }
}

/// Runs every point, advancing `progress` by one a run.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>, ExperimentError> {
    if s.runs == 0 || s.points.is_empty() || s.schedulers.is_empty() || !(s.scale > 0.0 && s.scale <= 1.0) {
        return Err(ExperimentError::Input(
            "nothing to run: give points, schedulers, at least one run, and a scale in (0, 1]".into(),
        ));
    }
    progress.stage("ko-worker-centric runs", (s.points.len() * s.schedulers.len()) as u64 * s.runs);
    let simulate = |p: usize, k: usize, r: u64| Grid::simulate(&params(s, s.points[p], s.schedulers[k], s.seed + r));
    let outcomes: Vec<GridOutcome> =
        crate::sweep::sweep(s.points.len(), s.schedulers.len(), s.runs, s.threads, &simulate, &|_| {
            progress.advance(1)
        })?;
    let n = s.runs as f64;
    let mut rows = Vec::new();
    for (p, point) in s.points.iter().enumerate() {
        for (k, scheduler) in s.schedulers.iter().enumerate() {
            let at = (p * s.schedulers.len() + k) * s.runs as usize;
            let os = &outcomes[at..at + s.runs as usize];
            let mean = |f: &dyn Fn(&GridOutcome) -> f64| os.iter().map(f).sum::<f64>() / n;
            rows.push(Row {
                point: *point,
                scheduler: scheduler.name(),
                makespan: mean(&|o| o.makespan),
                transfers: mean(&|o| o.transfers as f64),
                utilisation: mean(&|o| o.utilisation),
                replicas: mean(&|o| o.replicas as f64),
            });
        }
    }
    Ok(rows)
}

/// The paper's findings (notes 004a §7(d)) beside what `rows` show.
pub fn claims(rows: &[Row]) -> Vec<Claim> {
    let mut claims = Vec::new();
    let family = |name: &str| -> Vec<Point> {
        let mut ps: Vec<Point> = rows.iter().filter(|r| r.point.axis().0 == name).map(|r| r.point).collect();
        ps.dedup();
        ps
    };
    let best_at = |p: Point| {
        rows.iter()
            .filter(|r| r.point == p)
            .min_by(|a, b| a.makespan.total_cmp(&b.makespan))
            .map(|r| r.scheduler.clone())
            .unwrap_or_default()
    };
    let at = |p: Point, name: &str| rows.iter().find(|r| r.point == p && r.scheduler == name);
    let caps = family("capacity");
    if !caps.is_empty() {
        claims.push(Claim {
            claim: "the fastest scheduler by store capacity (Fig. 3)",
            published: "rest.2 and combined.2 best at every capacity",
            published_figure: None,
            ours: format!(
                "fastest: {}",
                caps.iter().map(|p| format!("{:.0} files: {}", p.axis().1, best_at(*p))).collect::<Vec<_>>().join("; ")
            ),
            ours_figure: None,
        });
        let worst: Vec<String> = caps
            .iter()
            .map(|p| {
                let w = rows
                    .iter()
                    .filter(|r| r.point == *p && r.scheduler != "fifo")
                    .max_by(|a, b| a.makespan.total_cmp(&b.makespan))
                    .map(|r| r.scheduler.clone())
                    .unwrap_or_default();
                format!("{:.0}: {w}", p.axis().1)
            })
            .collect();
        claims.push(Claim {
            claim: "storage affinity against the worker-centric metrics by capacity (Fig. 3)",
            published: "storage affinity worst at small capacity, comparable at large",
            published_figure: None,
            ours: format!("slowest with locality, by capacity: {}", worst.join("; ")),
            ours_figure: None,
        });
    }
    let gains: Vec<f64> = rows
        .iter()
        .filter(|r| r.scheduler == "rest")
        .filter_map(|r| at(r.point, "storage-affinity").map(|sa| 1.0 - r.makespan / sa.makespan))
        .collect();
    if let Some(best) = gains.iter().copied().reduce(f64::max) {
        claims.push(Claim {
            claim: "rest's makespan below storage affinity's, best case",
            published: "best case: rest's makespan 28% below storage affinity's",
            published_figure: Some(0.28),
            ours: format!("best case: rest {:.0}% below storage affinity", best * 100.0),
            ours_figure: Some(best),
        });
    }
    if let Some(r) = at(Point::Capacity(6000), "combined.2").or_else(|| at(Point::WorkersPerSite(1), "combined.2")) {
        claims.push(Claim {
            claim: "utilisation at the defaults",
            published: "with the defaults, utilisation above 90%",
            published_figure: Some(0.9),
            ours: format!("combined.2 at the defaults: {:.0}%", r.utilisation * 100.0),
            ours_figure: Some(r.utilisation),
        });
    }
    let workers = family("workers-per-site");
    if !workers.is_empty() {
        claims.push(Claim {
            claim: "the fastest scheduler by workers per site (Fig. 4)",
            published: "worker-centric wins with few workers per site, storage affinity with many; makespan not monotonic in workers",
            published_figure: None,
            ours: format!(
                "fastest: {}",
                workers.iter().map(|p| format!("{:.0} a site: {}", p.axis().1, best_at(*p))).collect::<Vec<_>>().join("; ")
            ),
            ours_figure: None,
        });
    }
    claims
}

/// Why our figures can differ from the paper's.
pub const WHY: &str = "why they can differ: the paper simulated Coadd's real file lists on SimGrid with Tiers topologies \
(bandwidths varying by site, worker speeds from the Top500, background load); here a task reads a window of a strip of \
files, every site has the same bandwidth and every worker the same speed, with no background load, at a tenth of the \
size by default. The store's eviction (LRU) and the unit cost are our choices; the paper's storage affinity decided ahead \
of time, ours on demand, so its premature decisions, which the paper blames for its losses at small capacity, are not \
modelled.";

/// A sweep's table: its x, then a row per scheduler.
macro_rules! sweep_table {
    ($name:literal, $title:literal, $x:expr) => {
        TableSpec::new(
            $name,
            $title,
            &[
                $x,
                ColumnSpec::text("scheduler"),
                ColumnSpec::num("makespan", 2).unit("h").about("until the last task finished, mean over the runs"),
                ColumnSpec::num("transfers", 0).about("files fetched from the file server"),
                ColumnSpec::num("utilisation", 0)
                    .percent()
                    .header("util")
                    .about("computation over the run, per worker"),
                ColumnSpec::num("replicas", 0).about("replicas started (storage affinity)"),
            ],
        )
    };
}

/// The capacity sweep (Fig. 3). A sweep's table is empty when the run has no points of it.
pub const CAPACITY: TableSpec = sweep_table!(
    "capacity",
    "By data-server capacity, in the paper's files (Fig. 3)",
    ColumnSpec::int("files").about("a data server's capacity in the paper's files, before the scale")
);
/// The workers-per-site sweep (Fig. 4).
pub const WORKERS: TableSpec = sweep_table!(
    "workers_per_site",
    "By workers per site (Fig. 4)",
    ColumnSpec::int("workers").about("workers at each of the 10 sites")
);
/// The unit-cost sweep (Fig. 5).
pub const UNIT: TableSpec = sweep_table!(
    "unit_cost",
    "By computation per file (Fig. 5)",
    ColumnSpec::num("unit_cost", 1).header("cost").unit("s/file").about("seconds of computation per file")
);

/// What `reproduce ko-worker-centric` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "ko-worker-centric",
    title: "Worker-centric scheduling (Ko et al., Middleware 2007) in the simulator: makespan and transfers by store capacity, workers per site and computation cost, against storage affinity, delay scheduling and FIFO",
    tables: &[&CAPACITY, &WORKERS, &UNIT],
};

/// The run's rows as a report: a table and a chart of makespan per sweep, and the paper's
/// findings beside ours.
pub fn report(setup: &Setup, rows: &[Row]) -> Report {
    let mut r = Report::new(&SPEC);
    r.param("runs", setup.runs, "runs a point and scheduler, seeds seed, seed + 1, …")
        .param("seed", setup.seed, "the first seed")
        .param("scale", setup.scale, "the workload's and the stores' size against the paper's")
        .param("tasks", (6000.0 * setup.scale).round(), "Coadd-like tasks in the bag")
        .note(format!(
            "10 sites, stores of 6,000 files × {}, {FILES_PER_S} files/s a site, {UNIT_COST} s of computation a file unless swept.",
            setup.scale
        ))
        .note(WHY);
    let sweeps: [(&TableSpec, &str, &str); 3] = [
        (&CAPACITY, "capacity", "store capacity (the paper's files)"),
        (&WORKERS, "workers-per-site", "workers per site"),
        (&UNIT, "unit-cost", "computation (s per file)"),
    ];
    for (spec, family, axis) in sweeps {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.point.axis().0 == family).collect();
        let x = spec.columns[0].name;
        let mut t = Table::new(spec).grouped_by(x);
        for row in mine {
            let at = match row.point {
                Point::Capacity(c) => c.into(),
                Point::WorkersPerSite(w) => w.into(),
                Point::UnitCost(u) => u.into(),
            };
            t.push(vec![
                at,
                row.scheduler.as_str().into(),
                (row.makespan / 3600.0).into(),
                row.transfers.into(),
                row.utilisation.into(),
                row.replicas.into(),
            ]);
        }
        r.tables.push(t);
        r.charts.push(
            Chart::new(
                &format!("ko-worker-centric-{family}"),
                &format!("Makespan by {axis}"),
                spec.name,
                x,
                &["makespan"],
            )
            .by("scheduler")
            .labels(axis, "makespan (h)"),
        );
    }
    r.claims = claims(rows)
        .into_iter()
        .map(|c| report::Claim {
            claim: c.claim.into(),
            source: "Ko, Morales and Gupta, Middleware 2007; notes 004a §7(d)".into(),
            published: c.published_figure,
            published_text: c.published.into(),
            ours: c.ours_figure,
            difference: c.ours_figure.zip(c.published_figure).map(|(o, p)| o / p - 1.0),
            ours_text: c.ours,
            why: String::new(),
        })
        .collect();
    r
}
