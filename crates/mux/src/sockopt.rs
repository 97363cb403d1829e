//! The kernel's help with a TCP connection: a short unsent queue, and what it knows of the path;
//! and for a Unix socket, what waits in its queue.
//!
//! `TCP_NOTSENT_LOWAT` makes a socket writable only while its unsent bytes are below a mark, so
//! frames wait in our queue, where the scheduler can still choose, rather than in the kernel's
//! (notes §7.1, replacing the thesis's hand-sized `SO_SNDBUF`, Eq 7.5). `TCP_INFO` gives the
//! smoothed RTT, the unsent bytes and the delivery rate that earliest-delivery striping needs.
//! Neither is in socket2 or tokio, so both go through libc, on Linux only; elsewhere they do
//! nothing and earliest delivery falls back to least queued.

use std::os::fd::AsRawFd;

use switchyard_core::carry::choose::ConnView;

/// Sets `TCP_NOTSENT_LOWAT` to `bytes`.
#[cfg(target_os = "linux")]
pub fn set_notsent_lowat(socket: &impl AsRawFd, bytes: u32) -> std::io::Result<()> {
    let value = bytes as libc::c_int;
    // SAFETY: a valid socket descriptor, and a pointer to a live c_int with its exact size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Sets `TCP_NOTSENT_LOWAT` to `bytes` (not available here: does nothing).
#[cfg(not(target_os = "linux"))]
pub fn set_notsent_lowat(_socket: &impl AsRawFd, _bytes: u32) -> std::io::Result<()> {
    Ok(())
}

/// The head of Linux's `struct tcp_info` (include/uapi/linux/tcp.h) up to
/// `tcpi_delivery_rate` (Linux 4.9). The libc crate's copy stops at `tcpi_total_retrans`, before
/// the two fields we need most; the kernel only appends to this struct, so the layout holds, and
/// the length the kernel returns says which fields it filled.
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Default)]
struct TcpInfo {
    head: [u8; 8],
    rto_ato_mss: [u32; 4],
    unacked_sacked_lost_retrans_fackets: [u32; 5],
    last_times: [u32; 4],
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt_us: u32,
    rttvar_us: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt_us: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
}

/// The kernel's view of the connection: smoothed RTT, unsent bytes, the rate it can send at,
/// whether it is recovering from a loss. `at_ns` is left for the caller to stamp.
#[cfg(target_os = "linux")]
pub fn view(socket: &impl AsRawFd) -> Option<ConnView> {
    let mut info = TcpInfo::default();
    let mut len = size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor, and a pointer to a live, plain-old-data TcpInfo with
    // its length; the kernel writes at most `len` bytes and says how many.
    let rc = unsafe {
        libc::getsockopt(socket.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, (&raw mut info).cast(), &mut len)
    };
    if rc != 0 || (len as usize) < size_of::<TcpInfo>() {
        return None;
    }
    let window_rate = if info.rtt_us > 0 {
        f64::from(info.snd_cwnd) * f64::from(info.rto_ato_mss[2]) / (f64::from(info.rtt_us) * 1e-6)
    } else {
        0.0
    };
    // tcpi_ca_state: TCP_CA_Recovery (3) or TCP_CA_Loss (4) while retransmitting.
    let ca_state = info.head[1];
    Some(ConnView {
        open: true,
        unsent: u64::from(info.notsent_bytes),
        rtt_ns: u64::from(info.rtt_us) * 1_000,
        rate: info.delivery_rate as f64,
        window_rate,
        at_ns: 0,
        recovering: ca_state >= 3,
    })
}

/// The kernel's view of the connection (not available here).
#[cfg(not(target_os = "linux"))]
pub fn view(_socket: &impl AsRawFd) -> Option<ConnView> {
    None
}

/// Bytes a Unix stream socket holds that its peer has not read (`SIOCOUTQ`), as the kernel
/// accounts its buffers: with some overhead per write, so an upper bound.
#[cfg(target_os = "linux")]
pub fn unix_unread(socket: &impl AsRawFd) -> Option<u64> {
    let mut queued: libc::c_int = 0;
    // SIOCOUTQ is TIOCOUTQ on Linux (include/uapi/linux/sockios.h); libc names only the latter.
    // SAFETY: a valid socket descriptor, and a pointer to a live c_int, which is what this
    // request writes.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::TIOCOUTQ, &raw mut queued) };
    (rc == 0).then(|| u64::try_from(queued).unwrap_or(0))
}

/// Bytes a Unix stream socket holds that its peer has not read (not available here).
#[cfg(not(target_os = "linux"))]
pub fn unix_unread(_socket: &impl AsRawFd) -> Option<u64> {
    None
}
