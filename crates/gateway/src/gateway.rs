//! The caching gateway in front of a sensor field.
//!
//! `GET /v1/readings/{location}?max_age=SECONDS` asks the core's [`Cache`] what to do, and does
//! it: answer from the cache or from neighbours, wait on a read under way, or start a read.
//! A read runs in a task of its own, never in the handler that asked for it. A client that
//! hangs up therefore cancels only its own wait: the read goes on, fills the cache and answers
//! everyone waiting on it. That is what makes coalescing exact under any concurrency: for a
//! coalescing policy, one upstream read per key per freshness window, unless a reader's own
//! `max_age` is one that no read under way can meet (it then starts its own, and each read
//! answers only its own waiters).
//!
//! A read that fails or takes longer than the upstream timeout is answered with 502 or 504 and
//! a sentence saying what happened; or, if the cache still holds a value no older than the
//! stale-if-error bound, with that value marked `"stale": true` and its age (RFC 5861's
//! stale-if-error).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use switchyard_core::Nanos;
use switchyard_core::cache::{AgeFrom, Answer, Cache, Lookup, Neighbours, ReadId, Reading};
use tokio::sync::oneshot;

use crate::field::{ErrorBody, FieldInfo, SensorReading};
use crate::http::{error, unix_ms};
use crate::metrics::{Amount, Count, Metrics};

/// How the gateway runs.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// The field emulator's (or a field service's) base URL, e.g. `http://127.0.0.1:7100`.
    pub field: String,
    /// Read the field over UDP at this address (`read LOCATION` datagrams) instead of HTTP; the
    /// field's shape still comes from `field` over HTTP.
    pub field_udp: Option<std::net::SocketAddr>,
    /// The lookup policy.
    pub lookup: Lookup,
    /// Yates's T.
    pub ttl: Duration,
    /// Where an entry's age counts from.
    pub age_from: AgeFrom,
    /// Keep approximate answers in the cache (see `Cache::keep_approximations`).
    pub keep_approximations: bool,
    /// The longest a read of the field may take before its waiters are answered 504.
    pub upstream_timeout: Duration,
    /// A failed read's waiters get the stale value if it is no older than this.
    pub stale_if_error: Option<Duration>,
    /// After each answer, ask the field for the true value (`/v1/truth/{location}`, which only
    /// an emulator has) and count the answer's deviation from it in `/metrics`.
    pub measure_deviation: bool,
    /// Seed of median-of-3's random choices.
    pub seed: u64,
}

/// What a reading request answers.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ReadingReply {
    /// The location asked for.
    pub location: u32,
    /// The value.
    pub value: f64,
    /// When it was sensed (for an approximate answer: the oldest value used), in milliseconds
    /// since the Unix epoch.
    pub sensed_at_ms: f64,
    /// Its age when answered, seconds.
    pub age_s: f64,
    /// Whether it was made from other locations' values.
    pub approximate: bool,
    /// The locations whose values made it.
    pub from: Vec<u32>,
    /// Where it came from: `cache`, `neighbours` (approximate, from the cache), `field` (this
    /// request's own read) or `coalesced` (a read another request started).
    pub source: String,
    /// Whether the value is older than asked for, given because a read failed.
    pub stale: bool,
}

/// Why a read failed.
#[derive(Clone, Debug)]
enum ReadFailure {
    /// The field did not answer in time.
    Timeout,
    /// The field answered with an error, or could not be reached.
    Upstream(String),
}

type Waiter = oneshot::Sender<Result<ReadingReply, ReadFailure>>;

struct Counters {
    hits: Count,
    approx_hits: Count,
    misses: Count,
    coalesced: Count,
    upstream_reads: Count,
    upstream_failures: Count,
    stale: Count,
    cost: Amount,
    deviation: Amount,
    deviation_samples: Count,
}

struct Inner {
    cache: Cache<u32, Waiter, Neighbours>,
    draws: ChaCha8Rng,
}

struct Shared {
    inner: Mutex<Inner>,
    config: GatewayConfig,
    locations: usize,
    client: reqwest::Client,
    start: Instant,
    metrics: Metrics,
    counters: Counters,
}

/// Why the gateway cannot start.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The field's description could not be fetched.
    #[error("asking {url} for the field's shape: {source}")]
    Field {
        /// What was asked.
        url: String,
        /// Why it failed.
        source: reqwest::Error,
    },
}

impl Shared {
    fn now(&self) -> Nanos {
        Nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// A Unix time in milliseconds as the gateway's clock.
    fn at(&self, unix: f64) -> Nanos {
        let back = ((unix_ms() - unix) * 1e6).max(0.0) as u64;
        Nanos(self.now().0.saturating_sub(back))
    }

    /// The gateway's clock as a Unix time in milliseconds.
    fn unix(&self, at: Nanos) -> f64 {
        unix_ms() - self.now().0.saturating_sub(at.0) as f64 / 1e6
    }

    fn reply(&self, location: u32, value: f64, sensed_at: Nanos, from: Vec<u32>, source: &str) -> ReadingReply {
        ReadingReply {
            location,
            value,
            sensed_at_ms: self.unix(sensed_at),
            age_s: self.now().0.saturating_sub(sensed_at.0) as f64 / 1e9,
            approximate: from.iter().any(|f| *f != location),
            from,
            source: source.into(),
            stale: false,
        }
    }
}

/// The gateway's routes, after asking the field for its shape.
pub async fn router(config: GatewayConfig) -> Result<Router, GatewayError> {
    let client = reqwest::Client::builder().timeout(config.upstream_timeout).build().expect("a plain HTTP client");
    let url = format!("{}/v1/field", config.field.trim_end_matches('/'));
    // The description is asked once, at start, and is large (every location's neighbours):
    // the read timeout, meant for one reading, does not bound it (with a 100 ms one, a loaded
    // machine failed to start the gateway at all).
    let setup = Duration::from_secs(30).max(config.upstream_timeout);
    let info: FieldInfo = async { client.get(&url).timeout(setup).send().await?.error_for_status()?.json().await }
        .await
        .map_err(|source| GatewayError::Field { url: url.clone(), source })?;
    let neighbours = Neighbours::from_lists(info.neighbours);
    let cache = Cache::new(config.lookup, crate::http::nanos(config.ttl), config.age_from, neighbours)
        .keep_approximations(config.keep_approximations);
    let mut metrics = Metrics::default();
    let counters = Counters {
        hits: metrics.count("gateway_hits", "Answered from the location's own cached value."),
        approx_hits: metrics.count("gateway_approx_hits", "Answered from neighbouring locations' cached values."),
        misses: metrics.count("gateway_misses", "Queries that started a read of the field."),
        coalesced: metrics.count("gateway_coalesced", "Queries that waited on a read another query started."),
        upstream_reads: metrics.count("gateway_upstream_reads", "Reads of the field that came back."),
        upstream_failures: metrics.count("gateway_upstream_failures", "Reads of the field that failed or timed out."),
        stale: metrics.count("gateway_stale_answers", "Answers with a stale value because a read failed."),
        cost: metrics.amount("gateway_cost", "Cost of the field reads (Yates Eq 5.5 units)."),
        deviation: metrics.amount(
            "gateway_deviation",
            "Answers' deviation from the field's true value just after they left, summed (with --measure-deviation).",
        ),
        deviation_samples: metrics.count("gateway_deviation_samples", "Answers whose deviation was measured."),
    };
    let shared = Arc::new(Shared {
        inner: Mutex::new(Inner { cache, draws: ChaCha8Rng::seed_from_u64(config.seed) }),
        locations: info.locations.len(),
        config,
        client,
        start: Instant::now(),
        metrics,
        counters,
    });
    Ok(Router::new()
        .route("/v1/readings/{location}", get(reading))
        .route("/metrics", get(|State(s): State<Arc<Shared>>| async move { s.metrics.render() }))
        .with_state(shared))
}

#[derive(Deserialize)]
struct Params {
    max_age: Option<String>,
}

async fn reading(State(s): State<Arc<Shared>>, path: Path<String>, query: Query<Params>) -> Response {
    let response = answer(Arc::clone(&s), path, query).await;
    if s.config.measure_deviation && response.status() == StatusCode::OK {
        // The value is in the body; read it back rather than thread it through every path.
        let (parts, body) = response.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
            return error(StatusCode::INTERNAL_SERVER_ERROR, "an answer too large to measure".into());
        };
        if let Ok(reply) = serde_json::from_slice::<ReadingReply>(&bytes) {
            tokio::spawn(measure_deviation(s, reply.location, reply.value));
        }
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    }
    response
}

/// Adds `|value − truth|` for `location` to the deviation counters.
async fn measure_deviation(s: Arc<Shared>, location: u32, value: f64) {
    let url = format!("{}/v1/truth/{location}", s.config.field.trim_end_matches('/'));
    if let Ok(r) = s.client.get(url).send().await
        && let Ok(truth) = r.json::<f64>().await
    {
        s.counters.deviation.inc_by((value - truth).abs());
        s.counters.deviation_samples.inc();
    }
}

async fn answer(s: Arc<Shared>, Path(raw): Path<String>, Query(q): Query<Params>) -> Response {
    let location = match crate::http::location(&raw, s.locations) {
        Ok(l) => l,
        Err(why) => return error(StatusCode::NOT_FOUND, why),
    };
    let max_age = match q.max_age.as_deref().map(str::parse::<f64>) {
        None => None,
        Some(Ok(m)) if m.is_finite() && m >= 0.0 => Some(Nanos((m * 1e9) as u64)),
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "max_age `{}`: give the oldest answer you accept, in seconds (0 or more)",
                    q.max_age.unwrap_or_default()
                ),
            );
        }
    };
    let (rx, source) = {
        let mut inner = s.inner.lock().expect("no request panics holding the cache");
        let Inner { cache, draws } = &mut *inner;
        let now = s.now();
        match cache.query(&location, now, max_age, &mut |n| draws.random_range(0..n)) {
            Answer::Hit(e) => {
                s.counters.hits.inc();
                return Json(s.reply(location, e.reading.value, e.reading.sensed_at, vec![location], "cache"))
                    .into_response();
            }
            Answer::Approx { value, sensed_at, from } => {
                s.counters.approx_hits.inc();
                return Json(s.reply(location, value, sensed_at, from, "neighbours")).into_response();
            }
            Answer::Wait { on, read } => {
                s.counters.coalesced.inc();
                let (tx, rx) = oneshot::channel();
                if cache.wait(&on, read, location, tx).is_err() {
                    unreachable!("the cache named a read under way, under the same lock");
                }
                (rx, "coalesced")
            }
            Answer::Read { read } => {
                s.counters.misses.inc();
                let (tx, rx) = oneshot::channel();
                // A registered read answers its asker among its waiters; otherwise directly.
                let direct = match read {
                    Some(id) => {
                        if cache.wait(&location, id, location, tx).is_err() {
                            unreachable!("the read was registered under the same lock");
                        }
                        None
                    }
                    None => Some(tx),
                };
                tokio::spawn(read_field(Arc::clone(&s), location, read, direct));
                (rx, "field")
            }
        }
    };
    match rx.await {
        Ok(Ok(mut reply)) => {
            reply.source = if reply.stale { reply.source } else { source.into() };
            Json(reply).into_response()
        }
        Ok(Err(ReadFailure::Timeout)) => error(
            StatusCode::GATEWAY_TIMEOUT,
            format!("the field did not answer for location {location} within {:?}", s.config.upstream_timeout),
        ),
        Ok(Err(ReadFailure::Upstream(why))) => {
            error(StatusCode::BAD_GATEWAY, format!("reading location {location} from the field failed: {why}"))
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read was dropped without an answer".into()),
    }
}

/// Reads `location` from the field and answers everyone waiting on it (and `direct`, the
/// asker of a policy that does not coalesce).
async fn read_field(s: Arc<Shared>, location: u32, read: Option<ReadId>, direct: Option<Waiter>) {
    let got = match s.config.field_udp {
        Some(addr) => read_udp(addr, location, s.config.upstream_timeout).await,
        None => read_http(&s, location).await,
    };
    answer_read(&s, location, read, direct, got);
}

/// One read over UDP: a datagram out, one back, within `timeout`.
async fn read_udp(addr: std::net::SocketAddr, location: u32, timeout: Duration) -> Result<SensorReading, ReadFailure> {
    let io = |e: std::io::Error| ReadFailure::Upstream(format!("UDP to {addr}: {e}"));
    let local: std::net::SocketAddr = if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let socket = tokio::net::UdpSocket::bind(local).await.map_err(io)?;
    socket.connect(addr).await.map_err(io)?;
    socket.send(format!("read {location}").as_bytes()).await.map_err(io)?;
    let mut buf = vec![0u8; 2048];
    let n =
        tokio::time::timeout(timeout, socket.recv(&mut buf)).await.map_err(|_| ReadFailure::Timeout)?.map_err(io)?;
    match serde_json::from_slice::<SensorReading>(&buf[..n]) {
        Ok(r) => Ok(r),
        Err(_) => Err(ReadFailure::Upstream(
            serde_json::from_slice::<ErrorBody>(&buf[..n])
                .map_or_else(|_| "a reply that is not a reading".into(), |b| b.error),
        )),
    }
}

async fn read_http(s: &Shared, location: u32) -> Result<SensorReading, ReadFailure> {
    let url = format!("{}/v1/sensors/{location}", s.config.field.trim_end_matches('/'));
    async {
        let r = s.client.get(&url).send().await?;
        if !r.status().is_success() {
            let status = r.status();
            let why =
                r.json::<ErrorBody>().await.map_or_else(|_| status.to_string(), |b| format!("{status}: {}", b.error));
            return Ok(Err(ReadFailure::Upstream(why)));
        }
        Ok(Ok(r.json::<SensorReading>().await?))
    }
    .await
    .unwrap_or_else(|e: reqwest::Error| {
        Err(if e.is_timeout() { ReadFailure::Timeout } else { ReadFailure::Upstream(e.to_string()) })
    })
}

/// Loads a read's outcome and answers everyone waiting on it.
fn answer_read(
    s: &Shared,
    location: u32,
    read: Option<ReadId>,
    direct: Option<Waiter>,
    got: Result<SensorReading, ReadFailure>,
) {
    let mut inner = s.inner.lock().expect("no request panics holding the cache");
    let now = s.now();
    let direct = direct.map(|w| (w, location));
    match got {
        Ok(r) => {
            s.counters.upstream_reads.inc();
            s.counters.cost.inc_by(r.cost);
            let sensed_at = s.at(r.sensed_at_ms);
            let waiters = inner.cache.fill(location, read, Reading { value: r.value, sensed_at }, now);
            drop(inner);
            for (w, asked) in waiters.into_iter().chain(direct) {
                let _ = w.send(Ok(s.reply(asked, r.value, sensed_at, vec![location], "field")));
            }
        }
        Err(failure) => {
            s.counters.upstream_failures.inc();
            let waiters = inner.cache.fail(&location, read);
            // RFC 5861: stale-if-error allows a value up to the bound past its freshness.
            let stale = s
                .config
                .stale_if_error
                .and_then(|b| inner.cache.stale_within(&location, now, crate::http::nanos(b)).copied());
            drop(inner);
            for (w, asked) in waiters.into_iter().chain(direct) {
                let usable = stale.filter(|_| asked == location);
                let answer = match usable {
                    Some(e) => {
                        s.counters.stale.inc();
                        let mut r = s.reply(asked, e.reading.value, e.reading.sensed_at, vec![location], "stale");
                        r.stale = true;
                        Ok(r)
                    }
                    None => Err(failure.clone()),
                };
                let _ = w.send(answer);
            }
        }
    }
}
