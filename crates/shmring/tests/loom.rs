//! The model check of the ring's ordering (issue 25): the protocol in `ring.rs`, unchanged,
//! over loom's atomics, on a ring so small that a few bytes wrap it several times. Loom runs
//! every interleaving of the two ends (up to a preemption bound) under every reordering the
//! memory model allows, and fails on a byte delivered wrong, a copy racing with the peer's
//! (the data bytes are loom cells), or a sleeper that is never woken (a deadlock: under loom a
//! doorbell waits without a timeout).
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p switchyard-shmring --test loom --release
//! ```
//!
//! `LOOM_MAX_PREEMPTIONS` (default here 3) trades thoroughness for time.
#![cfg(loom)]

use switchyard_shmring::{RingError, channel};

/// Bytes through a 4-byte ring: across the wrap, and enough that the writer must wait for
/// space and the reader for data.
const SENT: [u8; 6] = [1, 2, 3, 4, 5, 6];

fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut model = loom::model::Builder::new();
    if model.preemption_bound.is_none() {
        model.preemption_bound = Some(3);
    }
    model.check(f);
}

/// A blocking writer and a blocking reader: every byte once, in order, then the end; neither
/// end sleeps through the other's progress.
#[test]
fn every_byte_once_in_order_and_every_sleeper_woken() {
    check(|| {
        let (mut writer, mut reader) = channel(4).unwrap();
        let sender = loom::thread::spawn(move || {
            writer.write_all(&SENT[..2]).unwrap();
            writer.write_all(&SENT[2..]).unwrap();
            // Dropped here: closed, so the reader's last read is the end.
        });
        let mut got = Vec::new();
        let mut buf = [0u8; 3];
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, SENT);
        sender.join().unwrap();
    });
}

/// A reader that leaves with the writer waiting on a full ring: the writer is woken to
/// `ReaderClosed` (or finishes, if the reader freed enough first), never left asleep.
#[test]
fn a_writer_waiting_for_space_wakes_when_the_reader_leaves() {
    check(|| {
        let (mut writer, mut reader) = channel(4).unwrap();
        let sender = loom::thread::spawn(move || match writer.write_all(&SENT) {
            Ok(()) | Err(RingError::ReaderClosed) => {}
            Err(e) => panic!("unexpected {e}"),
        });
        let mut buf = [0u8; 1];
        let n = reader.read(&mut buf).unwrap();
        assert_eq!((n, buf[0]), (1, SENT[0]));
        drop(reader);
        sender.join().unwrap();
    });
}
