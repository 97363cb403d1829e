//! Least recently used, weighted: the baseline every other policy is measured against.

use std::hash::Hash;

use super::slots::{Queue, Slots};

/// A weighted LRU: the least recently used go first until a newcomer fits.
///
/// The same order as [`crate::cache::Lru`] (which adds Cacheflow's de-duplication and keeps
/// its keys ordered), in slots and a hash index, so that a hit is O(1).
#[derive(Clone, Debug)]
pub struct LruPolicy<K> {
    capacity: u64,
    slots: Slots<K>,
    /// Least recently used first.
    order: Queue,
}

impl<K: Hash + Eq> LruPolicy<K> {
    /// An empty cache whose weights sum to at most `capacity`; `seed` seeds its hash.
    pub fn new(capacity: u64, seed: u64) -> Self {
        Self { capacity, slots: Slots::new(seed), order: Queue::default() }
    }

    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(super) fn weight(&self) -> u64 {
        self.order.weight
    }

    pub(super) fn len(&self) -> usize {
        self.order.len
    }

    pub(super) fn weight_of(&self, key: &K) -> Option<u64> {
        self.slots.find(key).map(|i| self.slots.node(i).weight)
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
        self.slots.unlink(&mut self.order, i);
        self.slots.push_back(&mut self.order, i, 0);
    }

    pub(super) fn insert(&mut self, key: K, weight: u64) -> Vec<(K, u64)> {
        let mut evicted = Vec::new();
        if let Some(i) = self.slots.find(&key) {
            self.slots.unlink(&mut self.order, i);
            let old = self.slots.take(i);
            if weight > self.capacity {
                evicted.push(old);
                return evicted;
            }
        } else if weight > self.capacity {
            return evicted;
        }
        while self.order.weight + weight > self.capacity {
            let i = self.order.front().expect("over, so not empty");
            self.slots.unlink(&mut self.order, i);
            evicted.push(self.slots.take(i));
        }
        let i = self.slots.add(key, weight, 0);
        self.slots.push_back(&mut self.order, i, 0);
        evicted
    }

    pub(super) fn resize(&mut self, capacity: u64) -> Vec<(K, u64)> {
        self.capacity = capacity;
        let mut evicted = Vec::new();
        while self.order.weight > self.capacity {
            let i = self.order.front().expect("over, so not empty");
            self.slots.unlink(&mut self.order, i);
            evicted.push(self.slots.take(i));
        }
        evicted
    }

    pub(super) fn remove(&mut self, key: &K) -> bool {
        let Some(i) = self.slots.find(key) else { return false };
        self.slots.unlink(&mut self.order, i);
        self.slots.take(i);
        true
    }
}
