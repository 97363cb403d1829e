//! `bench::deliver` briefly, without nginx: every case served by ours (a row per pacing path)
//! and tokio, the rates held, and the report holds each server's figures; a pacing path the
//! kernel refuses keeps its row, which says why.

mod common;

use switchyard_experiments::ExperimentError;
use switchyard_experiments::bench::deliver::{self, PacingPath};
use switchyard_experiments::report::{Quiet, Value};
use switchyard_runtime::deliver::KernelPacing;

#[test]
fn deliver_serves_every_case_from_each_of_our_pacings_and_tokio_and_holds_the_rates() {
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
        pacings: PacingPath::ALL.to_vec(),
        kernel: None,
    };
    // The kernel is asked, as the bench asks it; where it refuses TCP pacing, its rows say so.
    let kernel_paces = KernelPacing::probe().tcp;
    let runs = deliver::run(&setup, &Quiet).unwrap();
    let all = &runs.cases;
    let names: Vec<&str> = all.iter().map(|(c, _)| c.name).collect();
    assert_eq!(names, ["scale", "accurate", "bulk"]);
    for (case, rows) in all {
        let servers: Vec<String> = rows.iter().map(deliver::Row::who).collect();
        match case.rate {
            Some(rate) => {
                let want = ["switchyard (fine)", "switchyard (quota)", "switchyard (kernel)", "tokio"];
                assert_eq!(servers, want, "{}", case.name);
                for r in rows {
                    if r.pacing == Some(PacingPath::Kernel) && !kernel_paces {
                        assert!(r.served.as_ref().is_err_and(|why| why.contains("SO_MAX_PACING_RATE")), "{r:?}");
                        continue;
                    }
                    let promised = rate as f64 * case.conns as f64;
                    let served = r.served.as_ref().expect("every path ran");
                    assert_eq!(served.conns, case.conns, "{r:?}");
                    // Loopback keeps a paced promise closely; a quarter allows a busy machine. The
                    // tokio peer's accuracy is what the bench reports, not a property of ours: its
                    // sleeps run late on a loaded machine (0.58 under at load 9–15, twice), so its
                    // row is only checked to have served. So are our quota's and kernel's rows in
                    // so short a run, which is what the bench measures them for: whole 4 KB
                    // packets at 64 kb/s are half a second of a stream each, the quota served
                    // 40 × 64 kb/s 34% under over this 1 s (load 16), and the kernel sends a
                    // connection's first ten segments unpaced.
                    if r.pacing == Some(PacingPath::Fine) {
                        assert!((served.aggregate_bps / promised - 1.0).abs() < 0.25, "{} {r:?}", case.name);
                    } else {
                        assert!(served.aggregate_bps > 0.0, "{} {r:?}", case.name);
                    }
                    assert!(served.error_fine.is_some() && served.run_error.is_some(), "{r:?}");
                    // Every paced row has the wire's figures or says why not; ours has its
                    // pacer's debts.
                    assert!(served.wire.is_some() != served.wire_missing.is_some(), "{r:?}");
                    if let Some(w) = served.wire {
                        assert!(w.packets > 0 && w.fit_rate_error.is_some(), "{r:?}");
                        if r.pacing == Some(PacingPath::Fine) {
                            assert!(w.fit_rate_error.is_some_and(|e| e < 0.25), "{r:?}");
                        }
                    }
                    assert_eq!(r.debts.is_some(), r.pacing == Some(PacingPath::Fine), "{r:?}");
                }
            }
            None => {
                assert_eq!(servers, ["switchyard", "switchyard×1", "tokio"]);
                assert!(
                    rows.iter()
                        .all(|r| r.served.as_ref().is_ok_and(|s| s.aggregate_bps > 1e6 && s.error_fine.is_none())),
                    "{rows:?}"
                );
            }
        }
    }

    // The report: a row per paced case, pacing path and server, a row per bulk server, each
    // figure the run's, and the missing nginx named.
    let report = deliver::report(&setup, &runs);
    common::assert_report(&report, &deliver::SPEC);
    let paced = report.table("paced").unwrap();
    assert_eq!(paced.rows.len(), 8);
    let cases: Vec<&str> = paced.cells("case").filter_map(Value::as_str).collect();
    assert_eq!(cases, ["scale"; 4].into_iter().chain(["accurate"; 4]).collect::<Vec<_>>());
    let pacings: Vec<Option<&str>> = paced.cells("pacing").map(Value::as_str).collect();
    assert_eq!(pacings, [Some("fine"), Some("quota"), Some("kernel"), None].repeat(2));
    let served = |r: &deliver::Row| r.served.as_ref().ok().cloned();
    let of = |f: &dyn Fn(&deliver::Served) -> Option<f64>| -> Vec<Option<f64>> {
        all[..2].iter().flat_map(|(_, rows)| rows.iter().map(|r| served(r).and_then(|s| f(&s)))).collect()
    };
    let column = |name: &str| -> Vec<Option<f64>> { paced.cells(name).map(Value::as_f64).collect() };
    assert_eq!(column("fine_p99"), of(&|s| s.error_fine.map(|e| e.1)));
    // Lead and lag in bytes and in packets of 4,096 B, from the same figures.
    assert_eq!(column("lag_p99"), of(&|s| s.departure.map(|d| d[1])));
    assert_eq!(column("lag_p99_packets"), of(&|s| s.departure.map(|d| d[1] / 4096.0)));
    assert_eq!(column("lead_max_packets"), of(&|s| s.departure.map(|d| d[2] / 4096.0)));
    assert_eq!(column("wire_lag_max_packets"), of(&|s| s.wire.map(|w| w.departure[3] / 4096.0)));
    assert_eq!(paced.cells("vs_ours_cpu").next().and_then(Value::as_f64), Some(1.0));
    assert_eq!(column("wire_fit"), of(&|s| s.wire.and_then(|w| w.fit_rate_error)));
    let refused = paced.cells("refused").filter(|v| !matches!(v, Value::Null)).count();
    assert_eq!(refused, if kernel_paces { 0 } else { 2 }, "{paced:?}");
    let forgiven: Vec<Option<f64>> = paced.cells("forgiven").map(Value::as_f64).collect();
    let want: Vec<Option<f64>> =
        all[..2].iter().flat_map(|(_, rows)| rows.iter().map(|r| r.debts.map(|d| d.forgiven as f64))).collect();
    assert_eq!(forgiven, want);
    // The goal lines say which view judged: the wire's wherever it was watched; and which
    // server and pacing path, each row its own line.
    let wired = all[..2].iter().any(|(_, rows)| rows.iter().any(|r| served(r).is_some_and(|s| s.wire.is_some())));
    let judged = |v: &str| report.notes.iter().filter(|n| n.contains(&format!("judged on {v}"))).count();
    assert_eq!(judged("the wire's view") > 0, wired, "{:?}", report.notes);
    let ran = if kernel_paces { 8 } else { 6 };
    assert_eq!(judged("the wire's view") + judged("the clients' view"), ran, "{:?}", report.notes);
    for who in ["switchyard (fine)", "switchyard (quota)", "switchyard (kernel)", "tokio"] {
        for case in ["scale", "accurate"] {
            let line = format!("goals (issue 42), {case} case, {who}");
            assert_eq!(report.notes.iter().filter(|n| n.starts_with(&line)).count(), 1, "{line}: {:?}", report.notes);
        }
    }
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
    let bad = deliver::Setup { warmup: -1.0, ..setup.clone() };
    assert!(matches!(bad.check(), Err(ExperimentError::Input(m)) if m.contains("--warmup")));
    let bad = deliver::Setup { pacings: Vec::new(), ..setup.clone() };
    assert!(matches!(bad.check(), Err(ExperimentError::Input(m)) if m.contains("--pacings must name")));
    let bad = deliver::Setup { pacings: vec![PacingPath::Quota, PacingPath::Fine, PacingPath::Quota], ..setup };
    assert!(matches!(bad.check(), Err(ExperimentError::Input(m)) if m.contains("--pacings names quota twice")));
}

/// A kernel that will not pace TCP (told so here, as a kernel without `SO_MAX_PACING_RATE`
/// answers the probe): the kernel path keeps its row in each paced case, with no figures, and
/// the row, its goal line and the run say why; the peers still run.
#[test]
fn a_pacing_path_the_kernel_refuses_keeps_its_row_and_says_why() {
    let setup = deliver::Setup {
        conns: 4,
        rate: 64_000,
        cores: 1,
        grain_ms: 100.0,
        accurate_conns: 2,
        accurate_rate: 2_000_000,
        accurate_grain_ms: 1.0,
        seconds: 0.3,
        warmup: 0.1,
        bulk_conns: 2,
        bulk_seconds: 0.2,
        nginx: None,
        clients: deliver::Clients::InProcess,
        wire: None,
        memory: false,
        pacings: vec![PacingPath::Kernel],
        kernel: Some(KernelPacing { tcp: false, fq: Some(false) }),
    };
    let all = deliver::run(&setup, &Quiet).unwrap();
    for (case, rows) in all.cases.iter().filter(|(c, _)| c.rate.is_some()) {
        let who: Vec<String> = rows.iter().map(deliver::Row::who).collect();
        assert_eq!(who, ["switchyard (kernel)", "tokio"], "{}", case.name);
        let why = rows[0].served.as_ref().expect_err("the kernel path did not run");
        assert!(why.contains("this kernel refused SO_MAX_PACING_RATE"), "{why}");
        assert!(rows[0].debts.is_none() && rows[1].served.is_ok(), "{rows:?}");
    }
    let report = deliver::report(&setup, &all);
    common::assert_report(&report, &deliver::SPEC);
    let paced = report.table("paced").unwrap();
    let refused: Vec<Option<&str>> = paced.cells("refused").map(Value::as_str).collect();
    assert!(refused[0].is_some_and(|w| w.contains("SO_MAX_PACING_RATE")) && refused[1].is_none(), "{refused:?}");
    assert_eq!(paced.cells("throughput").next(), Some(&Value::Null));
    assert_eq!(paced.cells("pacing").next().and_then(Value::as_str), Some("kernel"));
    let line = "goals (issue 42), scale case, switchyard (kernel): not judged, it did not run: the kernel cannot pace";
    assert!(report.notes.iter().any(|n| n.starts_with(line)), "{:?}", report.notes);
}
