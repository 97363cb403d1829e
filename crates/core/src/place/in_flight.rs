//! In-flight affinity, as DPDK's packet distributor and eventdev atomic queues do it: a flow with
//! units still queued or in service stays on the worker that holds them; a flow with nothing in
//! flight goes to the least-loaded worker (first in id order on ties).
//!
//! This keeps every flow's units in order without a static home: a flow moves only when it has
//! drained, so no unit can overtake another of its flow. In-flight counts come from the
//! [`LoadView`]; a driver that does not track them makes this policy join-shortest-queue.
//! State: the last worker of each flow seen. Cost: one lookup, plus O(N) reads when a flow moves.

use super::{Strategy, shortest_queue};
use crate::flow::FlowId;
use crate::flow_map::FlowMap;
use crate::load::{LoadView, QueueMeasure};
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct InFlight {
    measure: QueueMeasure,
    last: FlowMap<WorkerId>,
}

impl InFlight {
    pub(crate) fn new(measure: QueueMeasure) -> Self {
        Self { measure, last: FlowMap::new() }
    }
}

impl Strategy for InFlight {
    fn rebuild(&mut self, _: &Members) -> Result<(), PlaceError> {
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        if load.in_flight(unit.flow) > 0
            && let Some(&w) = self.last.get(unit.flow)
            && members.contains(w)
        {
            return w;
        }
        let w = members.id(shortest_queue(members, load, self.measure));
        self.last.insert(unit.flow, w);
        w
    }

    fn forget_flow(&mut self, flow: FlowId) {
        self.last.remove(flow);
    }
}
