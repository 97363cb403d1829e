//! The Figurehead reproduction called as a library, small: the published plans priced
//! exactly, Table 2's rows, and the policies in the simulator at low load, where the paper's
//! claim (OptWait meets the SLA for less than Base and fixed-delay hedging) should hold.

mod common;

use std::time::Duration;

use switchyard_core::place::sla::{RouteKind, Sla, SlaRouter};
use switchyard_experiments::figurehead::{self, SPEC, SWEEP_SLA, Scenario};
use switchyard_experiments::report::Quiet;
use switchyard_sim::models::figurehead::{BackendSpec, LatencyModel, Setup, simulate};

#[test]
fn the_published_plans_cost_exactly_what_the_paper_says() {
    for (ours, published) in figurehead::worked_check() {
        assert!((ours - published).abs() < 1e-9, "{ours} vs {published}");
    }
    let rows = figurehead::table2(1);
    assert_eq!(rows.len(), figurehead::TABLE2.len());
    // At the loosest L both use the cheapest back-end alone, as in the paper.
    let loose = rows.iter().find(|r| r.published.within_ms == 1600).unwrap();
    assert_eq!((loose.base, loose.optwait), (Some(5.0), Some(5.0)));
    for r in &rows {
        if let (Some(b), Some(w)) = (r.base, r.optwait) {
            assert!(b >= 5.0 && w >= 5.0 && b <= 15.0 && w <= 30.0, "{r:?}");
        }
    }
}

#[test]
fn at_low_load_optwait_meets_the_sla_for_less() {
    let scenarios = vec![Scenario {
        name: "50/s".into(),
        backends: figurehead::four_origins(0.08),
        sla: SWEEP_SLA,
        rate: 50.0,
        tail: 0.08,
    }];
    let rows = figurehead::sweep(&scenarios, 6000, false, 3, 2, &Quiet).unwrap();
    assert_eq!(rows.len(), 9, "six policies, three of them with and without cancelling");
    let get =
        |route: &str, cancel: bool| &rows.iter().find(|r| r.route == route && r.cancel == cancel).unwrap().outcome;
    let (w, b) = (get("optwait", false), get("base", false));
    assert!(w.attained >= 0.94 && b.attained >= 0.94, "{w:?} {b:?}");
    assert!(w.cost < b.cost, "OptWait {w:?} against Base {b:?}");
    for route in ["base", "least-outstanding", "p2c"] {
        assert_eq!(get(route, false).attempts, 1.0, "{route} sends one attempt a request");
    }
    // The same hedges, cancelled at the first answer, waste less back-end time.
    assert!(get("hedge:50ms", true).wasted < get("hedge:50ms", false).wasted);
    assert!(!figurehead::findings(&rows).is_empty());
    // The same runs on one thread give the same rows.
    let again = figurehead::sweep(&scenarios, 6000, false, 3, 1, &Quiet).unwrap();
    assert!(rows.iter().zip(&again).all(|(a, b)| a.route == b.route && a.outcome.cost == b.outcome.cost));

    // The report: Table 2 beside the paper's, a row per run, the middle tail by load, and the
    // published plans' prices as claims.
    let table = figurehead::table2(3);
    let report = figurehead::report(&table, &rows, 6000, false, 3);
    common::assert_report(&report, &SPEC);
    let t2 = report.table("table2").unwrap();
    assert_eq!(t2.rows.len(), figurehead::TABLE2.len());
    let loose = t2.rows.iter().find(|r| r[0].as_f64() == Some(1600.0)).unwrap();
    let ours = table.iter().find(|r| r.published.within_ms == 1600).unwrap();
    assert_eq!(loose[t2.column("base").unwrap()].as_f64(), ours.base);
    assert_eq!(loose[t2.column("base_published").unwrap()].as_f64(), Some(5.0));
    assert_eq!(loose[t2.column("base_diff").unwrap()].as_f64(), ours.base.map(|b| b - 5.0));
    let sweep = report.table("sweep").unwrap();
    assert_eq!(sweep.rows.len(), 9);
    let optwait = sweep.rows.iter().find(|r| r[3].as_str() == Some("optwait") && r[4] == false.into()).unwrap();
    assert_eq!(optwait[sweep.column("cost").unwrap()].as_f64(), Some(w.cost));
    assert_eq!(optwait[sweep.column("met").unwrap()], (w.attained >= SWEEP_SLA.percent).into());
    assert_eq!(optwait[sweep.column("share_a").unwrap()].as_f64(), Some(w.share[1]));
    assert!(sweep.notes.iter().any(|n| n.contains("50/s")), "the findings are the sweep's notes");
    let by_load = report.table("by_load").unwrap();
    assert_eq!(by_load.rows.len(), 9, "the scenario's tail is the charts' 8 %");
    assert_eq!(report.claims.len(), 2);
    assert!(report.claims.iter().all(|c| c.difference.is_some_and(|d| d.abs() < 1e-9)));
    assert_eq!(report.charts.len(), 3);
}

/// One unloaded back-end: the share of requests within L is its CDF at L.
#[test]
fn one_unloaded_backend_answers_as_its_distribution_says() {
    let latency = LatencyModel::LogNormal { median: Duration::from_millis(50), sigma: 0.5 };
    let backends = vec![BackendSpec { name: "one".into(), price: 2.0, latency, servers: 1000 }];
    let within = Duration::from_millis(80);
    let expected = latency.cdf(50_000, 9).at(within);
    let setup =
        Setup { backends, rate: 100.0, requests: 20_000, cancel: false, oracle: true, replan_every: 1000, seed: 4 };
    let router = SlaRouter::new(RouteKind::LeastOutstanding, Sla { percent: 0.5, within }, vec![2.0], 100);
    let o = simulate(&setup, router).unwrap();
    assert!((o.attained - expected).abs() < 0.02, "{} vs {expected}", o.attained);
    assert_eq!(o.cost, 2.0);
    let bad = Setup { rate: 0.0, ..setup };
    assert!(simulate(&bad, SlaRouter::new(RouteKind::P2c, Sla { percent: 0.5, within }, vec![2.0], 100)).is_err());
}
