//! yates-clp's measurements called as a library, briefly, on loopback: bulk connections on
//! worker threads measured from the send side, and streams measured by their clients.

use switchyard_core::order::PaceConfig;
use switchyard_experiments::clp;
use switchyard_runtime::deliver::{Pacing, Transport};

/// One test, so that the bulk run's load does not starve the streams' measurement.
#[test]
fn bulk_connections_per_thread_and_per_connection_then_streams_window_by_window() {
    let m = clp::bulk_case(2, Transport::Tcp, 8, 0.5, 0.3, None).unwrap();
    assert_eq!((m.threads, m.not_accepted, m.moves), (2, 0, 0));
    assert!(m.aggregate_bps > 1e6, "{m:?}");
    assert!(m.conn_jain > 0.5 && m.conn_jain <= 1.0, "{m:?}");

    let (summary, windows, not_accepted) =
        clp::hard_case(2, 8, 4_000_000, Pacing::Fine(PaceConfig::default()), 1.0).unwrap();
    assert_eq!(not_accepted, 0);
    assert_eq!(windows.bytes.len(), 10, "ten windows of 100 ms");
    // 4 Mb/s each, promised and kept on loopback (within a tenth, over the run).
    let rates = windows.mean_rates(0);
    assert!(rates.iter().all(|r| (r * 8.0 / 4e6 - 1.0).abs() < 0.1), "{rates:?}");
    assert!(summary.window_error.is_some());
}

/// The whole reproduction as a library call, with its parts cut short: the sections come in
/// order, each row where it belongs, and the report holds what a chart needs.
#[test]
fn the_reproduction_runs_its_parts_in_order_and_reports_rows_beside_the_thesis() {
    use switchyard_experiments::clp::{PROCESSORS, Part, Progress, Row, Setup, published};
    let setup = Setup { parts: vec![Part::Scaling, Part::Fairness], threads: vec![1], conns: 6, seconds: 0.5 };
    let mut seen = Vec::new();
    let report = clp::run(&setup, &mut |p| {
        seen.push(match p {
            Progress::Begin(s) => format!("begin {s:?}"),
            Progress::Row(Row::Fairness { transport, .. }) => format!("row {transport:?}"),
            Progress::Row(Row::Scaling { workload, .. }) => format!("row {}", workload.name()),
            Progress::Row(r) => format!("unexpected {r:?}"),
            Progress::End(s) => format!("end {s:?}"),
        })
    })
    .unwrap();
    let threads = report.threads.len();
    assert!(report.threads.contains(&1) && report.threads.contains(&report.cores), "{:?}", report.threads);
    // Fairness first (the order of the thesis's chapters as the report prints them), then scaling.
    let mut expected = vec!["begin Fairness(Udp)".to_string()];
    expected.extend(std::iter::repeat_n("row Udp".to_string(), threads));
    expected.extend(["end Fairness(Udp)".to_string(), "begin Fairness(Tcp)".to_string()]);
    expected.extend(std::iter::repeat_n("row Tcp".to_string(), threads));
    expected.extend(
        [
            "end Fairness(Tcp)",
            "begin Scaling",
            "row udp-send",
            "row udp-recv",
            "row tcp-send",
            "row tcp-recv",
            "end Scaling",
        ]
        .map(String::from),
    );
    assert_eq!(seen, expected);
    assert_eq!(report.fairness_points(Transport::Udp).len(), threads);
    assert!(report.hard_windows.is_none(), "the hard part did not run");
    for r in &report.rows {
        if let Row::Scaling { rows, .. } = r {
            assert_eq!(rows.len(), PROCESSORS.len());
            // One processor is the unit; twenty cannot beat twenty, nor fall below the thesis's
            // lower figure by much in a model without its losses.
            assert!((rows[0].speedup - 1.0).abs() < 1e-9);
            let at_20 = rows.last().unwrap().speedup;
            assert!(at_20 <= 20.0 + 1e-9 && at_20 > published::SCALING_AT_20.0, "{at_20}");
        }
    }
}

/// A server that goes away while the hard case's streams are measured: the case is an error
/// that says how many streams ended and why, not a row of slow streams.
#[test]
fn the_hard_case_fails_when_its_server_goes_away() {
    use switchyard_runtime::deliver::{Server, ServerConfig};
    let srv = std::sync::Arc::new(Server::start(ServerConfig { workers: 2, ..Default::default() }).unwrap());
    let stopper = {
        let srv = std::sync::Arc::clone(&srv);
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(1300));
            srv.shut_down();
        })
    };
    let r = clp::streams_on(&srv, 4, 4_000_000, 1.0);
    stopper.join().unwrap();
    let e = r.expect_err("the case fails").to_string();
    assert!(e.contains("4 of 4") && e.contains("unreachable"), "{e}");
}

/// The same for bulk connections, over UDP (whose ends only an ICMP error tells) and TCP.
#[test]
fn a_bulk_case_fails_when_its_server_goes_away() {
    use switchyard_runtime::deliver::{Server, ServerConfig};
    for transport in [Transport::Udp, Transport::Tcp] {
        let srv = std::sync::Arc::new(Server::start(ServerConfig { workers: 2, ..Default::default() }).unwrap());
        let stopper = {
            let srv = std::sync::Arc::clone(&srv);
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(500));
                srv.shut_down();
            })
        };
        let r = clp::bulk_on(&srv, transport, 4, 0.5, 0.3);
        stopper.join().unwrap();
        let e = r.err().unwrap_or_else(|| panic!("{transport:?}: the case fails")).to_string();
        assert!(e.contains("4 of 4"), "{transport:?}: {e}");
    }
}
