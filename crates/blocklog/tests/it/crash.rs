//! The crash test: a writer in a child process (this test binary run again, on the test
//! `child_writer`) prints each acknowledgement as it gets it and is killed with SIGKILL mid-run;
//! the log read back must hold every acknowledged record exactly once.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use switchyard_blocklog::frame::Corrupt;
use switchyard_blocklog::load::{self, Profile, check_payload};
use switchyard_blocklog::{Fate, Log, LogConfig, ReadOptions, Verdict, read_log, recover};
use switchyard_core::order::blocks::BlockPolicy;

use crate::scratch;

const CHILD: &str = "BLOCKLOG_CRASH_CHILD";

/// Only does anything when run as the child: writes until killed.
#[test]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD) else { return };
    let log = Log::open(path.as_ref(), LogConfig { policy: BlockPolicy::GEdf, capacity: 64, ..LogConfig::default() })
        .unwrap();
    let profile =
        Profile { period: Duration::from_micros(300), duration: Duration::from_secs(60), ..Profile::default() };
    let mut out = std::io::stdout().lock();
    load::run(&log, &profile, |o| {
        if let Fate::Durable { .. } = o.fate {
            writeln!(out, "ack {} {} {}", o.stream, o.seq.unwrap(), o.tag).unwrap();
            out.flush().unwrap();
        }
    })
    .unwrap();
}

#[test]
fn a_killed_writer_loses_no_acknowledged_record_and_a_torn_block_is_caught() {
    let dir = scratch("crash");
    let path = dir.join("crash.log");
    let mut child = Killed(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "crash::child_writer", "--nocapture", "--test-threads=1"])
            .env(CHILD, &path)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut acked = BTreeMap::new();
    for line in lines.by_ref() {
        parse(&line.unwrap(), &mut acked);
        if acked.len() >= 300 {
            break;
        }
    }
    drop(child); // SIGKILL: no flush, no destructor
    for line in lines {
        parse(&line.unwrap(), &mut acked);
    }
    assert!(acked.len() >= 300, "the child acknowledged {} records", acked.len());

    let r = read_log(&path, ReadOptions::default()).unwrap();
    assert!(r.bad.len() <= 1, "at most the block in flight is torn: {:?}", r.bad);
    assert!(matches!(r.verdict(), Verdict::Clean | Verdict::TornTail { .. }), "{:?}", r.verdict());
    assert_eq!(r.out_of_order, 0, "no record duplicated or out of its stream's order");
    let mut read = BTreeMap::new();
    for e in &r.entries {
        assert!(read.insert((e.stream, e.seq), check_payload(e.stream, &e.payload).unwrap()).is_none());
    }
    for (key, k) in &acked {
        assert_eq!(read.get(key), Some(k), "acknowledged record {key:?} is in the log once, as appended");
    }

    // Tear the last intact block of a copy: past its header and first record's framing, other
    // bytes than were written (zeros would not do: a part-filled block's tail is zeros already).
    let mut bytes = std::fs::read(&path).unwrap();
    let size = r.block_size;
    let last = r.intact as usize - 1;
    bytes[last * size + 40..(last + 1) * size].fill(0xa5);
    let torn = recover(&bytes, ReadOptions::default());
    assert!(
        torn.bad.iter().any(|&(i, why)| i == last as u64 && matches!(why, Corrupt::BadChecksum { .. })),
        "{:?}",
        torn.bad
    );
    assert_eq!(torn.intact, r.intact - 1);
    assert!(torn.entries.len() < r.entries.len(), "the torn block's records are not read");
    assert!(matches!(torn.verdict(), Verdict::TornTail { block, .. } if block == last as u64), "{:?}", torn.verdict());
    // The same damage one block earlier is a hole: the block after it is intact, so records
    // that were durable are lost.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(last - 1) * size + 40..last * size].fill(0xa5);
    let holed = recover(&bytes, ReadOptions::default());
    assert_eq!(
        holed.verdict(),
        Verdict::Damaged { lost_blocks: 1, first_lost: Some(last as u64 - 1), out_of_order: 0 }
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A child killed with SIGKILL when dropped: at the kill, or when the test fails before it.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Takes an `ack stream seq k` line (the test harness's own lines are passed over).
fn parse(line: &str, acked: &mut BTreeMap<(u32, u64), u64>) {
    let f: Vec<&str> = line.split(' ').collect();
    if let ["ack", s, q, k] = f[..] {
        acked.insert((s.parse().unwrap(), q.parse().unwrap()), k.parse().unwrap());
    }
}
