//! yates-clp's measurements called as a library, briefly, on loopback: bulk connections on
//! worker threads measured from the send side, and streams measured by their clients.

mod common;

use switchyard_core::order::PaceConfig;
use switchyard_experiments::clp;
use switchyard_experiments::report::Progress;
use switchyard_runtime::deliver::{KernelPacing, Pacing, Transport};

/// One test, so that the bulk run's load does not starve the streams' measurement.
#[test]
fn bulk_connections_per_thread_and_per_connection_then_streams_window_by_window() {
    let m = clp::bulk_case(2, Transport::Tcp, 8, 0.5, 0.3, None).unwrap();
    assert_eq!((m.threads, m.not_accepted, m.moves), (2, 0, 0));
    assert!(m.aggregate_bps > 1e6, "{m:?}");
    assert!(m.conn_jain > 0.5 && m.conn_jain <= 1.0, "{m:?}");

    let m = clp::hard_case(2, Transport::Udp, 8, 4_000_000, Pacing::Fine(PaceConfig::default()), 1.0).unwrap();
    assert_eq!(m.not_accepted, 0);
    assert_eq!(m.windows.bytes.len(), 10, "ten windows of 100 ms");
    // 4 Mb/s each, promised and kept on loopback (within a tenth, over the run).
    let rates = m.windows.mean_rates(0);
    assert!(rates.iter().all(|r| (r * 8.0 / 4e6 - 1.0).abs() < 0.1), "{rates:?}");
    assert!(m.summary.window_error.is_some());
    assert_eq!(m.departures.map(|d| d.streams), Some(8), "every stream has a departure line");
}

/// Progress that records its stages and steps.
#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<String>>);

impl Progress for Seen {
    fn stage(&self, what: &str, total: u64) {
        self.0.lock().unwrap().push(format!("{what} ({total})"));
    }
    fn advance(&self, n: u64) {
        self.0.lock().unwrap().push(format!("+{n}"));
    }
}

/// The whole reproduction as a library call, with its parts cut short: the stages come in
/// order with a step per row, and the report holds a table per part run, the thesis beside
/// ours, and the charts.
#[test]
fn the_reproduction_runs_its_parts_in_order_and_reports_rows_beside_the_thesis() {
    use switchyard_experiments::clp::{PROCESSORS, Part, Row, SPEC, Setup, published};
    let setup = Setup {
        parts: vec![Part::Scaling, Part::Fairness],
        threads: vec![1],
        conns: 6,
        seconds: 0.5,
        ..Setup::default()
    };
    let seen = Seen::default();
    let repro = clp::run(&setup, &seen).unwrap();
    let threads = repro.threads.len();
    assert!(repro.threads.contains(&1) && repro.threads.contains(&repro.cores), "{:?}", repro.threads);
    // Fairness first (the order of the thesis's chapters as the report prints them), then scaling.
    let mut expected = vec![format!("fairness, UDP ({threads})")];
    expected.extend(std::iter::repeat_n("+1".to_string(), threads));
    expected.push(format!("fairness, TCP ({threads})"));
    expected.extend(std::iter::repeat_n("+1".to_string(), threads));
    expected.push("processor scaling (simulated) (4)".into());
    expected.extend(std::iter::repeat_n("+1".to_string(), 4));
    assert_eq!(*seen.0.lock().unwrap(), expected);
    assert_eq!(repro.fairness_points(Transport::Udp).len(), threads);
    assert!(repro.hard_windows.is_none(), "the hard part did not run");
    for r in &repro.rows {
        if let Row::Scaling { rows, .. } = r {
            assert_eq!(rows.len(), PROCESSORS.len());
            // One processor is the unit; twenty cannot beat twenty, nor fall below the thesis's
            // lower figure by much in a model without its losses.
            assert!((rows[0].speedup - 1.0).abs() < 1e-9);
            let at_20 = rows.last().unwrap().speedup;
            assert!(at_20 <= 20.0 + 1e-9 && at_20 > published::SCALING_AT_20.0, "{at_20}");
        }
    }
    // The report: the parts that ran, each row's figures as measured, the thesis beside them.
    let report = repro.report(&setup);
    common::assert_report(&report, &SPEC);
    let names: Vec<&str> = report.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["fairness", "scaling"]);
    let fairness = report.table("fairness").unwrap();
    assert_eq!(fairness.rows.len(), 2 * threads);
    let ratio = fairness.column("thread_max_min").unwrap();
    let udp: Vec<f64> = fairness.rows[..threads].iter().map(|r| r[ratio].as_f64().unwrap()).collect();
    assert_eq!(udp, repro.fairness_points(Transport::Udp).iter().map(|p| p.1).collect::<Vec<_>>());
    let scaling = report.table("scaling").unwrap();
    assert_eq!(scaling.rows.len(), 4 * PROCESSORS.len());
    // A claim per published fairness point (not run here: ours is empty) and per workload at 20.
    assert_eq!(report.claims.len(), 3 + 4);
    assert!(report.claims[..3].iter().all(|c| c.ours.is_none() && c.published.is_some()));
    assert!(report.claims[3..].iter().all(|c| c.ours.unwrap() > published::SCALING_AT_20.0));
    let charts: Vec<&str> = report.charts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(charts, ["fairness", "scaling"]);
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
    let r = clp::streams_on(&srv, Transport::Udp, 4, 4_000_000, 1.0);
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

/// The hard part on this machine's cores alone, with `kernel` as what the kernel can pace:
/// the reproduction and its report.
fn hard_part(kernel: Option<KernelPacing>) -> (clp::Reproduction, switchyard_experiments::report::Report) {
    use switchyard_experiments::report::Quiet;
    let setup = clp::Setup {
        parts: vec![clp::Part::Hard],
        threads: vec![],
        hard_threads: vec![],
        conns: 4,
        seconds: 0.5,
        kernel,
    };
    let repro = clp::run(&setup, &Quiet).unwrap();
    let report = repro.report(&setup);
    common::assert_report(&report, &clp::SPEC);
    (repro, report)
}

/// The hard table's (transport, pacing, not run) per row, as a reader sees them.
fn cases(report: &switchyard_experiments::report::Report) -> Vec<(String, String, Option<String>)> {
    let hard = report.table("hard").unwrap();
    let [t, p, n] = ["transport", "pacing", "not_run"].map(|c| hard.column(c).unwrap());
    hard.rows
        .iter()
        .map(|r| (r[t].as_str().unwrap().into(), r[p].as_str().unwrap().into(), r[n].as_str().map(Into::into)))
        .collect()
}

/// The hard case over TCP paced by the kernel, beside the user-space pacers over both
/// transports: its row exists, was measured, and names the pacing the server ran — read back
/// from the server, so a case that quietly fell back to a user-space pacer would show `fine` or
/// `quota` and no TCP `kernel` row. UDP's kernel row says why the kernel cannot pace it.
#[test]
fn the_hard_part_runs_tcp_paced_by_the_kernel_beside_the_user_space_pacers() {
    let kernel = KernelPacing::probe();
    assert!(kernel.tcp, "this test needs a kernel that paces TCP (Linux 4.13 or later): {kernel}");
    let (repro, report) = hard_part(Some(kernel.clone()));
    let own = |s: &str| s.to_string();
    let udp_kernel = clp::kernel_cannot(Transport::Udp, &kernel).map(own);
    assert!(udp_kernel.is_some(), "the server never paces UDP by the kernel");
    assert_eq!(
        cases(&report),
        [
            (own("UDP"), own("fine"), None),
            (own("UDP"), own("quota"), None),
            (own("UDP"), own("kernel"), udp_kernel),
            (own("TCP"), own("fine"), None),
            (own("TCP"), own("quota"), None),
            (own("TCP"), own("kernel"), None),
        ]
    );
    let tcp_kernel = repro
        .rows
        .iter()
        .find_map(|r| match r {
            clp::Row::Hard { transport: Transport::Tcp, outcome: clp::Hard::Measured(m), .. }
                if m.pacing == Pacing::Kernel =>
            {
                Some(m)
            }
            _ => None,
        })
        .expect("a TCP row measured under the kernel's pacing");
    // Every stream was admitted and kept: a kernel-paced stream the kernel would not pace is
    // closed by the server, which fails the case.
    assert_eq!((tcp_kernel.summary.conns, tcp_kernel.not_accepted), (4, 0));
    assert!(tcp_kernel.summary.aggregate_bps > 4.0 * 4e6 * 0.5, "{:?}", tcp_kernel.summary);
    let hard = report.table("hard").unwrap();
    let lag = hard.column("lag_p99").unwrap();
    assert_eq!(
        hard.rows[5][lag].as_f64(),
        tcp_kernel.departures.map(|d| d.lag[1] / tcp_kernel.packet as f64),
        "the TCP kernel row's lag is the one measured"
    );
    assert!(hard.notes.iter().any(|n| n.contains("SO_MAX_PACING_RATE")), "{:?}", hard.notes);
}

/// A kernel that cannot pace: its rows say so, with no figures, and the cases after them still
/// run.
#[test]
fn where_the_kernel_cannot_pace_the_row_says_so_and_the_run_goes_on() {
    let (repro, report) = hard_part(Some(KernelPacing { tcp: false, fq: Some(false) }));
    let rows = cases(&report);
    assert_eq!(rows.len(), 6, "{rows:?}");
    let not_run: Vec<_> = rows.iter().filter(|r| r.2.is_some()).collect();
    assert_eq!(not_run.len(), 2, "{rows:?}");
    assert!(not_run.iter().all(|r| r.1 == "kernel"), "{rows:?}");
    assert!(not_run[1].2.as_deref().unwrap().contains("SO_MAX_PACING_RATE"), "{rows:?}");
    // The TCP user-space rows, after UDP's kernel row, were measured.
    let hard = report.table("hard").unwrap();
    let admitted = hard.column("admitted").unwrap();
    let measured: Vec<Option<f64>> = hard.rows.iter().map(|r| r[admitted].as_f64()).collect();
    assert_eq!(measured, [Some(4.0), Some(4.0), None, Some(4.0), Some(4.0), None]);
    assert_eq!(repro.rows.len(), 6);
}
