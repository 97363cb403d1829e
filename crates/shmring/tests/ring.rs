//! The ring's promises: every byte once and in order across the wrap, under threads, and no
//! panic or overrun whatever a hostile peer writes into the shared header.
// Real descriptors and files, which the loom build does not have (tests/loom.rs runs there).
#![cfg(not(loom))]

use std::fs::File;
use std::os::unix::fs::FileExt;

use proptest::prelude::*;
use switchyard_shmring::{RingError, channel};

/// Offsets of the shared indices (the layout table in `raw.rs`).
const HEAD: u64 = 64;
const TAIL: u64 = 128;

/// The n-th byte of the test stream: not periodic in any power of two below 2^16, so a byte
/// delivered at the wrong offset shows up.
fn byte(n: u64) -> u8 {
    (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8 ^ (n >> 16) as u8
}

/// Plays the hostile peer: writes `value` at `offset` of the shared file, as any process that
/// holds the descriptor can.
fn scribble(file: &File, offset: u64, value: u64) {
    file.write_all_at(&value.to_ne_bytes(), offset).expect("pwrite into the ring file");
}

proptest! {
    /// Any interleaving of writes and reads of any sizes, on one thread: what comes out is
    /// exactly what went in, once and in order, and neither end ever over- or under-fills.
    #[test]
    fn bytes_arrive_once_in_order(
        log2_capacity in 4u32..10,
        ops in prop::collection::vec((any::<bool>(), 0usize..1500), 1..200),
    ) {
        let capacity = 1usize << log2_capacity;
        let (mut writer, mut reader) = channel(capacity).unwrap();
        let (mut sent, mut received) = (0u64, Vec::new());
        for (write, size) in ops {
            if write {
                let src: Vec<u8> = (sent..sent + size as u64).map(byte).collect();
                let n = writer.try_write(&src).unwrap();
                let in_ring = sent - received.len() as u64;
                prop_assert_eq!(n as u64, (size as u64).min(capacity as u64 - in_ring));
                sent += n as u64;
            } else {
                let mut dst = vec![0u8; size];
                let n = reader.try_read(&mut dst).unwrap();
                let in_ring = sent - received.len() as u64;
                prop_assert_eq!(n as u64, (size as u64).min(in_ring));
                received.extend_from_slice(&dst[..n]);
            }
        }
        drop(writer);
        let mut dst = vec![0u8; 333];
        loop {
            let n = reader.read(&mut dst).unwrap();
            if n == 0 {
                break;
            }
            received.extend_from_slice(&dst[..n]);
        }
        prop_assert_eq!(received.len() as u64, sent);
        for (i, &b) in received.iter().enumerate() {
            prop_assert_eq!(b, byte(i as u64), "byte {}", i);
        }
    }

    /// Garbage anywhere in the header: the reader answers with data or `Corrupt`, never a
    /// panic, and never more bytes than the ring holds.
    #[test]
    fn header_garbage_never_panics_the_reader(
        written in 0usize..300,
        garbage in prop::collection::vec((0u64..32, any::<u64>()), 1..8),
    ) {
        let (mut writer, mut reader) = channel(256).unwrap();
        let src: Vec<u8> = (0..written as u64).map(byte).collect();
        writer.try_write(&src).unwrap();
        let file = File::from(reader.file().try_clone_to_owned().unwrap());
        for (word, value) in garbage {
            scribble(&file, word * 8, value);
        }
        let mut dst = vec![0u8; 1024];
        for _ in 0..3 {
            match reader.try_read(&mut dst) {
                Ok(n) => prop_assert!(n <= 256),
                Err(RingError::Corrupt(c)) => prop_assert_eq!(c.word, "head"),
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }
    }
}

#[test]
fn sixty_four_mib_across_threads_with_a_checksum() {
    const TOTAL: u64 = 64 << 20;
    // A small ring, so both ends wrap and sleep many times.
    let (mut writer, mut reader) = channel(1 << 16).unwrap();
    let sender = std::thread::spawn(move || {
        let mut sum = 0u64;
        let mut sent = 0u64;
        let mut size = 1usize;
        while sent < TOTAL {
            // Sizes cycle through 1 B .. ~100 KiB, some larger than the ring.
            size = (size * 7 + 13) % 100_003 + 1;
            let n = (size as u64).min(TOTAL - sent);
            let chunk: Vec<u8> = (sent..sent + n).map(byte).collect();
            sum = chunk.iter().fold(sum, |s, &b| s.rotate_left(5) ^ u64::from(b));
            writer.write_all(&chunk).unwrap();
            sent += n;
        }
        sum
    });
    let mut sum = 0u64;
    let mut received = 0u64;
    let mut buf = vec![0u8; 40_000];
    let mut size = 1usize;
    loop {
        size = (size * 11 + 7) % buf.len() + 1;
        let n = reader.read(&mut buf[..size]).unwrap();
        if n == 0 {
            break;
        }
        assert_eq!(buf[0], byte(received), "first byte of a read at {received}");
        sum = buf[..n].iter().fold(sum, |s, &b| s.rotate_left(5) ^ u64::from(b));
        received += n as u64;
    }
    assert_eq!(received, TOTAL);
    assert_eq!(sum, sender.join().unwrap());
}

#[test]
fn a_head_past_the_capacity_is_corruption_and_stays_so() {
    let (mut writer, mut reader) = channel(4096).unwrap();
    writer.write_all(&[7; 10]).unwrap();
    let file = File::from(writer.file().try_clone_to_owned().unwrap());
    scribble(&file, HEAD, 10 + 4096 + 1);
    let mut dst = [0u8; 64];
    let err = reader.try_read(&mut dst).unwrap_err();
    let RingError::Corrupt(c) = err else { panic!("expected Corrupt, got {err}") };
    assert_eq!((c.word, c.value, c.ours, c.last), ("head", 4107, 0, 0));
    // Putting the head back does not heal the end: a peer that lied once is not believed.
    scribble(&file, HEAD, 10);
    assert!(matches!(reader.read(&mut dst), Err(RingError::Corrupt(_))));
    assert!(err.to_string().starts_with("the peer corrupted the ring"), "{err}");
}

#[test]
fn a_head_that_moves_back_is_corruption() {
    let (mut writer, mut reader) = channel(4096).unwrap();
    writer.write_all(&[1; 100]).unwrap();
    let mut dst = [0u8; 10];
    assert_eq!(reader.try_read(&mut dst).unwrap(), 10);
    let file = File::from(reader.file().try_clone_to_owned().unwrap());
    // Still ahead of the reader's tail (10), and within the capacity, but behind the 100 seen.
    scribble(&file, HEAD, 50);
    assert!(matches!(reader.try_read(&mut dst), Err(RingError::Corrupt(c)) if c.last == 100));
    // And the extreme: a head far behind the tail.
    let (_writer, mut reader) = channel(64).unwrap();
    let file = File::from(reader.file().try_clone_to_owned().unwrap());
    scribble(&file, HEAD, u64::MAX);
    assert!(matches!(reader.try_read(&mut dst), Err(RingError::Corrupt(_))));
}

#[test]
fn a_tail_past_the_head_is_corruption_for_the_writer() {
    let (mut writer, _reader) = channel(64).unwrap();
    writer.write_all(&[1; 20]).unwrap();
    let file = File::from(writer.file().try_clone_to_owned().unwrap());
    scribble(&file, TAIL, 21);
    let err = writer.try_write(&[2; 8]).unwrap_err();
    assert!(matches!(err, RingError::Corrupt(c) if c.word == "tail" && c.ours == 20), "{err}");
    assert!(matches!(writer.write_all(&[2; 8]), Err(RingError::Corrupt(_))));
}

#[test]
fn the_reader_sees_the_end_after_the_last_byte() {
    let (mut writer, mut reader) = channel(64).unwrap();
    writer.write_all(b"last words").unwrap();
    drop(writer);
    let mut dst = [0u8; 64];
    assert_eq!(reader.read(&mut dst).unwrap(), 10);
    assert_eq!(&dst[..10], b"last words");
    assert_eq!(reader.read(&mut dst).unwrap(), 0);
}

#[test]
fn writing_to_a_closed_reader_fails_instead_of_blocking() {
    let (mut writer, reader) = channel(64).unwrap();
    writer.write_all(&[0; 64]).unwrap();
    drop(reader);
    assert!(matches!(writer.write(&[0; 1]), Err(RingError::ReaderClosed)));
}

#[test]
fn a_blocked_writer_wakes_when_the_reader_frees_space() {
    let (mut writer, mut reader) = channel(64).unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&[9; 64 * 40]));
    // Let the writer fill the ring and fall asleep before every read.
    let mut got = 0;
    let mut dst = [0u8; 64];
    while got < 64 * 40 {
        std::thread::sleep(std::time::Duration::from_millis(1));
        got += reader.read(&mut dst).unwrap();
    }
    sender.join().unwrap().unwrap();
}

#[test]
fn capacities_must_be_powers_of_two() {
    for bad in [0, 3, 100, 4097] {
        assert!(matches!(channel(bad), Err(RingError::Capacity(c)) if c == bad));
    }
}

/// A reader that stops reading (hostile, or stuck) costs a writer with a timeout only that
/// long, and the writer goes on once the reader does.
#[test]
fn a_reader_that_stops_reading_costs_a_writer_only_its_timeout() {
    use std::time::{Duration, Instant};
    let (mut writer, mut reader) = channel(4096).unwrap();
    writer.set_timeout(Some(Duration::from_millis(200)));
    let t = Instant::now();
    let err = writer.write_all(&[7; 4096 + 1]).unwrap_err();
    let waited = t.elapsed();
    assert!(matches!(err, RingError::TimedOut(d) if d == Duration::from_millis(200)), "{err}");
    assert!(waited >= Duration::from_millis(200) && waited < Duration::from_secs(3), "{waited:?}");
    // Not failed for good: the reader catches up, and the last byte goes through.
    let mut dst = vec![0u8; 4096];
    assert_eq!(reader.read(&mut dst).unwrap(), 4096);
    writer.write_all(&[8]).unwrap();
    assert_eq!(reader.read(&mut dst).unwrap(), 1);
    assert_eq!(dst[0], 8);
}

/// A writer that sends nothing costs a reader with a timeout only that long.
#[test]
fn a_silent_writer_costs_a_reader_only_its_timeout() {
    use std::time::Duration;
    let (_writer, mut reader) = channel(4096).unwrap();
    reader.set_timeout(Some(Duration::from_millis(100)));
    let err = reader.read(&mut [0u8; 16]).unwrap_err();
    assert!(matches!(err, RingError::TimedOut(_)), "{err}");
    let io: std::io::Error = err.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
}

/// A peer that keeps raising both "waits" flags (rings for nobody) slows nothing down and
/// loses nothing: the flags are only hints to ring the eventfds.
#[test]
fn a_peer_raising_the_wait_flags_loses_no_byte() {
    /// Offsets of the two "waits" flags (the layout table in `raw.rs`).
    const FLAGS: [u64; 2] = [72, 136];
    let (mut writer, mut reader) = channel(256).unwrap();
    let file = File::from(writer.file().try_clone_to_owned().unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hostile = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for at in FLAGS {
                    scribble(&file, at, 1);
                }
            }
        })
    };
    let n = 1u64 << 20;
    let sender = std::thread::spawn(move || {
        let bytes: Vec<u8> = (0..n).map(byte).collect();
        writer.write_all(&bytes)
    });
    let mut got = 0u64;
    let mut dst = [0u8; 1000];
    while got < n {
        let k = reader.read(&mut dst).unwrap();
        assert!(k > 0);
        for (i, b) in dst[..k].iter().enumerate() {
            assert_eq!(*b, byte(got + i as u64), "byte {}", got + i as u64);
        }
        got += k as u64;
    }
    sender.join().unwrap().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    hostile.join().unwrap();
}

/// A writer that abandons the ring (fails part-way) is, for the reader, a peer gone after its
/// last byte, not the end of a complete stream; a writer dropped is the end.
#[test]
fn an_abandoned_ring_reads_as_cut_short_and_a_dropped_one_as_ended() {
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    for abandon in [true, false] {
        let (mut writer, mut reader) = channel(4096).unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        reader.watch(OwnedFd::from(a));
        writer.watch(OwnedFd::from(b));
        writer.write_all(b"partial").unwrap();
        if abandon {
            writer.abandon();
        } else {
            drop(writer);
        }
        let mut dst = [0u8; 16];
        assert_eq!(reader.read(&mut dst).unwrap(), 7);
        let last = reader.read(&mut dst);
        if abandon {
            assert!(matches!(last, Err(RingError::PeerGone)), "{last:?}");
        } else {
            assert_eq!(last.unwrap(), 0);
        }
    }
}
