//! Properties of the placement policies over random worker sets, keys and operation sequences.

use proptest::prelude::*;
use switchyard_core::place::score::{fast, node_seed, splitmix64};
use switchyard_core::place::{self, PlaceConfig, Placer};
use switchyard_core::{FlowId, LoadTracker, LoadView, Policy, Topology, Unit, Weight, WorkerId};

fn unit(d: u64) -> Unit {
    Unit::of_flow(FlowId(d), 1)
}

fn placements(p: &mut dyn Placer, keys: &[u64]) -> Vec<WorkerId> {
    keys.iter().map(|&k| p.place(&unit(k), &LoadView::IDLE)).collect()
}

fn weighted(ids: &[u32], weights: &[f64]) -> Vec<(WorkerId, Weight)> {
    ids.iter().zip(weights).map(|(&i, &w)| (WorkerId(i), Weight::new(WorkerId(i), w).unwrap())).collect()
}

/// Chi-square critical value with `k` degrees of freedom at p ≈ 1e-6 (Wilson–Hilferty).
fn chi2_critical(k: f64) -> f64 {
    let z = 4.753;
    let c = 1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt();
    k * c * c * c
}

/// The default (fast) score passes at every size. The classic 31-bit LCG-XOR function of the
/// source passes up to N = 64 but not at N = 256 (χ² ≈ 534 against 377 at p = 1e-6 with ids
/// 0..255): a measured weakness of the 1998 function, held here under a looser bound so that a
/// change shows.
#[test]
fn hrw_is_uniform_over_a_million_keys() {
    for policy in [Policy::Hrw, Policy::HrwClassic] {
        for n in [8u32, 16, 64, 256] {
            let ids: Vec<WorkerId> = (0..n).map(WorkerId).collect();
            let mut p = place::build(policy, &PlaceConfig::default(), &ids).unwrap();
            let keys = 1_000_000u64;
            let mut count = vec![0u64; n as usize];
            for k in 0..keys {
                count[p.place(&unit(splitmix64(k)), &LoadView::IDLE).0 as usize] += 1;
            }
            let e = keys as f64 / f64::from(n);
            let chi2: f64 = count.iter().map(|&c| (c as f64 - e) * (c as f64 - e) / e).sum();
            let mut crit = chi2_critical(f64::from(n - 1));
            if policy == Policy::HrwClassic && n == 256 {
                eprintln!("hrw-classic N=256: chi2 {chi2:.1} (critical {crit:.1} at p = 1e-6)");
                crit *= 1.6;
            }
            assert!(chi2 < crit, "{policy} N={n}: chi2 {chi2:.1} ≥ {crit:.1}; counts {count:?}");
        }
    }
}

/// The classic LCG-XOR function's shares are a function of the worker ids: with three workers
/// the share of worker 1000 among {156, 877, 1000} is 29.3 %, five thousand standard deviations
/// of 10^6 keys away from a third, while {0, 1, 2} are even. (CI found this as an "intermittent"
/// failure of `adding_a_worker_moves_keys_only_to_it`, which used to expect 1/(N+1) of the
/// classic function too; the seed is kept in proptest-regressions.) If the score ever changes,
/// this shows it.
#[test]
fn classic_shares_depend_on_the_ids() {
    let share = |ids: &[u32], of: u32| {
        let members: Vec<WorkerId> = ids.iter().map(|&i| WorkerId(i)).collect();
        let mut p = place::build(Policy::HrwClassic, &PlaceConfig::default(), &members).unwrap();
        let keys = 1_000_000u64;
        let won = (0..keys).filter(|&k| p.place(&unit(splitmix64(k)), &LoadView::IDLE) == WorkerId(of)).count();
        won as f64 / keys as f64
    };
    let skewed = share(&[156, 877, 1000], 1000);
    assert!((skewed - 0.293).abs() < 0.005, "classic share of 1000 among {{156, 877, 1000}}: {skewed:.4}");
    let even = share(&[0, 1, 2], 2);
    assert!((even - 1.0 / 3.0).abs() < 0.005, "classic share of 2 among {{0, 1, 2}}: {even:.4}");
}

fn worker_set() -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::btree_set(0u32..1000, 2..40).prop_map(|s| s.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn removing_a_worker_moves_exactly_its_keys(
        ids in worker_set(),
        weights in proptest::collection::vec(0.25f64..8.0, 40),
        victim in any::<prop::sample::Index>(),
        seed in any::<u64>(),
    ) {
        let keys: Vec<u64> = (0..3000).map(|i| splitmix64(seed ^ i)).collect();
        let gone = WorkerId(ids[victim.index(ids.len())]);
        for policy in [Policy::Hrw, Policy::HrwClassic, Policy::WeightedHrw, Policy::Ring] {
            let w = if policy.supports_weights() { weights[..ids.len()].to_vec() } else { vec![1.0; ids.len()] };
            let mut p = place::build_weighted(policy, &PlaceConfig::default(), &weighted(&ids, &w)).unwrap();
            let before = placements(p.as_mut(), &keys);
            p.remove_worker(gone).unwrap();
            let after = placements(p.as_mut(), &keys);
            for (b, a) in before.iter().zip(&after) {
                prop_assert!(if *b == gone { *a != gone } else { a == b }, "{policy}: {b} → {a}");
            }
        }
    }

    #[test]
    fn adding_a_worker_moves_keys_only_to_it(ids in worker_set(), seed in any::<u64>()) {
        let keys: Vec<u64> = (0..20_000).map(|i| splitmix64(seed ^ i)).collect();
        let newcomer = WorkerId(1000 + (seed % 7) as u32);
        for policy in [Policy::Hrw, Policy::HrwClassic, Policy::WeightedHrw, Policy::Ring, Policy::Jump] {
            let members: Vec<WorkerId> = ids.iter().map(|&i| WorkerId(i)).collect();
            let mut p = place::build(policy, &PlaceConfig::default(), &members).unwrap();
            let before = placements(p.as_mut(), &keys);
            p.add_worker(newcomer, Weight::ONE).unwrap();
            let after = placements(p.as_mut(), &keys);
            let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
            prop_assert!(before.iter().zip(&after).all(|(b, a)| a == b || *a == newcomer), "{policy}");
            // Binomial(keys, 1/(N+1)): within five standard deviations. Not for the classic
            // function: its shares depend on the ids themselves (over {156, 877, 1000} worker
            // 1000 wins 29.3 % of keys, not 33.3 %; see `classic_shares_depend_on_the_ids`),
            // so a newcomer's count is not binomial around 1/(N+1) for every id set.
            if matches!(policy, Policy::Hrw | Policy::WeightedHrw | Policy::Jump) {
                let n = keys.len() as f64;
                let q = 1.0 / (ids.len() as f64 + 1.0);
                let sd = (n * q * (1.0 - q)).sqrt();
                prop_assert!((moved as f64 - n * q).abs() < 5.0 * sd + 1.0, "{policy}: moved {moved}, expected {}", n * q);
            }
        }
    }

    #[test]
    fn changing_one_weight_moves_keys_only_to_or_from_it(
        ids in worker_set(),
        weights in proptest::collection::vec(0.25f64..8.0, 40),
        which in any::<prop::sample::Index>(),
        new_weight in 0.25f64..8.0,
        seed in any::<u64>(),
    ) {
        let keys: Vec<u64> = (0..3000).map(|i| splitmix64(seed ^ i)).collect();
        let changed = WorkerId(ids[which.index(ids.len())]);
        let mut p = place::build_weighted(Policy::WeightedHrw, &PlaceConfig::default(), &weighted(&ids, &weights[..ids.len()])).unwrap();
        let before = placements(p.as_mut(), &keys);
        p.set_weight(changed, Weight::new(changed, new_weight).unwrap()).unwrap();
        let after = placements(p.as_mut(), &keys);
        for (b, a) in before.iter().zip(&after) {
            prop_assert!(a == b || *a == changed || *b == changed, "{b} → {a}");
        }
    }

    #[test]
    fn ahrw_is_hrw_when_loads_are_equal(ids in worker_set(), level in prop_oneof![Just(0u64), 1u64..1000], seed in any::<u64>()) {
        let members: Vec<WorkerId> = ids.iter().map(|&i| WorkerId(i)).collect();
        let q = vec![level; 1000];
        let view = LoadView::new(&q, &q);
        let cfg = PlaceConfig::default();
        let mut hrw = place::build(Policy::Hrw, &cfg, &members).unwrap();
        let mut ahrw = place::build(Policy::Ahrw, &cfg, &members).unwrap();
        let mut nonzero = place::build(Policy::AhrwNonzero, &cfg, &members).unwrap();
        for i in 0..500 {
            let u = unit(splitmix64(seed ^ i));
            let want = hrw.place(&u, &view);
            prop_assert_eq!(ahrw.place(&u, &view), want);
            prop_assert_eq!(nonzero.place(&u, &view), want);
        }
        // The tree forms: H-AHRW with equal loads is hierarchical HRW.
        let tree = PlaceConfig { topology: Some(Topology::parse("4x2x4").unwrap()), ..PlaceConfig::default() };
        let all: Vec<WorkerId> = (0..32).map(WorkerId).collect();
        let mut plain = place::build(Policy::HHrw, &tree, &all).unwrap();
        let mut adjusted = place::build(Policy::HAhrw, &tree, &all).unwrap();
        for i in 0..500 {
            let u = unit(splitmix64(seed ^ i));
            prop_assert_eq!(adjusted.place(&u, &view), plain.place(&u, &view));
        }
    }

    /// The fast AHRW path (integer threshold filter) against the definition: argmax of
    /// r_p · g_p with exact rational arithmetic, first on ties.
    #[test]
    fn ahrw_matches_its_definition(
        loads in proptest::collection::vec(prop_oneof![Just(0u64), 1u64..50, 1u64..1_000_000], 1..80),
        nonzero in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let n = loads.len() as u32;
        let members: Vec<WorkerId> = (0..n).map(WorkerId).collect();
        let policy = if nonzero { Policy::AhrwNonzero } else { Policy::Ahrw };
        let mut p = place::build(policy, &PlaceConfig::default(), &members).unwrap();
        let view = LoadView::new(&loads, &loads);
        let min_all = *loads.iter().min().unwrap();
        let min_busy = loads.iter().copied().filter(|&q| q > 0).min();
        for i in 0..200 {
            let d = splitmix64(seed ^ i);
            let g: Vec<u128> = (0..n).map(|w| u128::from(fast(d, node_seed(w)) >> 11)).collect();
            // h_p = r_p · g_p as a fraction num/den.
            let frac = |w: usize| -> (u128, u128) {
                let q = u128::from(loads[w]);
                match (min_busy, nonzero) {
                    (None, _) => (g[w], 1),
                    (Some(_), false) if min_all == 0 => (if q == 0 { g[w] } else { 0 }, 1),
                    (Some(m), _) => if q == 0 { (g[w], 1) } else { (g[w] * u128::from(m), q) },
                }
            };
            let mut best = 0;
            for w in 1..n as usize {
                let (a, b) = (frac(w), frac(best));
                if a.0 * b.1 > b.0 * a.1 {
                    best = w;
                }
            }
            prop_assert_eq!(p.place(&unit(d), &view), WorkerId(best as u32));
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Place(u64),
    Complete(prop::sample::Index),
    Remove(prop::sample::Index),
    Add(u32),
    Reweight(prop::sample::Index, f64),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => any::<u64>().prop_map(Op::Place),
        3 => any::<prop::sample::Index>().prop_map(Op::Complete),
        1 => any::<prop::sample::Index>().prop_map(Op::Remove),
        1 => (0u32..24).prop_map(Op::Add),
        1 => (any::<prop::sample::Index>(), 0.5f64..4.0).prop_map(|(i, w)| Op::Reweight(i, w)),
    ];
    proptest::collection::vec(op, 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Bounded loads: every placement leaves its worker at or under the capacity computed at that
    /// moment, through any sequence of places, completions, removals (whose units are placed
    /// again) and weight changes.
    #[test]
    fn bounded_loads_never_exceed_the_cap(ops in ops(), eps in prop_oneof![Just(0.0), 0.0f64..1.0]) {
        let cfg = PlaceConfig { epsilon: eps, vnodes: 20, ..PlaceConfig::default() };
        let initial: Vec<WorkerId> = (0..4).map(WorkerId).collect();
        let mut p = place::build(Policy::Bounded, &cfg, &initial).unwrap();
        let mut load = LoadTracker::new();
        let mut queued: Vec<(WorkerId, Unit)> = Vec::new();
        let place_one = |p: &mut Box<dyn Placer>, load: &mut LoadTracker, queued: &mut Vec<(WorkerId, Unit)>, u: Unit| {
            let m = p.members().clone();
            let total: u64 = m.as_slice().iter().map(|w| load.units(w.id)).sum();
            let share = |id: WorkerId| m.as_slice().iter().find(|w| w.id == id).unwrap().weight.get() / m.total_weight();
            let w = p.place(&u, &load.view());
            let cap = ((1.0 + eps) * (total + 1) as f64 * share(w)).ceil() as u64;
            load.on_enqueue(w, &u);
            queued.push((w, u));
            (load.units(w), cap)
        };
        for op in ops {
            match op {
                Op::Place(k) => {
                    let (after, cap) = place_one(&mut p, &mut load, &mut queued, unit(k));
                    prop_assert!(after <= cap, "load {after} > cap {cap}");
                }
                Op::Complete(i) if !queued.is_empty() => {
                    let (w, u) = queued.swap_remove(i.index(queued.len()));
                    load.on_complete(w, &u);
                }
                Op::Remove(i) => {
                    let gone = p.members().id(i.index(p.members().len()));
                    if p.remove_worker(gone).is_ok() {
                        load.clear_worker(gone);
                        let moved: Vec<Unit> = queued.iter().filter(|(w, _)| *w == gone).map(|(_, u)| *u).collect();
                        queued.retain(|(w, _)| *w != gone);
                        for u in moved {
                            let (after, cap) = place_one(&mut p, &mut load, &mut queued, u);
                            prop_assert!(after <= cap, "re-placed: load {after} > cap {cap}");
                        }
                    }
                }
                Op::Add(id) => {
                    let _ = p.add_worker(WorkerId(id), Weight::ONE);
                }
                Op::Reweight(i, w) => {
                    let id = p.members().id(i.index(p.members().len()));
                    p.set_weight(id, Weight::new(id, w).unwrap()).unwrap();
                }
                Op::Complete(_) => {}
            }
        }
    }

    /// Every policy, under any sequence of operations, places every unit on a current member
    /// and never panics; refused changes leave the member set as it was.
    #[test]
    fn every_policy_places_on_a_member(ops in ops(), policy in prop::sample::select(Policy::ALL.to_vec())) {
        let cfg = PlaceConfig { topology: Some(Topology::parse("4x2x3").unwrap()), maglev_table: 251, ..PlaceConfig::default() };
        let initial: Vec<WorkerId> = (0..6).map(WorkerId).collect();
        let mut p = place::build(policy, &cfg, &initial).unwrap();
        let mut load = LoadTracker::new();
        let mut queued: Vec<(WorkerId, Unit)> = Vec::new();
        for (seq, op) in ops.into_iter().enumerate() {
            match op {
                Op::Place(k) => {
                    let u = Unit::of_flow(FlowId(k % 17), 1 + k % 3000).with_seq(seq as u64);
                    let w = p.place(&u, &load.view());
                    prop_assert!(p.members().contains(w), "{policy} placed on {w}, not a member");
                    load.on_enqueue(w, &u);
                    queued.push((w, u));
                }
                Op::Complete(i) if !queued.is_empty() => {
                    let (w, u) = queued.swap_remove(i.index(queued.len()));
                    load.on_complete(w, &u);
                    if k_is_done(&queued, u.flow) {
                        p.forget_flow(u.flow);
                    }
                }
                Op::Remove(i) => {
                    let before = p.members().clone();
                    let gone = before.id(i.index(before.len()));
                    if p.remove_worker(gone).is_err() {
                        prop_assert_eq!(p.members(), &before);
                    }
                }
                Op::Add(id) => {
                    let before = p.members().clone();
                    if p.add_worker(WorkerId(id), Weight::ONE).is_err() {
                        prop_assert_eq!(p.members(), &before);
                    }
                }
                Op::Reweight(i, w) => {
                    let id = p.members().id(i.index(p.members().len()));
                    let r = p.set_weight(id, Weight::new(id, w).unwrap());
                    prop_assert_eq!(r.is_ok(), policy.supports_weights());
                }
                Op::Complete(_) => {}
            }
        }
    }
}

fn k_is_done(queued: &[(WorkerId, Unit)], flow: FlowId) -> bool {
    !queued.iter().any(|(_, u)| u.flow == flow)
}

/// Maglev rebuilds its table on a membership change, so some keys move between workers that
/// stayed; the ring moves none. Reported (run with `--nocapture`), with loose sanity bounds.
#[test]
fn maglev_and_ring_disruption_is_measured() {
    let keys: Vec<u64> = (0..200_000).map(splitmix64).collect();
    for n in [8u32, 64, 256] {
        for policy in [Policy::Maglev, Policy::Ring, Policy::Jump] {
            let ids: Vec<WorkerId> = (0..n).map(WorkerId).collect();
            let mut p = place::build(policy, &PlaceConfig::default(), &ids).unwrap();
            let before = placements(p.as_mut(), &keys);
            p.remove_worker(WorkerId(0)).unwrap();
            let after = placements(p.as_mut(), &keys);
            let needless = before.iter().zip(&after).filter(|(b, a)| b.0 != 0 && a != b).count();
            let frac = needless as f64 / keys.len() as f64;
            eprintln!("{policy:>6} N={n:<4} keys moved between surviving workers on removing w0: {:.3}%", frac * 100.0);
            match policy {
                Policy::Ring => assert_eq!(needless, 0),
                Policy::Maglev => assert!(frac < 0.02, "maglev moved {frac}"),
                _ => assert!(frac < 2.5 / f64::from(n), "jump moved {frac}"),
            }
        }
    }
}
