//! Rendezvous scores: the pseudo-random weight `g(c, S_i)` of a flow on a worker.
//!
//! Two functions, both pinned by golden vectors (`tests/it/golden.rs`):
//!
//! - [`HashFn::Classic`], the weight function of Thaler & Ravishankar as given in Guo §5.1.1:
//!   `g(c, S_i) = (A·((A·S_i + B) XOR D(c)) + B) mod 2^31`, `A = 1103515245`, `B = 12345`.
//!   `S_i` is the worker id; `D(c)`, which the source leaves unspecified (002_guo.md §3.2), is the
//!   top 31 bits of the flow digest. Because 2^31 divides 2^32, the arithmetic is done in wrapping
//!   `u32` and masked. Its low bits depend only on the low bits of `S` and `D`, and its shares are
//!   measurably uneven with many workers (χ² ≈ 534 for 10^6 keys over workers 0..255, where 377
//!   is the p = 10^-6 bound; uniform up to 64 workers): it is kept for fidelity, not as default.
//! - [`HashFn::Fast`], the default: each worker's id is hashed once into a 64-bit seed
//!   (`splitmix64(id ^ NODE_SALT)`), and a flow's score on it is the folded 128-bit product
//!   `lo ^ hi` of `(digest ^ seed) · K` — one multiply per worker, so a decision over N workers
//!   is N multiplies and compares ("hash the nodes once and combine with the key digest").

/// Mixed into worker ids before hashing them into seeds.
pub const NODE_SALT: u64 = 0x9E37_79B9_7F4A_7C15;
/// The multiplier of the fast score (an odd constant with well-spread bits, from wyhash).
pub const FAST_K: u64 = 0xA076_1D64_78BD_642F;
/// The classic LCG multiplier `A` (Guo §5.1.1).
pub const CLASSIC_A: u32 = 1_103_515_245;
/// The classic LCG increment `B` (Guo §5.1.1).
pub const CLASSIC_B: u32 = 12_345;
const MASK31: u32 = 0x7FFF_FFFF;

/// Which rendezvous score a policy uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashFn {
    /// One 64-bit multiply per worker (the default).
    #[default]
    Fast,
    /// The 31-bit LCG-XOR weight function of the source.
    Classic,
}

/// The splitmix64 finaliser (Steele, Lea & Flood 2014): a bijective 64-bit mixer.
#[inline]
pub const fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A worker's seed for the fast score.
#[inline]
pub const fn node_seed(id: u32) -> u64 {
    splitmix64(id as u64 ^ NODE_SALT)
}

/// The fast score of a flow digest on a worker seed.
#[inline(always)]
pub const fn fast(digest: u64, seed: u64) -> u64 {
    let p = ((digest ^ seed) as u128) * (FAST_K as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The classic score's per-worker part, `(A·S + B) mod 2^31`.
#[inline]
pub const fn classic_prep(id: u32) -> u32 {
    CLASSIC_A.wrapping_mul(id).wrapping_add(CLASSIC_B) & MASK31
}

/// The classic score of a flow digest on a worker, given [`classic_prep`] of its id.
#[inline(always)]
pub const fn classic(digest: u64, prep: u32) -> u32 {
    let d = (digest >> 33) as u32;
    CLASSIC_A.wrapping_mul(prep ^ d).wrapping_add(CLASSIC_B) & MASK31
}

/// A score as a number in the open interval (0, 1), for the weighted methods: the top 52 bits,
/// centred in their bucket. (With 53 bits the top bucket's centre, 1 − 2^-54, rounds to 1.0 and
/// `ln` of it is 0; with 52 the extremes are 2^-53 and 1 − 2^-53, both exact.)
#[inline(always)]
pub fn unit_interval(score: u64) -> f64 {
    ((score >> 12) as f64 + 0.5) * (1.0 / (1u64 << 52) as f64)
}

/// Per-worker prepared values for one score function, in member order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Rendezvous {
    hash: HashFn,
    prep: Vec<u64>,
}

impl Rendezvous {
    pub(crate) fn new(hash: HashFn) -> Self {
        Self { hash, prep: Vec::new() }
    }

    /// The prepared per-worker values (seeds, or `(A·S + B) mod 2^31`), in member order.
    pub(crate) fn prepared(&self) -> &[u64] {
        &self.prep
    }

    /// The score function.
    pub(crate) fn hash(&self) -> HashFn {
        self.hash
    }

    /// Prepares for workers `ids` (in member order).
    pub(crate) fn rebuild(&mut self, ids: impl Iterator<Item = u32>) {
        self.prep.clear();
        self.prep.extend(ids.map(|id| match self.hash {
            HashFn::Fast => node_seed(id),
            HashFn::Classic => u64::from(classic_prep(id)),
        }));
    }

    /// The score of `digest` on the `i`-th prepared worker, as a float that is exact for both
    /// functions (53 bits of the fast score; all 31 of the classic).
    #[inline(always)]
    pub(crate) fn score_f64(&self, digest: u64, i: usize) -> f64 {
        match self.hash {
            HashFn::Fast => (fast(digest, self.prep[i]) >> 11) as f64,
            HashFn::Classic => f64::from(classic(digest, self.prep[i] as u32)),
        }
    }

    /// The score of `digest` on the `i`-th prepared worker.
    #[inline(always)]
    pub(crate) fn score(&self, digest: u64, i: usize) -> u64 {
        match self.hash {
            HashFn::Fast => fast(digest, self.prep[i]),
            HashFn::Classic => u64::from(classic(digest, self.prep[i] as u32)),
        }
    }

    /// Index of the highest score (Guo §5.1.1: `f(c) = argmax_k g(c, k)`); the first on ties.
    #[inline]
    pub(crate) fn argmax(&self, digest: u64) -> usize {
        match self.hash {
            HashFn::Fast => argmax_by(&self.prep, |s| fast(digest, s)),
            HashFn::Classic => argmax_by(&self.prep, |s| u64::from(classic(digest, s as u32))),
        }
    }

    /// Indices of the two highest scores, highest first (the same index twice for one worker).
    pub(crate) fn top2(&self, digest: u64) -> (usize, usize) {
        let (mut a, mut b) = ((0u64, 0usize), (0u64, 0usize));
        let mut seen = 0;
        for i in 0..self.prep.len() {
            let s = self.score(digest, i);
            if seen == 0 || s > a.0 {
                b = a;
                a = (s, i);
            } else if seen == 1 || s > b.0 {
                b = (s, i);
            }
            seen += 1;
        }
        if seen == 1 { (a.1, a.1) } else { (a.1, b.1) }
    }
}

/// Index of the largest `f(prep[i])`, first on ties. Plain HRW's inner loop, kept apart from
/// [`argmax_where`]: without the mask and the empty-start check it is about 40% fewer instructions
/// per worker (793 against 1247 per decision at N = 64, by callgrind).
#[inline(always)]
fn argmax_by(prep: &[u64], f: impl Fn(u64) -> u64) -> usize {
    let (mut best, mut idx) = (0u64, 0usize);
    for (i, &p) in prep.iter().enumerate() {
        let s = f(p);
        let better = s > best;
        best = if better { s } else { best };
        idx = if better { i } else { idx };
    }
    idx
}

/// Index of the highest score among `(score, keep)` pairs with `keep`, the first on ties (and
/// `usize::MAX` if none is kept). Written so the compiler keeps the running maximum in registers
/// and turns the compare into conditional moves: the inner loop of every rendezvous choice.
#[inline(always)]
pub(crate) fn argmax_where(items: impl Iterator<Item = (u64, bool)>) -> usize {
    let (mut best, mut idx) = (0u64, usize::MAX);
    for (i, (v, keep)) in items.enumerate() {
        let better = keep && (v > best || idx == usize::MAX);
        best = if better { v } else { best };
        idx = if better { i } else { idx };
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_matches_the_formula_in_wide_arithmetic() {
        for (s, d) in [(0u32, 0u64), (7, u64::MAX), (63, 0x1234_5678_9ABC_DEF0), (1 << 20, 1 << 40)] {
            let a = u128::from(CLASSIC_A);
            let b = u128::from(CLASSIC_B);
            let dd = u128::from(d >> 33);
            let inner = (a * u128::from(s) + b) % (1 << 31);
            let want = (a * (inner ^ dd) + b) % (1 << 31);
            assert_eq!(u128::from(classic(d, classic_prep(s))), want);
        }
    }

    #[test]
    fn unit_interval_stays_open() {
        assert!(unit_interval(0) > 0.0);
        assert!(unit_interval(u64::MAX) < 1.0);
        assert!(libm::log(unit_interval(u64::MAX)) < 0.0);
    }

    #[test]
    fn top2_orders_the_two_best() {
        let mut rv = Rendezvous::new(HashFn::Fast);
        rv.rebuild(0..16);
        for d in 0..100u64 {
            let digest = splitmix64(d);
            let (a, b) = rv.top2(digest);
            assert_eq!(a, rv.argmax(digest));
            assert_ne!(a, b);
            let sb = rv.score(digest, b);
            assert!((0..16).filter(|&i| i != a).all(|i| rv.score(digest, i) <= sb));
        }
    }
}
