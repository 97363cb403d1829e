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
