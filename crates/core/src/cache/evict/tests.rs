use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::cache::Lru;

fn unit(kind: Eviction, cap: u64) -> Evictor<u32> {
    Evictor::new(kind, cap, 7)
}

/// TinyLFU without its window: a newcomer is weighed at once, as a candidate leaving the
/// window is (the admission tests below test that rule alone).
fn windowless(cap: u64) -> Evictor<u32> {
    Evictor::TinyLfu(TinyLfu::windowless(cap, 7))
}

#[test]
fn names_round_trip_and_a_wrong_one_is_named() {
    for e in Eviction::ALL {
        assert_eq!(e.name().parse::<Eviction>(), Ok(e));
    }
    let err = "arc".parse::<Eviction>().unwrap_err();
    assert_eq!(err.to_string(), "unknown eviction policy \"arc\": expected one of lru, tinylfu, s3fifo, sieve");
}

/// SIEVE's hand (Algorithm 1): a hit sets a bit and moves nothing; the hand clears bits as it
/// passes and stays where it evicted, so an older entry it passed outlives a newer one.
#[test]
fn sieve_hand_passes_visited_entries_and_stays_where_it_evicted() {
    let mut c = unit(Eviction::Sieve, 3);
    for k in [1, 2, 3] {
        assert!(c.insert(k, 1).is_empty());
    }
    assert!(c.touch(&1));
    assert_eq!(c.insert(4, 1), vec![(2, 1)], "1 was visited: the hand clears its bit and moves on to 2");
    let Evictor::Sieve(s) = &c else { unreachable!() };
    assert_eq!(s.visited(&1), Some(false), "the hand cleared 1's bit on its way");
    assert!(c.touch(&3));
    // LRU would evict 1 now (least recently used); the hand is at 3, visited, so it evicts 4.
    assert_eq!(c.insert(5, 1), vec![(4, 1)]);
    assert!(c.contains(&1) && c.contains(&3) && c.contains(&5));
}

/// S3-FIFO (§4.2): an entry never used in the small queue leaves it as a ghost and comes back
/// straight into main; one used there moves to main.
#[test]
fn s3fifo_readmits_a_ghost_to_main_and_promotes_what_was_used_in_small() {
    let mut c = unit(Eviction::S3Fifo, 10);
    for k in 1..=10 {
        assert!(c.insert(k, 1).is_empty());
    }
    assert!(c.touch(&2));
    assert_eq!(c.insert(11, 1), vec![(1, 1)], "1 was never used: out of small, into the ghost queue");
    let Evictor::S3Fifo(s) = &c else { unreachable!() };
    assert_eq!(s.queue_of(&1), Some("ghost"));
    assert!(!c.contains(&1) && !c.touch(&1), "a ghost is not held");
    assert_eq!(c.insert(12, 1), vec![(3, 1)], "2 was used: it moves to main, and 3 goes");
    let Evictor::S3Fifo(s) = &c else { unreachable!() };
    assert_eq!(s.queue_of(&2), Some("main"));
    c.insert(1, 1);
    let Evictor::S3Fifo(s) = &c else { unreachable!() };
    assert_eq!(s.queue_of(&1), Some("main"), "a ghost asked for again goes straight to main");
    assert_eq!(s.queue_of(&13), None);
}

/// TinyLFU (§3): a newcomer seen once is not admitted over a frequent victim; one asked for
/// as often as the victim is.
#[test]
fn tinylfu_refuses_a_one_hit_wonder_and_admits_a_frequent_newcomer() {
    let mut c = windowless(100);
    for k in 1..=10 {
        assert!(c.insert(k, 10).is_empty());
        for _ in 0..4 {
            c.touch(&k);
        }
    }
    let evicted = c.insert(50, 10);
    assert_eq!(evicted, vec![(50, 10)], "the one-hit wonder loses the duel to a key used five times");
    assert!(!c.contains(&50));
    assert_eq!(c.weight(), 100);
    let mut admitted_after = None;
    for tries in 1..=10 {
        let evicted = c.insert(60, 10);
        if c.contains(&60) {
            assert_eq!(evicted.len(), 1);
            assert_ne!(evicted[0].0, 60);
            admitted_after = Some(tries);
            break;
        }
    }
    let Evictor::TinyLfu(t) = &c else { unreachable!() };
    let tries = admitted_after.expect("a newcomer asked for often enough is admitted");
    assert!(tries >= 5, "admitted after {tries} asks, before it was asked for as often as the victim (5)");
    assert_eq!(t.segment_of(&60), Some("probation"));
}

/// Size-aware admission (Einziger, Eytan, Friedman and Manes, ACM ToS 2022): a newcomer to a
/// full cache is weighed against its victims at once, however light it is. Before, a newcomer
/// lighter than the 1 % window stayed in the window and main's least recently used entry went
/// for it untested: a one-hit wonder pushed out a key used four times.
#[test]
fn tinylfu_weighs_even_a_light_newcomer_against_its_victims() {
    let mut c = windowless(1000);
    for k in 1..=10 {
        assert!(c.insert(k, 100).is_empty());
        for _ in 0..3 {
            c.touch(&k);
        }
    }
    assert_eq!(c.insert(99, 5), vec![(99, 5)], "a one-hit wonder is refused, not held over a frequent key");
    assert_eq!(held(&c, 1..=10).len(), 10, "every frequent key still held");
}

/// A tie admits (the 2022 paper's `≥`): a newcomer asked for as often as its victim replaces
/// it. With moka's `>`, the entry held first stayed, however recent the newcomer.
#[test]
fn tinylfu_admits_a_newcomer_asked_for_as_often_as_its_victim() {
    let mut c = windowless(20);
    assert!(c.insert(1, 10).is_empty());
    assert!(c.insert(2, 10).is_empty());
    c.touch(&2);
    let Evictor::TinyLfu(t) = &c else { unreachable!() };
    assert_eq!((t.frequency(&1), t.segment_of(&1)), (1, Some("probation")), "1 is the victim, asked for once");
    assert_eq!(c.insert(3, 10), vec![(1, 10)], "3, asked for once too, takes 1's place");
    assert!(c.contains(&3) && c.contains(&2));
}

/// Victims come from probation only, and weigh at least the newcomer (as moka 0.12 has it):
/// an entry in protected is never put up against a newcomer. Before, a newcomer asked for
/// more often than probation's and protected's entries summed evicted both.
#[test]
fn tinylfu_never_puts_a_protected_entry_up_against_a_newcomer() {
    let mut c = windowless(100);
    assert!(c.insert(1, 50).is_empty());
    c.touch(&1);
    assert!(c.insert(2, 50).is_empty());
    let Evictor::TinyLfu(t) = &c else { unreachable!() };
    assert_eq!((t.segment_of(&1), t.segment_of(&2)), (Some("protected"), Some("probation")));
    for ask in 1..=8 {
        assert_eq!(c.insert(3, 60), vec![(3, 60)], "ask {ask}: probation's 50 bytes cannot make room for 60");
    }
    assert!(c.contains(&1) && c.contains(&2));
}

/// A hit in probation moves to protected (the segmented LRU of W-TinyLFU, §4, which TinyLfu keeps without the window).
#[test]
fn tinylfu_promotes_a_probation_hit_to_protected() {
    let mut c = unit(Eviction::TinyLfu, 1000);
    c.insert(1, 100);
    c.insert(2, 100);
    let Evictor::TinyLfu(t) = &c else { unreachable!() };
    assert_eq!(t.segment_of(&1), Some("probation"), "newcomers enter probation");
    c.touch(&1);
    let Evictor::TinyLfu(t) = &c else { unreachable!() };
    assert_eq!(t.segment_of(&1), Some("protected"));
    assert_eq!(t.segment_of(&2), Some("probation"));
}

/// A literal SIEVE, Algorithm 1 over a list (newest last), with weights: the model the
/// property below holds the slots-and-hand implementation to.
#[derive(Default)]
struct SieveModel {
    queue: Vec<(u32, u64, bool)>,
    hand: Option<u32>,
}

impl SieveModel {
    fn evict(&mut self) -> (u32, u64) {
        let mut at = self.hand.and_then(|h| self.queue.iter().position(|e| e.0 == h)).unwrap_or(0);
        while self.queue[at].2 {
            self.queue[at].2 = false;
            at = (at + 1) % self.queue.len();
        }
        let (k, w, _) = self.queue.remove(at);
        self.hand = self.queue.get(at).map(|e| e.0);
        (k, w)
    }
}

fn held(c: &Evictor<u32>, keys: impl Iterator<Item = u32>) -> BTreeMap<u32, u64> {
    keys.filter_map(|k| c.weight_of(&k).map(|w| (k, w))).collect()
}

proptest! {
    /// Every policy: the weights held never pass the capacity; what is held is exactly what
    /// was inserted less what was reported evicted (a hit is a hit, with the weight given);
    /// and a key heavier than the capacity is never held.
    #[test]
    fn no_policy_holds_more_than_its_capacity_or_anything_not_inserted(
        kind in prop::sample::select(Eviction::ALL.to_vec()),
        cap in 0u64..5_000,
        ops in prop::collection::vec((0u8..8, 0u32..60, 0u64..1_500), 0..400),
    ) {
        let mut c = unit(kind, cap);
        let mut model: BTreeMap<u32, u64> = BTreeMap::new();
        for (op, k, w) in ops {
            match op {
                0..=3 => {
                    let evicted = c.insert(k, w);
                    let old = model.remove(&k);
                    if w <= cap {
                        model.insert(k, w);
                    }
                    for (e, ew) in evicted {
                        if e == k {
                            // The newcomer itself (refused), or its former version (too heavy now).
                            prop_assert!(ew == w || Some(ew) == old, "{} reported evicted with weight {}", e, ew);
                            model.remove(&k);
                        } else {
                            prop_assert_eq!(model.remove(&e), Some(ew), "{} reported evicted with weight {}", e, ew);
                        }
                    }
                }
                4..=6 => prop_assert_eq!(c.touch(&k), model.contains_key(&k)),
                _ => prop_assert_eq!(c.remove(&k), model.remove(&k).is_some()),
            }
            prop_assert!(c.weight() <= cap, "{} holds {} over a capacity of {}", kind, c.weight(), cap);
            prop_assert_eq!(c.weight(), model.values().sum::<u64>());
            prop_assert_eq!(c.len(), model.len());
            prop_assert_eq!(held(&c, 0..60), model.clone());
        }
    }

    /// TinyLFU's size-aware admission: a newcomer held by evicting others is estimated at
    /// least as frequent as those others summed, and they weigh at least its weight; a
    /// newcomer evicts nothing unless the cache was full (no entry goes for a newcomer
    /// untested).
    #[test]
    fn tinylfu_admits_a_newcomer_only_over_less_frequent_victims(
        cap in 1u64..3_000,
        ops in prop::collection::vec((0u8..4, 0u32..50, 1u64..600), 0..400),
    ) {
        let mut c = windowless(cap);
        for (op, k, w) in ops {
            if op == 0 || c.contains(&k) {
                c.touch(&k);
                continue;
            }
            let before = c.weight();
            let evicted = c.insert(k, w);
            let others: Vec<u32> = evicted.iter().map(|e| e.0).filter(|&e| e != k).collect();
            let Evictor::TinyLfu(t) = &c else { unreachable!() };
            if c.contains(&k) && !others.is_empty() {
                let summed: u32 = others.iter().map(|v| u32::from(t.frequency(v))).sum();
                prop_assert!(u32::from(t.frequency(&k)) >= summed, "{} (estimate {}) admitted over {:?} (summed {})", k, t.frequency(&k), others, summed);
                let freed: u64 = evicted.iter().filter(|e| e.0 != k).map(|e| e.1).sum();
                prop_assert!(freed >= w, "{} of {} admitted over {:?}, only {} bytes", k, w, others, freed);
            }
            if before + w <= cap {
                prop_assert!(evicted.is_empty(), "room for {} of {}, yet {:?} evicted", k, w, evicted);
            }
            if !c.contains(&k) {
                prop_assert!(others.is_empty(), "{} refused, yet {:?} evicted for it", k, others);
            }
        }
    }

    /// The slots-and-hand SIEVE evicts exactly what Algorithm 1 over a plain list does.
    #[test]
    fn sieve_evicts_as_algorithm_1_does(
        cap in 1u64..3_000,
        ops in prop::collection::vec((0u8..4, 0u32..30, 1u64..800), 0..300),
    ) {
        let mut c = unit(Eviction::Sieve, cap);
        let mut m = SieveModel::default();
        for (op, k, w) in ops {
            if op == 0 {
                let at = m.queue.iter().position(|e| e.0 == k);
                prop_assert_eq!(c.touch(&k), at.is_some());
                if let Some(at) = at {
                    m.queue[at].2 = true;
                }
                continue;
            }
            if m.queue.iter().any(|e| e.0 == k) || w > cap {
                continue; // new versions are covered by the property above
            }
            let mut want = Vec::new();
            while m.queue.iter().map(|e| e.1).sum::<u64>() + w > cap {
                want.push(m.evict());
            }
            m.queue.push((k, w, false));
            prop_assert_eq!(c.insert(k, w), want);
        }
    }

    /// The slots LRU evicts exactly as the ordered [`Lru`] (Cacheflow's, without its
    /// de-duplication) does.
    #[test]
    fn the_slots_lru_evicts_as_the_ordered_lru_does(
        cap in 0u64..4_000,
        ops in prop::collection::vec((0u8..6, 0u32..40, 0u64..1_000), 0..300),
    ) {
        let mut c = unit(Eviction::Lru, cap);
        let mut l = Lru::weighted(cap, false);
        for (op, k, w) in ops {
            match op {
                0..=2 => prop_assert_eq!(c.insert(k, w), l.insert_weighted(k, w)),
                3 | 4 => prop_assert_eq!(c.touch(&k), l.touch(&k)),
                _ => prop_assert_eq!(c.remove(&k), l.remove(&k)),
            }
        }
    }
}

/// A skewed request stream over `objects` keys from `first` on: key `first + ⌊objects · u³⌋`
/// for `u` uniform (xorshift), so low keys are asked for most.
fn skewed(first: u32, objects: u32, n: usize, state: &mut u64) -> Vec<u32> {
    (0..n)
        .map(|_| {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            let u = (*state >> 11) as f64 / (1u64 << 53) as f64;
            first + (f64::from(objects) * u * u * u) as u32
        })
        .collect()
}

fn hits(c: &mut TinyLfu<u32>, requests: &[u32]) -> usize {
    requests
        .iter()
        .filter(|&&k| {
            let hit = c.touch(&k);
            if !hit {
                c.insert(k, 1);
            }
            hit
        })
        .count()
}

/// Requests that reward recency: runs of `gap` new keys, each run asked for twice in a row,
/// so that a second ask hits only if the cache kept the last `gap` keys it was asked for.
fn recent_pairs(first: u32, gap: usize, n: usize) -> Vec<u32> {
    (0..n).map(|i| first + ((i / (2 * gap)) * gap + i % gap) as u32).collect()
}

/// The climber (Middleware 2018, §3.2): on requests that first reward frequency and then
/// recency, it grows the window, and hits more than the same cache with its window fixed.
#[test]
fn the_climber_grows_the_window_when_recency_pays() {
    let mut state = 0x9E37_79B9_7F4A_7C15;
    let before = skewed(0, 40_000, 100_000, &mut state);
    let after = recent_pairs(1_000_000, 70, 400_000);
    let (mut climbing, mut fixed) = (TinyLfu::new(1_000, 1), TinyLfu::fixed_window(1_000, 1));
    let (cb, fb) = (hits(&mut climbing, &before), hits(&mut fixed, &before));
    let at_turn = climbing.window_share();
    let (ca, fa) = (hits(&mut climbing, &after), hits(&mut fixed, &after));
    assert!(cb >= fb, "before the turn: {cb} hits climbing, {fb} with the window fixed");
    assert_eq!(fixed.window_share(), 50);
    assert!(at_turn < 50, "frequency paid, yet the window did not shrink from 50: {at_turn}");
    assert!(climbing.window_share() > at_turn, "the window did not grow: {at_turn} → {}", climbing.window_share());
    assert!(ca > fa, "after the turn: {ca} hits climbing, {fa} with the window fixed");
}

/// The shift watch: when the popular keys change all at once, a watched TinyLFU halves its
/// sketch and lets the new popular keys in sooner than its regular halving would, and so
/// hits more after the shift; before the shift it is the same cache.
#[test]
fn tinylfu_follows_a_popularity_shift_sooner_with_the_shift_watch() {
    let mut state = 0x9E37_79B9_7F4A_7C15;
    let before = skewed(0, 40_000, 200_000, &mut state);
    let after = skewed(40_000, 40_000, 30_000, &mut state);
    let (mut watched, mut unwatched) = (TinyLfu::new(4_000, 1), TinyLfu::unwatched(4_000, 1));
    assert_eq!(hits(&mut watched, &before), hits(&mut unwatched, &before), "no shift yet: the same decisions");
    assert_eq!(watched.shifts(), 0, "a steady stream is not a shift");
    let (w, u) = (hits(&mut watched, &after), hits(&mut unwatched, &after));
    assert!(watched.shifts() >= 1, "the shift went unseen");
    assert!(w > u + after.len() / 100, "after the shift: {w} hits watched, {u} unwatched");
}

/// A scan (misses of keys asked for once) fills a sample or two with misses and is over: the
/// sketch keeps what it knows. A fall that lasts four samples is a shift.
#[test]
fn the_shift_watch_halves_on_a_lasting_fall_and_not_on_a_scan() {
    let mut w = shift::ShiftWatch::new();
    let feed = |w: &mut shift::ShiftWatch, samples: usize, hit_every: usize| {
        (0..samples * 1_500).filter(|i| w.record(hit_every != 0 && i % hit_every == 0)).count()
    };
    assert_eq!(feed(&mut w, 10, 2), 0, "a steady 50 %");
    assert_eq!(feed(&mut w, 2, 0), 0, "two samples of misses (a scan)");
    assert_eq!(feed(&mut w, 10, 2), 0, "back to 50 %");
    assert_eq!(feed(&mut w, 3, 3), 0, "three samples at 33 %: not yet");
    assert_eq!(feed(&mut w, 1, 3), 1, "the fourth: a shift");
    assert_eq!(feed(&mut w, 10, 3), 0, "33 % is the new level");
    assert_eq!(w.shifts(), 1);
}

/// A smaller capacity evicts at once, as each policy would to make room (LRU: the least
/// recently used), down to the new bound; a larger one evicts nothing, and keeps it.
#[test]
fn a_smaller_capacity_evicts_down_to_it_at_once() {
    for kind in Eviction::ALL {
        let mut c = unit(kind, 100);
        for k in 0..10u32 {
            c.insert(k, 10);
        }
        for k in 5..10u32 {
            c.touch(&k);
        }
        let before = c.weight();
        assert!(before > 40, "{kind}: {before}");
        let evicted = c.resize(40);
        let freed: u64 = evicted.iter().map(|(_, w)| w).sum();
        assert!(c.weight() <= 40, "{kind}: {} over 40", c.weight());
        assert_eq!(before - freed, c.weight(), "{kind}");
        for (k, _) in &evicted {
            assert!(!c.contains(k), "{kind}: {k} evicted but held");
        }
        assert_eq!(c.capacity(), 40, "{kind}");
        assert!(c.resize(1000).is_empty(), "{kind}");
        let w = c.weight();
        c.insert(100, 500);
        assert_eq!(c.weight(), w + 500, "{kind}: the larger bound holds a newcomer that fits it");
    }
    let mut lru = unit(Eviction::Lru, 100);
    for k in 0..10u32 {
        lru.insert(k, 10);
    }
    lru.touch(&0);
    let gone: Vec<u32> = lru.resize(70).into_iter().map(|(k, _)| k).collect();
    assert_eq!(gone, [1, 2, 3], "LRU lets the least recently used go first");
}
