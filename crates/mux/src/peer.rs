//! Where a session's other end is: a TCP address, or a path on this host for a peer reached
//! over a Unix socket or over shared-memory rings.
//!
//! The same scheduling runs over each: what differs is only how bytes move (see `link.rs`).
//! A server bound to `unix:PATH` or `shm:PATH` listens on a Unix socket at `PATH` and takes
//! clients of either kind; an `shm:` client offers each of its connections as two rings
//! (`switchyard_shmring::Duplex`) over its own connection to that socket, which then stays open
//! only as the rings' lifeline.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;

/// A session's peer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// Over TCP: another host, or this one by its loopback address.
    Tcp(SocketAddr),
    /// Over a Unix stream socket at this path: another process on this host.
    Unix(PathBuf),
    /// Over shared-memory rings, handed over through a Unix socket at this path: another
    /// process on this host, without a system call per message while both are busy.
    Shm(PathBuf),
}

/// The forms a peer is written in, for errors.
const FORMS: &str =
    "a peer is HOST:PORT (TCP), unix:/PATH (a Unix socket) or shm:/PATH (shared-memory rings handed over at PATH)";

impl Peer {
    /// Whether the peer is on this host by construction (a Unix socket or rings), where TLS
    /// has nothing to protect against that the socket file's permissions do not.
    pub fn is_local(&self) -> bool {
        !matches!(self, Self::Tcp(_))
    }
}

impl From<SocketAddr> for Peer {
    fn from(addr: SocketAddr) -> Self {
        Self::Tcp(addr)
    }
}

impl FromStr for Peer {
    type Err = String;

    /// `HOST:PORT` or `IP:PORT` (a host name is looked up here, with the system's resolver,
    /// and its first address taken), `unix:/PATH`, `shm:/PATH`.
    fn from_str(s: &str) -> Result<Self, String> {
        for (prefix, make) in [("unix:", Self::Unix as fn(PathBuf) -> Self), ("shm:", Self::Shm)] {
            if let Some(path) = s.strip_prefix(prefix) {
                if path.is_empty() {
                    return Err(format!("{s:?}: no path after {prefix:?}; {FORMS}"));
                }
                return Ok(make(PathBuf::from(path)));
            }
        }
        if let Ok(addr) = s.parse::<SocketAddr>() {
            return Ok(Self::Tcp(addr));
        }
        let Some((host, port)) = s.rsplit_once(':') else {
            return Err(format!("{s:?}: no port; {FORMS}"));
        };
        if host.is_empty() || port.parse::<u16>().is_err() {
            return Err(format!("{s:?}: not HOST:PORT; {FORMS}"));
        }
        let mut found = s.to_socket_addrs().map_err(|e| format!("{s:?}: looking up {host:?}: {e}"))?;
        found.next().map(Self::Tcp).ok_or_else(|| format!("{s:?}: {host:?} has no address"))
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tcp(addr) => write!(f, "{addr}"),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
            Self::Shm(path) => write!(f, "shm:{}", path.display()),
        }
    }
}
