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
//! - `POST /v1/coop/updates`: a neighbour's adds and evictions (JSON, [`Updates`]), numbered
//!   so that none is lost unnoticed: a batch that does not follow the last one taken is
//!   refused with 409, and the neighbour sends everything it holds instead. A gateway that
//!   starts sends each neighbour everything it holds, marked to replace what the neighbour
//!   knew of it, and asks for the same back (ours, not Cacheflow's: see [`Updates`] and
//!   `switchyard_core::cache::updates`).
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
use prometheus_client::metrics::family::Family;
use serde::{Deserialize, Serialize};
use switchyard_core::cache::cacheflow::{Batch, Merged, Server, merge};
use switchyard_core::cache::updates::{Inbox, Next, Outbox, Verdict};
use tokio::sync::Notify;

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
    /// Changes kept for a neighbour that has not taken them (down, or slow) before they are
    /// dropped for one snapshot of everything held, sent when it is back.
    pub outbox_limit: usize,
}

/// Changes kept for a neighbour by default (`--outbox-limit`).
pub const OUTBOX_LIMIT: usize = 10_000;

/// A neighbour's report of what it added (`true`) and evicted.
///
/// Changes alone cannot survive a restart: a restarted gateway holds nothing but never reports
/// evicting what it held before, so its neighbours would leave requests for those objects to it
/// for good (mispredicted, never delivered), and its own views of them would start empty. So a
/// gateway that starts sends each neighbour a `reset` holding everything it holds, with
/// `want_snapshot`, and the neighbour answers with a `reset` of its own (ours, not Cacheflow's;
/// the core's [`Server::forget`] and [`Server::snapshot`]). Both flags default to `false`, so
/// gateways without them still interoperate (without the resynchronisation).
///
/// Nor can changes survive a batch lost or refused: so each batch carries the sender's
/// `epoch` and its number `seq`, and a batch that does not follow the last one taken is
/// refused with 409, whereupon the sender sends a `reset` instead (the core's
/// [`Outbox`] and [`Inbox`]). A sender without them sends epoch 0, and its batches are taken
/// as they come.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Updates {
    /// The neighbour's own URL.
    pub from: String,
    /// The sender's epoch, drawn each time it starts (0: it numbers no batch).
    #[serde(default)]
    pub epoch: u64,
    /// The batch's number in the epoch.
    #[serde(default)]
    pub seq: u64,
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

/// What passes between this gateway and one neighbour.
struct Link {
    /// Its base URL.
    url: String,
    /// The batches owed it, in order.
    outbox: Outbox<String>,
    /// The last batch taken from it.
    inbox: Inbox,
    /// Wakes its sender when a batch is owed.
    wake: Arc<Notify>,
}

struct Node {
    /// The core's server: cache, views of the neighbours, changes buffered for them.
    server: Server<String>,
    bodies: std::collections::BTreeMap<String, Bytes>,
    /// The neighbours, in order.
    links: Vec<Link>,
    /// Their senders, one each, so that a neighbour's batches arrive in the order they were
    /// made (an add overtaken by its own eviction would leave a key in its view).
    senders: Vec<tokio::task::AbortHandle>,
}

/// Counters of the batches each neighbour took, refused or missed, labelled by neighbour.
struct LinkCounts {
    sent: Family<Vec<(String, String)>, Count>,
    snapshots: Family<Vec<(String, String)>, Count>,
    refused: Family<Vec<(String, String)>, Count>,
    failed: Family<Vec<(String, String)>, Count>,
    collapsed: Family<Vec<(String, String)>, Count>,
    owed: Family<Vec<(String, String)>, Level>,
}

impl LinkCounts {
    fn owed(&self, link: &Link) {
        self.owed.get_or_create(&label(&link.url)).set(i64::try_from(link.outbox.queued()).unwrap_or(i64::MAX));
    }
}

fn label(url: &str) -> Vec<(String, String)> {
    vec![("neighbour".into(), url.to_string())]
}

struct Shared {
    state: Mutex<Node>,
    config: CoopConfig,
    client: reqwest::Client,
    metrics: Metrics,
    local_hits: Count,
    loads: Count,
    remote_served: Count,
    links: LinkCounts,
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
        let links = LinkCounts {
            sent: metrics.family(
                "coop_update_batches_sent",
                "Batches of changes each neighbour took (answered 2xx), each counted once however often it was sent.",
            ),
            snapshots: metrics.family(
                "coop_update_snapshots_sent",
                "Snapshots of everything held each neighbour took (at start, when asked, after a refusal or an overflow).",
            ),
            refused: metrics.family(
                "coop_update_batches_refused",
                "Batches a neighbour refused (4xx; 409: a gap in the numbers), each followed by a snapshot.",
            ),
            failed: metrics.family(
                "coop_update_sends_failed",
                "Sendings of a batch that failed (5xx, unreachable, timed out); the batch is sent again.",
            ),
            collapsed: metrics.family(
                "coop_update_outbox_overflows",
                "Times the changes owed a neighbour passed --outbox-limit and were dropped for one snapshot.",
            ),
            owed: metrics.family("coop_update_outbox_changes", "Changes owed each neighbour, not yet taken."),
        };
        let viewed = metrics.level("coop_viewed_keys", "Objects the views of the neighbours show, summed.");
        let state = Node {
            server: Server::new(config.capacity, config.dedup, 0, config.link_buffer),
            bodies: Default::default(),
            links: Vec::new(),
            senders: Vec::new(),
        };
        Self(Arc::new(Shared {
            state: Mutex::new(state),
            config,
            client,
            metrics,
            local_hits,
            loads,
            remote_served,
            links,
            viewed,
        }))
    }

    /// Its neighbours (their base URLs), with an empty cache; their views start empty. Each
    /// neighbour is told to forget what it knew of this gateway (which may have restarted) and
    /// asked for everything it holds (see [`Updates`]).
    pub fn set_neighbours(&self, neighbours: Vec<String>) {
        let mut st = self.0.state.lock().expect("not poisoned");
        for old in st.senders.drain(..) {
            old.abort();
        }
        st.server =
            Server::new(self.0.config.capacity, self.0.config.dedup, neighbours.len(), self.0.config.link_buffer);
        st.bodies.clear();
        // A new epoch each time: batches numbered before it can be told from those after.
        let epoch = rand::random::<u64>();
        st.links = neighbours
            .iter()
            .map(|n| Link {
                url: n.trim_end_matches('/').to_string(),
                outbox: Outbox::new(epoch, self.0.config.outbox_limit),
                inbox: Inbox::default(),
                wake: Arc::new(Notify::new()),
            })
            .collect();
        // Each sender takes its snapshot when it first runs, under the state's lock, ahead of
        // any change the cache makes after it.
        st.senders =
            (0..neighbours.len()).map(|i| tokio::spawn(deliver(Arc::clone(&self.0), i)).abort_handle()).collect();
        self.0.viewed.set(0);
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
                    Json(s.state.lock().expect("not poisoned").links.iter().map(|l| l.url.clone()).collect::<Vec<_>>())
                }),
            )
            .route("/metrics", get(|State(s): State<Arc<Shared>>| async move { s.metrics.render() }))
            .with_state(Arc::clone(&self.0))
    }
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

/// Queues batches for the neighbours they are due to, a large one in pieces, and wakes their
/// senders. Callers hold the state's lock, so that batches are queued in the order the cache
/// made them.
fn queue(s: &Shared, st: &mut Node, due: Vec<Batch<String>>) {
    for (i, changes) in due {
        let Some(link) = st.links.get_mut(i) else { continue };
        for piece in pieces(changes) {
            if link.outbox.push(piece) {
                s.links.collapsed.get_or_create(&label(&link.url)).inc();
            }
        }
        s.links.owed(link);
        link.wake.notify_one();
    }
}

/// The longest pause between sendings to a neighbour that does not take them.
const MOST_BACKOFF: Duration = Duration::from_secs(5);

/// Sends neighbour `i` what is owed it, one batch at a time, in order, each until the
/// neighbour takes it: a batch lost would leave the neighbour's view of this cache wrong for
/// good, and one overtaken would apply out of order. A refusal (a gap in the numbers, or any
/// other 4xx) makes what is owed a snapshot of everything held; a failure (5xx, unreachable)
/// sends the batch again, after a pause that doubles up to [`MOST_BACKOFF`].
async fn deliver(s: Arc<Shared>, i: usize) {
    let me = s.config.me.trim_end_matches('/').to_string();
    let mut wait = Duration::from_millis(100);
    loop {
        let (batch, url, wake) = {
            let mut st = s.state.lock().expect("not poisoned");
            let Node { server, links, .. } = &mut *st;
            let Some(link) = links.get_mut(i) else { return };
            if let Next::Snapshot { ask } = link.outbox.next() {
                let (_, held) = server.snapshot(i);
                link.outbox.snapshot(pieces(held), ask);
                s.links.owed(link);
            }
            let batch = match link.outbox.next() {
                Next::Send(b) => Some(b.clone()),
                _ => None,
            };
            (batch, link.url.clone(), Arc::clone(&link.wake))
        };
        let Some(b) = batch else {
            // A batch queued since the lock was let go left a permit: this returns at once.
            wake.notified().await;
            continue;
        };
        let updates = Updates {
            from: me.clone(),
            epoch: b.epoch,
            seq: b.seq,
            changes: b.changes,
            reset: b.reset,
            want_snapshot: b.ask,
        };
        let answer = s.client.post(format!("{url}/v1/coop/updates")).json(&updates).send().await;
        let pause = {
            let mut st = s.state.lock().expect("not poisoned");
            // Neighbours set anew meanwhile: this sender's link is gone.
            let Some(link) = st.links.get_mut(i).filter(|l| l.url == url) else { return };
            let pause = match answer {
                Ok(r) if r.status().is_success() => {
                    if link.outbox.delivered(b.seq) {
                        s.links.sent.get_or_create(&label(&url)).inc();
                        if b.reset {
                            s.links.snapshots.get_or_create(&label(&url)).inc();
                        }
                    }
                    false
                }
                Ok(r) if r.status().is_client_error() => {
                    s.links.refused.get_or_create(&label(&url)).inc();
                    link.outbox.resync(false);
                    // A gap is mended by the snapshot at once; a snapshot refused, or any
                    // other refusal, is tried again after a pause (the neighbour may not list
                    // this gateway yet).
                    let gap = r.status() == reqwest::StatusCode::CONFLICT && !b.reset;
                    if !gap {
                        eprintln!(
                            "switchyard: {url} refused our updates ({}); sending a snapshot of everything held",
                            r.status()
                        );
                    }
                    !gap
                }
                Ok(r) => {
                    s.links.failed.get_or_create(&label(&url)).inc();
                    eprintln!("switchyard: {url} failed our updates ({}); sending them again", r.status());
                    true
                }
                Err(e) => {
                    s.links.failed.get_or_create(&label(&url)).inc();
                    eprintln!("switchyard: sending updates to {url}: {e}; sending them again");
                    true
                }
            };
            s.links.owed(link);
            pause
        };
        if pause {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MOST_BACKOFF);
        } else {
            wait = Duration::from_millis(100);
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
        queue(&s, &mut st, due);
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
    let Some(i) = st.links.iter().position(|l| l.url == u.from) else {
        return (axum::http::StatusCode::FORBIDDEN, format!("{} is not a neighbour of {}", u.from, s.config.me))
            .into_response();
    };
    match st.links[i].inbox.accept(u.epoch, u.seq, u.reset) {
        Verdict::Apply => {}
        Verdict::Duplicate => return axum::http::StatusCode::NO_CONTENT.into_response(),
        Verdict::Gap { expected } => {
            let after = expected.map_or_else(
                || "none of its batches yet (it or this gateway restarted)".to_string(),
                |(epoch, seq)| format!("batch {seq} of epoch {epoch} next"),
            );
            return (
                axum::http::StatusCode::CONFLICT,
                format!(
                    "batch {} of epoch {} from {} does not follow what {} took ({after}): send everything you hold, as a reset",
                    u.seq, u.epoch, u.from, s.config.me
                ),
            )
                .into_response();
        }
    }
    if u.reset {
        st.server.forget(i);
    }
    st.server.apply(i, u.changes);
    s.viewed.set(i64::try_from(st.server.viewed()).unwrap_or(i64::MAX));
    if u.want_snapshot {
        // Under the state's lock, like every batch, so that no change made before the snapshot
        // is taken arrives after it (and none made after it, before).
        let link = &mut st.links[i];
        link.outbox.resync(false);
        s.links.owed(link);
        link.wake.notify_one();
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
            outbox_limit: OUTBOX_LIMIT,
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
