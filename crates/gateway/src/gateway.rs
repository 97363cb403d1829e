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
    /// The longest a query waits on a read (its own or one it joined) before it is answered
    /// 504, and the longest such a read may run before its waiters are failed and the next
    /// query reads again. `None`: [`GatewayConfig::wait_bound`]'s default.
    pub wait_timeout: Option<Duration>,
    /// A failed read's waiters get the stale value if it is no older than this.
    pub stale_if_error: Option<Duration>,
    /// After each answer, ask the field for the true value (`/v1/truth/{location}`, which only
    /// an emulator has) and count the answer's deviation from it in `/metrics`.
    pub measure_deviation: bool,
    /// Seed of median-of-3's random choices.
    pub seed: u64,
}

impl GatewayConfig {
    /// How long a query waits on a read: `wait_timeout`, or by default the upstream timeout
    /// and a second more.
    pub fn wait_bound(&self) -> Duration {
        self.wait_timeout.unwrap_or(self.upstream_timeout + Duration::from_secs(1))
    }
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
    /// The field did not answer within this long (as text: the bound, and which).
    Timeout(String),
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
    let shared = shared(config, client, Neighbours::from_lists(info.neighbours), info.locations.len());
    Ok(Router::new()
        .route("/v1/readings/{location}", get(reading))
        .route("/metrics", get(|State(s): State<Arc<Shared>>| async move { s.metrics.render() }))
        .with_state(shared))
}

/// The gateway's state, for a field of `locations` with these `neighbours`.
fn shared(config: GatewayConfig, client: reqwest::Client, neighbours: Neighbours, locations: usize) -> Arc<Shared> {
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
    Arc::new(Shared {
        inner: Mutex::new(Inner { cache, draws: ChaCha8Rng::seed_from_u64(config.seed) }),
        locations,
        config,
        client,
        start: Instant::now(),
        metrics,
        counters,
    })
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
    if let Ok(r) = crate::origins::send_again_if_closed(s.client.get(url)).await
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
    // The read this query starts, if any.
    let mut start = None;
    let (rx, source) = {
        let mut inner = s.inner.lock().expect("no request panics holding the cache");
        let Inner { cache, draws } = &mut *inner;
        let now = s.now();
        match cache.query(&location, now, max_age, &mut |n| draws.random_range(0..n)) {
            Answer::Hit(e) => {
                s.counters.hits.inc();
                let reply = s.reply(location, e.reading.value, e.reading.sensed_at, vec![location], "cache");
                return logged_as("hit", Json(reply).into_response());
            }
            Answer::Approx { value, sensed_at, from } => {
                s.counters.approx_hits.inc();
                return logged_as(
                    "approximate",
                    Json(s.reply(location, value, sensed_at, from, "neighbours")).into_response(),
                );
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
                start = Some(PendingRead { s: Arc::clone(&s), location, read, direct, armed: true });
                (rx, "field")
            }
        }
    };
    // Spawned outside the cache's lock, which the read's guard takes if the task ends at once.
    if let Some(pending) = start {
        tokio::spawn(read_field(pending));
    }
    let bound = s.config.wait_bound();
    // In X-Cache's words, as the origin mode says them.
    let word = if source == "field" { "miss" } else { "coalesced" };
    let Ok(got) = tokio::time::timeout(bound, rx).await else {
        return logged_as(
            word,
            error(
                StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "waited {bound:?} (--wait-timeout) for the field's reading of location {location}, and gave up"
                ),
            ),
        );
    };
    let answer = match got {
        Ok(Ok(mut reply)) => {
            reply.source = if reply.stale { reply.source } else { source.into() };
            if reply.stale {
                return logged_as("stale", Json(reply).into_response());
            }
            // The field answered this read: the log names it as the origin asked.
            let mut r = logged_as(word, Json(reply).into_response());
            let field = s.config.field_udp.map_or_else(
                || crate::access_log::Upstream::of(&s.config.field),
                |udp| crate::access_log::Upstream(udp.to_string().into()),
            );
            r.extensions_mut().insert(field);
            return r;
        }
        Ok(Err(ReadFailure::Timeout(within))) => error(
            StatusCode::GATEWAY_TIMEOUT,
            format!("the field did not answer for location {location} within {within}"),
        ),
        Ok(Err(ReadFailure::Upstream(why))) => {
            error(StatusCode::BAD_GATEWAY, format!("reading location {location} from the field failed: {why}"))
        }
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the read was dropped without an answer".into()),
    };
    logged_as(word, answer)
}

/// `r`, marked for the access log with how the cache answered (the field's answers carry it in
/// their JSON `source`, not in an `X-Cache` field).
fn logged_as(word: &'static str, mut r: Response) -> Response {
    r.extensions_mut().insert(crate::access_log::CacheResult(word));
    r
}

/// A read of the field under way, and who waits on it: dropped before it has answered them
/// (its task cancelled, or a panic), it fails the read, so that its waiters are answered and
/// the next query for the location reads again. It is made before the read's task is spawned,
/// so that a task cancelled before it first runs fails the read too.
struct PendingRead {
    s: Arc<Shared>,
    location: u32,
    /// The read's number, if others may wait on it.
    read: Option<ReadId>,
    /// The asker, under a policy that does not coalesce.
    direct: Option<Waiter>,
    /// Whether the read has not answered its waiters yet.
    armed: bool,
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        if self.armed {
            let why = format!(
                "the read of location {} ended without an answer (its task was cancelled or panicked)",
                self.location
            );
            answer_read(self, Err(ReadFailure::Upstream(why)));
        }
    }
}

/// Reads `location` from the field and answers everyone waiting on it (and the asker of a
/// policy that does not coalesce).
async fn read_field(mut pending: PendingRead) {
    let (location, timeout) = (pending.location, pending.s.config.upstream_timeout);
    // Each read is bounded by the upstream timeout; the bound on what its waiters wait holds
    // whatever the read does.
    let bound = pending.s.config.wait_bound();
    let read = async {
        match pending.s.config.field_udp {
            Some(addr) => read_udp(addr, location, timeout).await,
            None => read_http(&pending.s, location).await,
        }
    };
    let got = tokio::time::timeout(bound, read)
        .await
        .unwrap_or_else(|_| Err(ReadFailure::Timeout(format!("{bound:?} (--wait-timeout)"))));
    answer_read(&mut pending, got);
}

/// One read over UDP: a datagram out, one back, within `timeout`.
async fn read_udp(addr: std::net::SocketAddr, location: u32, timeout: Duration) -> Result<SensorReading, ReadFailure> {
    let io = |e: std::io::Error| ReadFailure::Upstream(format!("UDP to {addr}: {e}"));
    let local: std::net::SocketAddr = if addr.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let socket = tokio::net::UdpSocket::bind(local).await.map_err(io)?;
    socket.connect(addr).await.map_err(io)?;
    socket.send(format!("read {location}").as_bytes()).await.map_err(io)?;
    let mut buf = vec![0u8; 2048];
    let n = tokio::time::timeout(timeout, socket.recv(&mut buf))
        .await
        .map_err(|_| ReadFailure::Timeout(format!("{timeout:?}")))?
        .map_err(io)?;
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
        let r = crate::origins::send_again_if_closed(s.client.get(&url)).await?;
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
        Err(if e.is_timeout() {
            ReadFailure::Timeout(format!("{:?}", s.config.upstream_timeout))
        } else {
            ReadFailure::Upstream(e.to_string())
        })
    })
}

/// Loads a read's outcome and answers everyone waiting on it; the read is then done.
fn answer_read(pending: &mut PendingRead, got: Result<SensorReading, ReadFailure>) {
    pending.armed = false;
    let (s, location, read) = (&*pending.s, pending.location, pending.read);
    // A panic under the lock poisons it; a read's waiters must still be answered.
    let mut inner = s.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let now = s.now();
    let direct = pending.direct.take().map(|w| (w, location));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A gateway of two locations in front of a field that takes every connection and never
    /// answers; and a receiver told of each connection.
    async fn silent_field() -> (Arc<Shared>, tokio::sync::mpsc::UnboundedReceiver<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
                let _ = tx.send(());
            }
        });
        let config = GatewayConfig {
            field: url,
            field_udp: None,
            lookup: Lookup::Piggyback,
            ttl: Duration::from_secs(60),
            age_from: AgeFrom::Load,
            keep_approximations: false,
            upstream_timeout: Duration::from_secs(60),
            wait_timeout: None,
            stale_if_error: None,
            measure_deviation: false,
            seed: 1,
        };
        let neighbours = Neighbours::from_lists(vec![vec![(1, 1.0)], vec![(0, 1.0)]]);
        (shared(config, reqwest::Client::new(), neighbours, 2), rx)
    }

    /// A read of `location` registered, one waiter on it, and its guard.
    fn registered(
        s: &Arc<Shared>,
        location: u32,
    ) -> (PendingRead, oneshot::Receiver<Result<ReadingReply, ReadFailure>>) {
        let mut inner = s.inner.lock().unwrap();
        let Answer::Read { read: Some(read) } = inner.cache.query(&location, s.now(), None, &mut |_| 0) else {
            panic!("a new read")
        };
        let (tx, rx) = oneshot::channel();
        inner.cache.wait(&location, read, location, tx).unwrap();
        (PendingRead { s: Arc::clone(s), location, read: Some(read), direct: None, armed: true }, rx)
    }

    /// What the waiter got, within a bound that only a hang exceeds.
    async fn answered(rx: oneshot::Receiver<Result<ReadingReply, ReadFailure>>) -> String {
        match tokio::time::timeout(Duration::from_secs(10), rx).await {
            Ok(Ok(Err(ReadFailure::Upstream(why)))) => why,
            Ok(Ok(o)) => panic!("the read could not have answered so: {o:?}"),
            Ok(Err(_)) => panic!("the waiter was dropped unanswered"),
            Err(_) => panic!("the waiter was never answered"),
        }
    }

    /// A read whose task is cancelled (aborted while it waits on the field, or before it ever
    /// ran) or panics still answers its waiters, and the next query reads again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_whose_task_is_cancelled_or_panics_fails_its_waiters() {
        let (s, mut connected) = silent_field().await;
        let (pending, rx) = registered(&s, 0);
        let task = tokio::spawn(read_field(pending));
        connected.recv().await.unwrap();
        task.abort();
        assert!(answered(rx).await.contains("ended without an answer"));
        assert!(!s.inner.lock().unwrap().cache.is_pending(&0), "the read is no longer under way");
        let (pending, rx) = registered(&s, 0);
        tokio::spawn(read_field(pending)).abort();
        assert!(answered(rx).await.contains("ended without an answer"));
        let (pending, rx) = registered(&s, 1);
        let s2 = Arc::clone(&s);
        let task = tokio::spawn(async move {
            let _pending = pending;
            let _inner = s2.inner.lock().unwrap();
            panic!("a bug while the read holds the cache");
        });
        assert!(task.await.unwrap_err().is_panic());
        assert!(answered(rx).await.contains("ended without an answer"));
    }
}
