//! One integration-test binary for the simulator: the engine against closed forms, determinism,
//! conservation, and event order.

use proptest::prelude::*;
use switchyard_sim::models::mmc::{Mmc, MmcParams, erlang_c_wait};
use switchyard_sim::{EventQueue, Nanos};

/// Mean wait in line within 5% of Erlang C on long runs. The tolerance is several standard
/// errors at these lengths (waits are strongly autocorrelated near saturation, so the error
/// shrinks slowly).
#[test]
fn mmc_mean_wait_matches_erlang_c() {
    for (lambda, mu, servers) in [(800.0, 1000.0, 1), (3200.0, 1000.0, 4), (12_000.0, 1000.0, 16)] {
        let p = MmcParams { lambda, mu, servers, customers: 2_000_000, seed: 11 };
        let out = Mmc::simulate(&p).unwrap();
        let want = erlang_c_wait(lambda, mu, servers).unwrap();
        let err = out.mean_wait / want - 1.0;
        assert!(
            err.abs() < 0.05,
            "M/M/{servers} λ={lambda} μ={mu}: W_q {} against {want} ({:+.1}%)",
            out.mean_wait,
            err * 100.0
        );
        // Little's law piece: sojourn = wait + mean service.
        assert!((out.mean_sojourn - out.mean_wait - 1.0 / mu).abs() < 0.02 / mu);
    }
}

#[test]
fn same_seed_same_run_and_every_customer_served() {
    let p = MmcParams { lambda: 900.0, mu: 1000.0, servers: 2, customers: 100_000, seed: 5 };
    let a = Mmc::simulate(&p).unwrap();
    let b = Mmc::simulate(&p).unwrap();
    assert_eq!(a.mean_wait.to_bits(), b.mean_wait.to_bits());
    assert_eq!((a.events, a.end.to_bits()), (b.events, b.end.to_bits()));
    assert_eq!(a.served, 100_000, "conservation: every arrival is served by the end");
    assert_eq!(a.events, 200_000, "one arrival and one departure per customer");
    let c = Mmc::simulate(&MmcParams { seed: 6, ..p }).unwrap();
    assert_ne!(a.mean_wait.to_bits(), c.mean_wait.to_bits());
}

proptest! {
    /// Whatever the schedule, events come out in (time, order scheduled) order.
    #[test]
    fn events_pop_in_time_then_schedule_order(times in proptest::collection::vec(0u64..50, 0..300)) {
        let mut q = EventQueue::new();
        for (i, &t) in times.iter().enumerate() {
            q.schedule_at(Nanos(t), i).unwrap();
        }
        let mut want: Vec<(u64, usize)> = times.iter().enumerate().map(|(i, &t)| (t, i)).collect();
        want.sort();
        let got: Vec<(u64, usize)> = std::iter::from_fn(|| q.pop().map(|(t, i)| (t.0, i))).collect();
        prop_assert_eq!(got, want);
    }
}
