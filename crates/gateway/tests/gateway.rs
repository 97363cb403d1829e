//! The gateway and the field emulator over loopback: exact coalescing, waiters that outlive
//! a cancelled asker, and clear answers when the field fails or is slow.

use std::net::SocketAddr;
use std::time::Duration;

use switchyard_core::cache::{AgeFrom, Lookup};
use switchyard_gateway::field::{self, FieldConfig};
use switchyard_gateway::gateway::{self, GatewayConfig, ReadingReply};
use switchyard_models::{ChangeModel, FieldSpec, Stations};
use tokio::sync::oneshot;

/// Serves `router` on a loopback port until the returned sender is dropped or fired.
async fn serve(router: axum::Router) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (addr, stop)
}

/// The lattice field, `scale` wall seconds per model second.
async fn field(scale: f64) -> (SocketAddr, oneshot::Sender<()>) {
    let spec =
        FieldSpec::Lattice { model: ChangeModel::Correlated, rate: 90.0, stations: Stations::Quadrants, rule: None };
    let config = FieldConfig { spec, seed: 4, time_scale: scale, link_capacity: 25.0, max_wait_s: 2.0 };
    serve(field::router(config).unwrap()).await
}

fn config(field: SocketAddr, lookup: Lookup) -> GatewayConfig {
    GatewayConfig {
        field: format!("http://{field}"),
        field_udp: None,
        lookup,
        ttl: Duration::from_secs(60),
        age_from: AgeFrom::Load,
        keep_approximations: false,
        upstream_timeout: Duration::from_secs(5),
        wait_timeout: None,
        stale_if_error: None,
        measure_deviation: false,
        seed: 1,
    }
}

async fn gateway(config: GatewayConfig) -> SocketAddr {
    let router = gateway::router(config).await.unwrap();
    let (addr, stop) = serve(router).await;
    std::mem::forget(stop); // lives as long as the test
    addr
}

/// A counter's value from a `/metrics` page.
async fn counter(addr: SocketAddr, name: &str) -> f64 {
    let text = reqwest::get(format!("http://{addr}/metrics")).await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
        .parse()
        .unwrap()
}

async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let r = reqwest::get(format!("http://{addr}{path}")).await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_misses_of_one_location_make_one_field_read() {
    let (f, _stop) = field(0.05).await; // round trips of up to 100 ms
    let g = gateway(config(f, Lookup::Piggyback)).await;
    let asks: Vec<_> = (0..50).map(|_| tokio::spawn(get(g, "/v1/readings/321"))).collect();
    let mut values = Vec::new();
    for a in asks {
        let (status, body) = a.await.unwrap();
        assert_eq!(status, 200, "{body}");
        let r: ReadingReply = serde_json::from_str(&body).unwrap();
        values.push(r.value.to_bits());
    }
    values.dedup();
    assert_eq!(values.len(), 1, "every asker got the one read's value");
    assert_eq!(counter(f, "field_reads_total").await, 1.0);
    assert_eq!(counter(g, "gateway_upstream_reads_total").await, 1.0);
    assert_eq!(counter(g, "gateway_misses_total").await, 1.0);
    let waited = counter(g, "gateway_coalesced_total").await + counter(g, "gateway_hits_total").await;
    assert_eq!(waited, 49.0);

    // Simple lookups do not coalesce: the same crowd reads the field more than once.
    let s = gateway(config(f, Lookup::Simple)).await;
    let asks: Vec<_> = (0..20).map(|_| tokio::spawn(get(s, "/v1/readings/654"))).collect();
    for a in asks {
        assert_eq!(a.await.unwrap().0, 200);
    }
    assert!(counter(s, "gateway_upstream_reads_total").await > 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_outlives_the_asker_who_started_the_read() {
    let (f, _stop) = field(0.2).await; // round trips of up to 400 ms
    let g = gateway(config(f, Lookup::Piggyback)).await;
    // Location 999 is far from every station: its read takes most of the 400 ms.
    let first = tokio::spawn(get(g, "/v1/readings/999"));
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(counter(g, "gateway_misses_total").await, 1.0, "the first asker started the read");
    let second = tokio::spawn(get(g, "/v1/readings/999"));
    tokio::time::sleep(Duration::from_millis(30)).await;
    first.abort();
    // A read run inside the first asker's handler would die with it: the second would then
    // wait for ever, so bound the wait.
    let (status, body) =
        tokio::time::timeout(Duration::from_secs(5), second).await.expect("the waiter was answered").unwrap();
    assert_eq!(status, 200, "{body}");
    let r: ReadingReply = serde_json::from_str(&body).unwrap();
    assert_eq!(r.source, "coalesced");
    assert_eq!(counter(f, "field_reads_total").await, 1.0, "one read, though its asker left");
    // The read filled the cache: the next asker hits.
    let (_, body) = get(g, "/v1/readings/999").await;
    assert_eq!(serde_json::from_str::<ReadingReply>(&body).unwrap().source, "cache");
    assert_eq!(counter(g, "gateway_deviation_samples_total").await, 0.0, "not measured unless asked");
    // A reader who accepts nothing older than now reads the field again.
    let (_, body) = get(g, "/v1/readings/999?max_age=0").await;
    assert_eq!(serde_json::from_str::<ReadingReply>(&body).unwrap().source, "field");
    assert_eq!(counter(f, "field_reads_total").await, 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_read_is_a_502_or_a_value_marked_stale() {
    let (f, stop) = field(0.01).await;
    let short = |stale: Option<Duration>| GatewayConfig {
        ttl: Duration::from_millis(50),
        stale_if_error: stale,
        upstream_timeout: Duration::from_secs(2),
        ..config(f, Lookup::Piggyback)
    };
    let plain = gateway(short(None)).await;
    let lenient = gateway(short(Some(Duration::from_secs(60)))).await;
    for g in [plain, lenient] {
        assert_eq!(get(g, "/v1/readings/5").await.0, 200);
    }
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await; // the entries go stale
    let (status, body) = get(plain, "/v1/readings/5").await;
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("reading location 5 from the field failed"), "{body}");
    let (status, body) = get(lenient, "/v1/readings/5").await;
    assert_eq!(status, 200, "{body}");
    let r: ReadingReply = serde_json::from_str(&body).unwrap();
    assert!(r.stale && r.age_s >= 0.05, "{body}");
    assert_eq!(counter(lenient, "gateway_stale_answers_total").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_field_is_a_504_and_bad_requests_say_what_is_wrong() {
    let (f, _stop) = field(2.0).await; // round trips of up to 4 s
    let g = gateway(GatewayConfig { upstream_timeout: Duration::from_millis(100), ..config(f, Lookup::Simple) }).await;
    let (status, body) = get(g, "/v1/readings/999").await;
    assert_eq!(status, 504, "{body}");
    assert!(body.contains("did not answer"), "{body}");
    let (status, body) = get(g, "/v1/readings/1000").await;
    assert_eq!((status, body.contains("locations 0 to 999")), (404, true), "{body}");
    let (status, body) = get(g, "/v1/readings/3?max_age=-1").await;
    assert_eq!((status, body.contains("max_age `-1`")), (400, true), "{body}");
    // Without the field's description there is no gateway, and the error says what was asked.
    let e = gateway::router(config("127.0.0.1:9".parse().unwrap(), Lookup::Simple)).await.unwrap_err();
    assert!(e.to_string().contains("asking http://127.0.0.1:9/v1/field"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deviation_from_the_true_value_is_measured_when_asked() {
    let (f, _stop) = field(0.01).await;
    let g = gateway(GatewayConfig { measure_deviation: true, ..config(f, Lookup::AllHits) }).await;
    for _ in 0..5 {
        assert_eq!(get(g, "/v1/readings/17").await.0, 200);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(counter(g, "gateway_deviation_samples_total").await, 5.0);
    // All hits never refreshes, and the field changes 90 times a second (at 100× speed, every
    // location about 9 times a second): the answers drift from the truth.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(get(g, "/v1/readings/17").await.0, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(counter(g, "gateway_deviation_total").await > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_field_answers_over_udp_too() {
    let spec =
        FieldSpec::Lattice { model: ChangeModel::Correlated, rate: 90.0, stations: Stations::Quadrants, rule: None };
    let service =
        field::FieldService::new(FieldConfig { spec, seed: 4, time_scale: 0.05, link_capacity: 25.0, max_wait_s: 2.0 })
            .unwrap();
    let (http, _stop) = serve(service.router()).await;
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let udp = socket.local_addr().unwrap();
    let udp_service = service.clone();
    tokio::spawn(async move { field::serve_udp(&udp_service, socket).await });
    // A stranger's datagram is answered with what to send.
    let probe = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    probe.send_to(b"hello", udp).await.unwrap();
    let mut buf = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(2), probe.recv(&mut buf)).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).contains("send `read LOCATION`"));
    // A crowd through a gateway reading over UDP makes one read.
    let g = gateway(GatewayConfig { field_udp: Some(udp), ..config(http, Lookup::Piggyback) }).await;
    let asks: Vec<_> = (0..20).map(|_| tokio::spawn(get(g, "/v1/readings/250"))).collect();
    for a in asks {
        assert_eq!(a.await.unwrap().0, 200);
    }
    assert_eq!(counter(http, "field_reads_total").await, 1.0);
    let (status, body) = get(g, "/v1/readings/251?max_age=0").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(serde_json::from_str::<ReadingReply>(&body).unwrap().source, "field");
}

/// A reader whose bound no read under way can meet starts its own read and is answered by it,
/// with a value sensed after it asked; the earlier asker is answered by the earlier read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_with_a_tight_bound_gets_a_read_of_its_own() {
    let (f, _stop) = field(0.2).await; // location 999's read takes about 0.4 s
    let g = gateway(config(f, Lookup::Piggyback)).await;
    let first = tokio::spawn(get(g, "/v1/readings/999"));
    tokio::time::sleep(Duration::from_millis(150)).await;
    let asked_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() * 1e3;
    let (status, body) = get(g, "/v1/readings/999?max_age=0.05").await;
    assert_eq!(status, 200, "{body}");
    let tight: ReadingReply = serde_json::from_str(&body).unwrap();
    assert_eq!(tight.source, "field", "its own read, not the one under way");
    assert!(tight.sensed_at_ms >= asked_ms - 5.0, "sensed {} ms before it asked", asked_ms - tight.sensed_at_ms);
    let (status, body) = first.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let early: ReadingReply = serde_json::from_str(&body).unwrap();
    assert!(early.sensed_at_ms < tight.sensed_at_ms, "each answered by its own read");
    assert_eq!(counter(f, "field_reads_total").await, 2.0);
}

/// A field whose reads hang (its description answers, its sensors never do): a read's waiters
/// are answered 504 within the wait bound, saying so, and the next query reads again instead
/// of joining the read that hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_hangs_bounds_its_waiters_and_the_next_query_reads_again() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let (real, _stop) = field(0.05).await;
    let shape: serde_json::Value = reqwest::get(format!("http://{real}/v1/field")).await.unwrap().json().await.unwrap();
    let started = Arc::new(AtomicU64::new(0));
    let s = Arc::clone(&started);
    let app =
        axum::Router::new().route("/v1/field", axum::routing::get(move || async move { axum::Json(shape) })).route(
            "/v1/sensors/{l}",
            axum::routing::get(move || {
                s.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    "never"
                }
            }),
        );
    let (hanging, _stop2) = serve(app).await;
    let g = gateway(GatewayConfig {
        upstream_timeout: Duration::from_secs(60),
        wait_timeout: Some(Duration::from_millis(300)),
        ..config(hanging, Lookup::Piggyback)
    })
    .await;
    // Generous: only a hang takes this long.
    let bounded = |f| async move { tokio::time::timeout(Duration::from_secs(15), f).await.expect("a query hung") };
    let asks: Vec<_> = (0..3).map(|_| tokio::spawn(get(g, "/v1/readings/7"))).collect();
    for a in asks {
        let (status, body) = bounded(a).await.unwrap();
        assert_eq!(status, 504, "{body}");
        assert!(body.contains("--wait-timeout"), "{body}");
    }
    assert_eq!(started.load(Ordering::SeqCst), 1, "the three shared one read");
    // The read that hangs is failed within the bound too (a query that came just before then
    // joined it): a query soon reads again.
    for _ in 0..20 {
        let (status, body) = bounded(tokio::spawn(get(g, "/v1/readings/7"))).await.unwrap();
        assert_eq!(status, 504, "{body}");
        if started.load(Ordering::SeqCst) == 2 {
            return;
        }
    }
    panic!("every query joined the read that hung");
}
