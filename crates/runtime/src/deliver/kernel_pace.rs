//! Pacing by the kernel: TCP's own pacing under `SO_MAX_PACING_RATE`, and a probe of what this
//! kernel offers.
//!
//! Since Linux 4.13 TCP paces a socket by itself (a high-resolution timer per socket) once
//! `SO_MAX_PACING_RATE` is set, without the `fq` qdisc; the socket then leaves at most its rate
//! whatever is written to it. UDP is paced by the kernel only under `fq` (and `SO_TXTIME` needs
//! `etf`), which a kernel may lack: the server refuses kernel-paced UDP streams rather than send
//! them unpaced.
//!
//! Memory: a kernel-paced stream is written a packet at a time whenever the kernel holds less
//! than a packet unsent (`TCP_NOTSENT_LOWAT` = one packet), so at most about two packets a stream
//! wait in the kernel (8 KiB at the default 4 KiB packet: 80 MB at 10,000 streams).

use std::io;
use std::os::fd::AsRawFd;

/// Sets `socket` to leave at most `bytes_per_sec` (TCP's own pacing) and to say it is writable
/// only when less than `unsent` bytes wait in it.
pub(crate) fn pace(socket: &impl AsRawFd, bytes_per_sec: f64, unsent: u32) -> io::Result<()> {
    let fd = socket.as_raw_fd();
    // The kernel takes a 64-bit rate since 4.20 and a 32-bit one before: try the wider first.
    let rate = bytes_per_sec.round().clamp(1.0, u64::MAX as f64) as u64;
    if set(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &rate).is_err() {
        set(fd, libc::SOL_SOCKET, libc::SO_MAX_PACING_RATE, &(rate.min(u64::from(u32::MAX - 1)) as u32))?;
    }
    set(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, &unsent)
}

/// Bounds the segments of connections `listener` accepts to `bytes` (`TCP_MAXSEG`, inherited
/// by accepted sockets and announced in the handshake): TCP's pacing spaces segments, so a
/// segment is the grain of the pace.
pub(crate) fn bound_segments(listener: &impl AsRawFd, bytes: u32) -> io::Result<()> {
    set(listener.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG, &bytes.max(88))
}

fn set<T>(fd: i32, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to a live T of the size passed; setsockopt only reads it.
    let rc =
        unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), size_of::<T>() as libc::socklen_t) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// What this kernel can pace, as `deliver serve --pacing kernel` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPacing {
    /// TCP's own pacing (`SO_MAX_PACING_RATE` accepted on a TCP socket).
    pub tcp: bool,
    /// The `fq` qdisc: `Some(true)` if a fresh network namespace took it, `None` if it could
    /// not be asked (not root, or no `unshare`/`tc`).
    pub fq: Option<bool>,
}

impl KernelPacing {
    /// Asks the kernel: a TCP socket takes the option or not; `fq` is tried on the loopback of
    /// a network namespace made for the question (`unshare -n tc qdisc add dev lo root fq`), so
    /// nothing of the machine's own changes.
    pub fn probe() -> Self {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| std::net::TcpStream::connect(l.local_addr()?))
            .is_ok_and(|s| pace(&s, 1e6, 4096).is_ok());
        let fq = std::process::Command::new("unshare")
            .args(["-n", "tc", "qdisc", "add", "dev", "lo", "root", "fq"])
            .output()
            .ok()
            .and_then(|o| {
                let err = String::from_utf8_lossy(&o.stderr);
                if o.status.success() {
                    Some(true)
                } else if err.contains("unknown") {
                    Some(false)
                } else {
                    None
                }
            });
        Self { tcp, fq }
    }
}

impl std::fmt::Display for KernelPacing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tcp = if self.tcp { "TCP's own pacing (SO_MAX_PACING_RATE): yes" } else { "TCP's own pacing: no" };
        let fq = match self.fq {
            Some(true) => "the fq qdisc: yes (not used: TCP streams only)",
            Some(false) => "the fq qdisc: no, so UDP streams cannot be kernel-paced and are refused",
            None => "the fq qdisc: not asked (needs root, unshare and tc); UDP streams are refused",
        };
        write!(f, "{tcp}; {fq}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A paced socket leaves at its rate: 400 KB at 1 MB/s take about 0.36 s to arrive (the
    /// first ten segments leave unpaced, as Linux starts a connection), where an unpaced one
    /// takes milliseconds on loopback.
    #[test]
    fn a_paced_socket_leaves_at_its_rate() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        bound_segments(&l, 4096).unwrap();
        let rx = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut tx, _) = l.accept().unwrap();
        pace(&tx, 1e6, 1 << 20).unwrap();
        let writer = std::thread::spawn(move || tx.write_all(&[1u8; 400_000]));
        let t = std::time::Instant::now();
        let mut got = vec![0u8; 400_000];
        (&rx).read_exact(&mut got).unwrap();
        writer.join().unwrap().unwrap();
        assert!(t.elapsed() > std::time::Duration::from_millis(250), "{:?}", t.elapsed());
    }
}
