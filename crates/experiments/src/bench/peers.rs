//! The benchmarks' outside peers: finding nginx and wrk (Debian's, from
//! `bench/install-peers.sh`), and launching nginx on loopback with a configuration written for
//! one run, stopped when its handle is dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A child process stopped when dropped, so an error leaves no nginx behind. nginx's master is
/// asked to stop (SIGTERM), which stops its workers too; killing the master outright would
/// leave them running.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_err() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Where `program` is: on `PATH`, or in the system folders Debian puts servers in.
pub fn found(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// A loopback port free at the moment of asking.
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The `user` line nginx needs when started as root (its workers would otherwise drop to
/// `nobody`, who cannot read the run's folder).
pub(crate) fn user_line() -> &'static str {
    if nix::unistd::geteuid().is_root() { "user root;\n" } else { "" }
}

/// Starts nginx with `conf` (written to `dir`), and waits until it listens on loopback `port`.
pub fn launch_nginx(nginx: &Path, dir: &Path, conf: &str, port: u16) -> Result<(Reaped, SocketAddr)> {
    std::fs::write(dir.join("nginx.conf"), conf)?;
    let child = Command::new(nginx)
        .args(["-p", &dir.display().to_string(), "-c", &dir.join("nginx.conf").display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", nginx.display()))?;
    let child = Reaped(child);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        if t.elapsed() > Duration::from_secs(5) {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            bail!("nginx did not start listening on {addr} within 5 s; its error log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((child, addr))
}
