//! Highest Random Weight (rendezvous) hashing (Guo §5.1.1, after Thaler & Ravishankar):
//! `f(c) = argmax_k g(c, k)`.
//!
//! Every flow has a fixed ranking of workers; it goes to the top one. Removing a worker moves
//! exactly the flows it held, and adding one moves only flows that now rank it first (1/(N+1)
//! of them): the minimum possible disruption (Guo §5.1.2). Balance is at the level of flows, not
//! units. Cost: N scores, one multiply each with [`HashFn::Fast`].

use super::Strategy;
use super::score::{HashFn, Rendezvous};
use crate::load::LoadView;
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct Hrw {
    rv: Rendezvous,
}

impl Hrw {
    pub(crate) fn new(hash: HashFn) -> Self {
        Self { rv: Rendezvous::new(hash) }
    }
}

impl Strategy for Hrw {
    fn is_static(&self) -> bool {
        true
    }

    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        self.rv.rebuild(members.as_slice().iter().map(|m| m.id.0));
        Ok(())
    }

    #[inline]
    fn place(&mut self, members: &Members, unit: &Unit, _: &LoadView<'_>) -> WorkerId {
        members.id(self.rv.argmax(unit.flow.0))
    }
}
