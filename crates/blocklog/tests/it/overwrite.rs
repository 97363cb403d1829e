//! Opening a log on a path that holds something else.

use std::time::Duration;

use switchyard_blocklog::{Fate, Log, LogConfig};

use crate::scratch;

#[test]
fn a_file_that_is_not_a_log_of_this_block_size_is_not_overwritten() {
    let dir = scratch("overwrite");
    let notes = dir.join("notes.txt");
    std::fs::write(&notes, b"not a log").unwrap();
    let err = Log::open(&notes, LogConfig::default()).expect_err("an ordinary file is refused");
    assert!(err.to_string().contains("not a blocklog"), "{err}");
    assert_eq!(std::fs::read(&notes).unwrap(), b"not a log");

    let log = dir.join("log");
    let one_record = |log: Log| {
        let receipt = log.append(1, b"one", Duration::from_secs(1)).unwrap();
        log.close().unwrap();
        assert!(matches!(receipt.wait().fate, Fate::Durable { .. }));
    };
    one_record(Log::open(&log, LogConfig::default()).unwrap());
    one_record(Log::open(&log, LogConfig::default()).expect("a log of the same block size is written over"));
    let err = Log::open(&log, LogConfig { block_size: 4096, ..LogConfig::default() }).expect_err("another size");
    assert!(err.to_string().contains("512-byte blocks"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
