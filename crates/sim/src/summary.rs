//! One row per run: what `switchyard sim` prints and writes as CSV and JSON, and what reports
//! plot.

use serde::Serialize;

use crate::models::server::ServerOutcome;
use crate::scenario::{Case, spread};

/// One run's results. Field names are the JSON and CSV column names.
#[derive(Clone, Debug, Serialize)]
pub struct RunSummary {
    /// Position in the sweep.
    pub case: usize,
    /// The placement policy.
    pub policy: String,
    /// The run's root seed.
    pub seed: u64,
    /// The swept values, as `key=value` separated by spaces.
    pub swept: String,
    /// Units that reached the producer.
    pub emitted: u64,
    /// Units served.
    pub served: u64,
    /// Units dropped at full queues.
    pub dropped: u64,
    /// Units served per second.
    pub units_per_s: f64,
    /// Offered bits per second (the trace's bytes over the run).
    pub offered_gbps: f64,
    /// Mean worker utilisation.
    pub utilisation_mean: f64,
    /// Highest minus lowest worker utilisation (Guo's imbalance).
    pub utilisation_spread: f64,
    /// Highest minus lowest mean utilisation of the nodes just below the root (Guo Fig. 5.6's
    /// imbalance across the Niagara 2's cores).
    pub node_utilisation_spread: f64,
    /// Busy time: max over mean.
    pub busy_max_over_mean: f64,
    /// Busy time: coefficient of variation.
    pub busy_cov: f64,
    /// Busy time: Jain's index.
    pub busy_jain: f64,
    /// Units served away from their flow's previous worker.
    pub migrations: u64,
    /// Units that left after a later unit of their flow.
    pub out_of_order: u64,
    /// Inter-departure jitter within flows, µs.
    pub jitter_us: f64,
    /// Median latency, µs.
    pub latency_p50_us: f64,
    /// 99th-percentile latency, µs.
    pub latency_p99_us: f64,
    /// Time the producer waited on full queues, ms.
    pub producer_blocked_ms: f64,
    /// CoV of flows' worker shares against their proportional targets (0: exactly in proportion).
    pub flow_share_cov: f64,
    /// Jain's index of flows' progress rates.
    pub flow_rate_jain: f64,
}

impl RunSummary {
    /// The summary of `outcome`, the result of `case`.
    pub fn new(case: &Case, o: &ServerOutcome) -> Self {
        let util = &o.utilisation;
        Self {
            case: case.index,
            policy: case.params.policy.name().to_string(),
            seed: case.params.seed,
            swept: case.swept.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" "),
            emitted: o.emitted,
            served: o.served,
            dropped: o.dropped,
            units_per_s: o.units_per_s,
            offered_gbps: o.offered_gbps,
            utilisation_mean: util.iter().sum::<f64>() / util.len().max(1) as f64,
            utilisation_spread: spread(util),
            node_utilisation_spread: spread(&o.node_utilisation),
            busy_max_over_mean: o.balance.max_over_mean,
            busy_cov: o.balance.cov,
            busy_jain: o.balance.jain,
            migrations: o.migrations,
            out_of_order: o.out_of_order,
            jitter_us: o.jitter_ns / 1e3,
            latency_p50_us: o.latency.quantile(0.5) as f64 / 1e3,
            latency_p99_us: o.latency.quantile(0.99) as f64 / 1e3,
            producer_blocked_ms: o.producer_blocked.0 as f64 / 1e6,
            flow_share_cov: o.flow_shares.cov,
            flow_rate_jain: o.flow_rate_jain,
        }
    }

    /// A short label for plots and tables: the policy, and the swept values if any.
    pub fn label(&self) -> String {
        if self.swept.is_empty() { self.policy.clone() } else { format!("{} {}", self.policy, self.swept) }
    }
}
