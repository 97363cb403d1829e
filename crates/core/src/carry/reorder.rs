//! A per-flow reorder buffer: units finish in any order and leave in sequence order.
//!
//! Guo §2.5: a stream's home node "is responsible for preserving packet departure order"; the
//! same buffer serves a multiplexed channel whose messages cross several connections. Each flow
//! expects sequence numbers from 0; a unit that arrives early is held until every earlier one has
//! arrived. State: the held units, plus one counter per flow until [`ReorderBuffer::forget`].

use std::collections::BTreeMap;

use crate::flow::FlowId;
use crate::flow_map::FlowMap;

/// Holds units that arrived ahead of their turn, per flow.
#[derive(Debug)]
pub struct ReorderBuffer<T> {
    flows: FlowMap<(u64, BTreeMap<u64, T>)>,
    held: usize,
}

impl<T> Default for ReorderBuffer<T> {
    fn default() -> Self {
        Self { flows: FlowMap::new(), held: 0 }
    }
}

impl<T> ReorderBuffer<T> {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Unit `seq` of `flow` has arrived: calls `release` for it and every held unit it unblocks,
    /// in sequence order. A sequence number seen before (or already released) is dropped: the
    /// copy held first stays, as it arrived first.
    pub fn push(&mut self, flow: FlowId, seq: u64, unit: T, mut release: impl FnMut(u64, T)) {
        let (next, held) = self.flows.get_or_insert_with(flow, Default::default);
        if seq < *next || held.contains_key(&seq) {
            return;
        }
        held.insert(seq, unit);
        self.held += 1;
        while let Some(u) = held.remove(next) {
            self.held -= 1;
            release(*next, u);
            *next += 1;
        }
    }

    /// Units held, over all flows.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Units one flow holds.
    pub fn held_of(&self, flow: FlowId) -> usize {
        self.flows.get(flow).map_or(0, |(_, held)| held.len())
    }

    /// Whether unit `seq` of the flow is held (arrived early and waiting for an earlier one).
    pub fn holds(&self, flow: FlowId, seq: u64) -> bool {
        self.flows.get(flow).is_some_and(|(_, held)| held.contains_key(&seq))
    }

    /// The units one flow holds, in sequence order.
    #[cfg(test)]
    pub(crate) fn units_of(&self, flow: FlowId) -> impl Iterator<Item = &T> {
        self.flows.get(flow).into_iter().flat_map(|(_, held)| held.values())
    }

    /// Takes every unit the flow holds, in sequence order, and forgets nothing else: the flow
    /// still expects the number it expected.
    pub fn drain_flow(&mut self, flow: FlowId, mut take: impl FnMut(u64, T)) {
        if let Some((_, held)) = self.flows.get_mut(flow) {
            self.held -= held.len();
            for (seq, unit) in std::mem::take(held) {
                take(seq, unit);
            }
        }
    }

    /// Drops the flow's state (and any units it still holds).
    pub fn forget(&mut self, flow: FlowId) {
        if let Some((_, held)) = self.flows.remove(flow) {
            self.held -= held.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_in_sequence_order() {
        let mut b = ReorderBuffer::new();
        let mut out = Vec::new();
        for seq in [2, 0, 3, 1, 1, 5, 4] {
            b.push(FlowId(9), seq, seq * 10, |s, u| out.push((s, u)));
        }
        assert_eq!(out, [(0, 0), (1, 10), (2, 20), (3, 30), (4, 40), (5, 50)]);
        // A copy of a held unit is dropped; the first stays.
        b.push(FlowId(9), 7, 70, |_, _| panic!("unit 6 has not arrived"));
        b.push(FlowId(9), 7, 71, |_, _| panic!("unit 6 has not arrived"));
        assert!(b.holds(FlowId(9), 7) && !b.holds(FlowId(9), 6));
        assert_eq!((b.held(), b.held_of(FlowId(9))), (1, 1));
        out.clear();
        b.push(FlowId(9), 6, 60, |s, u| out.push((s, u)));
        assert_eq!(out, [(6, 60), (7, 70)]);
        assert_eq!(b.held(), 0);
        b.push(FlowId(1), 1, 0, |_, _| panic!("unit 0 has not arrived"));
        assert_eq!(b.held(), 1);
        b.forget(FlowId(1));
        assert_eq!(b.held(), 0);
    }
}
