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
/// objects not held here (Cacheflow's default threshold is 0: every neighbour answers).
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
