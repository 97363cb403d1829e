//! The worker-centric reproduction called as a library, small: a row per point and scheduler,
//! locality paying off against no locality, and the paper's findings beside ours.

use switchyard_experiments::ko::{self, Point, SCHEDULERS, Setup};

#[test]
fn the_reproduction_gives_a_row_per_point_and_scheduler_and_locality_pays() {
    let setup = Setup {
        points: vec![Point::Capacity(6000), Point::WorkersPerSite(2), Point::UnitCost(1.0)],
        scale: 0.03,
        runs: 1,
        ..Setup::paper(2)
    };
    let rows = ko::run(&setup, &|_| {}).unwrap();
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
    assert!(ko::run(&Setup { scale: 0.0, ..setup }, &|_| {}).is_err());
}
