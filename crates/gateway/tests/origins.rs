//! The gateway over several origins of different speed and price (Figurehead's setting),
//! over loopback: a hedge's late attempt is cancelled when the first answer arrives, every
//! attempt is paid for in /metrics, OptWait learns to meet its SLA cheaply, and a write
//! reaches every origin, is answered "stored" only as the write rule says, and is sent again
//! to an origin that failed it, which reads avoid meanwhile.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::routing;
use switchyard_core::place::sla::write::WriteRule;
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
    // That the gateway did not wait for the slow origin is shown below without a clock: the
    // slow one finished none of the routed reads (each was cancelled when the fast one answered).
    // The SLA counter is judged against what this client saw: a read the client had within
    // 100 ms was within it at the gateway too, but on a loaded machine a read may be later than
    // that (it was once, at load 16: a fixed "all 5 within" failed on a stall, not a defect).
    let mut seen_within = 0;
    for i in 0..5 {
        let t = Instant::now();
        let body = reqwest::get(format!("http://{g}/item/{i}")).await.unwrap().text().await.unwrap();
        assert_eq!(body, "after 5ms", "the fast origin's answer");
        seen_within += usize::from(t.elapsed() <= Duration::from_millis(100));
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
    let within = m
        .lines()
        .find_map(|l| l.strip_prefix("gateway_sla_within_total "))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("no gateway_sla_within_total in {m}"));
    assert!(
        (seen_within..=5).contains(&within),
        "within the SLA: {within} by the gateway's count, {seen_within} of 5 by the client's clock"
    );
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

/// A write goes to every origin, as Figurehead writes to every back-end; under the default
/// rule it is answered once every origin took it (it was answered at the first, which told a
/// client "stored" of a write an origin might never take).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_reaches_every_origin_and_is_answered_once_every_origin_took_it() {
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
    let r = reqwest::Client::new().put(format!("http://{g}/doc")).body("v2").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.headers()["x-write-acks"], "2/2");
    assert_eq!(
        counts.iter().map(|c| c.load(Ordering::SeqCst)).collect::<Vec<_>>(),
        [1, 1],
        "every origin has the write, once"
    );
}

/// A tiny store at one origin: `GET /doc` answers what was last put (cacheable), `PUT /doc`
/// stores it, or answers `refuse` while that is set (0: takes it).
#[derive(Default)]
struct Store {
    body: std::sync::Mutex<String>,
    refuse: AtomicU64,
    puts: AtomicU64,
}

async fn store(initial: &str) -> (String, Arc<Store>) {
    let s = Arc::new(Store { body: std::sync::Mutex::new(initial.to_string()), ..Default::default() });
    let (g, p) = (Arc::clone(&s), Arc::clone(&s));
    let app = Router::new().route(
        "/doc",
        routing::get(move || {
            let s = Arc::clone(&g);
            async move { ([("cache-control", "max-age=60")], s.body.lock().unwrap().clone()) }
        })
        .put(move |body: String| {
            let s = Arc::clone(&p);
            async move {
                let refuse = s.refuse.load(Ordering::SeqCst);
                if refuse != 0 {
                    return axum::http::StatusCode::from_u16(refuse as u16).unwrap();
                }
                s.puts.fetch_add(1, Ordering::SeqCst);
                *s.body.lock().unwrap() = body;
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, s)
}

/// A counter's value from `/metrics` whose line holds every one of `parts`.
async fn metric(g: SocketAddr, name: &str, parts: &[&str]) -> Option<f64> {
    let m = reqwest::get(format!("http://{g}/metrics")).await.unwrap().text().await.unwrap();
    m.lines()
        .find(|l| l.starts_with(name) && parts.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The case: `--origin a@1 --origin b@0.2`, a `PUT` that `a` takes and `b` answers
/// 503. The client is not told "stored" (202, one of two), `b` is kept out of reads of
/// `/doc` (which would otherwise go to it, the cheaper, and cache its old body), the
/// outcome of each origin's attempt is in /metrics, and `b` is sent the write again until it
/// takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_one_origin_failed_is_not_stored_and_reads_avoid_that_origin_until_it_takes_it() {
    let (a, sa) = store("v1").await;
    let (b, sb) = store("v1").await;
    let g = gateway(
        vec![OriginSpec { url: a.clone(), price: 1.0 }, OriginSpec { url: b.clone(), price: 0.2 }],
        RouteKind::LeastOutstanding,
        parse_sla("95:1s").unwrap(),
    )
    .await;
    let http = reqwest::Client::new();
    assert_eq!(http.get(format!("http://{g}/doc")).send().await.unwrap().text().await.unwrap(), "v1");
    sb.refuse.store(503, Ordering::SeqCst);
    let r = http.put(format!("http://{g}/doc")).body("v2").send().await.unwrap();
    let (status, acks) = (r.status().as_u16(), r.headers().get("x-write-acks").cloned());
    let body = r.text().await.unwrap();
    assert_eq!(status, 202, "only one of two origins took it: {body}");
    assert_eq!(acks.unwrap(), "1/2");
    assert!(body.contains(&b) && body.contains("503") && body.contains("--write-rule all"), "{body}");
    assert_eq!(*sa.body.lock().unwrap(), "v2");
    // Reads go to the cheaper origin, but not while it lacks the write; nor is its old body
    // cached.
    for _ in 0..3 {
        let got = http.get(format!("http://{g}/doc")).header("cache-control", "no-cache").send().await.unwrap();
        assert_eq!(got.text().await.unwrap(), "v2", "a read went to the origin without the write");
    }
    assert_eq!(http.get(format!("http://{g}/doc")).send().await.unwrap().text().await.unwrap(), "v2");
    let b_label = format!("origin=\"{b}\"");
    assert!(metric(g, "gateway_origin_writes_total", &[&b_label, "outcome=\"failed\""]).await >= Some(1.0));
    assert_eq!(
        metric(g, "gateway_origin_writes_total", &[&format!("origin=\"{a}\""), "outcome=\"took\""]).await,
        Some(1.0)
    );
    assert_eq!(metric(g, "gateway_writes_total", &["answer=\"pending\""]).await, Some(1.0));
    assert_eq!(metric(g, "gateway_origin_writes_owed", &[&b_label]).await, Some(1.0));
    // b recovers, and is sent the write until it takes it.
    sb.refuse.store(0, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while *sb.body.lock().unwrap() != "v2" {
        assert!(Instant::now() < deadline, "b never got the write");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    while metric(g, "gateway_origin_writes_owed", &[&b_label]).await != Some(0.0) {
        assert!(Instant::now() < deadline, "b is still owed the write");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(metric(g, "gateway_write_backlog_bytes", &[]).await, Some(0.0), "nothing held once b has it");
    assert_eq!(sb.puts.load(Ordering::SeqCst), 1, "b took it once");
}

async fn gateway_with(origins: Vec<OriginSpec>, f: impl FnOnce(&mut OriginConfig)) -> SocketAddr {
    let mut config = OriginConfig { origins, route: RouteKind::LeastOutstanding, ..OriginConfig::new("http://unused") };
    f(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, origin::router(config)).await.unwrap() });
    addr
}

/// Under `--write-rule majority`, two of three is stored: the client gets the origin's own
/// answer, with how many took it and which is still being sent it; reads avoid that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_write_is_stored_and_names_the_origin_still_owed_it() {
    let (a, _) = store("v1").await;
    let (b, sb) = store("v1").await;
    let (c, _) = store("v1").await;
    let specs = vec![
        OriginSpec { url: a, price: 1.0 },
        OriginSpec { url: b.clone(), price: 0.1 },
        OriginSpec { url: c, price: 2.0 },
    ];
    let g = gateway_with(specs, |c| c.write_rule = WriteRule::Majority).await;
    sb.refuse.store(500, Ordering::SeqCst);
    let http = reqwest::Client::new();
    let r = http.put(format!("http://{g}/doc")).body("v2").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(r.headers()["x-write-acks"], "2/3");
    assert_eq!(r.headers()["x-write-rule"], "majority");
    assert_eq!(r.headers()["x-write-pending"], b.as_str());
    let got = http.get(format!("http://{g}/doc")).send().await.unwrap().text().await.unwrap();
    assert_eq!(got, "v2", "not from the cheapest, which lacks the write");
}

/// An origin that refuses what another took (409) will not have it: the client is told so
/// (502, naming it), and reads avoid it until a later PUT reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_an_origin_refuses_is_a_502_and_reads_avoid_it_until_a_later_put() {
    let (a, _) = store("v1").await;
    let (b, sb) = store("v1").await;
    let specs = vec![OriginSpec { url: a, price: 1.0 }, OriginSpec { url: b.clone(), price: 0.1 }];
    let g = gateway_with(specs, |_| {}).await;
    sb.refuse.store(409, Ordering::SeqCst);
    let http = reqwest::Client::new();
    let r = http.put(format!("http://{g}/doc")).body("v2").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 502);
    let body = r.text().await.unwrap();
    assert!(body.contains(&b) && body.contains("409") && body.contains("will not have it"), "{body}");
    let read = || async {
        http.get(format!("http://{g}/doc"))
            .header("cache-control", "no-cache")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    };
    assert_eq!(read().await, "v2");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(read().await, "v2", "still avoided: b is never sent it again");
    sb.refuse.store(0, Ordering::SeqCst);
    let r = http.put(format!("http://{g}/doc")).body("v3").send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-write-acks"].to_str().unwrap()), (204, "2/2"));
    assert_eq!(*sb.body.lock().unwrap(), "v3");
}

/// What is held for an origin that does not take writes is bounded by --write-memory: a write
/// that would pass it is refused with 503 before any origin is sent it; once the laggard has
/// taken what it was owed, writes go through again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_held_for_a_laggard_are_bounded_and_a_write_past_the_bound_is_refused_unsent() {
    let (a, sa) = store("v1").await;
    let (b, sb) = store("v1").await;
    let specs = vec![OriginSpec { url: a, price: 1.0 }, OriginSpec { url: b, price: 0.1 }];
    let g = gateway_with(specs, |c| c.write_memory = 1000).await;
    sb.refuse.store(503, Ordering::SeqCst);
    let http = reqwest::Client::new();
    let big = "x".repeat(600);
    let r = http.put(format!("http://{g}/doc")).body(big.clone()).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let held = metric(g, "gateway_write_backlog_bytes", &[]).await.unwrap();
    assert!((600.0..=1000.0).contains(&held), "{held} bytes held");
    let r = http.put(format!("http://{g}/other")).body(big.clone()).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert!(r.headers().contains_key("retry-after"));
    let body = r.text().await.unwrap();
    assert!(body.contains("--write-memory") && body.contains("was not sent to any origin"), "{body}");
    assert_eq!(sa.puts.load(Ordering::SeqCst), 1, "the refused write reached no origin");
    assert_eq!(metric(g, "gateway_writes_total", &["answer=\"full\""]).await, Some(1.0));
    sb.refuse.store(0, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(g, "gateway_write_backlog_bytes", &[]).await != Some(0.0) {
        assert!(Instant::now() < deadline, "the laggard never took what it was owed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = http.put(format!("http://{g}/doc")).body(big).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 204);
}
