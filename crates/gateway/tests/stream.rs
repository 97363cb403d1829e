//! Bodies the gateway does not store go through it as streams (issue 38): a response larger
//! than `--max-object-size` and a request body are carried chunk by chunk, so memory in flight
//! stays a few MB whatever their size; a client that stops reading holds the origin back; a
//! client that leaves ends the origin's read; an origin that dies mid-body never gives a clean
//! short answer and nothing of it is stored; coalesced readers of a stored response still make
//! one origin read.
//!
//! The test origin makes its bodies lazily, 64 KiB at a time, and each 8-byte word of a body
//! is its own index (little-endian), so a reader checks every byte without holding the body.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{any, get};
use bytes::Bytes;
use http_body::Frame;
use switchyard_gateway::memory;
use switchyard_gateway::origin::{self, OriginConfig};

const MIB: u64 = 1 << 20;

/// What the origin did: bytes of bodies it handed to its connections, reads it answered,
/// whether a reader dropped a body it was making, request bytes it checked.
#[derive(Default)]
struct Origin {
    sent: AtomicU64,
    reads: AtomicU64,
    dropped: AtomicBool,
    received: AtomicU64,
}

/// A body from a channel (at most one chunk waiting in it): the sender feels the reader's pace.
struct Channel(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for Channel {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx).map(|c| c.map(|c| Ok(Frame::data(c))))
    }
}

/// `n` bytes of words (n a multiple of 8), made lazily; `o` counts what went out.
fn words(n: u64, o: Option<Arc<Origin>>) -> Channel {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        let mut at = 0u64;
        while at < n {
            let len = (n - at).min(64 << 10);
            if tx.send(piece(at, len)).await.is_err() {
                if let Some(o) = &o {
                    o.dropped.store(true, Ordering::SeqCst);
                }
                return;
            }
            at += len;
            if let Some(o) = &o {
                o.sent.fetch_add(len, Ordering::SeqCst);
            }
        }
    });
    Channel(rx)
}

/// The words from byte `at` on, `len` bytes of them (both multiples of 8).
fn piece(at: u64, len: u64) -> Bytes {
    let mut chunk = Vec::with_capacity(len as usize);
    for w in at / 8..(at + len) / 8 {
        chunk.extend_from_slice(&w.to_le_bytes());
    }
    Bytes::from(chunk)
}

/// Checks a body of words as it comes.
#[derive(Default)]
struct Checker {
    next: u64,
    partial: Vec<u8>,
}

impl Checker {
    fn take(&mut self, chunk: &[u8]) {
        self.partial.extend_from_slice(chunk);
        let whole = self.partial.len() / 8 * 8;
        for w in self.partial[..whole].chunks_exact(8) {
            let got = u64::from_le_bytes(w.try_into().unwrap());
            assert_eq!(got, self.next, "word {} of the body is wrong", self.next);
            self.next += 1;
        }
        self.partial.drain(..whole);
    }

    fn len(&self) -> u64 {
        self.next * 8 + self.partial.len() as u64
    }
}

/// The origin: `/big/N` N bytes with their length, `/chunked/N` without it, both public for
/// an hour; `/private/N` with its length, not to be stored; `PUT /up` checks the words it is
/// sent and says how many bytes came.
async fn origin() -> (SocketAddr, Arc<Origin>) {
    let o = Arc::new(Origin::default());
    let body = |o: Arc<Origin>, n: u64, length: bool, cc: &'static str| {
        o.reads.fetch_add(1, Ordering::SeqCst);
        let mut r = Response::new(Body::new(words(n, Some(o))));
        r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(cc));
        if length {
            r.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        r
    };
    let app = Router::new()
        .route(
            "/big/{n}",
            get(move |State(o): State<Arc<Origin>>, Path(n): Path<u64>, h: axum::http::HeaderMap| async move {
                // One range of whole words, as `bytes=A-B`.
                let range = h.get(header::RANGE).and_then(|r| {
                    let (a, b) = r.to_str().ok()?.strip_prefix("bytes=")?.split_once('-')?;
                    Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?))
                });
                match range {
                    Some((a, b)) => {
                        o.reads.fetch_add(1, Ordering::SeqCst);
                        let mut r = Response::new(Body::from(piece(a, b + 1 - a)));
                        *r.status_mut() = StatusCode::PARTIAL_CONTENT;
                        let range = HeaderValue::from_str(&format!("bytes {a}-{b}/{n}")).unwrap();
                        r.headers_mut().insert(header::CONTENT_RANGE, range);
                        r
                    }
                    None => body(o, n, true, "public, max-age=3600"),
                }
            }),
        )
        .route(
            "/chunked/{n}",
            get(move |State(o): State<Arc<Origin>>, Path(n): Path<u64>| async move {
                body(o, n, false, "public, max-age=3600")
            }),
        )
        .route(
            "/private/{n}",
            get(move |State(o): State<Arc<Origin>>, Path(n): Path<u64>| async move { body(o, n, true, "no-store") }),
        )
        .route(
            "/up",
            any(|State(o): State<Arc<Origin>>, request: Request| async move {
                let mut body = request.into_body();
                let mut check = Checker::default();
                while let Some(chunk) = std::future::poll_fn(|cx| {
                    use http_body::Body as _;
                    Pin::new(&mut body).poll_frame(cx)
                })
                .await
                {
                    let Ok(data) = chunk.map(|f| f.into_data()) else {
                        return (StatusCode::INTERNAL_SERVER_ERROR, "cut".to_string());
                    };
                    let Ok(data) = data else { continue };
                    check.take(&data);
                    o.received.store(check.len(), Ordering::SeqCst);
                }
                (StatusCode::OK, check.len().to_string())
            }),
        )
        .with_state(Arc::clone(&o));
    (serve(app).await, o)
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A gateway storing at most 1 MiB per response, in 16 MiB.
async fn gateway(origin: SocketAddr) -> SocketAddr {
    let config = OriginConfig {
        max_memory: 16 * MIB,
        max_object_size: Some(MIB),
        ..OriginConfig::new(format!("http://{origin}"))
    };
    serve(origin::router(config)).await
}

/// A metric's value from `/metrics`, if it is there.
async fn metric(client: &reqwest::Client, gateway: SocketAddr, name: &str) -> Option<u64> {
    let text = client.get(format!("http://{gateway}/metrics")).send().await.unwrap().text().await.unwrap();
    let line = text.lines().find(|l| l.split(' ').next() == Some(name))?;
    Some(line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
}

/// The most the gateway held in flight (bodies buffered to be stored plus bodies streamed),
/// and the process's resident memory at its peak, sampled until `stop` is set.
fn sample(gateway: SocketAddr, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<(Option<u64>, u64)> {
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        let (mut held, mut rss) = (None::<u64>, 0);
        while !stop.load(Ordering::SeqCst) {
            let buffered = metric(&client, gateway, "gateway_buffered_bytes").await;
            let streamed = metric(&client, gateway, "gateway_streamed_bytes").await;
            if let (Some(b), Some(s)) = (buffered, streamed) {
                held = Some(held.unwrap_or(0).max(b + s));
            }
            rss = rss.max(memory::resident().unwrap());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (held, rss)
    })
}

/// A GET read whole and checked word by word: its status, `X-Cache-Store`, `Content-Length`,
/// and the bytes read.
async fn download(client: &reqwest::Client, url: String) -> (u16, Option<String>, Option<u64>, u64) {
    let mut r = tokio::time::timeout(Duration::from_secs(60), client.get(url).send()).await.expect("hung").unwrap();
    let store = r.headers().get("x-cache-store").map(|v| v.to_str().unwrap().to_string());
    let length = r.headers().get(header::CONTENT_LENGTH).map(|v| v.to_str().unwrap().parse().unwrap());
    let status = r.status().as_u16();
    let mut check = Checker::default();
    while let Some(c) = tokio::time::timeout(Duration::from_secs(60), r.chunk()).await.expect("hung").unwrap() {
        check.take(&c);
    }
    (status, store, length, check.len())
}

/// A 256 MiB response over the 1 MiB object bound comes through whole and exact, with its
/// length, while the gateway holds at most a few MB of it; so does one of 24 MiB whose length
/// the origin does not say (buffered up to the bound, then streamed on without being stored).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_object_bound_streams_through_whole_in_a_few_mb() {
    let (o, _) = origin().await;
    let g = gateway(o).await;
    let client = reqwest::Client::new();
    let before = memory::resident().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(g, Arc::clone(&stop));
    let n = 256 * MIB;
    let (status, store, length, read) = download(&client, format!("http://{g}/big/{n}")).await;
    assert_eq!((status, read), (200, n), "the whole body, every word in place");
    assert_eq!(length, Some(n), "its length is passed on");
    assert_eq!(store.as_deref(), Some("no (larger than --max-object-size)"));
    let n = 24 * MIB;
    let (status, store, _, read) = download(&client, format!("http://{g}/chunked/{n}")).await;
    assert_eq!((status, read), (200, n), "the whole body of unknown length");
    assert_eq!(store.as_deref(), Some("no (larger than --max-object-size)"));
    let n = 8 * MIB;
    let (status, store, _, read) = download(&client, format!("http://{g}/private/{n}")).await;
    assert_eq!((status, read), (200, n), "the whole body of a response not to be stored");
    assert!(store.is_some_and(|s| s.contains("no-store")));
    stop.store(true, Ordering::SeqCst);
    let (held, peak) = sampler.await.unwrap();
    let grew = peak.saturating_sub(before);
    assert!(grew < 64 * MIB, "the process grew {} MiB while 256 MiB went through", grew / MIB);
    let held = held.expect("/metrics reports gateway_buffered_bytes and gateway_streamed_bytes");
    println!("held at most {held} bytes in flight; the process grew {grew} bytes");
    assert!(held < 4 * MIB, "the gateway held {held} bytes in flight at once");
    assert_eq!(metric(&client, g, "gateway_stored_entries").await, Some(0));
}

/// A client that stops reading after 4 MiB: the gateway stops reading the origin (what the
/// origin sent is bounded by the sockets' buffers, not the body's size) and holds no more;
/// once the client goes away, the origin's body is dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_holds_the_origin_back_and_one_that_leaves_ends_the_read() {
    let (o, seen) = origin().await;
    let g = gateway(o).await;
    let client = reqwest::Client::new();
    let n = 256 * MIB;
    let mut r = client.get(format!("http://{g}/big/{n}")).send().await.unwrap();
    let mut read = 0;
    while read < 4 * MIB {
        read += tokio::time::timeout(Duration::from_secs(30), r.chunk()).await.expect("hung").unwrap().unwrap().len()
            as u64;
    }
    // Wait until the origin has sent all it can (nothing more for half a second).
    let mut last = u64::MAX;
    for _ in 0..300 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = seen.sent.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
    }
    let sent = seen.sent.load(Ordering::SeqCst);
    println!("the origin sent {sent} bytes to a client that read {read}");
    assert!(sent < n / 2, "the origin sent {} MiB to a client that read {} MiB", sent / MIB, read / MIB);
    let buffered = metric(&client, g, "gateway_buffered_bytes").await.expect("gateway_buffered_bytes");
    let streamed = metric(&client, g, "gateway_streamed_bytes").await.expect("gateway_streamed_bytes");
    println!("held {buffered} buffered and {streamed} streamed meanwhile");
    assert!(buffered + streamed < 4 * MIB, "held {buffered} buffered and {streamed} streamed");
    drop(r);
    for _ in 0..200 {
        if seen.dropped.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.dropped.load(Ordering::SeqCst), "the origin's body was dropped once the client left");
    assert_eq!(metric(&client, g, "gateway_streamed_bytes").await, Some(0), "nothing left in flight");
}

/// An origin that answers `/long` with 8 MiB announced (over the bound: streamed) and
/// `/short` with 512 KiB announced (under it: read to be stored) and `/chunked` in chunks,
/// storable, each cut off after part of the body; counts the requests.
async fn dying_origin() -> (SocketAddr, Arc<AtomicU64>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let reads = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&reads);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let reads = Arc::clone(&counted);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    let mut chunk = [0u8; 4096];
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                reads.fetch_add(1, Ordering::SeqCst);
                let path = String::from_utf8_lossy(&buf).split(' ').nth(1).unwrap_or("").to_string();
                let cc = "cache-control: public, max-age=3600\r\n";
                let (head, sent) = match path.as_str() {
                    "/long" => (format!("HTTP/1.1 200 OK\r\n{cc}content-length: {}\r\n\r\n", 8 * MIB), 2 * MIB),
                    "/short" => (format!("HTTP/1.1 200 OK\r\n{cc}content-length: {}\r\n\r\n", 512 << 10), 100 << 10),
                    _ => (format!("HTTP/1.1 200 OK\r\n{cc}transfer-encoding: chunked\r\n\r\n"), 0),
                };
                let _ = socket.write_all(head.as_bytes()).await;
                if sent > 0 {
                    let _ = socket.write_all(&vec![7u8; sent as usize]).await;
                } else {
                    for _ in 0..40 {
                        let _ = socket.write_all(b"10000\r\n").await;
                        let _ = socket.write_all(&[7u8; 0x10000]).await;
                        let _ = socket.write_all(b"\r\n").await;
                    }
                }
                // Closed without the rest.
            });
        }
    });
    (addr, reads)
}

/// An origin that dies mid-body: the client never gets a clean short answer (either an error
/// status, or a body that ends in an error), nothing is stored, and the next request reads
/// the origin again; nothing stays counted in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_that_dies_mid_body_aborts_the_answer_and_nothing_is_stored() {
    let (o, reads) = dying_origin().await;
    let g = gateway(o).await;
    let client = reqwest::Client::new();
    for path in ["/long", "/short", "/chunked", "/short"] {
        let r = tokio::time::timeout(Duration::from_secs(30), client.get(format!("http://{g}{path}")).send())
            .await
            .expect("hung");
        let Ok(r) = r else { continue };
        let status = r.status().as_u16();
        let body = tokio::time::timeout(Duration::from_secs(30), r.bytes()).await.expect("hung");
        match body {
            Ok(b) => {
                assert!(status >= 500, "{path}: a clean answer {status} of {} bytes from a body cut short", b.len())
            }
            Err(e) => assert!(status == 200, "{path}: {status}, {e}"),
        }
        // Read to be stored, the short one fails before its head goes out; the others are
        // carried through (one past the bound before it broke off) and end in an error.
        let expected = if path == "/short" { "a 502" } else { "an aborted 200" };
        let got = if status == 502 { "a 502" } else { "an aborted 200" };
        assert_eq!(got, expected, "{path}");
    }
    assert_eq!(reads.load(Ordering::SeqCst), 4, "each request read the origin: nothing was stored");
    assert_eq!(metric(&client, g, "gateway_stored_entries").await, Some(0));
    assert_eq!(metric(&client, g, "gateway_buffered_bytes").await, Some(0), "nothing left buffered");
    assert_eq!(metric(&client, g, "gateway_streamed_bytes").await, Some(0), "nothing left in flight");
}

/// A 256 MiB PUT goes through to the origin whole and exact (it was refused over 64 MiB),
/// while the gateway holds at most a few MB of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_streams_to_the_origin() {
    let (o, seen) = origin().await;
    let g = gateway(o).await;
    let client = reqwest::Client::new();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(g, Arc::clone(&stop));
    let n = 256 * MIB;
    let put = client.put(format!("http://{g}/up")).body(reqwest::Body::wrap(words(n, None))).send();
    let r = tokio::time::timeout(Duration::from_secs(120), put).await.expect("hung").unwrap();
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    assert_eq!((status, text.as_str()), (200, n.to_string().as_str()), "the origin got every byte in place");
    assert_eq!(seen.received.load(Ordering::SeqCst), n);
    stop.store(true, Ordering::SeqCst);
    let (held, _) = sampler.await.unwrap();
    let held = held.expect("/metrics reports gateway_buffered_bytes and gateway_streamed_bytes");
    println!("held at most {held} bytes of the request in flight");
    assert!(held < 4 * MIB, "the gateway held {held} bytes of the request at once");
}

/// Many readers at once of a response under the bound make one origin read and share its
/// body; readers of one over it each get it whole (each reads the origin for itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_readers_of_a_stored_response_share_one_read() {
    let (o, seen) = origin().await;
    let g = gateway(o).await;
    let client = reqwest::Client::new();
    let many = |path: String, n: u64| {
        let client = client.clone();
        async move {
            let mut all = tokio::task::JoinSet::new();
            for _ in 0..16 {
                let (client, url) = (client.clone(), format!("http://{g}{path}"));
                all.spawn(async move { download(&client, url).await });
            }
            while let Some(got) = all.join_next().await {
                let (status, _, _, read) = got.unwrap();
                assert_eq!((status, read), (200, n), "{path}");
            }
        }
    };
    many(format!("/big/{}", 512 << 10), 512 << 10).await;
    assert_eq!(seen.reads.load(Ordering::SeqCst), 1, "one origin read for every reader");
    assert_eq!(metric(&client, g, "gateway_stored_entries").await, Some(1));
    many(format!("/big/{}", 3 * MIB), 3 * MIB).await;
    assert_eq!(metric(&client, g, "gateway_stored_entries").await, Some(1), "the large one is not stored");
}

/// An origin that answers `GET /stall` with 8 MiB announced and stops after 2 MiB, the
/// connection left open; and takes any other request's body for ever without answering.
async fn silent_origin() -> SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut chunk = vec![0u8; 64 << 10];
                let Ok(n) = socket.read(&mut chunk).await else { return };
                if chunk[..n].starts_with(b"GET /stall ") {
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", 8 * MIB);
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(&vec![7u8; 2 << 20]).await;
                }
                while let Ok(n) = socket.read(&mut chunk).await {
                    if n == 0 {
                        break;
                    }
                }
                // Held open (and silent) until the gateway lets go.
                let _ = socket.read(&mut chunk).await;
            });
        }
    });
    addr
}

/// A gateway whose upstream timeout is 2 s.
async fn impatient_gateway(origin: SocketAddr) -> SocketAddr {
    let config = OriginConfig {
        max_object_size: Some(MIB),
        upstream_timeout: Duration::from_secs(2),
        ..OriginConfig::new(format!("http://{origin}"))
    };
    serve(origin::router(config)).await
}

/// The upstream timeout bounds each wait on the origin, not a whole exchange: a PUT whose
/// body takes twice the timeout to send goes through, since the origin takes it all along;
/// an origin that takes a body and then says nothing gets its client a 504; one that stops
/// mid-body gets its client an aborted answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_timeout_bounds_silence_not_a_whole_body() {
    let (o, _) = origin().await;
    let g = impatient_gateway(o).await;
    let client = reqwest::Client::new();
    // Five pieces of 256 KiB, one a second: 4 s in all.
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        for i in 0..5 {
            if i > 0 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            tx.send(piece(i * (256 << 10), 256 << 10)).await.unwrap();
        }
    });
    let put = client.put(format!("http://{g}/up")).body(reqwest::Body::wrap(Channel(rx))).send();
    let r = tokio::time::timeout(Duration::from_secs(60), put).await.expect("hung").unwrap();
    let status = r.status().as_u16();
    assert_eq!((status, r.text().await.unwrap()), (200, (5 * (256 << 10)).to_string()), "a slow upload went through");

    let g = impatient_gateway(silent_origin().await).await;
    let put = client.put(format!("http://{g}/up")).body(reqwest::Body::wrap(words(MIB, None))).send();
    let r = tokio::time::timeout(Duration::from_secs(60), put).await.expect("hung").unwrap();
    assert_eq!(r.status().as_u16(), 504, "an origin silent once it has the body");
    let r = tokio::time::timeout(Duration::from_secs(60), client.get(format!("http://{g}/stall")).send())
        .await
        .expect("hung")
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let body = tokio::time::timeout(Duration::from_secs(60), r.bytes()).await.expect("hung");
    assert!(body.is_err(), "a body the origin stopped sending ends in an error, not a clean short answer");
}

/// A request for a range of a response that is carried through (so cannot be cut from what is
/// stored) is answered by the origin with that range, not with the whole body; a stored
/// response's range is cut from it, as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_of_a_body_carried_through_is_asked_of_the_origin() {
    let (o, _) = origin().await;
    let g = gateway(o).await;
    let client = reqwest::Client::new();
    for n in [3 * MIB, 512 << 10] {
        let r = client.get(format!("http://{g}/big/{n}")).header(header::RANGE, "bytes=8-15").send();
        let r = tokio::time::timeout(Duration::from_secs(60), r).await.expect("hung").unwrap();
        let status = r.status().as_u16();
        let range = r.headers().get(header::CONTENT_RANGE).map(|v| v.to_str().unwrap().to_string());
        let body = r.bytes().await.unwrap();
        assert_eq!(status, 206, "{n} bytes: a range asked for is a range answered");
        assert_eq!(range, Some(format!("bytes 8-15/{n}")));
        assert_eq!(&body[..], &1u64.to_le_bytes(), "{n} bytes: the second word");
    }
}
