//! Cacheflow's workload (Dou 2011, Table 4.2): sets of objects drawn 80/20 from the popular
//! objects, and clients choosing sets 80/20. The simulator's Cacheflow run and the cooperating
//! gateways' load both draw from here.

use std::collections::BTreeSet;

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// Cacheflow's sets (Dou Table 4.2): `sets` sets of `set_size` distinct objects of `files`, each
/// slot drawn from the popular fifth of the objects with probability 0.8.
pub fn make_sets(files: usize, sets: usize, set_size: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<u32>> {
    let popular = (files / 5).max(1);
    (0..sets)
        .map(|_| {
            let mut set = BTreeSet::new();
            while set.len() < set_size.min(files) {
                let f = if rng.random::<f64>() < 0.8 {
                    rng.random_range(0..popular)
                } else {
                    rng.random_range(popular..files.max(popular + 1))
                };
                set.insert(f as u32);
            }
            set.into_iter().collect()
        })
        .collect()
}

/// Which set a client asks for next: 80% of requests go to the popular fifth of the sets.
pub fn pick_set(sets: usize, rng: &mut ChaCha8Rng) -> usize {
    let popular = (sets / 5).max(1);
    if sets <= popular || rng.random::<f64>() < 0.8 {
        rng.random_range(0..popular.min(sets.max(1)))
    } else {
        rng.random_range(popular..sets)
    }
}
