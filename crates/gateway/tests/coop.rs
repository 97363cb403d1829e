//! Cacheflow's gateways on loopback: cooperating caches serve more of each set than lone ones
//! with the same memory, and a gateway loads only what no neighbour holds.

use std::time::Duration;

use rand::SeedableRng;
use switchyard_gateway::coop::{ClusterConfig, run_cluster};

fn cluster(cooperate: bool, capacity: usize) -> ClusterConfig {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    ClusterConfig {
        servers: 3,
        clients_per_server: 2,
        cooperate,
        capacity,
        dedup: true,
        link_buffer: 0,
        object_size: 1024,
        files: 600,
        sets: switchyard_models::cacheflow::make_sets(600, 100, 20, &mut rng),
        requests: 60,
        warmup: 15,
        period: Duration::from_millis(2),
        seed: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cooperating_gateways_hit_more_than_lone_ones_with_the_same_memory() {
    let alone = run_cluster(&cluster(false, 60)).await.unwrap();
    let together = run_cluster(&cluster(true, 60)).await.unwrap();
    let bigger = run_cluster(&cluster(false, 120)).await.unwrap();
    assert_eq!(alone.asked, 3 * 2 * 45 * 20);
    assert_eq!((alone.remote_hits, alone.duplicates, alone.mispredicted), (0, 0, 0));
    assert_eq!(alone.local_hits + alone.loads, alone.asked, "alone, everything is a hit or a load");
    assert!(together.remote_hits > 0);
    assert!(
        together.hit_rate() > alone.hit_rate() + 0.1,
        "together {:.3} against alone {:.3}",
        together.hit_rate(),
        alone.hit_rate()
    );
    assert!(
        together.hit_rate() > 0.8 * bigger.hit_rate(),
        "near a lone cache twice the size: {:.3} against {:.3}",
        together.hit_rate(),
        bigger.hit_rate()
    );
    assert!((together.mispredicted as f64) < 0.05 * together.asked as f64, "{together:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_must_be_paths_at_the_origin() {
    use switchyard_gateway::coop::{CoopConfig, CoopNode};
    let node = CoopNode::new(CoopConfig {
        me: "http://127.0.0.1:1".into(),
        origin: "http://127.0.0.1:2".into(),
        capacity: 10,
        dedup: true,
        link_buffer: 0,
        threshold: 0,
        upstream_timeout: Duration::from_secs(1),
        outbox_limit: 100,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, node.router()).await });
    let r = reqwest::Client::new()
        .post(format!("http://{addr}/v1/coop/local"))
        .body("@169.254.169.254/x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("keys are paths at the origin"));
}

/// An update batch a neighbour could not take is sent again until it does: B, silent when A
/// loaded `/k`, later knows A holds it (and plans it as A's, not as a load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_batch_a_neighbour_missed_is_sent_again() {
    use switchyard_gateway::coop::{CoopNode, MAX_KEY_BYTES};
    let origin_url = origin().await;
    let (la, lb) = (
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    );
    let (ua, ub) = (format!("http://{}", la.local_addr().unwrap()), format!("http://{}", lb.local_addr().unwrap()));
    let node = |me: &str| CoopNode::new(small_node(me, &origin_url));
    let (a, b) = (node(&ua), node(&ub));
    a.set_neighbours(vec![ub.clone()]);
    b.set_neighbours(vec![ua.clone()]);
    let ra = a.router();
    tokio::spawn(async move { axum::serve(la, ra).await });
    // B's socket is bound but nobody answers: A's first sending times out.
    let http = reqwest::Client::new();
    let r = http.post(format!("{ua}/v1/coop/local")).body("/k").send().await.unwrap();
    assert_eq!(r.headers()["x-cacheflow-loaded"], "1");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rb = b.router();
    tokio::spawn(async move { axum::serve(lb, rb).await });
    // A's retries back off from 100 ms; two seconds is several of them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    // B plans /k as A's once A's batch has arrived: it does not load it. (Only the first probe
    // tells: a load would keep /k in B's own cache.)
    let probe = http.post(format!("{ub}/v1/coop/local")).body("/k").send().await.unwrap();
    assert_eq!(probe.headers()["x-cacheflow-loaded"], "0", "A's batch never reached B");
    // A key longer than the framing can carry is refused, not cut to another key.
    let long = format!("/{}", "x".repeat(MAX_KEY_BYTES));
    let r = http.post(format!("{ua}/v1/coop/local")).body(long).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("at most"));
}

/// The `coop_viewed_keys` gauge of the gateway at `url`: the objects its views of its
/// neighbours show.
/// A node at `me` of ten objects, de-duplicating, sending every change at once.
fn small_node(me: &str, origin: &str) -> switchyard_gateway::coop::CoopConfig {
    switchyard_gateway::coop::CoopConfig {
        me: me.into(),
        origin: origin.into(),
        capacity: 10,
        dedup: true,
        link_buffer: 0,
        threshold: 0,
        upstream_timeout: Duration::from_millis(300),
        outbox_limit: 1000,
    }
}

/// An origin that answers `value` to every path; its URL.
async fn origin() -> String {
    let origin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", origin.local_addr().unwrap());
    let app = axum::Router::new().fallback(|| async { "value" });
    tokio::spawn(async move { axum::serve(origin, app).await });
    url
}

async fn viewed(http: &reqwest::Client, url: &str) -> Option<i64> {
    let text = http.get(format!("{url}/metrics")).send().await.ok()?.text().await.ok()?;
    text.lines().find_map(|l| l.strip_prefix("coop_viewed_keys ")).and_then(|v| v.trim().parse().ok())
}

/// Waits, up to ten seconds, until each gateway's views show as many objects as paired with it;
/// whether they came to.
async fn views_settle(http: &reqwest::Client, want: &[(&str, i64)]) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut all = true;
        for (url, n) in want {
            all &= viewed(http, url).await == Some(*n);
        }
        if all {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A neighbour that restarts holds nothing, yet never reports evicting what it held: A stops
/// leaving B's old objects to B (which would not deliver them), and B learns again what A holds
/// (or it loads A's objects from the origin again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_neighbour_is_resynchronised() {
    use switchyard_gateway::coop::{CoopNode, ask_set};
    let origin_url = origin().await;
    let la = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // B's socket outlives B: a copy of it serves each of B's lives, so B comes back on its port.
    let lb = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    lb.set_nonblocking(true).unwrap();
    let (ua, ub) = (format!("http://{}", la.local_addr().unwrap()), format!("http://{}", lb.local_addr().unwrap()));
    let node = |me: &str, neighbour: &str| {
        let n = CoopNode::new(small_node(me, &origin_url));
        n.set_neighbours(vec![neighbour.to_string()]);
        n
    };
    // Serves a life of B until told to stop; its task ends once its connections have closed.
    let serve_b = |b: CoopNode| {
        let listener = tokio::net::TcpListener::from_std(lb.try_clone().unwrap()).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, b.router())
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await
        });
        (stop, task)
    };
    let ra = node(&ua, &ub).router();
    tokio::spawn(async move { axum::serve(la, ra).await });
    let (stop_b, b_task) = serve_b(node(&ub, &ua));
    // No pooled connections: B's first life closes its own.
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap();
    let load = |url: &str, key: &'static str| {
        let (http, url) = (http.clone(), format!("{url}/v1/coop/local"));
        async move {
            let r = http.post(url).body(key).send().await.unwrap();
            r.headers()["x-cacheflow-loaded"].to_str().unwrap().to_string()
        }
    };
    assert_eq!(load(&ua, "/k").await, "1");
    assert_eq!(load(&ub, "/j").await, "1");
    assert!(views_settle(&http, &[(&ua, 1), (&ub, 1)]).await, "A and B never learnt of /j and /k");
    let before = ask_set(&http, &ua, std::slice::from_ref(&ub), &["/j".to_string()]).await.unwrap();
    assert_eq!((before.remote_hits, before.mispredicted), (1, 0), "A leaves /j to B: {before:?}");

    // B restarts, empty, on the same port.
    stop_b.send(()).unwrap();
    b_task.await.unwrap().unwrap();
    let (_stop_b, _b_task) = serve_b(node(&ub, &ua));
    // A forgets /j, B learns /k; if they never do, the assertions below say which went wrong.
    views_settle(&http, &[(&ua, 0), (&ub, 1)]).await;
    let after = ask_set(&http, &ua, std::slice::from_ref(&ub), &["/j".to_string()]).await.unwrap();
    assert_eq!(after.mispredicted, 0, "A still left /j to B, which lost it when it restarted: {after:?}");
    assert_eq!(after.loads, 1, "A loads /j itself: {after:?}");
    assert_eq!(load(&ub, "/k").await, "0", "B loaded /k from the origin: it never learnt that A holds it");
}

/// A stand-in neighbour: it answers each batch of updates as `answer` says (given the batch,
/// as JSON) and keeps the view of the sender that the batches it took make.
#[derive(Default)]
struct Stub {
    /// Batches taken, in order.
    taken: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl Stub {
    /// The view the batches taken make: each reset clears it, each change applies.
    fn view(&self) -> std::collections::BTreeSet<String> {
        let mut view = std::collections::BTreeSet::new();
        for b in self.taken.lock().unwrap().iter() {
            if b["reset"].as_bool() == Some(true) {
                view.clear();
            }
            for c in b["changes"].as_array().unwrap() {
                let k = c[0].as_str().unwrap().to_string();
                if c[1].as_bool().unwrap() {
                    view.insert(k);
                } else {
                    view.remove(&k);
                }
            }
        }
        view
    }

    fn taken(&self) -> usize {
        self.taken.lock().unwrap().len()
    }
}

/// Serves a stub at a new loopback URL: `answer` says, for each batch, the status to answer
/// (a 2xx takes it).
async fn stub(
    answer: impl Fn(&serde_json::Value) -> u16 + Clone + Send + Sync + 'static,
) -> (String, std::sync::Arc<Stub>) {
    use std::sync::Arc;
    let stub = Arc::new(Stub::default());
    let s = Arc::clone(&stub);
    let app = axum::Router::new().route(
        "/v1/coop/updates",
        axum::routing::post(move |axum::Json(b): axum::Json<serde_json::Value>| {
            let (s, answer) = (Arc::clone(&s), answer.clone());
            async move {
                let status = answer(&b);
                if (200..300).contains(&status) {
                    s.taken.lock().unwrap().push(b);
                }
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    (url, stub)
}

/// A gateway at a new loopback URL with one neighbour, `neighbour`; its URL.
async fn node_with(neighbour: &str, origin: &str, outbox_limit: usize) -> String {
    use switchyard_gateway::coop::CoopNode;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let me = format!("http://{}", l.local_addr().unwrap());
    let node = CoopNode::new(switchyard_gateway::coop::CoopConfig { outbox_limit, ..small_node(&me, origin) });
    node.set_neighbours(vec![neighbour.to_string()]);
    let app = node.router();
    tokio::spawn(async move { axum::serve(l, app).await });
    me
}

/// A counter (or gauge) of the gateway at `url` for neighbour `neighbour`.
async fn per_neighbour(http: &reqwest::Client, url: &str, name: &str, neighbour: &str) -> Option<f64> {
    let text = http.get(format!("{url}/metrics")).send().await.ok()?.text().await.ok()?;
    let prefix = format!("{name}{{neighbour=\"{neighbour}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok())
}

/// Waits, up to ten seconds, until `done` holds; whether it came to.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// A batch a neighbour refuses (here the first that carries a change, with 403) is not
/// dropped for good: everything held follows it, so the neighbour learns of `/k` too. The
/// batches counted as sent are those the neighbour took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_a_neighbour_refuses_is_followed_by_everything_held() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let refused = std::sync::Arc::new(AtomicBool::new(false));
    let r = std::sync::Arc::clone(&refused);
    let (b, stub) = stub(move |batch| {
        let changes = !batch["changes"].as_array().unwrap().is_empty();
        if changes && batch["reset"].as_bool() != Some(true) && !r.swap(true, Ordering::SeqCst) { 403 } else { 204 }
    })
    .await;
    let a = node_with(&b, &origin().await, 1000).await;
    let http = reqwest::Client::new();
    assert!(eventually(|| stub.taken() == 1).await, "A's first snapshot never came");
    let load = |key: &'static str| {
        let (http, a) = (http.clone(), a.clone());
        async move { http.post(format!("{a}/v1/coop/local")).body(key).send().await.unwrap() }
    };
    load("/k").await;
    assert!(eventually(|| refused.load(Ordering::SeqCst)).await, "the stub never refused a batch");
    load("/m").await;
    let want: std::collections::BTreeSet<String> = ["/k".to_string(), "/m".to_string()].into();
    assert!(eventually(|| stub.view() == want).await, "the neighbour's view of A: {:?}", stub.view());
    let sent = per_neighbour(&http, &a, "coop_update_batches_sent_total", &b).await;
    assert_eq!(sent, Some(stub.taken() as f64), "batches counted as sent against those the neighbour took");
    assert_eq!(per_neighbour(&http, &a, "coop_update_batches_refused_total", &b).await, Some(1.0));
}

/// A neighbour that restarts comes back knowing nothing of A, and without asking (here a stub
/// that numbers batches as a gateway does, and forgets them when it restarts): A's next batch
/// does not follow what it took, it says so (409), and A sends everything it holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbour_that_restarts_unannounced_gets_everything_held() {
    use std::sync::{Arc, Mutex};
    // The epoch and number the stub expects next, as the gateway's inbox keeps them.
    let expect: Arc<Mutex<Option<(u64, u64)>>> = Arc::default();
    let e = Arc::clone(&expect);
    let (b, stub) = stub(move |batch| {
        let (epoch, seq) = (batch["epoch"].as_u64().unwrap_or(0), batch["seq"].as_u64().unwrap_or(0));
        let mut expect = e.lock().unwrap();
        if batch["reset"].as_bool() == Some(true) || *expect == Some((epoch, seq)) {
            *expect = Some((epoch, seq + 1));
            204
        } else {
            409
        }
    })
    .await;
    let a = node_with(&b, &origin().await, 1000).await;
    let http = reqwest::Client::new();
    let load = |key: &'static str| {
        let (http, a) = (http.clone(), a.clone());
        async move { http.post(format!("{a}/v1/coop/local")).body(key).send().await.unwrap() }
    };
    load("/k").await;
    let k: std::collections::BTreeSet<String> = ["/k".to_string()].into();
    assert!(eventually(|| stub.view() == k).await, "the neighbour never learnt of /k: {:?}", stub.view());
    // It restarts: its view of A and the numbers it took are gone.
    stub.taken.lock().unwrap().clear();
    *expect.lock().unwrap() = None;
    load("/m").await;
    let want: std::collections::BTreeSet<String> = ["/k".to_string(), "/m".to_string()].into();
    assert!(
        eventually(|| stub.view() == want).await,
        "after its restart, the neighbour's view of A: {:?}",
        stub.view()
    );
}

/// A neighbour down for a while (answering 503) costs A a bounded outbox: past the limit the
/// changes owed collapse to one snapshot, so when the neighbour is back it gets a few batches,
/// not every change made meanwhile, and its view is what A holds. The batches counted as sent
/// are those it took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbour_down_for_a_while_costs_a_bounded_outbox_and_gets_a_snapshot() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let up = Arc::new(AtomicBool::new(true));
    let u = Arc::clone(&up);
    let (b, stub) = stub(move |_| if u.load(Ordering::SeqCst) { 204 } else { 503 }).await;
    let limit = 20;
    let a = node_with(&b, &origin().await, limit).await;
    let http = reqwest::Client::new();
    assert!(eventually(|| stub.taken() == 1).await, "A's first snapshot never came");
    up.store(false, Ordering::SeqCst);
    // 200 objects through a cache of 10: 390 changes, one or two a batch.
    let mut owed = Vec::new();
    for i in 0..200 {
        http.post(format!("{a}/v1/coop/local")).body(format!("/o/{i}")).send().await.unwrap();
        owed.push(per_neighbour(&http, &a, "coop_update_outbox_changes", &b).await);
    }
    let before = stub.taken();
    up.store(true, Ordering::SeqCst);
    let held: std::collections::BTreeSet<String> = (190..200).map(|i| format!("/o/{i}")).collect();
    assert!(eventually(|| stub.view() == held).await, "once back, the neighbour's view of A: {:?}", stub.view());
    let after = stub.taken() - before;
    assert!(after <= 3, "{after} batches once the neighbour was back: not one snapshot");
    assert!(owed.iter().all(|o| o.is_some_and(|o| o <= limit as f64)), "changes owed while it was down: {owed:?}");
    // A batch is counted when its 2xx comes back, a moment after the stub took it: read until
    // the two agree (a read in that moment once found one fewer), for at most 5 s.
    let mut sent = None;
    for _ in 0..100 {
        sent = per_neighbour(&http, &a, "coop_update_batches_sent_total", &b).await;
        if sent == Some(stub.taken() as f64) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sent, Some(stub.taken() as f64), "batches counted as sent against those the neighbour took");
    assert!(per_neighbour(&http, &a, "coop_update_outbox_overflows_total", &b).await >= Some(1.0));
    assert!(per_neighbour(&http, &a, "coop_update_sends_failed_total", &b).await >= Some(1.0));
}

/// A gateway takes a neighbour's batches in order: one that does not follow the last it took
/// is refused with 409 and a sentence saying what to do, one taken already is not taken twice,
/// and a reset starts afresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_refuses_a_batch_that_does_not_follow_and_takes_a_repeat_once() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let me = format!("http://{}", l.local_addr().unwrap());
    let sender = "http://127.0.0.1:9"; // never reached: its batches are posted by hand
    let node = switchyard_gateway::coop::CoopNode::new(small_node(&me, &origin().await));
    node.set_neighbours(vec![sender.to_string()]);
    let app = node.router();
    tokio::spawn(async move { axum::serve(l, app).await });
    let http = reqwest::Client::new();
    let post = |seq: u64, reset: bool, key: &str| {
        let body = serde_json::json!({
            "from": sender, "epoch": 77, "seq": seq, "reset": reset, "changes": [[key, true]]
        });
        let (http, url) = (http.clone(), format!("{me}/v1/coop/updates"));
        async move {
            let r = http.post(url).json(&body).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, body) = post(4, false, "/a").await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("send everything you hold"), "{body}");
    assert_eq!(post(5, true, "/a").await.0, 204);
    assert_eq!(post(6, false, "/b").await.0, 204);
    assert_eq!(post(6, false, "/b").await.0, 204, "a repeat is answered as taken");
    assert_eq!(post(8, false, "/c").await.0, 409, "7 is missing (the repeat of 6 was not taken as 7)");
    assert_eq!(viewed(&http, &me).await, Some(2), "/a and /b, once each; not /c");
}
