//! TinyLFU's frequency sketch: a count-min sketch of 4-bit counters with a doorkeeper and
//! aging by halving (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache
//! Admission Policy", ACM Transactions on Storage 13(4), 2017: §3.2 approximate counting,
//! §3.3 the reset, §3.4.2 the doorkeeper).

/// Counts stop at 15 (4 bits, §3.4.1: a frequency above what the cache needs to compare is
/// of no use).
const COUNT_MAX: u8 = 15;
/// Rows of the count-min sketch (Caffeine's depth).
const ROWS: usize = 4;

/// Approximate access counts of recently seen keys, by hash.
#[derive(Clone, Debug)]
pub(super) struct Sketch {
    /// `ROWS` rows of `width` counters, row after row.
    counts: Vec<u8>,
    width: usize,
    /// A Bloom filter that takes a key's first occurrence, so that keys seen once (most of
    /// them, under a heavy tail) do not take room in the counters (§3.4.2).
    doorkeeper: Vec<u64>,
    /// Additions since the last reset, and how many make a sample (W = 10 × the entries the
    /// cache holds, §3.3 and Caffeine's choice).
    added: u64,
    sample: u64,
}

impl Sketch {
    /// A sketch for a cache of about `entries`.
    pub(super) fn new(entries: usize) -> Self {
        let width = entries.max(16).next_power_of_two();
        Self {
            counts: vec![0; ROWS * width],
            width,
            doorkeeper: vec![0; (ROWS * width).div_ceil(64)],
            added: 0,
            sample: 10 * width as u64,
        }
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

    /// Two bits of the doorkeeper.
    fn door(&self, hash: u64) -> [usize; 2] {
        let bits = self.doorkeeper.len() * 64;
        [(hash.rotate_left(21) as usize) % bits, (hash.rotate_left(42) as usize) % bits]
    }

    fn door_has(&self, hash: u64) -> bool {
        self.door(hash).iter().all(|&b| self.doorkeeper[b / 64] & (1 << (b % 64)) != 0)
    }

    /// Counts one access to the key of `hash`.
    pub(super) fn record(&mut self, hash: u64) {
        if self.door_has(hash) {
            for s in self.slots(hash) {
                if self.counts[s] < COUNT_MAX {
                    self.counts[s] += 1;
                }
            }
        } else {
            for b in self.door(hash) {
                self.doorkeeper[b / 64] |= 1 << (b % 64);
            }
        }
        self.added += 1;
        if self.added >= self.sample {
            self.reset();
        }
    }

    /// §3.3: every count halved (so the sketch follows popularity as it shifts), the doorkeeper
    /// cleared.
    fn reset(&mut self) {
        for c in &mut self.counts {
            *c /= 2;
        }
        self.doorkeeper.fill(0);
        self.added /= 2;
    }

    /// The estimated accesses to the key of `hash` since about the last reset: the least of
    /// its counters, plus one if the doorkeeper has it.
    pub(super) fn estimate(&self, hash: u64) -> u8 {
        let min = self.slots(hash).iter().map(|&s| self.counts[s]).min().unwrap_or(0);
        min + u8::from(self.door_has(hash))
    }
}
