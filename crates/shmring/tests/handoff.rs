//! Handing a ring to another process over a Unix socket (SCM_RIGHTS), and what a receiver does
//! with a handoff that is not a ring.
// Real descriptors and files, which the loom build does not have (tests/loom.rs runs there).
#![cfg(not(loom))]

mod common;

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use switchyard_shmring::{Reader, RingError, RingFds, Writer};

/// The environment variable that turns `child_reader` from a no-op into the child's half.
const CHILD_SOCKET: &str = "SHMRING_TEST_CHILD_SOCKET";
const TOTAL: u64 = 16 << 20;

fn byte(n: u64) -> u8 {
    (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

fn spawn_child(test: &str, name: &str) -> (std::process::Child, UnixStream, std::path::PathBuf) {
    common::spawn_child(test, name, CHILD_SOCKET)
}

/// A separate process (this test binary, run again) reads the ring it was handed and exits 0
/// only if every byte arrived in order.
#[test]
fn a_ring_handed_to_a_child_process_carries_every_byte() {
    let (mut child, socket, dir) = spawn_child("child_reader", "carry");
    let fds = RingFds::create(1 << 16).unwrap();
    fds.send(&socket).unwrap();
    let mut writer = Writer::open(fds).unwrap();
    let mut sent = 0;
    while sent < TOTAL {
        let chunk: Vec<u8> = (sent..sent + 50_000).map(byte).collect();
        writer.write_all(&chunk).unwrap();
        sent += chunk.len() as u64;
    }
    drop(writer);
    assert!(child.wait().unwrap().success(), "the child reader failed");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The child's half of the test above; does nothing when run as an ordinary test.
#[test]
fn child_reader() {
    let Some(path) = std::env::var_os(CHILD_SOCKET) else { return };
    let socket = UnixStream::connect(path).unwrap();
    let mut reader = Reader::open(RingFds::recv(&socket).unwrap()).unwrap();
    let mut buf = vec![0u8; 30_000];
    let mut received = 0u64;
    loop {
        let n = reader.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            assert_eq!(b, byte(received), "byte {received}");
            received += 1;
        }
    }
    assert_eq!(received, 50_000 * TOTAL.div_ceil(50_000));
}

/// A child that takes the ring's writing end, writes `HALF` bytes and then waits to be killed,
/// holding its end of the socket (its lifeline) while it lives.
#[test]
fn child_writer_then_killed() {
    let Some(path) = std::env::var_os(CHILD_SOCKET) else { return };
    let socket = UnixStream::connect(path).unwrap();
    let mut writer = Writer::open(RingFds::recv(&socket).unwrap()).unwrap();
    writer.write_all(&(0..HALF).map(byte).collect::<Vec<_>>()).unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// A child that takes the reading end and never reads, until it is killed.
#[test]
fn child_reader_then_killed() {
    let Some(path) = std::env::var_os(CHILD_SOCKET) else { return };
    let socket = UnixStream::connect(path).unwrap();
    let _reader = Reader::open(RingFds::recv(&socket).unwrap()).unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

const HALF: u64 = 100_000;

/// Runs `f` on a thread of its own and fails the test if it has not returned within `secs`
/// seconds (a missed hang-up would otherwise leave the test asleep for good).
fn within_seconds<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).expect("the end that waited never noticed its peer was gone")
}

/// A writer killed mid-transfer: the reader watching the socket gets every byte the writer
/// published, then `PeerGone`, soon (not a sleep for ever).
#[test]
fn a_killed_writer_is_detected_after_its_bytes_are_read() {
    let (mut child, socket, dir) = spawn_child("child_writer_then_killed", "killed-writer");
    let fds = RingFds::create(1 << 20).unwrap();
    fds.send(&socket).unwrap();
    let mut reader = Reader::open(fds).unwrap();
    reader.watch(OwnedFd::from(socket));
    let mut buf = vec![0u8; 4096];
    let mut got = 0;
    while got < HALF {
        let n = reader.read(&mut buf).unwrap();
        assert!(buf[..n].iter().zip(got..).all(|(&b, i)| b == byte(i)));
        got += n as u64;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let r = within_seconds(5, move || reader.read(&mut buf));
    assert!(matches!(r, Err(RingError::PeerGone)), "{r:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A reader killed while the writer waits on a full ring: the writer gets `PeerGone`.
#[test]
fn a_killed_reader_is_detected_by_a_waiting_writer() {
    let (mut child, socket, dir) = spawn_child("child_reader_then_killed", "killed-reader");
    let fds = RingFds::create(1 << 12).unwrap();
    fds.send(&socket).unwrap();
    let mut writer = Writer::open(fds).unwrap();
    writer.watch(OwnedFd::from(socket));
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        child.kill().unwrap();
        child.wait().unwrap();
    });
    let r = within_seconds(5, move || writer.write_all(&vec![7u8; 1 << 16]));
    assert!(matches!(r, Err(RingError::PeerGone)), "{r:?}");
    killer.join().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sends `fds` with the handoff's tag byte, as `RingFds::send` would.
fn send_raw(socket: &UnixStream, fds: &[&OwnedFd]) {
    let raw: Vec<_> = fds.iter().map(|fd| fd.as_raw_fd()).collect();
    let iov = [std::io::IoSlice::new(b"R")];
    sendmsg::<()>(socket.as_raw_fd(), &iov, &[ControlMessage::ScmRights(&raw)], MsgFlags::empty(), None).unwrap();
}

#[test]
fn a_message_without_descriptors_is_a_bad_handoff() {
    let (mut a, b) = UnixStream::pair().unwrap();
    a.write_all(b"R").unwrap();
    assert!(matches!(RingFds::recv(&b), Err(RingError::BadHandoff)));
}

#[test]
fn too_many_descriptors_is_a_bad_handoff() {
    let (a, b) = UnixStream::pair().unwrap();
    let fds = RingFds::create(64).unwrap();
    let file = fds.file().try_clone_to_owned().unwrap();
    send_raw(&a, &[&file, &file, &file, &file]);
    let got = RingFds::recv(&b);
    assert!(matches!(got, Err(RingError::BadHandoff)), "{got:?}");
}

#[test]
fn an_ordinary_file_is_refused_as_unsealed() {
    let (a, b) = UnixStream::pair().unwrap();
    let path = std::env::temp_dir().join(format!("shmring-unsealed-{}", std::process::id()));
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(4096 + 64).unwrap();
    let file = OwnedFd::from(file);
    std::fs::remove_file(&path).unwrap();
    send_raw(&a, &[&file, &file, &file]);
    let fds = RingFds::recv(&b).unwrap();
    let got = Reader::open(fds);
    assert!(matches!(got, Err(RingError::Unsealed)), "{got:?}");
}

#[test]
fn a_sealed_file_without_a_header_is_not_a_ring() {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let (a, b) = UnixStream::pair().unwrap();
    let file = memfd_create(c"not-a-ring", MFdFlags::MFD_ALLOW_SEALING).unwrap();
    nix::unistd::ftruncate(file.as_fd(), 4096 + 64).unwrap();
    let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
    fcntl(&file, FcntlArg::F_ADD_SEALS(seals)).unwrap();
    send_raw(&a, &[&file, &file, &file]);
    let fds = RingFds::recv(&b).unwrap();
    assert!(matches!(Writer::open(fds), Err(RingError::NotARing { magic: 0, capacity: 0, file_capacity: 64 })));
}
