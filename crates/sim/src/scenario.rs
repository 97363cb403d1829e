//! Scenarios: what to simulate, as a TOML file, and the sweep of runs it expands to.
//!
//! ```toml
//! name = "heavy-tailed flows on the 8-core Xeon"
//! title = "what the scenario shows, in a line"   # optional
//! seed = 1
//! policies = ["round-robin", "affinity", "hrw", "ahrw", "h-ahrw"]
//!
//! [machine]
//! topology = "xeon-e5335"      # any `--topology` spec
//! queue_capacity = 64          # units per worker, the one in service included
//! on_full = "block"            # or "drop"
//! decision_cost_ns = 500
//! # decision_costs = "costs.json"  # per policy, from `switchyard place --format json` (its
//! # decision_cost_scale = 1.0      # ns_per_decision, × the scale); replaces decision_cost_ns
//! packet_cost_ns = 0           # producer time per packet, queued or only marked
//! service_base_ns = 5000
//! service_per_kib_ns = 20000
//! migration_penalty_ns = 5000  # × (C[prev][this] − 1) when a flow moves
//! sibling_sharing = 0.0        # 0..1: how much leaves of one lowest-level node share it
//! # producer_core = "float"    # "own" (default), a worker number to share its core, or
//! #                            # "float": on an idle worker's core, sharing when all serve
//! # cache = "data-sheet"       # the cache model (models::cache), off when absent or "off";
//! #                            # or a table, every key optional:
//! # [machine.cache]
//! # hierarchy = "data-sheet"   # the topology's caches from its data sheets
//! # flow_state_bytes = 0       # each flow's own state, besides its unit's bytes
//! # shared_bytes = 0           # bytes every unit touches, one footprint for all flows
//! # size_kib = [32, 4096]      # override each level's size, nearest the core first
//! # miss_ns = [7.0, 120.0]     # override each level's miss penalty
//!
//! [workload]                   # or kind = "dpi" (add inspect_packets, match_fraction), or
//!                              # kind = "gop" (streams, gops, interval_s, bytes = [lo, hi],
//!                              # profiles = [work multipliers, one per stream in turn]), or
//!                              # kind = "trace" (file = "x.pcap" relative to this file,
//!                              # time_scale = 1.0, directed = false, and for DPI buffers
//!                              # inspect_packets = 8, match_fraction = 0.7)
//! kind = "synthetic"
//! flows = 20000
//! flow_rate = 60000.0          # flows per second
//! units_shape = 1.2            # Pareto shape of units per flow
//! units_max = 1000
//! unit_gap_s = 20e-6
//! sizes = [[64, 0.5], [576, 0.1], [1500, 0.4]]
//!
//! [place]                      # optional: the policies' knobs (see `switchyard place --help`)
//! qmin = "true"
//!
//! [sweep]                      # optional: each key is a dotted path, each value a list
//! "workload.flow_rate" = [20000.0, 40000.0, 60000.0]
//! seed = [1, 2, 3]
//! ```
//!
//! A sweep runs every combination of its lists (in the sorted order of the keys), times every
//! policy. Errors name the file, the key and what is wrong; unknown keys are errors, not ignored.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::Deserialize;
use switchyard_core::load::QueueMeasure;
use switchyard_core::place::{HashFn, ParentLoad, PsDispatch, QminReading};
use switchyard_core::{PlaceConfig, Policy, Topology, WorkerId};
use thiserror::Error;

use crate::Nanos;
use crate::models::cache::CacheHierarchy;
use crate::models::server::{self, CacheParams, OnFull, ProducerCore, Server, ServerOutcome, ServerParams};
use crate::models::trace::{Trace, TraceReplay};
use crate::models::workload::{DpiConnections, GopStreams, SyntheticFlows};

/// Why a scenario was refused.
#[derive(Debug, Error)]
#[error("{origin}: {message}")]
pub struct ScenarioError {
    /// The file (or other source) the scenario came from.
    pub origin: String,
    /// What is wrong, naming the key.
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default)]
    title: String,
    #[serde(default = "one")]
    seed: u64,
    policies: Vec<String>,
    machine: Machine,
    workload: Workload,
    #[serde(default)]
    place: Place,
    #[serde(default)]
    published: Vec<Published>,
}

/// A published figure a reproduction scenario is compared with.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// What is claimed, in a few words.
    pub claim: String,
    /// Where (paper, section, figure).
    pub source: String,
    /// The published figure (a ratio such as 1.51 for "+51%", or a value).
    pub value: f64,
    /// How to compute ours: `METRIC of POLICY@SWEPT`, or a ratio `… / …` of two such terms, where
    /// SWEPT is some of a run's swept values as printed (`machine.workers=7`, space-separated).
    /// A term is the mean over the runs that match: every run of the policy whose swept values
    /// include SWEPT's (all of them for `@*`, or with no `@`). A term may name several policies,
    /// `METRIC of P1+P2+P3@SWEPT`, for the mean over all of theirs.
    pub ours: String,
    /// Why ours differs, written after the run, never by tuning parameters to close the gap.
    #[serde(default)]
    pub explain: String,
}

/// A published figure beside ours.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The claim.
    pub published: Published,
    /// Our figure, or why it could not be computed.
    pub ours: Result<f64, String>,
}

impl Comparison {
    /// Ours over theirs, minus one (+0.10 is 10% above the published figure).
    pub fn difference(&self) -> Option<f64> {
        self.ours.as_ref().ok().map(|o| o / self.published.value - 1.0)
    }

    /// The difference as printed: relative (`+12.1%`), or absolute (`+0.019 absolute`) when the
    /// published figure is 0 and a ratio would say nothing.
    pub fn difference_text(&self) -> String {
        match (&self.ours, self.published.value) {
            (Err(_), _) => String::new(),
            (Ok(o), 0.0) => format!("{o:+.3} absolute"),
            (Ok(o), v) => format!("{:+.1}%", (o / v - 1.0) * 100.0),
        }
    }
}

fn one() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Machine {
    topology: String,
    workers: Option<u32>,
    #[serde(default = "default_capacity")]
    queue_capacity: usize,
    #[serde(default)]
    on_full: FullRule,
    #[serde(default = "default_decision")]
    decision_cost_ns: u64,
    decision_costs: Option<String>,
    #[serde(default = "default_cost_scale")]
    decision_cost_scale: f64,
    #[serde(default)]
    packet_cost_ns: u64,
    service_base_ns: u64,
    #[serde(default)]
    service_per_kib_ns: u64,
    #[serde(default)]
    migration_penalty_ns: u64,
    #[serde(default)]
    home_penalty_ns: u64,
    #[serde(default)]
    sibling_sharing: f64,
    producer_core: Option<ProducerCoreSpec>,
    cache: Option<toml::Value>,
}

/// `machine.cache` as a table (see the module documentation).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CacheTable {
    #[serde(default = "data_sheet")]
    hierarchy: String,
    #[serde(default)]
    flow_state_bytes: u64,
    #[serde(default)]
    shared_bytes: u64,
    size_kib: Option<Vec<u64>>,
    miss_ns: Option<Vec<f64>>,
}

fn data_sheet() -> String {
    "data-sheet".into()
}

/// The cache model `machine.cache` asks for on `topology`, or `None` when it is off.
fn cache_params(spec: Option<&toml::Value>, topology: &Topology) -> Result<Option<CacheParams>, String> {
    let table = match spec {
        None => return Ok(None),
        Some(toml::Value::String(s)) if s == "off" => return Ok(None),
        Some(toml::Value::String(s)) if s == "data-sheet" => {
            CacheTable { hierarchy: data_sheet(), flow_state_bytes: 0, shared_bytes: 0, size_kib: None, miss_ns: None }
        }
        Some(toml::Value::String(s)) => {
            return Err(format!("machine.cache = {s:?}: expected \"data-sheet\", \"off\" or a table"));
        }
        Some(v) => v.clone().try_into::<CacheTable>().map_err(|e| format!("machine.cache: {}", e.message()))?,
    };
    if table.hierarchy != "data-sheet" {
        return Err(format!("machine.cache.hierarchy = {:?}: expected \"data-sheet\"", table.hierarchy));
    }
    let mut hierarchy = CacheHierarchy::data_sheet(topology);
    let n = hierarchy.levels.len();
    if let Some(sizes) = &table.size_kib {
        if sizes.len() != n {
            return Err(format!("machine.cache.size_kib: {} sizes given for {n} cache levels", sizes.len()));
        }
        for (l, kib) in hierarchy.levels.iter_mut().zip(sizes) {
            l.size = kib.saturating_mul(1024);
        }
    }
    if let Some(miss) = &table.miss_ns {
        if miss.len() != n {
            return Err(format!("machine.cache.miss_ns: {} penalties given for {n} cache levels", miss.len()));
        }
        for (l, &ns) in hierarchy.levels.iter_mut().zip(miss) {
            l.miss_ns = ns;
        }
    }
    hierarchy.validate(topology.leaves()).map_err(|e| format!("machine.cache: {e}"))?;
    Ok(Some(CacheParams { hierarchy, flow_state_bytes: table.flow_state_bytes, shared_bytes: table.shared_bytes }))
}

/// `producer_core`: "own", "float", or the number of the worker whose core it shares.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ProducerCoreSpec {
    Worker(u32),
    Named(String),
}

fn default_capacity() -> usize {
    64
}

fn default_cost_scale() -> f64 {
    1.0
}

fn default_decision() -> u64 {
    500
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum FullRule {
    #[default]
    Block,
    Drop,
}

// The flow fields are spelled out in each kind rather than shared through `#[serde(flatten)]`,
// because serde does not support `deny_unknown_fields` together with `flatten`, and unknown keys
// must stay errors.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
enum Workload {
    Synthetic {
        flows: u32,
        flow_rate: f64,
        #[serde(default = "default_shape")]
        units_shape: f64,
        #[serde(default = "default_units_max")]
        units_max: u64,
        unit_gap_s: f64,
        sizes: Vec<(u64, f64)>,
    },
    Dpi {
        flows: u32,
        flow_rate: f64,
        #[serde(default = "default_shape")]
        units_shape: f64,
        #[serde(default = "default_units_max")]
        units_max: u64,
        unit_gap_s: f64,
        sizes: Vec<(u64, f64)>,
        #[serde(default = "default_inspect")]
        inspect_packets: u64,
        match_fraction: f64,
    },
    Trace {
        file: String,
        #[serde(default = "default_time_scale")]
        time_scale: f64,
        #[serde(default)]
        directed: bool,
        inspect_packets: Option<u64>,
        #[serde(default = "default_match_fraction")]
        match_fraction: f64,
    },
    Gop {
        streams: u32,
        gops: u64,
        interval_s: f64,
        bytes: (u64, u64),
        #[serde(default = "default_profiles")]
        profiles: Vec<f64>,
    },
}

fn default_time_scale() -> f64 {
    1.0
}

fn default_match_fraction() -> f64 {
    0.7
}

fn default_profiles() -> Vec<f64> {
    vec![1.0]
}

fn default_inspect() -> u64 {
    8
}

fn default_shape() -> f64 {
    1.2
}

fn default_units_max() -> u64 {
    1000
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
struct Place {
    queue: Option<String>,
    hash: Option<String>,
    qmin: Option<String>,
    parent_load: Option<String>,
    ca_min: Option<String>,
    ps_dispatch: Option<String>,
    epsilon: Option<f64>,
    vnodes: Option<u32>,
    maglev_table: Option<u32>,
    beta: Option<f64>,
}

/// One run of a sweep: a policy on one combination of the swept values.
#[derive(Clone, Debug)]
pub struct Case {
    /// Position in the sweep (output order).
    pub index: usize,
    /// The swept values of this combination, by key (empty without a sweep).
    pub swept: Vec<(String, String)>,
    /// What to run.
    pub params: ServerParams,
}

/// A loaded scenario: its name and the cases it expands to.
#[derive(Debug)]
pub struct Scenario {
    /// The scenario's name.
    pub name: String,
    /// What it shows, in a line (optional).
    pub title: String,
    /// Published figures to compare with (reproduction scenarios).
    pub published: Vec<Published>,
    /// The names of the swept keys, in case order.
    pub swept_keys: Vec<String>,
    /// Every run, in output order.
    pub cases: Vec<Case>,
}

impl Scenario {
    /// Parses a scenario; `origin` names it in errors (a file path). `seed`, if given, replaces
    /// the file's root seed (a swept `seed` still wins).
    pub fn parse(text: &str, origin: &str, seed: Option<u64>) -> Result<Self, ScenarioError> {
        let err = |message: String| ScenarioError { origin: origin.to_string(), message };
        let mut table: toml::Table = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        let sweep = match table.remove("sweep") {
            None => toml::Table::new(),
            Some(toml::Value::Table(t)) => t,
            Some(_) => return Err(err("[sweep] must be a table of `\"dotted.key\" = [values]`".into())),
        };
        if let Some(s) = seed {
            table.insert("seed".into(), toml::Value::Integer(s as i64));
        }
        let mut axes: Vec<(String, Vec<toml::Value>)> = Vec::new();
        for (key, values) in sweep {
            match values {
                toml::Value::Array(v) if !v.is_empty() => axes.push((key, v)),
                _ => return Err(err(format!("sweep key `{key}` needs a non-empty list of values"))),
            }
        }
        // Every combination of the axes, the last axis varying fastest.
        let mut combos: Vec<Vec<usize>> = vec![Vec::new()];
        for (_, values) in &axes {
            combos = combos
                .into_iter()
                .flat_map(|c| (0..values.len()).map(move |i| [c.clone(), vec![i]].concat()))
                .collect();
        }
        let mut cases = Vec::new();
        let mut traces = BTreeMap::new();
        let mut name = String::new();
        let mut title = String::new();
        let mut published = Vec::new();
        for combo in combos {
            let mut t = table.clone();
            let mut swept = Vec::new();
            for ((key, values), &i) in axes.iter().zip(&combo) {
                set_path(&mut t, key, values[i].clone()).map_err(|m| err(format!("sweep key `{key}`: {m}")))?;
                swept.push((key.clone(), values[i].to_string()));
            }
            let where_ = if swept.is_empty() {
                String::new()
            } else {
                format!(" (with {})", swept.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", "))
            };
            let file: File = toml::Value::Table(t)
                .try_into()
                .map_err(|e: toml::de::Error| err(format!("{}{where_}", e.message())))?;
            name.clone_from(&file.name);
            title.clone_from(&file.title);
            published.clone_from(&file.published);
            for p in &file.policies {
                let policy: Policy = p.parse().map_err(|e| err(format!("policies: {e}")))?;
                let params = params(&file, policy, origin, &mut traces).map_err(|m| err(format!("{m}{where_}")))?;
                cases.push(Case { index: cases.len(), swept: swept.clone(), params });
            }
        }
        if cases.is_empty() {
            return Err(err("policies is empty: name at least one placement policy".into()));
        }
        Ok(Self { name, title, published, swept_keys: axes.into_iter().map(|(k, _)| k).collect(), cases })
    }

    /// Runs every case on up to `threads` threads, calling `done` after each. Results come back
    /// in case order whatever the number of threads, so the output is the same byte for byte.
    pub fn run(&self, threads: usize, done: &(dyn Fn() + Sync)) -> Result<Vec<ServerOutcome>, ScenarioError> {
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<Result<ServerOutcome, String>>>> = Mutex::new(vec![None; self.cases.len()]);
        std::thread::scope(|s| {
            for _ in 0..threads.clamp(1, self.cases.len().max(1)) {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(case) = self.cases.get(i) else { break };
                        let r = Server::simulate(&case.params).map_err(|e| e.to_string());
                        results.lock().expect("no thread panics holding the lock")[i] = Some(r);
                        done();
                    }
                });
            }
        });
        let results = results.into_inner().expect("no thread panics holding the lock");
        results
            .into_iter()
            .zip(&self.cases)
            .map(|(r, c)| {
                r.expect("every case ran").map_err(|m| ScenarioError {
                    origin: self.name.clone(),
                    message: format!("case {} ({}): {m}", c.index, c.params.policy),
                })
            })
            .collect()
    }
}

impl Scenario {
    /// Our figure for each published claim, from the outcomes of [`Scenario::run`].
    pub fn compare(&self, outcomes: &[ServerOutcome]) -> Vec<Comparison> {
        self.published
            .iter()
            .map(|p| Comparison { published: p.clone(), ours: self.evaluate(&p.ours, outcomes) })
            .collect()
    }

    fn evaluate(&self, expr: &str, outcomes: &[ServerOutcome]) -> Result<f64, String> {
        match expr.split_once('/') {
            Some((a, b)) => Ok(self.term(a.trim(), outcomes)? / self.term(b.trim(), outcomes)?),
            None => self.term(expr.trim(), outcomes),
        }
    }
    /// `METRIC of POLICY@SWEPT`, or `METRIC of P1+P2+…@SWEPT` for the mean over policies. The
    /// mean is also over every case whose swept values include all of SWEPT's `key=value` pairs,
    /// so naming some axes averages over the rest; `@*` (or nothing) takes every case.
    fn term(&self, t: &str, outcomes: &[ServerOutcome]) -> Result<f64, String> {
        let (metric, run) = t.split_once(" of ").ok_or_else(|| format!("`{t}`: expected `METRIC of POLICY@SWEPT`"))?;
        let (policies, swept) = run.split_once('@').unwrap_or((run, "*"));
        let names: Vec<&str> = policies.split('+').map(str::trim).collect();
        let (mut sum, mut n) = (0.0, 0);
        for policy in &names {
            let cases: Vec<&Case> = self
                .cases
                .iter()
                .filter(|c| {
                    let have: Vec<String> = c.swept.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    c.params.policy.name() == *policy
                        && (swept == "*" || swept.split_whitespace().all(|want| have.iter().any(|h| h == want)))
                })
                .collect();
            if cases.is_empty() {
                return Err(format!("`{t}`: no run of {policy} with `{swept}`"));
            }
            for case in cases {
                sum += metric_of(&outcomes[case.index], metric)
                    .ok_or_else(|| format!("`{t}`: unknown metric `{metric}` (known: {METRICS})"))?;
                n += 1;
            }
        }
        Ok(sum / f64::from(n))
    }
}

/// The metrics a comparison may name.
pub const METRICS: &str = "offered_gbps, units_per_s, utilisation_mean, utilisation_spread, node_utilisation_spread, \
                           busy_max_over_mean, busy_cov, migrations, out_of_order, latency_p50_us, latency_p99_us, scanned_bytes, \
                           flow_share_cov, flow_rate_jain, cache_share, l1_misses_per_unit, l2_misses_per_unit, \
                           l3_misses_per_unit";

/// A named metric of one run.
pub fn metric_of(o: &ServerOutcome, name: &str) -> Option<f64> {
    let util = &o.utilisation;
    Some(match name {
        "offered_gbps" => o.offered_gbps,
        "units_per_s" => o.units_per_s,
        "utilisation_mean" => util.iter().sum::<f64>() / util.len().max(1) as f64,
        "utilisation_spread" => spread(util),
        "node_utilisation_spread" => spread(&o.node_utilisation),
        "busy_max_over_mean" => o.balance.max_over_mean,
        "busy_cov" => o.balance.cov,
        "migrations" => o.migrations as f64,
        "out_of_order" => o.out_of_order as f64,
        "latency_p50_us" => o.latency.quantile(0.5) as f64 / 1e3,
        "latency_p99_us" => o.latency.quantile(0.99) as f64 / 1e3,
        "scanned_bytes" => o.scanned_bytes as f64,
        "flow_share_cov" => o.flow_shares.cov,
        "flow_rate_jain" => o.flow_rate_jain,
        "cache_share" => o.cache_ns as f64 / (util.iter().sum::<f64>() * o.makespan.0 as f64).max(1.0),
        // Lines missed at cache level k per unit served: with the same units and footprints under
        // every policy, a ratio of these is a ratio of miss rates (Guo §6.5's L2 comparison).
        "l1_misses_per_unit" | "l2_misses_per_unit" | "l3_misses_per_unit" => {
            let k = usize::from(name.as_bytes()[1] - b'1');
            *o.cache_misses.get(k)? as f64 / o.served.max(1) as f64
        }
        _ => return None,
    })
}

/// `policy`'s decision cost from a `switchyard place --format json` file (the core's placement
/// timings on the machine that ran it), times `scale` for a slower or faster machine.
fn measured_cost(origin: &str, file: &str, policy: Policy, scale: f64) -> Result<Nanos, String> {
    #[derive(Deserialize)]
    struct Row {
        policy: String,
        ns_per_decision: f64,
    }
    if !(scale.is_finite() && scale > 0.0) {
        return Err(format!("machine.decision_cost_scale = {scale}: expected a positive factor"));
    }
    let path = Path::new(origin).parent().unwrap_or(Path::new("")).join(file);
    let shown = path.display();
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("machine.decision_costs: cannot read `{shown}`: {e}"))?;
    let rows: Vec<Row> = serde_json::from_str(&text).map_err(|e| {
        format!("machine.decision_costs: `{shown}` is not the JSON of `switchyard place --format json`: {e}")
    })?;
    let row = rows.iter().find(|r| r.policy == policy.name()).ok_or_else(|| {
        format!("machine.decision_costs: `{shown}` has no timing for {policy}; run `switchyard place --policy all --format json`")
    })?;
    Ok(Nanos((row.ns_per_decision * scale).round() as u64))
}

/// Largest minus smallest (0 for none).
pub(crate) fn spread(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.iter().copied().fold(f64::MIN, f64::max) - v.iter().copied().fold(f64::MAX, f64::min)
}

/// Sets `t[a][b]… = v` for the dotted key `a.b…`, creating tables on the way.
fn set_path(t: &mut toml::Table, key: &str, v: toml::Value) -> Result<(), String> {
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().filter(|l| !l.is_empty()).ok_or("empty key")?;
    let mut cur = t;
    for p in parts {
        let entry = cur.entry(p.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        cur = entry.as_table_mut().ok_or_else(|| format!("`{p}` is not a table"))?;
    }
    cur.insert(last.to_string(), v);
    Ok(())
}

fn choice<T: Copy>(key: &str, value: &Option<String>, options: &[(&str, T)], default: T) -> Result<T, String> {
    match value {
        None => Ok(default),
        Some(v) => options.iter().find(|(n, _)| n == v).map(|(_, t)| *t).ok_or_else(|| {
            format!(
                "place.{key} = {v:?}: expected one of {}",
                options.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            )
        }),
    }
}

/// The run parameters of `policy` under `f`. A trace file is read once per path and shared;
/// a relative path is taken from the scenario file's folder (`origin`).
fn params(
    f: &File,
    policy: Policy,
    origin: &str,
    traces: &mut BTreeMap<PathBuf, Arc<Trace>>,
) -> Result<ServerParams, String> {
    let topology = Topology::parse(&f.machine.topology).map_err(|e| format!("machine.topology: {e}"))?;
    let p = &f.place;
    let d = PlaceConfig::default();
    let place = PlaceConfig {
        measure: choice(
            "queue",
            &p.queue,
            &[("units", QueueMeasure::Units), ("bytes", QueueMeasure::Bytes)],
            d.measure,
        )?,
        hash: choice("hash", &p.hash, &[("fast", HashFn::Fast), ("classic", HashFn::Classic)], d.hash)?,
        qmin: choice("qmin", &p.qmin, &[("true", QminReading::TrueMin), ("nonzero", QminReading::NonZeroMin)], d.qmin)?,
        parent_load: choice(
            "parent_load",
            &p.parent_load,
            &[("eq67", ParentLoad::AnyIdleIsZero), ("sum", ParentLoad::Sum)],
            d.parent_load,
        )?,
        ca_min_weighted: choice("ca_min", &p.ca_min, &[("weighted", true), ("raw", false)], d.ca_min_weighted)?,
        ps_dispatch: choice(
            "ps_dispatch",
            &p.ps_dispatch,
            &[("set", PsDispatch::Set), ("per-unit", PsDispatch::PerUnit)],
            d.ps_dispatch,
        )?,
        epsilon: p.epsilon.unwrap_or(d.epsilon),
        vnodes: p.vnodes.unwrap_or(d.vnodes),
        maglev_table: p.maglev_table.unwrap_or(d.maglev_table),
        beta: p.beta.unwrap_or(d.beta),
        topology: None,
    };
    let flows = |flows: u32, flow_rate: f64, units_shape: f64, units_max: u64, unit_gap: f64, sizes: &[(u64, f64)]| {
        SyntheticFlows { flows, flow_rate, units_shape, units_max, unit_gap, sizes: sizes.to_vec() }
    };
    let workload = match &f.workload {
        Workload::Synthetic { flows: n, flow_rate, units_shape, units_max, unit_gap_s, sizes } => {
            server::Workload::Synthetic(flows(*n, *flow_rate, *units_shape, *units_max, *unit_gap_s, sizes))
        }
        Workload::Dpi {
            flows: n,
            flow_rate,
            units_shape,
            units_max,
            unit_gap_s,
            sizes,
            inspect_packets,
            match_fraction,
        } => server::Workload::Dpi(DpiConnections {
            flows: flows(*n, *flow_rate, *units_shape, *units_max, *unit_gap_s, sizes),
            inspect_packets: *inspect_packets,
            match_fraction: *match_fraction,
        }),
        Workload::Trace { file, time_scale, directed, inspect_packets, match_fraction } => {
            let path = Path::new(origin).parent().unwrap_or(Path::new("")).join(file);
            let trace = match traces.get(&path) {
                Some(t) => Arc::clone(t),
                None => {
                    let shown = path.display();
                    let input =
                        std::fs::File::open(&path).map_err(|e| format!("workload.file: cannot open `{shown}`: {e}"))?;
                    let trace = Trace::read(std::io::BufReader::new(input), !directed)
                        .map_err(|e| format!("workload.file: `{shown}`: {e}"))?;
                    if trace.flows() == 0 {
                        return Err(format!(
                            "workload.file: `{shown}` has no TCP or UDP packets (left out: {})",
                            trace.skipped()
                        ));
                    }
                    Arc::clone(traces.entry(path).or_insert(Arc::new(trace)))
                }
            };
            server::Workload::Trace(TraceReplay {
                trace,
                time_scale: *time_scale,
                dpi: inspect_packets.map(|n| (n, *match_fraction)),
            })
        }
        Workload::Gop { streams, gops, interval_s, bytes, profiles } => server::Workload::Gop(GopStreams {
            streams: *streams,
            gops: *gops,
            interval: *interval_s,
            bytes: *bytes,
            profiles: profiles.clone(),
        }),
    };
    let m = &f.machine;
    let cache = cache_params(m.cache.as_ref(), &topology)?;
    Ok(ServerParams {
        topology,
        policy,
        place,
        queue_capacity: m.queue_capacity,
        on_full: match m.on_full {
            FullRule::Block => OnFull::Block,
            FullRule::Drop => OnFull::Drop,
        },
        decision_cost: match &m.decision_costs {
            None => Nanos(m.decision_cost_ns),
            Some(file) => measured_cost(origin, file, policy, m.decision_cost_scale)?,
        },
        packet_cost: Nanos(m.packet_cost_ns),
        service_base: Nanos(m.service_base_ns),
        service_per_kib: Nanos(m.service_per_kib_ns),
        migration_penalty: Nanos(m.migration_penalty_ns),
        home_penalty: Nanos(m.home_penalty_ns),
        sibling_sharing: m.sibling_sharing,
        producer_core: match &m.producer_core {
            None => ProducerCore::Own,
            Some(ProducerCoreSpec::Worker(w)) => ProducerCore::Shares(WorkerId(*w)),
            Some(ProducerCoreSpec::Named(n)) if n == "own" => ProducerCore::Own,
            Some(ProducerCoreSpec::Named(n)) if n == "float" => ProducerCore::Floats,
            Some(ProducerCoreSpec::Named(n)) => {
                return Err(format!("machine.producer_core: `{n}`; expected \"own\", \"float\" or a worker number"));
            }
        },
        workers: m.workers,
        workload,
        cache,
        seed: f.seed,
    })
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} runs)", self.name, self.cases.len())
    }
}
