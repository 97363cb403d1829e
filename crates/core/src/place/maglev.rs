//! Maglev hashing (Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load
//! Balancer", NSDI 2016, §3.4): a prime-sized lookup table filled from per-worker permutations.
//!
//! Worker `id` has `offset = splitmix64(seed ^ 1) mod M` and `skip = splitmix64(seed ^ 2) mod
//! (M − 1) + 1` with `seed = node_seed(id)`; its preference list is `offset + j·skip mod M`.
//! Workers take turns claiming their next free preferred slot until the table is full (Pseudocode
//! 1). With weights, a worker's turns per round are proportional to its weight (credits of
//! `w / max w` per round). A flow goes to `table[digest mod M]`. Near-perfect balance and O(1)
//! lookup; on a membership change some keys move between workers that stayed (the table is
//! rebuilt), which `switchyard place` reports. Cost: one division and one load; a rebuild is
//! O(M log M).

use super::Strategy;
use super::score::{node_seed, splitmix64};
use crate::load::LoadView;
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

/// Whether `n` is prime (trial division; table sizes are small).
pub(crate) fn is_prime(n: u32) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2u32;
    while d.saturating_mul(d) <= n {
        if n.is_multiple_of(d) {
            return false;
        }
        d += 1;
    }
    true
}

#[derive(Debug)]
pub(crate) struct Maglev {
    size: u32,
    /// Member index for each slot.
    table: Vec<u32>,
}

impl Maglev {
    pub(crate) fn new(size: u32) -> Self {
        Self { size, table: Vec::new() }
    }
}

impl Strategy for Maglev {
    fn is_static(&self) -> bool {
        true
    }

    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        let m = u64::from(self.size);
        if (members.len() as u64) > m {
            return Err(PlaceError::BadConfig {
                field: "maglev table size",
                value: self.size.to_string(),
                expected: "a prime at least as large as the number of workers (100× is recommended)",
            });
        }
        let n = members.len();
        let (offset, skip): (Vec<u64>, Vec<u64>) = members
            .as_slice()
            .iter()
            .map(|w| {
                let seed = node_seed(w.id.0);
                (splitmix64(seed ^ 1) % m, splitmix64(seed ^ 2) % (m - 1).max(1) + 1)
            })
            .unzip();
        let wmax = members.as_slice().iter().map(|w| w.weight.get()).fold(0.0, f64::max);
        let step: Vec<f64> = members.as_slice().iter().map(|w| w.weight.get() / wmax).collect();
        let mut credit = vec![0.0f64; n];
        let mut next = vec![0u64; n];
        let mut table = vec![u32::MAX; self.size as usize];
        let mut filled = 0u64;
        'fill: loop {
            for i in 0..n {
                credit[i] += step[i];
                while credit[i] >= 1.0 {
                    credit[i] -= 1.0;
                    let mut slot = ((offset[i] + next[i] * skip[i]) % m) as usize;
                    while table[slot] != u32::MAX {
                        next[i] += 1;
                        slot = ((offset[i] + next[i] * skip[i]) % m) as usize;
                    }
                    table[slot] = i as u32;
                    next[i] += 1;
                    filled += 1;
                    if filled == m {
                        break 'fill;
                    }
                }
            }
        }
        self.table = table;
        Ok(())
    }

    #[inline]
    fn place(&mut self, members: &Members, unit: &Unit, _: &LoadView<'_>) -> WorkerId {
        members.id(self.table[(unit.flow.0 % u64::from(self.size)) as usize] as usize)
    }
}
