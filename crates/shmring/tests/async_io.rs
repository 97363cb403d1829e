//! The ring as tokio's AsyncRead/AsyncWrite: bytes exact under concurrency, the end only after
//! the last byte, a dead peer noticed rather than waited on for ever, corruption as an error,
//! and no end ever blocking the thread its runtime runs on.
#![cfg(all(feature = "tokio", not(loom)))]

mod common;

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use switchyard_shmring::{Duplex, RingError, channel, duplex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The n-th byte of a stream tagged `seed`: not periodic in any power of two below 2^16.
fn byte(seed: u64, n: u64) -> u8 {
    ((n ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8 ^ (n >> 16) as u8
}

/// xorshift64: random chunk sizes without a dependency.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Writes `total` bytes of stream `seed` in chunks of random sizes (1 B to 3x the ring), then
/// shuts down.
async fn send(mut to: impl AsyncWrite + Unpin, seed: u64, total: u64) {
    let mut rng = seed | 1;
    let mut sent = 0;
    while sent < total {
        let size = (next(&mut rng) % 50_000 + 1).min(total - sent);
        let chunk: Vec<u8> = (sent..sent + size).map(|i| byte(seed, i)).collect();
        to.write_all(&chunk).await.unwrap();
        sent += size;
    }
    to.shutdown().await.unwrap();
}

/// Reads stream `seed` with buffers of random sizes until the end, checking every byte;
/// returns how many arrived.
async fn receive(mut from: impl AsyncRead + Unpin, seed: u64) -> u64 {
    let mut rng = seed.rotate_left(7) | 1;
    let mut buf = vec![0u8; 40_000];
    let mut got = 0;
    loop {
        let size = (next(&mut rng) % buf.len() as u64 + 1) as usize;
        let n = from.read(&mut buf[..size]).await.unwrap();
        if n == 0 {
            return got;
        }
        for (i, &b) in buf[..n].iter().enumerate() {
            assert_eq!(b, byte(seed, got + i as u64), "stream {seed:#x}, byte {}", got + i as u64);
        }
        got += n as u64;
    }
}

/// Fails (instead of hanging) if `f` does not finish within `secs`.
async fn within<T>(secs: u64, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .expect("timed out: a wake-up was lost or a peer's death missed")
}

/// The RingError inside an io::Error from an async end.
fn ring_error(e: &std::io::Error) -> &RingError {
    e.get_ref().and_then(|e| e.downcast_ref::<RingError>()).expect("an io::Error wrapping a RingError")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn megabytes_both_ways_at_once_arrive_exactly() {
    const TOTAL: u64 = 6 << 20;
    // Small rings, so both ends fill, empty, wrap and park many times.
    let (a, b) = duplex(1 << 14).unwrap();
    let (a_in, a_out) = a.into_split();
    let (b_in, b_out) = b.into_split();
    let tasks = [
        tokio::spawn(send(a_out, 0xA, TOTAL)),
        tokio::spawn(send(b_out, 0xB, TOTAL)),
        tokio::spawn(async move { assert_eq!(receive(b_in, 0xA).await, TOTAL) }),
        tokio::spawn(async move { assert_eq!(receive(a_in, 0xB).await, TOTAL) }),
    ];
    within(120, async {
        for task in tasks {
            task.await.unwrap();
        }
    })
    .await;
}

#[tokio::test]
async fn tokio_io_copy_goes_through_a_ring() {
    let (writer, reader) = channel(4096).unwrap();
    let (mut writer, mut reader) = (writer.into_async().unwrap(), reader.into_async().unwrap());
    let data: Vec<u8> = (0..1_000_003).map(|i| byte(7, i)).collect();
    let expected = data.clone();
    let sender = tokio::spawn(async move {
        let copied = tokio::io::copy(&mut data.as_slice(), &mut writer).await.unwrap();
        writer.shutdown().await.unwrap();
        copied
    });
    let mut out = Vec::new();
    within(60, tokio::io::copy(&mut reader, &mut out)).await.unwrap();
    assert_eq!(sender.await.unwrap(), expected.len() as u64);
    assert!(out == expected, "{} bytes out, {} in", out.len(), expected.len());
}

#[tokio::test]
async fn shutdown_ends_the_stream_after_the_last_byte() {
    let (writer, reader) = channel(64).unwrap();
    let (mut writer, mut reader) = (writer.into_async().unwrap(), reader.into_async().unwrap());
    writer.write_all(b"last words").await.unwrap();
    writer.shutdown().await.unwrap();
    let err = writer.write(b"more").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    let mut got = Vec::new();
    within(5, reader.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got, b"last words");
    assert_eq!(reader.read(&mut [0; 8]).await.unwrap(), 0, "the end stays the end");
}

#[tokio::test]
async fn a_parked_reader_wakes_for_the_shutdown() {
    let (writer, reader) = channel(64).unwrap();
    let (mut writer, mut reader) = (writer.into_async().unwrap(), reader.into_async().unwrap());
    let closer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.write_all(b"late").await.unwrap();
        writer.shutdown().await.unwrap();
        // Kept alive past the shutdown: the end must come from it, not from the drop.
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let mut got = Vec::new();
    within(5, reader.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got, b"late");
    closer.abort();
}

#[tokio::test]
async fn a_dropped_reader_is_a_broken_pipe_for_a_parked_writer() {
    let (writer, reader) = channel(64).unwrap();
    let mut writer = writer.into_async().unwrap();
    let reader = reader.into_async().unwrap();
    let dropper = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(reader);
    });
    let err = within(5, writer.write_all(&[1; 1000])).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BrokenPipe);
    assert!(matches!(ring_error(&err), RingError::ReaderClosed), "{err}");
    dropper.await.unwrap();
}

#[tokio::test]
async fn a_corrupt_head_is_invalid_data() {
    let (writer, reader) = channel(4096).unwrap();
    let file = File::from(writer.file().try_clone_to_owned().unwrap());
    let (mut writer, mut reader) = (writer.into_async().unwrap(), reader.into_async().unwrap());
    writer.write_all(&[7; 10]).await.unwrap();
    // The head word (offset 64, `raw.rs`), pushed past what the ring can hold.
    file.write_all_at(&(10u64 + 4096 + 1).to_ne_bytes(), 64).unwrap();
    let err = within(5, reader.read(&mut [0; 64])).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert!(matches!(ring_error(&err), RingError::Corrupt(c) if c.word == "head"), "{err}");
    assert!(err.to_string().starts_with("the peer corrupted the ring"), "{err}");
}

/// The readiness calls, as a driver doing its own non-blocking I/O uses them: `Pending` on an
/// empty ring until bytes arrive, `WouldBlock` once drained, vectored writes in order, and a
/// writer held at its low-water mark until the reader catches up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_and_non_blocking_calls_follow_the_ring() {
    use std::future::poll_fn;
    use std::io::IoSlice;
    use std::task::Poll;

    let (writer, reader) = channel(4096).unwrap();
    let (mut writer, mut reader) = (writer.into_async().unwrap(), reader.into_async().unwrap());
    let mut buf = [0u8; 64];
    assert_eq!(reader.try_read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert!(poll_fn(|cx| Poll::Ready(reader.poll_read_ready(cx).is_pending())).await, "nothing to read yet");

    // A parked reader is woken by a write from another task.
    let writing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let n = writer.try_write_vectored(&[IoSlice::new(b"head "), IoSlice::new(b""), IoSlice::new(b"payload")]);
        assert_eq!(n.unwrap(), 12);
        writer
    });
    within(5, poll_fn(|cx| reader.poll_read_ready(cx))).await.unwrap();
    let mut writer = writing.await.unwrap();
    assert_eq!(reader.available().unwrap(), 12);
    let n = reader.try_read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"head payload");
    assert_eq!(reader.try_read(&mut buf).unwrap_err().kind(), ErrorKind::WouldBlock);

    // At its mark the writer takes nothing more, though the ring has room.
    writer.set_low_water(100);
    assert_eq!(writer.try_write(&[1; 300]).unwrap(), 300, "below the mark a write takes all the room");
    assert_eq!(writer.unread().unwrap(), 300);
    assert_eq!(writer.try_write(&[2; 10]).unwrap_err().kind(), ErrorKind::WouldBlock);
    assert!(poll_fn(|cx| Poll::Ready(writer.poll_write_ready(cx).is_pending())).await);
    let draining = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let mut all = [0u8; 300];
        assert_eq!(reader.try_read(&mut all[..250]).unwrap(), 250);
        reader
    });
    within(5, poll_fn(|cx| writer.poll_write_ready(cx))).await.unwrap();
    assert_eq!(writer.unread().unwrap(), 50);
    let mut reader = draining.await.unwrap();

    // The end: once the writer is gone and its bytes read, a read returns 0.
    writer.try_write(b"bye").unwrap();
    drop(writer);
    within(5, poll_fn(|cx| reader.poll_read_ready(cx))).await.unwrap();
    let mut rest = [0u8; 100];
    assert_eq!(reader.try_read(&mut rest).unwrap(), 53);
    assert_eq!(&rest[50..53], b"bye");
    assert_eq!(reader.try_read(&mut rest).unwrap(), 0, "the end after the last byte");
}

/// Both ends as tasks of one current-thread runtime, through a ring far smaller than the
/// transfer: each must park (return `Pending`) for the other to run. An end that blocked the
/// thread would stall both for good, so the watchdog is a separate thread.
#[test]
fn both_ends_share_one_thread() {
    const TOTAL: u64 = 8 << 20;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let got = rt.block_on(async {
            let (writer, reader) = channel(4096).unwrap();
            let sender = tokio::spawn(send(writer.into_async().unwrap(), 0x51, TOTAL));
            let got = receive(reader.into_async().unwrap(), 0x51).await;
            sender.await.unwrap();
            got
        });
        let _ = done.send(got);
    });
    let got = finished.recv_timeout(Duration::from_secs(60)).expect("an end blocked the runtime's only thread");
    assert_eq!(got, TOTAL);
}

/// The environment variable that turns the child halves below from no-ops into children.
const CHILD_SOCKET: &str = "SHMRING_ASYNC_TEST_CHILD_SOCKET";
const HALF: u64 = 100_000;

fn spawn_child(test: &str, name: &str) -> (std::process::Child, UnixStream, std::path::PathBuf) {
    common::spawn_child(test, &format!("async-{name}"), CHILD_SOCKET)
}

/// The child's half of the echo test: sends back everything it reads, until the end.
#[test]
fn child_echo() {
    let Some(path) = std::env::var_os(CHILD_SOCKET) else { return };
    let socket = UnixStream::connect(path).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (mut from, mut to) = Duplex::accept(&socket).unwrap().into_split();
        tokio::io::copy(&mut from, &mut to).await.unwrap();
        to.shutdown().await.unwrap();
    });
}

/// A duplex across two processes (two rings handed over one socket): what goes out comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplex_with_a_child_process_echoes_every_byte() {
    const TOTAL: u64 = 4 << 20;
    let (mut child, socket, dir) = spawn_child("child_echo", "echo");
    let (from, to) = Duplex::offer(&socket, 1 << 15).unwrap().into_split();
    let sender = tokio::spawn(send(to, 0xEC, TOTAL));
    assert_eq!(within(60, receive(from, 0xEC)).await, TOTAL);
    sender.await.unwrap();
    assert!(child.wait().unwrap().success(), "the child failed");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The child's half of the kill test: writes `HALF` bytes, then waits to be killed.
#[test]
fn child_writes_then_is_killed() {
    let Some(path) = std::env::var_os(CHILD_SOCKET) else { return };
    let socket = UnixStream::connect(path).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut duplex = Duplex::accept(&socket).unwrap();
        let data: Vec<u8> = (0..HALF).map(|i| byte(0xD, i)).collect();
        duplex.write_all(&data).await.unwrap();
        std::future::pending::<()>().await;
    });
}

/// A peer killed without closing: the parked reader gets every byte it published, then an
/// `UnexpectedEof` wrapping `PeerGone`, soon. The nap alone would never end this wait (it only
/// re-checks the ring); the lifeline's hang-up must.
#[tokio::test]
async fn a_killed_writer_is_noticed_by_a_parked_reader() {
    let (mut child, socket, dir) = spawn_child("child_writes_then_is_killed", "killed");
    let mut duplex = Duplex::offer(&socket, 1 << 20).unwrap();
    drop(socket); // the duplex's ends hold their own copies as lifelines
    let mut buf = vec![0u8; 4096];
    let mut got = 0;
    while got < HALF {
        let n = within(30, duplex.read(&mut buf)).await.unwrap();
        assert!(n > 0 && buf[..n].iter().zip(got..).all(|(&b, i)| b == byte(0xD, i)));
        got += n as u64;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let err = within(5, duplex.read(&mut buf)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
    assert!(matches!(ring_error(&err), RingError::PeerGone), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
