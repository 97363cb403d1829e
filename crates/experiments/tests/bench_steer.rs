//! `bench steer` called as a library at a tiny setting, on loopback: every mode runs, and the
//! report holds the runs, the model and the ratios the run computed.
#![cfg(target_os = "linux")]

mod common;

use switchyard_core::place::steer::Steering;
use switchyard_experiments::bench::steer::{self, Path, SPEC, Setup};
use switchyard_experiments::report::Quiet;

#[test]
fn steer_reports_every_mode_beside_the_model() {
    switchyard_runtime::deliver::raise_file_limit();
    let setup = Setup { sizes: vec![16 << 10], seconds: 0.2, warmup: 0.05, rounds: 1, paths: vec![Path::Loopback] };
    let run = steer::run(&setup, &Quiet).unwrap();
    let report = run.report(&setup);
    common::assert_report(&report, &SPEC);
    let runs = report.table("runs").unwrap();
    let modes: Vec<&str> = runs.cells("steer").filter_map(|v| v.as_str()).collect();
    assert_eq!(modes, Steering::ALL.map(Steering::name));
    for (x, cell) in run.runs.iter().zip(runs.cells("throughput")) {
        assert_eq!(cell.as_f64(), Some(x.throughput * 8e-9));
        assert!(x.throughput > 0.0, "{x:?}");
    }
    // Unpinned workers are placed on no core: the cell is empty for `none` only.
    let placed: Vec<bool> = runs.cells("placed").map(|v| v.as_f64().is_some()).collect();
    assert_eq!(placed, [false, true, true]);
    assert_eq!(report.table("model").unwrap().rows.len(), 3);
    let ratios = report.table("ratios").unwrap();
    assert_eq!(ratios.rows.len(), 1);
    let c = &run.comparisons()[0];
    assert_eq!(ratios.cells("steer_over_other").next().unwrap().as_f64(), Some(c.steer_over_other.measured));
    assert!(report.notes.iter().any(|n| n.starts_with("What a 2-core VM can show")), "{:?}", report.notes);
}
