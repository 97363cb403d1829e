//! What open channels cost in memory: a session on loopback with both its ends in this process,
//! `SWITCHYARD_CHANNELS` channels (10,000 by default) opened and each carrying a request-sized
//! write both ways, held open, then the process's resident memory read from
//! `/proc/self/status` before and after. A measurement, not a check:
//! `cargo test --release -p switchyard-mux --test memory -- --ignored --nocapture`.
//!
//! The same for connections carried by the tunnel (both its ends, the clients and the target
//! in this process): `SWITCHYARD_TUNNEL_CONNECTIONS` (4,000 by default: each holds four
//! descriptors here, and a process may hold 20,000 on the machines this runs on), each a
//! request and an answer, then held idle.

use std::time::Duration;

use bytes::Bytes;
use switchyard_mux::tunnel::{self, Forward};
use switchyard_mux::{Listener, MuxConfig, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The process's resident memory, in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb << 10)
}

#[ignore = "a measurement, not a check"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_of_open_channels() {
    let n: usize = std::env::var("SWITCHYARD_CHANNELS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let config = MuxConfig { key: b"memory".to_vec(), ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let addr = listener.local_addr();
    let (held_tx, mut held_rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        while let Some(mut ch) = session.accept().await {
            let held = held_tx.clone();
            tokio::spawn(async move {
                // The request, then an answer; the channel is then held open.
                let _ = ch.recv().await;
                let _ = ch.send(Bytes::from_static(&[7u8; 200])).await;
                let _ = held.send(ch);
            });
        }
    });
    let session = Session::connect(addr, config).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = resident();
    let mut channels = Vec::with_capacity(n);
    for _ in 0..n {
        let ch = session.open(1.0, true).await.unwrap();
        ch.send(Bytes::from_static(&[1u8; 100])).await.unwrap();
        channels.push(ch);
    }
    let mut far = Vec::with_capacity(n);
    for ch in &mut channels {
        let _ = ch.recv().await.unwrap();
        far.push(held_rx.recv().await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = resident();
    let report = session.report().await.unwrap();
    say("channels open, both ends in one process", "a channel (both ends)", n, before, after, report.channels.len());
    assert_eq!(report.channels.len(), n);
}

#[ignore = "a measurement, not a check"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_of_idle_tunnel_connections() {
    let n: usize = std::env::var("SWITCHYARD_TUNNEL_CONNECTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(4_000);
    // The target: reads a 100-byte request, answers 200 bytes, then holds the connection.
    let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target_addr = target.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = target.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 100];
                if tcp.read_exact(&mut request).await.is_ok() && tcp.write_all(&[7u8; 200]).await.is_ok() {
                    let _ = tcp.read(&mut request).await;
                }
            });
        }
    });
    let config = MuxConfig { key: b"memory".to_vec(), ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let addr = listener.local_addr();
    let log: tunnel::Log = std::sync::Arc::new(|line| eprintln!("{line}"));
    let far_log = log.clone();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        tunnel::serve(session, Vec::new(), far_log).await;
    });
    let session = Session::connect(addr, config).await.unwrap();
    let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: target_addr.to_string(), weight: 1.0 };
    let near = tunnel::bind(&forward).unwrap();
    let local = near.local_addr().unwrap();
    tokio::spawn(tunnel::forward_on(near, session.clone(), forward, log));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = resident();
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        let mut tcp = TcpStream::connect(local).await.unwrap();
        tcp.write_all(&[1u8; 100]).await.unwrap();
        let mut answer = [0u8; 200];
        tcp.read_exact(&mut answer).await.unwrap();
        clients.push(tcp);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = resident();
    let report = session.report().await.unwrap();
    say(
        "connections through the tunnel, idle, both ends, clients and target in one process",
        "a connection",
        n,
        before,
        after,
        report.channels.len(),
    );
    assert_eq!(report.channels.len(), n);
}

/// One measurement's line: what was open, the resident memory before and after, and the growth
/// per unit (`per`), beside the channels the session reports live.
fn say(what: &str, per: &str, n: usize, before: u64, after: u64, live: usize) {
    let grew = after.saturating_sub(before);
    println!(
        "{n} {what}: resident {:.1} MiB → {:.1} MiB, {:.1} MiB more, {:.0} bytes {per}; the session reports {live} live channels",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        grew as f64 / 1048576.0,
        grew as f64 / n as f64,
    );
}
