//! Purges through the gateway's origin mode over loopback, sent as an operator sends them:
//! with curl from Debian (with reqwest where curl is missing, said so). By URL, by prefix and
//! by tag; refused without leave; and holding for a read under way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;

use axum::Router;
use axum::extract::{Path, State};
use axum::routing;
use switchyard_gateway::origin::{self, OriginConfig};
use switchyard_gateway::purge::PurgeRules;

/// An origin whose answers are numbered (a read shows as a new number), fresh for a minute,
/// tagged `group-NAME's first letter` and `all` in `Surrogate-Key`; `/slow/NAME` answers only
/// once the test lets it through the gate (a permit a read), so that what a test does while a
/// read is under way is done before the read ends however slow the machine (a fixed delay
/// here once let the read end first at load 18: "nothing stored yet: {"purged":1}").
async fn origin() -> (SocketAddr, Arc<AtomicU64>, Arc<Semaphore>) {
    let reads = Arc::new(AtomicU64::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let slow_gate = Arc::clone(&gate);
    let answer = |reads: Arc<AtomicU64>, name: String| {
        let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
        let first = name.chars().next().unwrap_or('_');
        (
            [("cache-control", "max-age=60".to_string()), ("surrogate-key", format!("group-{first} all"))],
            format!("{name} #{n}"),
        )
    };
    let app = Router::new()
        .route(
            "/t/{name}",
            routing::get(
                move |State(r): State<Arc<AtomicU64>>, Path(name): Path<String>| async move { answer(r, name) },
            ),
        )
        .route(
            "/u/{name}",
            routing::get(
                move |State(r): State<Arc<AtomicU64>>, Path(name): Path<String>| async move { answer(r, name) },
            ),
        )
        .route(
            "/slow/{name}",
            routing::get(move |State(r): State<Arc<AtomicU64>>, Path(name): Path<String>| {
                let gate = Arc::clone(&slow_gate);
                async move {
                    gate.acquire().await.expect("the gate stays open").forget();
                    answer(r, name)
                }
            }),
        )
        .with_state(Arc::clone(&reads));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, reads, gate)
}

/// The gateway, started as the binary starts it: with its peers' addresses.
async fn gateway(origin: SocketAddr, purge: PurgeRules) -> SocketAddr {
    let config = OriginConfig { purge, ..OriginConfig::new(format!("http://{origin}")) };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = origin::router(config).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// `X-Cache`, the body, and whether a tag field reached the client.
async fn get(g: SocketAddr, path: &str) -> (String, String, bool) {
    let r = reqwest::get(format!("http://{g}{path}")).await.unwrap();
    let how = r.headers().get("x-cache").map_or(String::new(), |v| v.to_str().unwrap().to_string());
    let tagged = r.headers().contains_key("surrogate-key") || r.headers().contains_key("cache-tag");
    (how, r.text().await.unwrap(), tagged)
}

/// A PURGE with these extra request fields: the status and the body. curl, as an operator
/// sends it; reqwest where there is no curl.
async fn purge(g: SocketAddr, path: &str, fields: &[&str]) -> (u16, String) {
    let url = format!("http://{g}{path}");
    let curl = std::process::Command::new("curl").arg("--version").output().is_ok_and(|o| o.status.success());
    if !curl {
        eprintln!("curl not found: PURGE sent with reqwest instead");
        let mut req = reqwest::Client::new().request(reqwest::Method::from_bytes(b"PURGE").unwrap(), url);
        for f in fields {
            let (n, v) = f.split_once(": ").unwrap();
            req = req.header(n, v);
        }
        let r = req.send().await.unwrap();
        return (r.status().as_u16(), r.text().await.unwrap());
    }
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["-s", "-X", "PURGE", "-w", "\n%{http_code}", "--max-time", "15"]);
    for f in fields {
        cmd.args(["-H", f]);
    }
    cmd.arg(&url);
    let out = tokio::task::spawn_blocking(move || cmd.output()).await.unwrap().unwrap();
    assert!(out.status.success(), "curl failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap(), body.to_string())
}

fn purged(body: &str) -> u64 {
    serde_json::from_str::<serde_json::Value>(body).unwrap()["purged"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_by_url_prefix_and_tag_forget_what_they_name_and_nothing_else() {
    let (o, reads, _) = origin().await;
    let g = gateway(o, PurgeRules::default()).await;
    for p in ["/t/a1", "/t/a2", "/t/b1", "/u/x", "/t/a1?v=2"] {
        assert_eq!(get(g, p).await.0, "miss");
        let (how, _, tagged) = get(g, p).await;
        assert_eq!(how, "hit", "{p}");
        assert!(!tagged, "the origin's tags are for its caches, not for clients");
    }
    assert_eq!(reads.load(Ordering::SeqCst), 5);

    // One URL: the query is part of it.
    let (code, body) = purge(g, "/t/a1", &[]).await;
    assert_eq!((code, purged(&body)), (200, 1), "{body}");
    assert_eq!(get(g, "/t/a1").await.0, "miss");
    assert_eq!(get(g, "/t/a1?v=2").await.0, "hit");
    assert_eq!(get(g, "/t/a2").await.0, "hit");

    // A tag: only the responses carrying it.
    let (code, body) = purge(g, "/", &["Surrogate-Key: group-b"]).await;
    assert_eq!((code, purged(&body)), (200, 1), "{body}");
    assert_eq!(get(g, "/t/b1").await.0, "miss");
    assert_eq!(get(g, "/t/a2").await.0, "hit");

    // A prefix: everything under /t/, nothing under /u/.
    let (code, body) = purge(g, "/t/*", &[]).await;
    assert_eq!((code, purged(&body)), (200, 4), "/t/a1, /t/a1?v=2, /t/a2, /t/b1: {body}");
    for p in ["/t/a1", "/t/a1?v=2", "/t/a2", "/t/b1"] {
        assert_eq!(get(g, p).await.0, "miss", "{p}");
    }
    assert_eq!(get(g, "/u/x").await.0, "hit");

    // Cloudflare's field and comma-separated tags do the same.
    let (_, body) = purge(g, "/", &["Cache-Tag: nothing,group-x"]).await;
    assert_eq!(purged(&body), 1, "{body}");
    assert_eq!(get(g, "/u/x").await.0, "miss");

    let metrics = reqwest::get(format!("http://{g}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("gateway_purges_total 4"), "{metrics}");
    assert!(metrics.contains("gateway_purged_total 7"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_without_leave_is_refused_saying_why_and_a_token_gives_leave() {
    let (o, _, _) = origin().await;
    let rules = PurgeRules { token: Some("s3cret".into()), from: vec!["10.0.0.0/8".parse().unwrap()] };
    let g = gateway(o, rules).await;
    assert_eq!(get(g, "/t/a1").await.0, "miss");
    let (code, body) = purge(g, "/t/a1", &[]).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("127.0.0.1") && body.contains("--purge-token"), "{body}");
    let (code, _) = purge(g, "/t/a1", &["Authorization: Bearer wrong"]).await;
    assert_eq!(code, 403);
    assert_eq!(get(g, "/t/a1").await.0, "hit", "a refused purge changed nothing");
    let (code, body) = purge(g, "/t/a1", &["Authorization: Bearer s3cret"]).await;
    assert_eq!((code, purged(&body)), (200, 1), "{body}");
    let metrics = reqwest::get(format!("http://{g}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("gateway_purges_refused_total 2"), "{metrics}");
}

/// A read under way when what it reads is purged (by URL, or by a tag its answer turns out to
/// carry) answers the clients waiting on it, and does not put back what the purge removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_under_way_when_its_url_or_tag_is_purged_is_answered_but_not_kept() {
    let (o, reads, gate) = origin().await;
    let g = gateway(o, PurgeRules::default()).await;
    for (name, fields) in [("/slow/a", vec![]), ("/slow/b", vec!["Surrogate-Key: group-b"])] {
        let before = reads.load(Ordering::SeqCst);
        let asked = tokio::spawn(get(g, name));
        let joined = {
            tokio::time::sleep(Duration::from_millis(100)).await;
            tokio::spawn(get(g, name))
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let path = if fields.is_empty() { name } else { "/" };
        let (code, body) = purge(g, path, &fields).await;
        assert_eq!((code, purged(&body)), (200, 0), "nothing stored yet: {body}");
        // The one read both requests wait on may end now.
        gate.add_permits(1);
        let (how, first, _) = asked.await.unwrap();
        assert_eq!(how, "miss");
        let (how, second, _) = joined.await.unwrap();
        assert_eq!((how.as_str(), second.as_str()), ("coalesced", first.as_str()), "{name}: one read, both answered");
        assert_eq!(reads.load(Ordering::SeqCst), before + 1);
        gate.add_permits(1);
        assert_eq!(get(g, name).await.0, "miss", "{name}: the read that the purge overtook was not kept");
        assert_eq!(get(g, name).await.0, "hit", "{name}: the read after the purge was");
    }
}
