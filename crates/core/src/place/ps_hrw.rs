//! PS-HRW, proportional-share HRW (Guo ch. 7, Table 7.1, Theorem 7.1).
//!
//! Each flow (a "request") is entitled to `g_i = φ_i / Σ_j φ_j · r` of the `r` workers, with
//! `φ_i` its size (Eq. 7.3–7.4). It gets `⌊g_i⌋` whole workers — the top ones by cache-aware
//! adjusted score (CA-AHRW, [`super::ahrw`]) — plus the residual `g_i − ⌊g_i⌋` spread over the
//! others: with `c = ⌊g_i⌋` and `N' = c + (r − c)(g_i − c)`, each chosen worker has target
//! probability `1/N'` and every other `(g_i − c)/N'`, turned into CARP multipliers
//! ([`super::carp`]). A unit goes to `argmax_p x_p · h_p`.
//!
//! Choices where the source is silent or wrong (002_guo.md §3.9, erratum 7):
//! - Table 7.1's `while g > 0` loop is replaced by taking the top `⌊g⌋` workers, all distinct;
//!   calling HCAHRW repeatedly with one key would return the same worker each time.
//! - `φ_i` is the size of the flow's latest unit (the connection buffer's length, the stream's
//!   GOP), and `Σ φ` runs over the flows the placer holds; a flow leaves it by `forget_flow`.
//! - The allocation is recomputed when the flow is new, when `φ_i` has changed by more than `β`
//!   (default 16%, Fig. 7.1) since the last allocation, or when membership changed. Other flows
//!   are not recomputed when one arrives (the source's "force an update" would cost O(flows)).
//! - The source does not say how a flow's units are spread over its share. [`PsDispatch::PerUnit`]
//!   (default) hashes each unit by flow and sequence number, so the flow's units reach its workers
//!   in the target proportions — the only reading under which a flow can use more than one
//!   worker. [`PsDispatch::PerFlow`] hashes the flow alone (CARP's "same URL, same cache").
//! - The set is chosen with the flat CA-AHRW ranking rather than the tree descent, because a
//!   ranking (not a single winner) is needed.
//!
//! State: per flow, its size and chosen set. Cost: a reallocation is N scores, a sort and the
//! multipliers; a dispatch is N scores and N multiplies.

use super::Strategy;
use super::ahrw::CacheAware;
use super::carp;
use super::score::{fast, node_seed, splitmix64, unit_interval};
use crate::flow::FlowId;
use crate::flow_map::FlowMap;
use crate::load::LoadView;
use crate::place::{PlaceConfig, PlaceError};
use crate::topology::Topology;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

/// How PS-HRW spreads a flow's units over its share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PsDispatch {
    /// Each unit hashed by flow and sequence number: units spread in the target proportions.
    #[default]
    PerUnit,
    /// Each unit hashed by flow alone: the whole flow goes to one worker of its share.
    PerFlow,
}

#[derive(Debug)]
struct Share {
    phi: f64,
    phi_at_alloc: f64,
    generation: u64,
    /// Workers holding whole shares, sorted by id.
    set: Vec<WorkerId>,
    x_in: f64,
    x_out: f64,
}

#[derive(Debug)]
pub(crate) struct PsHrw {
    ranker: CacheAware,
    beta: f64,
    dispatch: PsDispatch,
    seeds: Vec<u64>,
    flows: FlowMap<Share>,
    total_phi: f64,
    generation: u64,
    scratch: Vec<f64>,
    order: Vec<usize>,
}

impl PsHrw {
    pub(crate) fn new(topo: Topology, config: &PlaceConfig) -> Self {
        Self {
            ranker: CacheAware::new(topo, config),
            beta: config.beta,
            dispatch: config.ps_dispatch,
            seeds: Vec::new(),
            flows: FlowMap::new(),
            total_phi: 0.0,
            generation: 0,
            scratch: Vec::new(),
            order: Vec::new(),
        }
    }

    fn allocate(&mut self, members: &Members, flow: FlowId, phi: f64, load: &LoadView<'_>) -> Share {
        let r = members.len();
        // Eq. 7.4: g_i = φ_i / Σφ · r.
        let g = (phi / self.total_phi * r as f64).min(r as f64);
        let c = g.floor() as usize;
        let frac = if c >= r { 0.0 } else { g - c as f64 };
        let mut set = Vec::with_capacity(c);
        if c > 0 {
            self.ranker.scores(members, flow.0, load, &mut self.scratch);
            self.order.clear();
            self.order.extend(0..r);
            let h = &self.scratch;
            self.order.sort_by(|&a, &b| h[b].total_cmp(&h[a]).then(a.cmp(&b)));
            set.extend(self.order[..c].iter().map(|&i| members.id(i)));
            set.sort();
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
        Share { phi, phi_at_alloc: phi, generation: self.generation, set, x_in, x_out }
    }
}

impl Strategy for PsHrw {
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
        let key = match self.dispatch {
            PsDispatch::PerUnit => splitmix64(unit.flow.0 ^ splitmix64(unit.seq)),
            PsDispatch::PerFlow => unit.flow.0,
        };
        let (mut best, mut idx) = (f64::NEG_INFINITY, 0);
        let mut next_in = share.set.iter().peekable();
        for (i, (m, &seed)) in members.as_slice().iter().zip(&self.seeds).enumerate() {
            let chosen = next_in.next_if(|&&w| w == m.id).is_some();
            let x = if chosen { share.x_in } else { share.x_out };
            let z = x * unit_interval(fast(key, seed));
            if z > best {
                best = z;
                idx = i;
            }
        }
        members.id(idx)
    }

    fn forget_flow(&mut self, flow: FlowId) {
        if let Some(s) = self.flows.remove(flow) {
            self.total_phi = (self.total_phi - s.phi).max(0.0);
        }
    }
}
