//! Round robin: each unit to the next worker in id order (Guo ch. 6 baseline "RR").
//!
//! Perfect unit-count balance, no locality at all. Cost: O(1). After a membership change the
//! turn continues from the same position modulo the new count.

use super::Strategy;
use crate::load::LoadView;
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug, Default)]
pub(crate) struct RoundRobin {
    next: usize,
}

impl Strategy for RoundRobin {
    fn rebuild(&mut self, _: &Members) -> Result<(), PlaceError> {
        Ok(())
    }

    fn place(&mut self, members: &Members, _: &Unit, _: &LoadView<'_>) -> WorkerId {
        let i = self.next % members.len();
        self.next = i + 1;
        members.id(i)
    }
}
