//! MiscoRT's workload on the real coordinator over loopback, in compressed time, beside the
//! simulator (briefly: two schedulers at 1/100 of real time). What must hold on any machine:
//! every application is accounted for on both sides, and MiscoRT finishes well before EDF
//! on both, as the simulator says it should (its end-to-end time is less than two thirds of
//! EDF's in the simulator at p = 0.4).

mod common;

use switchyard_experiments::miscort::{EDF, MISCORT};
use switchyard_experiments::miscort_real::{By, SPEC, Setup, kendall_tau, ranking, report, run};
use switchyard_experiments::report::Quiet;

#[test]
fn the_real_coordinator_ranks_miscort_and_edf_as_the_simulator_does() {
    let setup = Setup { schedulers: vec![MISCORT, EDF], scale: 1.0 / 100.0, sim_runs: 5, ..Setup::thesis() };
    let rows = run(&setup, &Quiet).unwrap();
    let seen: Vec<&str> = rows.iter().map(|r| r.scheduler).collect();
    assert_eq!(seen, ["miscort", "edf"]);
    for r in &rows {
        eprintln!("{r:?}");
        assert!(r.real_missed <= 11 && r.sim_missed <= 11.0, "{r:?}");
        assert!(r.real_end_to_end > 0.0 && r.sim_end_to_end > 0.0, "{r:?}");
        assert!(r.real_attempts >= 1.0, "{r:?}");
    }
    let (m, e) = (&rows[0], &rows[1]);
    assert!(m.sim_end_to_end < e.sim_end_to_end * 2.0 / 3.0, "{rows:?}");
    assert!(m.real_end_to_end < e.real_end_to_end, "MiscoRT should beat EDF for real too: {rows:?}");
    assert_eq!(ranking(&rows, true, By::EndToEnd), ranking(&rows, false, By::EndToEnd));
    // The report: a row per scheduler with both sides' figures, and both rankings.
    let report = report(&setup, &rows);
    common::assert_report(&report, &SPEC);
    let t = report.table("schedulers").unwrap();
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[1][t.column("real_missed").unwrap()].as_f64(), Some(e.real_missed as f64));
    assert_eq!(t.rows[0][t.column("sim_end_to_end").unwrap()].as_f64(), Some(m.sim_end_to_end));
    let ranks = report.table("rankings").unwrap();
    assert_eq!(ranks.rows.len(), 2);
    assert_eq!(ranks.rows[1][3].as_f64(), Some(1.0), "both sides rank by end-to-end time alike");
    assert_eq!(kendall_tau(&["a", "b", "c"], &["a", "b", "c"]), 1.0);
    assert_eq!(kendall_tau(&["a", "b", "c"], &["c", "b", "a"]), -1.0);
}
