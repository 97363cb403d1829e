//! Proportional shares: weighted HRW by both methods, the CARP multipliers, and PS-HRW.

use proptest::prelude::*;
use switchyard_core::place::score::{fast, node_seed, splitmix64, unit_interval};
use switchyard_core::place::{self, PlaceConfig, PsDispatch, carp};
use switchyard_core::{FlowId, LoadTracker, LoadView, Policy, Unit, Weight, WorkerId};

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Each worker's share of 2·10^6 keys is within ±2% (relative) of its weight's share. With
    /// at most 8 workers and weights in 1..4, that margin is over five standard deviations.
    #[test]
    fn weighted_shares_follow_weights(weights in proptest::collection::vec(1.0f64..4.0, 2..8), seed in any::<u64>()) {
        let n = weights.len();
        let workers: Vec<(WorkerId, Weight)> =
            weights.iter().enumerate().map(|(i, &w)| (WorkerId(i as u32), Weight::new(WorkerId(i as u32), w).unwrap())).collect();
        let total: f64 = weights.iter().sum();
        for policy in [Policy::WeightedHrw, Policy::WeightedHrwCarp] {
            let mut p = place::build_weighted(policy, &PlaceConfig::default(), &workers).unwrap();
            let keys = 2_000_000u64;
            let mut count = vec![0u64; n];
            for k in 0..keys {
                count[p.place(&Unit::of_flow(FlowId(splitmix64(seed ^ k)), 1), &LoadView::IDLE).0 as usize] += 1;
            }
            for i in 0..n {
                let want = weights[i] / total;
                let got = count[i] as f64 / keys as f64;
                prop_assert!((got / want - 1.0).abs() < 0.02, "{policy} worker {i}: share {got:.4}, weight share {want:.4}");
            }
        }
    }
}

#[test]
fn carp_multipliers_give_their_target_shares() {
    let p = [0.05, 0.1, 0.15, 0.2, 0.5];
    let x = carp::multipliers(&p);
    let seeds: Vec<u64> = (0..5).map(node_seed).collect();
    let mut count = [0u64; 5];
    let keys = 1_000_000u64;
    for k in 0..keys {
        let d = splitmix64(k);
        let best = (0..5)
            .max_by(|&a, &b| {
                (x[a] * unit_interval(fast(d, seeds[a]))).total_cmp(&(x[b] * unit_interval(fast(d, seeds[b]))))
            })
            .unwrap();
        count[best] += 1;
    }
    for i in 0..5 {
        let got = count[i] as f64 / keys as f64;
        assert!((got - p[i]).abs() < 0.003, "target {} got {got}", p[i]);
    }
}

/// PS-HRW (Guo ch. 7) with per-unit dispatch: with sizes 50 and 110 (split over three other
/// flows) on 8 workers, the big flow is entitled to g = 50/160·8 = 2.5 workers: two whole ones at
/// 1/N' = 0.2 each and a residual 0.5/N' = 0.1 on each of the other six (N' = 2 + 6·0.5 = 5).
#[test]
fn ps_hrw_per_unit_spreads_a_flow_in_its_target_proportions() {
    let ids: Vec<WorkerId> = (0..8).map(WorkerId).collect();
    let cfg = PlaceConfig { ps_dispatch: PsDispatch::PerUnit, ..PlaceConfig::default() };
    let mut p = place::build(Policy::PsHrw, &cfg, &ids).unwrap();
    let load = LoadTracker::new();
    for (f, size) in [(1u64, 40u64), (2, 40), (3, 30)] {
        let _ = p.place(&Unit::of_flow(FlowId(splitmix64(f)), size), &load.view());
    }
    let big = FlowId(splitmix64(99));
    let mut count = [0u64; 8];
    let n = 400_000;
    for seq in 0..n {
        count[p.place(&Unit::of_flow(big, 50).with_seq(seq), &load.view()).0 as usize] += 1;
    }
    let mut shares: Vec<f64> = count.iter().map(|&c| c as f64 / n as f64).collect();
    shares.sort_by(|a, b| b.total_cmp(a));
    for (i, s) in shares.iter().enumerate() {
        let want = if i < 2 { 0.2 } else { 0.1 };
        assert!((s - want).abs() < 0.005, "share {i}: {s}, want {want}; all {shares:?}");
    }
}

/// PS-HRW with set dispatch (the default, Table 7.1's reading): the big flow of the test above
/// gets its two whole workers (plus a residual one unless it falls on them) and spreads over them
/// by load; a small flow
/// (g < 1) keeps to one worker.
#[test]
fn ps_hrw_set_gives_a_big_flow_its_workers_and_keeps_a_small_one_local() {
    let ids: Vec<WorkerId> = (0..8).map(WorkerId).collect();
    let mut p = place::build(Policy::PsHrw, &PlaceConfig::default(), &ids).unwrap();
    let mut load = LoadTracker::new();
    for (f, size) in [(1u64, 40u64), (2, 40), (3, 30)] {
        let u = Unit::of_flow(FlowId(splitmix64(f)), size);
        let w = p.place(&u, &load.view());
        load.on_enqueue(w, &u);
    }
    let big = FlowId(splitmix64(99));
    let mut count = [0u64; 8];
    for seq in 0..3000 {
        let u = Unit::of_flow(big, 50).with_seq(seq);
        let w = p.place(&u, &load.view());
        load.on_enqueue(w, &u);
        count[w.0 as usize] += 1;
    }
    let used: Vec<u64> = count.iter().copied().filter(|&c| c > 0).collect();
    assert!((2..=3).contains(&used.len()), "the flow's set is 2 whole workers plus at most one residual: {count:?}");
    // AHRW within the set settles where Q_p / Q_q = g_p / g_q, so shares follow the flow's scores
    // rather than being equal; each worker of the set still does a real part.
    assert!(used.iter().all(|&c| c > 3000 / 5), "units spread by load within the set: {count:?}");
    // A flow entitled to less than one worker stays on one.
    let small = FlowId(splitmix64(7));
    let first = p.place(&Unit::of_flow(small, 1), &load.view());
    for seq in 1..50 {
        assert_eq!(p.place(&Unit::of_flow(small, 1).with_seq(seq), &load.view()), first);
    }
}
