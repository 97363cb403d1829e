//! Carrying local TCP ports across a session: each TCP connection accepted on a forwarded port
//! becomes one channel, with the forward's weight.
//!
//! A channel opens with a short header naming where the far end should connect: a big-endian
//! `u16` length, then `host:port` in UTF-8. The far end connects there (if its allow list lets
//! it) and carries bytes both ways until each side closes, each end passed on as a half-close
//! (`forwarder.rs`: the socket's reads go to the session without a copy, the channel's frames
//! to the socket straight from the session's buffers, and an idle connection holds no buffer;
//! what a connection may hold in memory, and why, is written there).
//!
//! A channel that is cut off (its session stopped before the peer's close, [`MuxError::Cut`])
//! resets its TCP connection instead of closing it: a closed connection says "that was all",
//! and a program at either end would take part of a transfer for the whole of it. So does a
//! channel the other end reset ([`MuxError::Reset`]): a target not allowed or refusing, or a
//! client that reset its own connection. The reason travels with the reset, so both ends log
//! the same sentence.
//!
//! Each connection carried holds a descriptor at each end (the client's, the target's). A
//! tunnel out of descriptors (`EMFILE`, `ENFILE`) waits for one to be freed rather than
//! giving up: the forward leaves connections in its listen backlog until it can accept them,
//! and the far end tries the target again until [`CONNECT_TIMEOUT`]. Before, the forward
//! stopped at its first failed accept, and every client after it was refused.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::forwarder::{self, Broke};
use crate::{Channel, MuxConfig, MuxError, Peer, Session};

/// One forwarded port.
#[derive(Clone, Debug, PartialEq)]
pub struct Forward {
    /// Where to listen here.
    pub local: SocketAddr,
    /// Where the far end connects (`host:port`).
    pub target: String,
    /// The weight of each of its connections' channels.
    pub weight: f64,
}

impl std::str::FromStr for Forward {
    type Err = String;

    /// `LOCAL=TARGET` or `LOCAL=TARGET@WEIGHT`, e.g. `127.0.0.1:2222=10.0.0.5:22@8`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (local, rest) = s.split_once('=').ok_or_else(|| format!("{s:?}: a forward is LOCAL=TARGET[@WEIGHT]"))?;
        let local = local.parse().map_err(|e| format!("{local:?}: not an address to listen on ({e})"))?;
        let (target, weight) = match rest.rsplit_once('@') {
            Some((t, w)) => (t, w.parse::<f64>().map_err(|e| format!("weight {w:?}: {e}"))?),
            None => (rest, 1.0),
        };
        if !(weight.is_finite() && weight > 0.0) {
            return Err(format!("weight {weight}: a weight is a positive number"));
        }
        if target.rsplit_once(':').is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err()) {
            return Err(format!("{target:?}: the target is host:port"));
        }
        Ok(Self { local, target: target.to_owned(), weight })
    }
}

/// Where a tunnel says what became of a connection it could not carry: one line for its
/// operator ("target not allowed: HOST:PORT"). The binary prints them; a test collects them.
pub type Log = std::sync::Arc<dyn Fn(String) + Send + Sync>;

/// How long the far end waits for a target to take a connection (and for a descriptor to
/// connect with) before it resets the channel.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The near end's session to the far end, opened again when it ends.
///
/// A far end that restarts has forgotten the session, and refuses the connections the near end
/// re-opens to it ("no such session"); a far end that is down refuses them at the TCP level.
/// Either way the session stops, and [`Near::connect`]'s watcher opens a new one, waiting
/// [`REDIAL_FIRST`] at first and twice as long after each failure up to [`REDIAL_MOST`], and
/// logs each step. Channels of the session that stopped end with an error (their connections
/// are reset); a client that comes while there is no session waits up to [`WAIT_FOR_SESSION`]
/// for the next one, and is then reset with a line in the log.
#[derive(Clone, Debug)]
pub struct Near {
    sessions: watch::Receiver<Option<Session>>,
}

/// The first wait before a stopped session is opened again.
pub const REDIAL_FIRST: Duration = Duration::from_millis(250);
/// The longest wait between attempts to open a session again.
pub const REDIAL_MOST: Duration = Duration::from_secs(30);
/// How long a client waits for a session while the near end opens one again.
pub const WAIT_FOR_SESSION: Duration = Duration::from_secs(10);

impl From<Session> for Near {
    /// A session that is not opened again when it stops.
    fn from(session: Session) -> Self {
        let (tx, sessions) = watch::channel(Some(session));
        // The receiver keeps the last value once the sender has gone.
        drop(tx);
        Self { sessions }
    }
}

impl Near {
    /// Opens a session to `peer` (an error now is the caller's to report: a wrong address or
    /// key), then watches it and opens a new one whenever it stops, saying so in `log`.
    pub async fn connect(peer: Peer, config: MuxConfig, log: Log) -> Result<Self, MuxError> {
        let first = Session::connect_to(peer.clone(), config.clone()).await?;
        let (tx, sessions) = watch::channel(Some(first.clone()));
        tokio::spawn(async move {
            let mut session = first;
            loop {
                let why = session.stopped().await;
                if tx.send(None).is_err() {
                    return;
                }
                log(format!("the session with {peer} stopped ({why}); opening a new one"));
                let mut wait = REDIAL_FIRST;
                session = loop {
                    tokio::time::sleep(wait).await;
                    match Session::connect_to(peer.clone(), config.clone()).await {
                        Ok(s) => break s,
                        Err(e) => {
                            wait = (wait * 2).min(REDIAL_MOST);
                            log(format!("cannot open a session with {peer}: {e}; trying again in {wait:?}"));
                        }
                    }
                };
                log(format!("a new session with {peer} is open"));
                if tx.send(Some(session.clone())).is_err() {
                    return;
                }
            }
        });
        Ok(Self { sessions })
    }

    /// The session now, if there is one (none while a new one is being opened).
    pub fn current(&self) -> Option<Session> {
        self.sessions.borrow().clone()
    }

    /// The session now, or the next one within `wait`.
    async fn session(&mut self, wait: Duration) -> Option<Session> {
        let found = tokio::time::timeout(wait, async {
            match self.sessions.wait_for(Option::is_some).await {
                Ok(s) => s.clone(),
                // No watcher (a fixed session): what it holds is all there will be.
                Err(_) => None,
            }
        })
        .await;
        match found {
            Ok(Some(s)) => Some(s),
            Ok(None) => self.current(),
            Err(_) => None,
        }
    }
}

/// How long a tunnel out of descriptors waits before it tries again.
const DESCRIPTOR_WAIT: Duration = Duration::from_millis(10);

/// Whether the process (or the system) has no descriptor left: a wait, not a failure.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Listens on `forward.local`, with the deepest accept backlog the system allows (a burst of
/// clients overflows a short one, and they then wait out SYN retries), and carries each
/// connection over the near end's session (a [`Session`], or a [`Near`] that opens a new one
/// when it stops). A connection the far end refuses (its target is not allowed, refuses or does
/// not answer) is reset, and `log` says why. Out of descriptors, it waits for one (the
/// connections wait in the backlog). Runs until the listener fails.
pub async fn forward(near: impl Into<Near>, forward: Forward, log: Log) -> Result<(), MuxError> {
    let listener = bind(&forward)?;
    forward_on(listener, near, forward, log).await
}

/// Binds `forward.local` as [`forward`] does, so that a caller learns at once that the port is
/// taken, and that the port takes connections once this returns. Needs a tokio runtime.
pub fn bind(forward: &Forward) -> Result<TcpListener, MuxError> {
    listen(forward.local).map_err(|source| MuxError::Io { what: format!("listening on {}", forward.local), source })
}

/// [`forward`] on a listener [`bind`] made.
pub async fn forward_on(
    listener: TcpListener,
    near: impl Into<Near>,
    forward: Forward,
    log: Log,
) -> Result<(), MuxError> {
    let near = near.into();
    loop {
        let (mut tcp, from) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) if out_of_descriptors(&e) => {
                tokio::time::sleep(DESCRIPTOR_WAIT).await;
                continue;
            }
            Err(source) => return Err(MuxError::Io { what: format!("accepting on {}", forward.local), source }),
        };
        let (mut near, forward, log) = (near.clone(), forward.clone(), log.clone());
        tokio::spawn(async move {
            let Some(session) = near.session(WAIT_FOR_SESSION).await else {
                log(format!(
                    "{from} → {}: no session with the far end (it is being opened again): reset",
                    forward.target
                ));
                reset(&tcp);
                return;
            };
            let mut channel = match session.open(forward.weight, true).await {
                Ok(channel) => channel,
                Err(e) => {
                    log(format!("{from} → {}: no channel for it: {e}", forward.target));
                    reset(&tcp);
                    return;
                }
            };
            let name = forward.target.as_bytes();
            let mut header = Vec::with_capacity(2 + name.len());
            header.extend_from_slice(&(name.len() as u16).to_be_bytes());
            header.extend_from_slice(name);
            if channel.send(header.into()).await.is_err() {
                reset(&tcp);
                return;
            }
            match forwarder::carry(&mut tcp, &mut channel).await {
                Ok(()) => {}
                Err(Broke::Channel(MuxError::Reset { reason, .. })) => {
                    log(format!("{from} → {}: the far end reset it: {reason}", forward.target));
                    reset(&tcp);
                }
                Err(Broke::Channel(_)) => reset(&tcp),
                // The client's side failed (it reset or aborted): the far end lets go of the
                // target's connection too.
                Err(Broke::Tcp(_)) => {
                    let _ = channel.reset(format!("the client {from} reset its connection")).await;
                    reset(&tcp);
                }
            }
        });
    }
}

/// Serves a session's channels: connects each to the target its header names, if `allow`
/// (when not empty) lists it. A target not allowed, refusing or not answering within
/// [`CONNECT_TIMEOUT`] is logged here and reset there, with the same sentence, so the client
/// sees a reset and both operators see why.
pub async fn serve(session: Session, allow: Vec<String>, log: Log) {
    while let Some(channel) = session.accept().await {
        let (allow, log) = (allow.clone(), log.clone());
        tokio::spawn(async move {
            let _ = serve_one(channel, &allow, &log).await;
        });
    }
}

async fn serve_one(mut channel: Channel, allow: &[String], log: &Log) -> std::io::Result<()> {
    let len = channel.read_u16().await? as usize;
    let mut name = vec![0u8; len];
    channel.read_exact(&mut name).await?;
    let Ok(target) = String::from_utf8(name) else {
        let _ = channel.reset("the target's name is not UTF-8").await;
        return Ok(());
    };
    let refuse = async |channel: &mut Channel, why: String| {
        log(why.clone());
        let _ = channel.reset(why).await;
    };
    if !allow.is_empty() && !allow.contains(&target) {
        refuse(&mut channel, format!("target not allowed: {target} (not among the listening end's --allow)")).await;
        return Ok(());
    }
    // A descriptor is freed whenever another carried connection ends: a burst that runs this
    // end out waits for one, as a target slow to answer is waited for, rather than refusing.
    let mut failed = None;
    let connect = async {
        loop {
            match TcpStream::connect(&target).await {
                Err(e) if out_of_descriptors(&e) => {
                    failed = Some(e);
                    tokio::time::sleep(DESCRIPTOR_WAIT).await;
                }
                done => return done,
            }
        }
    };
    let connected = tokio::time::timeout(CONNECT_TIMEOUT, connect).await;
    let mut tcp = match connected {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => {
            refuse(&mut channel, format!("cannot connect to {target}: {e}")).await;
            return Ok(());
        }
        Err(_) => {
            let why = match failed {
                Some(e) => format!("cannot connect to {target}: {e}, for {CONNECT_TIMEOUT:?}"),
                None => format!("cannot connect to {target}: no answer in {CONNECT_TIMEOUT:?}"),
            };
            refuse(&mut channel, why).await;
            return Ok(());
        }
    };
    match forwarder::carry(&mut tcp, &mut channel).await {
        Ok(()) => Ok(()),
        // The target's side failed: the client is told with a reset.
        Err(Broke::Tcp(e)) => {
            let _ = channel.reset(format!("the target {target} reset the connection")).await;
            reset(&tcp);
            Err(e)
        }
        Err(Broke::Channel(e)) => {
            reset(&tcp);
            Err(std::io::Error::other(e))
        }
    }
}

/// A listener with the deepest backlog the system allows (`net.core.somaxconn` caps it).
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(u32::MAX)
}

/// Makes the connection's close an RST: the peer's next read or write fails, so it cannot take
/// what it got for all there was.
fn reset(tcp: &TcpStream) {
    let _ = tcp.set_zero_linger();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_parse_and_bad_ones_say_why() {
        let f: Forward = "127.0.0.1:2222=10.0.0.5:22@8".parse().unwrap();
        assert_eq!((f.local.port(), f.target.as_str(), f.weight), (2222, "10.0.0.5:22", 8.0));
        let f: Forward = "127.0.0.1:80=example.org:80".parse().unwrap();
        assert_eq!(f.weight, 1.0);
        for (bad, says) in [
            ("127.0.0.1:80", "LOCAL=TARGET"),
            ("nowhere=a:1", "not an address"),
            ("127.0.0.1:1=host", "host:port"),
            ("127.0.0.1:1=host:1@0", "positive"),
            ("127.0.0.1:1=host:1@x", "weight"),
        ] {
            let e = bad.parse::<Forward>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
