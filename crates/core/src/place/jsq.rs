//! Join the shortest queue: each unit to the worker with the fewest queued units (or bytes),
//! the first in id order on ties.
//!
//! Best balance a greedy placer can get from queue lengths; no locality. Cost: O(N) reads.

use super::{Strategy, shortest_queue};
use crate::load::{LoadView, QueueMeasure};
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct Jsq {
    pub(crate) measure: QueueMeasure,
}

impl Strategy for Jsq {
    fn rebuild(&mut self, _: &Members) -> Result<(), PlaceError> {
        Ok(())
    }

    fn place(&mut self, members: &Members, _: &Unit, load: &LoadView<'_>) -> WorkerId {
        members.id(shortest_queue(members, load, self.measure))
    }
}
