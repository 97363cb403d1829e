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
//! Cost: N scores, plus a division only for workers whose raw score beats the best adjusted
//! score so far (since `r ≤ 1`, `h ≤ g`: a worker that cannot win is skipped exactly). Scores are
//! computed in blocks of eight and a block is skipped whole when its best raw score cannot win,
//! so the loop is as branch-free as plain HRW's. CA-AHRW adds a second pass of N scores for the
//! home node and one cost lookup per worker.

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
            HashFn::Fast => select(prep, q, *reading, |s| fast(d, s) >> 11),
            HashFn::Classic => select(prep, q, *reading, |s| u64::from(classic(d, s as u32))),
        }
    }
}

/// The AHRW choice among workers with prepared values `prep` and queues `q` (see
/// [`Ahrw::place_exact`]), for the score function `score`.
#[inline(always)]
fn select(prep: &[u64], q: &[u64], reading: QminReading, score: impl Fn(u64) -> u64) -> usize {
    let min_all = q.iter().fold(u64::MAX, |m, &v| m.min(v));
    let min_busy = if min_all > 0 {
        min_all
    } else if reading == QminReading::TrueMin {
        return argmax_where(prep, &score, |i| q[i] == 0); // idle first
    } else {
        match q.iter().fold(u64::MAX, |m, &v| if v == 0 { m } else { m.min(v) }) {
            u64::MAX => return argmax_where(prep, &score, |_| true), // all idle: plain HRW
            m => m,
        }
    };
    let tilde = |i: usize| if q[i] == 0 { min_busy } else { q[i] };
    // A float estimate of g_b · Q_min / Q̃_b, lowered by more than its rounding error so it
    // never exceeds the exact value: it only filters, the u128 comparison decides.
    let threshold = |gb: u64, qb: u64| {
        if qb == min_busy { gb } else { (((gb as f64) * (min_busy as f64 / qb as f64)) as u64).saturating_sub(8) }
    };
    let (mut gb, mut qb, mut idx) = (score(prep[0]), tilde(0), 0usize);
    let mut t = threshold(gb, qb);
    for (i, &p) in prep.iter().enumerate().skip(1) {
        let gi = score(p);
        if gi > t {
            let qi = tilde(i);
            if u128::from(gi) * u128::from(qb) > u128::from(gb) * u128::from(qi) {
                (gb, qb, idx) = (gi, qi, i);
                t = threshold(gb, qb);
            }
        }
    }
    idx
}

/// Index of the highest `score(prep[i])` among positions where `keep(i)`; the first on ties.
#[inline(always)]
fn argmax_where(prep: &[u64], score: impl Fn(u64) -> u64, keep: impl Fn(usize) -> bool) -> usize {
    let (mut best, mut idx) = (0u64, usize::MAX);
    for (i, &p) in prep.iter().enumerate() {
        let v = score(p);
        let better = keep(i) && (v > best || idx == usize::MAX);
        best = if better { v } else { best };
        idx = if better { i } else { idx };
    }
    idx
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
        let home = members.id(self.rv.argmax(d)).0;
        gather(members, load, self.measure, &mut self.q);
        let topo = &self.topo;
        self.qw.clear();
        self.qw.extend(members.as_slice().iter().zip(&self.q).map(|(m, &q)| q * topo.cost(home, m.id.0)));
        let basis = if self.min_weighted { &self.qw } else { &self.q };
        adjust::q_min(basis.iter().copied(), self.reading)
    }

    /// Every member's adjusted score `h'(c, p)` (Eq. 6.5), in member order.
    pub(crate) fn scores(&mut self, members: &Members, d: u64, load: &LoadView<'_>, out: &mut Vec<f64>) {
        let m = self.prepare(members, d, load);
        out.clear();
        let rv = &self.rv;
        out.extend(self.qw.iter().enumerate().map(|(i, &q)| adjust::adjusted(rv.score_f64(d, i), q, m)));
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

impl Strategy for CacheAware {
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
