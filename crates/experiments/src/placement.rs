//! `switchyard place`'s measurement: how a placement policy balances a set of units, how many
//! placements move when a worker leaves or joins, and what a decision costs.
//!
//! Every unit stays queued where it was put, so load-aware policies see the load built up so
//! far. Disruption is measured the way consistent-hashing papers do: the fraction of units that
//! land elsewhere when worker 0 is removed (`moved_on_remove`), and when the last worker joins
//! the others (`moved_on_add`).

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::ExperimentError;
use crate::report::{ColumnSpec, ReportSpec, Table, TableSpec};
use switchyard_core::measure::{balance, moved_fraction};
use switchyard_core::place::build_weighted;
use switchyard_core::{
    LoadTracker, PlaceConfig, PlaceError, Placer, Policy, QueueMeasure, Topology, Unit, Weight, WorkerId,
};

/// How a front end names the worker count and the weights in its messages: `--workers 4` on the
/// command line, `workers=4` from Python. One check serves both, so that both refuse the same
/// settings; only the names in the message differ.
#[derive(Clone, Copy, Debug)]
pub struct ArgNames {
    /// The worker count's name (`--workers`).
    pub workers: &'static str,
    /// The weights' name (`--weights`).
    pub weights: &'static str,
    /// What joins a name to its value in a message (`" "` for a flag, `"="` for a keyword).
    pub assign: &'static str,
}

/// `switchyard place`'s flags.
pub const FLAG_NAMES: ArgNames = ArgNames { workers: "--workers", weights: "--weights", assign: " " };

/// Each worker with its weight.
pub type Members = Vec<(WorkerId, Weight)>;

/// The workers with their weights, and the topology the policies get, from what a user gave.
///
/// The worker count defaults to the topology's leaves, or 8; it must agree with a topology given
/// beside it. Topology-aware policies get a flat tree over all N workers when no topology is
/// given, so that the addition experiment (N−1 workers, then worker N−1 added) has a leaf for the
/// newcomer; other policies get none, and so are not limited to a tree's 65,536 leaves. Weights
/// default to 1 each; there must be one per worker.
pub fn members(
    policies: &[Policy],
    workers: Option<u32>,
    weights: Option<&[f64]>,
    topology: Option<Topology>,
    names: ArgNames,
) -> Result<(Members, Option<Topology>), ExperimentError> {
    let ArgNames { workers: w_name, weights: weights_name, assign } = names;
    let n = match (workers, &topology) {
        (Some(n), Some(t)) if n != t.leaves() => {
            return Err(ExperimentError::Input(format!(
                "{w_name}{assign}{n} but topology {} has {} leaves; drop {w_name} or make them agree",
                t.name(),
                t.leaves()
            )));
        }
        (Some(n), _) => n,
        (None, Some(t)) => t.leaves(),
        (None, None) => 8,
    };
    if n == 0 {
        return Err(ExperimentError::Input(format!("{w_name} must be at least 1")));
    }
    let topology = match topology {
        Some(t) => Some(t),
        None if policies.iter().any(|p| p.uses_topology()) => Some(Topology::flat(n).map_err(|e| {
            ExperimentError::Input(format!("{n} workers is more than topology-aware policies take ({e})"))
        })?),
        None => None,
    };
    let weights = match weights {
        Some(w) if w.len() != n as usize => {
            return Err(ExperimentError::Input(format!(
                "{weights_name} has {} values for {n} workers; give one weight per worker",
                w.len()
            )));
        }
        Some(w) => w.to_vec(),
        None => vec![1.0; n as usize],
    };
    let members = weights
        .iter()
        .enumerate()
        .map(|(i, &w)| Weight::new(WorkerId(i as u32), w).map(|w| (WorkerId(i as u32), w)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ExperimentError::Input(e.to_string()))?;
    Ok((members, topology))
}

/// The setting every policy is measured in.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The workers and their weights.
    pub workers: Vec<(WorkerId, Weight)>,
    /// Whether balance is judged against the weights (else against equal shares).
    pub weighted: bool,
    /// The policies' settings (topology, queue measure, ε, …).
    pub config: PlaceConfig,
    /// The units, in arrival order.
    pub units: Vec<Unit>,
}

/// One policy's results. Field names are the JSON and CSV column names of `switchyard place`.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The policy.
    pub policy: String,
    /// Workers.
    pub workers: u32,
    /// Units placed.
    pub keys: u64,
    /// The busiest worker's load over the mean (weighted, if the setup is).
    pub max_over_mean: f64,
    /// Coefficient of variation of the loads.
    pub cov: f64,
    /// Jain's index of the loads.
    pub jain: f64,
    /// Units that move when worker 0 is removed; `None` (null) with one worker.
    pub moved_on_remove: Option<f64>,
    /// Units that move when the last worker joins the others; `None` (null) with one worker.
    pub moved_on_add: Option<f64>,
    /// Mean wall time of one decision, in nanoseconds.
    pub ns_per_decision: f64,
}

/// Places every unit in order on a fresh tracker; returns each unit's worker.
fn pass(placer: &mut dyn Placer, units: &[Unit], load: &mut LoadTracker) -> Vec<u32> {
    load.reset();
    units
        .iter()
        .map(|u| {
            let w = placer.place(u, &load.view());
            load.on_enqueue(w, u);
            w.0
        })
        .collect()
}

/// Measures `policy` in `s`: four passes over the units, `progress` called with 2, 1 and 1 as
/// they finish (balance and timing, removal, addition).
pub fn measure(policy: Policy, s: &Setup, progress: &dyn Fn(u64)) -> Result<Row, PlaceError> {
    let units = &s.units;
    let n = s.workers.len();
    let mut load = LoadTracker::new();

    // Balance, and the first half of the removal experiment.
    let mut placer = build_weighted(policy, &s.config, &s.workers)?;
    let before = pass(placer.as_mut(), units, &mut load);
    let per_worker = |load: &LoadTracker| -> Vec<f64> {
        let q = match s.config.measure {
            QueueMeasure::Units => load.units_by_worker(),
            QueueMeasure::Bytes => load.bytes_by_worker(),
        };
        (0..n).map(|i| q.get(i).copied().unwrap_or(0) as f64).collect()
    };
    let loads = per_worker(&load);
    let weights: Vec<f64> = s.workers.iter().map(|w| w.1.get()).collect();
    let b = balance(&loads, s.weighted.then_some(&weights[..]));
    let ns = time_decisions(policy, s, &load)?;
    progress(2);

    let moved_on_remove = if n > 1 {
        placer.remove_worker(WorkerId(0))?;
        Some(moved_fraction(&before, &pass(placer.as_mut(), units, &mut load)))
    } else {
        None
    };
    progress(1);
    let moved_on_add = if n > 1 {
        let last = s.workers[n - 1];
        let mut placer = build_weighted(policy, &s.config, &s.workers[..n - 1])?;
        let before = pass(placer.as_mut(), units, &mut load);
        placer.add_worker(last.0, last.1)?;
        Some(moved_fraction(&before, &pass(placer.as_mut(), units, &mut load)))
    } else {
        None
    };
    progress(1);
    Ok(Row {
        policy: policy.name().to_string(),
        workers: n as u32,
        keys: units.len() as u64,
        max_over_mean: b.max_over_mean,
        cov: b.cov,
        jain: b.jain,
        moved_on_remove,
        moved_on_add,
        ns_per_decision: ns,
    })
}

/// Placement time to accumulate for the ns/decision figure.
const TIMED: Duration = Duration::from_millis(50);
/// The whole timing's bound, placer builds included. With a few keys the builds dominate (a
/// Maglev build fills a 65,537-entry table to time ten decisions), and waiting for [`TIMED`] of
/// placement alone once took minutes; past this bound the mean is over the decisions timed so
/// far, at least one pass over the units.
const WALL: Duration = Duration::from_millis(500);
/// A cap on the decisions timed, so that a fast policy on many keys stops too.
const MAX_DECISIONS: u64 = 50_000_000;

/// Mean wall time of one decision: fresh placers place every unit against a fixed load view,
/// repeated until [`TIMED`] of placement has been timed, or [`WALL`] has passed in all.
fn time_decisions(policy: Policy, s: &Setup, load: &LoadTracker) -> Result<f64, PlaceError> {
    let view = load.view();
    let began = Instant::now();
    let mut spent = Duration::ZERO;
    let mut decisions = 0u64;
    loop {
        let mut placer = build_weighted(policy, &s.config, &s.workers)?;
        let start = Instant::now();
        for u in &s.units {
            black_box(placer.place(black_box(u), &view));
        }
        spent += start.elapsed();
        decisions += s.units.len().max(1) as u64;
        if spent >= TIMED || began.elapsed() >= WALL || decisions >= MAX_DECISIONS {
            break;
        }
    }
    Ok(spent.as_nanos() as f64 / decisions as f64)
}

/// `switchyard place`'s table: a row per policy (its CSV header is these columns' names, as
/// `place --format csv` has always printed).
pub const POLICIES: TableSpec = TableSpec::new(
    "policies",
    "balance, keys moved and the cost of a decision, per policy",
    &[
        ColumnSpec::text("policy"),
        ColumnSpec::int("workers"),
        ColumnSpec::int("keys").about("units placed"),
        ColumnSpec::num("max_over_mean", 3).header("max/mean").about("the busiest worker's load over the mean"),
        ColumnSpec::num("cov", 3).header("CoV").about("coefficient of variation of the loads"),
        ColumnSpec::num("jain", 4).header("Jain").about("Jain's fairness index of the loads"),
        ColumnSpec::num("moved_on_remove", 4).header("moved-rm").about("share of units that move when worker 0 leaves"),
        ColumnSpec::num("moved_on_add", 4)
            .header("moved-add")
            .about("share of units that move when the last worker joins"),
        ColumnSpec::num("ns_per_decision", 1).header("decision").unit("ns").about("mean wall time of one decision"),
    ],
);

/// What `switchyard place` reports.
pub const SPEC: ReportSpec =
    ReportSpec { name: "place", title: "placement policies measured on the same keys", tables: &[&POLICIES] };

/// The rows as `place`'s table.
pub fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(&POLICIES);
    for r in rows {
        t.push(vec![
            r.policy.clone().into(),
            r.workers.into(),
            r.keys.into(),
            r.max_over_mean.into(),
            r.cov.into(),
            r.jain.into(),
            r.moved_on_remove.into(),
            r.moved_on_add.into(),
            r.ns_per_decision.into(),
        ]);
    }
    t
}
