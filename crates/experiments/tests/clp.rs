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
