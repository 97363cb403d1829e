//! Modulo-N hashing: `digest mod N` over the members in id order.
//!
//! The static hash of RSS/RPS-style dispatch. Guo §5.1.2 gives its disruption coefficient as 1:
//! when N changes, almost every key moves. Kept as the baseline that shows why HRW exists.
//! Cost: one division.

use super::Strategy;
use crate::load::LoadView;
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct ModN;

impl Strategy for ModN {
    fn is_static(&self) -> bool {
        true
    }

    fn rebuild(&mut self, _: &Members) -> Result<(), PlaceError> {
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, _: &LoadView<'_>) -> WorkerId {
        members.id((unit.flow.0 % members.len() as u64) as usize)
    }
}
