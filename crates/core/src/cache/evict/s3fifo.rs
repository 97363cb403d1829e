//! S3-FIFO (Yang, Zhang, Qiu, Yue and Rashmi, "FIFO queues are all you need for cache
//! eviction", SOSP 2023, §4 and its Algorithm 1), with object sizes.

use std::hash::Hash;

use super::slots::{Queue, Slots};

const SMALL: u8 = 0;
const MAIN: u8 = 1;
const GHOST: u8 = 2;
/// Frequencies are counted in two bits (§4.2).
const FREQ_MAX: u8 = 3;

/// S3-FIFO: a small FIFO queue that newcomers enter (10 % of the capacity, §4.2), a main
/// FIFO queue (the rest), and a ghost FIFO of keys recently evicted from the small queue.
///
/// Most objects are requested once (one-hit wonders): they pass through the small queue and
/// leave it quickly ("quick demotion", §3). An entry reaching the small queue's end is moved to
/// main if it was used while in it, else it leaves and its key goes to the ghost queue; a
/// newcomer whose key is a ghost goes straight to main. Main is a FIFO with reinsertion: an
/// entry at its end that was used (a count up to 3) goes back in with its count less one.
///
/// Decisions where the paper leaves room, and with sizes:
/// - The text (§4.2) moves an entry "accessed at least once" to main, while Algorithm 1 tests
///   `freq > 1`; we follow the text. Its count is cleared on the move, so that main's
///   reinsertions count uses made in main.
/// - Sizes are bytes: the small queue's share is 10 % of the capacity in bytes, the ghost
///   queue remembers keys whose weights sum to at most main's share (the paper's ghost holds as
///   many entries as main), and a newcomer evicts until it fits. A newcomer heavier than the
///   capacity is not held.
#[derive(Clone, Debug)]
pub struct S3Fifo<K> {
    capacity: u64,
    small_share: u64,
    slots: Slots<K>,
    small: Queue,
    main: Queue,
    ghost: Queue,
}

impl<K: Hash + Eq + Clone> S3Fifo<K> {
    /// An empty cache whose weights sum to at most `capacity`; `seed` seeds its hash.
    pub fn new(capacity: u64, seed: u64) -> Self {
        Self {
            capacity,
            small_share: capacity / 10,
            slots: Slots::new(seed),
            small: Queue::default(),
            main: Queue::default(),
            ghost: Queue::default(),
        }
    }

    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    pub(super) fn weight(&self) -> u64 {
        self.small.weight + self.main.weight
    }

    pub(super) fn len(&self) -> usize {
        self.small.len + self.main.len
    }

    fn held(&self, key: &K) -> Option<u32> {
        self.slots.find(key).filter(|&i| self.slots.node(i).queue != GHOST)
    }

    pub(super) fn weight_of(&self, key: &K) -> Option<u64> {
        self.held(key).map(|i| self.slots.node(i).weight)
    }

    /// Which queue `key` is on: "small", "main" or "ghost" (for tests of the queues).
    pub fn queue_of(&self, key: &K) -> Option<&'static str> {
        self.slots.find(key).map(|i| match self.slots.node(i).queue {
            SMALL => "small",
            MAIN => "main",
            _ => "ghost",
        })
    }

    pub(super) fn touch(&mut self, key: &K) -> bool {
        let Some(i) = self.held(key) else { return false };
        self.touch_slot(i);
        true
    }

    pub(super) fn slot_of(&self, key: &K) -> Option<u32> {
        self.held(key)
    }

    pub(super) fn holds_slot(&self, i: u32) -> bool {
        self.slots.in_use(i) && self.slots.node(i).queue != GHOST
    }

    pub(super) fn touch_slot(&mut self, i: u32) {
        let n = self.slots.node_mut(i);
        n.bits = (n.bits + 1).min(FREQ_MAX);
    }

    fn queue_mut(&mut self, tag: u8) -> &mut Queue {
        match tag {
            SMALL => &mut self.small,
            MAIN => &mut self.main,
            _ => &mut self.ghost,
        }
    }

    /// Frees slot `i` from whichever queue it is on.
    fn drop_slot(&mut self, i: u32) -> (K, u64) {
        let tag = self.slots.node(i).queue;
        let mut q = *self.queue_mut(tag);
        self.slots.unlink(&mut q, i);
        *self.queue_mut(tag) = q;
        self.slots.take(i)
    }

    /// Algorithm 1's `evictS`: the small queue's oldest goes to main if it was used, else out
    /// (its key remembered as a ghost). Returns what left the cache, if anything did.
    fn evict_small(&mut self, evicted: &mut Vec<(K, u64)>) {
        let i = self.small.front().expect("the caller checked");
        if self.slots.node(i).bits > 0 {
            self.slots.node_mut(i).bits = 0;
            self.slots.requeue(&mut self.small, &mut self.main, i, MAIN);
            return;
        }
        self.slots.requeue(&mut self.small, &mut self.ghost, i, GHOST);
        let n = self.slots.node(i);
        evicted.push((n.key.clone().expect("in use"), n.weight));
        let ghost_share = self.capacity - self.small_share;
        while self.ghost.weight > ghost_share {
            let g = self.ghost.front().expect("over, so not empty");
            self.drop_slot(g);
        }
    }

    /// Algorithm 1's `evictM`: main's oldest goes back in while it has uses left.
    fn evict_main(&mut self, evicted: &mut Vec<(K, u64)>) {
        loop {
            let i = self.main.front().expect("the caller checked");
            let n = self.slots.node_mut(i);
            if n.bits > 0 {
                n.bits -= 1;
                self.slots.unlink(&mut self.main, i);
                self.slots.push_back(&mut self.main, i, MAIN);
            } else {
                evicted.push(self.drop_slot(i));
                return;
            }
        }
    }

    fn make_room(&mut self, weight: u64, evicted: &mut Vec<(K, u64)>) {
        while self.weight() + weight > self.capacity {
            if self.small.len > 0 && (self.small.weight >= self.small_share || self.main.len == 0) {
                self.evict_small(evicted);
            } else {
                self.evict_main(evicted);
            }
        }
    }

    pub(super) fn resize(&mut self, capacity: u64) -> Vec<(K, u64)> {
        self.capacity = capacity;
        self.small_share = capacity / 10;
        let mut evicted = Vec::new();
        self.make_room(0, &mut evicted);
        // The ghosts remember at most what main holds, as `evict_small` keeps them.
        while self.ghost.weight > self.capacity - self.small_share {
            let g = self.ghost.front().expect("over, so not empty");
            self.drop_slot(g);
        }
        evicted
    }

    pub(super) fn insert(&mut self, key: K, weight: u64) -> Vec<(K, u64)> {
        let mut evicted = Vec::new();
        let mut ghost = false;
        if let Some(i) = self.slots.find(&key) {
            if self.slots.node(i).queue == GHOST {
                // Taken off before making room, which may shorten the ghost queue.
                self.drop_slot(i);
                ghost = true;
            } else if weight > self.capacity {
                evicted.push(self.drop_slot(i));
                return evicted;
            } else {
                // A new version of a held entry: a use, in its place, with its new weight.
                let tag = self.slots.node(i).queue;
                let mut q = *self.queue_mut(tag);
                self.slots.reweigh(&mut q, i, weight);
                *self.queue_mut(tag) = q;
                let n = self.slots.node_mut(i);
                n.bits = (n.bits + 1).min(FREQ_MAX);
                self.make_room(0, &mut evicted);
                return evicted;
            }
        }
        if weight > self.capacity {
            return evicted;
        }
        self.make_room(weight, &mut evicted);
        let tag = if ghost { MAIN } else { SMALL };
        let i = self.slots.add(key, weight, tag);
        let mut q = *self.queue_mut(tag);
        self.slots.push_back(&mut q, i, tag);
        *self.queue_mut(tag) = q;
        evicted
    }

    pub(super) fn remove(&mut self, key: &K) -> bool {
        let Some(i) = self.slots.find(key) else { return false };
        let held = self.slots.node(i).queue != GHOST;
        self.drop_slot(i);
        held
    }
}
