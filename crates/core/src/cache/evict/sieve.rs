//! SIEVE (Zhang, Yang, Yue, Vigfusson and Rashmi, "SIEVE is Simpler than LRU: an Efficient
//! Turn-Key Eviction Algorithm for Web Caches", NSDI 2024, §3 and its Algorithm 1), with
//! object sizes.

use std::hash::Hash;

use super::slots::{NIL, Queue, Slots};

/// SIEVE: one FIFO queue, a visited bit per entry and a hand.
///
/// A hit only sets the entry's visited bit (no queue moves: cheaper than LRU, and lock-free in
/// the paper's setting). To evict, the hand walks from the oldest entry toward the newest,
/// clearing visited bits, and evicts the first entry it finds unvisited; the hand stays where
/// it stopped, so entries that survived once keep their place while newcomers behind them are
/// sifted quickly ("lazy promotion, quick demotion", §2). At the newest end the hand wraps to
/// the oldest.
///
/// With object sizes (the paper evaluates unit sizes; its libCacheSim code evicts by bytes the
/// same way): a newcomer evicts until it fits. A newcomer heavier than the capacity is not held.
#[derive(Clone, Debug)]
pub struct Sieve<K> {
    capacity: u64,
    slots: Slots<K>,
    /// Oldest first (the paper's tail is our front).
    queue: Queue,
    /// The next entry the hand looks at; `NIL`: start from the oldest.
    hand: u32,
}

const VISITED: u8 = 1;

impl<K: Hash + Eq> Sieve<K> {
    /// An empty cache whose weights sum to at most `capacity`; `seed` seeds its hash.
    pub fn new(capacity: u64, seed: u64) -> Self {
        Self { capacity, slots: Slots::new(seed), queue: Queue::default(), hand: NIL }
    }

    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(super) fn weight(&self) -> u64 {
        self.queue.weight
    }

    pub(super) fn len(&self) -> usize {
        self.queue.len
    }

    pub(super) fn weight_of(&self, key: &K) -> Option<u64> {
        self.slots.find(key).map(|i| self.slots.node(i).weight)
    }

    /// Whether `key` is held and its visited bit set (for tests of the hand).
    pub fn visited(&self, key: &K) -> Option<bool> {
        self.slots.find(key).map(|i| self.slots.node(i).bits & VISITED != 0)
    }

    pub(super) fn touch(&mut self, key: &K) -> bool {
        let Some(i) = self.slots.find(key) else { return false };
        self.touch_slot(i);
        true
    }

    pub(super) fn slot_of(&self, key: &K) -> Option<u32> {
        self.slots.find(key)
    }

    pub(super) fn holds_slot(&self, i: u32) -> bool {
        self.slots.in_use(i)
    }

    pub(super) fn touch_slot(&mut self, i: u32) {
        self.slots.node_mut(i).bits |= VISITED;
    }

    /// Takes slot `i` off the queue, moving the hand past it first.
    fn drop_slot(&mut self, i: u32) -> (K, u64) {
        if self.hand == i {
            self.hand = self.slots.next(i).unwrap_or(NIL);
        }
        self.slots.unlink(&mut self.queue, i);
        self.slots.take(i)
    }

    /// Algorithm 1's `Evict`: the first unvisited entry from the hand on.
    fn evict_one(&mut self) -> (K, u64) {
        let mut at = if self.hand == NIL { self.queue.head } else { self.hand };
        loop {
            let n = self.slots.node_mut(at);
            if n.bits & VISITED == 0 {
                break;
            }
            n.bits &= !VISITED;
            at = self.slots.next(at).unwrap_or(self.queue.head);
        }
        self.hand = at;
        self.drop_slot(at)
    }

    pub(super) fn insert(&mut self, key: K, weight: u64) -> Vec<(K, u64)> {
        let mut evicted = Vec::new();
        if let Some(i) = self.slots.find(&key) {
            if weight > self.capacity {
                evicted.push(self.drop_slot(i));
                return evicted;
            }
            // A new version of a held entry: a use, at its place, with its new weight.
            self.slots.reweigh(&mut self.queue, i, weight);
            self.slots.node_mut(i).bits |= VISITED;
            while self.queue.weight > self.capacity {
                evicted.push(self.evict_one());
            }
            return evicted;
        }
        if weight > self.capacity {
            return evicted;
        }
        while self.queue.weight + weight > self.capacity {
            evicted.push(self.evict_one());
        }
        let i = self.slots.add(key, weight, 0);
        self.slots.push_back(&mut self.queue, i, 0);
        evicted
    }

    pub(super) fn resize(&mut self, capacity: u64) -> Vec<(K, u64)> {
        self.capacity = capacity;
        let mut evicted = Vec::new();
        while self.queue.weight > self.capacity {
            evicted.push(self.evict_one());
        }
        evicted
    }

    pub(super) fn remove(&mut self, key: &K) -> bool {
        let Some(i) = self.slots.find(key) else { return false };
        self.drop_slot(i);
        true
    }
}
