//! `reproduce dou-cacheflow`: Cacheflow's hit rates (Dou 2011 ch. 4) in the simulator, beside
//! the thesis's model and its PlanetLab sample run; and the same experiment on real cooperating
//! gateways (HTTP on loopback, in this process).

use std::time::{Duration, Instant};

use rand::SeedableRng;
use switchyard_core::cache::HitModel;
use switchyard_gateway::coop::{ClusterConfig, SetOutcome, run_cluster};
use switchyard_sim::models::cacheflow::{CacheflowOutcome, CacheflowParams, simulate};

use crate::ExperimentError;
use crate::report::{self as rep, ColumnSpec, Progress, Report, ReportSpec, TableSpec};

/// The simulated experiment's setup.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Every case's parameters start from these (the thesis's, by default); each case changes
    /// cooperation, memory, link buffer or de-duplication.
    pub base: CacheflowParams,
    /// Threads the independent runs are spread over.
    pub threads: usize,
}

impl Setup {
    /// The thesis's setup (Table 4.2) with the root `seed`.
    pub fn thesis(seed: u64, threads: usize) -> Self {
        Self { base: CacheflowParams { seed, ..CacheflowParams::default() }, threads }
    }
}

/// One simulated case, ours beside what was published.
#[derive(Clone, Debug)]
pub struct Case {
    /// What the case is.
    pub name: &'static str,
    /// Its parameters.
    pub params: CacheflowParams,
    /// What the simulator measured.
    pub outcome: CacheflowOutcome,
    /// The thesis's model of a lone cache's hit rate (Eqs 4.2–4.4), for lone cases.
    pub model: Option<f64>,
    /// The published figure the case answers, if any.
    pub published: Option<&'static str>,
}

impl Case {
    /// Per request of 100 objects: `n` summed over the run.
    pub fn per_request(&self, n: u64) -> f64 {
        n as f64 / self.outcome.requests.max(1) as f64
    }
}

/// Why our figures differ from the published ones.
pub const WHY: &[&str] = &[
    "lone caches beat the model at 2× and 3×: clients also choose sets 80/20 (Table 4.2), so whole sets recur, which \
     the model (per-object popularity only, Eqs 4.2–4.4) does not see; at 1× the cache is too small for it to matter",
    "the cooperative rate is to be read against the lone rates of the same simulator: it falls between 2× and 3× as \
     the thesis found",
    "de-duplication has little to do while views are current: a server loads only what no neighbour's view shows, so \
     copies arise only from stale views (L = 600) or between a server's two neighbours, which do not see each other",
];

/// What the thesis published for a case, by its parameters.
fn published(p: &CacheflowParams) -> Option<&'static str> {
    match (p.cooperate, p.cache, p.link_buffer, p.dedup) {
        (false, 600, _, _) => Some("35.4% (model)"),
        (false, 1200, _, _) => Some("59.1% (model)"),
        (false, 1800, _, _) => Some("72.3% (model)"),
        (true, _, 600, true) => Some("≈72% (33+39)"),
        (true, _, _, true) => Some("2–3× memory"),
        _ => None,
    }
}

/// Runs the simulated cases: lone caches of 1×, 2× and 3× the memory, Cacheflow with current
/// views (L = 0), with the sample run's link buffer (L = 600), and without de-duplication.
/// `progress` gets a step per case.
pub fn simulated(setup: &Setup, progress: &dyn Progress) -> Result<Vec<Case>, ExperimentError> {
    let base = &setup.base;
    let one = base.cache;
    let cases: Vec<(&'static str, CacheflowParams)> = vec![
        ("alone, 1× memory (600 objects)", CacheflowParams { cooperate: false, ..base.clone() }),
        ("alone, 2× memory", CacheflowParams { cooperate: false, cache: 2 * one, ..base.clone() }),
        ("alone, 3× memory", CacheflowParams { cooperate: false, cache: 3 * one, ..base.clone() }),
        ("Cacheflow, 1×, L = 0", base.clone()),
        ("Cacheflow, 1×, L = 600 (the sample run)", CacheflowParams { link_buffer: 600, ..base.clone() }),
        (
            "Cacheflow, 1×, L = 600, no de-duplication",
            CacheflowParams { dedup: false, link_buffer: 600, ..base.clone() },
        ),
    ];
    // Independent runs: spread over the threads, each deterministic, so the result does not
    // depend on how many.
    progress.stage("simulated cases", cases.len() as u64);
    let outcomes = crate::sweep::sweep(1, cases.len(), 1, setup.threads, &|_, v, _| simulate(&cases[v].1), &|_| {
        progress.advance(1)
    })?;
    let model = |cache: usize| HitModel { cache: cache as f64, ..HitModel::CACHEFLOW }.hit_rate(base.files);
    Ok(cases
        .into_iter()
        .zip(outcomes)
        .map(|((name, params), outcome)| Case {
            name,
            model: (!params.cooperate).then(|| model(params.cache)),
            published: published(&params),
            outcome,
            params,
        })
        .collect())
}

/// The experiment on real gateways: its setup.
#[derive(Clone, Copy, Debug)]
pub struct RealSetup {
    /// Root seed of the sets and the clients' choices.
    pub seed: u64,
    /// Each object's size in KB (the thesis: 50).
    pub object_kb: usize,
    /// Requests each client makes, a fifth of them warm-up not counted.
    pub requests: usize,
}

impl RealSetup {
    /// Refuses a setup that would measure nothing.
    pub fn check(&self) -> Result<(), ExperimentError> {
        if self.requests == 0 || self.object_kb == 0 {
            return Err(ExperimentError::Input(format!(
                "{} requests a client of {} KB objects: both must be at least 1",
                self.requests, self.object_kb
            )));
        }
        Ok(())
    }
}

/// One case on real gateways.
#[derive(Clone, Debug)]
pub struct RealCase {
    /// What the case is.
    pub name: &'static str,
    /// The published figure it answers.
    pub published: &'static str,
    /// What the clients got, summed.
    pub outcome: SetOutcome,
    /// How long the case ran.
    pub elapsed: Duration,
}

impl RealCase {
    /// Per request of 100 objects: `n` summed over the run.
    pub fn per_request(&self, n: u64) -> f64 {
        n as f64 / (self.outcome.asked / 100).max(1) as f64
    }
}

/// Runs 6 cooperating gateways (or lone ones), an origin of 5,000 objects and 18 clients, all
/// on loopback in this process, on a runtime of its own. `progress` gets a step per case.
pub fn on_gateways(setup: &RealSetup, progress: &dyn Progress) -> Result<Vec<RealCase>, ExperimentError> {
    setup.check()?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(setup.seed);
    let sets = switchyard_models::cacheflow::make_sets(5000, 1000, 100, &mut rng);
    let base = ClusterConfig {
        servers: 6,
        clients_per_server: 3,
        cooperate: true,
        capacity: 600,
        dedup: true,
        link_buffer: 0,
        object_size: setup.object_kb * 1024,
        files: 5000,
        sets,
        requests: setup.requests,
        warmup: setup.requests / 5,
        period: Duration::from_millis(10),
        seed: setup.seed,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let cases = [
        ("alone, 1× memory", ClusterConfig { cooperate: false, ..base.clone() }, "35.4% (model)"),
        ("alone, 2× memory", ClusterConfig { cooperate: false, capacity: 1200, ..base.clone() }, "59.1% (model)"),
        ("alone, 3× memory", ClusterConfig { cooperate: false, capacity: 1800, ..base.clone() }, "72.3% (model)"),
        ("Cacheflow, 1×, L = 0", base.clone(), "≈72% (33+39)"),
    ];
    progress.stage("cases on real gateways", cases.len() as u64);
    cases
        .into_iter()
        .map(|(name, config, published)| {
            let started = Instant::now();
            let outcome =
                runtime.block_on(run_cluster(&config)).map_err(|e| ExperimentError::Real(format!("{name}: {e}")))?;
            progress.advance(1);
            Ok(RealCase { name, published, outcome, elapsed: started.elapsed() })
        })
        .collect()
}

/// The simulated cases, ours beside the model and the published figures.
pub const SIMULATED: TableSpec = TableSpec::new(
    "simulated",
    "In the simulator",
    &[
        ColumnSpec::text("case"),
        ColumnSpec::num("hit_rate", 1)
            .percent()
            .header("hit rate")
            .about("objects from any cache over objects asked for"),
        ColumnSpec::num("model", 1).percent().about("the thesis's model of a lone cache's hit rate (Eqs 4.2–4.4)"),
        ColumnSpec::text("published").about("the published figure the case answers"),
        ColumnSpec::num("local", 1).header("local/req").about("objects from the local cache per request of 100"),
        ColumnSpec::num("remote", 1).header("remote/req").about("objects from a neighbour's cache per request of 100"),
        ColumnSpec::num("delivered", 1).percent().about("objects delivered over objects asked for"),
        ColumnSpec::num("duplicates", 2).about("objects delivered more than once, per request of 100"),
    ],
);

/// The cases on real gateways (with `--real`).
pub const REAL: TableSpec = TableSpec::new(
    "real",
    "On real gateways (HTTP on loopback, this process)",
    &[
        ColumnSpec::text("case"),
        ColumnSpec::num("hit_rate", 1)
            .percent()
            .header("hit rate")
            .about("objects from any cache over objects asked for"),
        ColumnSpec::text("published").about("the published figure the case answers"),
        ColumnSpec::num("local", 1).header("local/req").about("objects from the local cache per request of 100"),
        ColumnSpec::num("remote", 1).header("remote/req").about("objects from a neighbour's cache per request of 100"),
        ColumnSpec::num("delivered", 1).percent().about("objects delivered over objects asked for"),
        ColumnSpec::num("duplicates", 2).about("objects delivered more than once, per request of 100"),
        ColumnSpec::num("time", 1).unit("s").about("how long the case ran"),
    ],
)
.optional();

/// What `reproduce dou-cacheflow` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "dou-cacheflow",
    title: "Cacheflow (Dou 2011 ch. 4): the cooperative hit rate against lone caches of 1–3× the memory and the thesis's model, in the simulator and on real gateways",
    tables: &[&SIMULATED, &REAL],
};

/// The cases run, as a report: the simulated cases, the real ones when they ran, the thesis's
/// sample run and claim beside ours, and why ours differ.
pub fn report(setup: &Setup, cases: &[Case], real: Option<(&RealSetup, &[RealCase])>) -> Report {
    let b = &setup.base;
    let mut r = Report::new(&SPEC);
    r.param("seed", b.seed, "the root seed")
        .param("servers", b.servers, "servers, each with two neighbours when cooperating")
        .param("clients_per_server", b.clients_per_server, "clients of each server")
        .param("files", b.files, "objects in all (50 KB each in the thesis)")
        .param("cache", b.cache, "objects a server's cache holds at 1× memory")
        .param("sets", b.sets, "sets a client picks from, 80/20")
        .param("set_size", b.set_size, "objects a set (a request) asks for")
        .param("period", b.period_s, "seconds between a client's requests")
        .param("run", b.run_s, "seconds simulated")
        .param("warmup", b.warmup_s, "seconds before measuring");
    let mut t = rep::Table::new(&SIMULATED);
    for c in cases {
        let total = &c.outcome.total;
        t.push(vec![
            c.name.into(),
            c.outcome.hit_rate().into(),
            c.model.into(),
            c.published.into(),
            c.per_request(total.local_hits).into(),
            c.per_request(total.remote_hits).into(),
            c.outcome.delivered().into(),
            c.per_request(total.duplicates).into(),
        ]);
    }
    r.tables.push(t);
    r.claims = claims(cases);
    if let Some((s, real)) = real {
        r.param("real_object_kb", s.object_kb, "on real gateways: each object's size in KB").param(
            "real_requests",
            s.requests,
            "on real gateways: requests each client makes, a fifth of them warm-up",
        );
        let mut t = rep::Table::new(&REAL);
        for c in real {
            let o = &c.outcome;
            t.push(vec![
                c.name.into(),
                o.hit_rate().into(),
                c.published.into(),
                c.per_request(o.local_hits).into(),
                c.per_request(o.remote_hits).into(),
                (1.0 - o.mispredicted as f64 / o.asked.max(1) as f64).into(),
                c.per_request(o.duplicates).into(),
                c.elapsed.as_secs_f64().into(),
            ]);
        }
        t.note(format!(
            "6 gateways, an origin of 5,000 objects of {} KB, 18 clients making {} requests each ({} not counted), 10 ms apart",
            s.object_kb,
            s.requests,
            s.requests / 5
        ));
        r.tables.push(t);
    }
    r.note("why ours differ:");
    for why in WHY {
        r.note(format!("- {why}"));
    }
    r
}

/// The thesis's sample run (Tables 4.4–4.6, L = 600) and its claim about cooperation, beside
/// ours.
fn claims(cases: &[Case]) -> Vec<rep::Claim> {
    const SAMPLE: &str = "Dou 2011, Tables 4.4–4.6: the sample run on PlanetLab";
    let claim = |claim: &str,
                 source: &str,
                 published: Option<f64>,
                 published_text: &str,
                 ours: Option<f64>,
                 ours_text: String| {
        rep::Claim {
            claim: claim.into(),
            source: source.into(),
            published,
            published_text: published_text.into(),
            ours,
            ours_text,
            difference: ours.zip(published).map(|(o, p)| o / p - 1.0).filter(|d| d.is_finite()),
            why: String::new(),
        }
    };
    let mut out = Vec::new();
    if let Some(s) = cases.iter().find(|c| c.params.cooperate && c.params.dedup && c.params.link_buffer == 600) {
        let total = &s.outcome.total;
        for (what, published, text, n) in [
            ("local hits per request of 100", 33.5, "33–34", total.local_hits),
            ("remote hits per request of 100", 38.5, "38–39", total.remote_hits),
            ("disk loads per request of 100", 23.5, "23–24", total.loads),
        ] {
            let ours = s.per_request(n);
            out.push(claim(what, SAMPLE, Some(published), text, Some(ours), format!("{ours:.1}")));
        }
        let delivered = 100.0 * s.outcome.delivered();
        out.push(claim(
            "objects delivered per request of 100 (the rest mispredicted: a view said a neighbour held them)",
            SAMPLE,
            Some(97.0),
            "96.6–97.4",
            Some(delivered),
            format!("{delivered:.1}"),
        ));
    }
    let lone = |cache: usize| cases.iter().find(|c| !c.params.cooperate && c.params.cache == cache);
    let coop = cases.iter().find(|c| c.params.cooperate && c.params.dedup && c.params.link_buffer == 0);
    if let (Some(c), Some(two), Some(three)) =
        (coop, lone(2 * coop.map_or(0, |c| c.params.cache)), lone(3 * coop.map_or(0, |c| c.params.cache)))
    {
        let (rate, two, three) = (c.outcome.hit_rate(), two.outcome.hit_rate(), three.outcome.hit_rate());
        out.push(claim(
            "with 2 neighbours the hit rate equals a lone cache's with 2–3× the memory",
            "Dou 2011 §4",
            None,
            "2–3× memory (the model's 59.1–72.3%)",
            Some(rate),
            format!(
                "{:.1}%, {} the simulator's lone 2× ({:.1}%) and 3× ({:.1}%)",
                rate * 100.0,
                if two <= rate && rate <= three { "between" } else { "not between" },
                two * 100.0,
                three * 100.0
            ),
        ));
    }
    out
}
