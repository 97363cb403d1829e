//! Consistent hashing with bounded loads (Mirrokni, Thorup & Zadimoghaddam, SODA 2018; HAProxy's
//! `hash-balance-factor`, Envoy's `hash_balance_factor`).
//!
//! Every worker has capacity `⌈(1+ε) · (L + 1) · w_i / Σw⌉`, where `L` is the load now queued at
//! all workers and `+1` counts the unit being placed (with equal weights, `⌈(1+ε)·mean⌉`). A flow
//! walks the ring from its digest and takes the first worker whose load plus the unit fits its
//! capacity. Since the capacities add up to more than `L`, some worker always fits when load is
//! counted in units, so no placement ever leaves a worker above its capacity at that moment. When
//! load is counted in bytes a unit larger than every worker's headroom can fit nowhere; it then
//! goes to the worker with the most headroom (the one case where the bound is exceeded).
//!
//! Cost: a ring lookup, plus a walk over ring points until a worker with room is found; each
//! worker's capacity is checked once, but the walk may pass up to N·vnodes points when nearly
//! every worker is full.

use super::Strategy;
use super::ring::Ring;
use crate::load::{LoadView, QueueMeasure};
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct Bounded {
    ring: Ring,
    epsilon: f64,
    measure: QueueMeasure,
    share: Vec<f64>,
    /// Per member: the decision at which it was last checked, so each is checked once.
    checked: Vec<u64>,
    decision: u64,
}

impl Bounded {
    pub(crate) fn new(vnodes: u32, epsilon: f64, measure: QueueMeasure) -> Self {
        Self { ring: Ring::new(vnodes), epsilon, measure, share: Vec::new(), checked: Vec::new(), decision: 0 }
    }
}

/// Capacity of a worker with weight share `share` when `total` is queued and `add` arrives.
pub(crate) fn capacity(epsilon: f64, total: u64, add: u64, share: f64) -> u64 {
    ((1.0 + epsilon) * total.saturating_add(add) as f64 * share).ceil() as u64
}

impl Strategy for Bounded {
    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        self.ring.rebuild(members)?;
        let total = members.total_weight();
        self.share = members.as_slice().iter().map(|m| m.weight.get() / total).collect();
        self.checked = vec![0; members.len()];
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        let qs = load.queues(self.measure);
        let q = |i: usize| qs.get(members.id(i).0 as usize).copied().unwrap_or(0);
        let total: u64 = (0..members.len()).map(q).fold(0, u64::saturating_add);
        let add = match self.measure {
            QueueMeasure::Units => 1,
            QueueMeasure::Bytes => unit.size.max(1),
        };
        self.decision += 1;
        let start = self.ring.successor(unit.flow.0);
        let mut seen = 0;
        let (mut roomiest, mut most_room) = (0, i128::MIN);
        for k in 0..self.ring.len() {
            let i = self.ring.owner((start + k) % self.ring.len());
            if self.checked[i] == self.decision {
                continue;
            }
            self.checked[i] = self.decision;
            let cap = capacity(self.epsilon, total, add, self.share[i]);
            let qi = q(i);
            if qi.saturating_add(add) <= cap {
                return members.id(i);
            }
            let room = i128::from(cap) - i128::from(qi);
            if room > most_room {
                (roomiest, most_room) = (i, room);
            }
            seen += 1;
            if seen == members.len() {
                break;
            }
        }
        members.id(roomiest)
    }
}
