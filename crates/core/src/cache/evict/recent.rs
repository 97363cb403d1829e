//! Which keys missed lately, for [`super::shift::ShiftWatch`]: a miss of a key that missed
//! not long ago is a key asked for again, the mark of a popularity shift (the new popular keys
//! miss, are asked for again, and miss again until they are admitted), where a scan's misses
//! are of keys asked for once.
//!
//! Two generations of a Bloom filter (Bloom, "Space/time trade-offs in hash coding with
//! allowable errors", CACM 13(7), 1970) of the keys' hashes, two bits a key, each generation
//! holding as many misses as the cache holds entries and 16 bits for each of them (a false
//! positive about 1.4 % of the time per generation): 4 bytes per entry held, not a copy of
//! any key. When the newer generation is full, the older is dropped (the S3-FIFO ghost queue's
//! bounded memory of what left, Yang et al., SOSP 2023, as two bit arrays).

/// Bits per miss a generation holds.
const BITS_PER_MISS: usize = 16;

/// A generation: its bits, and how many misses it has taken.
#[derive(Clone, Debug, Default)]
struct Generation {
    bits: Vec<u64>,
    added: usize,
}

impl Generation {
    fn sized(misses: usize) -> Self {
        let bits = (misses.max(64) * BITS_PER_MISS).next_power_of_two();
        Self { bits: vec![0; bits / 64], added: 0 }
    }

    /// Two bit positions by double hashing over the hash's halves.
    fn positions(&self, hash: u64) -> [usize; 2] {
        let mask = self.bits.len() * 64 - 1;
        let (a, b) = (hash as u32 as usize, ((hash >> 32) as usize) | 1);
        [a & mask, a.wrapping_add(b) & mask]
    }

    fn has(&self, hash: u64) -> bool {
        !self.bits.is_empty() && self.positions(hash).iter().all(|&p| self.bits[p / 64] & (1 << (p % 64)) != 0)
    }

    fn add(&mut self, hash: u64) {
        for p in self.positions(hash) {
            self.bits[p / 64] |= 1 << (p % 64);
        }
        self.added += 1;
    }
}

/// The keys (by hash) that missed in about the last two cache-fuls of misses.
#[derive(Clone, Debug, Default)]
pub(super) struct RecentMisses {
    newer: Generation,
    older: Generation,
}

impl RecentMisses {
    /// Counts a miss of the key of `hash` in a cache holding `entries`; true if the key missed
    /// lately (or, rarely, a key that shares its bits did).
    pub(super) fn again(&mut self, hash: u64, entries: usize) -> bool {
        let again = self.newer.has(hash) || self.older.has(hash);
        if self.newer.bits.is_empty() || self.newer.added >= entries.max(64) {
            // A full generation (or a cache grown past it) starts the next, sized to the cache.
            self.older = std::mem::replace(&mut self.newer, Generation::sized(entries));
        }
        self.newer.add(hash);
        again
    }
}
