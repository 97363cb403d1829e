//! The gateway in front of any HTTP origin, as a shared HTTP cache (RFC 9111): `GET`s are
//! answered from stored responses by URL and, where a response varies, by the request fields
//! it names (§4.1); every other method is passed through, an unsafe one that succeeds
//! invalidating what it may have changed (§4.4); `HEAD` is answered from the stored `GET`.
//!
//! What may be stored, how long it is fresh, its age, which stored response a request may use
//! and how a `304` updates it are decided in [`switchyard_core::cache::http`]; this module
//! keeps the responses and does the I/O. A stale response with validators is revalidated with
//! a conditional request; a client's own `If-None-Match`, `If-Modified-Since` and single
//! `Range` are answered from what is stored.
//!
//! Concurrent requests for one URL make one origin read (the core's [`Cache::join`]); a
//! request that read turns out not to serve (not storable, or varying on fields the request
//! does not share) reads for itself, so one user's response never reaches another. RFC
//! 5861's stale-while-revalidate and stale-if-error apply, from the response's own
//! `Cache-Control` or the gateway's options, never to `must-revalidate`, `proxy-revalidate`,
//! `s-maxage` or `no-cache` responses.
//!
//! A response stored is read whole (at most `--max-object-size`) and shared by its readers;
//! one not stored is carried through as it comes, to the request that asked (see
//! [`crate::inflight`]), and request bodies passed to the origin likewise.
//!
//! Every answer says how it was made: `X-Cache: hit | miss | coalesced | revalidated | stale
//! | pass`, `Age` in seconds (§4.2.3), for a stale answer `X-Cache-Stale: revalidating |
//! error | allowed`, and for a response not stored `X-Cache-Store` with the reason.

use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use switchyard_core::Nanos;
use switchyard_core::cache::http::{self as rfc, AgeReading, Fields, Heuristic, Policy, ResponseRules, Use};
use switchyard_core::cache::{AgeFrom, Alone, Answer, Cache, Eviction, Lookup, ReadId, Reading};
use switchyard_core::place::sla::write::WriteRule;
use switchyard_core::place::sla::{RouteKind, Sla};
use tokio::sync::oneshot;

use crate::http::nanos;
use crate::inflight::{self, Activity, FromOrigin, InFlight, ToOrigin};
use crate::memory;
use crate::metrics::{Count, Level, Metrics};
use crate::origins::{FetchError, Fetched, Incoming, OriginSpec, Origins};
use crate::purge::{self, PurgeRules, Scope, TagPurges};
use crate::writes::Replicated;

/// The device token the gateway answers to in `Surrogate-Control` (it announces itself with
/// `Surrogate-Capability: switchyard="Surrogate/1.0"`).
pub const SURROGATE: &str = "switchyard";

/// How the gateway runs in front of an origin (or several).
#[derive(Clone, Debug)]
pub struct OriginConfig {
    /// The origins, each with its price per request. With more than one, they are taken to
    /// hold the same content, and each read goes to them as `route` says.
    pub origins: Vec<OriginSpec>,
    /// How reads are spread over several origins.
    pub route: RouteKind,
    /// The latency SLA Base and OptWait plan for (and `/metrics` counts attainment against).
    pub sla: Sla,
    /// Freshness made up for responses that state none (RFC 9111 §4.2.2); none by default.
    pub heuristic: Heuristic,
    /// How long past its freshness a response is answered at once while a read refreshes it,
    /// where the response does not say (`stale-while-revalidate`).
    pub stale_while_revalidate: Option<Duration>,
    /// How long past its freshness a response is answered when the read fails, where the
    /// response does not say (`stale-if-error`).
    pub stale_if_error: Option<Duration>,
    /// The longest the origin may keep the gateway waiting: to connect, for an answer's head,
    /// or between two pieces of a body. A body carried through (not stored) takes as long as
    /// its size needs while the origin keeps sending; a read to store is bounded whole by
    /// [`OriginConfig::wait_bound`].
    pub upstream_timeout: Duration,
    /// The longest a request waits on a read (its own or one it joined) before it is answered
    /// 504, and the longest such a read may run before its waiters are failed and the next
    /// request reads again; with several origins, also the longest a write waits for its
    /// verdict. `None`: [`OriginConfig::wait_bound`]'s default.
    pub wait_timeout: Option<Duration>,
    /// With several origins: how many must take a write before the client is told it is
    /// stored (`switchyard_core::place::sla::write`).
    pub write_rule: WriteRule,
    /// With several origins: the most bytes of writes held for origins that have not taken
    /// them yet; a write that would pass it is refused with 503 before it is sent.
    pub write_memory: u64,
    /// The most bytes the stored responses may take, everything counted (bodies, fields, keys,
    /// variants, an estimate of the index per URL: see [`crate::memory`]); past it entries are
    /// evicted as `eviction` says (the core's `Cache::bounded_by`).
    pub max_memory: u64,
    /// Which entries go past `max_memory` (`switchyard_core::cache::evict`); by default
    /// [`Eviction::DEFAULT`], chosen from `switchyard bench eviction`.
    pub eviction: Eviction,
    /// How `Age` is read: RFC 9111 §5.1 (the default), or as the cache test suite's npm release
    /// 0.4.5 requires (`rfc::age_field_suite`).
    pub age_reading: AgeReading,
    /// The largest response stored (body and fields); a larger one is answered and not kept.
    /// `None`: [`memory::default_max_object_size`] of `max_memory`.
    pub max_object_size: Option<u64>,
    /// The name of the targeted cache-control field meant for this gateway alone (RFC 9213),
    /// obeyed before `CDN-Cache-Control`, which it obeys as a CDN cache, and before
    /// `Cache-Control` (`rfc::target_list`). By default `Switchyard-Cache-Control`.
    pub targeted_field: String,
    /// Who may send `PURGE` (see [`crate::purge`]); by default this machine only.
    pub purge: PurgeRules,
}

/// Bytes of writes held for origins that lack them, by default (`--write-memory`).
pub const WRITE_MEMORY: u64 = 64 << 20;

impl OriginConfig {
    /// How long a request waits on a read: `wait_timeout`, or by default long enough for each
    /// origin to be tried in turn for the upstream timeout, and a second more.
    pub fn wait_bound(&self) -> Duration {
        self.wait_timeout.unwrap_or_else(|| {
            self.upstream_timeout.saturating_mul(u32::try_from(self.origins.len().max(1)).unwrap_or(u32::MAX))
                + Duration::from_secs(1)
        })
    }

    /// One origin at `url`, with the defaults: no heuristic freshness, no stale answers, a
    /// 10 s read timeout (and, should more origins be added, OptWait for 95 % within 1 s).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            origins: vec![OriginSpec { url: url.into().trim_end_matches('/').to_string(), price: 1.0 }],
            route: RouteKind::OptWait,
            sla: Sla { percent: 0.95, within: Duration::from_secs(1) },
            heuristic: Heuristic::default(),
            stale_while_revalidate: None,
            stale_if_error: None,
            upstream_timeout: Duration::from_secs(10),
            wait_timeout: None,
            write_rule: WriteRule::All,
            write_memory: WRITE_MEMORY,
            max_memory: memory::default_max_memory(),
            eviction: Eviction::DEFAULT,
            age_reading: AgeReading::Rfc,
            max_object_size: None,
            targeted_field: rfc::OWN_TARGETED_FIELD.to_string(),
            purge: PurgeRules::default(),
        }
    }

    /// The largest response stored: `max_object_size`, or its default.
    pub fn object_bound(&self) -> u64 {
        self.max_object_size.unwrap_or_else(|| memory::default_max_object_size(self.max_memory))
    }
}

/// A message's fields as the core reads them (values that are not text left out). Sized at
/// once: grown field by field, the vector's reallocations were 5% of a hit's instructions.
fn fields(h: &HeaderMap) -> Vec<(&str, &str)> {
    let mut out = Vec::with_capacity(h.len());
    out.extend(h.iter().filter_map(|(n, v)| Some((n.as_str(), v.to_str().ok()?))));
    out
}

/// [`purge::TAG_FIELDS`] as header names, so that a hit does not parse them.
const TAG_NAMES: [HeaderName; 2] =
    [HeaderName::from_static(purge::TAG_FIELDS[0]), HeaderName::from_static(purge::TAG_FIELDS[1])];
/// The fields that say how the cache answered.
const X_CACHE: HeaderName = HeaderName::from_static("x-cache");
const X_CACHE_STALE: HeaderName = HeaderName::from_static("x-cache-stale");

/// One stored response.
#[derive(Debug)]
pub struct Variant {
    status: StatusCode,
    /// Its end-to-end fields (those its `no-cache="f"` or `private="f"` name go only to the
    /// request that read it: see [`answer`]).
    headers: HeaderMap,
    /// Whether `headers` holds a purge tag field, which clients are not shown.
    tagged: bool,
    body: Bytes,
    rules: ResponseRules,
    /// Its age when it arrived (§4.2.3's corrected initial age).
    initial_age: Duration,
    /// When it arrived, on the gateway's clock and on the wall clock.
    arrived: Nanos,
    received: SystemTime,
    /// The request fields it was selected with (§4.1).
    vary: Vec<(String, Option<String>)>,
    /// What it costs in memory, all counted.
    weight: u64,
}

impl Variant {
    /// What a variant costs in memory: its body, its fields, its selecting fields, the names
    /// its rules keep from other requests, and itself.
    fn weigh(&self) -> u64 {
        let vary: u64 =
            self.vary.iter().map(|(n, v)| 48 + n.len() as u64 + v.as_ref().map_or(0, |v| v.len() as u64)).sum();
        let omit: u64 = self.rules.omit.iter().map(|n| 40 + n.len() as u64).sum();
        size_of::<Self>() as u64
            + 2 * memory::PER_ALLOCATION
            + self.body.len() as u64
            + memory::fields_weight(&self.headers)
            + vary
            + omit
    }

    /// Its age at `now` (§4.2.3: initial age plus resident time).
    fn age(&self, now: Nanos) -> Duration {
        self.initial_age + Duration::from_nanos(now.0.saturating_sub(self.arrived.0))
    }

    /// The conditional fields that ask the origin whether it is still current (§4.3.1).
    fn validators(&self) -> Vec<(HeaderName, HeaderValue)> {
        let mut out = Vec::new();
        if let Some(tag) = self.headers.get(header::ETAG) {
            out.push((header::IF_NONE_MATCH, tag.clone()));
        }
        if let Some(lm) = self.headers.get(header::LAST_MODIFIED) {
            out.push((header::IF_MODIFIED_SINCE, lm.clone()));
        }
        out
    }
}

/// The responses stored for one URL, one per set of selecting request fields, newest first.
#[derive(Clone, Debug)]
pub struct Kept(Arc<Vec<Arc<Variant>>>);

/// Variants kept per URL; the oldest beyond this are dropped.
const MAX_VARIANTS: usize = 16;

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
    /// What the URL `key` with these variants costs in memory.
    fn weigh(&self, key: &str) -> u64 {
        memory::PER_ENTRY + 3 * key.len() as u64 + self.0.iter().map(|v| v.weight + 8).sum::<u64>()
    }

    /// The stored response `req` may use (§4.1).
    fn find(&self, req: Fields) -> Option<&Arc<Variant>> {
        self.0.iter().find(|v| rfc::vary_matches(&v.vary, req))
    }

    /// `old`'s variants with `v` in place of those the request `req` that brought it would
    /// have selected.
    fn with(old: Option<&Self>, v: Arc<Variant>, req: Fields) -> Self {
        let mut list = vec![v];
        if let Some(old) = old {
            list.extend(old.0.iter().filter(|o| !rfc::vary_matches(&o.vary, req)).cloned());
        }
        list.truncate(MAX_VARIANTS);
        Self(Arc::new(list))
    }
}

/// What a waiter gets: the origin's response, or a failure.
#[derive(Clone, Debug)]
enum Outcome {
    /// The response, and whether it was stored for everyone (if not, only the request that
    /// asked for it may have it).
    /// `origin`: which origin answered (for the access log).
    Got { variant: Arc<Variant>, shared: bool, revalidated: bool, not_stored: Option<&'static str>, origin: usize },
    /// A response not stored, its body carried through as it comes (`variant` has its head
    /// only): for the request the read was made for alone, which takes the body; the others
    /// that waited read for themselves (see [`read_origin`]).
    Streamed { variant: Arc<Variant>, body: Arc<Mutex<Option<FromOrigin>>>, not_stored: &'static str, origin: usize },
    /// The read failed; a stale response that may stand in, if any.
    Failed { timeout: bool, why: String, stale: Option<Arc<Variant>> },
}

/// An origin's body as the read ends with it.
enum ReadBody {
    /// Read whole.
    Whole(Bytes),
    /// To be carried through, not stored, for the reason given.
    Streamed(Box<FromOrigin>, &'static str),
}

/// A waiter: where its outcome goes, and whether its request is the one the read was made for.
type Waiter = (oneshot::Sender<Outcome>, bool);

struct Counters {
    hits: Count,
    misses: Count,
    coalesced: Count,
    revalidated: Count,
    stale_revalidating: Count,
    stale_error: Count,
    upstream_reads: Count,
    upstream_failures: Count,
    not_stored: Count,
    too_large: Count,
    stored_bytes: Level,
    stored_entries: Level,
    evictions: Count,
    evicted_bytes: Count,
    refused: Count,
    purges: Count,
    purges_refused: Count,
    purged: Count,
}

struct Shared {
    cache: Mutex<Cache<String, Waiter, Alone, Kept>>,
    config: OriginConfig,
    policy: Policy,
    client: reqwest::Client,
    /// The client for requests whose bodies are carried through: its waits are bounded by the
    /// body's [`Activity`] rather than from the request's start.
    upload_client: reqwest::Client,
    /// What a reload may change (`--config` and SIGHUP): read once per request that needs it,
    /// and never by a hit, which only the cache answers.
    live: RwLock<Arc<Live>>,
    /// `/metrics`' gateway_max_memory_bytes and gateway_max_object_size_bytes, which a reload moves.
    max_memory: Level,
    max_object_size: Level,
    start: Instant,
    metrics: Metrics,
    counters: Counters,
    /// Bytes of bodies in flight, streamed and buffered.
    inflight: InFlight,
    /// Reads since the cache was last purged.
    reads_since_purge: AtomicU64,
    /// The longest freshness lifetime kept so far, ns: what a purge must leave.
    longest_lifetime: AtomicU64,
    /// When tags were purged, for the reads under way then (see [`purge_request`]).
    tag_purges: Mutex<TagPurges>,
}

type OriginCache = Cache<String, Waiter, Alone, Kept>;

/// The settings a running gateway takes on a reload ([`OriginService::reload`]); the bound on
/// what is stored is the cache's own.
struct Live {
    /// The origins, and the router over several (unused with one).
    origins: Arc<Origins>,
    /// How reads are spread over them, and for what guarantee (`{:?}`, to tell a change).
    plan: String,
    /// Who may purge.
    purge: PurgeRules,
    /// The largest response stored.
    object_bound: u64,
}

/// What a reload changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reloaded {
    /// The origins (or the route or the SLA over them) changed: the router starts afresh.
    pub origins: bool,
    /// The bound on what is stored, before and after.
    pub max_memory: (u64, u64),
    /// Stored URLs evicted at once to fit a smaller bound, and their bytes.
    pub evicted: (u64, u64),
}

/// Reads between purges of what no answer can use any more.
const PURGE_EVERY: u64 = 1024;

/// How long past its freshness a stale response is kept for revalidation at least.
const KEEP_STALE: Duration = Duration::from_secs(600);

impl Shared {
    fn live(&self) -> Arc<Live> {
        Arc::clone(&self.live.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// How long a request waits on a read: `--wait-timeout`, or by default long enough for
    /// each origin there is now to be tried in turn (see [`OriginConfig::wait_bound`]).
    fn wait_bound(&self) -> Duration {
        let n = self.live().origins.specs().len();
        self.config.wait_timeout.unwrap_or_else(|| {
            self.config.upstream_timeout.saturating_mul(u32::try_from(n.max(1)).unwrap_or(u32::MAX))
                + Duration::from_secs(1)
        })
    }

    fn now(&self) -> Nanos {
        Nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// Brings `/metrics`' account of what is stored up to date with `cache` (called under its
    /// lock, after each change).
    fn account(&self, cache: &OriginCache) {
        let c = &self.counters;
        c.stored_bytes.set(i64::try_from(cache.weight()).unwrap_or(i64::MAX));
        c.stored_entries.set(i64::try_from(cache.len()).unwrap_or(i64::MAX));
        let st = cache.stats();
        c.evictions.inc_by(st.evictions.saturating_sub(c.evictions.get()));
        c.evicted_bytes.inc_by(st.evicted_weight.saturating_sub(c.evicted_bytes.get()));
        c.refused.inc_by(st.refused.saturating_sub(c.refused.get()));
    }

    /// Sends `method key` to the origin, or over the origins as the route says (a read: a
    /// write over several origins goes through [`write`]).
    async fn fetch(&self, method: Method, key: &str, headers: HeaderMap, body: Bytes) -> Result<Fetched, FetchError> {
        let live = self.live();
        if let [one] = live.origins.specs() {
            let url = format!("{}{key}", one.url);
            return crate::origins::send(&self.client, method, &url, headers, body, 0)
                .await
                .map_err(|e| FetchError { timeout: e.is_timeout(), why: crate::origins::explain(&e) });
        }
        // Writes over several origins go through `write`, never here.
        live.origins.fetch(&self.client, method, key, headers, body).await
    }
}

/// The routes: `/metrics`, and every other request through the cache (as [`service`] answers
/// them, for servers built on axum's).
pub fn router(config: OriginConfig) -> Router {
    let s = shared(config);
    Router::new()
        .route("/metrics", get(|State(s): State<Arc<Shared>>| async move { s.metrics.render() }))
        .fallback_service(OriginService(Arc::clone(&s)))
        .with_state(s)
}

/// The gateway as one service (what `switchyard gateway serve` runs, through
/// [`crate::listener::serve`]): `/metrics`, and every other request through the cache.
pub fn service(config: OriginConfig) -> OriginService {
    OriginService(shared(config))
}

/// The route and SLA of `config`, as [`Live::plan`] keeps them.
fn plan_of(config: &OriginConfig) -> String {
    format!("{:?} {:?}", config.route, config.sla)
}

impl OriginService {
    /// Takes `config`'s origins, route, SLA, purge rules, `max_memory` and object bound into
    /// the running gateway; the rest of `config` is left as it was (what
    /// [`crate::config::Settings::reload_refusals`] refuses to change). Requests under way
    /// finish with the settings they started with; the next ones get the new.
    ///
    /// New origins (or a new route or SLA) start a new router, its latencies learnt afresh;
    /// writes still owed to the previous origins are still sent to them. A smaller
    /// `max_memory` evicts at once, as `--eviction` orders, down to it.
    pub fn reload(&self, config: &OriginConfig) -> Reloaded {
        let s = &self.0;
        let old = s.live();
        let plan = plan_of(config);
        let same = old.origins.specs() == config.origins.as_slice() && old.plan == plan;
        let origins = if same {
            Arc::clone(&old.origins)
        } else {
            Arc::new(old.origins.again(config.origins.clone(), config.route, config.sla))
        };
        let live = Live { origins, plan, purge: config.purge.clone(), object_bound: config.object_bound() };
        *s.live.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(live);
        let mut cache = s.cache.lock().expect("no request panics holding the cache");
        let before = cache.capacity().unwrap_or(config.max_memory);
        let evicted = if before == config.max_memory { (0, 0) } else { cache.rebound(config.max_memory) };
        s.account(&cache);
        drop(cache);
        s.max_memory.set(i64::try_from(config.max_memory).unwrap_or(i64::MAX));
        s.max_object_size.set(i64::try_from(config.object_bound()).unwrap_or(i64::MAX));
        Reloaded { origins: !same, max_memory: (before, config.max_memory), evicted }
    }

    /// The origins now (as the last reload left them).
    pub fn origins(&self) -> Vec<OriginSpec> {
        self.0.live().origins.specs().to_vec()
    }
}

/// The gateway's requests, answered without a router: a request a stored response answers at
/// once (a hit) is answered in the call itself, with no future to allocate and move; any other
/// goes to [`route`]. (Through axum's router, its routing and the handler's boxed future were
/// an eighth of a hit's instructions: see bench/hit-instructions.sh.)
#[derive(Clone)]
pub struct OriginService(Arc<Shared>);

/// An answer now (a hit, `/metrics`), or one that waits on the origin.
pub enum Answering {
    /// Answered already (taken when polled).
    Now(Option<Response>),
    /// To be answered once the origin or a read under way has said.
    Later(std::pin::Pin<Box<dyn Future<Output = Response> + Send>>),
}

impl Future for Answering {
    type Output = Result<Response, Infallible>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        match self.get_mut() {
            Self::Now(r) => std::task::Poll::Ready(Ok(r.take().expect("an answer is taken once"))),
            Self::Later(f) => f.as_mut().poll(cx).map(Ok),
        }
    }
}

impl<B> tower_service::Service<axum::http::Request<B>> for OriginService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Answering {
        let s = &self.0;
        if request.uri().path() == "/metrics" {
            let r = if matches!(*request.method(), Method::GET | Method::HEAD) {
                s.metrics.render().into_response()
            } else {
                let mut r = StatusCode::METHOD_NOT_ALLOWED.into_response();
                r.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET,HEAD"));
                r
            };
            return Answering::Now(Some(r));
        }
        if let Some(r) = fresh_hit(s, &request) {
            return Answering::Now(Some(r));
        }
        let s = Arc::clone(s);
        Answering::Later(Box::pin(route(s, request.map(Body::new))))
    }
}

/// The answer to a `GET` or `HEAD` that a stored response gives at once, if one does (see
/// [`stored`]); `None` for everything else, which [`route`] decides again under the lock.
fn fresh_hit<B>(s: &Shared, request: &axum::http::Request<B>) -> Option<Response> {
    let head = request.method() == Method::HEAD;
    if !head && request.method() != Method::GET {
        return None;
    }
    let key = key_of(request);
    let rf = fields(request.headers());
    let req = Fields(&rf);
    let rules = rfc::request_rules(req);
    let mut cache = s.cache.lock().expect("no request panics holding the cache");
    let (Some(v), Some((age, how))) = stored(s, &mut cache, &key, req, &rules) else { return None };
    // The answer is built after the lock is let go: it is most of a hit's work, and every
    // other request waits on this lock meanwhile.
    drop(cache);
    Some(answer(&v, age, how, req, head))
}

/// The stored response `req` may use, and, if it answers now (fresh, or stale as the request's
/// `max-stale` allows: counted as a hit, and as a use by the eviction policy), its age and how
/// it answers. Called under the cache's lock.
fn stored(
    s: &Shared,
    cache: &mut OriginCache,
    key: &String,
    req: Fields,
    rules: &rfc::RequestRules,
) -> (Option<Arc<Variant>>, Option<(Duration, How<'static>)>) {
    // One lookup of the key: the entry, and (if it answers) its use, which the bound counts
    // so that it is evicted later.
    let found = cache.use_entry(key, |e| {
        let Some(v) = e.reading.value.find(req) else { return (None, false) };
        let age = v.age(s.now());
        let how = match rfc::usable(&v.rules, age, rules) {
            Use::Fresh => How { cache: "hit", first: false, stale: None, not_stored: None },
            Use::StaleAllowed => How { cache: "stale", first: false, stale: Some("allowed"), not_stored: None },
            Use::Validate => return (Some((Arc::clone(v), None)), false),
        };
        (Some((Arc::clone(v), Some((age, how)))), true)
    });
    let Some((v, answers)) = found.flatten() else { return (None, None) };
    if answers.is_some() {
        s.counters.hits.inc();
    }
    (Some(v), answers)
}

/// The gateway's state.
fn shared(config: OriginConfig) -> Arc<Shared> {
    // A cache passes redirects on; it does not follow them. The upstream timeout bounds each
    // wait on the origin, not a whole answer: a body carried through may take as long as its
    // size needs, while the origin keeps sending.
    let client = reqwest::Client::builder()
        .connect_timeout(config.upstream_timeout)
        .read_timeout(config.upstream_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a plain HTTP client");
    let upload_client = reqwest::Client::builder()
        .connect_timeout(config.upstream_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a plain HTTP client");
    // Each response's own rules decide freshness (see `serve`); the core keeps them and
    // coalesces reads, its T only long enough never to decide.
    // Bounded in bytes: past --max-memory, responses go as --eviction says. The policy's hash
    // is seeded at random: clients choose the URLs, and must not be able to make them collide.
    let seed = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), 0u8);
    let cache = Cache::new(Lookup::Piggyback, Nanos(u64::MAX / 4), AgeFrom::Load, Alone).bounded_by(
        config.max_memory,
        config.eviction,
        seed,
    );
    let mut metrics = Metrics::default();
    let max_memory = metrics.level("gateway_max_memory_bytes", "The bound on what is stored (--max-memory).");
    let max_object_size =
        metrics.level("gateway_max_object_size_bytes", "The largest response stored (--max-object-size).");
    max_memory.set(i64::try_from(config.max_memory).unwrap_or(i64::MAX));
    max_object_size.set(i64::try_from(config.object_bound()).unwrap_or(i64::MAX));
    let counters = Counters {
        hits: metrics.count("gateway_hits", "Answered from a stored response without asking the origin."),
        misses: metrics.count("gateway_misses", "Requests that started a read of the origin."),
        coalesced: metrics.count("gateway_coalesced", "Requests that waited on a read another request started."),
        revalidated: metrics.count("gateway_revalidated", "Stored responses the origin confirmed with a 304."),
        stale_revalidating: metrics
            .count("gateway_stale_while_revalidate", "Stale answers given while a read refreshed them."),
        stale_error: metrics.count("gateway_stale_if_error", "Stale answers given because a read failed."),
        upstream_reads: metrics.count("gateway_upstream_reads", "Reads of the origin that came back."),
        upstream_failures: metrics.count("gateway_upstream_failures", "Reads of the origin that failed or timed out."),
        not_stored: metrics
            .count("gateway_not_stored", "Responses read that RFC 9111 does not let a shared cache store."),
        too_large: metrics.count(
            "gateway_too_large",
            "Responses answered but not stored because they are larger than --max-object-size.",
        ),
        stored_bytes: metrics.level(
            "gateway_stored_bytes",
            "Bytes the stored responses take: bodies, fields, keys, variants and the index, as counted against --max-memory.",
        ),
        stored_entries: metrics.level("gateway_stored_entries", "URLs with a stored response."),
        evictions: metrics.count("gateway_evictions", "Stored URLs evicted (as --eviction says) to stay within --max-memory."),
        evicted_bytes: metrics.count("gateway_evicted_bytes", "Bytes of the stored URLs evicted to stay within --max-memory."),
        refused: metrics.count(
            "gateway_refused",
            "Storable responses the eviction policy did not admit (TinyLFU: less frequent than what they would evict).",
        ),
        purges: metrics.count("gateway_purges", "PURGE requests carried out (by URL, prefix or tag)."),
        purges_refused: metrics
            .count("gateway_purges_refused", "PURGE requests refused: neither --purge-from nor --purge-token allowed them."),
        purged: metrics.count("gateway_purged", "Stored URLs forgotten by purges."),
    };
    let inflight = InFlight::new(&mut metrics);
    let policy = Policy {
        surrogate: SURROGATE.to_string(),
        targets: rfc::target_list(&config.targeted_field),
        heuristic: config.heuristic,
        age_reading: config.age_reading,
    };
    let origins = Origins::new(
        config.origins.clone(),
        config.route,
        config.sla,
        config.write_rule,
        config.write_memory,
        &mut metrics,
    );
    let live = Live {
        origins: Arc::new(origins),
        plan: plan_of(&config),
        purge: config.purge.clone(),
        object_bound: config.object_bound(),
    };
    Arc::new(Shared {
        cache: Mutex::new(cache),
        config,
        policy,
        client,
        upload_client,
        live: RwLock::new(Arc::new(live)),
        max_memory,
        max_object_size,
        start: Instant::now(),
        metrics,
        counters,
        inflight,
        reads_since_purge: AtomicU64::new(0),
        longest_lifetime: AtomicU64::new(0),
        tag_purges: Mutex::new(TagPurges::default()),
    })
}

/// A reader's bound on a stored response's age from its request fields: `Cache-Control:
/// max-age=N`, or `no-cache` (nothing stored will do without asking); `None` for no bound.
pub fn reader_bound(headers: &HeaderMap) -> Option<Nanos> {
    let f = fields(headers);
    let r = rfc::request_rules(Fields(&f));
    if r.no_cache { Some(Nanos::ZERO) } else { r.max_age.map(nanos) }
}

/// `GET` and `HEAD` through the cache, every other method passed through to the origin.
async fn route(s: Arc<Shared>, request: Request) -> Response {
    let method = request.method().clone();
    if method == Method::GET || method == Method::HEAD {
        serve(s, request).await
    } else if purge::is_purge(&method) {
        purge_request(&s, &request)
    } else {
        pass(s, request).await
    }
}

/// A `PURGE` (see [`crate::purge`] for what it names): refused with 403 unless `--purge-from`
/// or `--purge-token` allow it; else what it names is forgotten, and reads of it under way
/// answer their waiters but are not kept. Answered with how many stored URLs went.
fn purge_request(s: &Shared, request: &Request) -> Response {
    let peer = request.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0);
    if let Err(why) = s.live().purge.allows(request.headers(), peer) {
        s.counters.purges_refused.inc();
        return crate::http::error(StatusCode::FORBIDDEN, why);
    }
    let scope = Scope::of(&key_of(request), request.headers());
    if let Scope::Tags(tags) = &scope {
        // Recorded before the stored responses are scanned: a read that stores after the scan
        // finds the purge recorded (see `read_origin`), one that stored before it is scanned.
        let horizon = s.wait_bound() + Duration::from_secs(1);
        s.tag_purges.lock().expect("no request panics holding the tag purges").purged(tags, s.now(), horizon);
    }
    let mut cache = s.cache.lock().expect("no request panics holding the cache");
    let now = s.now();
    let purged = match &scope {
        Scope::Url(key) => {
            let was = usize::from(cache.peek(key).is_some());
            cache.invalidate(key, now);
            was
        }
        Scope::Prefix(prefix) => cache.invalidate_run(prefix, |k| k.starts_with(prefix.as_str()), now),
        Scope::Tags(tags) => cache.invalidate_picked(
            |_, kept| kept.0.iter().any(|v| purge::tags(&v.headers).iter().any(|t| tags.contains(t))),
            now,
        ),
    };
    s.account(&cache);
    drop(cache);
    s.counters.purges.inc();
    s.counters.purged.inc_by(purged as u64);
    let body = serde_json::json!({ "purged": purged, "scope": scope.name() });
    let mut r = axum::Json(body).into_response();
    r.headers_mut().insert("x-cache", HeaderValue::from_static("purge"));
    r
}

/// The request's fields to send to the origin: all but the hop-by-hop ones and `Host`; for a
/// read others may share, without the conditional and range fields (each request's own are
/// answered from the response).
fn forwarded(req: &HeaderMap, shared: bool) -> HeaderMap {
    let f = fields(req);
    let mut out = HeaderMap::new();
    for (name, value) in req {
        if name == header::HOST
            || rfc::hop_by_hop(name.as_str(), Fields(&f))
            || (shared && rfc::CONDITIONAL.contains(&name.as_str()))
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The key of a request: its path and query.
fn key_of<B>(request: &axum::http::Request<B>) -> String {
    request.uri().path_and_query().map_or_else(|| "/".to_string(), |pq| pq.as_str().to_string())
}

/// Passes a request the cache does not answer to the origin, and its answer back; an unsafe
/// method's success invalidates what it may have changed (RFC 9111 §4.4: the target, and the
/// `Location` and `Content-Location` it names on this origin).
///
/// The request's body is carried to the origin as it comes, but for two kinds: a small one of
/// known length (at most [`KEPT_REQUEST`]) is read whole so that it can be sent again should
/// the origin close the connection under it (see `origins::send`), and, with several origins,
/// one that may go to more than one of them (a hedged read, a write to each) is kept to send
/// to each, up to [`SEVERAL_REQUEST`] (a write's also within `--write-memory`).
async fn pass(s: Arc<Shared>, request: Request) -> Response {
    let key = key_of(&request);
    let method = request.method().clone();
    let headers = forwarded(request.headers(), false);
    let unsafe_method = !matches!(method, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE);
    let live = s.live();
    let several = live.origins.specs().len() > 1;
    let small = http_body::Body::size_hint(request.body()).upper().is_some_and(|n| n <= KEPT_REQUEST);
    let got = if several || small {
        let limit = if several { SEVERAL_REQUEST } else { KEPT_REQUEST };
        let body = match axum::body::to_bytes(request.into_body(), usize::try_from(limit).unwrap_or(usize::MAX)).await {
            Ok(b) => b,
            Err(e) => {
                return failure(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the request's body: {e} (with several origins a body is kept to send to each, up to {limit} bytes)"
                    ),
                );
            }
        };
        if unsafe_method && several {
            return write(&s, method, key, headers, body).await;
        }
        s.fetch(method.clone(), &key, headers, body).await
    } else {
        // Sent with the client that has no read timeout of its own: the origin may say
        // nothing for as long as it is still taking the body.
        let url = format!("{}{key}", live.origins.specs()[0].url);
        let activity = Arc::new(Activity::new());
        let body = reqwest::Body::wrap(ToOrigin::new(request.into_body(), &s.inflight, Arc::clone(&activity)));
        let send = crate::origins::send(&s.upload_client, method.clone(), &url, headers, body, 0);
        match activity.bounded(send, s.config.upstream_timeout).await {
            Some(got) => got.map_err(|e| FetchError { timeout: e.is_timeout(), why: crate::origins::explain(&e) }),
            None => Err(FetchError { timeout: true, why: String::new() }),
        }
    };
    let r = match got {
        Ok(r) => r,
        Err(e) if e.timeout => {
            return failure(
                StatusCode::GATEWAY_TIMEOUT,
                format!("the origin did not answer {method} {key} within {:?}", s.config.upstream_timeout),
            );
        }
        Err(e) => return failure(StatusCode::BAD_GATEWAY, format!("{method} {key} to the origin failed: {e}")),
    };
    if unsafe_method && (r.status.is_success() || r.status.is_redirection()) {
        invalidate(&s, &key, Some(&r.headers));
    }
    let origin = r.origin;
    from_origin(&s, origin, passed(r, &s.inflight, s.config.upstream_timeout))
}

/// A request body kept whole to be sent again if need be, at most (larger ones are carried
/// through as they come).
const KEPT_REQUEST: u64 = 64 << 10;

/// A request body kept to be sent to several origins, at most.
const SEVERAL_REQUEST: u64 = 64 << 20;

/// An origin's answer passed on, its body as it comes.
fn passed(r: Fetched, inflight: &InFlight, idle: Duration) -> Response {
    let body = match r.body {
        Incoming::Whole(b) => Body::from(b),
        Incoming::Coming(c) => Body::new(FromOrigin::new(c, inflight, idle)),
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = r.status;
    *resp.headers_mut() = end_to_end(&r.headers, &[]);
    for name in purge::TAG_FIELDS {
        resp.headers_mut().remove(name);
    }
    resp.headers_mut().insert("x-cache", HeaderValue::from_static("pass"));
    resp
}

/// Forgets what a write to `key` may have changed (RFC 9111 §4.4): the key, and the
/// `Location` and `Content-Location` the origin's answer `headers` name on this origin.
fn invalidate(s: &Shared, key: &str, headers: Option<&HeaderMap>) {
    let mut changed = vec![key.to_string()];
    for name in [header::LOCATION, header::CONTENT_LOCATION] {
        if let Some(path) =
            headers.and_then(|h| h.get(&name)).and_then(|v| v.to_str().ok()).and_then(|v| same_origin_path(s, v))
        {
            changed.push(path);
        }
    }
    let mut cache = s.cache.lock().expect("no request panics holding the cache");
    let now = s.now();
    for k in &changed {
        cache.invalidate(k, now);
    }
    s.account(&cache);
}

/// A write over several origins, answered as the write rule's verdict says (see
/// [`crate::writes`]): the first acknowledgement only when the rule is met, 202 when fewer
/// took it but the others are being sent it again, 502 when the rule cannot be met, 503 when
/// the bound on what is held for laggards is reached. Each answer says in `X-Write-Acks` how
/// many origins took it, and in `X-Write-Pending` which are still being sent it.
async fn write(s: &Arc<Shared>, method: Method, key: String, headers: HeaderMap, body: Bytes) -> Response {
    let live = s.live();
    let (n, rule) = (live.origins.specs().len(), s.config.write_rule);
    let needed = rule.needed(n);
    let bound = s.wait_bound();
    let said = |said: &[(usize, String)], of: &[usize]| -> String {
        said.iter()
            .filter(|(b, _)| of.contains(b))
            .map(|(b, t)| format!("{} {t}", live.origins.urls(&[*b])))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let (mut resp, tally) = match live.origins.replicate(&s.client, method.clone(), &key, headers, body, bound).await {
        Replicated::Stored { answer, tally } => {
            invalidate(s, &key, Some(&answer.headers));
            (passed(answer, &s.inflight, s.config.upstream_timeout), Some(tally))
        }
        Replicated::Pending { tally, said: what } => {
            invalidate(s, &key, None);
            let why = format!(
                "{method} {key} is not stored yet: {} of {n} origins took it ({}), and --write-rule {} needs {needed}; {} did not ({}), and {} sent it again until {} take it; meanwhile reads of {key} go only to origins that have it",
                tally.took.len(),
                live.origins.urls(&tally.took),
                rule.name(),
                live.origins.urls(&tally.owed),
                said(&what, &tally.owed),
                if tally.owed.len() == 1 { "is" } else { "are" },
                if tally.owed.len() == 1 { "it" } else { "they" },
            );
            (crate::http::error(StatusCode::ACCEPTED, why), Some(tally))
        }
        Replicated::Diverged { tally, said: what } => {
            invalidate(s, &key, None);
            let why = format!(
                "{method} {key} is not stored as --write-rule {} needs ({needed} of {n} origins): {} took it, but {} will not have it ({}); reads of {key} avoid {} until a PUT or DELETE of {key} reaches {}",
                rule.name(),
                live.origins.urls(&tally.took),
                live.origins.urls(&tally.lost),
                said(&what, &tally.lost),
                if tally.lost.len() == 1 { "it" } else { "them" },
                if tally.lost.len() == 1 { "it" } else { "them" },
            );
            (crate::http::error(StatusCode::BAD_GATEWAY, why), Some(tally))
        }
        Replicated::Refused(f) => (passed(f, &s.inflight, s.config.upstream_timeout), None),
        Replicated::Failed(e) if e.timeout => {
            (failure(StatusCode::GATEWAY_TIMEOUT, format!("no origin took {method} {key} in time: {e}")), None)
        }
        Replicated::Failed(e) => {
            (failure(StatusCode::BAD_GATEWAY, format!("no origin took {method} {key}: {e}")), None)
        }
        Replicated::Full(full) => {
            let why = format!(
                "{method} {key} was not sent to any origin: {full} (--write-memory); try again once the origins that lack writes have taken them"
            );
            let mut r = failure(StatusCode::SERVICE_UNAVAILABLE, why);
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            (r, None)
        }
        Replicated::Busy(d) => {
            let why = format!(
                "{method} {key} was not sent: an earlier write to {key} was still not decided after {d:?} (--wait-timeout), and writes to one URL are sent in order; try again"
            );
            let mut r = failure(StatusCode::SERVICE_UNAVAILABLE, why);
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            (r, None)
        }
        Replicated::Undecided(d) => {
            invalidate(s, &key, None);
            let why = format!(
                "{method} {key}: the origins had not all answered after {d:?} (--wait-timeout); the write goes on and may yet be stored"
            );
            (failure(StatusCode::GATEWAY_TIMEOUT, why), None)
        }
    };
    let h = resp.headers_mut();
    h.insert("x-cache", HeaderValue::from_static("pass"));
    h.insert("x-write-rule", HeaderValue::from_static(rule.name()));
    let acks = tally.as_ref().map_or(0, |t| t.took.len());
    h.insert("x-write-acks", HeaderValue::from_str(&format!("{acks}/{n}")).expect("digits"));
    if let Some(t) = tally.filter(|t| !t.owed.is_empty())
        && let Ok(v) = HeaderValue::from_str(&live.origins.urls(&t.owed))
    {
        h.insert("x-write-pending", v);
    }
    resp
}

/// A response's fields as stored and passed on: without the hop-by-hop ones, those in
/// `omit`, and `Content-Length` (the body sent sets it).
fn end_to_end(h: &HeaderMap, omit: &[String]) -> HeaderMap {
    let f = fields(h);
    let mut out = HeaderMap::new();
    for (name, value) in h {
        let n = name.as_str();
        if n == "content-length" || rfc::hop_by_hop(n, Fields(&f)) || omit.iter().any(|o| o == n) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// `value` as a key of this origin: a path, or an absolute URL on the origin.
fn same_origin_path(s: &Shared, value: &str) -> Option<String> {
    if value.starts_with('/') {
        return Some(value.to_string());
    }
    s.live()
        .origins
        .specs()
        .iter()
        .find_map(|o| value.strip_prefix(o.url.as_str()).filter(|p| p.starts_with('/')).map(str::to_string))
}

/// How an answer was made, for its `X-Cache` fields.
struct How<'a> {
    cache: &'static str,
    /// Whether this request read the response itself (it alone gets the fields the response
    /// asked caches not to reuse).
    first: bool,
    stale: Option<&'static str>,
    not_stored: Option<&'a str>,
}

/// The answer to `req` from `v`: `304` if the request's conditions say the client has it,
/// `206` (or `416`) for a single byte range of a stored `200`, else `v` whole; no body for
/// `HEAD`.
fn answer(v: &Variant, age: Duration, how: How, req: Fields, head: bool) -> Response {
    let mut r = Response::new(Body::empty());
    let ok = v.status == StatusCode::OK;
    let range =
        req.get("range").filter(|_| ok && !req.has("if-range")).map(|r| rfc::byte_range(r, v.body.len() as u64));
    // The stored fields are read as text only for a conditional request: for any other, that
    // reading was a tenth of a hit's instructions.
    let conditional = req.has("if-none-match") || req.has("if-modified-since");
    if ok && conditional && rfc::not_modified(req, Fields(&fields(&v.headers)), v.received) {
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        for name in rfc::NOT_MODIFIED_FIELDS {
            for value in v.headers.get_all(name) {
                r.headers_mut().append(HeaderName::from_static(name), value.clone());
            }
        }
    } else {
        // A clone of the stored map: building it field by field into a map sized for `Age` and
        // `X-Cache` (so that it need not grow for them) cost more, 12,716 instructions a hit
        // against 12,643 (bench/hit-instructions.sh).
        *r.headers_mut() = v.headers.clone();
        if v.tagged {
            for name in &TAG_NAMES {
                r.headers_mut().remove(name);
            }
        }
        if !how.first {
            for name in &v.rules.omit {
                r.headers_mut().remove(name.as_str());
            }
        }
        let len = v.body.len() as u64;
        match range {
            Some(Ok(Some((first, last)))) => {
                *r.status_mut() = StatusCode::PARTIAL_CONTENT;
                r.headers_mut().insert(
                    header::CONTENT_RANGE,
                    HeaderValue::from_str(&format!("bytes {first}-{last}/{len}")).expect("ASCII"),
                );
                if !head {
                    *r.body_mut() = Body::from(v.body.slice(first as usize..=last as usize));
                }
            }
            Some(Err(())) => {
                *r.status_mut() = StatusCode::RANGE_NOT_SATISFIABLE;
                r.headers_mut()
                    .insert(header::CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{len}")).expect("ASCII"));
            }
            _ => {
                *r.status_mut() = v.status;
                if head {
                    r.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(len));
                } else {
                    *r.body_mut() = Body::from(v.body.clone());
                }
            }
        }
    }
    let h = r.headers_mut();
    h.insert(header::AGE, HeaderValue::from(age.as_secs()));
    h.insert(X_CACHE, HeaderValue::from_static(how.cache));
    if let Some(why) = how.stale {
        h.insert(X_CACHE_STALE, HeaderValue::from_static(why));
    }
    if let Some(why) = how.not_stored {
        h.insert("x-cache-store", HeaderValue::from_str(&format!("no ({why})")).expect("ASCII"));
    }
    r
}

/// The answer to `req` from the head `v` and the body `body` carried through as it comes: as
/// [`answer`] makes it, but with no range cut (the body is not at hand: a request with a
/// `Range` has sent it to the origin, see [`serve`], and this is the origin's answer to it),
/// and a `304` or a `HEAD` drops the body, which ends the origin's read.
fn answer_streamed(v: &Variant, age: Duration, how: How, req: Fields, head: bool, body: FromOrigin) -> Response {
    let whole: Vec<(&str, &str)> = req.0.iter().filter(|(n, _)| !n.eq_ignore_ascii_case("range")).copied().collect();
    let mut r = answer(v, age, how, Fields(&whole), true);
    if r.status() == StatusCode::NOT_MODIFIED {
        return r;
    }
    r.headers_mut().remove(header::CONTENT_LENGTH);
    if head {
        if let Some(n) = body.length() {
            r.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
    } else {
        // Its length, when the origin said it, goes on as `Content-Length` (hyper reads the
        // body's size hint): a body cut short is then seen as such, as is a chunked one
        // that ends in an error.
        *r.body_mut() = Body::new(body);
    }
    r
}

fn failure(status: StatusCode, error: String) -> Response {
    let mut r = crate::http::error(status, error);
    r.headers_mut().insert("x-cache", HeaderValue::from_static("miss"));
    r
}

/// What a request needs from the origin, decided under the cache's lock.
enum Plan {
    /// Wait for a read's outcome (`true`: this request started it).
    Wait(oneshot::Receiver<Outcome>, &'static str),
    /// Read for itself alone, with a stale response that may stand in on failure.
    Alone(Option<Arc<Variant>>),
    /// Answered already (a stale response while a read refreshes it).
    Now(Response),
}

async fn serve(s: Arc<Shared>, request: Request) -> Response {
    let head = request.method() == Method::HEAD;
    let key = key_of(&request);
    let req_headers = request.headers();
    let rf = fields(req_headers);
    let req = Fields(&rf);
    let rules = rfc::request_rules(req);
    // One user's requests (Authorization) and those that store nothing read alone: what they
    // bring may be for them only.
    let alone = req.has("authorization") || rules.no_store;
    // The read this request starts, if any.
    let mut start = None;
    let plan = {
        let mut cache = s.cache.lock().expect("no request panics holding the cache");
        let now = s.now();
        let variant = match stored(&s, &mut cache, &key, req, &rules) {
            (Some(v), Some((age, how))) => {
                drop(cache);
                return answer(&v, age, how, req, head);
            }
            (variant, _) => variant,
        };
        if variant.is_some() {
            // To be revalidated, but used: the bound evicts it later.
            cache.touch(&key);
        }
        if rules.only_if_cached {
            return failure(StatusCode::GATEWAY_TIMEOUT, format!("only-if-cached: nothing stored answers {key}"));
        }
        // Stale-while-revalidate, for a request that set no bound of its own.
        let revalidating = variant
            .as_ref()
            .filter(|_| !rules.no_cache && rules.max_age.is_none() && rules.min_fresh.is_none())
            .filter(|v| {
                let grace = v.rules.stale_while_revalidate.max(s.config.stale_while_revalidate);
                grace.is_some_and(|g| rfc::stale_within(&v.rules, v.age(now), g))
            })
            .cloned();
        if alone {
            Plan::Alone(variant)
        } else {
            let (tx, rx) = oneshot::channel();
            let how = match cache.join(&key, now) {
                Answer::Wait { on, read } => {
                    if cache.wait(&on, read, key.clone(), (tx, false)).is_err() {
                        unreachable!("the cache named a read under way, under the same lock");
                    }
                    "coalesced"
                }
                Answer::Read { read: Some(read) } => {
                    if cache.wait(&key, read, key.clone(), (tx, true)).is_err() {
                        unreachable!("the read was registered under the same lock");
                    }
                    s.counters.misses.inc();
                    let forward = forwarded(req_headers, true);
                    start = Some((PendingRead::new(&s, &key, read), forward, variant.clone()));
                    "miss"
                }
                _ => unreachable!("join always coalesces"),
            };
            if let Some(v) = revalidating {
                s.counters.stale_revalidating.inc();
                let how = How { cache: "stale", first: false, stale: Some("revalidating"), not_stored: None };
                Plan::Now(answer(&v, v.age(now), how, req, head))
            } else {
                if how == "coalesced" {
                    s.counters.coalesced.inc();
                }
                Plan::Wait(rx, how)
            }
        }
    };
    // Spawned outside the cache's lock, which the read's guard takes if the task ends at once.
    if let Some((pending, forward, variant)) = start {
        tokio::spawn(read_origin(Arc::clone(&s), key.clone(), Some(pending), forward, variant));
    }
    // Whether the read was sent without this request's range and conditional fields (a read
    // others may share).
    let mut shared_read = true;
    let (outcome, how, first) = match plan {
        Plan::Now(r) => return r,
        Plan::Wait(rx, how) => match tokio::time::timeout(s.wait_bound(), rx).await {
            Ok(Ok(o)) => (o, how, how == "miss"),
            Ok(Err(_)) => {
                return failure(StatusCode::INTERNAL_SERVER_ERROR, "the read was dropped without an answer".into());
            }
            Err(_) => {
                return failure(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!(
                        "waited {:?} (--wait-timeout) for the origin's answer to {key}, and gave up",
                        s.wait_bound()
                    ),
                );
            }
        },
        Plan::Alone(stale) => {
            s.counters.misses.inc();
            shared_read = false;
            (read_origin(Arc::clone(&s), key.clone(), None, forwarded(req_headers, false), stale).await, "miss", true)
        }
    };
    let (outcome, first) = match outcome {
        // A response stored for others, or for this request only, that this request may not
        // have (it was not the one asking, or its fields select another variant): read alone.
        Outcome::Got { variant, shared, .. } if !first && (!shared || !rfc::vary_matches(&variant.vary, req)) => {
            s.counters.misses.inc();
            (read_origin(Arc::clone(&s), key.clone(), None, forwarded(req_headers, false), None).await, true)
        }
        // A body carried through goes to the request the read was made for; the others read
        // for themselves, as nginx's proxy_cache_lock lets them pass through. So does the one
        // it was made for if it asked for a range, which cannot be cut from a body not at
        // hand: the origin is asked for that range (the whole body's read is dropped).
        Outcome::Streamed { .. } if !first || (shared_read && req.has("range")) => {
            s.counters.misses.inc();
            (read_origin(Arc::clone(&s), key.clone(), None, forwarded(req_headers, false), None).await, true)
        }
        o => (o, first),
    };
    let now = s.now();
    match outcome {
        Outcome::Got { variant, revalidated, not_stored, origin, .. } => {
            let how = How { cache: if revalidated { "revalidated" } else { how }, first, stale: None, not_stored };
            from_origin(&s, origin, answer(&variant, variant.age(now), how, req, head))
        }
        Outcome::Streamed { variant, body, not_stored, origin } => {
            let how = How { cache: how, first, stale: None, not_stored: Some(not_stored) };
            let body = body.lock().expect("no request panics holding a body").take();
            match body {
                Some(body) => {
                    from_origin(&s, origin, answer_streamed(&variant, variant.age(now), how, req, head, body))
                }
                None => {
                    failure(StatusCode::INTERNAL_SERVER_ERROR, format!("the body of {key} went to another request"))
                }
            }
        }
        Outcome::Failed { stale: Some(v), .. } => {
            s.counters.stale_error.inc();
            answer(
                &v,
                v.age(now),
                How { cache: "stale", first: false, stale: Some("error"), not_stored: None },
                req,
                head,
            )
        }
        Outcome::Failed { timeout: true, why, .. } => {
            failure(StatusCode::GATEWAY_TIMEOUT, format!("the origin did not answer {key} in time: {why}"))
        }
        Outcome::Failed { why, .. } => {
            failure(StatusCode::BAD_GATEWAY, format!("reading {key} from the origin failed: {why}"))
        }
    }
}

/// `r`, marked for the access log as answered by origin `origin`.
fn from_origin(s: &Shared, origin: usize, mut r: Response) -> Response {
    if let Some(o) = s.config.origins.get(origin) {
        r.extensions_mut().insert(crate::access_log::Upstream::of(&o.url));
    }
    r
}

/// A `304`'s fields laid over the stored ones (RFC 9111 §3.2, §4.3.4).
fn freshened(stored: &HeaderMap, new: &HeaderMap) -> HeaderMap {
    let fresh = end_to_end(new, &[]);
    let mut out = stored.clone();
    for name in fresh.keys() {
        if rfc::updated_by_304(name.as_str()) {
            out.remove(name);
        }
    }
    for (name, value) in &fresh {
        if rfc::updated_by_304(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// A read of the origin under way that others wait on: dropped before the read has answered
/// them (its task cancelled, or a panic), it fails the read, so that its waiters are answered
/// and the next request for the key reads again.
///
/// It is made under the cache's lock with the read it guards, before the read's task is
/// spawned, so that a task cancelled before it first runs fails the read too.
struct PendingRead {
    s: Arc<Shared>,
    key: String,
    read: ReadId,
    /// Whether the read has not answered its waiters yet.
    armed: bool,
}

impl PendingRead {
    fn new(s: &Arc<Shared>, key: &str, read: ReadId) -> Self {
        Self { s: Arc::clone(s), key: key.to_string(), read, armed: true }
    }
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // A panic under the cache's lock poisons it; the waiters must still be answered.
        let waiters =
            self.s.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).fail(&self.key, Some(self.read));
        let why = format!("the read of {} ended without an answer (its task was cancelled or panicked)", self.key);
        let outcome = Outcome::Failed { timeout: false, why, stale: None };
        for ((w, _), _) in waiters {
            let _ = w.send(outcome.clone());
        }
    }
}

/// Reads `key` from the origin with the request fields `forward` (and `stale`'s validators,
/// if it has any), stores what may be stored, and answers everyone waiting on the `pending`
/// read (none if `None`: the caller alone gets the outcome).
async fn read_origin(
    s: Arc<Shared>,
    key: String,
    pending: Option<PendingRead>,
    forward: HeaderMap,
    stale: Option<Arc<Variant>>,
) -> Outcome {
    let read = pending.as_ref().map(|p| p.read);
    let requested = SystemTime::now();
    // Reads of one key may overlap: the one started last is kept, whenever it ends.
    let started = s.now();
    let mut headers = forward.clone();
    let validating = stale.as_ref().is_some_and(|v| !v.validators().is_empty());
    if let Some(v) = stale.as_ref().filter(|_| validating) {
        for (n, value) in v.validators() {
            headers.insert(n, value);
        }
    }
    headers.insert(
        HeaderName::from_static("surrogate-capability"),
        HeaderValue::from_str(&rfc::surrogate_capability(SURROGATE)).expect("a token"),
    );
    // Each attempt is bounded by the upstream timeout, but a read over several origins makes
    // several: the read as a whole, up to its head and, for a body to store, to its end, is
    // bounded by what its waiters wait.
    let bound = s.wait_bound();
    let deadline = tokio::time::Instant::now() + bound;
    let late = || FetchError { timeout: true, why: format!("no answer within {bound:?} (--wait-timeout)") };
    let got = match tokio::time::timeout_at(deadline, s.fetch(Method::GET, &key, headers, Bytes::new())).await {
        Ok(got) => got,
        Err(_) => Err(late()),
    };
    let received = SystemTime::now();
    let rf = fields(&forward);
    let req = Fields(&rf);
    // The head says whether the body is to be stored: if it may be and is not known to be over
    // the bound, it is read whole (past the bound after all, it is carried on from there);
    // otherwise it is carried through as it comes and read by the request that asked alone.
    let object_bound = s.live().object_bound;
    let origin = got.as_ref().map_or(0, |f| f.origin);
    let got = match got {
        Ok(Fetched { status, headers: h, body: Incoming::Coming(r), .. }) => {
            let f = fields(&h);
            let storable = rfc::storable("GET", status.as_u16(), req, Fields(&f), &s.policy);
            let length = r.content_length();
            let kept_whole = status == StatusCode::NOT_MODIFIED
                || rfc::stale_may_answer(status.as_u16())
                || (storable.is_ok() && length.is_none_or(|l| l <= object_bound));
            if !kept_whole {
                let why = storable.err().map_or("larger than --max-object-size", |w| w.as_str());
                Ok((
                    status,
                    h,
                    ReadBody::Streamed(Box::new(FromOrigin::new(r, &s.inflight, s.config.upstream_timeout)), why),
                ))
            } else {
                match tokio::time::timeout_at(
                    deadline,
                    inflight::read_whole(r, object_bound, &s.inflight, s.config.upstream_timeout),
                )
                .await
                {
                    Ok(inflight::Whole::Read(b)) => Ok((status, h, ReadBody::Whole(b))),
                    Ok(inflight::Whole::Over(rest)) => {
                        Ok((status, h, ReadBody::Streamed(rest, "larger than --max-object-size")))
                    }
                    Ok(inflight::Whole::Failed(e)) => Err(FetchError {
                        timeout: e.is_timeout(),
                        why: format!("the body broke off: {}", crate::origins::explain(&e)),
                    }),
                    Err(_) => Err(late()),
                }
            }
        }
        Ok(Fetched { status, headers: h, body: Incoming::Whole(b), .. }) => Ok((status, h, ReadBody::Whole(b))),
        Err(e) => Err(e),
    };
    let mut cache = s.cache.lock().expect("no request panics holding the cache");
    let now = s.now();
    if s.reads_since_purge.fetch_add(1, Ordering::Relaxed) + 1 >= PURGE_EVERY {
        // Drop what no answer or revalidation can use any more, so distinct URLs do not pile up.
        s.reads_since_purge.store(0, Ordering::Relaxed);
        let grace = s.config.stale_while_revalidate.max(s.config.stale_if_error).unwrap_or_default().max(KEEP_STALE);
        let longest = Nanos(s.longest_lifetime.load(Ordering::Relaxed));
        cache.purge(now, Nanos(longest.0.saturating_add(nanos(grace).0)));
    }
    // The stale response that may stand in for a failed read (stale-if-error).
    let stand_in = || {
        stale.clone().filter(|v| {
            let grace = v.rules.stale_if_error.max(s.config.stale_if_error);
            grace.is_some_and(|g| rfc::stale_within(&v.rules, v.age(now), g))
        })
    };
    let make = |status: StatusCode, h: &HeaderMap, body: Bytes, vary: Vec<(String, Option<String>)>| {
        let f = fields(h);
        let rules = rfc::response_rules(status.as_u16(), Fields(&f), &s.policy, received);
        let initial_age = rfc::initial_age(&rules, Fields(&f), requested, received);
        // What is stored is copied out of the buffers it arrived in, so that it holds only
        // what it counts (a body read whole is in an allocation of its own already).
        let headers = if body.len() as u64 <= object_bound {
            memory::own_fields(&end_to_end(h, &[]))
        } else {
            end_to_end(h, &[])
        };
        let tagged = TAG_NAMES.iter().any(|n| headers.contains_key(n));
        let mut v =
            Variant { status, headers, tagged, body, rules, initial_age, arrived: now, received, vary, weight: 0 };
        v.weight = v.weigh();
        v
    };
    let (outcome, store) = match got {
        Ok((status, h, _)) if status == StatusCode::NOT_MODIFIED && validating => {
            s.counters.upstream_reads.inc();
            s.counters.revalidated.inc();
            let old = stale.as_ref().expect("validating a stored response");
            let v = Arc::new(make(old.status, &freshened(&old.headers, &h), old.body.clone(), old.vary.clone()));
            (
                Outcome::Got { variant: Arc::clone(&v), shared: true, revalidated: true, not_stored: None, origin },
                Some(v),
            )
        }
        Ok((status, _, _)) if rfc::stale_may_answer(status.as_u16()) && stand_in().is_some() => {
            s.counters.upstream_failures.inc();
            let why = format!("it answered {status}");
            (Outcome::Failed { timeout: false, why, stale: stand_in() }, None)
        }
        Ok((status, h, ReadBody::Streamed(body, why))) => {
            s.counters.upstream_reads.inc();
            let f = fields(&h);
            let vary = rfc::vary_names(Fields(&f)).map(|names| rfc::vary_key(&names, req)).unwrap_or_default();
            let v = Arc::new(make(status, &h, Bytes::new(), vary));
            if why == "larger than --max-object-size" {
                s.counters.too_large.inc();
            } else {
                s.counters.not_stored.inc();
            }
            let body = Arc::new(Mutex::new(Some(*body)));
            (Outcome::Streamed { variant: v, body, not_stored: why, origin }, None)
        }
        Ok((status, h, ReadBody::Whole(body))) => {
            s.counters.upstream_reads.inc();
            let f = fields(&h);
            let resp = Fields(&f);
            let verdict = rfc::storable("GET", status.as_u16(), req, resp, &s.policy);
            let vary = rfc::vary_names(resp).map(|names| rfc::vary_key(&names, req)).unwrap_or_default();
            let v = Arc::new(make(status, &h, body, vary));
            let storable = verdict.is_ok();
            let too_large = storable && v.weight > object_bound;
            let not_stored = match verdict {
                Err(why) => Some(why.as_str()),
                Ok(()) if too_large => Some("larger than --max-object-size"),
                Ok(()) => None,
            };
            if !storable {
                s.counters.not_stored.inc();
            }
            if too_large {
                s.counters.too_large.inc();
            }
            // A response too large to keep may still be shared by the requests that waited on it.
            let outcome =
                Outcome::Got { variant: Arc::clone(&v), shared: storable, revalidated: false, not_stored, origin };
            (outcome, not_stored.is_none().then_some(v))
        }
        Err(e) => {
            s.counters.upstream_failures.inc();
            (Outcome::Failed { timeout: e.timeout, why: e.why, stale: stand_in() }, None)
        }
    };
    let waiters = match store {
        Some(v) => {
            if let Some(l) = v.rules.lifetime {
                s.longest_lifetime.fetch_max(nanos(l).0, Ordering::Relaxed);
            }
            let tags = purge::tags(&v.headers);
            let purged = !tags.is_empty()
                && s.tag_purges.lock().expect("no request panics holding the tag purges").any_since(&tags, started);
            if purged {
                // One of its tags was purged while it was read: it answers its waiters and is
                // not kept (the core keeps no read that predates an invalidation).
                cache.invalidate(&key, now);
            }
            if purged && read.is_none() {
                Vec::new()
            } else {
                let kept = Kept::with(cache.peek(&key).map(|e| &e.reading.value), v, req);
                let weight = kept.weigh(&key);
                cache.fill_weighted(key, read, Reading { value: kept, sensed_at: started }, now, weight)
            }
        }
        None => cache.fail(&key, read),
    };
    s.account(&cache);
    if let Some(mut p) = pending {
        p.armed = false;
    }
    drop(cache);
    for ((w, _), _) in waiters {
        let _ = w.send(outcome.clone());
    }
    outcome
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

    /// An origin that takes every connection and never answers; its URL, and a receiver told
    /// of each connection.
    async fn silent_origin() -> (String, tokio::sync::mpsc::UnboundedReceiver<()>) {
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
        (url, rx)
    }

    /// A read registered for `key`, one waiter on it, and its guard.
    fn registered(s: &Arc<Shared>, key: &str) -> (PendingRead, oneshot::Receiver<Outcome>) {
        let mut cache = s.cache.lock().unwrap();
        let Answer::Read { read: Some(read) } = cache.join(&key.to_string(), s.now()) else { panic!("a new read") };
        let (tx, rx) = oneshot::channel();
        cache.wait(&key.to_string(), read, key.to_string(), (tx, true)).unwrap();
        (PendingRead::new(s, key, read), rx)
    }

    /// What the waiter got, within a bound that only a hang exceeds.
    async fn answered(rx: oneshot::Receiver<Outcome>) -> String {
        match tokio::time::timeout(Duration::from_secs(10), rx).await {
            Ok(Ok(Outcome::Failed { why, .. })) => why,
            Ok(Ok(o)) => panic!("the read could not have answered: {o:?}"),
            Ok(Err(_)) => panic!("the waiter was dropped unanswered"),
            Err(_) => panic!("the waiter was never answered"),
        }
    }

    /// A read whose task is cancelled (here aborted while it waits on the origin) still
    /// answers its waiters, and the next request for the key reads again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_whose_task_is_cancelled_fails_its_waiters() {
        let (url, mut connected) = silent_origin().await;
        let s = shared(OriginConfig { upstream_timeout: Duration::from_secs(60), ..OriginConfig::new(url) });
        let (pending, rx) = registered(&s, "/k");
        let task = tokio::spawn(read_origin(Arc::clone(&s), "/k".into(), Some(pending), HeaderMap::new(), None));
        connected.recv().await.unwrap();
        task.abort();
        let why = answered(rx).await;
        assert!(why.contains("ended without an answer"), "{why}");
        assert!(!s.cache.lock().unwrap().is_pending(&"/k".to_string()), "the read is no longer under way");
        // Cancelled before it ever ran, too.
        let (pending, rx) = registered(&s, "/j");
        tokio::spawn(read_origin(Arc::clone(&s), "/j".into(), Some(pending), HeaderMap::new(), None)).abort();
        assert!(answered(rx).await.contains("ended without an answer"));
    }

    /// A read whose task panics, even under the cache's lock, still answers its waiters.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_whose_task_panics_fails_its_waiters() {
        let s = shared(OriginConfig::new("http://127.0.0.1:9"));
        let (pending, rx) = registered(&s, "/k");
        let s2 = Arc::clone(&s);
        let task = tokio::spawn(async move {
            let _pending = pending;
            let _cache = s2.cache.lock().unwrap();
            panic!("a bug while the read holds the cache");
        });
        assert!(task.await.unwrap_err().is_panic());
        assert!(answered(rx).await.contains("ended without an answer"));
    }

    #[test]
    fn a_reader_s_cache_control_sets_its_bound() {
        assert_eq!(bound("max-age=30"), Some(Nanos(30_000_000_000)));
        assert_eq!(bound("no-store, Max-Age=5"), Some(Nanos(5_000_000_000)));
        assert_eq!(bound("max-age = 5"), None, "no whitespace around = (RFC 9111 §5.2)");
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
