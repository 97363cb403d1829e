//! Power of two choices over rendezvous: of the flow's two highest-ranked workers, the one with
//! the shorter queue (the first-ranked on ties).
//!
//! Keeps each flow on at most two workers while avoiding the busier of them; max load falls from
//! ≈ log n / log log n to log log n / log 2 + O(1) for random placement (Azar et al. 1994;
//! Mitzenmacher 2001). Cost: N scores plus two queue reads.

use super::Strategy;
use super::score::{HashFn, Rendezvous};
use crate::load::{LoadView, QueueMeasure};
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct P2c {
    rv: Rendezvous,
    measure: QueueMeasure,
}

impl P2c {
    pub(crate) fn new(hash: HashFn, measure: QueueMeasure) -> Self {
        Self { rv: Rendezvous::new(hash), measure }
    }
}

impl Strategy for P2c {
    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        self.rv.rebuild(members.as_slice().iter().map(|m| m.id.0));
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        let (a, b) = self.rv.top2(unit.flow.0);
        let (wa, wb) = (members.id(a), members.id(b));
        if load.queue(wb, self.measure) < load.queue(wa, self.measure) { wb } else { wa }
    }
}
