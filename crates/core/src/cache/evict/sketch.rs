//! TinyLFU's frequency sketch: a count-min sketch of 4-bit counters with aging by halving
//! (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", ACM
//! Transactions on Storage 13(4), 2017: §3.2 approximate counting, §3.3 the reset).
//!
//! No doorkeeper (§3.4.2), as Caffeine and moka 0.12 have none: halving clears it, so every
//! key it held loses the one it added, and with the faster aging below that cost hits. In
//! `switchyard bench eviction` (seeds 1–3), halving every 5 × the width, the mean hit ratio
//! was 65.6 % with a doorkeeper against 66.7–67.5 % without (every 4–6 × the width); at 10 ×,
//! where the doorkeeper was worth 0.2 point, the shifting trace was 5.7 points from the best.

/// Counts stop at 15 (4 bits, §3.4.1: a frequency above what the cache needs to compare is
/// of no use).
const COUNT_MAX: u8 = 15;
/// Rows of the count-min sketch (Caffeine's depth).
const ROWS: usize = 4;
/// Additions between halvings, per counter of a row.
///
/// §3.3's W is 10 × the entries; here the width is 1–4 × the entries (made 2–4 × when the
/// entries outgrow it, see [`Sketch::new`]), so this is W = 8–32 × the entries. It is a
/// compromise between Zipf, which wants a long memory, and the shifting trace, which wants a
/// short one: in `bench eviction` (seeds 1–3, before the shift watch), the worst gaps to the
/// best were Zipf 1.1 and shifting 5.7 points at 10 per counter, 0.35 and 2.8 at 8, 2.4 and
/// 2.3 at 6, 4.6 and 1.0 at 4. [`super::shift::ShiftWatch`] shortens the memory when
/// popularity moves.
const SAMPLE_PER_COUNTER: u64 = 8;

/// Approximate access counts of recently seen keys, by hash.
#[derive(Clone, Debug)]
pub(super) struct Sketch {
    /// `ROWS` rows of `width` counters, row after row.
    counts: Vec<u8>,
    width: usize,
    /// Additions since the last halving, and how many make a sample (§3.3's W).
    added: u64,
    sample: u64,
}

impl Sketch {
    /// A sketch for a cache of about `entries`: twice as many counters per row, rounded up to
    /// a power of two.
    pub(super) fn new(entries: usize) -> Self {
        let width = entries.saturating_mul(2).max(16).next_power_of_two();
        Self { counts: vec![0; ROWS * width], width, added: 0, sample: SAMPLE_PER_COUNTER * width as u64 }
    }

    /// The sketch's width, in counters per row.
    pub(super) fn width(&self) -> usize {
        self.width
    }

    /// A counter per row: double hashing over the two halves of the hash.
    fn slots(&self, hash: u64) -> [usize; ROWS] {
        let (a, b) = (hash as u32 as usize, ((hash >> 32) as usize) | 1);
        let mask = self.width - 1;
        std::array::from_fn(|r| r * self.width + (a.wrapping_add(r.wrapping_mul(b)) & mask))
    }

    /// Counts one access to the key of `hash`.
    pub(super) fn record(&mut self, hash: u64) {
        for s in self.slots(hash) {
            if self.counts[s] < COUNT_MAX {
                self.counts[s] += 1;
            }
        }
        self.added += 1;
        if self.added >= self.sample {
            self.halve();
        }
    }

    /// §3.3's reset: every count halved, so the sketch follows popularity as it shifts.
    pub(super) fn halve(&mut self) {
        for c in &mut self.counts {
            *c /= 2;
        }
        self.added /= 2;
    }

    /// The estimated accesses to the key of `hash` since about the last halving: the least of
    /// its counters.
    pub(super) fn estimate(&self, hash: u64) -> u8 {
        self.slots(hash).iter().map(|&s| self.counts[s]).min().unwrap_or(0)
    }
}
