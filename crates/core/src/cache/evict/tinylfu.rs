//! W-TinyLFU (Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission
//! Policy", ACM Transactions on Storage 13(4), 2017, §4 "W-TinyLFU"), as Caffeine and moka
//! build it, with object sizes.

use std::hash::Hash;

use super::sketch::Sketch;
use super::slots::{Queue, Slots};

const WINDOW: u8 = 0;
const PROBATION: u8 = 1;
const PROTECTED: u8 = 2;

/// W-TinyLFU: a small LRU window that newcomers enter (1 % of the capacity, the paper's
/// W-TinyLFU(1%)), and a main segmented LRU (§4: probation, and protected taking 80 % of it)
/// that an entry leaving the window enters only if TinyLFU admits it: if the sketch
/// ([`Sketch`]) estimates it was asked for more often than the entry main would evict for it.
/// The window lets bursts of new keys earn their frequency; the admission keeps one-hit
/// wonders from pushing out what is popular, and the halving reset lets popularity shift.
///
/// As in Caffeine with weights: the entries leaving the window are candidates; while the
/// cache is over its capacity, the oldest candidate duels main's victim (probation's least
/// recently used, else protected's), and the one with the lower estimate (the candidate on a
/// tie) is evicted; a candidate that wins stays in probation. A hit in probation moves the
/// entry to protected, whose overflow goes back to probation.
///
/// Left out of Caffeine: the window's size is fixed (Caffeine adapts it by hill climbing), and
/// there is no random admission of warm candidates (Caffeine's guard against hash flooding;
/// here the hash is seeded instead, see `Seeded`).
#[derive(Clone, Debug)]
pub struct TinyLfu<K> {
    capacity: u64,
    window_share: u64,
    protected_share: u64,
    slots: Slots<K>,
    window: Queue,
    probation: Queue,
    protected: Queue,
    sketch: Sketch,
}

impl<K: Hash + Eq + Clone> TinyLfu<K> {
    /// An empty cache whose weights sum to at most `capacity`; `seed` seeds its hash.
    pub fn new(capacity: u64, seed: u64) -> Self {
        let window_share = capacity / 100;
        Self {
            capacity,
            window_share,
            protected_share: (capacity - window_share) / 10 * 8,
            slots: Slots::new(seed),
            window: Queue::default(),
            probation: Queue::default(),
            protected: Queue::default(),
            sketch: Sketch::new(16),
        }
    }

    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(super) fn weight(&self) -> u64 {
        self.window.weight + self.probation.weight + self.protected.weight
    }

    pub(super) fn len(&self) -> usize {
        self.window.len + self.probation.len + self.protected.len
    }

    pub(super) fn weight_of(&self, key: &K) -> Option<u64> {
        self.slots.find(key).map(|i| self.slots.node(i).weight)
    }

    /// The sketch's estimate of how often `key` was asked for lately (for tests of admission).
    pub fn frequency(&self, key: &K) -> u8 {
        self.sketch.estimate(self.slots.hash(key))
    }

    /// Which segment `key` is in: "window", "probation" or "protected" (for tests).
    pub fn segment_of(&self, key: &K) -> Option<&'static str> {
        self.slots.find(key).map(|i| match self.slots.node(i).queue {
            WINDOW => "window",
            PROBATION => "probation",
            _ => "protected",
        })
    }

    fn queue_mut(&mut self, tag: u8) -> &mut Queue {
        match tag {
            WINDOW => &mut self.window,
            PROBATION => &mut self.probation,
            _ => &mut self.protected,
        }
    }

    fn drop_slot(&mut self, i: u32) -> (K, u64) {
        let tag = self.slots.node(i).queue;
        let mut q = *self.queue_mut(tag);
        self.slots.unlink(&mut q, i);
        *self.queue_mut(tag) = q;
        self.slots.take(i)
    }

    /// A use of the entry in slot `i`: to the back of its segment, or from probation to
    /// protected (whose overflow goes back to probation).
    fn used(&mut self, i: u32) {
        match self.slots.node(i).queue {
            WINDOW => {
                self.slots.unlink(&mut self.window, i);
                self.slots.push_back(&mut self.window, i, WINDOW);
            }
            PROBATION => {
                self.slots.requeue(&mut self.probation, &mut self.protected, i, PROTECTED);
                while self.protected.weight > self.protected_share
                    && let Some(j) = self.protected.front()
                    && j != i
                {
                    self.slots.requeue(&mut self.protected, &mut self.probation, j, PROBATION);
                }
            }
            _ => {
                self.slots.unlink(&mut self.protected, i);
                self.slots.push_back(&mut self.protected, i, PROTECTED);
            }
        }
    }

    pub(super) fn touch(&mut self, key: &K) -> bool {
        let (hash, i) = self.slots.find_hashed(key);
        let Some(i) = i else { return false };
        self.sketch.record(hash);
        self.used(i);
        true
    }

    fn estimate_of(&self, i: u32) -> u8 {
        self.sketch.estimate(self.slots.hash(self.slots.node(i).key.as_ref().expect("in use")))
    }

    /// Evicts until the weights fit; `candidates` (oldest first) are the entries that just
    /// left the window for probation, each to be admitted over main's victims or evicted.
    fn fit(&mut self, candidates: &[u32], evicted: &mut Vec<(K, u64)>) {
        let mut next = 0;
        while self.weight() > self.capacity {
            let candidate = candidates[next..].first().copied();
            // Main's victim: probation's least recently used that is not a candidate (the
            // candidates are at probation's back), else protected's, else the window's.
            let victim = match self.probation.front() {
                Some(v) if Some(v) != candidate => Some(v),
                _ => self.protected.front().or(self.window.front()),
            };
            let evict = match (candidate, victim) {
                (Some(c), Some(v)) => {
                    if self.estimate_of(c) > self.estimate_of(v) {
                        v
                    } else {
                        next += 1;
                        c
                    }
                }
                (Some(c), None) => {
                    next += 1;
                    c
                }
                (None, Some(v)) => v,
                (None, None) => unreachable!("over the capacity, so something is held"),
            };
            evicted.push(self.drop_slot(evict));
        }
    }

    pub(super) fn insert(&mut self, key: K, weight: u64) -> Vec<(K, u64)> {
        let mut evicted = Vec::new();
        let (hash, found) = self.slots.find_hashed(&key);
        self.sketch.record(hash);
        if let Some(i) = found {
            if weight > self.capacity {
                evicted.push(self.drop_slot(i));
                return evicted;
            }
            // A new version of a held entry: a use, with its new weight.
            let tag = self.slots.node(i).queue;
            let mut q = *self.queue_mut(tag);
            self.slots.reweigh(&mut q, i, weight);
            *self.queue_mut(tag) = q;
            self.used(i);
            self.fit(&[], &mut evicted);
            return evicted;
        }
        if weight > self.capacity {
            return evicted;
        }
        if self.len() + 1 > self.sketch.width() {
            // Caffeine sizes the sketch to the entries; with weights their number is learnt
            // as they come (the counts start over, a few times while the cache fills).
            self.sketch = Sketch::new((self.len() + 1) * 2);
        }
        let i = self.slots.add(key, weight, WINDOW);
        self.slots.push_back(&mut self.window, i, WINDOW);
        let mut candidates = Vec::new();
        while self.window.weight > self.window_share
            && let Some(c) = self.window.front()
        {
            self.slots.requeue(&mut self.window, &mut self.probation, c, PROBATION);
            candidates.push(c);
        }
        self.fit(&candidates, &mut evicted);
        evicted
    }

    pub(super) fn remove(&mut self, key: &K) -> bool {
        let Some(i) = self.slots.find(key) else { return false };
        self.drop_slot(i);
        true
    }
}
