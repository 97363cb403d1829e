//! MiscoRT's workload on the real coordinator over loopback, in compressed time, beside the
//! simulator (briefly: two schedulers at 1/100 of real time). What must hold on any machine:
//! every application is accounted for on both sides, and MiscoRT finishes well before EDF
//! on both, as the simulator says it should (its end-to-end time is less than two thirds of
//! EDF's in the simulator at p = 0.4).

use switchyard_experiments::miscort::{EDF, MISCORT};
use switchyard_experiments::miscort_real::{By, Setup, kendall_tau, ranking, run};

#[test]
fn the_real_coordinator_ranks_miscort_and_edf_as_the_simulator_does() {
    let setup = Setup { schedulers: vec![MISCORT, EDF], scale: 1.0 / 100.0, sim_runs: 5, ..Setup::thesis() };
    let mut seen = Vec::new();
    let rows = run(&setup, &mut |r| seen.push(r.scheduler)).unwrap();
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
    assert_eq!(kendall_tau(&["a", "b", "c"], &["a", "b", "c"]), 1.0);
    assert_eq!(kendall_tau(&["a", "b", "c"], &["c", "b", "a"]), -1.0);
}
