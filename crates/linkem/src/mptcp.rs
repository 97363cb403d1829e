//! Linux MPTCP (RFC 8684) as a peer of the weighted channels: its sockets, the in-kernel path
//! manager's endpoints and limits set inside a namespace made for the purpose (never in the
//! machine's own), and the subflows `ss` shows.
//!
//! How the paths are made: the connecting side has one address per subflow. It opens its
//! connection from the first; every further address is an endpoint with the `subflow` flag, so
//! the kernel's path manager joins one subflow from each to the server's address. The server
//! needs one address only: subflows differ by their 4-tuple, and different source addresses
//! already make them different. The kernel caps the joins at
//! [`MAX_SUBFLOWS`]` - 1` (`ip mptcp limits set subflows` refuses more than 8).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;

use socket2::{Domain, Protocol, Socket, Type};

use crate::dumbbell::{LinkemError, Namespace};

/// IPPROTO_MPTCP (include/uapi/linux/in.h).
pub const IPPROTO_MPTCP: i32 = 262;

/// The most subflows one MPTCP connection can have here: the first and 8 joined (the kernel's
/// `MPTCP_PM_ADDR_MAX`, the limit `ip mptcp limits` takes).
pub const MAX_SUBFLOWS: usize = 9;

/// Whether this kernel runs MPTCP for the machine's own namespace: the reason in one line when
/// it does not. A namespace made for a run starts with MPTCP enabled whatever the machine's
/// setting, so a machine whose administrator turned it off is respected here, not overridden.
pub fn enabled() -> Result<(), LinkemError> {
    match std::fs::read_to_string("/proc/sys/net/mptcp/enabled") {
        Ok(v) if v.trim() == "1" => Ok(()),
        Ok(v) => {
            Err(LinkemError::Unavailable(format!("MPTCP is turned off here (sysctl net.mptcp.enabled = {})", v.trim())))
        }
        Err(_) => Err(LinkemError::Unavailable("this kernel has no MPTCP (no /proc/sys/net/mptcp)".into())),
    }
}

/// A stream socket, MPTCP or plain TCP, not yet bound or connected, in the namespace of the
/// calling thread (see [`Namespace::spawn`]); non-blocking, for tokio's `TcpSocket::from_std_stream`.
pub fn stream_socket(mptcp: bool) -> io::Result<std::net::TcpStream> {
    let protocol = if mptcp { Protocol::from(IPPROTO_MPTCP) } else { Protocol::TCP };
    let s = Socket::new(Domain::IPV4, Type::STREAM, Some(protocol)).map_err(|e| {
        if mptcp && e.raw_os_error() == Some(libc::EPROTONOSUPPORT) {
            io::Error::new(e.kind(), "socket(IPPROTO_MPTCP): this kernel does not support MPTCP")
        } else {
            e
        }
    })?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// A listening socket, MPTCP or plain TCP, on `addr` in the namespace of the calling thread;
/// non-blocking, for tokio's `TcpListener::from_std`. An MPTCP listener also accepts plain TCP.
pub fn listener(addr: SocketAddr, mptcp: bool) -> io::Result<std::net::TcpListener> {
    let s: Socket = stream_socket(mptcp)?.into();
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// Sets the in-kernel path manager of `ns` to join one subflow from each of `extra` (the
/// connecting side's addresses beyond the one it connects from), and lets both ends take that
/// many joins. Only inside `ns`.
pub fn endpoints(ns: &Namespace, extra: &[Ipv4Addr]) -> Result<(), LinkemError> {
    if extra.len() >= MAX_SUBFLOWS {
        return Err(LinkemError::Setup(format!(
            "{} subflows: MPTCP here takes at most {MAX_SUBFLOWS} a connection (the first and 8 joined)",
            extra.len() + 1
        )));
    }
    for a in extra {
        ns.ip(&["mptcp", "endpoint", "add", &a.to_string(), "subflow"])?;
    }
    accept_joins(ns, extra.len())
}

/// Lets MPTCP connections in `ns` have `joins` subflows beyond their first (the listening side's
/// half of [`endpoints`], for a server in a namespace of its own). Only inside `ns`.
pub fn accept_joins(ns: &Namespace, joins: usize) -> Result<(), LinkemError> {
    ns.ip(&["mptcp", "limits", "set", "subflows", &joins.to_string(), "add_addr_accepted", "0"])
}

/// One namespace whose loopback carries MPTCP connections with `subflows` subflows each: the
/// client's addresses 10.77.0.1 … 10.77.0.`subflows` (the first is where connections start,
/// the others are `subflow` endpoints) and the server's 10.77.1.1. Raw TCP between the same
/// addresses is the fair baseline: the same loopback, the same namespace.
#[derive(Debug)]
pub struct Loopback {
    /// The namespace, deleted with this.
    pub ns: Namespace,
    /// The connecting side's addresses, one a subflow.
    pub clients: Vec<Ipv4Addr>,
    /// The listening side's address.
    pub server: Ipv4Addr,
}

impl Loopback {
    /// Makes the namespace, its addresses and its endpoints; says in one line why it cannot
    /// (not root, MPTCP off or missing, more subflows than the kernel takes).
    pub fn new(subflows: usize) -> Result<Self, LinkemError> {
        if subflows == 0 || subflows > MAX_SUBFLOWS {
            return Err(LinkemError::Unavailable(format!(
                "{subflows} subflows: MPTCP here takes from 1 to {MAX_SUBFLOWS} a connection (the first and at most 8 joined)"
            )));
        }
        enabled()?;
        let ns = Namespace::new("mp")?;
        let clients: Vec<Ipv4Addr> = (1..=subflows).map(|k| Ipv4Addr::new(10, 77, 0, k as u8)).collect();
        let server = Ipv4Addr::new(10, 77, 1, 1);
        for a in clients.iter().chain([&server]) {
            ns.ip(&["addr", "add", &format!("{a}/32"), "dev", "lo"])?;
        }
        endpoints(&ns, &clients[1..])?;
        // The kernel may lack MPTCP even with the sysctl present (a module refused): try a socket.
        ns.spawn(|| stream_socket(true).map(drop))
            .join()
            .map_err(|_| LinkemError::Setup("the thread trying an MPTCP socket panicked".into()))??
            .map_err(|e| LinkemError::Unavailable(e.to_string()))?;
        Ok(Self { ns, clients, server })
    }
}

impl From<io::Error> for LinkemError {
    fn from(e: io::Error) -> Self {
        Self::Setup(e.to_string())
    }
}

/// One TCP connection as `ss -tni` shows it: an MPTCP subflow when `mptcp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subflow {
    /// Its local address and port.
    pub local: SocketAddr,
    /// Its peer's.
    pub peer: SocketAddr,
    /// Bytes the peer acknowledged (what it carried, sending).
    pub bytes_acked: u64,
    /// Bytes it received.
    pub bytes_received: u64,
    /// Whether it is an MPTCP subflow (`tcp-ulp-mptcp`).
    pub mptcp: bool,
}

/// The established TCP connections in `ss -tniH`'s output: a line per socket (state, queues,
/// local and peer address) followed by an indented line of its TCP_INFO. Lines it cannot read
/// are skipped (ss adds fields across versions); a connection without counters counts zero.
pub fn parse_ss(text: &str) -> Vec<Subflow> {
    let mut out: Vec<Subflow> = Vec::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            let mut addrs = line.split_whitespace().filter_map(|f| f.parse::<SocketAddr>().ok());
            if let (Some(local), Some(peer)) = (addrs.next(), addrs.next()) {
                out.push(Subflow { local, peer, bytes_acked: 0, bytes_received: 0, mptcp: false });
            }
            continue;
        }
        let Some(last) = out.last_mut() else { continue };
        for field in line.split_whitespace() {
            let counter = |name: &str| field.strip_prefix(name).and_then(|v| v.parse::<u64>().ok());
            if let Some(v) = counter("bytes_acked:") {
                last.bytes_acked = v;
            } else if let Some(v) = counter("bytes_received:") {
                last.bytes_received = v;
            } else if field == "tcp-ulp-mptcp" {
                last.mptcp = true;
            }
        }
    }
    out
}

/// The established TCP connections of `ns`, by `ss -tniH` run inside it.
pub fn subflows(ns: &Namespace) -> Result<Vec<Subflow>, LinkemError> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "ss", "-tniH"])
        .output()
        .map_err(|e| LinkemError::Setup(format!("running `ss` in {}: {e}", ns.name())))?;
    if !out.status.success() {
        return Err(LinkemError::Setup(format!(
            "ss -tniH in {}: {}",
            ns.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(parse_ss(&String::from_utf8_lossy(&out.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Trimmed from `ss -tniH` on Linux 6.18 (iproute2 6.1) in a namespace with two subflows.
    const SS: &str = "ESTAB 0      0          10.77.0.3:36387    10.77.1.1:7000 \n\
\t bbr wscale:10,10 rto:204 mss:65483 bytes_sent:194653504 bytes_retrans:654898 bytes_acked:193998607 segs_out:5688 tcp-ulp-mptcp flags:Jjec token:52c25a77(id:0)/6c8514d8(id:2)\n\
ESTAB 0      0          10.77.1.1:7000     10.77.0.3:36387\n\
\t bbr wscale:10,10 rto:204 ato:40 mss:32768 bytes_received:193998606 segs_out:2348 tcp-ulp-mptcp flags:Jec\n\
ESTAB 0      0          10.77.0.1:36525    10.77.1.1:7000 \n\
\t cubic wscale:7,7 rto:204 bytes_acked:1 segs_out:3\n";

    #[test]
    fn ss_lines_give_each_connection_its_addresses_counters_and_kind() {
        let got = parse_ss(SS);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].local, "10.77.0.3:36387".parse().unwrap());
        assert_eq!(got[0].peer, "10.77.1.1:7000".parse().unwrap());
        assert_eq!((got[0].bytes_acked, got[0].bytes_received, got[0].mptcp), (193_998_607, 0, true));
        assert_eq!((got[1].bytes_acked, got[1].bytes_received, got[1].mptcp), (0, 193_998_606, true));
        assert_eq!((got[2].bytes_acked, got[2].mptcp), (1, false));
    }

    #[test]
    fn ss_output_it_cannot_read_is_skipped_not_misread() {
        // A header, an info line before any socket, a socket line without addresses.
        let text = "State Recv-Q Send-Q Local Address:Port Peer Address:Port\n\t bytes_acked:5\nESTAB 0 0 garbage\n\t bytes_acked:7\n";
        assert_eq!(parse_ss(text), []);
        // IPv6 addresses in brackets, and a counter that does not parse, left at zero.
        let v6 = "ESTAB 0 0 [::1]:5000 [::1]:40000\n\t bytes_acked:x bytes_received:12\n";
        let got = parse_ss(v6);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].bytes_acked, got[0].bytes_received), (0, 12));
    }
}
