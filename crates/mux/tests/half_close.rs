//! The tunnel passes each side's end on after its last byte, and keeps the other way open: a
//! client's `shutdown(SHUT_WR)` reaches the target as the end of the request, after every byte
//! of it, and the target can still answer; a target that speaks first and half-closes is read
//! to its end by the client, which can still answer it. Each request and answer ends with a
//! last byte written on its own after a pause (a read of its own at the tunnel), and is
//! compared byte for byte.

use std::net::SocketAddr;
use std::time::Duration;

use switchyard_mux::tunnel::{self, Forward, Log};
use switchyard_mux::{Listener, MuxConfig, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const CONNECTIONS: usize = 8;

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed * 13) % 251) as u8).collect()
}

/// What the target answers to a whole request: its length, then the request backwards.
fn answer(request: &[u8]) -> Vec<u8> {
    let mut a = (request.len() as u64).to_be_bytes().to_vec();
    a.extend(request.iter().rev());
    a
}

/// Writes `data` in one write, then its last byte after a pause, then half-closes.
async fn write_then_last_byte(tcp: &mut TcpStream, data: &[u8]) {
    let (most, last) = data.split_at(data.len() - 1);
    tcp.write_all(most).await.unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    tcp.write_all(last).await.unwrap();
    tcp.shutdown().await.unwrap();
}

/// Both ends of a tunnel in this process, with a forward to `target`.
async fn tunnel_to(target: SocketAddr) -> SocketAddr {
    let log: Log = std::sync::Arc::new(|line| eprintln!("{line}"));
    let config = MuxConfig { key: b"half-close".to_vec(), ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let far = listener.local_addr();
    let far_log = log.clone();
    tokio::spawn(async move {
        while let Some(session) = listener.accept().await {
            tokio::spawn(tunnel::serve(session, Vec::new(), far_log.clone()));
        }
    });
    let session = Session::connect(far, config).await.unwrap();
    let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: target.to_string(), weight: 1.0 };
    let near = tunnel::bind(&forward).unwrap();
    let local = near.local_addr().unwrap();
    tokio::spawn(tunnel::forward_on(near, session, forward, log));
    local
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_half_close_reaches_the_target_after_its_last_byte_and_the_answer_comes_back() {
    // The target answers only once it has read the request to its end.
    let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target_addr = target.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = target.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                tcp.read_to_end(&mut request).await.unwrap();
                tcp.write_all(&answer(&request)).await.unwrap();
                tcp.shutdown().await.unwrap();
            });
        }
    });
    let local = tunnel_to(target_addr).await;
    // Sizes that take either path of the forwarder's reads: small ones copied, large ones not.
    let sizes = [1, 2, 1000, 40_000, 70_000, 300_000, 1_000_001, 3_000_000];
    let clients = sizes.iter().take(CONNECTIONS).enumerate().map(|(k, &len)| {
        tokio::spawn(async move {
            let request = pattern(k, len);
            let mut tcp = TcpStream::connect(local).await.unwrap();
            write_then_last_byte(&mut tcp, &request).await;
            let mut got = Vec::new();
            tcp.read_to_end(&mut got).await.unwrap();
            (len, got == answer(&request), got.len())
        })
    });
    let outcomes = tokio::time::timeout(Duration::from_secs(60), futures_join(clients.collect()))
        .await
        .expect("every client's answer comes, and ends, within 60 s: a half-close lost leaves the target waiting");
    for (len, whole, got) in outcomes {
        assert!(whole, "a request of {len} bytes: the answer is {got} bytes, not the whole of {}", len + 8);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_targets_half_close_reaches_the_client_after_its_last_byte_and_the_client_can_still_answer() {
    // The target speaks first, half-closes, then reads the client's answer to its end.
    let target = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let target_addr = target.local_addr().unwrap();
    let (heard_tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut k = 0;
        while let Ok((mut tcp, _)) = target.accept().await {
            let heard = heard_tx.clone();
            k += 1;
            tokio::spawn(async move {
                let mut first = [0u8; 8];
                tcp.read_exact(&mut first).await.unwrap();
                let len = u64::from_be_bytes(first) as usize;
                write_then_last_byte(&mut tcp, &pattern(k, len)).await;
                let mut reply = Vec::new();
                tcp.read_to_end(&mut reply).await.unwrap();
                let _ = heard.send((reply == answer(&pattern(k, len)), reply.len(), len));
            });
        }
    });
    let local = tunnel_to(target_addr).await;
    let sizes = [1, 3, 1000, 40_000, 70_000, 300_000, 1_000_001, 3_000_000];
    let clients = sizes.iter().take(CONNECTIONS).map(|&len| {
        tokio::spawn(async move {
            let mut tcp = TcpStream::connect(local).await.unwrap();
            // How much the target is to say; the client then says nothing more until its end.
            tcp.write_all(&(len as u64).to_be_bytes()).await.unwrap();
            let mut said = Vec::new();
            tcp.read_to_end(&mut said).await.unwrap();
            assert_eq!(said.len(), len, "the target's words before its half-close");
            write_then_last_byte(&mut tcp, &answer(&said)).await;
            // The target's close follows its reading to the end.
            let mut rest = Vec::new();
            tcp.read_to_end(&mut rest).await.unwrap();
            rest.len()
        })
    });
    let rests = tokio::time::timeout(Duration::from_secs(60), futures_join(clients.collect()))
        .await
        .expect("every target's words come, and end, within 60 s: a half-close lost leaves the client waiting");
    assert!(rests.iter().all(|&r| r == 0), "{rests:?}");
    for _ in 0..CONNECTIONS {
        let (whole, got, len) = heard.recv().await.unwrap();
        assert!(whole, "the target said {len} bytes and heard back {got}, not the whole {}", len + 8);
    }
}

async fn futures_join<T>(tasks: Vec<tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}
