//! Handing a ring to another process over a Unix socket (SCM_RIGHTS), and what a receiver does
//! with a handoff that is not a ring.

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::Command;

use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use switchyard_shmring::{Reader, RingError, RingFds, Writer};

/// The environment variable that turns `child_reader` from a no-op into the child's half.
const CHILD_SOCKET: &str = "SHMRING_TEST_CHILD_SOCKET";
const TOTAL: u64 = 16 << 20;

fn byte(n: u64) -> u8 {
    (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8
}

/// A separate process (this test binary, run again) reads the ring it was handed and exits 0
/// only if every byte arrived in order.
#[test]
fn a_ring_handed_to_a_child_process_carries_every_byte() {
    let dir = std::env::temp_dir().join(format!("shmring-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("handoff.sock");
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_reader", "--nocapture"])
        .env(CHILD_SOCKET, &path)
        .spawn()
        .unwrap();
    // Accept without hanging if the child dies before it connects.
    listener.set_nonblocking(true).unwrap();
    let socket = loop {
        match listener.accept() {
            Ok((socket, _)) => break socket,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(child.try_wait().unwrap().is_none(), "the child exited before connecting");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    socket.set_nonblocking(false).unwrap();
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
