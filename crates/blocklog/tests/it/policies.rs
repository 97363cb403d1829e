use std::collections::BTreeMap;
use std::time::Duration;

use switchyard_blocklog::load::{self, Profile, check_payload};
use switchyard_blocklog::{Fate, Log, LogConfig, LogError, ReadOptions, read_log};
use switchyard_core::Nanos;
use switchyard_core::order::blocks::BlockPolicy;

use crate::scratch;

fn policies() -> [BlockPolicy; 7] {
    BlockPolicy::all(Nanos::from_millis(5), Nanos::from_millis(50))
}

#[test]
fn every_durable_record_is_read_back_once_in_its_streams_order_under_every_policy() {
    let dir = scratch("policies");
    for policy in policies() {
        let path = dir.join(format!("{}.log", policy.name()));
        // A fast load on an unpaced device: full blocks, refusals and late records all happen.
        let cfg = LogConfig { policy, capacity: 40, ..LogConfig::default() };
        let log = Log::open(&path, cfg).unwrap();
        let profile = Profile {
            period: Duration::from_micros(500),
            duration: Duration::from_millis(300),
            bursty: true,
            size: 40,
            ..Profile::default()
        };
        let mut durable = BTreeMap::new();
        let mut outcomes = 0u64;
        let appended = load::run(&log, &profile, |o| {
            outcomes += 1;
            if let Fate::Durable { .. } = o.fate {
                assert!(durable.insert((o.stream, o.seq.unwrap()), o.tag).is_none(), "{policy:?}: two outcomes");
            }
        })
        .unwrap();
        let stats = log.close().unwrap();
        assert_eq!(outcomes, appended, "{policy:?}: one outcome per record");
        assert_eq!(stats.appended, appended);
        assert_eq!(stats.on_time + stats.late, durable.len() as u64, "{policy:?}");
        assert!(!durable.is_empty(), "{policy:?}: something was written");

        let r = read_log(&path, ReadOptions::default()).unwrap();
        assert!(r.is_clean(), "{policy:?}: {:?} {:?}", r.bad, r.stale);
        assert_eq!(r.intact, stats.blocks, "{policy:?}");
        let mut read = BTreeMap::new();
        for e in &r.entries {
            let k = check_payload(e.stream, &e.payload).expect("the payload appended");
            assert!(read.insert((e.stream, e.seq), k).is_none(), "{policy:?}: {e:?} read twice");
        }
        assert_eq!(read, durable, "{policy:?}: the log holds exactly the durable records");
        // A stream's records are in order: the reader counts any that are not.
        assert_eq!(r.out_of_order, 0, "{policy:?}");
        let payload: u64 = r.entries.iter().map(|e| e.payload.len() as u64).sum();
        assert_eq!(payload, stats.payload_bytes);
        if matches!(policy, BlockPolicy::Fifo | BlockPolicy::Edf) {
            assert_eq!(stats.blocks, durable.len() as u64, "one record a block");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn close_writes_a_lingering_batch_and_a_receipt_says_when() {
    let dir = scratch("linger");
    let path = dir.join("linger.log");
    let policy = BlockPolicy::Linger { linger: Nanos::from_millis(30) };
    let log = Log::open(&path, LogConfig { policy, ..LogConfig::default() }).unwrap();
    let receipt = log.append(3, b"one record, not a full block", Duration::from_secs(1)).unwrap();
    let stats = log.close().unwrap();
    let outcome = receipt.wait();
    let Fate::Durable { at } = outcome.fate else { panic!("{outcome:?}") };
    assert!(at >= Duration::from_millis(30), "it lingered: {at:?}");
    assert!(outcome.on_time());
    assert_eq!((stats.blocks, stats.on_time), (1, 1));
    let r = read_log(&path, ReadOptions::default()).unwrap();
    assert_eq!(r.entries.len(), 1);
    assert_eq!(r.entries[0].payload, b"one record, not a full block");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_full_writer_refuses_and_an_oversized_payload_is_an_error() {
    let dir = scratch("refuse");
    let path = dir.join("refuse.log");
    let pacing = Some(switchyard_blocklog::Pacing::sd_card(1));
    let log =
        Log::open(&path, LogConfig { policy: BlockPolicy::Fifo, capacity: 2, pacing, ..LogConfig::default() }).unwrap();
    let receipts: Vec<_> = (0..10).map(|_| log.append(0, &[7; 64], Duration::from_millis(70)).unwrap()).collect();
    let fates: Vec<Fate> = receipts.into_iter().map(|r| r.wait().fate).collect();
    assert!(fates.contains(&Fate::Refused), "{fates:?}");
    let err = log.append(0, &[0; 600], Duration::ZERO).unwrap_err();
    assert!(matches!(err, LogError::TooLarge { size: 600, max: 464, .. }), "{err}");
    let stats = log.close().unwrap();
    assert!(stats.device.paced.is_some());
    assert_eq!(stats.refused, fates.iter().filter(|f| **f == Fate::Refused).count() as u64);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_log_on_tmpfs_is_durable_and_says_whether_o_direct_was_taken() {
    // Older kernels' tmpfs refuses O_DIRECT; where there is no /dev/shm this says so.
    let dir = std::path::Path::new("/dev/shm");
    if !dir.is_dir() {
        eprintln!("SKIPPED: no /dev/shm");
        return;
    }
    let path = dir.join(format!("blocklog-test-{}.log", std::process::id()));
    let log = Log::open(&path, LogConfig::default()).unwrap();
    let receipt = log.append(1, b"on tmpfs", Duration::from_secs(1)).unwrap();
    let stats = log.close().unwrap();
    assert!(matches!(receipt.wait().fate, Fate::Durable { .. }));
    if stats.device.direct {
        // Linux 6.6 and later give tmpfs O_DIRECT; then there is no fallback to see here.
        eprintln!("SKIPPED the fallback check: tmpfs took O_DIRECT on this kernel");
    } else {
        assert!(stats.device.to_string().contains("buffered (O_DIRECT refused)"));
    }
    assert_eq!(read_log(&path, ReadOptions::default()).unwrap().entries.len(), 1);
    std::fs::remove_file(&path).unwrap();
}
