//! Jump consistent hash (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm",
//! 2014): a key's bucket among `n` numbered buckets, with no table.
//!
//! Buckets are slots in `slots`. Jump hash can only shrink from the end, so removing any other
//! worker moves the last slot's worker into the hole: the removed worker's keys move, and so do
//! the last slot's (≈ 2/N in all, against 1/N for HRW). That cost is reported, not hidden.
//! Weights are not supported. Cost: O(log N) expected iterations, one float division each.

use super::Strategy;
use crate::load::LoadView;
use crate::place::PlaceError;
use crate::unit::Unit;
use crate::worker::{Members, WorkerId};

#[derive(Debug, Default)]
pub(crate) struct Jump {
    slots: Vec<WorkerId>,
}

/// The bucket in `0..n` of `key` (Lamping & Veach, Fig. 1).
#[inline]
pub(crate) fn jump(mut key: u64, n: u32) -> u32 {
    let (mut b, mut j) = (-1i64, 0i64);
    while j < i64::from(n) {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as u32
}

impl Strategy for Jump {
    fn is_static(&self) -> bool {
        true
    }

    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError> {
        let mut i = 0;
        while i < self.slots.len() {
            if members.contains(self.slots[i]) {
                i += 1;
            } else {
                self.slots.swap_remove(i);
            }
        }
        for m in members.as_slice() {
            if !self.slots.contains(&m.id) {
                self.slots.push(m.id);
            }
        }
        Ok(())
    }

    #[inline]
    fn place(&mut self, _: &Members, unit: &Unit, _: &LoadView<'_>) -> WorkerId {
        self.slots[jump(unit.flow.0, self.slots.len() as u32) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::jump;

    #[test]
    fn growing_moves_keys_only_to_the_new_bucket() {
        for key in 0..2000u64 {
            let k = key.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            for n in 1..40 {
                let (a, b) = (jump(k, n), jump(k, n + 1));
                assert!(a == b || b == n);
            }
        }
    }
}
