//! What several test files share: measuring how backlogged channels share a session, and an
//! echo server for the tunnels to reach.

use std::time::Duration;

use bytes::Bytes;
use switchyard_mux::{Listener, MuxConfig, Peer, Session};

/// Shares of what the receiver got from backlogged channels of `weights`, between two moments
/// of the run, for a session at `peer` (a TCP port 0 is bound to a free one) run by `config`.
pub(crate) async fn shares(peer: Peer, config: MuxConfig, weights: &[f64]) -> Vec<f64> {
    // Windows large enough that a stall of the credit loop (both ends share two cores here)
    // does not block the heaviest channel: the test is of the scheduler, not of window sizing,
    // which `switchyard bench mux` reports through each channel's blocked turns. Each channel's
    // buffer holds 256 of the session's frames, so that writers descheduled on a loaded machine
    // do not let the heaviest channel run dry: at 4 MiB, once frames grew from 16 to 64 KiB,
    // a CI run beside a benchmark saw the heaviest channel idle 159 turns (its writers had
    // nothing queued) and its share fall to 0.495 against 0.533, as a work-conserving
    // scheduler must when a channel has nothing to send.
    let config = {
        let mut c = config;
        c.recv.window = 16384 * (16 << 10);
        c.send.channel_buffer = 256 * c.send.max_frame;
        c
    };
    let mut listener = Listener::bind_to(peer, config.clone()).await.unwrap();
    let peer = listener.local().clone();
    let n = weights.len();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let _ = tx.send(session.clone());
        while let Some(mut ch) = session.accept().await {
            tokio::spawn(async move { while let Ok(Some(_)) = ch.recv().await {} });
        }
    });
    let session = Session::connect_to(peer, config).await.unwrap();
    let mut channels = Vec::new();
    for w in weights {
        channels.push(session.open(*w, true).await.unwrap());
    }
    let server = rx.await.unwrap();
    let chunk = Bytes::from(vec![7u8; 64 << 10]);
    // Three writers per channel keep its buffer full: the shares are the scheduler's only if every
    // channel always has bytes waiting (one writer alone sometimes let the heaviest run dry).
    let writers: Vec<_> = channels
        .into_iter()
        .map(std::sync::Arc::new)
        .flat_map(|ch| [std::sync::Arc::clone(&ch), std::sync::Arc::clone(&ch), ch])
        .map(|ch| {
            let chunk = chunk.clone();
            tokio::spawn(async move { while ch.send(chunk.clone()).await.is_ok() {} })
        })
        .collect();
    let delivered = |r: &switchyard_mux::SessionReport| -> Vec<u64> {
        let mut v: Vec<(u32, u64)> = r.channels.iter().map(|c| (c.id, c.received.delivered_bytes)).collect();
        v.sort_unstable();
        v.into_iter().map(|(_, b)| b).collect()
    };
    let until = |mb: u64| {
        let server = server.clone();
        async move {
            loop {
                let r = server.report().await.unwrap();
                let d = delivered(&r);
                if d.len() == n && d.iter().sum::<u64>() >= mb << 20 {
                    return d;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    let a = until(16).await;
    let b = until(96).await;
    let r = session.report().await.unwrap();
    eprintln!(
        "idle and blocked turns: {:?}",
        r.channels.iter().map(|c| (c.sent.idle_turns, c.sent.blocked_turns)).collect::<Vec<_>>()
    );
    for w in writers {
        w.abort();
    }
    let diff: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (y - x) as f64).collect();
    let total: f64 = diff.iter().sum();
    diff.iter().map(|d| d / total).collect()
}

/// A TCP echo server on a free loopback port, serving every connection until the test ends.
pub(crate) async fn echo_server() -> std::net::SocketAddr {
    let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = echo.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = echo.accept().await.unwrap();
            tokio::spawn(async move {
                let (mut r, mut w) = s.into_split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// Writes `data` to a new TCP connection to `to`, shuts its sending side, and reads back
/// everything until the far end closes.
pub(crate) async fn round_trip(to: std::net::SocketAddr, data: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(to).await.unwrap();
    let (mut r, mut w) = c.split();
    let (_, back) = tokio::join!(
        async {
            w.write_all(data).await.unwrap();
            w.shutdown().await.unwrap();
        },
        async {
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            back
        }
    );
    back
}
