//! `bench transcode` called as a library, briefly: one worker, two policies and (where it is
//! installed) ffmpeg, and a report whose rows are the run's figures.

mod common;

use switchyard_core::Policy;
use switchyard_experiments::bench::transcode::{self, SPEC, Setup};
use switchyard_experiments::report::Quiet;

#[test]
fn transcode_reports_one_worker_each_policy_and_ffmpeg() {
    let setup = Setup {
        streams: 3,
        frames: 8,
        gop: 4,
        size: (64, 48),
        workers: 2,
        policies: vec![Policy::RoundRobin, Policy::CaAhrw],
        ..Setup::default()
    };
    let rows = transcode::run(&setup, &Quiet).unwrap();
    let report = transcode::report(&setup, &rows);
    common::assert_report(&report, &SPEC);
    let t = report.table("cases").unwrap();
    let cases: Vec<&str> = t.cells("case").filter_map(|v| v.as_str()).collect();
    assert_eq!(&cases[..3], ["one worker", "round-robin", "ca-ahrw"]);
    let ffmpeg = std::process::Command::new("ffmpeg").arg("-version").output().is_ok_and(|o| o.status.success());
    assert_eq!(cases.len(), if ffmpeg { 5 } else { 3 }, "{cases:?}");
    for (row, cell) in rows.iter().zip(t.cells("pictures_per_s")) {
        assert_eq!(cell.as_f64(), Some(row.rate()));
        assert_eq!(row.pictures, 24, "{}: every picture of every stream", row.case);
    }
    let one = rows[0].rate();
    for (row, cell) in rows.iter().zip(t.cells("x_one_worker")) {
        assert_eq!(cell.as_f64(), Some(row.rate() / one));
    }
    assert!(t.notes.iter().any(|n| n.contains("the best policy ≥ 1.7× one worker")), "{:?}", t.notes);
}
