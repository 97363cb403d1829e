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
    use switchyard_gateway::coop::{CoopConfig, CoopNode, MAX_KEY_BYTES};
    let origin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin_url = format!("http://{}", origin.local_addr().unwrap());
    let app = axum::Router::new().fallback(|| async { "value" });
    tokio::spawn(async move { axum::serve(origin, app).await });
    let (la, lb) = (
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
    );
    let (ua, ub) = (format!("http://{}", la.local_addr().unwrap()), format!("http://{}", lb.local_addr().unwrap()));
    let node = |me: &str| {
        CoopNode::new(CoopConfig {
            me: me.into(),
            origin: origin_url.clone(),
            capacity: 10,
            dedup: true,
            link_buffer: 0,
            threshold: 0,
            upstream_timeout: Duration::from_millis(300),
        })
    };
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
