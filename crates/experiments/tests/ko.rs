//! The worker-centric reproduction called as a library, small: a row per point and scheduler,
//! locality paying off against no locality, and the paper's findings beside ours.

mod common;

use switchyard_experiments::ko::{self, Point, SCHEDULERS, SPEC, Setup};
use switchyard_experiments::report::Quiet;

#[test]
fn the_reproduction_gives_a_row_per_point_and_scheduler_and_locality_pays() {
    let setup = Setup {
        points: vec![Point::Capacity(6000), Point::WorkersPerSite(2), Point::UnitCost(1.0)],
        scale: 0.03,
        runs: 1,
        ..Setup::paper(2)
    };
    let rows = ko::run(&setup, &Quiet).unwrap();
    assert_eq!(rows.len(), 3 * SCHEDULERS.len());
    for point in &setup.points {
        let of = |name: &str| rows.iter().find(|r| r.point == *point && r.scheduler == name).unwrap();
        let fifo = of("fifo");
        for name in ["overlap", "rest", "combined", "rest.2", "combined.2", "storage-affinity", "delay-3"] {
            let r = of(name);
            assert!(r.transfers < fifo.transfers && r.makespan < fifo.makespan, "{r:?} against {fifo:?}");
            assert!(r.utilisation > 0.0 && r.utilisation <= 1.0, "{r:?}");
        }
    }
    let claims = ko::claims(&rows);
    assert!(claims.iter().any(|c| c.published.contains("28%")), "{claims:?}");
    // The report: a table per sweep, a row per scheduler at each of its points, with the run's
    // figures; a chart per sweep; every finding beside ours.
    let report = ko::report(&setup, &rows);
    common::assert_report(&report, &SPEC);
    for (table, x) in [("capacity", 6000.0), ("workers_per_site", 2.0), ("unit_cost", 1.0)] {
        let t = report.table(table).unwrap();
        assert_eq!(t.rows.len(), SCHEDULERS.len(), "{table}");
        let fifo = t.rows.iter().find(|r| r[1].as_str() == Some("fifo")).unwrap();
        assert_eq!(fifo[0].as_f64(), Some(x));
        let point = setup.points.iter().find(|p| p.axis().1 == x).unwrap();
        let row = rows.iter().find(|r| r.point == *point && r.scheduler == "fifo").unwrap();
        assert_eq!(fifo[t.column("makespan").unwrap()].as_f64(), Some(row.makespan / 3600.0));
        assert_eq!(fifo[t.column("transfers").unwrap()].as_f64(), Some(row.transfers));
    }
    assert_eq!(report.charts.len(), 3);
    assert_eq!(report.claims.len(), claims.len());
    let best = report.claims.iter().find(|c| c.published == Some(0.28)).unwrap();
    assert!(best.ours.is_some_and(|o| o > 0.0) && best.difference.is_some(), "{best:?}");
    assert!(ko::run(&Setup { scale: 0.0, ..setup }, &Quiet).is_err());
}
