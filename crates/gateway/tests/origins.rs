//! The gateway over several origins of different speed and price (Figurehead's setting),
//! over loopback: a hedge's late attempt is cancelled when the first answer arrives, every
//! attempt is paid for in /metrics, OptWait learns to meet its SLA cheaply, and a write
//! reaches every origin.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing;
use switchyard_core::place::sla::{RouteKind, Sla};
use switchyard_gateway::origin::{self, OriginConfig};
use switchyard_gateway::origins::{OriginSpec, parse_sla};

#[derive(Default)]
struct Counts {
    started: AtomicU64,
    finished: AtomicU64,
}

/// An origin answering after `delay`, uncacheable, counting the reads it starts and finishes
/// (a read whose client hung up is dropped unfinished).
async fn origin(delay: Duration) -> (SocketAddr, Arc<Counts>) {
    let counts = Arc::new(Counts::default());
    let c = Arc::clone(&counts);
    let app = Router::new().fallback(routing::get(move || {
        let c = Arc::clone(&c);
        async move {
            c.started.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(delay).await;
            c.finished.fetch_add(1, Ordering::SeqCst);
            ([("cache-control", "no-store")], format!("after {delay:?}"))
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, counts)
}

async fn gateway(origins: Vec<OriginSpec>, route: RouteKind, sla: Sla) -> SocketAddr {
    let config = OriginConfig { origins, route, sla, ..OriginConfig::new("http://unused") };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, origin::router(config)).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedge_answers_from_the_first_and_cancels_the_other() {
    let (slow, slow_n) = origin(Duration::from_millis(400)).await;
    let (fast, fast_n) = origin(Duration::from_millis(5)).await;
    let g = gateway(
        vec![
            OriginSpec { url: format!("http://{slow}"), price: 1.0 },
            OriginSpec { url: format!("http://{fast}"), price: 10.0 },
        ],
        RouteKind::HedgeFixed(Duration::from_millis(30)),
        parse_sla("95:100ms").unwrap(),
    )
    .await;
    for i in 0..5 {
        let t = Instant::now();
        let body = reqwest::get(format!("http://{g}/item/{i}")).await.unwrap().text().await.unwrap();
        assert_eq!(body, "after 5ms", "the fast origin's answer");
        assert!(t.elapsed() < Duration::from_millis(300), "not the slow one's: {:?}", t.elapsed());
    }
    // Probes are left to finish (400 ms).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let m = reqwest::get(format!("http://{g}/metrics")).await.unwrap().text().await.unwrap();
    let line = |name: &str, origin: SocketAddr| {
        m.lines()
            .find(|l| l.starts_with(name) && l.contains(&format!("http://{origin}")))
            .map_or(0.0, |l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
    };
    // Besides the routed reads, copies go to each origin while it has few latencies (probes,
    // left to finish).
    let (slow_probes, fast_probes) =
        (line("gateway_origin_probes_total", slow), line("gateway_origin_probes_total", fast));
    assert_eq!(
        slow_n.started.load(Ordering::SeqCst) as f64,
        5.0 + slow_probes,
        "the cheap one was asked first each time"
    );
    assert_eq!(slow_n.finished.load(Ordering::SeqCst) as f64, slow_probes, "and cancelled each time");
    assert_eq!(fast_n.finished.load(Ordering::SeqCst) as f64, 5.0 + fast_probes);
    assert_eq!(line("gateway_origin_cost_total", slow), 5.0, "every attempt is paid");
    assert_eq!(line("gateway_origin_cost_total", fast), 50.0);
    assert_eq!(line("gateway_origin_cancelled_total", slow), 5.0);
    assert!(m.contains("gateway_sla_within_total 5"), "{m}");
}

/// OptWait, learning from what it sees: a cheap origin fast enough most of the time and a
/// dear one always fast. Once it has latencies it waits on the cheap one and hedges to the
/// dear one, meeting the SLA at well under the dear one's price.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optwait_meets_its_sla_for_less_than_the_dear_origin_alone() {
    // The cheap one: 10 ms, but every fourth read 300 ms.
    let n = Arc::new(AtomicU64::new(0));
    let n2 = Arc::clone(&n);
    let cheap = Router::new().fallback(routing::get(move || {
        let k = n2.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(Duration::from_millis(if k % 4 == 3 { 300 } else { 10 })).await;
            ([("cache-control", "no-store")], "cheap")
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let cheap_addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, cheap).await.unwrap() });
    let (dear, _) = origin(Duration::from_millis(5)).await;
    let g = gateway(
        vec![
            OriginSpec { url: format!("http://{cheap_addr}"), price: 1.0 },
            OriginSpec { url: format!("http://{dear}"), price: 10.0 },
        ],
        RouteKind::OptWait,
        parse_sla("90:150ms").unwrap(),
    )
    .await;
    let client = reqwest::Client::new();
    let mut within = 0;
    for i in 0..400 {
        let t = Instant::now();
        client.get(format!("http://{g}/r/{i}")).send().await.unwrap().text().await.unwrap();
        if i >= 200 && t.elapsed() <= Duration::from_millis(150) {
            within += 1;
        }
    }
    let m = reqwest::get(format!("http://{g}/metrics")).await.unwrap().text().await.unwrap();
    let cost: f64 = m
        .lines()
        .filter(|l| l.starts_with("gateway_origin_cost_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(within >= 180, "{within} of the last 200 within 150 ms");
    assert!(cost / 400.0 < 6.0, "{} per read: OptWait leaned on the cheap origin\n{m}", cost / 400.0);
}

/// A write goes to every origin, as Figurehead writes to every back-end, and is answered at
/// the first acknowledgement; the slower copy still lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_reaches_every_origin_and_is_answered_at_the_first_ack() {
    let mut origins = Vec::new();
    let mut counts = Vec::new();
    for delay in [Duration::from_millis(5), Duration::from_millis(300)] {
        let n = Arc::new(AtomicU64::new(0));
        let n2 = Arc::clone(&n);
        let app = Router::new().route(
            "/doc",
            routing::put(move |body: String| {
                let n = Arc::clone(&n2);
                async move {
                    tokio::time::sleep(delay).await;
                    assert_eq!(body, "v2");
                    n.fetch_add(1, Ordering::SeqCst);
                    axum::http::StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        origins.push(OriginSpec { url: format!("http://{}", listener.local_addr().unwrap()), price: 1.0 });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        counts.push(n);
    }
    let g = gateway(origins, RouteKind::OptWait, parse_sla("95:100ms").unwrap()).await;
    let t = Instant::now();
    let r = reqwest::Client::new().put(format!("http://{g}/doc")).body("v2").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert!(t.elapsed() < Duration::from_millis(250), "answered at the first ack: {:?}", t.elapsed());
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        counts.iter().map(|c| c.load(Ordering::SeqCst)).collect::<Vec<_>>(),
        [1, 1],
        "every origin has the write, once"
    );
}
