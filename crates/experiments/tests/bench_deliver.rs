//! `bench::deliver` briefly, without nginx: every case served by ours and tokio, the rates held,
//! and the report holds each server's figures.

mod common;

use switchyard_experiments::ExperimentError;
use switchyard_experiments::bench::deliver;
use switchyard_experiments::report::{Quiet, Value};

#[test]
fn deliver_serves_every_case_from_ours_and_tokio_and_holds_the_rates() {
    let setup = deliver::Setup {
        conns: 40,
        rate: 64_000,
        cores: 1,
        grain_ms: 100.0,
        accurate_conns: 5,
        accurate_rate: 2_000_000,
        accurate_grain_ms: 1.0,
        seconds: 1.0,
        warmup: 0.2,
        bulk_conns: 4,
        bulk_seconds: 0.5,
        nginx: None,
        clients: deliver::Clients::InProcess,
        // The wire's view where a capture can be opened (root), else a note why not.
        wire: Some("lo".into()),
        // The memory table needs the servers as programs: here it is left out, with a note.
        memory: true,
    };
    let runs = deliver::run(&setup, &Quiet).unwrap();
    let all = &runs.cases;
    let names: Vec<&str> = all.iter().map(|(c, _)| c.name).collect();
    assert_eq!(names, ["scale", "accurate", "bulk"]);
    for (case, rows) in all {
        let servers: Vec<&str> = rows.iter().map(|r| r.server).collect();
        match case.rate {
            Some(rate) => {
                assert_eq!(servers, ["switchyard", "tokio"], "{}", case.name);
                for r in rows {
                    let promised = rate as f64 * case.conns as f64;
                    assert_eq!(r.served.conns, case.conns, "{r:?}");
                    // Loopback keeps a paced promise closely; a quarter allows a busy machine. The
                    // tokio peer's accuracy is what the bench reports, not a property of ours: its
                    // sleeps run late on a loaded machine (0.58 under at load 9–15, twice), so its
                    // row is only checked to have served.
                    if r.server == "switchyard" {
                        assert!((r.served.aggregate_bps / promised - 1.0).abs() < 0.25, "{} {r:?}", case.name);
                    } else {
                        assert!(r.served.aggregate_bps > 0.0, "{} {r:?}", case.name);
                    }
                    assert!(r.served.error_fine.is_some() && r.served.run_error.is_some(), "{r:?}");
                    // Every paced row has the wire's figures or says why not; ours has its
                    // pacer's debts.
                    assert!(r.served.wire.is_some() != r.served.wire_missing.is_some(), "{r:?}");
                    if let Some(w) = r.served.wire {
                        assert!(w.packets > 0 && w.fit_rate_error.is_some(), "{r:?}");
                        if r.server == "switchyard" {
                            assert!(w.fit_rate_error.is_some_and(|e| e < 0.25), "{r:?}");
                        }
                    }
                    assert_eq!(r.debts.is_some(), r.server == "switchyard", "{r:?}");
                }
            }
            None => {
                assert_eq!(servers, ["switchyard", "switchyard×1", "tokio"]);
                assert!(rows.iter().all(|r| r.served.aggregate_bps > 1e6 && r.served.error_fine.is_none()), "{rows:?}");
            }
        }
    }

    // The report: a row per paced case and server, a row per bulk server, each figure the
    // run's, and the missing nginx named.
    let report = deliver::report(&setup, &runs);
    common::assert_report(&report, &deliver::SPEC);
    let paced = report.table("paced").unwrap();
    assert_eq!(paced.rows.len(), 4);
    let cases: Vec<&str> = paced.cells("case").filter_map(Value::as_str).collect();
    assert_eq!(cases, ["scale", "scale", "accurate", "accurate"]);
    let fine: Vec<Option<f64>> = paced.cells("fine_p99").map(Value::as_f64).collect();
    let want: Vec<Option<f64>> =
        all[..2].iter().flat_map(|(_, rows)| rows.iter().map(|r| r.served.error_fine.map(|e| e.1))).collect();
    assert_eq!(fine, want);
    assert_eq!(paced.cells("vs_ours_cpu").next().and_then(Value::as_f64), Some(1.0));
    let wire_fit: Vec<Option<f64>> = paced.cells("wire_fit").map(Value::as_f64).collect();
    let want: Vec<Option<f64>> = all[..2]
        .iter()
        .flat_map(|(_, rows)| rows.iter().map(|r| r.served.wire.and_then(|w| w.fit_rate_error)))
        .collect();
    assert_eq!(wire_fit, want);
    let forgiven: Vec<Option<f64>> = paced.cells("forgiven").map(Value::as_f64).collect();
    let want: Vec<Option<f64>> =
        all[..2].iter().flat_map(|(_, rows)| rows.iter().map(|r| r.debts.map(|d| d.forgiven as f64))).collect();
    assert_eq!(forgiven, want);
    // The goal lines say which view judged: the wire's wherever it was watched.
    let wired = all[..2].iter().any(|(_, rows)| rows.iter().any(|r| r.served.wire.is_some()));
    let judged = |v: &str| report.notes.iter().filter(|n| n.contains(&format!("judged on {v}"))).count();
    assert_eq!(judged("the wire's view") > 0, wired, "{:?}", report.notes);
    assert_eq!(judged("the wire's view") + judged("the clients' view"), 4, "{:?}", report.notes);
    let bulk = report.table("bulk").unwrap();
    let servers: Vec<&str> = bulk.cells("server").filter_map(Value::as_str).collect();
    assert_eq!(servers, ["switchyard", "switchyard×1", "tokio"]);
    assert_eq!(bulk.cells("vs_tokio").nth(2).and_then(Value::as_f64), Some(1.0));
    assert!(report.notes.iter().any(|n| n.starts_with("nginx not found")), "{:?}", report.notes);
    assert!(report.table("memory").is_none());
    assert!(
        report.notes.iter().any(|n| n.starts_with("memory per stream not measured: the servers must run as processes")),
        "{:?}",
        report.notes
    );

    let bad = deliver::Setup { bulk_conns: 0, ..setup.clone() };
    assert!(matches!(deliver::run(&bad, &Quiet), Err(ExperimentError::Input(m)) if m.contains("--bulk-conns")));
    let bad = deliver::Setup { warmup: -1.0, ..setup };
    assert!(matches!(bad.check(), Err(ExperimentError::Input(m)) if m.contains("--warmup")));
}
