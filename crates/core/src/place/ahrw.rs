//! Adjusted HRW (Guo §5.2, Def. 5.1–5.2; Eq. 6.1–6.2) and its flat cache-aware form CA-AHRW
//! (Guo §6.2–6.3, Eq. 6.3–6.6).
//!
//! **AHRW**: `h(c, p) = r_p · g(c, p)` with `r_p = Q_min / Q_p` from the instantaneous queue
//! lengths, recomputed at every decision as in the source (no smoothing or hysteresis). With equal
//! queues it is plain HRW; under imbalance a flow leaves its top-ranked worker. The two readings
//! of `Q_min` are [`super::QminReading`]; the index typo of Def. 5.1 (`QueueLength_i`) is read as
//! the worker's own queue, and Def. 5.2's `M` as `N` (errata 1–2).
//!
//! **CA-AHRW**: the flow's home node is its plain-HRW worker. Each worker's queue is weighted by
//! the communication cost from the home node (the home node's row of the topology's cost matrix,
//! Eq. 6.4), and AHRW runs on the weighted queues (Eq. 6.5–6.6; the `h` vs `h'` typo of Eq. 6.6 is
//! erratum 3). `Q_min` is the minimum of the weighted queues by default, or of the raw ones as an
//! option (erratum 5).
//!
//! Cost: one scan of the N queues and N scores. Flat AHRW ranks in exact integer arithmetic
//! ([`adjust::select_exact`]): a candidate is compared exactly only when a floating-point estimate
//! says it may beat the best so far, which happens about once per new best. CA-AHRW, whose
//! weighted queues are fractional, ranks in `f64` and adds a second pass of N scores for the home
//! node and one cost lookup per worker.

use super::Strategy;
use super::adjust::{self, QminReading};
use super::score::{HashFn, Rendezvous, classic, fast};
use crate::load::{LoadView, QueueMeasure};
use crate::place::{PlaceConfig, PlaceError};
use crate::topology::Topology;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug)]
pub(crate) struct Ahrw {
    rv: Rendezvous,
    reading: QminReading,
    measure: QueueMeasure,
    /// Fast-score seeds and worker ids in member order, for the fast path.
    ids: Vec<u32>,
    /// Whether the members are exactly workers 0..N, so the view's slice is read in place.
    dense: bool,
    qu: Vec<u64>,
}

impl Ahrw {
    pub(crate) fn new(hash: HashFn, reading: QminReading, measure: QueueMeasure) -> Self {
        Self { rv: Rendezvous::new(hash), reading, measure, ids: Vec::new(), dense: false, qu: Vec::new() }
    }

    /// AHRW over integer scores and queues, ranking by the exact rational `g / Q̃` (see
    /// adjust.rs; `Q̃_p = Q_p`, or `Q_min` for an idle worker under the non-zero reading).
    ///
    /// One scan of the queues finds `Q_min`; one pass then scores every worker and keeps the best
    /// `(g, Q̃)`, comparing a candidate exactly (in `u128`) only when its raw score exceeds a
    /// threshold below which it cannot win: `Q̃ ≥ Q_min`, so `g / Q̃ > g_b / Q̃_b` needs
    /// `g > g_b · Q_min / Q̃_b`. The threshold changes only when the best does.
    fn place_exact(&mut self, d: u64, load: &LoadView<'_>) -> usize {
        let qs = load.queues(self.measure);
        let n = self.ids.len();
        let Self { rv, reading, ids, dense, qu, .. } = self;
        let q: &[u64] = if *dense && qs.len() >= n {
            &qs[..n]
        } else {
            qu.clear();
            qu.extend(ids.iter().map(|&id| qs.get(id as usize).copied().unwrap_or(0)));
            qu
        };
        let prep = rv.prepared();
        match rv.hash() {
            HashFn::Fast => adjust::select_exact(prep.iter().zip(q).map(|(&p, &q)| (fast(d, p) >> 11, q)), *reading),
            HashFn::Classic => {
                adjust::select_exact(prep.iter().zip(q).map(|(&p, &q)| (u64::from(classic(d, p as u32)), q)), *reading)
            }
        }
    }
}

/// Reads the members' queues into `out`, in member order.
fn gather(members: &Members, load: &LoadView<'_>, measure: QueueMeasure, out: &mut Vec<f64>) {
    let qs = load.queues(measure);
    out.clear();
    out.extend(members.as_slice().iter().map(|m| qs.get(m.id.0 as usize).copied().unwrap_or(0) as f64));
}

impl Strategy for Ahrw {
    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        self.rv.rebuild(members.as_slice().iter().map(|m| m.id.0));
        self.ids = members.as_slice().iter().map(|m| m.id.0).collect();
        self.dense = self.ids.iter().enumerate().all(|(i, &id)| id as usize == i);
        Ok(())
    }

    #[inline]
    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        members.id(self.place_exact(unit.flow.0, load))
    }
}

/// Flat CA-AHRW; also ranks workers for PS-HRW.
#[derive(Debug)]
pub(crate) struct CacheAware {
    rv: Rendezvous,
    topo: Topology,
    reading: QminReading,
    min_weighted: bool,
    measure: QueueMeasure,
    q: Vec<f64>,
    qw: Vec<f64>,
}

impl CacheAware {
    pub(crate) fn new(topo: Topology, config: &PlaceConfig) -> Self {
        Self {
            rv: Rendezvous::new(config.hash),
            topo,
            reading: config.qmin,
            min_weighted: config.ca_min_weighted,
            measure: config.measure,
            q: Vec::new(),
            qw: Vec::new(),
        }
    }

    /// Fills the raw and cost-weighted queues for a flow with digest `d`, returning `Q_min`.
    fn prepare(&mut self, members: &Members, d: u64, load: &LoadView<'_>) -> Option<f64> {
        let home = self.home_of(members, d).0;
        gather(members, load, self.measure, &mut self.q);
        let topo = &self.topo;
        self.qw.clear();
        self.qw.extend(members.as_slice().iter().zip(&self.q).map(|(m, &q)| q * topo.cost(home, m.id.0)));
        let basis = if self.min_weighted { &self.qw } else { &self.q };
        adjust::q_min(basis.iter().copied(), self.reading)
    }
    /// Every member's adjusted score `h'(c, p)` (Eq. 6.5) and raw score `g(c, p)`, in member
    /// order: a ranking, with the raw score to order workers whose adjusted scores tie (under the
    /// true-minimum reading every busy worker's is 0 while one is idle).
    pub(crate) fn scores(&mut self, members: &Members, d: u64, load: &LoadView<'_>, out: &mut Vec<(f64, f64)>) {
        let m = self.prepare(members, d, load);
        out.clear();
        let rv = &self.rv;
        out.extend(self.qw.iter().enumerate().map(|(i, &q)| {
            let g = rv.score_f64(d, i);
            (adjust::adjusted(g, q, m), g)
        }));
    }
}

/// Checks that every member is a leaf of `topo`.
pub(crate) fn check_leaves(members: &Members, topo: &Topology) -> Result<(), PlaceError> {
    match members.as_slice().iter().find(|m| m.id.0 >= topo.leaves()) {
        Some(m) => {
            Err(PlaceError::NotInTopology { worker: m.id, topology: topo.name().to_string(), leaves: topo.leaves() })
        }
        None => Ok(()),
    }
}

impl CacheAware {
    /// The home of the flow with digest `d`: its plain-HRW worker under the configured hash.
    pub(crate) fn home_of(&self, members: &Members, d: u64) -> WorkerId {
        members.id(self.rv.argmax(d))
    }
}

impl Strategy for CacheAware {
    fn home(&self, members: &Members, unit: &Unit) -> Option<WorkerId> {
        Some(self.home_of(members, unit.flow.0))
    }

    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        check_leaves(members, &self.topo)?;
        self.rv.rebuild(members.as_slice().iter().map(|m| m.id.0));
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        let d = unit.flow.0;
        let m = self.prepare(members, d, load);
        let rv = &self.rv;
        members.id(adjust::pick(self.qw.iter().enumerate().map(|(i, &q)| (rv.score_f64(d, i), q)), m))
    }
}
