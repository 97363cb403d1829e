//! A client of the tunnel that asks for a large answer and then stops reading: the listening
//! end reads the target only while its session buffer (`MuxConfig::session_buffer`) has room,
//! so what it holds stays within the budget, the other clients' answers keep flowing meanwhile,
//! and once the client reads it gets every byte. Without the budget, the listening end pulled
//! the answer out of the target as fast as the peer's credit and the channel's own buffer
//! (1 MiB) let it, whatever the client took.

use std::net::SocketAddr;
use std::time::Duration;

use switchyard_mux::tunnel::{self, Forward, Log};
use switchyard_mux::{Listener, MuxConfig, Session, SessionReport};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The session buffer at both ends: small beside what a channel may hold on its own (1 MiB of
/// buffer and 512 KiB of credit), so that a session without it passes it at once.
const BUDGET: u64 = 256 << 10;
/// The answer the client that stops reading asks for: more than its far side's kernel buffers
/// and credit take (about 5 MB here), so that the listening end is left holding its share.
const LARGE: usize = 16 << 20;
/// The other clients' answers.
const SMALL: usize = 1 << 20;
const OTHERS: usize = 6;

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed * 13) % 251) as u8).collect()
}

/// A target that reads a line `SEED LEN` and answers `pattern(SEED, LEN)`, then closes.
async fn target() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut tcp = tokio::io::BufReader::new(tcp);
                let mut line = String::new();
                tcp.read_line(&mut line).await.unwrap();
                let (seed, len) = line.trim().split_once(' ').unwrap();
                let answer = pattern(seed.parse().unwrap(), len.parse().unwrap());
                tcp.get_mut().write_all(&answer).await.unwrap();
                tcp.get_mut().shutdown().await.unwrap();
            });
        }
    });
    addr
}

/// Both ends of a tunnel in this process, with a forward to `target`; the forward's address
/// and the listening end's session.
async fn tunnel_to(target: SocketAddr) -> (SocketAddr, Session) {
    let log: Log = std::sync::Arc::new(|line| eprintln!("{line}"));
    let config = MuxConfig { key: b"a session buffer".to_vec(), session_buffer: BUDGET, ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let far = listener.local_addr();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let far_log = log.clone();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let _ = tx.send(session.clone());
        tunnel::serve(session, Vec::new(), far_log).await;
    });
    let session = Session::connect(far, config).await.unwrap();
    let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: target.to_string(), weight: 1.0 };
    let near = tunnel::bind(&forward).unwrap();
    let local = near.local_addr().unwrap();
    tokio::spawn(tunnel::forward_on(near, session, forward, log));
    (local, rx.await.unwrap())
}

/// Asks for `pattern(seed, len)` through the tunnel and reads all of it.
async fn fetch(local: SocketAddr, seed: usize, len: usize) -> Vec<u8> {
    let mut tcp = TcpStream::connect(local).await.unwrap();
    tcp.write_all(format!("{seed} {len}\n").as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tcp.read_to_end(&mut got).await.unwrap();
    got
}

async fn report(session: &Session) -> SessionReport {
    session.report().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_holds_the_listening_end_to_its_budget_and_the_others_flow() {
    let (local, far) = tunnel_to(target().await).await;
    // The client that stops reading, with a small receive buffer so that its kernel takes
    // little of the answer.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(local).await.unwrap();
    stalled.write_all(format!("0 {LARGE}\n").as_bytes()).await.unwrap();
    // Until the listening end holds what it may of the answer and its reader waits for room
    // (or, without a budget, holds more than the budget).
    let held = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            let r = report(&far).await;
            if r.waiting_for_buffer >= 1 || r.max_buffered > BUDGET {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the listening end never filled its share of the budget: is the client reading?");
    eprintln!("listening end, stalled: {} bytes held, {} at most", held.buffered, held.max_buffered);
    // The others, meanwhile: every answer whole.
    let others: Vec<_> = (1..=OTHERS).map(|k| tokio::spawn(fetch(local, k, SMALL))).collect();
    for (k, other) in (1..=OTHERS).zip(others) {
        let got = tokio::time::timeout(Duration::from_secs(120), other)
            .await
            .expect("another client's answer stopped while one client did not read")
            .unwrap();
        assert!(got == pattern(k, SMALL), "client {k}: {} bytes of {SMALL}, or other bytes", got.len());
    }
    let during = report(&far).await;
    eprintln!(
        "listening end: {} bytes held now, {} at most, {} waits for room; budget {BUDGET}",
        during.buffered, during.max_buffered, during.buffer_waits
    );
    assert!(during.max_buffered <= BUDGET, "the listening end held {} bytes, over {BUDGET}", during.max_buffered);
    assert!(during.buffered > 0, "the client that stops reading holds nothing at the listening end: did it stall?");
    // Now the client reads: every byte, in order.
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), stalled.read_to_end(&mut got))
        .await
        .expect("the client that read at last never got to the end")
        .unwrap();
    assert!(got == pattern(0, LARGE), "{} bytes of {LARGE}, or other bytes", got.len());
    let after = report(&far).await;
    assert!(after.max_buffered <= BUDGET, "the listening end held {} bytes, over {BUDGET}", after.max_buffered);
    assert!(after.buffer_waits > 0, "no reader ever waited for room");
}
