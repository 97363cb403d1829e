//! `bench mux` called as a library, briefly: every case runs beside raw TCP, and the report
//! holds a row per case with the figures the run measured.

mod common;

use switchyard_experiments::bench::mux::{self, SPEC};
use switchyard_experiments::report::Quiet;

#[test]
fn mux_measures_the_session_and_its_peers_against_raw_tcp_and_reports_them() {
    let cases = vec![
        mux::Case::Stripe,
        mux::Case::StripeTlsTask,
        mux::Case::Pin,
        mux::Case::H2,
        mux::Case::Quic,
        mux::Case::Tunnel,
    ];
    let setup =
        mux::Setup { connections: 2, channels: 3, seconds: 0.6, rounds: 2, cases: cases.clone(), ..Default::default() };
    let r = mux::run(&setup, &Quiet).unwrap();
    assert!(r.raw_rate > 1e6 && r.raw_cost > 0.0, "{r:?}");
    assert_eq!(r.cases.iter().map(|c| c.case).collect::<Vec<_>>(), cases);
    for c in &r.cases {
        assert!(c.rate > 0.0 && c.over_raw > 0.0 && c.cost > 0.0, "{c:?}");
        assert!((0.0..=1.0).contains(&c.max_gap), "{c:?}");
        assert!(c.rounds_range.0 <= c.over_raw && c.over_raw <= c.rounds_range.1, "{c:?}");
        let ours = matches!(c.case, mux::Case::Stripe | mux::Case::StripeTlsTask | mux::Case::Pin);
        assert_eq!(c.session.is_some(), ours, "only the session reports its schedulers: {c:?}");
    }
    // Three channels on two equal connections: 1 and 0.8 + 0.64 are 1.44 apart by pinning.
    assert!(r.pin_model_rms > 0.0, "{r:?}");

    let report = r.report(&setup);
    common::assert_report(&report, &SPEC);
    assert!(report.machine.as_deref().is_some_and(|m| m.contains("core")), "{:?}", report.machine);
    let t = report.table("cases").unwrap();
    let names: Vec<&str> = t.cells("case").filter_map(|v| v.as_str()).collect();
    assert_eq!(
        names,
        [
            "raw TCP ×2",
            "stripe (least queued)",
            "stripe, TLS on conn tasks",
            "pin",
            "HTTP/2 (h2), 1 conn",
            "QUIC (quinn), 1 conn",
            "tunnel, TCP in and out"
        ]
    );
    let over_raw: Vec<Option<f64>> = t.cells("over_raw").map(|v| v.as_f64()).collect();
    assert_eq!(over_raw[0], Some(1.0), "raw TCP against itself");
    for (c, got) in r.cases.iter().zip(&over_raw[1..]) {
        assert_eq!(*got, Some(c.over_raw), "{c:?}");
    }
    // The session's counters for the session only; the peers' are empty.
    let held: Vec<bool> = t.cells("max_held").map(|v| v.as_f64().is_some()).collect();
    assert_eq!(held, [false, true, true, true, false, false, false]);
    assert!(t.notes.iter().any(|n| n.starts_with("throughput: best scheduler")), "{:?}", t.notes);
}

/// MPTCP runs in a namespace of its own beside raw TCP there, one kernel connection per channel
/// with m subflows each; where it cannot run, the report says why and the other cases go on.
#[test]
fn mptcp_runs_beside_raw_tcp_in_its_namespace_or_the_report_says_why_not() {
    let setup = mux::Setup {
        connections: 2,
        channels: 3,
        seconds: 0.4,
        rounds: 1,
        cases: vec![mux::Case::H2, mux::Case::Mptcp],
        ..Default::default()
    };
    let r = mux::run(&setup, &Quiet).unwrap();
    let report = r.report(&setup);
    common::assert_report(&report, &SPEC);
    let t = report.table("cases").unwrap();
    let names: Vec<&str> = t.cells("case").filter_map(|v| v.as_str()).collect();
    if let Some((_, why)) = r.skipped.iter().find(|(c, _)| *c == mux::Case::Mptcp) {
        eprintln!("SKIPPED: MPTCP: {why}");
        assert_eq!(names, ["raw TCP ×2", "HTTP/2 (h2), 1 conn"]);
        assert!(t.notes.iter().any(|n| n.contains("not run")), "{:?}", t.notes);
        return;
    }
    assert_eq!(
        names,
        ["raw TCP ×2", "HTTP/2 (h2), 1 conn", "raw TCP ×2, MPTCP's namespace", "MPTCP (kernel), 1 conn/channel"]
    );
    let ns = r.ns_raw.expect("raw TCP in MPTCP's namespace");
    assert!(ns.rate > 1e6 && ns.cost > 0.0, "{ns:?}");
    // Two subflows a connection: on average more than one of them carried bytes.
    assert!(ns.subflows > 1.0 && ns.subflows <= 2.0, "{ns:?}");
    let mp = r.mptcp().unwrap();
    assert!(mp.rate > 0.0 && mp.over_raw > 0.0 && mp.session.is_none(), "{mp:?}");
    let over_raw: Vec<Option<f64>> = t.cells("over_raw").map(|v| v.as_f64()).collect();
    assert_eq!(over_raw[2], Some(ns.over_raw));
    assert_eq!(over_raw[3], Some(mp.over_raw));
    assert!(t.notes.iter().any(|n| n.starts_with("MPTCP: 3 kernel MPTCP connections")), "{:?}", t.notes);
}

/// More subflows than the kernel joins: MPTCP is left out in one line, and the rest runs.
#[test]
fn mptcp_with_more_subflows_than_the_kernel_takes_is_left_out_and_the_rest_runs() {
    let setup = mux::Setup {
        connections: 10,
        channels: 2,
        seconds: 0.2,
        rounds: 1,
        cases: vec![mux::Case::Mptcp, mux::Case::H2],
        ..Default::default()
    };
    let r = mux::run(&setup, &Quiet).unwrap();
    assert_eq!(r.cases.iter().map(|c| c.case).collect::<Vec<_>>(), [mux::Case::H2]);
    assert!(r.ns_raw.is_none() && r.mptcp().is_none(), "{r:?}");
    let [(mux::Case::Mptcp, why)] = r.skipped.as_slice() else { panic!("{:?}", r.skipped) };
    assert!(why.contains("10 subflows") && !why.contains('\n'), "{why}");
    let report = r.report(&setup);
    common::assert_report(&report, &SPEC);
    let notes = &report.table("cases").unwrap().notes;
    assert!(
        notes.iter().any(|n| n.starts_with("MPTCP (kernel), 1 conn/channel not run: ") && n.contains("10 subflows")),
        "{notes:?}"
    );
}
