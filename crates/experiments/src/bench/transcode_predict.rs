//! `bench transcode`'s prediction: the simulator's GOP model (`switchyard_sim`'s measured-GOP
//! workload) fed the per-GOP costs measured in the same run, beside what the real pool did; and
//! Guo's 8-core machines (ch. 6, §6.5) revisited with those costs instead of the reproduction's
//! fitted ones.
//!
//! # What is fed in, and why
//!
//! - **Costs**: each GOP's decode and encode time in the one-worker run, where every GOP ran
//!   alone on a core. One set of costs predicts every policy, so a difference between simulated
//!   and measured is what the model leaves out (chiefly two GOPs sharing the machine at once,
//!   shown as each run's busy time over the one-worker run's), not a refit per policy.
//! - **Cache effect**: a GOP that ran on another worker than its stream's previous GOP is cold
//!   for that stream's data. Every multi-worker run transcodes the same GOPs, so a GOP that
//!   stayed in one run and moved in another is measured both ways; the effect is the median over
//!   such GOPs of (mean cost moved) / (mean cost stayed). With no GOP measured both ways it is 1.
//! - **The pool as it runs**: the GOPs are offered round by round (every stream's GOP 0, then
//!   GOP 1, ...), each worker holds `queue` waiting GOPs plus the one it transcodes, the placer
//!   waits on a full queue, and a placement costs nothing (microseconds against GOPs of tens of
//!   milliseconds).

use switchyard_core::place::QminReading;
use switchyard_core::place::score::splitmix64;
use switchyard_core::{FlowId, OnFull, PlaceConfig, Policy, Topology, WorkerId};
use switchyard_sim::Nanos;
use switchyard_sim::models::server::{ProducerCore, Server, ServerOutcome, ServerParams, Workload};
use switchyard_sim::models::workload::MeasuredGops;
use switchyard_transcode::pool::Summary;

use crate::report::{Claim, ColumnSpec, TableSpec, Value};

/// Why a prediction could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PredictError {
    /// The simulator refused the run.
    #[error("the simulator: {0}")]
    Sim(#[from] switchyard_sim::SimError),
    /// A machine's topology.
    #[error("topology: {0}")]
    Topology(#[from] switchyard_core::TopologyError),
}

/// The costs a run measured, ready for the simulator.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Per stream, its flow and each GOP's (input bytes, nanoseconds on one worker).
    pub gops: MeasuredGops,
    /// GOPs measured both on their stream's previous worker and away from it.
    pub both_ways: usize,
}

/// The costs of `one` (a one-worker run of streams whose flows are `flows`), with the cache
/// effect from the multi-worker runs `others`. `None` when `one` is not a whole run of them.
pub fn measured(flows: &[FlowId], one: &Summary, others: &[&Summary]) -> Option<Measured> {
    let mut streams: Vec<(FlowId, Vec<(u64, u64)>)> = flows.iter().map(|&f| (f, Vec::new())).collect();
    for g in &one.gop_runs {
        let gops = &mut streams.get_mut(g.stream)?.1;
        // gop_runs is sorted by stream and index, and indexes count from 0 without gaps.
        if gops.len() as u64 != g.seq {
            return None;
        }
        gops.push((g.bytes, g.busy.as_nanos() as u64));
    }
    if streams.iter().any(|s| s.1.is_empty()) {
        return None;
    }
    // Per GOP: (sum of costs moved, how many; sum stayed, how many).
    let mut ways = std::collections::BTreeMap::<(usize, u64), (f64, u32, f64, u32)>::new();
    for run in others {
        for pair in run.gop_runs.windows(2) {
            let (prev, g) = (pair[0], pair[1]);
            if prev.stream != g.stream {
                continue;
            }
            let e = ways.entry((g.stream, g.seq)).or_default();
            let ns = g.busy.as_secs_f64();
            if prev.worker == g.worker {
                (e.2, e.3) = (e.2 + ns, e.3 + 1);
            } else {
                (e.0, e.1) = (e.0 + ns, e.1 + 1);
            }
        }
    }
    let mut ratios: Vec<f64> = ways
        .values()
        .filter(|w| w.1 > 0 && w.3 > 0 && w.2 > 0.0)
        .map(|w| (w.0 / f64::from(w.1)) / (w.2 / f64::from(w.3)))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let moved = if ratios.is_empty() {
        1.0
    } else if ratios.len() % 2 == 1 {
        ratios[ratios.len() / 2]
    } else {
        (ratios[ratios.len() / 2 - 1] + ratios[ratios.len() / 2]) / 2.0
    };
    Some(Measured { gops: MeasuredGops { streams, moved }, both_ways: ratios.len() })
}

/// The real pool's machine in the simulator: `workers` equally far apart, each holding `queue`
/// waiting GOPs and the one it transcodes.
pub fn simulate(
    gops: &MeasuredGops,
    policy: Policy,
    workers: u32,
    queue: usize,
) -> Result<ServerOutcome, PredictError> {
    let topology = Topology::flat(workers)?;
    Ok(machine(gops, policy, topology, PlaceConfig::default(), queue + 1, Nanos(0), Nanos(0))?)
}

fn machine(
    gops: &MeasuredGops,
    policy: Policy,
    topology: Topology,
    place: PlaceConfig,
    queue_capacity: usize,
    decision_cost: Nanos,
    home_penalty: Nanos,
) -> Result<ServerOutcome, switchyard_sim::SimError> {
    Server::simulate(&ServerParams {
        topology,
        policy,
        place,
        queue_capacity,
        on_full: OnFull::Block,
        decision_cost,
        packet_cost: Nanos(0),
        service_base: Nanos(0),
        service_per_kib: Nanos(0),
        migration_penalty: Nanos(0),
        home_penalty,
        cache: None,
        sibling_sharing: 0.0,
        producer_core: ProducerCore::Own,
        workers: None,
        workload: Workload::Measured(gops.clone()),
        seed: 1,
    })
}

/// Of the GOPs of `real`, the share the simulator placed on the same worker (`flows[i]` is
/// stream `i`'s flow). Policies that do not read the load place alike whatever the timing; the
/// others follow the queues, whose lengths the timing decides.
pub fn same_placement(flows: &[FlowId], real: &Summary, sim: &ServerOutcome) -> f64 {
    let mut placed = std::collections::HashMap::with_capacity(sim.placements.len());
    for &(flow, seq, w) in &sim.placements {
        placed.insert((flow, seq), w);
    }
    let same = real
        .gop_runs
        .iter()
        .filter(|g| flows.get(g.stream).and_then(|&f| placed.get(&(f, g.seq))) == Some(&WorkerId(g.worker as u32)))
        .count();
    same as f64 / real.gop_runs.len().max(1) as f64
}

/// One policy, measured and simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct Predicted {
    /// The policy.
    pub policy: Policy,
    /// Measured pictures a second over one worker's.
    pub measured_x_one: f64,
    /// Simulated, the same ratio.
    pub simulated_x_one: f64,
    /// Measured over round robin's (when round robin ran).
    pub measured_x_rr: Option<f64>,
    /// Simulated over round robin's.
    pub simulated_x_rr: Option<f64>,
    /// Share of GOPs the simulator placed where the real pool did.
    pub same_placement: f64,
    /// The run's busy time over the one-worker run's, for the same GOPs: how much slower a GOP
    /// ran beside another than alone (the model takes it as 1).
    pub busy_over_one: f64,
    /// Simulated busy time, max over mean.
    pub simulated_imbalance: f64,
    /// Measured busy time, max over mean.
    pub measured_imbalance: f64,
}

/// The prediction table.
pub const PREDICTION: TableSpec = TableSpec::new(
    "prediction",
    "The simulator fed this run's measured GOP costs, beside the measured",
    &[
        ColumnSpec::text("policy"),
        ColumnSpec::num("measured_x_one", 2).header("measured ×one"),
        ColumnSpec::num("simulated_x_one", 2).header("simulated ×one"),
        ColumnSpec::num("difference_x_one", 1).header("sim/meas").gain().about("simulated over measured"),
        ColumnSpec::num("explained_x_one", 2).header("sim÷busy/one").about(
            "simulated ×one divided by busy/one: the prediction with the slowdown of GOPs run side by side, which \
             the model leaves out, put back",
        ),
        ColumnSpec::num("measured_x_rr", 3).header("measured ×RR"),
        ColumnSpec::num("simulated_x_rr", 3).header("simulated ×RR"),
        ColumnSpec::num("difference_x_rr", 1).header("sim/meas").gain().about("simulated over measured"),
        ColumnSpec::int("measured_rank").header("rank meas").about("1 is the fastest measured policy"),
        ColumnSpec::int("simulated_rank").header("rank sim").about("1 is the fastest simulated policy"),
        ColumnSpec::num("same_placement", 1)
            .header("same worker")
            .percent()
            .about("GOPs the simulator placed on the worker the real pool did"),
        ColumnSpec::num("busy_over_one", 3)
            .header("busy/one")
            .about("the run's transcoding time over the one-worker run's, same GOPs"),
        ColumnSpec::num("measured_imbalance", 3).header("busy m/m meas"),
        ColumnSpec::num("simulated_imbalance", 3).header("busy m/m sim"),
    ],
);

/// Ranks of `values`, 1 for the largest.
fn ranks(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| 1 + values.iter().filter(|w| *w > v).count() as u64).collect()
}

/// The prediction's rows, in `predicted`'s order: (cells, why notes).
pub fn prediction_rows(predicted: &[Predicted]) -> (Vec<Vec<Value>>, Vec<String>) {
    let meas: Vec<f64> = predicted.iter().map(|p| p.measured_x_one).collect();
    let sim: Vec<f64> = predicted.iter().map(|p| p.simulated_x_one).collect();
    let (rm, rs) = (ranks(&meas), ranks(&sim));
    let diff = |s: Option<f64>, m: Option<f64>| match (s, m) {
        (Some(s), Some(m)) if m > 0.0 => Value::from(s / m),
        _ => Value::Null,
    };
    let rows = predicted
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                p.policy.to_string().into(),
                p.measured_x_one.into(),
                p.simulated_x_one.into(),
                diff(Some(p.simulated_x_one), Some(p.measured_x_one)),
                (p.simulated_x_one / p.busy_over_one).into(),
                p.measured_x_rr.into(),
                p.simulated_x_rr.into(),
                diff(p.simulated_x_rr, p.measured_x_rr),
                rm[i].into(),
                rs[i].into(),
                p.same_placement.into(),
                p.busy_over_one.into(),
                p.measured_imbalance.into(),
                p.simulated_imbalance.into(),
            ]
        })
        .collect();
    let mut notes = Vec::new();
    let mut swapped = Vec::new();
    for i in 0..predicted.len() {
        for j in i + 1..predicted.len() {
            if (meas[i] - meas[j]).signum() * (sim[i] - sim[j]).signum() < 0.0 {
                swapped.push(format!(
                    "{} and {} (measured {:.2}× and {:.2}×, simulated {:.2}× and {:.2}×)",
                    predicted[i].policy, predicted[j].policy, meas[i], meas[j], sim[i], sim[j]
                ));
            }
        }
    }
    if swapped.is_empty() {
        notes.push("ordering: the simulator orders the policies as measured".to_string());
    } else {
        notes.push(format!(
            "ordering: the simulator orders {} of {} pairs of policies the other way: {}. Where the measured ratios \
             are within a few percent the order is the machine's noise (other work shares it); where a pair's \
             placements differ (same worker < 100%), the queues the load-aware policy read were timed differently",
            swapped.len(),
            predicted.len() * predicted.len().saturating_sub(1) / 2,
            swapped.join("; ")
        ));
    }
    let worst = predicted.iter().map(|p| (p.simulated_x_one / p.measured_x_one - 1.0).abs()).fold(0.0, f64::max);
    let contention = predicted.iter().map(|p| p.busy_over_one).sum::<f64>() / predicted.len().max(1) as f64;
    let explained = predicted
        .iter()
        .map(|p| (p.simulated_x_one / p.busy_over_one / p.measured_x_one - 1.0).abs())
        .fold(0.0, f64::max);
    notes.push(format!(
        "issue 41's goal, the simulator within 10% of the measured ratios: largest difference {:.1}%, {}; the \
         model takes each GOP's cost from the one-worker run, while beside another GOP it took {:.3}× as long on \
         average (busy/one: shared caches, memory and the machine's other load), which the simulated ×one \
         leaves out; with that slowdown put back (sim÷busy/one) the largest difference is {:.1}%",
        worst * 100.0,
        if worst <= 0.10 { "met" } else { "NOT met" },
        contention,
        explained * 100.0
    ));
    (rows, notes)
}

/// Guo's machines and his comparison (ch. 6, §6.5): H-CAHRW over the mean of these.
pub const GUO_PEERS: [Policy; 5] = [Policy::RoundRobin, Policy::ModN, Policy::Hrw, Policy::HAhrw, Policy::CaAhrw];

/// Streams in Guo's experiments (ch. 6: 20, "for a fully loaded system").
pub const GUO_STREAMS: usize = 20;

/// The reproduction's home penalty per unit of extra distance (scenarios/reproduce/gop-cache-aware.toml).
pub const FITTED_HOME_PENALTY_NS: u64 = 3_000_000;

/// One machine revisited.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineRow {
    /// The topology's name.
    pub machine: &'static str,
    /// Guo's published average gain of H-CAHRW over the mean of [`GUO_PEERS`].
    pub published: f64,
    /// Q_min's reading.
    pub qmin: QminReading,
    /// Whether the reproduction's fitted home penalty was charged besides the measured costs.
    pub fitted_penalty: bool,
    /// H-CAHRW's simulated GOPs a second.
    pub hcahrw: f64,
    /// The mean of the peers'.
    pub peers_mean: f64,
    /// The fastest policy simulated, of H-CAHRW and the peers.
    pub best: Policy,
}

impl MachineRow {
    /// H-CAHRW over the peers' mean.
    pub fn ours(&self) -> f64 {
        self.hcahrw / self.peers_mean.max(1e-12)
    }
}

/// The 8-core Xeon E5335 and Opteron 2350 of Guo §6.5 with the GOPs of `m`: [`GUO_STREAMS`]
/// streams, stream `j` taking measured stream `j mod n`'s GOPs under a flow of its own, the
/// reproduction's queue (4) and decision cost (2 µs); each under both readings of Q_min, with
/// the measured cache effect alone and with the reproduction's fitted home penalty added.
pub fn machines(m: &Measured) -> Result<Vec<MachineRow>, PredictError> {
    let n = m.gops.streams.len();
    let streams = (0..GUO_STREAMS)
        .map(|j| (FlowId(splitmix64(0x4755_4f36_0000 + j as u64)), m.gops.streams[j % n].1.clone()))
        .collect();
    let gops = MeasuredGops { streams, moved: m.gops.moved };
    let mut rows = Vec::new();
    for (machine, published) in [("xeon-e5335", 1.257), ("opteron-2350", 1.305)] {
        let topology = Topology::parse(machine)?;
        for qmin in [QminReading::TrueMin, QminReading::NonZeroMin] {
            for fitted_penalty in [false, true] {
                let place = PlaceConfig { qmin, ..PlaceConfig::default() };
                let penalty = Nanos(if fitted_penalty { FITTED_HOME_PENALTY_NS } else { 0 });
                let rate = |p: Policy| -> Result<f64, switchyard_sim::SimError> {
                    Ok(machine_run(&gops, p, &topology, &place, penalty)?.units_per_s)
                };
                let hcahrw = rate(Policy::HCahrw)?;
                let mut best = (Policy::HCahrw, hcahrw);
                let mut sum = 0.0;
                for p in GUO_PEERS {
                    let r = rate(p)?;
                    sum += r;
                    if r > best.1 {
                        best = (p, r);
                    }
                }
                rows.push(MachineRow {
                    machine,
                    published,
                    qmin,
                    fitted_penalty,
                    hcahrw,
                    peers_mean: sum / GUO_PEERS.len() as f64,
                    best: best.0,
                });
            }
        }
    }
    Ok(rows)
}

fn machine_run(
    gops: &MeasuredGops,
    policy: Policy,
    topology: &Topology,
    place: &PlaceConfig,
    home_penalty: Nanos,
) -> Result<ServerOutcome, switchyard_sim::SimError> {
    machine(gops, policy, topology.clone(), place.clone(), 4, Nanos(2_000), home_penalty)
}

/// The machines table.
pub const MACHINES: TableSpec = TableSpec::new(
    "machines",
    "Guo's 8-core machines in the simulator with this run's measured GOP costs: H-CAHRW over the mean of RR, SM, HRW, H-AHRW and CA-AHRW",
    &[
        ColumnSpec::text("machine"),
        ColumnSpec::text("qmin").header("Q_min").about("true: ch. 5's minimum; nonzero: ch. 6's"),
        ColumnSpec::text("cost").about("what a GOP away from its stream's worker or home pays"),
        ColumnSpec::num("hcahrw_gops_per_s", 1).header("H-CAHRW").unit("GOPs/s"),
        ColumnSpec::num("peers_gops_per_s", 1).header("peers' mean").unit("GOPs/s"),
        ColumnSpec::num("ours", 3).header("ours").about("H-CAHRW over the peers' mean"),
        ColumnSpec::num("published", 3).about("Guo §6.5's average gain"),
        ColumnSpec::num("difference", 1).gain().about("ours over published"),
        ColumnSpec::text("fastest").about("the fastest of the six in the simulator"),
    ],
);

fn qmin_name(q: QminReading) -> &'static str {
    match q {
        QminReading::TrueMin => "true",
        QminReading::NonZeroMin => "nonzero",
    }
}

/// The machines table's cells and the claims (ch. 5's reading, measured costs alone).
pub fn machine_rows(rows: &[MachineRow], moved: f64) -> (Vec<Vec<Value>>, Vec<Claim>) {
    let cost = |fitted: bool| {
        if fitted {
            format!("measured ×{moved:.3} moved, + fitted 3 ms × (C−1) from home")
        } else {
            format!("measured ×{moved:.3} moved")
        }
    };
    let cells = rows
        .iter()
        .map(|r| {
            vec![
                r.machine.into(),
                qmin_name(r.qmin).into(),
                cost(r.fitted_penalty).into(),
                r.hcahrw.into(),
                r.peers_mean.into(),
                r.ours().into(),
                r.published.into(),
                (r.ours() / r.published).into(),
                r.best.to_string().into(),
            ]
        })
        .collect();
    let claims = rows
        .iter()
        .filter(|r| r.qmin == QminReading::TrueMin && !r.fitted_penalty)
        .map(|r| Claim {
            claim: format!(
                "H-CAHRW throughput over the mean of RR, SM, HRW, H-AHRW and CA-AHRW, {}, with the GOP costs measured in this run",
                r.machine
            ),
            source: "Guo §6.5".into(),
            published: Some(r.published),
            published_text: format!("+{:.1}% on average", (r.published - 1.0) * 100.0),
            ours: Some(r.ours()),
            ours_text: format!("{:.3} (fastest: {})", r.ours(), r.best),
            difference: Some(r.ours() / r.published - 1.0),
            why: format!(
                "The costs are this machine's: GOPs of the same stream cost {moved:.3}× as much on another worker \
                 as on the one before, which is all the locality H-CAHRW can win; its gain over the mean is then \
                 the balance SM and HRW lose by pinning streams. The thesis's gains include misses that cost \
                 far more on its front-side-bus Xeon than here (the fitted-penalty rows charge them as the \
                 reproduction does)."
            ),
        })
        .collect();
    (cells, claims)
}
