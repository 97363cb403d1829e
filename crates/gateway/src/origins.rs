//! Several origins holding the same content, of different speed and price (Figurehead's
//! back-ends, notes 004b §1): each read goes where the core's [`SlaRouter`] says — Base's
//! split, OptWait's chain, or a modern peer — the first answer wins and the attempts still
//! under way are cancelled (the paper lets them run; cancelling frees the origins' time and,
//! where origins bill only what they serve, their price). Writes go to every origin, as
//! Figurehead's do, but are answered "stored" only as the core's write rule says (every
//! origin, or a majority), and a read avoids an origin that lacks a write to its key
//! (`switchyard_core::place::sla::write`). Per-origin latency quantiles, attempts, write outcomes, price paid and
//! SLA attainment are counted for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, StatusCode};
use bytes::Bytes;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use switchyard_core::place::sla::write::WriteRule;
use switchyard_core::place::sla::{Ended, Plan, RouteKind, Sla, SlaRouter};
use tokio::task::JoinSet;

use crate::metrics::{Amount, Count, Metrics};
use crate::writes::{Replicated, Writes};

/// One origin: its base URL and its price per request.
#[derive(Clone, Debug, PartialEq)]
pub struct OriginSpec {
    /// Base URL, e.g. `http://10.0.0.2:8080`.
    pub url: String,
    /// Price per request sent to it.
    pub price: f64,
}

impl OriginSpec {
    /// Reads `URL` or `URL@PRICE` (a price of 1 when none is given).
    ///
    /// What follows the last `@` is a price when it is a number and what comes before it is a
    /// URL with a host. A URL with a user part (`http://user@10.0.0.2:8080`) is told from a
    /// URL followed by a mistyped price (`http://10.0.0.2:8080@cheap`) by nothing in its text,
    /// so such a URL is refused unless a price follows it (`http://user@10.0.0.2:8080@1`), with
    /// an error that shows both forms; it used to be refused with only "not a price". Text after
    /// the last `@` with a `/`, `?` or `#` is the URL's own. One form stays
    /// ambiguous, a user part before a host that is a bare number (`http://user@9`): it reads
    /// as `http://user` at price 9.
    pub fn parse(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let host = |u: &str| reqwest::Url::parse(u).is_ok_and(|u| u.host().is_some());
        // Text after the last `@` with a `/`, `?` or `#` is the URL's path, query or fragment.
        let suffix = s.rsplit_once('@').filter(|&(u, p)| !p.contains(['/', '?', '#']) && host(u));
        let (url, price) = match suffix {
            Some((u, p)) => match p.parse::<f64>() {
                Ok(price) => (u, price),
                Err(_) if p.is_empty() => return Err(format!("`{s}` ends in `@` with no price after it")),
                // Which was meant, a price or a user part, the text cannot say: the error shows
                // both forms rather than a corrected line, which would be wrong for one of them.
                Err(_) => {
                    return Err(format!(
                        "`{p}` in `{s}` is not a price (URL@PRICE, e.g. http://a:80@0.4; a URL with a user part takes its price after it, e.g. http://user@a:80@1)"
                    ));
                }
            },
            None => (s, 1.0),
        };
        if !(price >= 0.0 && price.is_finite()) {
            return Err(format!("the price in `{s}` must be a number ≥ 0"));
        }
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| format!("`{url}` is not a URL ({e}): write URL or URL@PRICE, e.g. http://a:80@0.4"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!("`{url}` is not an http:// or https:// URL"));
        }
        if parsed.host().is_none() {
            return Err(format!("`{url}` names no host"));
        }
        // A price of -0 is 0.
        Ok(Self { url: url.trim_end_matches('/').to_string(), price: price.abs() })
    }
}

/// Reads an SLA `P:L`, e.g. `95:600ms` (95 % within 600 ms); L in `ms` or `s`.
pub fn parse_sla(s: &str) -> Result<Sla, String> {
    let bad = || format!("`{s}` is not an SLA: write PERCENT:LATENCY, e.g. 95:600ms or 99.9:2s");
    let (p, l) = s.split_once(':').ok_or_else(bad)?;
    let percent: f64 = p.trim_end_matches('%').parse().map_err(|_| bad())?;
    let within = if let Some(ms) = l.strip_suffix("ms") {
        Duration::from_secs_f64(ms.parse::<f64>().map_err(|_| bad())? / 1e3)
    } else if let Some(secs) = l.strip_suffix('s') {
        Duration::from_secs_f64(secs.parse::<f64>().map_err(|_| bad())?)
    } else {
        return Err(bad());
    };
    if !(percent > 0.0 && percent <= 100.0) || within.is_zero() {
        return Err(bad());
    }
    Ok(Sla { percent: percent / 100.0, within })
}

/// An origin's answer.
#[derive(Debug)]
pub struct Fetched {
    /// Its status.
    pub status: StatusCode,
    /// Its fields.
    pub headers: HeaderMap,
    /// Its body: still to come when the answer's head is all that has been read.
    pub body: Incoming,
    /// Which origin answered.
    pub origin: usize,
}

/// An origin's body.
#[derive(Debug)]
pub enum Incoming {
    /// Read whole.
    Whole(Bytes),
    /// Still to come (nothing of it read yet).
    Coming(reqwest::Response),
}

impl Incoming {
    /// The body read whole.
    pub async fn whole(self) -> Result<Bytes, reqwest::Error> {
        match self {
            Self::Whole(b) => Ok(b),
            Self::Coming(r) => r.bytes().await,
        }
    }
}

/// Sends one request to origin number `origin` at `url` and reads its answer's head; the body
/// is left to come (see [`send_whole`] for one read whole).
///
/// A pooled connection can be closed by the origin in the moment it is reused (an origin's
/// keep-alive timeout, 5 s in Node.js, racing the next request; likelier when the gateway is
/// starved of CPU and notices the close late): the request is written and the connection ends
/// with no answer. An idempotent request is then sent once more, on a fresh connection, as RFC
/// 9112 §9.3.1 allows ("a user agent MAY automatically retry idempotent requests"); one that
/// is not idempotent is not ("a proxy MUST NOT automatically retry non-idempotent requests")
/// and fails with the reason. Only a close before any answer counts: a body cut short, a
/// refused connect or a timeout is reported as it is.
pub(crate) async fn send(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: impl Into<reqwest::Body>,
    origin: usize,
) -> Result<Fetched, reqwest::Error> {
    let r = send_again_if_closed(client.request(method, url).headers(headers).body(body)).await?;
    let (status, headers) = (r.status(), r.headers().clone());
    Ok(Fetched { status, headers, body: Incoming::Coming(r), origin })
}

/// [`send`], with the answer's body read whole (a write's answer, kept for its client).
pub(crate) async fn send_whole(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: Bytes,
    origin: usize,
) -> Result<Fetched, reqwest::Error> {
    let mut f = send(client, method, url, headers, body, origin).await?;
    f.body = Incoming::Whole(f.body.whole().await?);
    Ok(f)
}

/// Sends `request`, and sends it once more on a fresh connection if its method is idempotent
/// and its connection closed before any answer came (see [`send`]).
pub(crate) async fn send_again_if_closed(
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, reqwest::Error> {
    let (client, request) = request.build_split();
    let request = request?;
    let again = if request.method().is_idempotent() { request.try_clone() } else { None };
    match (client.execute(request).await, again) {
        (Err(e), Some(again)) if closed_before_answering(&e) => client.execute(again).await,
        (r, _) => r,
    }
}

/// Whether a request failed because its connection ended before any of the answer came
/// (hyper's "connection closed before message completed", or a reset while it was written).
fn closed_before_answering(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() {
        return false;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if c.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_incomplete_message) {
            return true;
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            return matches!(io.kind(), ConnectionReset | ConnectionAborted | BrokenPipe);
        }
        cause = c.source();
    }
    false
}

/// An error and its causes on one line: reqwest's own text ("error sending request for url
/// …") names no cause, and the client of a 502 should read why.
pub(crate) fn explain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = c.source();
    }
    text
}

/// Why no origin answered.
#[derive(Debug, thiserror::Error)]
#[error("{why}")]
pub struct FetchError {
    /// Whether the last attempt timed out.
    pub timeout: bool,
    /// What the last attempt said.
    pub why: String,
}

#[derive(Clone)]
struct PerOrigin {
    sent: Family<Vec<(String, String)>, Count>,
    answered: Family<Vec<(String, String)>, Count>,
    cancelled: Family<Vec<(String, String)>, Count>,
    cost: Family<Vec<(String, String)>, Amount>,
    latency: Family<Vec<(String, String)>, Gauge<f64, AtomicU64>>,
}

/// The origins and the router between them.
pub struct Origins {
    specs: Vec<OriginSpec>,
    router: Arc<Mutex<SlaRouter>>,
    probes: Family<Vec<(String, String)>, Count>,
    requests: Count,
    within: Count,
    per: PerOrigin,
    writes: Arc<Writes>,
    routed: AtomicU64,
    rng: Mutex<u64>,
}

/// Requests between re-plans (and between refreshes of the latency quantiles in `/metrics`).
const REPLAN_EVERY: u64 = 100;

impl Origins {
    /// The origins `specs`, routed by `route` for `sla`, written to as `write_rule` says with
    /// at most `write_memory` bytes held for origins that lack a write, their counters
    /// registered in `metrics`.
    pub(crate) fn new(
        specs: Vec<OriginSpec>,
        route: RouteKind,
        sla: Sla,
        write_rule: WriteRule,
        write_memory: u64,
        metrics: &mut Metrics,
    ) -> Self {
        let router = SlaRouter::new(route, sla, specs.iter().map(|s| s.price).collect(), 1000);
        let per = PerOrigin {
            sent: metrics.family("gateway_origin_attempts", "Attempts sent to each origin."),
            answered: metrics.family("gateway_origin_answers", "Attempts that answered first."),
            cancelled: metrics.family("gateway_origin_cancelled", "Attempts cancelled or failed."),
            cost: metrics.family("gateway_origin_cost", "Price paid to each origin (every attempt sent)."),
            latency: metrics.family(
                "gateway_origin_latency_seconds",
                "Each origin's latency at quantile 0.5, 0.95 and 0.99 (attempts cancelled count as slowest).",
            ),
        };
        Self {
            writes: Arc::new(Writes::new(specs.clone(), write_rule, write_memory, metrics)),
            router: Arc::new(Mutex::new(router)),
            probes: metrics.family(
                "gateway_origin_probes",
                "Reads copied to an origin only to learn its latency (as Figurehead's monitoring probes; their price is not in gateway_origin_cost).",
            ),
            requests: metrics.count("gateway_routed_requests", "Reads routed over the origins."),
            within: metrics.count("gateway_sla_within", "Routed reads answered within the SLA's latency."),
            per,
            specs,
            routed: AtomicU64::new(0),
            rng: Mutex::new(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// Origins `specs`, routed by `route` for `sla`, counted in the same `/metrics` as these
    /// (per origin, by URL) and written to under the same rule and bound: a reload's. The
    /// router starts afresh. With the same origins the writes owed are these' (reads keep
    /// avoiding the origins that lack one); with others, writes owed to these are still sent
    /// to them, by these, until taken.
    pub(crate) fn again(&self, specs: Vec<OriginSpec>, route: RouteKind, sla: Sla) -> Self {
        let router = SlaRouter::new(route, sla, specs.iter().map(|s| s.price).collect(), 1000);
        let writes =
            if specs == self.specs { Arc::clone(&self.writes) } else { Arc::new(self.writes.again(specs.clone())) };
        Self {
            writes,
            router: Arc::new(Mutex::new(router)),
            probes: self.probes.clone(),
            requests: self.requests.clone(),
            within: self.within.clone(),
            per: self.per.clone(),
            specs,
            routed: AtomicU64::new(0),
            rng: Mutex::new(0x9e37_79b9_7f4a_7c15),
        }
    }

    /// The origins.
    pub fn specs(&self) -> &[OriginSpec] {
        &self.specs
    }

    /// The plan Base or OptWait follows now, as text (empty for the others).
    pub fn plan(&self) -> String {
        let r = self.router.lock().expect("no panic under the router's lock");
        match r.plan() {
            Plan::Split(s) => {
                s.p.iter()
                    .enumerate()
                    .filter(|(_, p)| **p > 0.0)
                    .map(|(i, p)| format!("{} {:.0}%", self.specs[i].url, p * 100.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
            Plan::Chain(c) => c
                .steps
                .iter()
                .map(|(i, at)| format!("{} at {} ms", self.specs[*i].url, at.as_millis()))
                .collect::<Vec<_>>()
                .join(" → "),
            Plan::Infeasible(e, b) => format!("{e}; all to {}", self.specs[*b].url),
            Plan::None => String::new(),
        }
    }

    fn label(&self, i: usize) -> Vec<(String, String)> {
        vec![("origin".into(), self.specs[i].url.clone())]
    }

    /// Counts an attempt sent to origin `b`, and its price.
    fn charge(&self, b: usize) {
        self.per.sent.get_or_create(&self.label(b)).inc();
        self.per.cost.get_or_create(&self.label(b)).inc_by(self.specs[b].price);
    }

    /// Two uniform draws in [0, 1) (splitmix64; the routing draws need no cryptography).
    fn draws(&self) -> (f64, f64) {
        let mut s = self.rng.lock().expect("no panic under the draw's lock");
        let mut next = || {
            *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = *s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        (next(), next())
    }

    /// Sends an unsafe request (`PUT`, `POST`, `DELETE`, …) to every origin at once, as
    /// Figurehead writes to every back-end of the file, and waits, at most `bound`, for the
    /// write rule's verdict: "stored" only once as many origins took it as the rule needs (see
    /// [`crate::writes`]). A write is never hedged, since a second copy of a non-idempotent
    /// request sent late would be a second request.
    pub(crate) async fn replicate(
        &self,
        client: &reqwest::Client,
        method: Method,
        path: &str,
        headers: HeaderMap,
        body: Bytes,
        bound: Duration,
    ) -> Replicated {
        for b in 0..self.specs.len() {
            self.charge(b);
        }
        self.writes.write(client, method, path, headers, body, bound).await
    }

    /// The origins' URLs, for messages.
    pub(crate) fn urls(&self, origins: &[usize]) -> String {
        self.writes.urls(origins)
    }

    /// Copies a `GET`, in the background, to the origin the router wants to learn about
    /// ([`SlaRouter::probe_target`]); its latency goes to the router, its
    /// answer nowhere.
    fn probe(&self, client: &reqwest::Client, n: u64, path: &str, headers: &HeaderMap) {
        let target = self.router.lock().expect("no panic under the router's lock").probe_target(n);
        let Some(b) = target else { return };
        self.probes.get_or_create(&self.label(b)).inc();
        let (client, headers, router) = (client.clone(), headers.clone(), Arc::clone(&self.router));
        let url = format!("{}{path}", self.specs[b].url);
        tokio::spawn(async move {
            let sent = Instant::now();
            // Read to its end, to time it whole, but not held: a probe of a large object
            // must not cost its size.
            let got = async {
                let mut r = client.get(&url).headers(headers).send().await?;
                while r.chunk().await?.is_some() {}
                Ok::<_, reqwest::Error>(())
            }
            .await;
            let took = sent.elapsed();
            let mut r = router.lock().expect("no panic under the router's lock");
            r.observed(b, if got.is_ok() { Ended::Answered(took) } else { Ended::Abandoned(took) });
        });
    }

    /// Sends `method path` with `headers` and `body` as the router plans, and returns the
    /// first answer (any status) once its head has come, its body still to come; cancels the
    /// attempts still under way. An attempt that fails starts the next one at once.
    pub async fn fetch(
        &self,
        client: &reqwest::Client,
        method: Method,
        path: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Fetched, FetchError> {
        let n = self.routed.fetch_add(1, Ordering::Relaxed);
        if method == Method::GET {
            self.probe(client, n, path, &headers);
        }
        let (u1, u2) = self.draws();
        // An origin that lacks a write to this key another origin took would answer with what
        // the write replaced.
        let behind = self.writes.behind(path);
        let (plan, sla) = {
            let mut r = self.router.lock().expect("no panic under the router's lock");
            if n.is_multiple_of(REPLAN_EVERY) {
                r.replan();
                for i in 0..self.specs.len() {
                    for q in [0.5, 0.95, 0.99] {
                        let v = r.tracker(i).quantile(q).map_or(f64::NAN, |d| d.as_secs_f64());
                        let mut l = self.label(i);
                        l.push(("quantile".into(), q.to_string()));
                        self.per.latency.get_or_create(&l).set(v);
                    }
                }
            }
            (r.route_avoiding(u1, u2, &behind), r.sla())
        };
        self.requests.inc();
        let start = Instant::now();
        let mut attempts: JoinSet<(usize, Instant, Result<Fetched, reqwest::Error>)> = JoinSet::new();
        let mut under_way: Vec<(usize, Instant)> = Vec::new();
        let mut next = 0;
        let mut skip_wait = false;
        let mut last = FetchError { timeout: false, why: "no origin to ask".into() };
        loop {
            let due = plan.get(next).map(|a| if skip_wait { start } else { start + a.at });
            tokio::select! {
                () = async { tokio::time::sleep_until(due.expect("guarded").into()).await }, if due.is_some() => {
                    skip_wait = false;
                    let b = plan[next].backend;
                    next += 1;
                    let (client, method, headers, body) = (client.clone(), method.clone(), headers.clone(), body.clone());
                    let url = format!("{}{path}", self.specs[b].url);
                    let sent = Instant::now();
                    under_way.push((b, sent));
                    self.router.lock().expect("no panic under the router's lock").sent(b);
                    self.charge(b);
                    attempts.spawn(async move {
                        let got = send(&client, method, &url, headers, body, b).await;
                        (b, sent, got)
                    });
                }
                Some(joined) = attempts.join_next(), if !attempts.is_empty() => {
                    let Ok((b, sent, got)) = joined else { continue };
                    if let Some(at) = under_way.iter().position(|(o, s)| *o == b && *s == sent) {
                        under_way.swap_remove(at);
                    }
                    let took = sent.elapsed();
                    let mut router = self.router.lock().expect("no panic under the router's lock");
                    match got {
                        Ok(f) => {
                            router.ended(b, Ended::Answered(took));
                            self.per.answered.get_or_create(&self.label(b)).inc();
                            for (o, s) in under_way.drain(..) {
                                router.ended(o, Ended::Abandoned(s.elapsed()));
                                self.per.cancelled.get_or_create(&self.label(o)).inc();
                            }
                            drop(router);
                            attempts.abort_all();
                            if start.elapsed() <= sla.within {
                                self.within.inc();
                            }
                            return Ok(f);
                        }
                        Err(e) => {
                            router.ended(b, Ended::Abandoned(took));
                            self.per.cancelled.get_or_create(&self.label(b)).inc();
                            last = FetchError { timeout: e.is_timeout(), why: format!("{}: {}", self.specs[b].url, explain(&e)) };
                            if attempts.is_empty() {
                                if next >= plan.len() {
                                    return Err(last);
                                }
                                skip_wait = true;
                            }
                        }
                    }
                }
                else => return Err(last),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> (String, f64) {
        let o = OriginSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        (o.url, o.price)
    }

    #[test]
    fn a_price_follows_the_last_at_sign() {
        assert_eq!(parsed("http://a:80@0.4"), ("http://a:80".into(), 0.4));
        assert_eq!(parsed("https://cdn.example/@3"), ("https://cdn.example".into(), 3.0));
        assert_eq!(parsed("http://10.0.0.2:8080"), ("http://10.0.0.2:8080".into(), 1.0));
        assert_eq!(parsed("http://u@h:9@0.5"), ("http://u@h:9".into(), 0.5));
    }

    /// A URL with a user part takes its price after it; without one, the error says so (it
    /// said only that the host was not a price).
    #[test]
    fn a_user_part_is_part_of_the_url_when_a_price_follows() {
        assert_eq!(parsed("http://user@127.0.0.1:8080@1"), ("http://user@127.0.0.1:8080".into(), 1.0));
        assert_eq!(parsed("http://u:pw@h@0.2"), ("http://u:pw@h".into(), 0.2));
        assert_eq!(parsed("http://user@10.0.0.2:8080/@2"), ("http://user@10.0.0.2:8080".into(), 2.0));
        let e = OriginSpec::parse("http://user@127.0.0.1:8080").unwrap_err();
        assert!(e.contains("a URL with a user part takes its price after it, e.g. http://user@a:80@1"), "{e}");
        // Not corrected for the user: `http://127.0.0.1:1@cheap@1` would make `cheap` a host.
        let e = OriginSpec::parse("http://127.0.0.1:1@cheap").unwrap_err();
        assert!(e.contains("`cheap` in `http://127.0.0.1:1@cheap` is not a price"), "{e}");
        assert!(!e.contains("@cheap@1"), "{e}");
    }

    /// An `@` in the path is the path's; an empty price is said to be missing.
    #[test]
    fn an_at_sign_in_the_path_or_with_nothing_after_it() {
        assert_eq!(parsed("http://cdn.example/@scope/pkg"), ("http://cdn.example/@scope/pkg".into(), 1.0));
        assert_eq!(parsed("http://cdn.example/@scope/pkg@2"), ("http://cdn.example/@scope/pkg".into(), 2.0));
        assert_eq!(parsed(" http://a:80@-0 "), ("http://a:80".into(), 0.0));
        let e = OriginSpec::parse("http://a:80@").unwrap_err();
        assert!(e.contains("no price after it"), "{e}");
    }

    #[test]
    fn bad_origins_are_refused_with_the_reason() {
        for (s, why) in [
            ("ftp://a", "not an http"),
            ("a:80", "not an http"),
            ("10.0.0.2:80", "not a URL"),
            ("http://a@-1", "≥ 0"),
            ("http://a@inf", "≥ 0"),
            ("http://", "not a URL"),
        ] {
            let e = OriginSpec::parse(s).unwrap_err();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}
