//! What several test files share: running this test binary again as a peer process.

use std::os::unix::net::{UnixListener, UnixStream};
use std::process::{Child, Command};

/// Starts this test binary again running only `test`, with the environment variable `var` set
/// to a socket's path, and accepts its connection (without hanging if it dies first). Returns
/// the child, the connection and the socket's directory (`name` and the pid make it unique),
/// which the caller removes.
pub(crate) fn spawn_child(test: &str, name: &str, var: &str) -> (Child, UnixStream, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("shmring-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("handoff.sock");
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(var, &path)
        .spawn()
        .unwrap();
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
    (child, socket, dir)
}
