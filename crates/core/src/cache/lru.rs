//! A least-recently-used cache of whole objects, with Cacheflow's de-duplicating eviction
//! (Dou 2011 §4.3.1; notes 003 §3.6): a key a neighbour also holds goes first.
//!
//! Cacheflow puts a key on a low-priority list when a neighbour reports adding it, and evicts
//! from that list before falling back to plain LRU. The thesis leaves two things open, decided
//! here: within the list, the least recently used goes first; and a key leaves the list when
//! no neighbour holds it any more (a neighbour's eviction report takes it off).
//!
//! Keys have weights (their size in bytes, for the HTTP gateway; one each by default), and the
//! capacity bounds the sum of the weights held: a weighted insert evicts, least recently used
//! first, until the newcomer fits. A key heavier than the whole capacity is not held at all
//! (holding it would mean evicting everything else and still being over the bound).

use std::collections::{BTreeMap, BTreeSet};

/// An LRU cache of keys whose weights sum to at most `capacity`, optionally evicting first
/// what neighbours hold.
#[derive(Clone, Debug)]
pub struct Lru<K> {
    capacity: u64,
    dedup: bool,
    clock: u64,
    /// The sum of the weights held.
    weight: u64,
    /// Each key held, when it was last used, and its weight.
    used: BTreeMap<K, (u64, u64)>,
    /// Keys held, least recently used first.
    order: BTreeSet<(u64, K)>,
    /// Keys held that some neighbour also holds, least recently used first.
    shared: BTreeSet<(u64, K)>,
    /// How many neighbours report holding each key (held here or not).
    elsewhere: BTreeMap<K, u32>,
}

impl<K: Ord + Clone> Lru<K> {
    /// An empty cache of `capacity` keys; `dedup` evicts keys neighbours hold first.
    pub fn new(capacity: usize, dedup: bool) -> Self {
        Self::weighted(capacity as u64, dedup)
    }

    /// An empty cache whose keys' weights (see [`Lru::insert_weighted`]) sum to at most
    /// `capacity`; `dedup` evicts keys neighbours hold first.
    pub fn weighted(capacity: u64, dedup: bool) -> Self {
        Self {
            capacity,
            dedup,
            clock: 0,
            weight: 0,
            used: BTreeMap::new(),
            order: BTreeSet::new(),
            shared: BTreeSet::new(),
            elsewhere: BTreeMap::new(),
        }
    }

    /// Keys held.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// The sum of the weights held (never more than [`Lru::capacity`]).
    pub fn weight(&self) -> u64 {
        self.weight
    }

    /// The most the weights held may sum to.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// `key`'s weight, if held.
    pub fn weight_of(&self, key: &K) -> Option<u64> {
        self.used.get(key).map(|(_, w)| *w)
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }

    /// Whether `key` is held (without counting a use).
    pub fn contains(&self, key: &K) -> bool {
        self.used.contains_key(key)
    }

    /// The keys held, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.used.keys()
    }

    fn is_shared(&self, key: &K) -> bool {
        self.dedup && self.elsewhere.get(key).is_some_and(|n| *n > 0)
    }

    /// Counts a use of `key`; false if it is not held.
    pub fn touch(&mut self, key: &K) -> bool {
        let Some((at, _)) = self.used.get_mut(key) else { return false };
        self.clock += 1;
        let old = std::mem::replace(at, self.clock);
        self.order.remove(&(old, key.clone()));
        self.order.insert((self.clock, key.clone()));
        if self.shared.remove(&(old, key.clone())) {
            self.shared.insert((self.clock, key.clone()));
        }
        true
    }

    /// Adds `key` (of weight one) as just used, evicting to make room; returns what was
    /// evicted. A key already held only counts a use.
    pub fn insert(&mut self, key: K) -> Vec<K> {
        if self.touch(&key) {
            return Vec::new();
        }
        self.insert_weighted(key, 1).into_iter().map(|(k, _)| k).collect()
    }

    /// Adds `key` with `weight` as just used (a key already held takes the new weight),
    /// evicting the least recently used others until the weights held fit the capacity;
    /// returns what was evicted, with each one's weight. A key heavier than the capacity is
    /// not held (and its former weight, if it was held, is returned as evicted).
    pub fn insert_weighted(&mut self, key: K, weight: u64) -> Vec<(K, u64)> {
        let mut evicted = Vec::new();
        if let Some(old) = self.weight_of(&key)
            && weight > self.capacity
        {
            self.remove(&key);
            evicted.push((key, old));
            return evicted;
        }
        if weight > self.capacity {
            return evicted;
        }
        // The key's own former weight makes room first: it is replaced, not evicted.
        self.remove(&key);
        while self.weight + weight > self.capacity {
            let victim =
                self.shared.first().or(self.order.first()).map(|(_, k)| k.clone()).expect("over, so not empty");
            let w = self.weight_of(&victim).expect("listed, so held");
            self.remove(&victim);
            evicted.push((victim, w));
        }
        self.clock += 1;
        self.weight += weight;
        self.used.insert(key.clone(), (self.clock, weight));
        self.order.insert((self.clock, key.clone()));
        if self.is_shared(&key) {
            self.shared.insert((self.clock, key));
        }
        evicted
    }

    /// Drops `key` if held.
    pub fn remove(&mut self, key: &K) -> bool {
        let Some((at, w)) = self.used.remove(key) else { return false };
        self.weight -= w;
        self.order.remove(&(at, key.clone()));
        self.shared.remove(&(at, key.clone()));
        true
    }

    /// A neighbour reports it added `key`.
    pub fn neighbour_added(&mut self, key: &K) {
        *self.elsewhere.entry(key.clone()).or_insert(0) += 1;
        if let Some(&(at, _)) = self.used.get(key)
            && self.dedup
        {
            self.shared.insert((at, key.clone()));
        }
    }

    /// A neighbour reports it evicted `key`.
    pub fn neighbour_evicted(&mut self, key: &K) {
        let Some(n) = self.elsewhere.get_mut(key) else { return };
        *n -= 1;
        if *n == 0 {
            self.elsewhere.remove(key);
            if let Some(&(at, _)) = self.used.get(key) {
                self.shared.remove(&(at, key.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn plain_lru_evicts_the_least_recently_used() {
        let mut c = Lru::new(3, false);
        for k in [1, 2, 3] {
            assert!(c.insert(k).is_empty());
        }
        c.touch(&1);
        assert_eq!(c.insert(4), vec![2]);
        c.neighbour_added(&4);
        assert_eq!(c.insert(5), vec![3], "without de-duplication a neighbour's copy changes nothing");
    }

    #[test]
    fn keys_a_neighbour_holds_go_first_and_come_back_when_it_lets_go() {
        let mut c = Lru::new(3, true);
        for k in [1, 2, 3] {
            c.insert(k);
        }
        c.neighbour_added(&3);
        c.neighbour_added(&2);
        assert_eq!(c.insert(4), vec![2], "the least recently used of the shared ones");
        c.neighbour_evicted(&3);
        assert_eq!(c.insert(5), vec![1], "3 is no longer held elsewhere: plain LRU again");
        // Two neighbours hold 4; one letting go leaves it shared.
        c.neighbour_added(&4);
        c.neighbour_added(&4);
        c.neighbour_evicted(&4);
        assert_eq!(c.insert(6), vec![4]);
        // A key reported before it is loaded is shared from its load on.
        c.neighbour_added(&9);
        c.insert(9);
        assert_eq!(c.insert(7), vec![9]);
    }

    proptest! {
        #[test]
        fn never_holds_more_than_its_capacity_and_evicts_only_what_it_held(
            cap in 1usize..8,
            ops in prop::collection::vec((0u8..4, 0u32..12), 0..200),
        ) {
            let mut c = Lru::new(cap, true);
            let mut held = BTreeSet::new();
            for (op, k) in ops {
                match op {
                    0 | 1 => {
                        for e in c.insert(k) {
                            prop_assert!(held.remove(&e), "evicted {e}, which it did not hold");
                        }
                        held.insert(k);
                    }
                    2 => c.neighbour_added(&k),
                    _ => c.neighbour_evicted(&k),
                }
                prop_assert!(c.len() <= cap);
                prop_assert_eq!(c.len(), held.len());
                prop_assert!(held.iter().all(|k| c.contains(k)));
            }
        }

        /// Under random weighted inserts, uses and removals, the weights held never pass the
        /// capacity, and what is evicted is exactly what least-recently-used order says (a
        /// model: a list, least recently used first).
        #[test]
        fn weights_held_never_pass_the_capacity_and_evictions_go_in_lru_order(
            cap in 0u64..50_000,
            ops in prop::collection::vec((0u8..6, 0u32..40, 0u64..20_000), 0..300),
        ) {
            let mut c = Lru::weighted(cap, false);
            let mut model: Vec<(u32, u64)> = Vec::new();
            for (op, k, w) in ops {
                match op {
                    0..=3 => {
                        let got = c.insert_weighted(k, w);
                        let mut want = Vec::new();
                        let old = model.iter().position(|(m, _)| *m == k).map(|at| model.remove(at));
                        if w > cap {
                            want.extend(old);
                        } else {
                            while model.iter().map(|(_, w)| w).sum::<u64>() + w > cap {
                                want.push(model.remove(0));
                            }
                            model.push((k, w));
                        }
                        prop_assert_eq!(got, want);
                    }
                    4 => {
                        let held = c.touch(&k);
                        let at = model.iter().position(|(m, _)| *m == k);
                        prop_assert_eq!(held, at.is_some());
                        if let Some(at) = at {
                            let e = model.remove(at);
                            model.push(e);
                        }
                    }
                    _ => {
                        let held = c.remove(&k);
                        let at = model.iter().position(|(m, _)| *m == k);
                        prop_assert_eq!(held, at.is_some());
                        if let Some(at) = at {
                            model.remove(at);
                        }
                    }
                }
                prop_assert!(c.weight() <= cap, "{} held over a capacity of {cap}", c.weight());
                prop_assert_eq!(c.weight(), model.iter().map(|(_, w)| w).sum::<u64>());
                prop_assert_eq!(c.len(), model.len());
            }
        }
    }
}
