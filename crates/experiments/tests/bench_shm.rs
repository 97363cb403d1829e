//! `bench shm` called as a library, briefly: every carry at every size, the ping-pong, and a
//! report whose rows are the run's figures.

mod common;

use switchyard_experiments::bench::shm::{self, Kind, SPEC, Setup};
use switchyard_experiments::report::Quiet;

#[test]
fn shm_reports_every_carry_at_every_size_and_the_ping_pong() {
    let setup = Setup { sizes: vec![512, 16 << 10, 1 << 20], bytes: 4 << 20, runs: 1, ..Setup::default() };
    let rows = shm::run(&setup, &Quiet).unwrap();
    let pings = shm::ping_pong(100, setup.ring, &Quiet).unwrap();
    let report = shm::report(&setup, &rows, 100, &pings);
    common::assert_report(&report, &SPEC);
    let t = report.table("throughput").unwrap();
    let sizes: Vec<Option<f64>> = t.cells("bytes").map(|v| v.as_f64()).collect();
    assert_eq!(sizes, [Some(512.0), Some(16384.0), Some(1048576.0)]);
    let names: Vec<&str> = t.cells("message").filter_map(|v| v.as_str()).collect();
    assert_eq!(names, ["512B", "16K", "1M"]);
    for (row, cell) in rows.iter().zip(t.cells("unix_gbps")) {
        assert_eq!(cell.as_f64(), Some(row.get(Kind::Unix).unwrap().gbps));
    }
    for (row, cell) in rows.iter().zip(t.cells("cpu_ring_over_unix")) {
        assert_eq!(cell.as_f64(), row.cpu_ratio());
    }
    assert_eq!(report.table("sides").unwrap().rows.len(), 3);
    let p = report.table("ping_pong").unwrap();
    let carries: Vec<&str> = p.cells("carry").filter_map(|v| v.as_str()).collect();
    assert_eq!(carries, Kind::ALL.map(Kind::name));
    assert!(p.cells("median").all(|v| v.as_f64().is_some_and(|m| m > 0.0)));
    // 16K and 1M are judged; the goals' line says met or not.
    assert!(t.notes.iter().any(|n| n.starts_with("issue 25's goals")), "{:?}", t.notes);
    assert_eq!(report.claims.len(), 1);
    assert_eq!(report.charts[0].table, "throughput");

    // Without the ping-pong, its table is left out and the rest stands.
    let report = shm::report(&setup, &rows, 0, &[]);
    common::assert_report(&report, &SPEC);
    assert!(report.table("ping_pong").is_none());
}
