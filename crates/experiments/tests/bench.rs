//! The macro benchmarks called as a library, briefly: each runs its real driver beside its
//! peers and returns typed rows. The figures are the machine's; what is checked is what must
//! hold on any machine (every case ran, the counts add up, the cache coalesced, the pacer kept
//! its promise within a wide margin). nginx and wrk are left out: the CLI's runs use them where
//! `bench/install-peers.sh` installed them.

use std::sync::Mutex;

use switchyard_experiments::ExperimentError;
use switchyard_experiments::bench::{deliver, gateway, jobs};

/// One benchmark at a time: each measures the machine, and two at once would measure each other.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn gateway_coalesces_both_herds_into_one_origin_read_and_times_lookups() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let setup = gateway::Setup { seconds: 1.0, rounds: 1, connections: 4, herd: 40, keys: 200, nginx: None, wrk: None };
    let r = gateway::run(&setup).unwrap();
    assert_eq!(r.servers.len(), 1, "without nginx, only ours");
    let ours = &r.servers[0];
    assert!(ours.hits.is_none(), "without wrk, no hit rates");
    assert_eq!(ours.cold_herd, (1.0, 0), "40 asks for a new key: one origin read, all answered");
    assert_eq!(ours.expired_herd, (1.0, 0), "40 asks at expiry: one origin read, all answered");
    assert!(r.lookups.0 > 0.0 && r.lookups.1 > 0.0, "{r:?}");

    let none = gateway::Setup { keys: 0, ..setup };
    assert!(matches!(gateway::run(&none), Err(ExperimentError::Input(_))));
}

#[test]
fn deliver_serves_every_case_from_ours_and_tokio_and_holds_the_rates() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let setup = deliver::Setup {
        conns: 40,
        rate: 64_000,
        cores: 1,
        grain_ms: 100.0,
        accurate_conns: 5,
        accurate_rate: 2_000_000,
        accurate_grain_ms: 1.0,
        seconds: 1.0,
        warmup: 0.2,
        bulk_conns: 4,
        bulk_seconds: 0.5,
        nginx: None,
        clients: deliver::Clients::InProcess,
    };
    let mut told = Vec::new();
    let all = deliver::run(&setup, &mut |p| match p {
        deliver::Progress::Starting(c) => told.push(format!("start {}", c.name)),
        deliver::Progress::Done(c, _) => told.push(format!("done {}", c.name)),
    })
    .unwrap();
    assert_eq!(told, ["start scale", "done scale", "start accurate", "done accurate", "start bulk", "done bulk"]);
    for (case, rows) in &all {
        let servers: Vec<&str> = rows.iter().map(|r| r.server).collect();
        match case.rate {
            Some(rate) => {
                assert_eq!(servers, ["switchyard", "tokio"], "{}", case.name);
                for r in rows {
                    let promised = rate as f64 * case.conns as f64;
                    assert_eq!(r.served.conns, case.conns, "{r:?}");
                    // Loopback keeps a paced promise closely; a quarter allows a busy machine.
                    assert!((r.served.aggregate_bps / promised - 1.0).abs() < 0.25, "{} {r:?}", case.name);
                    assert!(r.served.error_fine.is_some() && r.served.run_error.is_some(), "{r:?}");
                }
            }
            None => {
                assert_eq!(servers, ["switchyard", "switchyard×1", "tokio"]);
                assert!(rows.iter().all(|r| r.served.aggregate_bps > 1e6 && r.served.error_fine.is_none()), "{rows:?}");
            }
        }
    }
    let bad = deliver::Setup { bulk_conns: 0, ..setup.clone() };
    assert!(matches!(deliver::run(&bad, &mut |_| {}), Err(ExperimentError::Input(m)) if m.contains("--bulk-conns")));
    let bad = deliver::Setup { warmup: -1.0, ..setup };
    assert!(matches!(bad.check(), Err(ExperimentError::Input(m)) if m.contains("--warmup")));
}

#[test]
fn jobs_assigns_tasks_through_the_coordinator_and_times_its_polls() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let setup = jobs::Setup { seconds: 0.5, rounds: 2, workers: 2, celery: None };
    let mut told = Vec::new();
    let r = jobs::run(&setup, &mut |name, round| told.push((name.to_string(), round.tasks))).unwrap();
    assert_eq!(r.ours.len(), 2);
    assert!(r.celery.is_empty());
    assert_eq!(told.len(), 2);
    for round in &r.ours {
        // Every measured task went poll → result → kept; a second of a debug build does dozens.
        assert!(round.tasks > 10 && round.rate > 0.0, "{round:?}");
        assert!(round.p50_ms > 0.0 && round.p50_ms <= round.p99_ms, "{round:?}");
    }
    assert!(jobs::median(&r.ours).is_some());
    let bad = jobs::Setup { workers: 0, ..setup };
    assert!(jobs::run(&bad, &mut |_, _| {}).unwrap_err().to_string().contains("at least one worker"));
}

/// The Figurehead bench, small: two routes through the gateway over four loopback origins,
/// each beside the simulator's prediction; a fixed-delay hedge sends more attempts a read.
#[test]
fn the_figurehead_bench_runs_routes_beside_their_prediction() {
    use std::time::Duration;

    use switchyard_core::place::sla::RouteKind;
    use switchyard_experiments::bench::figurehead::{Setup, run};
    use switchyard_experiments::figurehead::SWEEP_SLA;

    let setup = Setup {
        requests: 200,
        rate: 200.0,
        routes: vec![
            (RouteKind::LeastOutstanding, SWEEP_SLA.within),
            (RouteKind::HedgeFixed(Duration::from_millis(30)), SWEEP_SLA.within),
        ],
        ..Setup::default()
    };
    let rows = run(&setup, &|_| {}).unwrap();
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert_eq!(r.real.failed, 0, "{r:?}");
        // The real attainment is a wall-clock outcome (answers within the SLA's tens of
        // milliseconds over loopback): on a loaded 2-core machine it fell to 0.275 while the
        // prediction said 0.99, so it is checked for sense, not size; the bench reports it.
        assert!((0.0..=1.0).contains(&r.real.attained) && r.real.cost > 0.0, "{r:?}");
        assert!((r.real.share.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{r:?}");
        assert!(r.predicted.attained > 0.5, "{r:?}");
    }
    assert!(rows[1].predicted.attempts > rows[0].predicted.attempts);
    assert!(run(&Setup { requests: 0, ..setup }, &|_| {}).is_err());
}

/// The Figurehead bench's goal, read off rows: met, met only with the margin, dearer, missed.
#[test]
fn the_figurehead_goal_is_read_off_the_rows() {
    use std::time::Duration;

    use switchyard_experiments::bench::figurehead::{AIMED, Goal, Real, Row, goal};
    use switchyard_sim::models::figurehead::Outcome;

    let row = |route: &str, attained: f64, cost: f64| Row {
        route: route.into(),
        real: Real { attained, cost, p50: Duration::ZERO, p99: Duration::ZERO, share: vec![], probes: 0.0, failed: 0 },
        predicted: Outcome {
            attained,
            cost,
            p50: Duration::ZERO,
            p99: Duration::ZERO,
            attempts: 1.0,
            share: vec![],
            utilisation: vec![],
            wasted: Duration::ZERO,
        },
    };
    let base = [row("base", 0.96, 4.0), row("hedge:50ms", 0.90, 2.0)];
    let with = |w: Row, a: Option<Row>| base.iter().cloned().chain([w]).chain(a).collect::<Vec<_>>();
    assert_eq!(goal(&with(row("optwait", 0.96, 1.8), None)), Goal::Met);
    assert_eq!(goal(&with(row("optwait", 0.96, 4.5), None)), Goal::Dearer);
    assert_eq!(goal(&with(row("optwait", 0.94, 1.8), Some(row(AIMED, 0.97, 2.1)))), Goal::MetWithMargin);
    assert_eq!(goal(&with(row("optwait", 0.94, 1.8), Some(row(AIMED, 0.97, 4.5)))), Goal::Missed);
    assert_eq!(goal(&base), Goal::NotRun);
}
