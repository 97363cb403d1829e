//! Response fields whose reading the public cache test suite's newer version checks, through
//! the gateway over loopback: `Age` (RFC 9111 §5.1) and the targeted cache-control fields
//! `CDN-Cache-Control` and `Switchyard-Cache-Control` (RFC 9213).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::http::{HeaderName, HeaderValue, Uri};
use axum::response::IntoResponse;
use switchyard_gateway::origin::{self, OriginConfig};

type Table = HashMap<&'static str, Vec<(&'static str, &'static str)>>;

/// An origin answering each path of `table` with that path's field lines (in order, repeated
/// names kept as separate lines), counting its reads.
async fn origin(table: Table) -> (SocketAddr, Arc<AtomicU64>) {
    let reads = Arc::new(AtomicU64::new(0));
    let (t, r) = (Arc::new(table), Arc::clone(&reads));
    let app = Router::new().fallback(move |uri: Uri| {
        let (t, r) = (Arc::clone(&t), Arc::clone(&r));
        async move {
            let n = r.fetch_add(1, Ordering::SeqCst) + 1;
            let mut resp = format!("#{n}").into_response();
            for (name, value) in t.get(uri.path()).into_iter().flatten() {
                resp.headers_mut().append(HeaderName::from_static(name), HeaderValue::from_static(value));
            }
            resp
        }
    });
    (serve(app).await, reads)
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// `X-Cache` (hit, miss, …) and the response's fields.
async fn get(gateway: SocketAddr, path: &str) -> (String, reqwest::header::HeaderMap) {
    let r = reqwest::get(format!("http://{gateway}{path}")).await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    let h = r.headers().clone();
    (h.get("x-cache").map_or(String::new(), |v| v.to_str().unwrap().to_string()), h)
}

/// Whether the second of two requests for `path` is answered from the store.
async fn reused(gateway: SocketAddr, path: &str) -> bool {
    let (first, _) = get(gateway, path).await;
    assert_eq!(first, "miss", "{path}: the first read goes to the origin");
    get(gateway, path).await.0 == "hit"
}

/// RFC 9111 §5.1: of an `Age` list (one line or several, RFC 9110 §5.3) the first member
/// counts; a value that is not a non-negative integer is ignored as if absent. Every path
/// here says `max-age=3600`, so what decides is whether the Age that counts reaches 3600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn age_counts_its_first_member_and_an_invalid_age_is_ignored() {
    let ma = ("cache-control", "max-age=3600");
    let table: Table = [
        ("/nonnumeric", vec![ma, ("age", "abc")]),
        ("/negative", vec![ma, ("age", "-7200")]),
        ("/float", vec![ma, ("age", "7200.0")]),
        ("/prefix", vec![ma, ("age", "0, 7200")]),
        ("/prefix-twoline", vec![ma, ("age", "0"), ("age", "7200")]),
        ("/dup-0", vec![ma, ("age", "0, 0")]),
        ("/dup-0-twoline", vec![ma, ("age", "0"), ("age", "0")]),
        ("/suffix", vec![ma, ("age", "7200, 0")]),
        ("/suffix-twoline", vec![ma, ("age", "7200"), ("age", "0")]),
        ("/large", vec![ma, ("age", "2147483648")]),
    ]
    .into_iter()
    .collect();
    let (o, reads) = origin(table).await;
    let g = serve(origin::router(OriginConfig::new(format!("http://{o}")))).await;
    for path in ["/nonnumeric", "/negative", "/float", "/prefix", "/prefix-twoline", "/dup-0", "/dup-0-twoline"] {
        assert!(reused(g, path).await, "{path}: fresh, reused");
    }
    for path in ["/suffix", "/suffix-twoline", "/large"] {
        assert!(!reused(g, path).await, "{path}: stale on arrival, read again");
    }
    assert_eq!(reads.load(Ordering::SeqCst), 7 + 3 * 2);
    // The Age given downstream is the one that counted, not a stale member passed along.
    let (_, h) = get(g, "/prefix").await;
    assert!(h["age"].to_str().unwrap().parse::<u64>().unwrap() < 3600, "{:?}", h["age"]);
}

/// RFC 9213: as a CDN cache the gateway obeys `CDN-Cache-Control` over `Cache-Control` and
/// `Expires`, and the field targeted at it alone (`Switchyard-Cache-Control`, or the name
/// configured) over both; an invalid targeted field is ignored; both are passed on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targeted_cache_control_governs_over_cache_control() {
    let table: Table = [
        ("/cdn-long", vec![("cache-control", "max-age=0"), ("cdn-cache-control", "max-age=3600")]),
        ("/cdn-fresh-cc-no-store", vec![("cache-control", "no-store"), ("cdn-cache-control", "max-age=3600")]),
        ("/cdn-short", vec![("cache-control", "max-age=3600"), ("cdn-cache-control", "max-age=0")]),
        ("/cdn-no-store", vec![("cache-control", "max-age=3600"), ("cdn-cache-control", "no-store")]),
        ("/cdn-private", vec![("cache-control", "max-age=3600"), ("cdn-cache-control", "private")]),
        ("/cdn-no-cache", vec![("cache-control", "max-age=3600"), ("cdn-cache-control", "no-cache")]),
        ("/cdn-invalid", vec![("cache-control", "no-store"), ("cdn-cache-control", "max-age=3600, &&&&&")]),
        ("/cdn-age", vec![("cdn-cache-control", "max-age=3600"), ("age", "7200")]),
        ("/own", vec![("cdn-cache-control", "no-store"), ("switchyard-cache-control", "max-age=3600")]),
        ("/own-renamed", vec![("cdn-cache-control", "no-store"), ("edge-cache-control", "max-age=3600")]),
    ]
    .into_iter()
    .collect();
    let (o, _) = origin(table).await;
    let g = serve(origin::router(OriginConfig::new(format!("http://{o}")))).await;
    for path in ["/cdn-long", "/cdn-fresh-cc-no-store", "/own"] {
        assert!(reused(g, path).await, "{path}: fresh by the targeted field, reused");
    }
    for path in ["/cdn-short", "/cdn-no-store", "/cdn-private", "/cdn-no-cache", "/cdn-invalid", "/cdn-age"] {
        assert!(!reused(g, path).await, "{path}: the targeted field (or, invalid, Cache-Control) forbids reuse");
    }
    // Another name for the gateway's own field: the old name is just another field then.
    assert!(!reused(g, "/own-renamed").await, "Edge-Cache-Control is not this gateway's field by default");
    let renamed =
        OriginConfig { targeted_field: "edge-cache-control".into(), ..OriginConfig::new(format!("http://{o}")) };
    let g2 = serve(origin::router(renamed)).await;
    assert!(reused(g2, "/own-renamed").await, "configured: Edge-Cache-Control governs");
    assert!(!reused(g2, "/own").await, "Switchyard-Cache-Control no longer targets it: CDN-Cache-Control governs");
    // Passed on unchanged, to the client and on a hit.
    let (_, h) = get(g, "/cdn-long").await;
    assert_eq!(h["cdn-cache-control"], "max-age=3600");
    assert_eq!(h["cache-control"], "max-age=0");
}

/// RFC 9111 §3: only a final response is stored. An origin that sends `103 Early Hints`
/// first: the final response is stored and reused, without the interim response's fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interim_response_is_never_stored() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let o = listener.local_addr().unwrap();
    let reads = Arc::new(AtomicU64::new(0));
    let r = Arc::clone(&reads);
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let r = Arc::clone(&r);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // One request per connection is enough here: answer once its head is in.
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                let body = format!("#{n}");
                let answer = format!(
                    "HTTP/1.1 103 Early Hints\r\nlink: </styles.css>; rel=preload\r\nx-interim: yes\r\n\r\n\
                     HTTP/1.1 200 OK\r\ncache-control: max-age=100000\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(answer.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    let g = serve(origin::router(OriginConfig::new(format!("http://{o}")))).await;
    let (first, h1) = get(g, "/hinted").await;
    assert_eq!(first, "miss");
    let (second, h2) = get(g, "/hinted").await;
    assert_eq!(second, "hit", "the final response is stored");
    assert_eq!(reads.load(Ordering::SeqCst), 1);
    for h in [h1, h2] {
        assert!(h.get("x-interim").is_none() && h.get("link").is_none(), "no field of the 103: {h:?}");
    }
}
