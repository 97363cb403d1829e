//! Hierarchical AHRW, the "hash-tree scheduler" (Guo §5.3, Def. 5.3), and its cache-aware form
//! H-CAHRW (Guo §6.4, Eq. 6.7–6.8): AHRW applied level by level down the topology tree.
//!
//! At each level the flow's score is computed against the children of the node chosen so far
//! (each tree node has its own id, so "S_i is decided by the level of the tree"), each child's
//! load is that of its subtree, and AHRW picks one child; the leaf reached is the worker.
//!
//! - **Load of an inner node** ([`ParentLoad`]): Eq. 6.7 as the text means it (erratum 4):
//!   0 if **any** child is idle, otherwise the sum of the children — which unrolls to "0 if any
//!   leaf below is idle, else the sum of the leaves". The plain sum of ch. 6.4.1's "naive" H-AHRW
//!   is the alternative.
//! - **`Q_min` per level** is taken over the siblings being compared (the source leaves it open;
//!   erratum 5), with the reading of [`super::QminReading`] from the configuration.
//! - **H-HRW** (`h-hrw`): the same descent with no load adjustment — hierarchical rendezvous
//!   hashing, as Ceph's CRUSH does it. It is H-AHRW with equal loads, and H-CAHRW's home node.
//! - **H-CAHRW**: leaf queues are weighted by their cost from the flow's home node (Eq. 6.4). The
//!   home node is found by the same descent without load adjustment, so the whole decision stays
//!   O(Σ fanout) scores rather than N.
//!
//! Workers must be leaves of the tree; an absent leaf, and a subtree with no worker, is skipped.
//! Cost: Σ fanout scores (14 instead of 64 on Niagara 2) plus one pass over the leaves' queues
//! per level, shrinking by the fanout each level.

use super::Strategy;
use super::adjust::{self, QminReading};
use super::ahrw::check_leaves;
use super::score::{HashFn, Rendezvous, argmax_where, classic, fast};
use crate::load::{LoadView, QueueMeasure};
use crate::place::{PlaceConfig, PlaceError};
use crate::topology::Topology;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

/// How an inner tree node's load is derived from its children's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ParentLoad {
    /// 0 if any child is idle, else the sum (Guo Eq. 6.7 with ∃ for ∀, as its text says).
    #[default]
    AnyIdleIsZero,
    /// The sum of the children (Guo ch. 6.4.1, H-AHRW's "naive" parent load).
    Sum,
}

/// Which hierarchical form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// Plain rendezvous at every level.
    Plain,
    /// AHRW at every level.
    Adjusted,
    /// AHRW on queues weighted by cost from the flow's home node.
    CacheAware,
}

#[derive(Debug)]
pub(crate) struct Hierarchical {
    topo: Topology,
    form: Form,
    reading: QminReading,
    parent: ParentLoad,
    measure: QueueMeasure,
    /// Prepared scores for every tree node, by node id.
    rv: Rendezvous,
    /// Whether each leaf is a worker.
    present: Vec<bool>,
    /// `count[d][i]`: workers under the `i`-th node at depth `d`.
    count: Vec<Vec<u32>>,
    /// Whether every leaf is a worker, so subtree loads are plain slice sums.
    full: bool,
    /// Candidates at the current level: (score, load, child index).
    cand: Vec<(f64, f64, u32)>,
    /// Present children and their loads at the current level (integer descent).
    kids: Vec<u32>,
    loads: Vec<u64>,
}

impl Hierarchical {
    pub(crate) fn new(topo: Topology, form: Form, config: &PlaceConfig) -> Self {
        let nodes = topo.node_id(topo.depth(), 0) + topo.leaves();
        let mut rv = Rendezvous::new(config.hash);
        rv.rebuild(0..nodes);
        Self {
            form,
            reading: config.qmin,
            parent: config.parent_load,
            measure: config.measure,
            rv,
            present: Vec::new(),
            count: Vec::new(),
            full: false,
            cand: Vec::new(),
            kids: Vec::new(),
            loads: Vec::new(),
            topo,
        }
    }

    /// Raw load of the leaves `lo..hi` that are workers: (sum, whether one is idle).
    #[inline]
    fn range_load(&self, qs: &[u64], lo: usize, hi: usize) -> (u64, bool) {
        if self.full && hi <= qs.len() && hi - lo == 1 {
            return (qs[lo], qs[lo] == 0);
        }
        if self.full && hi <= qs.len() {
            // Equality, not `min`: baseline x86-64 has no 64-bit compare, and an emulated `min`
            // costs several times more per leaf.
            let (mut sum, mut idle) = (0u64, false);
            for &v in &qs[lo..hi] {
                sum = sum.saturating_add(v);
                idle |= v == 0;
            }
            (sum, idle)
        } else {
            let (mut sum, mut idle) = (0u64, false);
            for leaf in lo..hi {
                if self.present[leaf] {
                    let q = qs.get(leaf).copied().unwrap_or(0);
                    sum = sum.saturating_add(q);
                    idle |= q == 0;
                }
            }
            (sum, idle)
        }
    }

    /// Load of the `i`-th node at depth `d` (Eq. 6.7, or the plain sum), with leaf queues
    /// weighted by their cost from `home` for H-CAHRW. A subtree that does not hold the home
    /// leaf parts from it at one level, so its weighted load is its raw load times one cost; only
    /// the subtree holding the home leaf is weighted leaf by leaf.
    fn node_load(&self, qs: &[u64], d: usize, i: u32, h: u32) -> f64 {
        let span = self.topo.span(d);
        let (lo, hi) = ((i * span) as usize, ((i + 1) * span) as usize);
        let (sum, idle) = if (lo..hi).contains(&(h as usize)) {
            let (mut sum, mut idle) = (0.0, false);
            for leaf in lo..hi {
                if self.present[leaf] {
                    let q = qs.get(leaf).copied().unwrap_or(0);
                    sum += q as f64 * self.topo.cost(h, leaf as u32);
                    idle |= q == 0;
                }
            }
            (sum, idle)
        } else {
            let (raw, idle) = self.range_load(qs, lo, hi);
            (raw as f64 * self.topo.cost(h, lo as u32), idle)
        };
        if idle && self.parent == ParentLoad::AnyIdleIsZero { 0.0 } else { sum }
    }

    /// Plain rendezvous down the tree (H-HRW, and H-CAHRW's home node): at each level the
    /// present child with the highest integer score.
    fn descend_plain(&self, d: u64) -> u32 {
        match self.rv.hash() {
            HashFn::Fast => self.descend_plain_with(|p| fast(d, p)),
            HashFn::Classic => self.descend_plain_with(|p| u64::from(classic(d, p as u32))),
        }
    }

    #[inline(always)]
    fn descend_plain_with(&self, score: impl Fn(u64) -> u64) -> u32 {
        let prep = self.rv.prepared();
        let mut node = 0u32;
        for depth in 0..self.topo.depth() {
            let f = self.topo.fanout(depth) as usize;
            let base = node as usize * f;
            let first = self.topo.node_id(depth + 1, 0) as usize + base;
            let count = &self.count[depth + 1][base..base + f];
            let pick = argmax_where(prep[first..first + f].iter().zip(count).map(|(&p, &c)| (score(p), c > 0)));
            node = (base + pick) as u32;
        }
        node
    }

    /// H-AHRW down the tree in exact integer arithmetic: at each level, the present children's
    /// subtree loads (Eq. 6.7) and [`adjust::select_exact`].
    fn descend_adjusted(&mut self, d: u64, qs: &[u64]) -> u32 {
        let mut node = 0u32;
        let (mut kids, mut loads) = (std::mem::take(&mut self.kids), std::mem::take(&mut self.loads));
        for depth in 0..self.topo.depth() {
            let f = self.topo.fanout(depth);
            let first = self.topo.node_id(depth + 1, 0);
            kids.clear();
            loads.clear();
            for c in node * f..(node + 1) * f {
                if self.count[depth + 1][c as usize] > 0 {
                    kids.push(c);
                    loads.push(self.node_load_raw(qs, depth + 1, c));
                }
            }
            let prep = self.rv.prepared();
            let pairs = kids.iter().zip(&loads);
            let k = match self.rv.hash() {
                HashFn::Fast => adjust::select_exact(
                    pairs.map(|(&c, &q)| (fast(d, prep[(first + c) as usize]) >> 11, q)),
                    self.reading,
                ),
                HashFn::Classic => adjust::select_exact(
                    pairs.map(|(&c, &q)| (u64::from(classic(d, prep[(first + c) as usize] as u32)), q)),
                    self.reading,
                ),
            };
            node = kids[k];
        }
        (self.kids, self.loads) = (kids, loads);
        node
    }

    /// Raw load of the `i`-th node at depth `d` by Eq. 6.7 (or the plain sum).
    #[inline]
    fn node_load_raw(&self, qs: &[u64], d: usize, i: u32) -> u64 {
        let span = self.topo.span(d);
        let (sum, idle) = self.range_load(qs, (i * span) as usize, ((i + 1) * span) as usize);
        if idle && self.parent == ParentLoad::AnyIdleIsZero { 0 } else { sum }
    }

    /// H-CAHRW down the tree: at each level an AHRW choice on subtree loads weighted from the
    /// flow's `home` leaf (fractional, so in `f64`).
    fn descend(&mut self, d: u64, qs: &[u64], home: u32) -> u32 {
        let mut node = 0u32;
        let mut cand = std::mem::take(&mut self.cand);
        for depth in 0..self.topo.depth() {
            let f = self.topo.fanout(depth);
            cand.clear();
            for c in node * f..(node + 1) * f {
                if self.count[depth + 1][c as usize] == 0 {
                    continue;
                }
                let g = self.rv.score_f64(d, self.topo.node_id(depth + 1, c) as usize);
                cand.push((g, self.node_load(qs, depth + 1, c, home), c));
            }
            let m = adjust::q_min(cand.iter().map(|c| c.1), self.reading);
            node = cand[adjust::pick(cand.iter().map(|c| (c.0, c.1)), m)].2;
        }
        self.cand = cand;
        node
    }
}

impl Strategy for Hierarchical {
    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        check_leaves(members, &self.topo)?;
        let n = self.topo.leaves() as usize;
        let mut present = vec![false; n];
        for m in members.as_slice() {
            present[m.id.0 as usize] = true;
        }
        let depth = self.topo.depth();
        let mut count = vec![Vec::new(); depth + 1];
        count[depth] = present.iter().map(|&p| u32::from(p)).collect();
        for d in (0..depth).rev() {
            let f = self.topo.fanout(d) as usize;
            count[d] = count[d + 1].chunks(f).map(|c| c.iter().sum()).collect();
        }
        self.full = present.iter().all(|&p| p);
        self.present = present;
        self.count = count;
        Ok(())
    }

    fn home(&self, _: &Members, unit: &Unit) -> Option<WorkerId> {
        Some(WorkerId(self.descend_plain(unit.flow.0)))
    }

    fn place(&mut self, _: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        let d = unit.flow.0;
        let qs = load.queues(self.measure);
        WorkerId(match self.form {
            Form::Plain => self.descend_plain(d),
            Form::Adjusted => self.descend_adjusted(d, qs),
            Form::CacheAware => {
                let home = self.descend_plain(d);
                self.descend(d, qs, home)
            }
        })
    }
}
