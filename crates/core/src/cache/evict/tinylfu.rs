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
/// With weights, as moka does: the entries leaving the window are candidates; while the cache
/// is over its capacity, the oldest candidate is weighed against the victims main would evict
/// to make its room (probation's least recently used, then protected's): it is admitted, and
/// they evicted, only if its estimate beats theirs summed; else it is evicted. A candidate that
/// wins stays in probation. A hit in probation moves the
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

    /// Main's victims for a candidate that needs `need` bytes: probation's least recently used
    /// first (up to the candidates at its back, from `stop` on), then protected's; with their
    /// summed estimates. `None` if all of them together do not free `need`.
    fn victims(&self, stop: Option<u32>, need: u64) -> Option<(Vec<u32>, u32)> {
        let (mut out, mut freed, mut freq) = (Vec::new(), 0u64, 0u32);
        let mut at = self.probation.front().filter(|&v| Some(v) != stop);
        let mut in_protected = false;
        while freed < need {
            let v = match at {
                Some(v) => v,
                None if !in_protected => {
                    in_protected = true;
                    at = self.protected.front();
                    continue;
                }
                None => return None,
            };
            out.push(v);
            freed += self.slots.node(v).weight;
            freq += u32::from(self.estimate_of(v));
            at = self.slots.next(v).filter(|&n| in_protected || Some(n) != stop);
        }
        Some((out, freq))
    }

    /// Evicts until the weights fit; `candidates` (oldest first) are the entries that just
    /// left the window for probation, each to be admitted over main's victims or evicted.
    ///
    /// With weights, a candidate may need several victims' room: as moka does, it is admitted
    /// only if its estimate beats the victims' estimates summed (so a large newcomer must be
    /// asked for more than all it would push out together).
    fn fit(&mut self, candidates: &[u32], evicted: &mut Vec<(K, u64)>) {
        let mut next = 0;
        while self.weight() > self.capacity {
            let need = self.weight() - self.capacity;
            let Some(&c) = candidates.get(next) else {
                // No candidate: main's victim goes, else the window's oldest.
                let v = self.probation.front().or(self.protected.front()).or(self.window.front());
                evicted.push(self.drop_slot(v.expect("over the capacity, so something is held")));
                continue;
            };
            match self.victims(Some(c), need) {
                Some((victims, freq)) if u32::from(self.estimate_of(c)) > freq => {
                    for v in victims {
                        evicted.push(self.drop_slot(v));
                    }
                }
                _ => {
                    next += 1;
                    evicted.push(self.drop_slot(c));
                }
            }
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
