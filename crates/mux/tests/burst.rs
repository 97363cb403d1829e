//! A burst of clients through one tunnel forward, all at once, each fetching a body from a
//! local server: every response must arrive whole, or the client must see an error (a reset);
//! never a clean end with bytes missing. Among them, every fifth client half-closes after its
//! request (`shutdown(SHUT_WR)`, then reads) and every tenth aborts mid-transfer (a reset
//! after the first bytes). Afterwards neither end of the tunnel may hold a channel: finished,
//! half-closed and aborted ones alike are forgotten. The short burst runs in CI; the long one
//! (`cargo test -p switchyard-mux --test burst -- --ignored --nocapture`) takes
//! `SWITCHYARD_BURST` clients (10,000 by default).

mod web;

use std::net::SocketAddr;
use std::time::Duration;

use switchyard_mux::tunnel::{self, Forward};
use switchyard_mux::{Listener, MuxConfig, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY: usize = 100_000;

fn body() -> Vec<u8> {
    (0..BODY).map(|i| (i * 31 % 251) as u8).collect()
}

#[derive(Debug, Default)]
struct Outcome {
    whole: usize,
    /// A clean end with part of the body: data loss.
    short: usize,
    /// An error the client saw (reset): a visible refusal.
    refused: usize,
    timed_out: usize,
    /// Clients that aborted as planned, after the first bytes.
    aborted: usize,
    /// The longest a client took.
    slowest: Duration,
}

/// How a client behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Sends its request and reads to the end.
    Plain,
    /// Shuts its sending side after the request, then reads to the end.
    HalfClose,
    /// Resets its connection once the first bytes of the answer arrive.
    Abort,
}

fn kind(i: usize) -> Kind {
    match i % 10 {
        0 => Kind::Abort,
        5 => Kind::HalfClose,
        _ => Kind::Plain,
    }
}

async fn client(addr: SocketAddr, kind: Kind, limit: Duration) -> Result<Vec<u8>, &'static str> {
    let go = async {
        let mut tcp = TcpStream::connect(addr).await.map_err(|_| "refused")?;
        tcp.write_all(b"GET /body HTTP/1.0\r\n\r\n").await.map_err(|_| "refused")?;
        if kind == Kind::HalfClose {
            tcp.shutdown().await.map_err(|_| "refused")?;
        }
        let mut got = Vec::new();
        if kind == Kind::Abort {
            let mut first = [0u8; 1000];
            tcp.read_exact(&mut first).await.map_err(|_| "refused")?;
            tcp.set_zero_linger().map_err(|_| "refused")?;
            return Err("aborted");
        }
        tcp.read_to_end(&mut got).await.map_err(|_| "refused")?;
        Ok(got)
    };
    tokio::time::timeout(limit, go).await.map_err(|_| "timed out")?
}

/// The same burst straight to the server: the baseline under the same limit.
async fn direct(clients: usize, limit: Duration) -> Outcome {
    let target = web::web_server(body()).await;
    run_clients(target, clients, limit).await
}

/// The burst through a tunnel; then waits until both ends have forgotten every channel, and
/// fails if they have not within 10 s.
async fn burst(clients: usize, limit: Duration) -> Outcome {
    let target = web::web_server(body()).await;
    let config = MuxConfig { key: b"burst".to_vec(), ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let far = listener.local_addr();
    let (far_session, far_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let _ = far_session.send(session.clone());
        tunnel::serve(session, Vec::new(), std::sync::Arc::new(|_| {})).await;
    });
    let session = Session::connect(far, config).await.unwrap();
    let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: target.to_string(), weight: 1.0 };
    let listener = tunnel::bind(&forward).unwrap();
    let local = listener.local_addr().unwrap();
    tokio::spawn(tunnel::forward_on(listener, session.clone(), forward, std::sync::Arc::new(|_| {})));
    let outcome = run_clients(local, clients, limit).await;
    let far_session = far_rx.await.unwrap();
    let left = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let (near, far) = (session.report().await.unwrap(), far_session.report().await.unwrap());
            if near.channels.is_empty() && far.channels.is_empty() {
                return (near, far);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let (near, far) = match left {
        Ok(both) => both,
        Err(_) => {
            let (near, far) = (session.report().await.unwrap(), far_session.report().await.unwrap());
            panic!(
                "channels left 10 s after the burst: {} here, {} at the far end",
                near.channels.len(),
                far.channels.len()
            );
        }
    };
    eprintln!(
        "channels forgotten: {} here, {} at the far end; reset: {} here, {} there",
        near.retired.0, far.retired.0, near.reset, far.reset
    );
    outcome
}

async fn run_clients(local: SocketAddr, clients: usize, limit: Duration) -> Outcome {
    let want = body();
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            tokio::spawn(async move {
                let began = std::time::Instant::now();
                let result = client(local, kind(i), limit).await;
                (began.elapsed(), result)
            })
        })
        .collect();
    let mut outcome = Outcome::default();
    for t in tasks {
        let (took, result) = t.await.unwrap();
        outcome.slowest = outcome.slowest.max(took);
        match result {
            Ok(got) if got == want => outcome.whole += 1,
            Ok(_) => outcome.short += 1,
            Err("timed out") => outcome.timed_out += 1,
            Err("aborted") => outcome.aborted += 1,
            Err(_) => outcome.refused += 1,
        }
    }
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_a_thousand_clients_loses_nothing() {
    let o = burst(1000, Duration::from_secs(30)).await;
    eprintln!("{o:?}");
    assert_eq!((o.short, o.timed_out, o.refused), (0, 0, 0), "{o:?}");
    assert_eq!((o.whole, o.aborted), (900, 100), "{o:?}");
}

#[ignore = "long: ten thousand clients at once"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_ten_thousand_clients_loses_nothing() {
    let clients = std::env::var("SWITCHYARD_BURST").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let started = std::time::Instant::now();
    let straight = direct(clients, Duration::from_secs(30)).await;
    eprintln!("{clients} clients straight to the server in {:.1} s: {straight:?}", started.elapsed().as_secs_f64());
    let started = std::time::Instant::now();
    let o = burst(clients, Duration::from_secs(30)).await;
    eprintln!("{clients} clients through the tunnel in {:.1} s: {o:?}", started.elapsed().as_secs_f64());
    assert_eq!((o.short, o.timed_out), (0, 0), "{o:?}");
    assert_eq!(o.whole + o.refused + o.aborted, clients, "{o:?}");
}
