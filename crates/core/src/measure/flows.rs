//! Per-flow order and locality of departures: out-of-order departures, delay jitter and flow
//! migrations (Guo §2.5, §5.1: the video-quality metrics and the locality the HRW family keeps).

use crate::flow::FlowId;
use crate::flow_map::FlowMap;
use crate::time::Nanos;
use crate::worker::WorkerId;

#[derive(Clone, Copy, Debug)]
struct FlowState {
    /// Highest sequence number departed so far.
    max_seq: u64,
    last_departure: Nanos,
    /// Worker of the flow's previous unit, for migrations.
    last_worker: WorkerId,
    departures: u64,
}

/// Counts, over every unit that departs: how many left after a later unit of their flow
/// (out-of-order), how many were served on a different worker than their flow's previous unit
/// (migrations), and the spread of each flow's inter-departure times (jitter).
#[derive(Clone, Debug, Default)]
pub struct FlowOrder {
    flows: FlowMap<FlowState>,
    departures: u64,
    out_of_order: u64,
    migrations: u64,
    /// Welford running moments of inter-departure gaps, in nanoseconds, over all flows.
    gaps: u64,
    gap_mean: f64,
    gap_m2: f64,
}

impl FlowOrder {
    /// Nothing departed yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Unit `seq` of `flow` departed from `worker` at `now`.
    pub fn on_departure(&mut self, flow: FlowId, seq: u64, worker: WorkerId, now: Nanos) {
        self.departures += 1;
        match self.flows.get_mut(flow) {
            None => {
                self.flows
                    .insert(flow, FlowState { max_seq: seq, last_departure: now, last_worker: worker, departures: 1 });
            }
            Some(s) => {
                if seq < s.max_seq {
                    self.out_of_order += 1;
                } else {
                    s.max_seq = seq;
                }
                if worker != s.last_worker {
                    self.migrations += 1;
                }
                let gap = now.0.saturating_sub(s.last_departure.0) as f64;
                self.gaps += 1;
                let d = gap - self.gap_mean;
                self.gap_mean += d / self.gaps as f64;
                self.gap_m2 += d * (gap - self.gap_mean);
                s.last_departure = now;
                s.last_worker = worker;
                s.departures += 1;
            }
        }
    }

    /// The flow has ended: drop its state (its counts stay in the totals).
    pub fn forget(&mut self, flow: FlowId) {
        self.flows.remove(flow);
    }

    /// Units departed.
    pub fn departures(&self) -> u64 {
        self.departures
    }

    /// Units that departed after a later unit of their flow.
    pub fn out_of_order(&self) -> u64 {
        self.out_of_order
    }

    /// Units served on a different worker than their flow's previous unit.
    pub fn migrations(&self) -> u64 {
        self.migrations
    }

    /// Standard deviation of inter-departure times within flows, in nanoseconds (Guo's delay
    /// jitter); 0 before two units of one flow have departed.
    pub fn jitter_ns(&self) -> f64 {
        if self.gaps < 2 { 0.0 } else { (self.gap_m2 / (self.gaps - 1) as f64).sqrt() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_reordering_migrations_and_jitter() {
        let mut o = FlowOrder::new();
        let f = FlowId(1);
        o.on_departure(f, 0, WorkerId(0), Nanos(10));
        o.on_departure(f, 2, WorkerId(0), Nanos(20));
        o.on_departure(f, 1, WorkerId(1), Nanos(30)); // overtaken by 2, and moved
        o.on_departure(f, 3, WorkerId(1), Nanos(40));
        assert_eq!((o.departures(), o.out_of_order(), o.migrations()), (4, 1, 1));
        assert_eq!(o.jitter_ns(), 0.0, "gaps of 10, 10, 10");
        o.on_departure(FlowId(2), 0, WorkerId(3), Nanos(41));
        assert_eq!(o.migrations(), 1, "a flow's first unit is not a migration");
    }
}
