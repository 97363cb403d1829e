//! Cacheflow's cooperating gateways over HTTP (Dou 2011 ch. 4): each keeps an LRU of objects
//! read from an origin, tells its neighbours what it adds and evicts (batched, Cacheflow's
//! link buffer), evicts first what a neighbour also holds, and serves a client's request for a
//! set of objects together with its neighbours (the split is the core's,
//! `switchyard_core::cache::cacheflow`).
//!
//! - `POST /v1/coop/local`: the client's own gateway. Body: one key per line. It answers what
//!   it holds, loads from the origin what no neighbour's view shows, and names in
//!   `X-Cacheflow-Ignore` the neighbours too thin to wait for.
//! - `POST /v1/coop/remote`: a neighbour. It answers what it holds of the keys.
//! - `POST /v1/coop/updates`: a neighbour's adds and evictions (JSON, [`Updates`]). A gateway
//!   that starts sends each neighbour everything it holds, marked to replace what the neighbour
//!   knew of it, and asks for the same back (ours, not Cacheflow's: see [`Updates`]).
//! - `GET /v1/coop/neighbours`: the neighbours a client should also ask.
//!
//! Answers are framed objects: for each, the key's length (2 bytes, big-endian), the key, the
//! body's length (4 bytes) and the body. A header `X-Cacheflow-Loaded` counts the objects loaded
//! from the origin. `GET /metrics` in Prometheus text.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, body::Bytes};
use serde::{Deserialize, Serialize};
use switchyard_core::cache::cacheflow::{Batch, Merged, Server, merge};

use crate::metrics::{Count, Level, Metrics};

/// How one cooperating gateway runs.
#[derive(Clone, Debug)]
pub struct CoopConfig {
    /// This gateway's own base URL, as its neighbours reach it.
    pub me: String,
    /// The origin's base URL; an object `K` is read from `{origin}{K}`.
    pub origin: String,
    /// Objects kept.
    pub capacity: usize,
    /// Evict first what a neighbour holds.
    pub dedup: bool,
    /// Changes buffered per neighbour before they are sent (Cacheflow's L).
    pub link_buffer: usize,
    /// Fewest objects a neighbour must hold of a request to be waited for.
    pub threshold: usize,
    /// The longest a read of the origin may take.
    pub upstream_timeout: Duration,
}

/// A neighbour's report of what it added (`true`) and evicted.
///
/// Changes alone cannot survive a restart: a restarted gateway holds nothing but never reports
/// evicting what it held before, so its neighbours would leave requests for those objects to it
/// for good (mispredicted, never delivered), and its own views of them would start empty. So a
/// gateway that starts sends each neighbour a `reset` holding everything it holds, with
/// `want_snapshot`, and the neighbour answers with a `reset` of its own (ours, not Cacheflow's;
/// the core's [`Server::forget`] and [`Server::snapshot`]). Both flags default to `false`, so
/// gateways without them still interoperate (without the resynchronisation).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Updates {
    /// The neighbour's own URL.
    pub from: String,
    /// (key, added) in the order they happened.
    pub changes: Vec<(String, bool)>,
    /// Forget the view of the neighbour before applying `changes`: they are everything it holds.
    #[serde(default)]
    pub reset: bool,
    /// Answer with a `reset` of everything this gateway holds: the neighbour (re)started and
    /// knows nothing of it.
    #[serde(default)]
    pub want_snapshot: bool,
}

struct Node {
    /// The core's server: cache, views of the neighbours, changes owed them.
    server: Server<String>,
    bodies: std::collections::BTreeMap<String, Bytes>,
    neighbours: Vec<String>,
}

struct Shared {
    state: Mutex<Node>,
    /// One sender per neighbour, in order, so its batches arrive in the order they were made
    /// (an add overtaken by its own eviction would leave a key in the neighbour's view).
    outboxes: Mutex<Vec<tokio::sync::mpsc::UnboundedSender<Updates>>>,
    config: CoopConfig,
    client: reqwest::Client,
    metrics: Metrics,
    local_hits: Count,
    loads: Count,
    remote_served: Count,
    updates_sent: Count,
    viewed: Level,
}

/// One cooperating gateway.
#[derive(Clone)]
pub struct CoopNode(Arc<Shared>);

/// Frames `items` as the answers above.
pub fn frame(items: &[(String, Bytes)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, b) in items {
        // Keys are at most MAX_KEY_BYTES and bodies under 4 GiB (both checked where they come
        // in), so the lengths fit their fields; a cut key would name another object.
        let klen = u16::try_from(k.len()).expect("keys are checked to be at most MAX_KEY_BYTES");
        let blen = u32::try_from(b.len()).expect("bodies of 4 GiB or more are not kept");
        out.extend_from_slice(&klen.to_be_bytes());
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(&blen.to_be_bytes());
        out.extend_from_slice(b);
    }
    out
}

/// Reads framed objects; `None` if the bytes are cut short or a key is not UTF-8.
pub fn unframe(mut bytes: &[u8]) -> Option<Vec<(String, usize)>> {
    let mut items = Vec::new();
    while !bytes.is_empty() {
        let klen = usize::from(u16::from_be_bytes(bytes.get(..2)?.try_into().ok()?));
        let key = std::str::from_utf8(bytes.get(2..2 + klen)?).ok()?.to_string();
        bytes = &bytes[2 + klen..];
        let blen = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
        bytes.get(4..4 + blen)?;
        bytes = &bytes[4 + blen..];
        items.push((key, blen));
    }
    Some(items)
}

/// Most keys one request may name.
pub const MAX_KEYS: usize = 10_000;

/// The longest key, in bytes (a path at the origin; longer ones are refused rather than cut).
pub const MAX_KEY_BYTES: usize = 8 * 1024;

/// The keys of a request body, one per line: each a path (starting with `/`, so it can only
/// name an object at the origin), each once, at most [`MAX_KEYS`].
fn keys(body: &Bytes) -> Result<Vec<String>, String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(body).lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !line.starts_with('/') {
            return Err(format!(
                "key `{}`: keys are paths at the origin, starting with /",
                line.chars().take(60).collect::<String>()
            ));
        }
        if line.len() > MAX_KEY_BYTES {
            return Err(format!("a key of {} bytes: at most {MAX_KEY_BYTES}", line.len()));
        }
        if seen.insert(line) {
            out.push(line.to_string());
        }
    }
    if out.len() > MAX_KEYS {
        return Err(format!("{} keys: at most {MAX_KEYS} a request", out.len()));
    }
    Ok(out)
}

impl CoopNode {
    /// A gateway with an empty cache and no neighbours yet.
    pub fn new(config: CoopConfig) -> Self {
        let client = reqwest::Client::builder().timeout(config.upstream_timeout).build().expect("a plain HTTP client");
        let mut metrics = Metrics::default();
        let local_hits = metrics.count("coop_local_hits", "Objects of local requests answered from this cache.");
        let loads = metrics.count("coop_loads", "Objects loaded from the origin.");
        let remote_served =
            metrics.count("coop_remote_served", "Objects of neighbours' clients answered from this cache.");
        let updates_sent = metrics.count("coop_update_batches_sent", "Batches of changes sent to neighbours.");
        let viewed = metrics.level("coop_viewed_keys", "Objects the views of the neighbours show, summed.");
        let state = Node {
            server: Server::new(config.capacity, config.dedup, 0, config.link_buffer),
            bodies: Default::default(),
            neighbours: Vec::new(),
        };
        Self(Arc::new(Shared {
            state: Mutex::new(state),
            outboxes: Mutex::new(Vec::new()),
            config,
            client,
            metrics,
            local_hits,
            loads,
            remote_served,
            updates_sent,
            viewed,
        }))
    }

    /// Its neighbours (their base URLs), with an empty cache; their views start empty. Each
    /// neighbour is told to forget what it knew of this gateway (which may have restarted) and
    /// asked for everything it holds (see [`Updates`]).
    pub fn set_neighbours(&self, neighbours: Vec<String>) {
        let mut senders = Vec::new();
        for url in &neighbours {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Updates>();
            let (client, url) = (self.0.client.clone(), format!("{}/v1/coop/updates", url.trim_end_matches('/')));
            tokio::spawn(async move {
                while let Some(batch) = rx.recv().await {
                    // A batch is retried until the neighbour takes it (or refuses it outright),
                    // before the next is sent: a batch lost would leave the neighbour's view of
                    // this cache wrong for good, and one overtaken would apply out of order.
                    let mut wait = Duration::from_millis(100);
                    loop {
                        match client.post(&url).json(&batch).send().await {
                            Ok(r) if r.status().is_success() => break,
                            Ok(r) if r.status().is_client_error() => {
                                eprintln!("switchyard: {url} refused our updates: {}", r.status());
                                break;
                            }
                            Ok(r) => eprintln!("switchyard: {url} failed our updates ({}); retrying", r.status()),
                            Err(e) => eprintln!("switchyard: sending updates to {url}: {e}; retrying"),
                        }
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(5));
                    }
                }
            });
            senders.push(tx);
        }
        *self.0.outboxes.lock().expect("not poisoned") = senders;
        let mut st = self.0.state.lock().expect("not poisoned");
        st.server =
            Server::new(self.0.config.capacity, self.0.config.dedup, neighbours.len(), self.0.config.link_buffer);
        st.bodies.clear();
        st.neighbours = neighbours.iter().map(|n| n.trim_end_matches('/').to_string()).collect();
        self.0.viewed.set(0);
        // Queued under the state's lock, ahead of any change the cache makes from now on.
        let snapshots = (0..neighbours.len()).map(|i| st.server.snapshot(i)).collect();
        send(&self.0, snapshots, Resync::Ask);
    }

    /// The routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/v1/coop/local", post(local))
            .route("/v1/coop/remote", post(remote))
            .route("/v1/coop/updates", post(updates))
            .route(
                "/v1/coop/neighbours",
                get(|State(s): State<Arc<Shared>>| async move {
                    Json(s.state.lock().expect("not poisoned").neighbours.clone())
                }),
            )
            .route("/metrics", get(|State(s): State<Arc<Shared>>| async move { s.metrics.render() }))
            .with_state(Arc::clone(&self.0))
    }
}

/// What batches sent together are: changes, or everything held (see [`Updates`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resync {
    /// Changes since the last batch.
    No,
    /// Everything held, answering a neighbour that asked.
    Answer,
    /// Everything held, asking the neighbour for the same.
    Ask,
}

/// The most bytes of changes (as JSON) one request carries, well within the 2 MB body axum
/// takes by default: a larger batch, such as everything a large cache holds, would be refused.
const MAX_UPDATE_BYTES: usize = 1 << 20;

/// `changes` in pieces of at most [`MAX_UPDATE_BYTES`] (a change is at most 50 KiB, its key
/// being at most [`MAX_KEY_BYTES`]), in order; always at least one piece, perhaps empty.
fn pieces(changes: Vec<(String, bool)>) -> Vec<Vec<(String, bool)>> {
    let mut out = vec![Vec::new()];
    let mut bytes = 0;
    for change in changes {
        let n = serde_json::to_vec(&change).expect("a string and a bool serialise").len() + 1;
        if bytes + n > MAX_UPDATE_BYTES && out.last().is_some_and(|p| !p.is_empty()) {
            out.push(Vec::new());
            bytes = 0;
        }
        bytes += n;
        out.last_mut().expect("never empty").push(change);
    }
    out
}

/// Sends batches to the neighbours they are due to, each neighbour's in order, a large one in
/// pieces whose first alone carries the [`Resync`] flags. Callers hold the state's lock, so
/// that batches are queued in the order the cache made them.
fn send(s: &Shared, due: Vec<Batch<String>>, resync: Resync) {
    let outboxes = s.outboxes.lock().expect("not poisoned");
    for (i, changes) in due {
        if let Some(tx) = outboxes.get(i) {
            for (j, changes) in pieces(changes).into_iter().enumerate() {
                s.updates_sent.inc();
                let _ = tx.send(Updates {
                    from: s.config.me.trim_end_matches('/').to_string(),
                    changes,
                    reset: j == 0 && resync != Resync::No,
                    want_snapshot: j == 0 && resync == Resync::Ask,
                });
            }
        }
    }
}

async fn local(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let files = match keys(&body) {
        Ok(k) => k,
        Err(why) => return crate::http::error(axum::http::StatusCode::BAD_REQUEST, why),
    };
    let (plan, mut items) = {
        let mut st = s.state.lock().expect("not poisoned");
        let plan = st.server.plan(&files, s.config.threshold);
        let items: Vec<(String, Bytes)> =
            plan.hits.iter().filter_map(|k| st.bodies.get(k).map(|b| (k.clone(), b.clone()))).collect();
        (plan, items)
    };
    s.local_hits.inc_by(items.len() as u64);
    // Load what no neighbour holds, side by side.
    let mut reads = tokio::task::JoinSet::new();
    for k in plan.loads.clone() {
        let (client, url) = (s.client.clone(), format!("{}{k}", s.config.origin.trim_end_matches('/')));
        reads.spawn(async move {
            let body = async { client.get(url).send().await?.error_for_status()?.bytes().await }.await;
            (k, body)
        });
    }
    let mut loaded = Vec::new();
    let mut failed = 0u64;
    while let Some(done) = reads.join_next().await {
        match done {
            // The framing's length field is 32 bits: a body that large is not served.
            Ok((k, Ok(b))) if u32::try_from(b.len()).is_ok() => loaded.push((k, b)),
            _ => failed += 1,
        }
    }
    s.loads.inc_by(loaded.len() as u64);
    {
        let mut st = s.state.lock().expect("not poisoned");
        let keys: Vec<String> = loaded.iter().map(|(k, _)| k.clone()).collect();
        let (evicted, due) = st.server.keep(&keys);
        for (k, b) in &loaded {
            if st.server.cache().contains(k) {
                st.bodies.insert(k.clone(), b.clone());
            }
        }
        for gone in evicted {
            st.bodies.remove(&gone);
        }
        // Queued under the state's lock: two requests that change the cache queue their
        // batches in the order they changed it, or a neighbour could apply an eviction before
        // the addition it undoes and keep a key this server no longer holds.
        send(&s, due, Resync::No);
        drop(st);
    }
    let n_loaded = loaded.len();
    items.extend(loaded);
    let mut headers = HeaderMap::new();
    let ignore = plan.ignore.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    headers.insert("x-cacheflow-ignore", HeaderValue::from_str(&ignore).expect("digits and commas"));
    headers.insert("x-cacheflow-loaded", HeaderValue::from(n_loaded));
    headers.insert("x-cacheflow-failed", HeaderValue::from(failed));
    (headers, frame(&items)).into_response()
}

async fn remote(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let files = match keys(&body) {
        Ok(k) => k,
        Err(why) => return crate::http::error(axum::http::StatusCode::BAD_REQUEST, why),
    };
    let items: Vec<(String, Bytes)> = {
        let mut st = s.state.lock().expect("not poisoned");
        let held = st.server.serve(&files, s.config.threshold);
        held.into_iter().filter_map(|k| st.bodies.get(&k).map(|b| (k, b.clone()))).collect()
    };
    s.remote_served.inc_by(items.len() as u64);
    frame(&items).into_response()
}

async fn updates(State(s): State<Arc<Shared>>, Json(u): Json<Updates>) -> Response {
    let mut st = s.state.lock().expect("not poisoned");
    let Some(i) = st.neighbours.iter().position(|n| *n == u.from) else {
        return (axum::http::StatusCode::FORBIDDEN, format!("{} is not a neighbour of {}", u.from, s.config.me))
            .into_response();
    };
    if u.reset {
        st.server.forget(i);
    }
    st.server.apply(i, u.changes);
    s.viewed.set(i64::try_from(st.server.viewed()).unwrap_or(i64::MAX));
    if u.want_snapshot {
        // Under the state's lock, like every batch, so that no change made before it arrives
        // after it (and none made after it, before).
        let snapshot = st.server.snapshot(i);
        send(&s, vec![snapshot], Resync::Answer);
    }
    axum::http::StatusCode::NO_CONTENT.into_response()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn frames_round_trip() {
        let items = vec![("/files/1".to_string(), Bytes::from_static(b"abc")), ("/files/22".to_string(), Bytes::new())];
        assert_eq!(unframe(&frame(&items)), Some(vec![("/files/1".into(), 3), ("/files/22".into(), 0)]));
        assert_eq!(unframe(&frame(&items)[..5]), None, "cut short");
    }

    #[test]
    fn a_large_batch_goes_in_pieces_within_the_body_limit() {
        assert_eq!(pieces(Vec::new()), vec![Vec::<(String, bool)>::new()], "a snapshot of nothing is still sent");
        let changes: Vec<(String, bool)> =
            (0..400).map(|i| (format!("/{i}/{}", "\"".repeat(MAX_KEY_BYTES / 2 - 8)), i % 3 == 0)).collect();
        let whole = serde_json::to_vec(&changes).unwrap().len();
        assert!(whole > 2_000_000, "unsplit, axum would refuse it: {whole} bytes");
        let split = pieces(changes.clone());
        assert!(split.len() > 1);
        for p in &split {
            assert!(serde_json::to_vec(p).unwrap().len() <= MAX_UPDATE_BYTES);
        }
        assert_eq!(split.concat(), changes, "the same changes in the same order");
    }

    proptest! {
        #[test]
        fn any_bytes_unframe_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = unframe(&bytes);
        }
    }
}

/// What a client got for one set: the core's [`Merged`].
pub type SetOutcome = Merged;

/// A Cacheflow client's request: the set's `keys` to `local` and to each of `neighbours` at
/// once, the answers merged as the thesis's client does (a neighbour the local gateway says to
/// ignore is ignored).
pub async fn ask_set(
    client: &reqwest::Client,
    local: &str,
    neighbours: &[String],
    keys: &[String],
) -> Result<SetOutcome, String> {
    // A set names each key once; a repeated key would break the counts.
    let mut seen = std::collections::BTreeSet::new();
    let keys: Vec<String> = keys.iter().filter(|k| seen.insert(k.as_str())).cloned().collect();
    let keys = keys.as_slice();
    let body = keys.join("\n");
    let post = |base: &str, role: &str| {
        let (client, url, body) = (client.clone(), format!("{base}/v1/coop/{role}"), body.clone());
        async move {
            let r = client.post(&url).body(body).send().await.map_err(|e| format!("{url}: {e}"))?;
            if !r.status().is_success() {
                return Err(format!("{url}: {}", r.status()));
            }
            let header = |n: &str| r.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            let (ignore, loaded) =
                (header("x-cacheflow-ignore"), (header("x-cacheflow-loaded"), header("x-cacheflow-failed")));
            let bytes = r.bytes().await.map_err(|e| format!("{url}: {e}"))?;
            let items = unframe(&bytes).ok_or_else(|| format!("{url}: a damaged answer"))?;
            Ok::<_, String>((items, ignore, loaded))
        }
    };
    let remotes: Vec<_> = neighbours.iter().map(|n| tokio::spawn(post(n, "remote"))).collect();
    let (items, ignore, loaded) = post(local, "local").await?;
    let ignore: Vec<usize> = ignore.split(',').filter_map(|i| i.parse().ok()).collect();
    let local: Vec<String> = items.into_iter().map(|(k, _)| k).collect();
    let mut replies = Vec::new();
    for (i, r) in remotes.into_iter().enumerate() {
        let (items, _, _) = r.await.map_err(|e| e.to_string())??;
        replies.push((i, items.into_iter().map(|(k, _)| k).collect()));
    }
    let (loads, failed) = loaded;
    Ok(merge(keys, &local, loads.parse().unwrap_or(0), failed.parse().unwrap_or(0), &ignore, &replies))
}

/// An origin of `count` objects of `size` bytes at `/files/{i}`, counting its reads at
/// `/metrics` (`origin_reads_total`): what the cooperating gateways are tested against.
pub fn files(count: usize, size: usize) -> Router {
    let mut metrics = Metrics::default();
    let reads = metrics.count("origin_reads", "Objects read.");
    let metrics = Arc::new(metrics);
    Router::new()
        .route(
            "/files/{i}",
            get(move |axum::extract::Path(i): axum::extract::Path<usize>| {
                let reads = reads.clone();
                async move {
                    if i >= count {
                        return (
                            axum::http::StatusCode::NOT_FOUND,
                            Bytes::from(format!("no object {i}: there are {count}")),
                        );
                    }
                    reads.inc();
                    (axum::http::StatusCode::OK, Bytes::from(vec![(i % 251) as u8; size]))
                }
            }),
        )
        .route("/metrics", get(move || async move { metrics.render() }))
}

/// A cluster of cooperating gateways (or lone ones) in this process, with an origin and
/// clients, on loopback: Cacheflow's experiment on real servers.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Gateways.
    pub servers: usize,
    /// Clients per gateway.
    pub clients_per_server: usize,
    /// Whether gateways cooperate (neighbours on a ring, two each).
    pub cooperate: bool,
    /// Objects each gateway keeps.
    pub capacity: usize,
    /// Evict first what a neighbour holds.
    pub dedup: bool,
    /// Changes buffered per neighbour (L).
    pub link_buffer: usize,
    /// The objects' size in bytes.
    pub object_size: usize,
    /// Objects at the origin.
    pub files: usize,
    /// The sets clients ask for (object numbers).
    pub sets: Vec<Vec<u32>>,
    /// Requests each client makes, of which the first `warmup` are not counted.
    pub requests: usize,
    /// Requests per client not counted.
    pub warmup: usize,
    /// The pause between a client's requests.
    pub period: Duration,
    /// Seed of the clients' choices of sets.
    pub seed: u64,
}

async fn bind() -> Result<(tokio::net::TcpListener, String), String> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let url = format!("http://{}", l.local_addr().map_err(|e| e.to_string())?);
    Ok((l, url))
}

/// Runs the cluster and returns what the clients got after their warm-up.
pub async fn run_cluster(c: &ClusterConfig) -> Result<SetOutcome, String> {
    use rand::SeedableRng;
    let (l, origin) = bind().await?;
    let origin_app = files(c.files, c.object_size);
    let mut tasks = vec![tokio::spawn(async move {
        let _ = axum::serve(l, origin_app).await;
    })];
    let mut urls = Vec::new();
    let mut nodes = Vec::new();
    for _ in 0..c.servers {
        let (l, me) = bind().await?;
        let node = CoopNode::new(CoopConfig {
            me: me.clone(),
            origin: origin.clone(),
            capacity: c.capacity,
            dedup: c.dedup,
            link_buffer: c.link_buffer,
            threshold: 0,
            upstream_timeout: Duration::from_secs(10),
        });
        let app = node.router();
        tasks.push(tokio::spawn(async move {
            let _ = axum::serve(l, app).await;
        }));
        urls.push(me);
        nodes.push(node);
    }
    let n = c.servers;
    for (i, node) in nodes.iter().enumerate() {
        let ring: Vec<String> = match (c.cooperate, n) {
            (false, _) | (_, 1) => Vec::new(),
            (true, 2) => vec![urls[1 - i].clone()],
            (true, _) => vec![urls[(i + n - 1) % n].clone(), urls[(i + 1) % n].clone()],
        };
        node.set_neighbours(ring);
    }
    let sets: Arc<Vec<Vec<String>>> =
        Arc::new(c.sets.iter().map(|s| s.iter().map(|f| format!("/files/{f}")).collect()).collect());
    let http = reqwest::Client::new();
    let mut clients = Vec::new();
    for k in 0..c.servers * c.clients_per_server {
        let local = urls[k / c.clients_per_server].clone();
        let (http, sets, c) = (http.clone(), Arc::clone(&sets), c.clone());
        clients.push(tokio::spawn(async move {
            let neighbours: Vec<String> = http
                .get(format!("{local}/v1/coop/neighbours"))
                .send()
                .await
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(c.seed ^ (k as u64).wrapping_mul(0x9e37_79b9));
            let mut total = SetOutcome::default();
            for r in 0..c.requests {
                let set = switchyard_models::cacheflow::pick_set(sets.len(), &mut rng);
                let got = ask_set(&http, &local, &neighbours, &sets[set]).await?;
                if r >= c.warmup {
                    total += got;
                }
                tokio::time::sleep(c.period).await;
            }
            Ok::<_, String>(total)
        }));
    }
    let mut total = SetOutcome::default();
    for client in clients {
        total += client.await.map_err(|e| e.to_string())??;
    }
    for t in tasks {
        t.abort();
    }
    Ok(total)
}
