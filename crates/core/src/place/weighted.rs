//! Weighted HRW: each worker's share of flows proportional to its weight.
//!
//! - **Logarithmic** (default; Schindelhauer & Schomaker, SPAA 2005; Ceph's straw2): score
//!   `−w_i / ln(h_i)` with `h_i` the worker's score mapped into (0, 1). Exact proportional shares,
//!   and changing one weight moves keys only to or from that worker.
//! - **CARP** (Guo ch. 7, Theorem 7.1, as PS-HRW uses it): score `x_i · h_i` with the multipliers
//!   of [`super::carp`]. Exact shares too, but a weight change moves keys between other workers.
//!
//! Logarithms use `libm`, so the same key lands on the same worker on every platform. When all
//! weights are equal the logarithm is skipped: `−w/ln(h)` is increasing in `h`, so the ranking is
//! plain HRW's. Cost: N scores and N logarithms (or N multiplies for CARP).

use super::Strategy;
use super::carp;
use super::score::{fast, node_seed, unit_interval};
use crate::load::LoadView;
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Logarithmic,
    Carp,
}

#[derive(Debug)]
pub(crate) struct WeightedHrw {
    method: Method,
    seeds: Vec<u64>,
    /// Per member: the weight (logarithmic) or the CARP multiplier.
    factor: Vec<f64>,
    uniform: bool,
}

impl WeightedHrw {
    pub(crate) fn new(method: Method) -> Self {
        Self { method, seeds: Vec::new(), factor: Vec::new(), uniform: true }
    }
}

impl Strategy for WeightedHrw {
    fn is_static(&self) -> bool {
        true
    }

    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        let m = members.as_slice();
        self.seeds = m.iter().map(|m| node_seed(m.id.0)).collect();
        let w: Vec<f64> = m.iter().map(|m| m.weight.get()).collect();
        self.uniform = w.iter().all(|&v| v == w[0]);
        self.factor = match self.method {
            Method::Logarithmic => w,
            Method::Carp => carp::multipliers(&w),
        };
        Ok(())
    }

    fn place(&mut self, members: &Members, unit: &Unit, _: &LoadView<'_>) -> WorkerId {
        let d = unit.flow.0;
        let mut best = f64::NEG_INFINITY;
        let mut idx = 0;
        if self.uniform {
            let mut top = 0u64;
            for (i, &s) in self.seeds.iter().enumerate() {
                let v = fast(d, s) >> 12; // the bits unit_interval keeps: same ranking
                if i == 0 || v > top {
                    top = v;
                    idx = i;
                }
            }
            return members.id(idx);
        }
        for (i, (&s, &f)) in self.seeds.iter().zip(&self.factor).enumerate() {
            let h = unit_interval(fast(d, s));
            let score = match self.method {
                Method::Logarithmic => -f / libm::log(h),
                Method::Carp => f * h,
            };
            if score > best {
                best = score;
                idx = i;
            }
        }
        members.id(idx)
    }
}
