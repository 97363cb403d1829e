//! The cache's policies, one behaviour at a time, and the coalescing bound as a property.

use proptest::prelude::*;

use super::*;
use crate::Nanos;

const T: Nanos = Nanos(10_000);

fn at(n: u64) -> Nanos {
    Nanos(n)
}

fn reading(value: f64, sensed_at: u64) -> Reading {
    Reading { value, sensed_at: Nanos(sensed_at) }
}

/// Five locations on a line, one apart; each has the others as neighbours, nearest first.
fn line() -> Neighbours {
    let points: Vec<Point> = (0..5).map(|i| [i as f64, 0.0, 0.0]).collect();
    Neighbours::new(&points, Rule::Nearest(4))
}

fn cache(lookup: Lookup) -> Cache<u32, u64, Neighbours> {
    Cache::new(lookup, T, AgeFrom::Load, line())
}

fn never(_: usize) -> usize {
    unreachable!("no random choice expected")
}

/// A read the policy does not coalesce.
const DIRECT: Answer<u32> = Answer::Read { read: None };

fn read(n: u64) -> Answer<u32> {
    Answer::Read { read: Some(ReadId(n)) }
}

fn wait(on: u32, n: u64) -> Answer<u32> {
    Answer::Wait { on, read: ReadId(n) }
}

#[test]
fn simple_reads_on_a_miss_hits_within_t_and_reads_again_after() {
    let mut c = cache(Lookup::Simple);
    assert_eq!(c.query(&2, at(0), None, &mut never), DIRECT);
    // No blocking: a second query of the same key reads too.
    assert_eq!(c.query(&2, at(5), None, &mut never), DIRECT);
    assert!(c.fill(2, None, reading(7.0, 90), at(100)).is_empty());
    let Answer::Hit(e) = c.query(&2, at(100 + T.0 - 1), None, &mut never) else { panic!("a hit within T") };
    assert_eq!((e.reading.value, e.loaded_at), (7.0, at(100)));
    assert_eq!(c.query(&2, at(100 + T.0), None, &mut never), DIRECT, "stale at exactly T");
    // Neighbours never answer for a precise policy.
    assert_eq!(c.query(&3, at(200), None, &mut never), DIRECT);
    let s = c.stats();
    assert_eq!((s.hits, s.reads, s.waits, s.approx_hits), (1, 4, 0, 0));
}

#[test]
fn piggybacked_queries_wait_on_the_read_under_way_and_get_its_value() {
    let mut c = cache(Lookup::Piggyback);
    assert_eq!(c.query(&1, at(0), None, &mut never), read(0));
    c.wait(&1, ReadId(0), 1, 40).unwrap(); // the asker waits on its own read
    assert_eq!(c.query(&1, at(3), None, &mut never), wait(1, 0));
    c.wait(&1, ReadId(0), 1, 41).unwrap();
    assert_eq!(c.query(&1, at(4), None, &mut never), wait(1, 0));
    c.wait(&1, ReadId(0), 1, 42).unwrap();
    assert_eq!(c.fill(1, Some(ReadId(0)), reading(5.0, 1), at(9)), vec![(40, 1), (41, 1), (42, 1)]);
    assert!(matches!(c.query(&1, at(10), None, &mut never), Answer::Hit(_)));
    assert_eq!(c.wait(&1, ReadId(0), 1, 43), Err(43), "nothing under way any more");
}

#[test]
fn a_failed_read_hands_back_its_waiters_and_keeps_the_stale_entry() {
    let mut c = cache(Lookup::Piggyback);
    assert_eq!(c.query(&0, at(0), None, &mut never), read(0));
    c.fill(0, Some(ReadId(0)), reading(1.5, 0), at(1));
    assert_eq!(c.query(&0, at(1 + T.0), None, &mut never), read(1));
    assert_eq!(c.query(&0, at(2 + T.0), None, &mut never), wait(0, 1));
    c.wait(&0, ReadId(1), 0, 7).unwrap();
    assert_eq!(c.fail(&0, Some(ReadId(1))), vec![(7, 0)]);
    assert_eq!(c.peek(&0).map(|e| e.reading.value), Some(1.5), "stale, for an answer marked so");
    assert_eq!(c.query(&0, at(3 + T.0), None, &mut never), read(2), "the next query reads again");
}

#[test]
fn all_misses_keeps_nothing_and_all_hits_never_refreshes() {
    let mut none = cache(Lookup::AllMisses);
    for t in 0..3 {
        assert_eq!(none.query(&4, at(t), None, &mut never), DIRECT);
    }
    assert!(none.fill(4, None, reading(1.0, 0), at(5)).is_empty());
    assert!(none.is_empty());
    assert_eq!(none.query(&4, at(6), None, &mut never), DIRECT);

    let mut all = cache(Lookup::AllHits);
    all.preload(4, reading(2.0, 0), at(0));
    assert!(matches!(all.query(&4, at(u64::MAX / 2), None, &mut never), Answer::Hit(e) if e.reading.value == 2.0));
    // A reader's own bound still holds.
    assert_eq!(all.query(&4, at(50), Some(Nanos(10)), &mut never), read(0));
}

#[test]
fn greedy_age_takes_the_freshest_neighbour_and_greedy_distance_the_nearest() {
    for (lookup, want) in [(Lookup::GreedyAge, (30.0, 4)), (Lookup::GreedyDistance, (10.0, 1))] {
        let mut c = cache(lookup);
        c.preload(1, reading(10.0, 5), at(0)); // one away from 0, sensed early
        c.preload(4, reading(30.0, 50), at(0)); // four away, sensed late
        let Answer::Approx { value, from, .. } = c.query(&0, at(1), None, &mut never) else { panic!("{lookup}") };
        assert_eq!((value, from), (want.0, vec![want.1]), "{lookup}");
        assert_eq!(c.stats().approx_hits, 1);
    }
}

#[test]
fn median_of_3_takes_the_median_of_three_drawn_and_one_of_fewer() {
    let mut c = cache(Lookup::MedianOf3);
    for (k, v) in [(1, 9.0), (2, 1.0), (3, 5.0), (4, 100.0)] {
        c.preload(k, reading(v, k as u64), at(0));
    }
    // Draws of 0 keep the first three found (neighbours 1, 2, 3 nearest first): median 5.
    let Answer::Approx { value, from, sensed_at } = c.query(&0, at(1), None, &mut |_| 0) else { panic!() };
    assert_eq!((value, sensed_at), (5.0, Nanos(1)));
    assert_eq!(from.len(), 3);
    // Drawing the last each time swaps in 4, then 1, then 2: median of 100, 9 and 1.
    let Answer::Approx { value, from, .. } = c.query(&0, at(1), None, &mut |n| n - 1) else { panic!() };
    assert_eq!((value, from), (9.0, vec![2, 1, 4]), "listed by value");

    let mut few = cache(Lookup::MedianOf3);
    few.preload(3, reading(8.0, 0), at(0));
    few.preload(4, reading(6.0, 0), at(0));
    let Answer::Approx { value, from, .. } = few.query(&0, at(1), None, &mut |n| n - 1) else { panic!() };
    assert_eq!((value, from), (6.0, vec![4]), "one of two, drawn");
    assert_eq!(cache(Lookup::MedianOf3).query(&0, at(1), None, &mut never), read(0), "none: a miss");
}

#[test]
fn approximate_policies_wait_on_the_neighbour_read_started_first() {
    let points: Vec<Point> = (0..5).map(|i| [i as f64, 0.0, 0.0]).collect();
    let adjacent = Neighbours::new(&points, Rule::Within(1.0));
    let mut c = Cache::<u32, u64, Neighbours>::new(Lookup::GreedyDistance, T, AgeFrom::Load, adjacent);
    assert_eq!(c.query(&2, at(0), None, &mut never), read(0));
    assert_eq!(c.query(&0, at(1), None, &mut never), read(1), "0 is no neighbour of 2");
    assert_eq!(c.query(&1, at(2), None, &mut never), wait(2, 0), "2's read started first");
    c.wait(&2, ReadId(0), 1, 9).unwrap();
    // The waiter learns which key it asked for: its answer is approximate.
    assert_eq!(c.fill(2, Some(ReadId(0)), reading(4.0, 3), at(4)), vec![(9, 1)]);
    // Simple never waits on a neighbour, nor on itself.
    let mut s = Cache::<u32, u64, Neighbours>::new(Lookup::Simple, T, AgeFrom::Load, line());
    assert_eq!(s.query(&2, at(0), None, &mut never), DIRECT);
    assert_eq!(s.query(&1, at(1), None, &mut never), DIRECT);
}

#[test]
fn kept_approximations_answer_as_approximations_and_never_outlive_their_sources() {
    let points: Vec<Point> = (0..5).map(|i| [i as f64, 0.0, 0.0]).collect();
    let adjacent = || Neighbours::new(&points, Rule::Within(1.0));
    let mut c =
        Cache::<u32, u64, Neighbours>::new(Lookup::GreedyAge, T, AgeFrom::Load, adjacent()).keep_approximations(true);
    c.preload(2, reading(10.0, 5), at(100));
    assert!(matches!(c.query(&1, at(200), None, &mut never), Answer::Approx { .. }));
    let (kept, from) = c.kept_approximation(&1).expect("kept");
    assert_eq!((kept.loaded_at, from), (at(100), &[2][..]), "as old as its source, naming it");
    assert!(c.peek(&1).is_none(), "a copy is not an entry of its own");
    // 0's only neighbour is 1, which holds only a copy: copies never make further copies.
    assert_eq!(c.query(&0, at(300), None, &mut never), read(0));
    c.fail(&0, Some(ReadId(0)));
    assert_eq!(c.query(&1, at(100 + T.0), None, &mut never), read(1), "stale with its source");
    let mut plain = Cache::<u32, u64, Neighbours>::new(Lookup::GreedyAge, T, AgeFrom::Load, adjacent());
    plain.preload(2, reading(10.0, 5), at(100));
    plain.query(&1, at(200), None, &mut never);
    assert!(plain.kept_approximation(&1).is_none(), "not kept by default");
}

#[test]
fn age_from_the_sensor_shortens_a_late_value_s_life() {
    let mut by_load = Cache::<u32, u64, Alone>::new(Lookup::Simple, T, AgeFrom::Load, Alone);
    let mut by_sensor = Cache::<u32, u64, Alone>::new(Lookup::Simple, T, AgeFrom::Sensor, Alone);
    for c in [&mut by_load, &mut by_sensor] {
        c.fill(0, None, reading(1.0, 0), at(4_000)); // sensed at 0, loaded 4,000 later
    }
    let when = at(T.0 - 1);
    assert!(matches!(by_load.query(&0, when, None, &mut never), Answer::Hit(_)));
    assert!(matches!(by_sensor.query(&0, when, None, &mut never), Answer::Hit(_)));
    let when = at(T.0 + 1);
    assert!(matches!(by_load.query(&0, when, None, &mut never), Answer::Hit(_)));
    assert_eq!(by_sensor.query(&0, when, None, &mut never), DIRECT);
}

#[test]
fn a_reader_s_max_age_bounds_the_age_since_sensing_and_skips_reads_older_than_it() {
    let mut c = cache(Lookup::Piggyback);
    c.fill(0, None, reading(1.0, 0), at(300)); // sensed at 0, loaded at 300
    assert!(matches!(c.query(&0, at(500), Some(Nanos(1_000)), &mut never), Answer::Hit(_)));
    // 1,100 since loading would pass; 1,100 since sensing does not.
    assert_eq!(c.query(&0, at(1_100), Some(Nanos(1_000)), &mut never), read(0));
    c.wait(&0, ReadId(0), 0, 1).unwrap();
    // A second reader whose bound the read's start falls within waits on it ...
    assert_eq!(c.query(&0, at(1_600), Some(Nanos(1_200)), &mut never), wait(0, 0));
    c.wait(&0, ReadId(0), 0, 2).unwrap();
    // ... one whose bound it falls outside starts a read of its own, and waits on that.
    assert_eq!(c.query(&0, at(1_700), Some(Nanos(100)), &mut never), read(1));
    c.wait(&0, ReadId(1), 0, 3).unwrap();
    // A later reader whose bound both reads' starts would meet waits on the newer one.
    assert_eq!(c.query(&0, at(1_750), Some(Nanos(700)), &mut never), wait(0, 1));
    c.wait(&0, ReadId(1), 0, 4).unwrap();
    // Each read answers its own waiters, whichever ends first.
    assert_eq!(c.fill(0, Some(ReadId(1)), reading(3.0, 1_720), at(1_800)), vec![(3, 0), (4, 0)]);
    assert_eq!(c.fill(0, Some(ReadId(0)), reading(2.0, 1_500), at(1_900)), vec![(1, 0), (2, 0)]);
    // The slower read's older value does not replace the newer one.
    assert_eq!(c.peek(&0).map(|e| e.reading.value), Some(3.0));
    assert!(!c.is_pending(&0));
}

#[test]
fn stale_entries_are_offered_until_the_grace_past_t_ends() {
    let mut c = cache(Lookup::Piggyback);
    c.fill(0, None, reading(1.0, 0), at(0));
    let grace = Nanos(500);
    assert!(c.stale_within(&0, at(T.0 + 499), grace).is_some());
    assert!(c.stale_within(&0, at(T.0 + 500), grace).is_none());
    assert!(c.stale_within(&1, at(0), grace).is_none());
    assert!(c.stale_within(&0, at(1), grace).is_some(), "a fresh entry is offered too");
    let mut all = Cache::<u32, u64, Alone>::new(Lookup::AllHits, T, AgeFrom::Load, Alone);
    all.preload(0, reading(1.0, 0), at(0));
    assert!(all.stale_within(&0, at(u64::MAX / 2), grace).is_some(), "all hits keeps everything");
}

#[test]
fn purge_drops_entries_past_the_bound() {
    let mut c = cache(Lookup::Simple);
    c.fill(0, None, reading(1.0, 0), at(0));
    c.fill(1, None, reading(1.0, 0), at(50));
    c.purge(at(100), Nanos(60));
    assert_eq!((c.peek(&0).is_none(), c.peek(&1).is_some()), (true, true));
}

#[test]
fn policies_parse_by_name_and_refuse_with_the_list() {
    for l in Lookup::ALL {
        assert_eq!(l.name().parse::<Lookup>(), Ok(l));
    }
    let e = "lru".parse::<Lookup>().unwrap_err().to_string();
    assert!(e.contains("`lru`") && e.contains("median-of-3"), "{e}");
    assert_eq!(Lookup::ALL.iter().filter(|l| l.coalesces()).count(), 5);
}

proptest! {
    /// Yates Eq 5.1: under a coalescing policy a key is read only when it has no fresh entry and
    /// no read under way that the reader accepts, so readers without a bound of their own make
    /// at most one read per key per T; every waiter comes back exactly once, from the read it
    /// waited on; and no answer is older than its reader's bound.
    #[test]
    fn coalescing_reads_each_key_at_most_once_per_t(
        lookup in prop::sample::select(vec![Lookup::Piggyback, Lookup::GreedyAge, Lookup::GreedyDistance, Lookup::MedianOf3]),
        ops in prop::collection::vec((0u32..5, 0u64..3_000, 0u64..30_000, any::<bool>(), prop::option::weighted(0.3, 0u64..20_000)), 1..200),
    ) {
        let mut c = cache(lookup);
        let mut now = 0u64;
        // Reads under way: (key, read, when it started, when it ends, fails).
        let mut under_way: Vec<(u32, ReadId, u64, u64, bool)> = Vec::new();
        // When each key's value was last loaded, and when that value was sensed.
        let mut last_load: [Option<(u64, u64)>; 5] = [None; 5];
        // Tokens waiting: token → (the read, the reader's bound, when it asked).
        let mut waiting = std::collections::BTreeMap::new();
        let mut next_token = 0u64;
        let mut draws = 0usize;
        for (key, gap, took, fails, bound) in ops {
            now += gap;
            under_way.sort_by_key(|r| r.3);
            while under_way.first().is_some_and(|r| r.3 <= now) {
                let (k, id, started, end, failed) = under_way.remove(0);
                let back = if failed { c.fail(&k, Some(id)) } else {
                    // The cache keeps the newer of two values.
                    if last_load[k as usize].is_none_or(|(_, sensed)| sensed <= started) {
                        last_load[k as usize] = Some((end, started));
                    }
                    c.fill(k, Some(id), reading(f64::from(k), started), Nanos(end))
                };
                for (w, _) in back {
                    let Some((r, bound, asked)) = waiting.remove(&w) else {
                        return Err(TestCaseError::fail(format!("token {w} came back twice or was never given")));
                    };
                    prop_assert_eq!(r, id, "token {} answered by another read", w);
                    if let Some(b) = bound {
                        prop_assert!(started + b >= asked, "a value sensed {} before its reader asked, bound {b}", asked - started);
                    }
                }
            }
            let max_age = bound.map(Nanos);
            match c.query(&key, Nanos(now), max_age, &mut |n| { draws += 1; draws % n }) {
                Answer::Read { read: Some(id) } => {
                    if max_age.is_none() {
                        prop_assert!(!under_way.iter().any(|r| r.0 == key), "a second read of {key} while one is under way");
                        if let Some((l, _)) = last_load[key as usize] {
                            prop_assert!(now >= l + T.0, "{key} read again {} after its load", now - l);
                        }
                    }
                    c.wait(&key, id, key, next_token).map_err(|_| TestCaseError::fail("the asker could not wait"))?;
                    waiting.insert(next_token, (id, max_age.map(|m| m.0), now));
                    next_token += 1;
                    under_way.push((key, id, now, now + took, fails));
                }
                Answer::Read { read: None } => prop_assert!(false, "{lookup} coalesces"),
                Answer::Wait { on, read } => {
                    prop_assert!(under_way.iter().any(|r| r.0 == on && r.1 == read));
                    c.wait(&on, read, key, next_token).map_err(|_| TestCaseError::fail("wait refused"))?;
                    waiting.insert(next_token, (read, max_age.map(|m| m.0), now));
                    next_token += 1;
                }
                Answer::Hit(e) => {
                    prop_assert!(now < e.loaded_at.0 + T.0);
                    if let Some(m) = max_age {
                        prop_assert!(now - e.reading.sensed_at.0 < m.0);
                    }
                }
                Answer::Approx { from, .. } => prop_assert!(!from.is_empty() && !from.contains(&key)),
            }
        }
        for (k, id, _, _, _) in under_way {
            for (w, _) in c.fail(&k, Some(id)) {
                prop_assert!(waiting.remove(&w).is_some());
            }
        }
        prop_assert!(waiting.is_empty(), "waiters lost: {:?}", waiting);
    }
}

/// An invalidated key is read again; a read that started before the invalidation answers its
/// waiters but does not put back what was invalidated; one started after it is kept.
#[test]
fn an_invalidated_entry_is_read_again_and_an_older_read_not_kept() {
    let mut c = cache(Lookup::Piggyback);
    assert_eq!(c.query(&0, at(0), None, &mut never), read(0));
    c.fill(0, Some(ReadId(0)), reading(1.0, 0), at(1));
    c.invalidate(&0, at(2));
    assert!(c.peek(&0).is_none());
    // A read under way (started at 3) when the key is invalidated again at 4.
    assert_eq!(c.query(&0, at(3), None, &mut never), read(1));
    c.invalidate(&0, at(4));
    c.wait(&0, ReadId(1), 0, 9).unwrap();
    assert_eq!(c.fill(0, Some(ReadId(1)), reading(2.0, 3), at(5)), vec![(9, 0)], "its waiters are answered");
    assert!(c.peek(&0).is_none(), "but what it brought predates the change");
    assert_eq!(c.query(&0, at(6), None, &mut never), read(2));
    c.fill(0, Some(ReadId(2)), reading(3.0, 6), at(7));
    assert_eq!(c.peek(&0).map(|e| e.reading.value), Some(3.0), "a read after the change is kept");
}

/// A run of keys (here 10..20, as a prefix is a run of text keys) is forgotten whole, stored
/// and weighed entries and reads under way alike, and nothing outside it; a read under way in
/// the run answers its waiters but is not kept.
#[test]
fn a_run_of_keys_is_invalidated_with_its_reads_under_way() {
    let mut c: Cache<u32, u64, Alone> = Cache::new(Lookup::Piggyback, T, AgeFrom::Load, Alone).bounded(1000);
    for k in [5, 10, 12, 19, 20, 30] {
        c.fill_weighted(k, None, reading(f64::from(k), 0), at(0), 10);
    }
    let Answer::Read { read: Some(r) } = c.join(&15, at(1)) else { panic!("a new read of 15") };
    c.wait(&15, r, 15, 7).unwrap();
    assert_eq!(c.invalidate_run(&10, |k| *k < 20, at(2)), 3, "10, 12 and 19 were stored");
    let left: Vec<u32> = [5, 10, 12, 19, 20, 30].into_iter().filter(|k| c.peek(k).is_some()).collect();
    assert_eq!(left, vec![5, 20, 30]);
    assert_eq!(c.weight(), 30, "the forgotten entries' weight is given back");
    assert_eq!(c.fill_weighted(15, Some(r), reading(1.0, 1), at(3), 10), vec![(7, 15)]);
    assert!(c.peek(&15).is_none(), "a read started before the purge does not put back what it brought");
    assert_eq!(c.invalidate_run(&40, |_| true, at(4)), 0, "an empty run");
}

/// Entries chosen by their values are forgotten, and only they.
#[test]
fn entries_picked_by_value_are_invalidated() {
    let mut c = cache(Lookup::Piggyback);
    for k in 0..6u32 {
        c.fill(k, None, reading(f64::from(k % 2), 0), at(0));
    }
    assert_eq!(c.invalidate_picked(|_, v| *v == 1.0, at(1)), 3);
    assert!((0..6).all(|k| c.peek(&k).is_some() == (k % 2 == 0)));
}

#[test]
fn a_bounded_cache_evicts_the_least_recently_used_by_weight() {
    let mut c: Cache<u32, u64, Alone> = Cache::new(Lookup::Piggyback, T, AgeFrom::Load, Alone).bounded(100);
    for (k, w) in [(1, 40), (2, 30), (3, 30)] {
        c.fill_weighted(k, None, reading(0.0, 0), at(0), w);
    }
    assert_eq!((c.weight(), c.len()), (100, 3));
    assert!(c.touch(&1), "1 is used again: 2 is now the least recently used");
    c.fill_weighted(4, None, reading(0.0, 0), at(1), 50);
    assert!(c.peek(&2).is_none() && c.peek(&3).is_none() && c.peek(&1).is_some());
    assert_eq!((c.weight(), c.stats().evictions, c.stats().evicted_weight), (90, 2, 60));
    // A hit counts as a use too.
    assert!(matches!(c.query(&1, at(2), None, &mut never), Answer::Hit(_)));
    c.fill_weighted(5, None, reading(0.0, 0), at(2), 20);
    assert!(c.peek(&4).is_none() && c.peek(&1).is_some());
    // Heavier than the bound: not kept, and the entry it replaces goes too.
    assert!(!c.admits(101));
    c.fill_weighted(1, None, reading(1.0, 3), at(3), 101);
    assert!(c.peek(&1).is_none());
    assert_eq!((c.weight(), c.len()), (20, 1));
    c.invalidate(&5, at(4));
    assert_eq!((c.weight(), c.len()), (0, 0));
}

proptest! {
    /// Under random fills of random weights, hits and invalidations, a bounded cache never
    /// holds more than its bound, and holds exactly what least-recently-used order keeps (a
    /// model: a list, least recently used first).
    #[test]
    fn a_bounded_cache_never_holds_more_than_its_bound(
        cap in 1u64..100_000,
        ops in prop::collection::vec((0u8..5, 0u32..50, 0u64..30_000), 0..300),
    ) {
        let mut c: Cache<u32, u64, Alone> = Cache::new(Lookup::Piggyback, T, AgeFrom::Load, Alone).bounded(cap);
        let mut model: Vec<(u32, u64)> = Vec::new();
        let mut evicted = 0;
        for (i, (op, k, w)) in ops.into_iter().enumerate() {
            let now = at(i as u64);
            let old = model.iter().position(|(m, _)| *m == k);
            match op {
                0..=2 => {
                    c.fill_weighted(k, None, reading(0.0, i as u64), now, w);
                    if let Some(at) = old {
                        model.remove(at);
                    }
                    if w <= cap {
                        while model.iter().map(|(_, w)| w).sum::<u64>() + w > cap {
                            model.remove(0);
                            evicted += 1;
                        }
                        model.push((k, w));
                    }
                }
                3 => {
                    let hit = matches!(c.query(&k, now, None, &mut |_| 0), Answer::Hit(_));
                    prop_assert_eq!(hit, old.is_some());
                    if let Some(at) = old {
                        let e = model.remove(at);
                        model.push(e);
                    }
                    // A miss registers a read; end it so that fills stay plain.
                    if let Answer::Read { read } = c.query(&k, now, Some(Nanos::ZERO), &mut |_| 0) {
                        c.fail(&k, read);
                    }
                }
                _ => {
                    c.invalidate(&k, now);
                    if let Some(at) = old {
                        model.remove(at);
                    }
                }
            }
            prop_assert!(c.weight() <= cap, "{} held over a bound of {cap}", c.weight());
            prop_assert_eq!(c.weight(), model.iter().map(|(_, w)| w).sum::<u64>());
            prop_assert_eq!(c.len(), model.len());
            prop_assert!(model.iter().all(|(k, _)| c.peek(k).is_some()));
            prop_assert_eq!(c.stats().evictions, evicted);
        }
    }
}

/// A fill that TinyLFU refuses to admit still answers its waiters, and what the cache holds
/// and weighs stays what the policy holds.
#[test]
fn a_fill_tinylfu_refuses_answers_its_waiters_and_is_not_kept() {
    // 105 bytes: TinyLFU's window starts at 5 of them, which no 10-byte entry fits, so each
    // goes straight to main's 100 and the newcomer below is weighed at once.
    let mut c: Cache<u32, u64, Alone> =
        Cache::new(Lookup::Piggyback, T, AgeFrom::Load, Alone).bounded_by(105, Eviction::TinyLfu, 3);
    assert_eq!(c.eviction(), Some(Eviction::TinyLfu));
    for k in 1..=10 {
        c.fill_weighted(k, None, reading(0.0, 0), at(0), 10);
        for _ in 0..4 {
            assert!(matches!(c.query(&k, at(1), None, &mut never), Answer::Hit(_)));
        }
    }
    let Answer::Read { read } = c.query(&50, at(2), None, &mut never) else { panic!("a miss reads") };
    c.wait(&50, read.unwrap(), 50, 7).unwrap();
    let waiters = c.fill_weighted(50, read, reading(5.0, 2), at(3), 10);
    assert_eq!(waiters, vec![(7, 50)], "the waiter is answered");
    assert!(c.peek(&50).is_none(), "a one-hit wonder is not admitted over keys used five times");
    assert_eq!((c.weight(), c.len()), (100, 10));
    assert_eq!(c.stats().evictions, 0, "refusing a newcomer evicts nothing held");
}

proptest! {
    /// Whatever the policy, a bounded cache holds no more than its bound, and exactly the
    /// entries its policy holds (none it has let go, each with the value last filled).
    #[test]
    fn every_policy_keeps_a_bounded_cache_within_its_bound(
        kind in prop::sample::select(Eviction::ALL.to_vec()),
        cap in 1u64..50_000,
        ops in prop::collection::vec((0u8..5, 0u32..40, 0u64..20_000), 0..300),
    ) {
        let mut c: Cache<u32, u64, Alone> =
            Cache::new(Lookup::Piggyback, T, AgeFrom::Load, Alone).bounded_by(cap, kind, 1);
        let mut last = std::collections::BTreeMap::new();
        for (i, (op, k, w)) in ops.into_iter().enumerate() {
            let now = at(i as u64);
            match op {
                0..=2 => {
                    c.fill_weighted(k, None, reading(i as f64, i as u64), now, w);
                    last.insert(k, i as f64);
                }
                3 => {
                    if let Answer::Hit(e) = c.query(&k, now, None, &mut |_| 0) {
                        prop_assert_eq!(Some(&e.reading.value), last.get(&k), "a hit answers what was filled");
                    } else if let Answer::Read { read } = c.query(&k, now, Some(Nanos::ZERO), &mut |_| 0) {
                        c.fail(&k, read);
                    }
                }
                _ => c.invalidate(&k, now),
            }
            prop_assert!(c.weight() <= cap, "{} held over a bound of {cap} by {kind}", c.weight());
            for (k, v) in &last {
                if let Some(e) = c.peek(k) {
                    prop_assert_eq!(e.reading.value, *v);
                }
            }
        }
    }
}

proptest! {
    /// Purges by key and by prefix forget exactly what a model (an ordered map) says, over
    /// hashed text keys, whatever the policy and the seed of the index: a prefix purge counts
    /// and forgets every key under the prefix and none other, hits still answer what was
    /// filled, and each entry's slot stays the one its policy holds it in.
    #[test]
    fn purges_by_key_and_prefix_forget_what_a_model_says(
        kind in prop::sample::select(Eviction::ALL.to_vec()),
        seed in any::<u64>(),
        ops in prop::collection::vec((0u8..6, "/[ab]{0,3}", any::<bool>()), 0..200),
    ) {
        let mut c: Cache<String, u64, Alone> =
            Cache::new(Lookup::Piggyback, T, AgeFrom::Load, Alone).bounded_by(u64::MAX, kind, seed);
        let mut model: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
        for (i, (op, k, used)) in ops.into_iter().enumerate() {
            let now = at(i as u64);
            match op {
                0 | 1 => {
                    c.fill_weighted(k.clone(), None, reading(i as f64, i as u64), now, 1);
                    model.insert(k, i as f64);
                }
                2 => {
                    let got = c.use_entry(&k, |e| (e.reading.value, used));
                    prop_assert_eq!(got, model.get(&k).copied());
                }
                3 => {
                    c.invalidate(&k, now);
                    model.remove(&k);
                }
                _ => {
                    let gone = c.invalidate_run(&k, |x| x.starts_with(k.as_str()), now);
                    let before = model.len();
                    model.retain(|m, _| !m.starts_with(k.as_str()));
                    prop_assert_eq!(gone, before - model.len(), "purged under {}", k);
                }
            }
            prop_assert_eq!(c.len(), model.len());
            for (m, v) in &model {
                prop_assert_eq!(c.peek(m).map(|e| e.reading.value), Some(*v), "{} is held", m);
            }
            prop_assert!(c.slots_agree());
        }
    }

    /// A bounded cache lets go of exactly what its policy, driven alone by the same fills,
    /// uses and removals, lets go of: counting a hit's use through the entry's slot rather
    /// than by key changes no policy's order. Hits come as queries, as `use_entry` (used or
    /// only read) and as `touch`.
    #[test]
    fn every_policy_evicts_in_a_cache_as_it_does_alone(
        kind in prop::sample::select(Eviction::ALL.to_vec()),
        cap in 1u64..5_000,
        ops in prop::collection::vec((0u8..7, 0u32..40, 0u64..1_000), 0..300),
    ) {
        let mut c: Cache<u32, u64, Alone> =
            Cache::new(Lookup::Piggyback, T, AgeFrom::Load, Alone).bounded_by(cap, kind, 7);
        let mut alone: Evictor<u32> = Evictor::new(kind, cap, 7);
        for (i, (op, k, w)) in ops.into_iter().enumerate() {
            let now = at(i as u64);
            match op {
                0..=2 => {
                    c.fill_weighted(k, None, reading(0.0, i as u64), now, w);
                    alone.insert(k, w);
                }
                3 => {
                    let hit = matches!(c.query(&k, now, None, &mut |_| 0), Answer::Hit(_));
                    prop_assert_eq!(hit, alone.touch(&k));
                    if let Answer::Read { read } = c.query(&k, now, Some(Nanos::ZERO), &mut |_| 0) {
                        c.fail(&k, read);
                    }
                }
                4 => {
                    let used = w % 2 == 0;
                    let held = c.use_entry(&k, |_| ((), used)).is_some();
                    prop_assert_eq!(held, alone.contains(&k));
                    if used {
                        alone.touch(&k);
                    }
                }
                5 => prop_assert_eq!(c.touch(&k), alone.touch(&k)),
                _ => {
                    c.invalidate(&k, now);
                    alone.remove(&k);
                }
            }
            for k in 0..40 {
                prop_assert_eq!(c.peek(&k).is_some(), alone.contains(&k), "{} by {}", k, kind);
            }
            prop_assert_eq!(c.weight(), alone.weight());
            prop_assert!(c.slots_agree());
        }
    }
}

/// A cache bounded after entries were preloaded gives them to the policy in key order, not
/// in the hash index's order: the order they are evicted in does not depend on the hash.
#[test]
fn entries_preloaded_before_the_bound_are_ordered_by_key() {
    for shift in 0..16u32 {
        let keys = [7, 3, 9, 1, 5, 8, 2, 6, 4, 0].map(|k| k * 1000 + shift * 7);
        let mut c: Cache<u32, u64, Alone> = Cache::new(Lookup::AllHits, T, AgeFrom::Load, Alone);
        for k in keys {
            c.preload(k, reading(0.0, 0), at(0));
        }
        let mut c = c.bounded_by(10, Eviction::Lru, u64::from(shift));
        assert!(c.slots_agree());
        let mut gone = Vec::new();
        for n in 0..10 {
            c.fill_weighted(100_000 + n, None, reading(0.0, 1), at(1), 1);
            let now_gone: Vec<u32> = keys.into_iter().filter(|k| c.peek(k).is_none() && !gone.contains(k)).collect();
            gone.extend(now_gone);
        }
        let mut sorted = keys;
        sorted.sort_unstable();
        assert_eq!(gone, sorted, "keys shifted by {shift}: evicted in key order");
    }
}
