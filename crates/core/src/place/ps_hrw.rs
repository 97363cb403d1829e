//! PS-HRW, proportional-share HRW (Guo ch. 7, Table 7.1, Theorem 7.1).
//!
//! Each flow (a "request") is entitled to `g_i = φ_i / Σ_j φ_j · r` of the `r` workers, with
//! `φ_i` its size (Eq. 7.3–7.4). Table 7.1 gives it a **set** of workers:
//!
//! 1. the top `⌊g_i⌋` workers by cache-aware adjusted score (CA-AHRW, Eq. 6.5; ties by raw score);
//! 2. plus one residual worker, `HCAHRW'(c_i)`: the argmax of `x_p · h_p` over all workers, where
//!    the CARP multipliers `x` ([`super::carp`], Theorem 7.1) give each chosen worker target
//!    probability `1/N'` and every other `(g_i − ⌊g_i⌋)/N'`, `N' = c + (r − c)(g_i − c)`. If the
//!    residual lands on a chosen worker the set stays at `⌊g_i⌋`.
//!
//! With [`PsDispatch::Set`] (default) each unit then goes to the AHRW choice among the flow's set,
//! keyed by the flow: a flow entitled to 2.5 workers spreads over its 3 by load, and a small flow
//! (`g_i < 1`, so equal targets) stays on one worker, its plain-HRW one — locality is kept where
//! the share does not ask for more. [`PsDispatch::PerUnit`] instead hashes each unit by flow and
//! sequence number and sends it to `argmax x_p · h_p` over all workers, so a flow's units reach
//! workers in exactly the target proportions, at the cost of spreading every flow.
//!
//! Choices where the source is silent or wrong (002_guo.md §3.9, erratum 7):
//! - Table 7.1's `while g > 0` loop runs ⌈g⌉ times and re-picks the same core; here the top `⌊g⌋`
//!   distinct workers are taken, and the residual is added once.
//! - `φ_i` is the size of the flow's latest unit (a connection buffer's length, a GOP's bytes);
//!   `Σ φ` runs over the flows the placer holds, which a flow leaves by `forget_flow`.
//! - The allocation is recomputed when the flow is new, when `φ_i` has changed by more than `β`
//!   (default 16%, Fig. 7.1) since its last allocation, or when membership changed. Other flows are
//!   not recomputed when one arrives (the source's forced update would cost O(flows) per arrival).
//! - The ranking is the flat CA-AHRW one rather than the tree descent, because a ranking (not a
//!   single winner) is needed; the residual uses the raw score, as CARP does.
//!
//! State: per flow, its size and set. Cost: a reallocation is 2N scores, a sort and the
//! multipliers; a dispatch is |set| scores (N with `PerUnit`).

use super::Strategy;
use super::adjust::{self, QminReading};
use super::ahrw::CacheAware;
use super::carp;
use super::score::{fast, node_seed, splitmix64, unit_interval};
use crate::flow::FlowId;
use crate::flow_map::FlowMap;
use crate::load::{LoadView, QueueMeasure};
use crate::place::{PlaceConfig, PlaceError};
use crate::topology::Topology;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

/// How PS-HRW spreads a flow's units over its share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PsDispatch {
    /// Each unit to the AHRW choice within the flow's set of workers (Table 7.1's reading).
    #[default]
    Set,
    /// Each unit hashed by flow and sequence number over all workers, in the target proportions.
    PerUnit,
}

#[derive(Debug)]
struct Share {
    phi: f64,
    phi_at_alloc: f64,
    generation: u64,
    /// Workers holding whole shares, sorted by id.
    whole: Vec<WorkerId>,
    /// The residual worker, when it is not one of the whole shares.
    residual: Option<WorkerId>,
    /// Multipliers of the whole-share workers and of the others, for `PerUnit`.
    x_in: f64,
    x_out: f64,
}

#[derive(Debug)]
pub(crate) struct PsHrw {
    ranker: CacheAware,
    beta: f64,
    dispatch: PsDispatch,
    reading: QminReading,
    measure: QueueMeasure,
    seeds: Vec<u64>,
    flows: FlowMap<Share>,
    total_phi: f64,
    generation: u64,
    ranking: Vec<(f64, f64)>,
    order: Vec<usize>,
}

impl PsHrw {
    pub(crate) fn new(topo: Topology, config: &PlaceConfig) -> Self {
        Self {
            ranker: CacheAware::new(topo, config),
            beta: config.beta,
            dispatch: config.ps_dispatch,
            reading: config.qmin,
            measure: config.measure,
            seeds: Vec::new(),
            flows: FlowMap::new(),
            total_phi: 0.0,
            generation: 0,
            ranking: Vec::new(),
            order: Vec::new(),
        }
    }

    /// `argmax_p x_p · h_p(key)` over all members, with `x_in` for members of `whole`.
    fn carp_pick(&self, members: &Members, key: u64, whole: &[WorkerId], x_in: f64, x_out: f64) -> usize {
        let (mut best, mut idx) = (f64::NEG_INFINITY, 0);
        let mut next_in = whole.iter().peekable();
        for (i, (m, &seed)) in members.as_slice().iter().zip(&self.seeds).enumerate() {
            let chosen = next_in.next_if(|&&w| w == m.id).is_some();
            let z = if chosen { x_in } else { x_out } * unit_interval(fast(key, seed));
            if z > best {
                best = z;
                idx = i;
            }
        }
        idx
    }

    fn allocate(&mut self, members: &Members, flow: FlowId, phi: f64, load: &LoadView<'_>) -> Share {
        let r = members.len();
        // Eq. 7.4: g_i = φ_i / Σφ · r.
        let g = (phi / self.total_phi * r as f64).min(r as f64);
        let c = g.floor() as usize;
        let frac = if c >= r { 0.0 } else { g - c as f64 };
        let mut whole = Vec::with_capacity(c);
        if c > 0 {
            self.ranker.scores(members, flow.0, load, &mut self.ranking);
            self.order.clear();
            self.order.extend(0..r);
            let h = &self.ranking;
            self.order.sort_by(|&a, &b| h[b].0.total_cmp(&h[a].0).then(h[b].1.total_cmp(&h[a].1)).then(a.cmp(&b)));
            whole.extend(self.order[..c].iter().map(|&i| members.id(i)));
            whole.sort();
        }
        let (x_in, x_out) = if c == 0 {
            (1.0, 1.0) // every worker has the same target: plain rendezvous over all
        } else if frac <= 0.0 {
            (1.0, 0.0)
        } else {
            // Two target levels: (r − c) workers at frac/N', c workers at 1/N'.
            let n_prime = c as f64 + (r - c) as f64 * frac;
            let mut p = vec![frac / n_prime; r - c];
            p.extend(std::iter::repeat_n(1.0 / n_prime, c));
            let x = carp::multipliers(&p);
            (x[r - 1], x[0])
        };
        let residual = if c < r {
            Some(members.id(self.carp_pick(members, flow.0, &whole, x_in, x_out)))
                .filter(|w| whole.binary_search(w).is_err())
        } else {
            None
        };
        Share { phi, phi_at_alloc: phi, generation: self.generation, whole, residual, x_in, x_out }
    }
}

impl Strategy for PsHrw {
    fn home(&self, members: &Members, unit: &Unit) -> Option<WorkerId> {
        Some(self.ranker.home_of(members, unit.flow.0))
    }

    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        self.ranker.rebuild(members)?;
        self.seeds = members.as_slice().iter().map(|m| node_seed(m.id.0)).collect();
        self.generation += 1;
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        let phi = unit.size.max(1) as f64;
        let stale = match self.flows.get_mut(unit.flow) {
            Some(s) => {
                self.total_phi += phi - s.phi;
                s.phi = phi;
                s.generation != self.generation || (phi - s.phi_at_alloc).abs() > self.beta * s.phi_at_alloc
            }
            None => {
                self.total_phi += phi;
                true
            }
        };
        if stale {
            let share = self.allocate(members, unit.flow, phi, load);
            self.flows.insert(unit.flow, share);
        }
        let Some(share) = self.flows.get(unit.flow) else { unreachable!("inserted above") };
        match self.dispatch {
            PsDispatch::PerUnit => {
                let key = splitmix64(unit.flow.0 ^ splitmix64(unit.seq));
                members.id(self.carp_pick(members, key, &share.whole, share.x_in, share.x_out))
            }
            PsDispatch::Set => {
                let set = || share.whole.iter().chain(&share.residual);
                let queues = || set().map(|&w| load.queue(w, self.measure) as f64);
                let m = adjust::q_min(queues(), self.reading);
                let g = set().map(|w| (fast(unit.flow.0, node_seed(w.0)) >> 11) as f64);
                let k = adjust::pick(g.zip(queues()), m);
                *set().nth(k).expect("pick returns an index of the set")
            }
        }
    }

    fn forget_flow(&mut self, flow: FlowId) {
        if let Some(s) = self.flows.remove(flow) {
            self.total_phi = (self.total_phi - s.phi).max(0.0);
        }
    }
}
