//! How Cacheflow splits a request for a set of objects between the client's server and that
//! server's neighbours (Dou 2011 §4.3.3; notes 003 §3.6).
//!
//! The client sends the request to its local server and to each neighbour at once. The local
//! server serves what it holds, loads from its disk what no neighbour holds (as far as its views
//! of their caches say), and leaves the rest to the neighbours. A neighbour that holds fewer of
//! the set than the threshold is not worth a leg: the local server loads those objects itself
//! and tells the client to ignore that neighbour, which does not answer. Views lag the caches
//! (updates travel and are batched), so an object a view shows may be gone: a misprediction,
//! which the thesis accepts (the object is not delivered).

use std::collections::BTreeSet;

use super::lru::Lru;

/// The local server's part of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalPlan<K> {
    /// Objects served from its cache.
    pub hits: Vec<K>,
    /// Objects loaded from its disk (misses): in no neighbour's view, or left by a neighbour
    /// below the threshold.
    pub loads: Vec<K>,
    /// Neighbours the client should not wait for.
    pub ignore: Vec<usize>,
}

/// The local server's plan for a request of `files`, given its cache and its views of its
/// neighbours' caches. A neighbour is worth a leg if its view holds at least `threshold` of the
/// set, the count the neighbour itself makes (Cacheflow's default threshold is 0: every
/// neighbour answers).
pub fn plan_local<K: Ord + Clone>(
    files: &[K],
    cache: &Lru<K>,
    views: &[BTreeSet<K>],
    threshold: usize,
) -> LocalPlan<K> {
    let mut plan = LocalPlan { hits: Vec::new(), loads: Vec::new(), ignore: Vec::new() };
    let missing: Vec<&K> = files
        .iter()
        .filter(|f| {
            let held = cache.contains(f);
            if held {
                plan.hits.push((*f).clone());
            }
            !held
        })
        .collect();
    let worth: Vec<bool> = views
        .iter()
        .enumerate()
        .map(|(i, v)| {
            // The thesis's count, the same one the neighbour makes: how much of the set it holds.
            let ok = threshold == 0 || files.iter().filter(|f| v.contains(f)).count() >= threshold;
            if !ok {
                plan.ignore.push(i);
            }
            ok
        })
        .collect();
    for f in missing {
        if !views.iter().zip(&worth).any(|(v, ok)| *ok && v.contains(f)) {
            plan.loads.push(f.clone());
        }
    }
    plan
}

/// A neighbour's part: what it holds of `files`, or nothing if that is fewer than `threshold`.
pub fn serve_remote<K: Ord + Clone>(files: &[K], cache: &Lru<K>, threshold: usize) -> Vec<K> {
    let held: Vec<K> = files.iter().filter(|f| cache.contains(f)).cloned().collect();
    if held.len() < threshold { Vec::new() } else { held }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(keys: &[u32]) -> Lru<u32> {
        let mut c = Lru::new(100, true);
        keys.iter().for_each(|k| {
            c.insert(*k);
        });
        c
    }

    #[test]
    fn the_local_server_loads_only_what_no_neighbour_holds() {
        let views = [BTreeSet::from([2, 3]), BTreeSet::from([4])];
        let p = plan_local(&[1, 2, 3, 4, 5], &cache(&[1]), &views, 0);
        assert_eq!((p.hits, p.loads, p.ignore), (vec![1], vec![5], vec![]));
    }

    #[test]
    fn a_neighbour_below_the_threshold_is_ignored_and_covered_for() {
        let views = [BTreeSet::from([2, 3]), BTreeSet::from([4])];
        let p = plan_local(&[1, 2, 3, 4, 5], &cache(&[1]), &views, 2);
        assert_eq!((p.loads, p.ignore), (vec![4, 5], vec![1]));
        assert!(serve_remote(&[1, 2, 3, 4, 5], &cache(&[4]), 2).is_empty());
        assert_eq!(serve_remote(&[1, 2, 3, 4, 5], &cache(&[2, 3]), 2), vec![2, 3]);
    }
}

/// A Cacheflow server's state: its cache, its views of its neighbours' caches, and the changes
/// it owes them, sent in batches of more than the link buffer (Cacheflow's L; 0 sends each
/// change at once).
#[derive(Clone, Debug)]
pub struct Server<K> {
    cache: Lru<K>,
    views: Vec<BTreeSet<K>>,
    outbox: Vec<Vec<(K, bool)>>,
    link_buffer: usize,
}

/// Changes owed to neighbour `.0`, to be sent now: (key, added).
pub type Batch<K> = (usize, Vec<(K, bool)>);

impl<K: Ord + Clone> Server<K> {
    /// A server with an empty cache of `capacity` objects and `neighbours` neighbours.
    pub fn new(capacity: usize, dedup: bool, neighbours: usize, link_buffer: usize) -> Self {
        Self {
            cache: Lru::new(capacity, dedup),
            views: vec![BTreeSet::new(); neighbours],
            outbox: vec![Vec::new(); neighbours],
            link_buffer,
        }
    }

    /// Its cache.
    pub fn cache(&self) -> &Lru<K> {
        &self.cache
    }

    /// Its part of a request from one of its own clients ([`plan_local`]); the hits count as
    /// uses.
    pub fn plan(&mut self, files: &[K], threshold: usize) -> LocalPlan<K> {
        let plan = plan_local(files, &self.cache, &self.views, threshold);
        for f in &plan.hits {
            self.cache.touch(f);
        }
        plan
    }

    /// Its part of a request from a neighbour's client ([`serve_remote`]), counted as uses.
    pub fn serve(&mut self, files: &[K], threshold: usize) -> Vec<K> {
        let held = serve_remote(files, &self.cache, threshold);
        for f in &held {
            self.cache.touch(f);
        }
        held
    }

    /// Keeps `loaded` objects; returns what was evicted to make room, and the batches of
    /// changes now due to neighbours.
    pub fn keep(&mut self, loaded: &[K]) -> (Vec<K>, Vec<Batch<K>>) {
        let mut changes = Vec::new();
        let mut evicted = Vec::new();
        for k in loaded {
            if self.cache.touch(k) {
                continue;
            }
            for gone in self.cache.insert(k.clone()) {
                changes.push((gone.clone(), false));
                evicted.push(gone);
            }
            // A cache of no room keeps nothing, and must not say it does.
            if self.cache.contains(k) {
                changes.push((k.clone(), true));
            }
        }
        let mut due = Vec::new();
        if !changes.is_empty() {
            for (i, out) in self.outbox.iter_mut().enumerate() {
                out.extend_from_slice(&changes);
                if out.len() > self.link_buffer {
                    due.push((i, std::mem::take(out)));
                }
            }
        }
        (evicted, due)
    }

    /// Applies neighbour `neighbour`'s changes to its view and to the de-duplicating eviction.
    pub fn apply(&mut self, neighbour: usize, changes: impl IntoIterator<Item = (K, bool)>) {
        let Some(view) = self.views.get_mut(neighbour) else { return };
        for (k, added) in changes {
            if added {
                if view.insert(k.clone()) {
                    self.cache.neighbour_added(&k);
                }
            } else if view.remove(&k) {
                self.cache.neighbour_evicted(&k);
            }
        }
    }
}

/// What a client got for one set, merged as Cacheflow's client merges its replies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Merged {
    /// Objects asked for.
    pub asked: u64,
    /// From the local server's cache.
    pub local_hits: u64,
    /// Loaded by the local server from its disk (or origin).
    pub loads: u64,
    /// From a neighbour's cache (counted once per object).
    pub remote_hits: u64,
    /// Not delivered: left to a neighbour that no longer had them.
    pub mispredicted: u64,
    /// Not delivered: the local server's load of them failed.
    pub failed: u64,
    /// Delivered more than once.
    pub duplicates: u64,
}

impl std::ops::AddAssign for Merged {
    fn add_assign(&mut self, o: Self) {
        self.asked += o.asked;
        self.local_hits += o.local_hits;
        self.loads += o.loads;
        self.remote_hits += o.remote_hits;
        self.mispredicted += o.mispredicted;
        self.failed += o.failed;
        self.duplicates += o.duplicates;
    }
}

impl Merged {
    /// Objects from any cache over objects asked for.
    pub fn hit_rate(&self) -> f64 {
        (self.local_hits + self.remote_hits) as f64 / self.asked.max(1) as f64
    }

    /// Objects delivered over objects asked for.
    pub fn delivered(&self) -> f64 {
        1.0 - (self.mispredicted + self.failed) as f64 / self.asked.max(1) as f64
    }
}

/// Merges the replies to a request for `set` (distinct keys): the local server's objects
/// (`loads` of them loaded, the rest hits; `failed` more it could not load) and each neighbour's, by
/// its place among the local server's neighbours, leaving out those the local server said to
/// `ignore`.
pub fn merge<K: Ord + Clone>(
    set: &[K],
    local: &[K],
    loads: u64,
    failed: u64,
    ignore: &[usize],
    remotes: &[(usize, Vec<K>)],
) -> Merged {
    let mut got: BTreeSet<&K> = local.iter().collect();
    let mut m = Merged { asked: set.len() as u64, loads, ..Merged::default() };
    m.local_hits = (got.len() as u64).saturating_sub(loads);
    for (i, files) in remotes {
        if ignore.contains(i) {
            continue;
        }
        for f in files {
            if got.insert(f) {
                m.remote_hits += 1;
            } else {
                m.duplicates += 1;
            }
        }
    }
    // A failed load may still have come from a neighbour whose view was stale.
    let missing = set.iter().filter(|f| !got.contains(f)).count() as u64;
    m.failed = failed.min(missing);
    m.mispredicted = missing - m.failed;
    m
}

#[cfg(test)]
mod server_tests {
    use super::*;

    #[test]
    fn changes_go_out_in_batches_of_more_than_the_link_buffer() {
        let mut s = Server::new(2, true, 2, 2);
        let (evicted, due) = s.keep(&[1, 2]);
        assert!(evicted.is_empty() && due.is_empty(), "two changes, buffer of two: held");
        let (evicted, due) = s.keep(&[3]);
        assert_eq!(evicted, vec![1]);
        assert_eq!(
            due,
            vec![
                (0, vec![(1, true), (2, true), (1, false), (3, true)]),
                (1, vec![(1, true), (2, true), (1, false), (3, true)])
            ]
        );
        // A neighbour's copy of 3 makes it go first.
        s.apply(1, [(3, true)]);
        assert_eq!(s.keep(&[4]).0, vec![3]);
    }

    #[test]
    fn replies_merge_once_per_object_and_ignored_neighbours_do_not_count() {
        let m = merge(&[1, 2, 3, 4, 5], &[1, 2], 1, 1, &[1], &[(0, vec![2, 3]), (1, vec![4])]);
        assert_eq!(
            m,
            Merged { asked: 5, local_hits: 1, loads: 1, remote_hits: 1, mispredicted: 1, failed: 1, duplicates: 1 }
        );
        assert!((m.hit_rate() - 0.4).abs() < 1e-12);
    }
}
