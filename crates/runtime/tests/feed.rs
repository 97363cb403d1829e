//! A capture fed through shared-memory rings gets the verdicts the file gets, every frame
//! arrives, and the two sides refuse what is not a feed.

#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use switchyard_core::Policy;
use switchyard_ingest::{CaptureReader, ConnConfig};
use switchyard_runtime::feed::{FeedError, FeedListener, connect, feed, inspect_feed};
use switchyard_runtime::inspect::Inspector;
use switchyard_runtime::live::LiveCounts;
use switchyard_runtime::serial::{Summary, inspect_serial};
use switchyard_runtime::tracegen::{TraceSpec, generate};

fn trace() -> Vec<u8> {
    let mut pcap = Vec::new();
    generate(&TraceSpec { connections: 300, elephants: 0.05, seed: 11, ..TraceSpec::default() }, &mut pcap).unwrap();
    pcap
}

/// A directory of its own for each test's socket, removed afterwards.
struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn socket_path(name: &str) -> (Dir, PathBuf) {
    let dir = std::env::temp_dir().join(format!("switchyard-feed-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    (Dir(dir), path)
}

/// Verdicts by connection: a feed numbers connections ring by ring, a file in order of arrival.
fn verdicts(s: &Summary) -> BTreeMap<String, String> {
    s.conns.iter().map(|c| (format!("{:?}", c.key), format!("{:?} {:?}", c.verdict, c.tls))).collect()
}

#[test]
fn a_fed_capture_gets_the_files_verdicts_on_any_number_of_rings() {
    let pcap = trace();
    let inspector = Inspector::new();
    let file = inspect_serial(CaptureReader::new(&pcap[..]).unwrap(), ConnConfig::default(), &inspector).unwrap();
    for rings in [1, 3] {
        let (_dir, path) = socket_path("feed.sock");
        let listener = FeedListener::bind(&path).unwrap();
        let (fed, report) = std::thread::scope(|s| {
            let feeder = s.spawn(|| {
                let writers = connect(&path).unwrap();
                feed(&pcap[..], writers, Policy::Hrw, &mut |_| {}).unwrap()
            });
            // Small rings, so that the feeder waits on full ones and every position wraps.
            let readers = listener.accept(rings, 16 << 10).unwrap();
            let report = inspect_feed(readers, ConnConfig::default(), &inspector, &LiveCounts::default()).unwrap();
            (feeder.join().unwrap(), report)
        });
        assert!(file.conns.len() >= 300, "{}", file.conns.len());
        assert_eq!(verdicts(&report.summary), verdicts(&file), "{rings} rings");
        assert_eq!(report.summary.packets, file.packets, "{rings} rings");
        assert_eq!(report.ring.packets, file.packets);
        assert_eq!(report.summary.skipped.total(), file.skipped.total());
        assert_eq!(fed.per_ring.len(), rings);
        assert_eq!(fed.per_ring.iter().sum::<u64>(), fed.frames);
        assert_eq!(fed.frames, file.packets + file.skipped.total());
        if rings > 1 {
            assert!(fed.per_ring.iter().all(|&n| n > 0), "every ring gets connections: {:?}", fed.per_ring);
        }
    }
}

#[test]
fn a_feed_of_an_empty_capture_ends_at_once_with_nothing() {
    let mut pcap = Vec::new();
    let header = pcap_file::pcap::PcapHeader::default();
    pcap_file::pcap::PcapWriter::with_header(&mut pcap, header).unwrap();
    let (_dir, path) = socket_path("empty.sock");
    let listener = FeedListener::bind(&path).unwrap();
    let report = std::thread::scope(|s| {
        s.spawn(|| feed(&pcap[..], connect(&path).unwrap(), Policy::Hrw, &mut |_| {}).unwrap());
        let readers = listener.accept(2, 4 << 10).unwrap();
        inspect_feed(readers, ConnConfig::default(), &Inspector::new(), &LiveCounts::default()).unwrap()
    });
    assert_eq!((report.summary.packets, report.summary.conns.len()), (0, 0));
}

#[test]
fn a_policy_that_places_by_load_is_refused_with_the_ones_that_work() {
    let (_dir, path) = socket_path("policy.sock");
    let listener = FeedListener::bind(&path).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| listener.accept(1, 4 << 10));
        let err = feed(&trace()[..], connect(&path).unwrap(), Policy::Affinity, &mut |_| {}).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, FeedError::Policy(_)) && text.contains("hrw"), "{text}");
    });
}

#[test]
fn a_feeder_pointed_at_something_else_says_so() {
    let (_dir, path) = socket_path("other.sock");
    let other = UnixListener::bind(&path).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let (mut conn, _) = other.accept().unwrap();
            conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
        });
        let err = connect(&path).unwrap_err();
        assert!(matches!(err, FeedError::BadHello(_)), "{err}");
        assert!(err.to_string().contains("switchyard inspect --feed"), "{err}");
    });
}

#[test]
fn a_path_in_use_is_refused_and_a_stale_one_replaced() {
    let (_dir, path) = socket_path("busy.sock");
    let first = FeedListener::bind(&path).unwrap();
    let err = FeedListener::bind(&path).unwrap_err();
    assert!(matches!(err, FeedError::InUse(_)), "{err}");
    // A socket file nobody listens on any more (its listener gone without cleaning up).
    let stale = UnixListener::bind(path.with_extension("stale")).unwrap();
    drop(stale);
    let again = FeedListener::bind(&path.with_extension("stale"));
    assert!(again.is_ok(), "{again:?}");
    drop(first);
    assert!(!path.exists(), "a listener removes its socket file");
}

#[test]
fn an_inspector_asking_for_impossible_rings_is_told_before_any_feeder_comes() {
    let (_dir, path) = socket_path("bad.sock");
    let listener = FeedListener::bind(&path).unwrap();
    for (rings, capacity) in [(0, 4096), (1, 5000), (300, 4096)] {
        let err = listener.accept(rings, capacity).unwrap_err();
        assert!(matches!(err, FeedError::BadRequest { .. }), "{err}");
    }
}
