//! Carrying local TCP ports across a session: each TCP connection accepted on a forwarded port
//! becomes one channel, with the forward's weight.
//!
//! A channel opens with a short header naming where the far end should connect: a big-endian
//! `u16` length, then `host:port` in UTF-8. The far end connects there (if its allow list lets
//! it) and copies bytes both ways until each side closes.
//!
//! A channel that is cut off (its session stopped before the peer's close, [`MuxError::Cut`])
//! resets its TCP connection instead of closing it: a closed connection says "that was all",
//! and a program at either end would take part of a transfer for the whole of it.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::{Channel, MuxError, Session};

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

/// Listens on `forward.local` and carries each connection over `session`. Runs until the
/// listener fails.
pub async fn forward(session: Session, forward: Forward) -> Result<(), MuxError> {
    let listener = TcpListener::bind(forward.local)
        .await
        .map_err(|source| MuxError::Io { what: format!("listening on {}", forward.local), source })?;
    loop {
        let (mut tcp, _) = listener
            .accept()
            .await
            .map_err(|source| MuxError::Io { what: format!("accepting on {}", forward.local), source })?;
        let (session, forward) = (session.clone(), forward.clone());
        tokio::spawn(async move {
            let Ok(mut channel) = session.open(forward.weight, true).await else { return };
            let name = forward.target.as_bytes();
            let mut header = Vec::with_capacity(2 + name.len());
            header.extend_from_slice(&(name.len() as u16).to_be_bytes());
            header.extend_from_slice(name);
            if channel.write_all(&header).await.is_err() {
                return;
            }
            if tokio::io::copy_bidirectional(&mut tcp, &mut channel).await.is_err() {
                reset(&tcp);
            }
        });
    }
}

/// Serves a session's channels: connects each to the target its header names, if `allow`
/// (when not empty) lists it.
pub async fn serve(session: Session, allow: Vec<String>) {
    while let Some(channel) = session.accept().await {
        let allow = allow.clone();
        tokio::spawn(async move {
            let _ = serve_one(channel, &allow).await;
        });
    }
}

async fn serve_one(mut channel: Channel, allow: &[String]) -> std::io::Result<()> {
    let len = channel.read_u16().await? as usize;
    let mut name = vec![0u8; len];
    channel.read_exact(&mut name).await?;
    let target = String::from_utf8(name).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    if !allow.is_empty() && !allow.contains(&target) {
        // Not ours to reach: the channel closes, and the client's connection with it.
        channel.shutdown().await?;
        return Ok(());
    }
    let mut tcp = TcpStream::connect(&target).await?;
    if let Err(e) = tokio::io::copy_bidirectional(&mut channel, &mut tcp).await {
        reset(&tcp);
        return Err(e);
    }
    Ok(())
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
