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
