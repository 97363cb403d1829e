//! Clients at the edges of TCP, over the gateway's own serving loop (`switchyard_gateway::listener`,
//! as `switchyard gateway serve` runs it): a client that sends its request and then shuts its
//! sending side (`shutdown(SHUT_WR)`, as `nc -N` or a script's `curl --no-keepalive` behind a
//! proxy does) gets its whole answer, for a miss, a hit and a body carried through; a client
//! that sends many requests and stops reading holds no more of the gateway than its sockets'
//! buffers and hyper's, whatever it asked for.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::header;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use switchyard_gateway::origin::{self, OriginConfig};

/// An origin: `/slow/N` N bytes after 100 ms, public for an hour (so a miss is still being
/// read when the client's end of sending arrives); `/private/N` N bytes, `no-store` (carried
/// through, not stored). Counts its reads.
async fn origin() -> (SocketAddr, Arc<AtomicU64>) {
    let reads = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .route(
            "/slow/{n}",
            get(|State(r): State<Arc<AtomicU64>>, Path(n): Path<usize>| async move {
                r.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(100)).await;
                ([(header::CACHE_CONTROL, "public, max-age=3600")], "s".repeat(n))
            }),
        )
        .route(
            "/private/{n}",
            get(|State(r): State<Arc<AtomicU64>>, Path(n): Path<usize>| async move {
                r.fetch_add(1, Ordering::SeqCst);
                ([(header::CACHE_CONTROL, "no-store")], "p".repeat(n))
            }),
        )
        .with_state(Arc::clone(&reads));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, reads)
}

/// The gateway in front of `origin`, served as the binary serves it.
async fn gateway(origin: SocketAddr) -> SocketAddr {
    let config = OriginConfig { max_object_size: Some(1 << 20), ..OriginConfig::new(format!("http://{origin}")) };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(switchyard_gateway::listener::serve(
        listener,
        origin::service(config),
        switchyard_gateway::listener::ServeOptions::default(),
        std::future::pending(),
    ));
    addr
}

/// One answer read to the end of the connection: its head (lower case) and its body.
struct Answer {
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn field(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(str::trim))
    }
}

/// Sends `GET path`, shuts the sending side, and reads until the gateway closes; within a
/// bound only a hang exceeds.
async fn half_closed_get(gateway: SocketAddr, path: &str) -> Answer {
    let mut s = TcpStream::connect(gateway).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: gateway\r\n\r\n").as_bytes()).await.unwrap();
    s.shutdown().await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut all))
        .await
        .expect("the gateway neither answered nor closed")
        .unwrap_or_else(|e| panic!("reading the answer to {path}: {e}"));
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| {
        panic!("no whole head in the {} bytes answered to {path}: {:?}", all.len(), String::from_utf8_lossy(&all))
    });
    Answer { head: String::from_utf8_lossy(&all[..end]).to_lowercase(), body: all[end + 4..].to_vec() }
}

/// A miss (answered once the origin's read ends, long after the client's end of sending), a
/// hit and a body carried through all come whole to a client that half-closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_half_closes_after_its_request_gets_the_whole_answer() {
    let (o, reads) = origin().await;
    let g = gateway(o).await;
    for (path, how, n, byte) in [
        ("/slow/3000", "miss", 3000, b's'),
        ("/slow/3000", "hit", 3000, b's'),
        ("/private/3000000", "miss", 3_000_000, b'p'),
    ] {
        let a = half_closed_get(g, path).await;
        assert!(a.head.starts_with("http/1.1 200"), "{path}: {}", a.head);
        assert_eq!(a.field("x-cache"), Some(how), "{path}: {}", a.head);
        assert_eq!(a.field("content-length"), Some(n.to_string().as_str()), "{path}: {}", a.head);
        assert_eq!(a.body.len(), n, "{path}: the body came short");
        if byte == b'p' {
            assert_eq!(a.field("x-cache-store"), Some("no (no-store)"), "{path}: carried through, not stored");
        }
        assert!(a.body.iter().all(|b| *b == byte), "{path}: the body is not the origin's");
    }
    assert_eq!(reads.load(Ordering::SeqCst), 2, "the hit was not read again");
}

/// A client that sends 1,000 requests for a stored 64 KiB response (62.5 MiB of answers) at
/// once and reads none: the gateway answers only as many as the sockets' buffers and hyper's
/// write buffer hold, then waits; once the client reads, every answer comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_holds_only_the_sockets_and_hypers_buffers() {
    const SIZE: u64 = 64 << 10;
    const ASKED: u64 = 1000;
    let (o, _) = origin().await;
    let g = gateway(o).await;
    let client = reqwest::Client::new();
    let warm = client.get(format!("http://{g}/slow/{SIZE}")).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(warm.len() as u64, SIZE);
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 << 10).unwrap();
    let s = socket.connect(g).await.unwrap();
    let (mut rd, mut wr) = s.into_split();
    let requests = format!("GET /slow/{SIZE} HTTP/1.1\r\nHost: gateway\r\n\r\n").repeat(ASKED as usize);
    let writer = tokio::spawn(async move {
        wr.write_all(requests.as_bytes()).await.unwrap();
        wr.shutdown().await.unwrap();
    });
    let hits = || async {
        let text = client.get(format!("http://{g}/metrics")).send().await.unwrap().text().await.unwrap();
        text.lines().find_map(|l| l.strip_prefix("gateway_hits_total ")).unwrap().trim().parse::<f64>().unwrap() as u64
    };
    // Until the gateway has answered all it will (no more for half a second).
    let mut last = u64::MAX;
    for _ in 0..120 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = hits().await;
        if now == last {
            break;
        }
        last = now;
    }
    let answered = hits().await;
    // What may be held for this client: the gateway's socket's send buffer at its largest
    // (tcp_wmem's maximum), the client's receive buffer (the kernel doubles what is asked
    // for), and hyper's write buffer (about 400 KB), with room for one answer in the making.
    let wmem_max: u64 = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem")
        .unwrap()
        .split_whitespace()
        .nth(2)
        .unwrap()
        .parse()
        .unwrap();
    let bound = wmem_max + 2 * (64 << 10) + (1 << 20) + SIZE;
    println!("answered {answered} of {ASKED} requests of {SIZE} bytes to a client that read none (bound {bound})");
    assert!(
        answered * SIZE <= bound,
        "answered {answered} requests of {SIZE} bytes ({} KiB) to a client that read none: more than the {} KiB of buffers",
        (answered * SIZE) >> 10,
        bound >> 10
    );
    // Reading again, the client gets every answer, and the connection ends after the last
    // (the client shut its sending side after its requests).
    let (mut seen, mut carry) = (0u64, Vec::new());
    let mut buf = vec![0u8; 1 << 20];
    let mark: &[u8] = b"\r\nx-cache: hit\r\n";
    loop {
        let n = tokio::time::timeout(Duration::from_secs(30), rd.read(&mut buf)).await.expect("hung").unwrap();
        if n == 0 {
            break;
        }
        carry.extend_from_slice(&buf[..n]);
        seen += carry.windows(mark.len()).filter(|w| *w == mark).count() as u64;
        carry.drain(..carry.len().saturating_sub(mark.len() - 1));
    }
    writer.await.unwrap();
    assert_eq!(seen, ASKED, "every request was answered from the store");
}
