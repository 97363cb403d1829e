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

/// Runs `f` on a thread of its own and fails if it takes more than `secs`: a feed that hangs
/// fails its test instead of stalling the run.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(f()));
    rx.recv_timeout(std::time::Duration::from_secs(secs)).unwrap_or_else(|_| panic!("still running after {secs} s"))
}

#[test]
fn a_fed_capture_gets_the_files_verdicts_on_any_number_of_rings() {
    within(120, fed_capture_gets_the_files_verdicts);
}

fn fed_capture_gets_the_files_verdicts() {
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

/// A capture damaged part-way fails the feeder, and the inspector reports the feed cut short
/// after what came before, not a complete capture.
#[test]
fn a_damaged_capture_fails_the_feeder_and_the_inspector_says_the_feed_was_cut() {
    let mut pcap = trace();
    // The 100th record's captured length, made larger than any reader takes.
    let big_endian = pcap[0] == 0xa1;
    let read = |b: &[u8]| {
        let b: [u8; 4] = b.try_into().unwrap();
        if big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
    };
    let mut at = 24;
    for _ in 0..100 {
        at += 16 + read(&pcap[at + 8..at + 12]) as usize;
    }
    let huge = if big_endian { 0x7fff_ffffu32.to_be_bytes() } else { 0x7fff_ffffu32.to_le_bytes() };
    pcap[at + 8..at + 12].copy_from_slice(&huge);
    let (fed, inspected) = within(60, move || {
        let (_dir, path) = socket_path("damaged.sock");
        let listener = FeedListener::bind(&path).unwrap();
        std::thread::scope(|s| {
            let feeder = s.spawn(|| feed(&pcap[..], connect(&path).unwrap(), Policy::Hrw, &mut |_| {}));
            let readers = listener.accept(2, 64 << 10).unwrap();
            let inspected = inspect_feed(readers, ConnConfig::default(), &Inspector::new(), &LiveCounts::default());
            (feeder.join().unwrap(), inspected)
        })
    });
    assert!(matches!(fed, Err(FeedError::Ingest(_))), "{fed:?}");
    match inspected {
        Err(FeedError::FeederGone { rings: 2, packets }) => assert_eq!(packets, 100),
        other => panic!("{other:?}"),
    }
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

/// A worker that fails (here on a ring that does not carry a capture) closes its ring, so a
/// feeder waiting for room there fails too and the inspection ends with the worker's error,
/// instead of every side waiting on another (a feeder writing a header field by field once
/// made a worker give up and the run hang).
#[test]
fn a_worker_that_fails_ends_the_feed_instead_of_hanging_it() {
    let (err, fed) = within(60, || {
        let (_dir, path) = socket_path("fails.sock");
        let listener = FeedListener::bind(&path).unwrap();
        std::thread::scope(|s| {
            let feeder = s.spawn(|| {
                let mut rings = connect(&path).unwrap();
                // Far more than the ring holds, and not a capture.
                let fed = rings[0].write_all(&[b'x'; 64 << 10]);
                drop(rings);
                fed
            });
            let readers = listener.accept(2, 4 << 10).unwrap();
            let err =
                inspect_feed(readers, ConnConfig::default(), &Inspector::new(), &LiveCounts::default()).unwrap_err();
            (err, feeder.join().unwrap())
        })
    });
    assert!(err.to_string().contains("capture"), "{err}");
    assert!(matches!(fed, Err(switchyard_shmring::RingError::ReaderClosed)), "{fed:?}");
}
