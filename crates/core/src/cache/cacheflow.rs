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
//!
//! Rebuilding a view when a neighbour restarts is ours, not Cacheflow's. A view is built only
//! from the neighbour's reported changes, and a restarted neighbour reports no evictions of what
//! it lost: the view would show those objects for good, every request for them mispredicted
//! (and, with de-duplication, those objects evicted here first), while the restarted neighbour's
//! view of this server would lack what this server held before. So a server forgets a
//! neighbour's view when the neighbour says its changes start afresh ([`Server::forget`]), and
//! answers a neighbour that asks with everything it holds ([`Server::snapshot`]).

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

    /// Keys its views of its neighbours show, summed over the neighbours.
    pub fn viewed(&self) -> usize {
        self.views.iter().map(BTreeSet::len).sum()
    }

    /// Forgets its view of neighbour `neighbour`, as if the neighbour had reported evicting
    /// everything the view shows (so the de-duplicating eviction forgets it too): the neighbour
    /// restarted, and the changes it reports next start from nothing.
    pub fn forget(&mut self, neighbour: usize) {
        let Some(view) = self.views.get_mut(neighbour) else { return };
        for k in std::mem::take(view) {
            self.cache.neighbour_evicted(&k);
        }
    }

    /// Everything it holds, as additions owed to neighbour `neighbour`, for a neighbour that
    /// forgets its view first (a restarted one). It replaces the changes still buffered for that
    /// neighbour, which it already includes; the batch must be sent after every batch sent
    /// before, or an older one could undo it.
    #[must_use = "the changes buffered for the neighbour are dropped: the batch replaces them"]
    pub fn snapshot(&mut self, neighbour: usize) -> Batch<K> {
        if let Some(out) = self.outbox.get_mut(neighbour) {
            out.clear();
        }
        (neighbour, self.cache.keys().map(|k| (k.clone(), true)).collect())
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
    use std::collections::VecDeque;

    use proptest::prelude::*;

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
    fn a_forgotten_neighbour_holds_nothing_and_a_snapshot_replaces_what_is_buffered() {
        let mut s = Server::new(3, true, 2, 2);
        assert_eq!(s.keep(&[1, 2]), (vec![], vec![]), "two changes, buffer of two: held");
        s.apply(0, [(2, true), (7, true)]);
        assert_eq!(s.plan(&[7], 0).loads, Vec::<u32>::new(), "7 is left to neighbour 0");
        s.forget(0);
        assert_eq!(s.viewed(), 0);
        assert_eq!(s.plan(&[7], 0).loads, vec![7], "neighbour 0 restarted: 7 is loaded here");
        // Neighbour 1 restarted: it gets everything held, and the two changes buffered for it
        // are dropped (the snapshot has them); neighbour 0's still go out.
        assert_eq!(s.snapshot(1), (1, vec![(1, true), (2, true)]));
        assert_eq!(s.keep(&[3]), (vec![], vec![(0, vec![(1, true), (2, true), (3, true)])]));
        // 2 is no longer shared, so plain LRU evicts 1 (before the forgetting, 2 went first).
        assert_eq!(s.keep(&[4]).0, vec![1]);
        // A neighbour out of range is no one.
        s.forget(5);
        assert_eq!(s.snapshot(5).0, 5);
    }

    /// One step of two servers, neighbours of each other (each the other's neighbour 0).
    #[derive(Clone, Debug)]
    enum Step {
        /// Server `.0` loads key `.1`.
        Keep(usize, u8),
        /// The oldest batch from server `.0` reaches the other.
        Deliver(usize),
        /// Server `.0` restarts: empty, its batches in flight lost.
        Restart(usize),
    }

    /// A batch on the wire: whether the receiver forgets its view first, whether it answers
    /// with a snapshot, and the changes (the gateway's `Updates`).
    type Wire = (bool, bool, Vec<(u8, bool)>);

    fn start(servers: &mut [Server<u8>], wires: &mut [VecDeque<Wire>], n: usize, capacity: usize, buffer: usize) {
        servers[n] = Server::new(capacity, true, 1, buffer);
        wires[n].clear();
        let (_, held) = servers[n].snapshot(0);
        wires[n].push_back((true, true, held));
    }

    fn deliver(servers: &mut [Server<u8>], wires: &mut [VecDeque<Wire>], from: usize) {
        let Some((reset, want_snapshot, changes)) = wires[from].pop_front() else { return };
        let to = 1 - from;
        if reset {
            servers[to].forget(0);
        }
        servers[to].apply(0, changes);
        if want_snapshot {
            let (_, held) = servers[to].snapshot(0);
            wires[to].push_back((true, false, held));
        }
    }

    proptest! {
        /// However keys, deliveries and restarts interleave, once every batch has arrived (and
        /// what is still buffered too) each server's view of the other is exactly what the
        /// other holds.
        #[test]
        fn views_match_the_caches_once_batches_arrive_across_restarts(
            capacity in 1usize..6,
            buffer in 0usize..3,
            steps in prop::collection::vec(
                prop_oneof![
                    6 => (0usize..2, 0u8..10).prop_map(|(n, k)| Step::Keep(n, k)),
                    6 => (0usize..2).prop_map(Step::Deliver),
                    1 => (0usize..2).prop_map(Step::Restart),
                ],
                0..80,
            ),
        ) {
            let mut servers = vec![Server::new(capacity, true, 1, buffer); 2];
            let mut wires = vec![VecDeque::new(); 2];
            start(&mut servers, &mut wires, 0, capacity, buffer);
            start(&mut servers, &mut wires, 1, capacity, buffer);
            for step in steps {
                match step {
                    Step::Keep(n, k) => {
                        let (_, due) = servers[n].keep(&[k]);
                        wires[n].extend(due.into_iter().map(|(_, changes)| (false, false, changes)));
                    }
                    Step::Deliver(from) => deliver(&mut servers, &mut wires, from),
                    Step::Restart(n) => start(&mut servers, &mut wires, n, capacity, buffer),
                }
            }
            while !(wires[0].is_empty() && wires[1].is_empty()) {
                let from = usize::from(wires[0].is_empty());
                deliver(&mut servers, &mut wires, from);
            }
            for n in 0..2 {
                let buffered = std::mem::take(&mut servers[n].outbox[0]);
                servers[1 - n].apply(0, buffered);
            }
            for n in 0..2 {
                let held: BTreeSet<u8> = servers[n].cache().keys().copied().collect();
                prop_assert_eq!(&servers[1 - n].views[0], &held, "server {}'s view of server {}", 1 - n, n);
            }
        }
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
