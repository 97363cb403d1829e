//! Consistent hashing on a ring with virtual nodes (Karger et al., STOC 1997; ketama).
//!
//! Each worker owns `round(vnodes × w)` points (at least one) on a 64-bit ring — a count that
//! depends on its own weight only, so removing or reweighting one worker moves no other
//! worker's points; a flow goes to
//! the owner of the first point at or after its digest, wrapping around. Point `r` of worker `id`
//! is `splitmix64(node_seed(id) ^ splitmix64(r))`. Disruption on change is close to HRW's, but
//! balance depends on the number of points: with 160 per worker the max/mean share is typically
//! 1.1–1.2. Cost: a binary search over N·vnodes points.

use super::Strategy;
use super::score::{node_seed, splitmix64};
use crate::load::LoadView;
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

/// The most points a ring may hold, to keep memory bounded.
const MAX_POINTS: usize = 1 << 24;

#[derive(Debug)]
pub(crate) struct Ring {
    vnodes: u32,
    points: Vec<u64>,
    /// Member index owning each point.
    owner: Vec<u32>,
}

impl Ring {
    pub(crate) fn new(vnodes: u32) -> Self {
        Self { vnodes, points: Vec::new(), owner: Vec::new() }
    }

    /// Position of the first point at or after `d`, wrapping.
    #[inline]
    pub(crate) fn successor(&self, d: u64) -> usize {
        let i = self.points.partition_point(|&p| p < d);
        if i == self.points.len() { 0 } else { i }
    }

    /// Number of points.
    pub(crate) fn len(&self) -> usize {
        self.points.len()
    }

    /// Member index owning the point at `pos`.
    #[inline]
    pub(crate) fn owner(&self, pos: usize) -> usize {
        self.owner[pos] as usize
    }
}

impl Strategy for Ring {
    fn is_static(&self) -> bool {
        true
    }

    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        let counts: Vec<u64> = members
            .as_slice()
            .iter()
            .map(|m| ((f64::from(self.vnodes) * m.weight.get()).round() as u64).max(1))
            .collect(); // Each count is at most u64::MAX (the cast saturates), so the sum cannot wrap in u128.
        let total: u128 = counts.iter().map(|&c| u128::from(c)).sum();
        if total > MAX_POINTS as u128 {
            return Err(PlaceError::BadConfig {
                field: "vnodes",
                value: format!("{} (a ring of {total} points)", self.vnodes),
                expected: "fewer points: at most 16777216 on the ring (lower --vnodes or the weight spread)",
            });
        }
        let mut pts: Vec<(u64, u32, u32)> = Vec::with_capacity(total as usize);
        for (i, (m, &n)) in members.as_slice().iter().zip(&counts).enumerate() {
            let seed = node_seed(m.id.0);
            pts.extend((0..n).map(|r| (splitmix64(seed ^ splitmix64(r)), m.id.0, i as u32)));
        }
        pts.sort_unstable();
        self.points = pts.iter().map(|p| p.0).collect();
        self.owner = pts.iter().map(|p| p.2).collect();
        Ok(())
    }

    #[inline]
    fn place(&mut self, members: &Members, unit: &Unit, _: &LoadView<'_>) -> WorkerId {
        members.id(self.owner(self.successor(unit.flow.0)))
    }
}
