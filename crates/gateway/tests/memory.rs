//! The gateway's memory bound (`--max-memory`), over loopback in front of a local origin that
//! answers every path with a 10 KB response cacheable for an hour: a flood of distinct URLs
//! keeps what is stored within the bound while a hot URL stays a hit; a response over
//! `--max-object-size` is answered and not kept. The ignored `resident_memory_under_a_flood`
//! measures the process's resident memory against the bound.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::http::Uri;
use switchyard_core::cache::Eviction;
use switchyard_gateway::memory;
use switchyard_gateway::origin::{self, OriginConfig};

/// Bytes in each answer of the origin.
const BODY: usize = 10_000;

/// An origin answering every path with `BODY` bytes (`/big/...` with 1 MiB), public for an
/// hour (`/warm/...` not to be stored); and how many reads it answered.
async fn origin() -> (SocketAddr, Arc<AtomicU64>) {
    let reads = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&reads);
    let app = Router::new().fallback(move |uri: Uri| {
        let reads = Arc::clone(&counted);
        async move {
            reads.fetch_add(1, Ordering::Relaxed);
            let n = if uri.path().starts_with("/big/") { 1 << 20 } else { BODY };
            let fill = uri.path().bytes().last().unwrap_or(b'x');
            let cc = if uri.path().starts_with("/warm/") { "no-store" } else { "public, max-age=3600" };
            ([("cache-control", cc)], vec![fill; n])
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

fn config(origin: SocketAddr, max_memory: u64) -> OriginConfig {
    OriginConfig { max_memory, ..OriginConfig::new(format!("http://{origin}")) }
}

/// A metric's value from `/metrics`.
async fn metric(client: &reqwest::Client, gateway: SocketAddr, name: &str) -> u64 {
    let text = client.get(format!("http://{gateway}/metrics")).send().await.unwrap().text().await.unwrap();
    let line = text
        .lines()
        .find(|l| l.split(' ').next() == Some(name))
        .unwrap_or_else(|| panic!("no metric {name} in /metrics:\n{text}"));
    line.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64
}

/// `X-Cache` and the body's length of a GET.
async fn get(client: &reqwest::Client, gateway: SocketAddr, path: &str) -> (String, usize, Option<String>) {
    let r = client.get(format!("http://{gateway}{path}")).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    let h = |n: &str| r.headers().get(n).map(|v| v.to_str().unwrap().to_string());
    let (how, store) = (h("x-cache").unwrap_or_default(), h("x-cache-store"));
    (how, r.bytes().await.unwrap().len(), store)
}

/// The answers to `n` distinct URLs under `prefix`, requested `parallel` at a time.
fn flood(
    client: &reqwest::Client,
    gateway: SocketAddr,
    prefix: &str,
    n: usize,
    parallel: usize,
) -> tokio::sync::mpsc::UnboundedReceiver<(String, usize, Option<String>)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..parallel {
        let (client, tx, next, prefix) = (client.clone(), tx.clone(), Arc::clone(&next), prefix.to_string());
        tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let path = format!("{prefix}/{i}");
                if tx.send(get(&client, gateway, &path).await).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// S3-FIFO (recency first): every flooded URL is stored, then evicted, newest kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_distinct_urls_stays_within_max_memory_and_a_hot_url_stays_a_hit() {
    flood_within_max_memory(Eviction::S3Fifo).await;
}

/// TinyLFU (the default) refuses most of a flood of URLs asked for once, so fewer are stored
/// and evicted; the bound and the hot URL hold alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_holds_max_memory_and_the_hot_url_under_a_flood() {
    assert_eq!(Eviction::DEFAULT, Eviction::TinyLfu);
    flood_within_max_memory(Eviction::DEFAULT).await;
}

async fn flood_within_max_memory(eviction: Eviction) {
    const BOUND: u64 = 4 << 20;
    let (o, reads) = origin().await;
    let g = serve(origin::router(OriginConfig { eviction, ..config(o, BOUND) })).await;
    let client = reqwest::Client::new();
    assert_eq!(metric(&client, g, "gateway_max_memory_bytes").await, BOUND);
    assert_eq!(get(&client, g, "/hot").await.0, "miss");
    let mut answers = flood(&client, g, "/flood", 6_000, 32);
    let (mut done, mut highest) = (0, 0);
    while let Some((_, len, _)) = answers.recv().await {
        assert_eq!(len, BODY);
        done += 1;
        if done % 100 == 0 {
            // The hot URL is used often enough to stay.
            assert_eq!(get(&client, g, "/hot").await.0, "hit", "after {done} distinct URLs");
        }
        if done % 500 == 0 {
            let stored = metric(&client, g, "gateway_stored_bytes").await;
            assert!(stored <= BOUND, "{stored} bytes stored over a bound of {BOUND}, after {done} distinct URLs");
            highest = highest.max(stored);
        }
    }
    let stored = metric(&client, g, "gateway_stored_bytes").await;
    let entries = metric(&client, g, "gateway_stored_entries").await;
    let (evictions, evicted) =
        (metric(&client, g, "gateway_evictions_total").await, metric(&client, g, "gateway_evicted_bytes_total").await);
    // 10 KB bodies, counted with their fields and index: a 4 MiB bound holds some hundreds.
    assert!((300..420).contains(&entries), "{entries} URLs stored");
    assert!(stored <= BOUND && stored > BOUND / 2, "{stored} bytes stored against a bound of {BOUND}");
    // Every URL is stored, evicted since, or refused by the policy's admission (TinyLFU's;
    // a recency policy refuses none).
    let refused = metric(&client, g, "gateway_refused_total").await;
    assert_eq!(evictions + entries + refused, 6_001, "{evictions} evicted, {entries} stored, {refused} refused");
    if eviction == Eviction::S3Fifo {
        assert_eq!(refused, 0, "S3-FIFO admits every newcomer");
    }
    assert!(evicted > evictions * BODY as u64, "{evicted} bytes evicted by {evictions} evictions");
    assert!(highest <= BOUND);
    // The most recent URLs are still there; the first are gone.
    let before = reads.load(Ordering::Relaxed);
    assert_eq!(get(&client, g, "/hot").await.0, "hit");
    assert_eq!(get(&client, g, "/flood/0").await.0, "miss");
    assert_eq!(reads.load(Ordering::Relaxed), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_over_max_object_size_is_answered_and_not_kept() {
    let (o, reads) = origin().await;
    let g = serve(origin::router(OriginConfig { max_object_size: Some(256 << 10), ..config(o, 4 << 20) })).await;
    let client = reqwest::Client::new();
    assert_eq!(metric(&client, g, "gateway_max_object_size_bytes").await, 256 << 10);
    for _ in 0..2 {
        let (how, len, store) = get(&client, g, "/big/a").await;
        assert_eq!((how.as_str(), len), ("miss", 1 << 20));
        assert_eq!(store.as_deref(), Some("no (larger than --max-object-size)"));
    }
    assert_eq!(reads.load(Ordering::Relaxed), 2, "read each time: not kept");
    assert_eq!(metric(&client, g, "gateway_too_large_total").await, 2);
    assert_eq!(metric(&client, g, "gateway_stored_entries").await, 0);
    // Under it, kept as before.
    assert_eq!(get(&client, g, "/small").await.0, "miss");
    assert_eq!(get(&client, g, "/small").await.0, "hit");
}

/// The process's resident memory before and after a flood of distinct URLs, against the
/// bound: run with `cargo test -p switchyard-gateway --release --test memory -- --ignored
/// --nocapture` (`SWITCHYARD_MEMORY_BOUND_MIB`, default 64, and `SWITCHYARD_MEMORY_URLS`,
/// default 60,000, change the run). The origin and the client run in this process too; they
/// are in the baseline, taken once the same concurrency of reads not stored has gone through.
/// Goal: the growth is at most the bound plus 15 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: prints resident memory against the bound"]
async fn resident_memory_under_a_flood() {
    let bound: u64 = std::env::var("SWITCHYARD_MEMORY_BOUND_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(64) << 20;
    let urls: usize = std::env::var("SWITCHYARD_MEMORY_URLS").ok().and_then(|v| v.parse().ok()).unwrap_or(60_000);
    let (o, _) = origin().await;
    let g = serve(origin::router(config(o, bound))).await;
    let client = reqwest::Client::new();
    // Warm the origin, the gateway's connections and the client at the flood's concurrency,
    // with responses that are read through the gateway and not stored: what is in flight is
    // the baseline's, what is stored is the growth.
    let mut warm = flood(&client, g, "/warm", 5_000, 64);
    while warm.recv().await.is_some() {}
    let baseline = memory::resident().unwrap();
    let mut answers = flood(&client, g, "/flood", urls, 64);
    let mut peak = baseline;
    let mut done = 0;
    while answers.recv().await.is_some() {
        done += 1;
        if done % 1_000 == 0 {
            peak = peak.max(memory::resident().unwrap());
        }
    }
    let after = memory::resident().unwrap();
    peak = peak.max(after);
    let stored = metric(&client, g, "gateway_stored_bytes").await;
    let entries = metric(&client, g, "gateway_stored_entries").await;
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let growth = peak.saturating_sub(baseline);
    println!(
        "bound {:.1} MiB; {urls} distinct URLs of {BODY} B; stored {:.1} MiB in {entries} URLs; resident {:.1} MiB before, {:.1} MiB after, {:.1} MiB at peak; growth {:.1} MiB = {:.1} % of the bound",
        mib(bound),
        mib(stored),
        mib(baseline),
        mib(after),
        mib(peak),
        mib(growth),
        growth as f64 / bound as f64 * 100.0
    );
    assert!(growth <= bound + bound * 15 / 100, "resident memory grew {growth} bytes under a bound of {bound}");
}
