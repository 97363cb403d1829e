//! The macro benchmarks called as a library, briefly: each runs its real driver beside its
//! peers and returns typed rows. The figures are the machine's; what is checked is what must
//! hold on any machine (every case ran, the counts add up, the cache coalesced, the pacer kept
//! its promise within a wide margin). nginx and wrk are left out: the CLI's runs use them where
//! `bench/install-peers.sh` installed them.

use std::sync::Mutex;

use switchyard_core::Policy;
use switchyard_experiments::bench::{inspect, mux};
use switchyard_runtime::inspect::Engine;

/// One benchmark at a time: each measures the machine, and two at once would measure each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn inspect_runs_every_policy_on_both_generated_traces_beside_the_simulator() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let setup = inspect::Setup {
        connections: 150,
        elephants: 0.05,
        workers: 2,
        repeat: 1,
        queue: 256,
        batch: 8,
        engine: Engine::Combined,
        sample: None,
    };
    let mut seen = Vec::new();
    let runs = inspect::run(&setup, &mut |t| seen.push(t.name.clone())).unwrap();
    assert_eq!(seen, ["uniform", "skewed"], "told of each trace as it finished");
    for t in &runs {
        assert!(t.packets > 150 && t.rounds >= 1, "{t:?}");
        assert!(t.serial_pps > 0.0 && t.producer_ns > 0.0 && t.ceiling >= 1.0, "{t:?}");
        let policies: Vec<Policy> = t.policies.iter().map(|p| p.policy).collect();
        assert_eq!(policies, inspect::POLICIES);
        for p in &t.policies {
            assert!(p.packets_per_s > 0.0 && p.over_serial > 0.0 && p.sim_own > 0.0, "{p:?}");
            assert!((0.0..=1.0).contains(&p.blocked), "{p:?}");
        }
        let mod_n = &t.policies[0];
        assert!((mod_n.over_static - 1.0).abs() < 1e-9, "static hash over itself is 1: {mod_n:?}");
    }
}

#[test]
fn mux_measures_the_session_and_its_peers_against_raw_tcp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let cases = vec![mux::Case::Stripe, mux::Case::Pin, mux::Case::H2, mux::Case::Quic];
    let setup =
        mux::Setup { connections: 2, channels: 3, seconds: 0.6, rounds: 2, cases: cases.clone(), ..Default::default() };
    let r = mux::run(&setup).unwrap();
    assert!(r.raw_rate > 1e6 && r.raw_cost > 0.0, "{r:?}");
    assert_eq!(r.cases.iter().map(|c| c.case).collect::<Vec<_>>(), cases);
    for c in &r.cases {
        assert!(c.rate > 0.0 && c.over_raw > 0.0 && c.cost > 0.0, "{c:?}");
        assert!((0.0..=1.0).contains(&c.max_gap), "{c:?}");
        assert!(c.rounds_range.0 <= c.over_raw && c.over_raw <= c.rounds_range.1, "{c:?}");
        let ours = matches!(c.case, mux::Case::Stripe | mux::Case::Pin);
        assert_eq!(c.session.is_some(), ours, "only the session reports its schedulers: {c:?}");
    }
    // Three channels on two equal connections: 1 and 0.8 + 0.64 are 1.44 apart by pinning.
    assert!(r.pin_model_rms > 0.0, "{r:?}");
}
