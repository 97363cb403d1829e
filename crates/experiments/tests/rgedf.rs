//! `reproduce dou-rgedf` called as a library, small: every point of the sweeps asked for comes
//! back as a row of the report, with the run's own figures, and the report holds its schema.

mod common;

use switchyard_core::Nanos;
use switchyard_core::order::blocks::BlockPolicy;
use switchyard_experiments::report::{Quiet, Table, Value};
use switchyard_experiments::rgedf::{self, Cpu, POLICIES, Point, SPEC, Setup, Sweep};

#[test]
fn the_report_holds_every_point_and_the_runs_figures() {
    let setup = Setup {
        sweeps: vec![Sweep::All, Sweep::Size],
        cpus: vec![Cpu::Cc1010, Cpu::Modern],
        runs: 1,
        duration: Nanos::from_millis(2_000),
        ..Setup::thesis(2)
    };
    let rows = rgedf::run(&setup, &Quiet).unwrap();
    let report = rgedf::report(&setup, &rows);
    common::assert_report(&report, &SPEC);
    // A row per CPU, sweep, variant and x, the four policies across it.
    let points = (Sweep::All.xs().len() + Sweep::Size.xs().len()) * 4 * 2;
    let sweeps = report.table("sweeps").unwrap();
    assert_eq!(sweeps.rows.len(), points);
    assert_eq!(report.table("losses").unwrap().rows.len(), points);
    assert_eq!(rows.len(), points * POLICIES.len());
    // The cell for RG-EDF at 20 ms, dropping, steady on the 8051 is that run's throughput.
    let want = Point { sweep: Sweep::All, x: 20, drop: true, bursty: false, cpu: Cpu::Cc1010 };
    let row = rows.iter().find(|r| r.point == want && r.policy == BlockPolicy::RgEdf).unwrap();
    // The row at that point: the figure tables have neither sweep nor setting (the table says).
    let cell = |t: &Table, col: &str| {
        let is = |r: &Vec<Value>, name: &str, want: &str| t.column(name).is_none_or(|i| r[i].as_str() == Some(want));
        let x = t.column("x").unwrap();
        let r = t
            .rows
            .iter()
            .find(|r| {
                is(r, "cpu", "8051") && is(r, "sweep", "all") && is(r, "setting", "drop") && r[x].as_f64() == Some(20.0)
            })
            .unwrap();
        r[t.column(col).unwrap()].as_f64()
    };
    assert_eq!(cell(sweeps, "rg_edf_per_s"), Some(row.throughput));
    assert_eq!(cell(sweeps, "rg_edf_missed"), Some(row.missed));
    assert_eq!(cell(report.table("losses").unwrap(), "rg_edf_refused"), Some(row.refused));
    // The figure tables hold the same point, and the one-process sweep was not run, so no table.
    assert_eq!(cell(report.table("figure_all").unwrap(), "rg_edf"), Some(row.throughput));
    assert!(report.table("figure_one").is_none());
    assert_eq!(report.table("figure_size").unwrap().rows.len(), Sweep::Size.xs().len() * 2);
    assert_eq!(report.charts.len(), 2);
    // Each CPU's claims, and both pairs on both CPUs counted over every point.
    assert_eq!(report.claims.len(), rgedf::claims(&rows, Cpu::Cc1010).len() + rgedf::claims(&rows, Cpu::Modern).len());
    let versus = report.table("versus").unwrap();
    assert_eq!(versus.rows.len(), 4);
    let counts: f64 = versus.rows[0][3..].iter().filter_map(|v| v.as_f64()).sum();
    assert_eq!(counts as usize, points / 2);
}
