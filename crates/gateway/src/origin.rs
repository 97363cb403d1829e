//! The gateway in front of any HTTP origin: every `GET` is answered from the core's cache by
//! its path and query, with exact coalescing, a reader's `Cache-Control: max-age`, and RFC
//! 5861's stale-while-revalidate and stale-if-error. `HEAD` is the cached `GET` without its
//! body; every other method is passed through to the origin, and an unsafe one that succeeds
//! invalidates what it may have changed (RFC 9111 §4.4).
//!
//! A kept response stays fresh as long as the origin said (RFC 9111 §4.2.1: `s-maxage`, else
//! `max-age`, else `Expires` less `Date`), less the `Age` it arrived with; `ttl` is only the
//! lifetime of a response that says nothing of its freshness. (Before, `ttl` decided for every
//! response, and one the origin had said was stale was served as a fresh hit.)
//!
//! Every answer says how it was made: `X-Cache: hit | miss | coalesced | stale`, `Age` in
//! seconds (§4.2.3: the age it arrived with, plus its time here), and for a stale answer a `Warning: 110` and `X-Cache-Stale: revalidating | error`.
//! The origin's status, body and end-to-end headers (type, encoding, validators, `Location`,
//! `Cache-Control`) are passed on. Responses 2xx, 404 and 410 are kept, unless the origin marks
//! them `private` or `no-store`, sets a cookie or says they vary (`Vary`); others are passed on to everyone waiting and
//! not kept. A 5xx, a refused connection or a timeout is a failure (502 or 504 with a sentence,
//! or the stale body under stale-if-error). Entries no answer can use any more are purged every
//! 1,024 reads.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use bytes::Bytes;
use switchyard_core::Nanos;
use switchyard_core::cache::{AgeFrom, Alone, Answer, Cache, Lookup, ReadId, Reading};
use tokio::sync::oneshot;

use crate::http::nanos;
use crate::metrics::{Count, Metrics};

/// How the gateway runs in front of an origin.
#[derive(Clone, Debug)]
pub struct OriginConfig {
    /// The origin's base URL, e.g. `http://127.0.0.1:8080`.
    pub origin: String,
    /// How long a response that carries no freshness of its own (no `s-maxage`, `max-age` or
    /// `Expires`) stays fresh.
    pub ttl: Duration,
    /// How long past that a stale response is answered at once while a read refreshes it.
    pub stale_while_revalidate: Option<Duration>,
    /// How long past that a stale response is answered when the read fails.
    pub stale_if_error: Option<Duration>,
    /// The longest a read of the origin may take.
    pub upstream_timeout: Duration,
}

/// A kept response.
#[derive(Debug)]
pub struct Stored {
    status: StatusCode,
    /// The origin's end-to-end headers a client needs ([`PASSED_ON`]).
    headers: Vec<(header::HeaderName, HeaderValue)>,
    body: Bytes,
    /// How long it is fresh, from its origin's words (or the gateway's default).
    lifetime: Nanos,
    /// The age it arrived with (the origin's `Age` header).
    initial_age: Nanos,
    /// `must-revalidate` or `proxy-revalidate`: never served stale (RFC 9111 §5.2.2.2, §5.2.2.8).
    must_revalidate: bool,
}

/// Whether the origin's `Cache-Control` carries `directive` (a bare one, or one with a value).
fn has_directive(headers: &HeaderMap, directive: &str) -> bool {
    headers
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|d| d.split('=').next().is_some_and(|k| k.trim().eq_ignore_ascii_case(directive))))
}

/// A response's freshness lifetime (RFC 9111 §4.2.1, for a shared cache): `s-maxage`, else
/// `max-age`, else `Expires` less `Date` (an `Expires` that does not read is in the past);
/// `default` when it says none of these.
pub fn freshness_lifetime(headers: &HeaderMap, default: Nanos) -> Nanos {
    // no-cache: it may be kept, but not used without asking the origin (§5.2.2.4); with no
    // revalidation here yet, that is a new read each time, coalesced.
    if has_directive(headers, "no-cache") {
        return Nanos::ZERO;
    }
    let secs = |s: u64| Nanos(s.saturating_mul(1_000_000_000));
    let directive = |name: &str| {
        headers.get_all(header::CACHE_CONTROL).iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
            v.split(',').find_map(|d| {
                let (k, v) = d.split_once('=')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim().trim_matches('"').parse::<u64>().ok())?
            })
        })
    };
    if let Some(s) = directive("s-maxage").or_else(|| directive("max-age")) {
        return secs(s);
    }
    if let Some(expires) = headers.get(header::EXPIRES) {
        let date = |v: &HeaderValue| v.to_str().ok().and_then(|t| httpdate::parse_http_date(t).ok());
        let Some(expires) = date(expires) else { return Nanos::ZERO };
        let now = headers.get(header::DATE).and_then(date).unwrap_or_else(std::time::SystemTime::now);
        return expires.duration_since(now).map_or(Nanos::ZERO, nanos);
    }
    default
}

/// The `Age` a response arrived with (0 if it has none or it does not read).
fn initial_age(headers: &HeaderMap) -> Nanos {
    headers
        .get(header::AGE)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
        .map_or(Nanos::ZERO, |s| Nanos(s.saturating_mul(1_000_000_000)))
}

/// The origin's headers passed on with a response (the body's type and encoding, validators,
/// a redirect's target, the origin's own caching words).
const PASSED_ON: [header::HeaderName; 7] = [
    header::CONTENT_TYPE,
    header::CONTENT_ENCODING,
    header::CONTENT_LANGUAGE,
    header::ETAG,
    header::LAST_MODIFIED,
    header::LOCATION,
    header::CACHE_CONTROL,
];

/// Whether the origin allows a response to be kept and shared: not `private` or `no-store`,
/// not setting a cookie (a response that does is one user's), and not varying with request
/// headers.
fn shareable(headers: &HeaderMap) -> bool {
    let no = headers.get_all(header::CACHE_CONTROL).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',').map(str::trim).any(|d| d.eq_ignore_ascii_case("private") || d.eq_ignore_ascii_case("no-store"))
    });
    // A response that varies with request headers matches only requests with the same values
    // of them (RFC 9111 §4.1; `Vary: *` none at all). The gateway keeps one response per URL
    // and asks the origin without the readers' headers, so it keeps none that vary: each is
    // passed on to the requests that waited for it, and read again for the next.
    !no && !headers.contains_key(header::SET_COOKIE) && !headers.contains_key(header::VARY)
}

/// A kept response as the cache holds it: shared, and never ordered (only the approximate
/// policies order values, and an origin has no neighbours).
#[derive(Clone, Debug)]
pub struct Kept(Arc<Stored>);

impl PartialEq for Kept {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl PartialOrd for Kept {
    fn partial_cmp(&self, _: &Self) -> Option<std::cmp::Ordering> {
        None
    }
}

impl Kept {
    /// Its age at `now` (RFC 9111 §4.2.3): what it arrived with plus its time since it was
    /// read (`sensed_at`, the moment the read started, which errs on the older side).
    fn age(&self, sensed_at: Nanos, now: Nanos) -> Nanos {
        Nanos(self.0.initial_age.0.saturating_add(now.0.saturating_sub(sensed_at.0)))
    }

    /// How much longer than its time here so far it may be served fresh: the bound, on time
    /// since the read, that a query must respect.
    fn fresh_for(&self) -> Nanos {
        Nanos(self.0.lifetime.0.saturating_sub(self.0.initial_age.0))
    }

    /// Whether it may still be served stale within `grace` past its freshness (never, if the
    /// origin said it must be revalidated).
    fn stale_within(&self, sensed_at: Nanos, now: Nanos, grace: Nanos) -> bool {
        !self.0.must_revalidate && self.age(sensed_at, now).0 < self.0.lifetime.0.saturating_add(grace.0)
    }
}

/// What a waiter gets: a response to pass on (kept or not), or a failure.
#[derive(Clone, Debug)]
enum Outcome {
    Got(Kept),
    Failed { timeout: bool, why: String, stale: Option<(Kept, Nanos)> },
}

type Waiter = oneshot::Sender<Outcome>;

struct Counters {
    hits: Count,
    misses: Count,
    coalesced: Count,
    stale_revalidating: Count,
    stale_error: Count,
    upstream_reads: Count,
    upstream_failures: Count,
}

struct Shared {
    cache: Mutex<Cache<String, Waiter, Alone, Kept>>,
    config: OriginConfig,
    client: reqwest::Client,
    start: Instant,
    metrics: Metrics,
    counters: Counters,
    /// Reads since the cache was last purged.
    reads_since_purge: std::sync::atomic::AtomicU64,
    /// The longest freshness lifetime kept so far, ns: what a purge must leave.
    longest_lifetime: std::sync::atomic::AtomicU64,
}

/// Reads between purges of what no answer can use any more.
const PURGE_EVERY: u64 = 1024;

impl Shared {
    fn now(&self) -> Nanos {
        Nanos(self.start.elapsed().as_nanos() as u64)
    }
}

/// The routes: `/metrics`, and every other `GET` from the cache.
pub fn router(config: OriginConfig) -> Router {
    let client = reqwest::Client::builder().timeout(config.upstream_timeout).build().expect("a plain HTTP client");
    // Each response's own lifetime is the bound its queries carry (see `serve`); the core's T
    // only has to let the longest through.
    let cache = Cache::new(Lookup::Piggyback, Nanos(u64::MAX / 4), AgeFrom::Load, Alone);
    let mut metrics = Metrics::default();
    let counters = Counters {
        hits: metrics.count("gateway_hits", "Answered from a fresh kept response."),
        misses: metrics.count("gateway_misses", "Requests that started a read of the origin."),
        coalesced: metrics.count("gateway_coalesced", "Requests that waited on a read another request started."),
        stale_revalidating: metrics
            .count("gateway_stale_while_revalidate", "Stale answers given while a read refreshed them."),
        stale_error: metrics.count("gateway_stale_if_error", "Stale answers given because a read failed."),
        upstream_reads: metrics.count("gateway_upstream_reads", "Reads of the origin that came back."),
        upstream_failures: metrics.count("gateway_upstream_failures", "Reads of the origin that failed or timed out."),
    };
    let shared = Arc::new(Shared {
        cache: Mutex::new(cache),
        config,
        client,
        start: Instant::now(),
        metrics,
        counters,
        reads_since_purge: Default::default(),
        longest_lifetime: Default::default(),
    });
    Router::new()
        .route("/metrics", get(|State(s): State<Arc<Shared>>| async move { s.metrics.render() }))
        .fallback(any(route))
        .with_state(shared)
}

/// The reader's own bound from its request headers: `Cache-Control: max-age=N`, or `no-cache`
/// (nothing kept will do); `None` for no bound or one that does not read.
pub fn reader_bound(headers: &HeaderMap) -> Option<Nanos> {
    let value = headers.get(header::CACHE_CONTROL)?.to_str().ok()?;
    value.split(',').map(str::trim).find_map(|d| {
        if d.eq_ignore_ascii_case("no-cache") {
            Some(Nanos::ZERO)
        } else {
            let (k, v) = d.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("max-age")
                .then(|| v.trim().parse::<u64>().ok().map(|s| Nanos(s.saturating_mul(1_000_000_000))))?
        }
    })
}

/// `GET` from the cache, `HEAD` as the `GET` without its body, every other method passed
/// through to the origin.
async fn route(State(s): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    if method == Method::GET {
        serve(State(s), request).await
    } else if method == Method::HEAD {
        let mut r = serve(State(s), request).await;
        *r.body_mut() = axum::body::Body::empty();
        r
    } else {
        pass(s, request).await
    }
}

/// Headers of one connection, never forwarded (RFC 9110 §7.6.1).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Passes a request the cache does not answer to the origin, and its answer back; an unsafe
/// method's success invalidates what it may have changed (RFC 9111 §4.4: the target, and the
/// `Location` and `Content-Location` it names on this origin).
async fn pass(s: Arc<Shared>, request: Request) -> Response {
    let key = request.uri().path_and_query().map_or_else(|| "/".to_string(), |pq| pq.as_str().to_string());
    let method = request.method().clone();
    let url = format!("{}{key}", s.config.origin.trim_end_matches('/'));
    let mut headers = request.headers().clone();
    headers.remove(header::HOST);
    for h in HOP_BY_HOP {
        headers.remove(h);
    }
    let body = match axum::body::to_bytes(request.into_body(), 64 << 20).await {
        Ok(b) => b,
        Err(e) => return failure(StatusCode::PAYLOAD_TOO_LARGE, format!("the request's body: {e}")),
    };
    let sent = s.client.request(method.clone(), &url).headers(headers).body(body).send().await;
    let r = match sent {
        Ok(r) => r,
        Err(e) if e.is_timeout() => {
            return failure(
                StatusCode::GATEWAY_TIMEOUT,
                format!("the origin did not answer {method} {key} within {:?}", s.config.upstream_timeout),
            );
        }
        Err(e) => return failure(StatusCode::BAD_GATEWAY, format!("{method} {key} to the origin failed: {e}")),
    };
    let status = r.status();
    let unsafe_method = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE);
    if unsafe_method && (status.is_success() || status.is_redirection()) {
        let mut changed = vec![key.clone()];
        for name in [header::LOCATION, header::CONTENT_LOCATION] {
            if let Some(path) =
                r.headers().get(&name).and_then(|v| v.to_str().ok()).and_then(|v| same_origin_path(&s, v))
            {
                changed.push(path);
            }
        }
        let mut cache = s.cache.lock().expect("no request panics holding the cache");
        let now = s.now();
        for k in &changed {
            cache.invalidate(k, now);
        }
    }
    let mut out = Response::builder().status(status);
    for (name, value) in r.headers() {
        if !HOP_BY_HOP.contains(&name.as_str()) && name != header::CONTENT_LENGTH {
            out = out.header(name, value);
        }
    }
    let body = match r.bytes().await {
        Ok(b) => b,
        Err(e) => {
            return failure(StatusCode::BAD_GATEWAY, format!("{method} {key}: the origin's answer broke off: {e}"));
        }
    };
    let mut resp =
        out.body(axum::body::Body::from(body)).unwrap_or_else(|e| failure(StatusCode::BAD_GATEWAY, e.to_string()));
    resp.headers_mut().insert("x-cache", HeaderValue::from_static("pass"));
    resp
}

/// `value` as a key of this origin: a path, or an absolute URL on the origin.
fn same_origin_path(s: &Shared, value: &str) -> Option<String> {
    if value.starts_with('/') {
        return Some(value.to_string());
    }
    let base = s.config.origin.trim_end_matches('/');
    value.strip_prefix(base).filter(|p| p.starts_with('/')).map(str::to_string)
}

fn respond(kept: &Kept, age: Nanos, how: &str, stale: Option<&str>) -> Response {
    let mut r = (kept.0.status, kept.0.body.clone()).into_response();
    let h = r.headers_mut();
    for (name, value) in &kept.0.headers {
        h.insert(name.clone(), value.clone());
    }
    h.insert(header::AGE, HeaderValue::from(age.0 / 1_000_000_000));
    h.insert("x-cache", HeaderValue::from_str(how).expect("ASCII"));
    if let Some(why) = stale {
        h.insert(header::WARNING, HeaderValue::from_static("110 - \"Response is Stale\""));
        h.insert("x-cache-stale", HeaderValue::from_str(why).expect("ASCII"));
    }
    r
}

fn failure(status: StatusCode, error: String) -> Response {
    let mut r = crate::http::error(status, error);
    r.headers_mut().insert("x-cache", HeaderValue::from_static("miss"));
    r
}

async fn serve(State(s): State<Arc<Shared>>, request: Request) -> Response {
    let key = request.uri().path_and_query().map_or_else(|| "/".to_string(), |pq| pq.as_str().to_string());
    let bound = reader_bound(request.headers());
    let (rx, how) = {
        let mut cache = s.cache.lock().expect("no request panics holding the cache");
        let now = s.now();
        // The kept response is fresh as long as its origin said: that bounds the query as a
        // reader's max-age would, the tighter of the two winning.
        let origin_bound = cache.peek(&key).map(|e| e.reading.value.fresh_for());
        let query_bound = match (bound, origin_bound) {
            (Some(r), Some(o)) => Some(r.min(o)),
            (r, o) => r.or(o),
        };
        let answer = cache.query(&key, now, query_bound, &mut |_| 0);
        // A reader with a bound of its own gets no stale answer.
        let revalidate = s.config.stale_while_revalidate.filter(|_| bound.is_none()).and_then(|g| {
            cache
                .peek(&key)
                .filter(|e| e.reading.value.stale_within(e.reading.sensed_at, now, nanos(g)))
                .map(|e| (e.reading.value.clone(), e.reading.value.age(e.reading.sensed_at, now)))
        });
        match answer {
            Answer::Hit(e) => {
                s.counters.hits.inc();
                return respond(&e.reading.value, e.reading.value.age(e.reading.sensed_at, now), "hit", None);
            }
            Answer::Approx { .. } => unreachable!("an origin has no neighbours"),
            Answer::Wait { on, read } => {
                if let Some((kept, age)) = revalidate {
                    s.counters.stale_revalidating.inc();
                    return respond(&kept, age, "stale", Some("revalidating"));
                }
                s.counters.coalesced.inc();
                let (tx, rx) = oneshot::channel();
                if cache.wait(&on, read, key.clone(), tx).is_err() {
                    unreachable!("the cache named a read under way, under the same lock");
                }
                (rx, "coalesced")
            }
            Answer::Read { read } => {
                s.counters.misses.inc();
                let (tx, rx) = oneshot::channel();
                let read = read.expect("piggybacked queries coalesce");
                if cache.wait(&key, read, key.clone(), tx).is_err() {
                    unreachable!("the read was registered under the same lock");
                }
                tokio::spawn(read_origin(Arc::clone(&s), key.clone(), read));
                if let Some((kept, age)) = revalidate {
                    s.counters.stale_revalidating.inc();
                    return respond(&kept, age, "stale", Some("revalidating"));
                }
                (rx, "miss")
            }
        }
    };
    match rx.await {
        Ok(Outcome::Got(kept)) => {
            let age = kept.0.initial_age;
            respond(&kept, age, how, None)
        }
        Ok(Outcome::Failed { stale: Some((kept, age)), .. }) => {
            s.counters.stale_error.inc();
            respond(&kept, age, "stale", Some("error"))
        }
        Ok(Outcome::Failed { timeout: true, .. }) => failure(
            StatusCode::GATEWAY_TIMEOUT,
            format!("the origin did not answer {key} within {:?}", s.config.upstream_timeout),
        ),
        Ok(Outcome::Failed { why, .. }) => {
            failure(StatusCode::BAD_GATEWAY, format!("reading {key} from the origin failed: {why}"))
        }
        Err(_) => failure(StatusCode::INTERNAL_SERVER_ERROR, "the read was dropped without an answer".into()),
    }
}

/// Reads `key` from the origin and answers everyone waiting on it.
async fn read_origin(s: Arc<Shared>, key: String, read: ReadId) {
    let url = format!("{}{key}", s.config.origin.trim_end_matches('/'));
    // The response is at least as new as the moment the read started: that is its "sensing"
    // time, so a slower read of an older answer never replaces a newer one.
    let started = s.now();
    let got = async {
        let r = s.client.get(&url).send().await?;
        let status = r.status();
        let shared = shareable(r.headers());
        let headers = PASSED_ON.iter().filter_map(|n| r.headers().get(n).map(|v| (n.clone(), v.clone()))).collect();
        let lifetime = freshness_lifetime(r.headers(), nanos(s.config.ttl));
        let initial_age = initial_age(r.headers());
        let must_revalidate =
            has_directive(r.headers(), "must-revalidate") || has_directive(r.headers(), "proxy-revalidate");
        let body = r.bytes().await?;
        Ok::<_, reqwest::Error>((Stored { status, headers, body, lifetime, initial_age, must_revalidate }, shared))
    }
    .await;
    let mut cache = s.cache.lock().expect("no request panics holding the cache");
    let now = s.now();
    if s.reads_since_purge.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 >= PURGE_EVERY {
        // Drop what no answer can use any more, fresh or stale, so distinct URLs do not pile up.
        s.reads_since_purge.store(0, std::sync::atomic::Ordering::Relaxed);
        let grace = s.config.stale_while_revalidate.max(s.config.stale_if_error).unwrap_or_default();
        let longest = Nanos(s.longest_lifetime.load(std::sync::atomic::Ordering::Relaxed)).max(nanos(s.config.ttl));
        cache.purge(now, Nanos(longest.0.saturating_add(nanos(grace).0)));
    }
    let (outcome, waiters) = match got {
        Ok((stored, shared)) if !stored.status.is_server_error() => {
            s.counters.upstream_reads.inc();
            let keep = shared && (stored.status.is_success() || matches!(stored.status.as_u16(), 404 | 410));
            s.longest_lifetime.fetch_max(stored.lifetime.0, std::sync::atomic::Ordering::Relaxed);
            let kept = Kept(Arc::new(stored));
            let waiters = if keep {
                cache.fill(key.clone(), Some(read), Reading { value: kept.clone(), sensed_at: started }, now)
            } else {
                cache.fail(&key, Some(read))
            };
            (Outcome::Got(kept), waiters)
        }
        other => {
            s.counters.upstream_failures.inc();
            let (timeout, why) = match other {
                Ok((stored, _)) => (false, format!("it answered {}", stored.status)),
                Err(e) => (e.is_timeout(), e.to_string()),
            };
            let stale = s.config.stale_if_error.and_then(|g| {
                cache
                    .peek(&key)
                    .filter(|e| e.reading.value.stale_within(e.reading.sensed_at, now, nanos(g)))
                    .map(|e| (e.reading.value.clone(), e.reading.value.age(e.reading.sensed_at, now)))
            });
            (Outcome::Failed { timeout, why, stale }, cache.fail(&key, Some(read)))
        }
    };
    drop(cache);
    for (w, _) in waiters {
        let _ = w.send(outcome.clone());
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::any;
    use proptest::prelude::*;

    use super::*;

    fn bound(value: &str) -> Option<Nanos> {
        let mut h = HeaderMap::new();
        h.insert(header::CACHE_CONTROL, HeaderValue::from_str(value).unwrap());
        reader_bound(&h)
    }

    #[test]
    fn a_reader_s_cache_control_sets_its_bound() {
        assert_eq!(bound("max-age=30"), Some(Nanos(30_000_000_000)));
        assert_eq!(bound("no-store, Max-Age = 5"), Some(Nanos(5_000_000_000)));
        assert_eq!(bound("no-cache"), Some(Nanos::ZERO));
        assert_eq!(bound("max-age=abc"), None, "an unreadable bound is no bound");
        assert_eq!(bound("private"), None);
        assert_eq!(reader_bound(&HeaderMap::new()), None);
    }

    proptest! {
        /// The header is outside input: any value reads without a panic, and a huge max-age
        /// does not overflow.
        #[test]
        fn any_cache_control_reads_without_panic(value in "[ -~]{0,64}", secs in any::<u64>()) {
            if let Ok(v) = HeaderValue::from_str(&value) {
                let mut h = HeaderMap::new();
                h.insert(header::CACHE_CONTROL, v);
                let _ = reader_bound(&h);
            }
            let _ = bound(&format!("max-age={secs}"));
        }
    }
}
