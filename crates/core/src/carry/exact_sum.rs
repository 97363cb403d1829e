//! An exact sum of positive finite `f64`s that are added and taken away in any order: the
//! receiver's Σw over its live channels, kept as channels come and go rather than summed per
//! frame. A float running sum drifts as terms are added and taken away (one live channel of
//! weight 1 left a sum of 1.0000000000000004, and its share of a 40-frame window came to 39);
//! this one holds every term as an integer multiple of 2⁻¹⁰⁷⁴ (the least `f64`), so the sum is
//! exact and its value the one `f64` nearest the true sum, whatever came and went before
//! (Kulisch's long accumulator).

/// Words enough for 2⁶⁴ terms of the largest `f64`: bits from 2⁻¹⁰⁷⁴ to 2¹⁰⁸⁸.
const WORDS: usize = 34;

/// See the module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ExactSum {
    /// Little-endian: bit 0 of word 0 is 2⁻¹⁰⁷⁴.
    words: [u64; WORDS],
}

impl Default for ExactSum {
    fn default() -> Self {
        Self { words: [0; WORDS] }
    }
}

/// `x` (positive and finite) as an integer multiple of 2⁻¹⁰⁷⁴: its significand and where it
/// starts.
fn parts(x: f64) -> (u64, usize) {
    debug_assert!(x.is_finite() && x >= 0.0, "{x}");
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as usize;
    let fraction = bits & ((1 << 52) - 1);
    match exponent {
        // Subnormal (or zero): fraction · 2⁻¹⁰⁷⁴.
        0 => (fraction, 0),
        // (2⁵² + fraction) · 2^(exponent − 1075).
        e => (fraction | 1 << 52, e - 1),
    }
}

impl ExactSum {
    /// Adds `x` (positive and finite).
    pub(crate) fn add(&mut self, x: f64) {
        let (significand, at) = parts(x);
        let wide = u128::from(significand) << (at % 64);
        let mut carry = 0u128;
        for (k, part) in [wide as u64, (wide >> 64) as u64].into_iter().enumerate() {
            let sum = u128::from(self.words[at / 64 + k]) + u128::from(part) + carry;
            self.words[at / 64 + k] = sum as u64;
            carry = sum >> 64;
        }
        let mut i = at / 64 + 2;
        while carry > 0 {
            let (sum, over) = self.words[i].overflowing_add(1);
            self.words[i] = sum;
            carry = u128::from(over);
            i += 1;
        }
    }

    /// Takes away `x`, which was added before.
    pub(crate) fn sub(&mut self, x: f64) {
        let (significand, at) = parts(x);
        let wide = u128::from(significand) << (at % 64);
        let mut borrow = false;
        for (k, part) in [wide as u64, (wide >> 64) as u64].into_iter().enumerate() {
            let (d, b1) = self.words[at / 64 + k].overflowing_sub(part);
            let (d, b2) = d.overflowing_sub(u64::from(borrow));
            self.words[at / 64 + k] = d;
            borrow = b1 || b2;
        }
        let mut i = at / 64 + 2;
        while borrow {
            let (d, b) = self.words[i].overflowing_sub(1);
            self.words[i] = d;
            borrow = b;
            i += 1;
        }
    }

    /// The 64 bits from absolute position `lowest` up (0 below the accumulator).
    fn window(&self, lowest: isize) -> u64 {
        let word = |i: isize| if (0..WORDS as isize).contains(&i) { self.words[i as usize] } else { 0 };
        let (i, shift) = (lowest.div_euclid(64), lowest.rem_euclid(64) as u32);
        if shift == 0 { word(i) } else { (word(i) >> shift) | (word(i + 1) << (64 - shift)) }
    }

    /// The sum, rounded to the nearest `f64` (ties to even); infinity past the largest.
    pub(crate) fn value(&self) -> f64 {
        let Some(top) = (0..WORDS).rev().find(|i| self.words[*i] != 0) else { return 0.0 };
        // The highest bit set.
        let p = top * 64 + 63 - self.words[top].leading_zeros() as usize;
        if p < 53 {
            // Fewer than 54 bits: the encoding of an `f64` below 2⁻¹⁰²¹ is its count of 2⁻¹⁰⁷⁴.
            return f64::from_bits(self.words[0]);
        }
        // The 64 bits from the highest down, and whether any below them is set.
        let lowest = p as isize - 63;
        let head = self.window(lowest);
        let sticky = lowest > 0 && {
            let (i, shift) = (lowest as usize / 64, lowest as usize % 64);
            self.words[..i].iter().any(|w| *w != 0) || self.words[i] & ((1 << shift) - 1) != 0
        };
        let mut significand = head >> 11;
        let rest = head & 0x7ff;
        let mut p = p;
        if rest > 0x400 || (rest == 0x400 && (sticky || significand & 1 == 1)) {
            significand += 1;
            if significand == 1 << 53 {
                significand >>= 1;
                p += 1;
            }
        }
        // An `f64` whose highest bit is at p has the biased exponent p − 51.
        let exponent = p as u64 - 51;
        if exponent >= 0x7ff {
            return f64::INFINITY;
        }
        f64::from_bits(exponent << 52 | (significand & ((1 << 52) - 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The exact sum of `xs`, rounded once: the rational sum through integers scaled by 2¹⁰⁷⁴
    /// is out of reach, so this checks against a sum that is exact when every term is a
    /// multiple of 2⁻⁶⁰ below 2⁶⁰ (i128 fixed point).
    fn fixed(xs: &[f64]) -> f64 {
        let total: i128 = xs.iter().map(|x| (x * (1u128 << 60) as f64) as i128).sum();
        // The integer holds the exact sum; converting it rounds once, to nearest.
        total as f64 / (1u128 << 60) as f64
    }

    #[test]
    fn one_term_left_is_that_term() {
        let mut s = ExactSum::default();
        for x in [0.1, 0.2, 1.0, 0.3, 7.0, 1e-300, 1e300] {
            s.add(x);
        }
        for x in [0.1, 0.2, 0.3, 7.0, 1e-300, 1e300] {
            s.sub(x);
        }
        assert_eq!(s.value(), 1.0);
        s.sub(1.0);
        assert_eq!(s, ExactSum::default());
        assert_eq!(s.value(), 0.0);
    }

    #[test]
    fn extremes() {
        let mut s = ExactSum::default();
        s.add(f64::from_bits(1));
        assert_eq!(s.value(), f64::from_bits(1), "the least subnormal");
        s.add(f64::MIN_POSITIVE);
        assert_eq!(s.value(), f64::MIN_POSITIVE + f64::from_bits(1));
        let mut s = ExactSum::default();
        s.add(f64::MAX);
        assert_eq!(s.value(), f64::MAX);
        s.add(f64::MAX);
        assert_eq!(s.value(), f64::INFINITY, "past the largest");
        s.sub(f64::MAX);
        assert_eq!(s.value(), f64::MAX);
        // Ties go to even: 2⁵³ + 1 is halfway between 2⁵³ and 2⁵³ + 2.
        let mut s = ExactSum::default();
        s.add(9007199254740992.0);
        s.add(1.0);
        assert_eq!(s.value(), 9007199254740992.0);
        // Just past halfway rounds up: the bit below the halfway bit is in the sticky part.
        s.add(libm::pow(2.0, -60.0));
        assert_eq!(s.value(), 9007199254740994.0);
    }

    proptest! {
        /// Added and taken away in any order, the sum is the exact sum of what is left,
        /// rounded once.
        #[test]
        fn the_sum_is_exact_whatever_came_and_went(
            xs in proptest::collection::vec((1u64..1 << 50, 0i32..60, any::<bool>()), 1..200),
        ) {
            let mut s = ExactSum::default();
            let mut left = Vec::new();
            for (m, e, keep) in xs {
                // Multiples of 2⁻⁶⁰ below 2⁶⁰, so that the fixed-point check is exact.
                let x = m as f64 * libm::pow(2.0, f64::from(e - 60));
                s.add(x);
                if keep {
                    left.push(x);
                } else {
                    s.sub(x);
                }
            }
            prop_assert_eq!(s.value(), fixed(&left));
        }
    }
}
