//! Connection affinity (Guo ch. 4, §4.1.3): a flow's first unit goes to the shortest run-queue,
//! and every later unit of the flow follows it.
//!
//! Balancing happens only when a flow is first seen, which costs nothing extra since a new flow's
//! cache is cold anyway. If the flow's worker has been removed, the flow is placed afresh. State:
//! one entry per live flow, dropped by `forget_flow`. Cost: one lookup, plus O(N) reads on first
//! sight.

use super::{Strategy, shortest_queue};
use crate::flow::FlowId;
use crate::flow_map::FlowMap;
use crate::load::{LoadView, QueueMeasure};
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct Affinity {
    measure: QueueMeasure,
    sticky: FlowMap<WorkerId>,
}

impl Affinity {
    pub(crate) fn new(measure: QueueMeasure) -> Self {
        Self { measure, sticky: FlowMap::new() }
    }
}

impl Strategy for Affinity {
    fn rebuild(&mut self, _: &Members) -> Result<(), PlaceError> {
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        if let Some(&w) = self.sticky.get(unit.flow)
            && members.contains(w)
        {
            return w;
        }
        let w = members.id(shortest_queue(members, load, self.measure));
        self.sticky.insert(unit.flow, w);
        w
    }

    fn forget_flow(&mut self, flow: FlowId) {
        self.sticky.remove(flow);
    }
}
