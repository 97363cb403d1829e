//! `bench::blocklog` briefly: two policies at one heavy load on a paced file in the temp dir.

mod common;

use std::time::Duration;

use switchyard_blocklog::Pacing;
use switchyard_core::order::blocks::BlockPolicy;
use switchyard_experiments::bench::blocklog::{SPEC, Setup, run};
use switchyard_experiments::report::{Quiet, Value};

#[test]
fn grouping_writes_more_records_on_time_than_one_record_a_block() {
    let mut setup = Setup::new(std::env::temp_dir());
    setup.policies = vec![BlockPolicy::Fifo, BlockPolicy::GEdf];
    setup.periods = vec![Duration::from_millis(10)];
    setup.profile.duration = Duration::from_millis(600);
    setup.pacing = Pacing::sd_card_without_sectors(3);
    let report = run(&setup, &Quiet).unwrap();
    let [fifo, gedf] = &report.rows[..] else { panic!("{:?}", report.rows) };
    for r in [fifo, gedf] {
        let s = &r.stats;
        assert_eq!(s.appended, s.on_time + s.late + s.refused + s.dropped + s.failed, "{s:?}");
        assert!(s.device.paced.is_some());
        let p = r.predicted.expect("a paced device's run is predicted");
        assert!((0.0..=1.0).contains(&p.miss_ratio), "{p:?}");
    }
    // One 64-byte record in each 512-byte block, 300 records a second against ~90 blocks.
    assert!((fifo.stats.write_amplification() - 8.0).abs() < 1e-9);
    assert!(fifo.stats.miss_ratio() > 0.5, "{:?}", fifo.stats);
    assert!(gedf.stats.on_time > 2 * fifo.stats.on_time, "{:?} against {:?}", gedf.stats, fifo.stats);
    assert!(gedf.stats.write_amplification() < 4.0, "{:?}", gedf.stats);
    // The simulator agrees on the shape: FIFO behind, grouping ahead.
    let (pf, pg) = (fifo.predicted.unwrap(), gedf.predicted.unwrap());
    assert!(pf.miss_ratio > 0.5 && pg.on_time_per_second > 2.0 * pf.on_time_per_second, "{pf:?} {pg:?}");
    // (A block still being written when the short run ends counts, its records do not.)
    assert!((pf.write_amplification - 8.0).abs() < 0.4, "{pf:?}");

    // The report: a row per run with the writer's and the simulator's figures, and the goal.
    let typed = report.report(&setup);
    common::assert_report(&typed, &SPEC);
    let runs = typed.table("runs").unwrap();
    let policies: Vec<&str> = runs.cells("policy").filter_map(Value::as_str).collect();
    assert_eq!(policies, ["fifo", "g-edf"]);
    assert!(runs.cells("period").all(|p| p.as_f64() == Some(10.0)));
    let wa: Vec<f64> = runs.cells("wa").filter_map(Value::as_f64).collect();
    assert_eq!(wa, [fifo.stats.write_amplification(), gedf.stats.write_amplification()]);
    let sim: Vec<f64> = runs.cells("sim_missed").filter_map(Value::as_f64).collect();
    assert_eq!(sim, [pf.miss_ratio, pg.miss_ratio]);
    assert_eq!(runs.cells("late").next(), Some(&Value::from(fifo.stats.late)));
    assert_eq!(typed.table("goal").unwrap().rows.len(), usize::from(report.goal.is_some()));
    assert!(typed.notes.iter().any(|n| n.starts_with("device: ")), "{:?}", typed.notes);
    assert_eq!(typed.charts.len(), 2);
}
