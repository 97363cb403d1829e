//! The gateway in front of a generic HTTP origin, over loopback: exact coalescing, a reader's
//! max-age, stale-while-revalidate, stale-if-error, what is not kept, revalidation, variants,
//! a client's conditional and range requests, and one user's responses never reaching
//! another. (The public cache test suite runs through it in `bench/cache-tests.sh`.)

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing;
use switchyard_core::cache::http::Heuristic;
use switchyard_gateway::origin::{self, OriginConfig};

#[derive(Default)]
struct Origin {
    reads: AtomicU64,
    failing: AtomicBool,
}

/// An origin that takes 100 ms per answer and numbers its answers.
async fn origin() -> (SocketAddr, Arc<Origin>) {
    let state = Arc::new(Origin::default());
    let app = Router::new()
        .route(
            "/item/{name}",
            routing::get(|State(o): State<Arc<Origin>>, Path(name): Path<String>| async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if o.failing.load(Ordering::SeqCst) {
                    return (StatusCode::INTERNAL_SERVER_ERROR, "down".to_string());
                }
                let n = o.reads.fetch_add(1, Ordering::SeqCst) + 1;
                (StatusCode::OK, format!("{name} #{n}"))
            }),
        )
        .route(
            "/private",
            routing::get(|State(o): State<Arc<Origin>>| async move {
                o.reads.fetch_add(1, Ordering::SeqCst);
                ([("cache-control", "private"), ("etag", "\"v1\"")], "one user's")
            }),
        )
        .route(
            "/forbidden",
            routing::get(|State(o): State<Arc<Origin>>| async move {
                o.reads.fetch_add(1, Ordering::SeqCst);
                (StatusCode::FORBIDDEN, "no")
            }),
        )
        .with_state(Arc::clone(&state));
    (serve(app).await, state)
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A fixed lifetime for responses that state none (the test origins' answers mostly don't).
fn heuristic(d: Duration) -> Heuristic {
    Heuristic { default: Some(d), ..Default::default() }
}

fn config(origin: SocketAddr) -> OriginConfig {
    OriginConfig {
        heuristic: heuristic(Duration::from_secs(60)),
        upstream_timeout: Duration::from_secs(5),
        ..OriginConfig::new(format!("http://{origin}"))
    }
}

/// Status, `X-Cache`, `X-Cache-Stale` and body.
async fn get_with(gateway: SocketAddr, path: &str, cache_control: Option<&str>) -> (u16, String, String, String) {
    let mut req = reqwest::Client::new().get(format!("http://{gateway}{path}"));
    if let Some(cc) = cache_control {
        req = req.header("cache-control", cc);
    }
    let r = req.send().await.unwrap();
    let h = |name: &str| r.headers().get(name).map_or(String::new(), |v| v.to_str().unwrap().to_string());
    let (status, how, stale) = (r.status().as_u16(), h("x-cache"), h("x-cache-stale"));
    (status, how, stale, r.text().await.unwrap())
}

async fn get(gateway: SocketAddr, path: &str) -> (u16, String, String, String) {
    get_with(gateway, path, None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_misses_makes_one_origin_read_and_a_reader_may_ask_for_fresher() {
    let (o, state) = origin().await;
    let g = serve(origin::router(config(o))).await;
    let asks: Vec<_> = (0..50).map(|_| tokio::spawn(get(g, "/item/a?v=1"))).collect();
    let mut bodies = Vec::new();
    let mut misses = 0;
    for a in asks {
        let (status, how, _, body) = a.await.unwrap();
        assert_eq!(status, 200);
        misses += usize::from(how == "miss");
        bodies.push(body);
    }
    bodies.dedup();
    assert_eq!(bodies, ["a #1"]);
    assert_eq!((state.reads.load(Ordering::SeqCst), misses), (1, 1));
    assert_eq!(get(g, "/item/a?v=1").await.1, "hit");
    // The query is part of the key.
    assert_eq!(get(g, "/item/a?v=2").await.3, "a #2");
    // A reader who accepts nothing older than now gets a new read.
    let (_, how, _, body) = get_with(g, "/item/a?v=1", Some("no-cache")).await;
    assert_eq!((how.as_str(), body.as_str()), ("miss", "a #3"));
    let (_, how, _, _) = get_with(g, "/item/a?v=1", Some("max-age=30")).await;
    assert_eq!(how, "hit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_answer_comes_at_once_while_one_read_refreshes_it() {
    let (o, state) = origin().await;
    // A response's age counts from when its read started (RFC 9111 §4.2.3: the response delay
    // is part of it), so 250 ms of freshness is 150 ms after a 100 ms read arrives.
    let g = serve(origin::router(OriginConfig {
        heuristic: heuristic(Duration::from_millis(250)),
        stale_while_revalidate: Some(Duration::from_secs(10)),
        ..config(o)
    }))
    .await;
    assert_eq!(get(g, "/item/b").await.3, "b #1");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    let (status, how, stale, body) = get(g, "/item/b").await;
    assert!(t.elapsed() < Duration::from_millis(90), "answered without waiting for the origin: {:?}", t.elapsed());
    assert_eq!((status, how.as_str(), stale.as_str(), body.as_str()), (200, "stale", "revalidating", "b #1"));
    // A second stale request does not start a second read.
    assert_eq!(get(g, "/item/b").await.2, "revalidating");
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (_, how, _, body) = get(g, "/item/b").await;
    assert_eq!((how.as_str(), body.as_str()), ("hit", "b #2"));
    assert_eq!(state.reads.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_origin_s_answer_is_passed_on_or_the_stale_answer_marked() {
    let (o, state) = origin().await;
    let short =
        |sie| OriginConfig { heuristic: heuristic(Duration::from_millis(50)), stale_if_error: sie, ..config(o) };
    let plain = serve(origin::router(short(None))).await;
    let lenient = serve(origin::router(short(Some(Duration::from_secs(10))))).await;
    for g in [plain, lenient] {
        assert_eq!(get(g, "/item/c").await.0, 200);
    }
    state.failing.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(80)).await;
    let (status, how, _, body) = get(plain, "/item/c").await;
    assert_eq!((status, how.as_str(), body.as_str()), (500, "miss", "down"), "the origin's own answer");
    let (status, how, stale, body) = get(lenient, "/item/c").await;
    assert_eq!((status, how.as_str(), stale.as_str()), (200, "stale", "error"), "{body}");
    assert!(body.starts_with("c #"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_not_kept_are_passed_on_and_read_again() {
    let (o, state) = origin().await;
    let g = serve(origin::router(config(o))).await;
    for _ in 0..2 {
        let (status, how, _, body) = get(g, "/forbidden").await;
        assert_eq!((status, how.as_str(), body.as_str()), (403, "miss", "no"));
    }
    assert_eq!(state.reads.load(Ordering::SeqCst), 2);
    let metrics = reqwest::get(format!("http://{g}/metrics")).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("gateway_misses_total 2"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_response_is_passed_on_with_its_headers_and_never_shared() {
    let (o, state) = origin().await;
    let g = serve(origin::router(config(o))).await;
    for _ in 0..2 {
        let r = reqwest::get(format!("http://{g}/private")).await.unwrap();
        assert_eq!(r.headers().get("etag").unwrap(), "\"v1\"");
        assert_eq!(r.headers().get("x-cache").unwrap(), "miss");
    }
    assert_eq!(state.reads.load(Ordering::SeqCst), 2, "read again: not kept");
}

/// An origin whose answers carry their own freshness.
async fn worded_origin() -> (SocketAddr, Arc<Origin>) {
    let state = Arc::new(Origin::default());
    let said = |cc: &'static str, extra: Option<(&'static str, String)>| {
        move |State(o): State<Arc<Origin>>| async move {
            let n = o.reads.fetch_add(1, Ordering::SeqCst) + 1;
            let mut r = axum::response::IntoResponse::into_response(format!("#{n}"));
            if !cc.is_empty() {
                r.headers_mut().insert("cache-control", cc.parse().unwrap());
            }
            if let Some((name, value)) = extra.clone() {
                r.headers_mut().insert(name, value.parse().unwrap());
            }
            r
        }
    };
    let past = httpdate::fmt_http_date(std::time::SystemTime::now() - Duration::from_secs(60));
    let app = Router::new()
        .route("/max-age-1", routing::get(said("max-age=1", None)))
        .route("/s-maxage", routing::get(said("max-age=0, s-maxage=60", None)))
        .route("/aged", routing::get(said("max-age=2", Some(("age", "2".into())))))
        .route("/expired", routing::get(said("", Some(("expires", past)))))
        .route("/silent", routing::get(said("", None)))
        .route("/varies", routing::get(said("max-age=60", Some(("vary", "accept-encoding".into())))))
        .with_state(Arc::clone(&state));
    (serve(app).await, state)
}

/// The origin's word on freshness decides, not the gateway's default (which used to: a
/// `max-age=1` response was a fresh hit at Age 3 and 4 under `--ttl 60`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_is_fresh_as_long_as_its_origin_says() {
    let (o, state) = worded_origin().await;
    let g = serve(origin::router(config(o))).await;
    let reads = || state.reads.load(Ordering::SeqCst);
    // max-age=1: a hit at once, a new read once a second has passed.
    just_after_a_second_turns().await;
    assert_eq!(get(g, "/max-age-1").await.1, "miss");
    assert_eq!(get(g, "/max-age-1").await.1, "hit");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, how, _, body) = get(g, "/max-age-1").await;
    assert_eq!((how.as_str(), body.as_str()), ("miss", "#2"), "stale by the origin's word");
    // s-maxage wins over max-age for a shared cache.
    assert_eq!(get(g, "/s-maxage").await.1, "miss");
    assert_eq!(get(g, "/s-maxage").await.1, "hit");
    // A response that arrived two seconds old with max-age=2 is never fresh here.
    let before = reads();
    assert_eq!(get(g, "/aged").await.1, "miss");
    assert_eq!(get(g, "/aged").await.1, "miss");
    assert_eq!(reads(), before + 2);
    // Expires in the past: stale at once.
    assert_eq!(get(g, "/expired").await.1, "miss");
    assert_eq!(get(g, "/expired").await.1, "miss");
    // A response that varies with request headers is kept for requests with the same ones.
    assert_eq!(get(g, "/varies").await.1, "miss");
    assert_eq!(get(g, "/varies").await.1, "hit");
    // No word at all: the gateway's default (60 s here) applies.
    assert_eq!(get(g, "/silent").await.1, "miss");
    assert_eq!(get(g, "/silent").await.1, "hit");
    // The Age the origin gave counts in the Age the gateway gives.
    let r = reqwest::get(format!("http://{g}/aged")).await.unwrap();
    assert!(r.headers()["age"].to_str().unwrap().parse::<u64>().unwrap() >= 2);
}

/// Methods the cache does not answer go to the origin with their bodies (the cache-tests
/// suite sets up every test with a PUT through the cache); an unsafe one that succeeds
/// invalidates the target and the Location it names; HEAD is the cached GET without a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_methods_pass_through_and_invalidate_what_they_change() {
    let doc = Arc::new(std::sync::Mutex::new(String::from("v1")));
    let app = Router::new()
        .route(
            "/doc",
            routing::get(|State(d): State<Arc<std::sync::Mutex<String>>>| async move {
                ([("cache-control", "max-age=60")], d.lock().unwrap().clone())
            })
            .put(|State(d): State<Arc<std::sync::Mutex<String>>>, body: String| async move {
                *d.lock().unwrap() = body;
                StatusCode::NO_CONTENT
            }),
        )
        .route(
            "/other",
            routing::post(|State(d): State<Arc<std::sync::Mutex<String>>>, body: String| async move {
                *d.lock().unwrap() = body;
                (StatusCode::CREATED, [("location", "/doc")], "made")
            }),
        )
        .with_state(Arc::clone(&doc));
    let o = serve(app).await;
    let g = serve(origin::router(config(o))).await;
    let client = reqwest::Client::new();
    assert_eq!(get(g, "/doc").await.3, "v1");
    assert_eq!(get(g, "/doc").await.1, "hit");
    let r = client.put(format!("http://{g}/doc")).body("v2").send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-cache"].to_str().unwrap()), (204, "pass"));
    let (_, how, _, body) = get(g, "/doc").await;
    assert_eq!((how.as_str(), body.as_str()), ("miss", "v2"), "the PUT invalidated it");
    let r = client.post(format!("http://{g}/other")).body("v3").send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(get(g, "/doc").await.3, "v3", "the POST's Location was invalidated");
    let r = client.head(format!("http://{g}/doc")).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-cache"].to_str().unwrap()), (200, "hit"));
    assert!(r.bytes().await.unwrap().is_empty());
    let r = client.delete(format!("http://{g}/nowhere")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404, "the origin's own answer, passed on");
}

/// A response the origin says must be revalidated is never served stale, under
/// stale-while-revalidate or stale-if-error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn must_revalidate_is_never_served_stale() {
    let reads = Arc::new(AtomicU64::new(0));
    let failing = Arc::new(AtomicBool::new(false));
    let (r2, f2) = (Arc::clone(&reads), Arc::clone(&failing));
    let app = Router::new().route(
        "/strict",
        routing::get(move || {
            let (r, f) = (Arc::clone(&r2), Arc::clone(&f2));
            async move {
                if f.load(Ordering::SeqCst) {
                    return (StatusCode::INTERNAL_SERVER_ERROR, [("cache-control", "no-store")], "down".to_string());
                }
                let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                (StatusCode::OK, [("cache-control", "max-age=1, must-revalidate")], format!("#{n}"))
            }
        }),
    );
    let o = serve(app).await;
    let g = serve(origin::router(OriginConfig {
        stale_while_revalidate: Some(Duration::from_secs(30)),
        stale_if_error: Some(Duration::from_secs(30)),
        ..config(o)
    }))
    .await;
    assert_eq!(get(g, "/strict").await.3, "#1");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (_, how, _, body) = get(g, "/strict").await;
    assert_eq!((how.as_str(), body.as_str()), ("miss", "#2"), "not served stale while revalidating");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    failing.store(true, Ordering::SeqCst);
    let (status, how, _, _) = get(g, "/strict").await;
    assert_eq!((status, how.as_str()), (500, "miss"), "not served stale on error either");
}

/// An origin with validators: `/tagged` answers `304` to its own `ETag` (counting those),
/// `/by-language` varies on `Accept-Language`, `/mine` is `private` and slow, `/long` has a
/// body to take ranges of.
async fn validating_origin() -> (SocketAddr, Arc<Origin>, Arc<AtomicU64>) {
    let state = Arc::new(Origin::default());
    let not_modified = Arc::new(AtomicU64::new(0));
    let nm = Arc::clone(&not_modified);
    let app = Router::new()
        .route(
            "/tagged",
            routing::get(move |State(o): State<Arc<Origin>>, h: axum::http::HeaderMap| {
                let nm = Arc::clone(&nm);
                async move {
                    o.reads.fetch_add(1, Ordering::SeqCst);
                    let n = o.reads.load(Ordering::SeqCst);
                    let cc = ("cache-control", "max-age=1");
                    if h.get("if-none-match").is_some_and(|v| v == "\"v1\"") {
                        nm.fetch_add(1, Ordering::SeqCst);
                        let fresh = format!("fresh-{n}");
                        return (
                            StatusCode::NOT_MODIFIED,
                            [cc, ("etag", "\"v1\""), ("x-seen", fresh.leak())],
                            String::new(),
                        );
                    }
                    (StatusCode::OK, [cc, ("etag", "\"v1\""), ("x-seen", "first")], "the body".to_string())
                }
            }),
        )
        .route(
            "/by-language",
            routing::get(|State(o): State<Arc<Origin>>, h: axum::http::HeaderMap| async move {
                o.reads.fetch_add(1, Ordering::SeqCst);
                let lang = h.get("accept-language").map_or("none".to_string(), |v| v.to_str().unwrap().to_string());
                ([("cache-control", "max-age=60"), ("vary", "Accept-Language")], format!("in {lang}"))
            }),
        )
        .route(
            "/mine",
            routing::get(|State(o): State<Arc<Origin>>, h: axum::http::HeaderMap| async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                o.reads.fetch_add(1, Ordering::SeqCst);
                let who = h.get("cookie").map_or("nobody".to_string(), |v| v.to_str().unwrap().to_string());
                ([("cache-control", "private, max-age=60")], format!("for {who}"))
            }),
        )
        .route("/long", routing::get(|| async { ([("cache-control", "max-age=60")], "0123456789") }))
        .with_state(Arc::clone(&state));
    (serve(app).await, state, not_modified)
}

/// A stale response with an `ETag` is revalidated: the origin's `304` freshens it, its
/// fields replace the stored ones, and the body is the stored one.
/// Waits until just after the wall clock's second turns. Ages are whole seconds of the wall
/// clock (`Date` has no finer resolution; `cache::http::initial_age`), so a `max-age=1`
/// exchange that straddles a turn arrives a second old, already stale: a test that expects a
/// hit right after it must start it just after a turn (CI failed once without).
async fn just_after_a_second_turns() {
    let into = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    tokio::time::sleep(Duration::from_nanos(u64::from(1_000_000_000 - into) + 5_000_000)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_response_is_revalidated_and_its_fields_updated() {
    let (o, _, not_modified) = validating_origin().await;
    let g = serve(origin::router(config(o))).await;
    let r = reqwest::get(format!("http://{g}/tagged")).await.unwrap();
    assert_eq!(r.headers()["x-seen"], "first");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // The revalidation is followed by a request that must find it fresh.
    just_after_a_second_turns().await;
    let r = reqwest::get(format!("http://{g}/tagged")).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["x-cache"], "revalidated");
    let seen = r.headers()["x-seen"].to_str().unwrap().to_string();
    assert!(seen.starts_with("fresh-"), "the 304's field replaced the stored one: {seen}");
    assert_eq!(r.text().await.unwrap(), "the body");
    assert_eq!(not_modified.load(Ordering::SeqCst), 1);
    let r = reqwest::get(format!("http://{g}/tagged")).await.unwrap();
    assert_eq!(
        (r.headers()["x-cache"].to_str().unwrap(), r.headers()["x-seen"].to_str().unwrap()),
        ("hit", seen.as_str())
    );
}

/// A client's `If-None-Match` and `Range` are answered from what is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_and_range_requests_are_answered_from_the_store() {
    let (o, _, _) = validating_origin().await;
    let g = serve(origin::router(config(o))).await;
    let client = reqwest::Client::new();
    assert_eq!(get(g, "/tagged").await.0, 200);
    let r = client.get(format!("http://{g}/tagged")).header("if-none-match", "W/\"v0\", \"v1\"").send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["x-cache"].to_str().unwrap()), (304, "hit"));
    assert_eq!(r.headers()["etag"], "\"v1\"");
    assert!(r.bytes().await.unwrap().is_empty());
    assert_eq!(get(g, "/long").await.3, "0123456789");
    for (range, status, body) in
        [("bytes=2-4", 206, "234"), ("bytes=-3", 206, "789"), ("bytes=7-", 206, "789"), ("bytes=20-", 416, "")]
    {
        let r = client.get(format!("http://{g}/long")).header("range", range).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{range}");
        assert_eq!(r.text().await.unwrap(), body, "{range}");
    }
}

/// Each set of `Accept-Language` gets its own stored response, and keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn variants_are_kept_side_by_side() {
    let (o, state, _) = validating_origin().await;
    let g = serve(origin::router(config(o))).await;
    let client = reqwest::Client::new();
    let ask = |lang: &'static str| {
        let client = client.clone();
        async move {
            let r = client.get(format!("http://{g}/by-language")).header("accept-language", lang).send().await.unwrap();
            let how = r.headers()["x-cache"].to_str().unwrap().to_string();
            (how, r.text().await.unwrap())
        }
    };
    assert_eq!(ask("en").await, ("miss".to_string(), "in en".to_string()));
    assert_eq!(ask("de").await, ("miss".to_string(), "in de".to_string()));
    assert_eq!(ask("en").await, ("hit".to_string(), "in en".to_string()));
    assert_eq!(ask("DE").await, ("hit".to_string(), "in de".to_string()), "language tags compare without case");
    assert_eq!(state.reads.load(Ordering::SeqCst), 2);
}

/// Requests for a private response that arrive together share no read: each gets its own,
/// and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_s_response_never_reaches_another() {
    let (o, state, _) = validating_origin().await;
    let g = serve(origin::router(config(o))).await;
    let client = reqwest::Client::new();
    let asks: Vec<_> = ["a=1", "b=2", "c=3"]
        .into_iter()
        .map(|cookie| {
            let client = client.clone();
            tokio::spawn(async move {
                let r = client.get(format!("http://{g}/mine")).header("cookie", cookie).send().await.unwrap();
                assert_eq!(r.headers()["x-cache-store"], "no (private)");
                (cookie, r.text().await.unwrap())
            })
        })
        .collect();
    for a in asks {
        let (cookie, body) = a.await.unwrap();
        assert_eq!(body, format!("for {cookie}"));
    }
    assert_eq!(state.reads.load(Ordering::SeqCst), 3);
}

/// A read that hangs (an origin that never answers, within an upstream timeout far off) does
/// not hold its waiters, nor the requests after them: each is answered 504 within the wait
/// bound, saying so, and the next request reads again instead of joining the read that hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_that_hangs_bounds_its_waiters_and_the_next_request_reads_again() {
    let started = Arc::new(AtomicU64::new(0));
    let s = Arc::clone(&started);
    let app = Router::new().fallback(routing::get(move || {
        s.fetch_add(1, Ordering::SeqCst);
        async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            "never"
        }
    }));
    let o = serve(app).await;
    let g = serve(origin::router(OriginConfig {
        upstream_timeout: Duration::from_secs(60),
        wait_timeout: Some(Duration::from_millis(300)),
        ..config(o)
    }))
    .await;
    // Generous: only a hang takes this long.
    let bounded = |f| async move { tokio::time::timeout(Duration::from_secs(15), f).await.expect("a request hung") };
    let asks: Vec<_> = (0..3).map(|_| tokio::spawn(get(g, "/hang"))).collect();
    for a in asks {
        let (status, how, _, body) = bounded(a).await.unwrap();
        assert_eq!(status, 504, "{body}");
        assert!(["miss", "coalesced"].contains(&how.as_str()), "{how}");
        assert!(body.contains("--wait-timeout"), "{body}");
    }
    assert_eq!(started.load(Ordering::SeqCst), 1, "the three shared one read");
    // The read that hangs is failed within the bound too (a request that came just before
    // then joined it): a request soon reads again.
    for _ in 0..20 {
        let (status, _, _, body) = bounded(tokio::spawn(get(g, "/hang"))).await.unwrap();
        assert_eq!(status, 504, "{body}");
        if started.load(Ordering::SeqCst) == 2 {
            return;
        }
    }
    panic!("every request joined the read that hung");
}

/// An origin that closes each connection, without a word, once it has read the connection's
/// second request: what an origin's keep-alive timeout does to a pooled connection when the
/// gateway reuses it in the moment the origin closes it (Node.js closes idle connections
/// after 5 s; the cache test suite hit this under load). Counts the requests it read by method.
async fn closing_origin() -> (SocketAddr, Arc<(AtomicU64, AtomicU64)>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let counts = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counts = Arc::clone(&counts);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                for nth in 0..2 {
                    // One request: its head, then a Content-Length body if it has one.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                    while buf.len() < head_end + length {
                        let mut chunk = [0u8; 4096];
                        match socket.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + length);
                    let counter = if head.starts_with("post ") { &counts.1 } else { &counts.0 };
                    counter.fetch_add(1, Ordering::SeqCst);
                    if nth == 1 {
                        return; // read, never answered: the connection closes
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncache-control: no-store\r\n\r\nok";
                    if socket.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// A pooled connection the origin closes under a request: a GET (idempotent) is sent again on
/// a fresh connection and answered; a POST is not (RFC 9112 §9.3.1: a proxy must not retry a
/// request that is not idempotent), and its client hears 502 saying why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_request_on_a_connection_the_origin_closed_is_sent_again() {
    let (o, seen) = closing_origin().await;
    let g = serve(origin::router(config(o))).await;
    let client = reqwest::Client::new();
    let status = |path: &'static str, post: bool| {
        let client = client.clone();
        async move {
            let url = format!("http://{g}{path}");
            let r = if post { client.post(url).body("x").send() } else { client.get(url).send() };
            let r = tokio::time::timeout(Duration::from_secs(15), r).await.expect("a request hung").unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    assert_eq!(status("/a", false).await, (200, "ok".to_string()));
    // The second request on the pooled connection: the origin reads it and closes.
    let (code, body) = status("/b", false).await;
    assert_eq!((code, body.as_str()), (200, "ok"), "a GET is sent again on a fresh connection");
    assert_eq!(seen.0.load(Ordering::SeqCst), 3, "/a, /b read and dropped, /b again");
    // The fresh connection has answered one request: the POST is its second, and is dropped.
    let (code, body) = status("/p", true).await;
    assert_eq!(code, 502, "{body}");
    assert!(body.contains("closed before message completed"), "the 502 says why: {body}");
    assert_eq!(seen.1.load(Ordering::SeqCst), 1, "the POST was sent once, never again");
}
