//! The coordinator over HTTP (axum): the routes of [`crate::wire`], a bearer token on every
//! one, body limits, and `/metrics`.
//!
//! Changes go through one [`Coordinator`] behind a mutex, on tokio's blocking pool (SQLite
//! calls block). Large reads (a task's input, an application's output) use readers of their
//! own and do not hold the coordinator.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Deserialize;

use crate::coordinator::{Coordinator, JobsError, Submission};
use crate::store::Reader;
use crate::wire::Poll;

/// The server's limits.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest input a submission may carry, bytes.
    pub max_input: usize,
    /// The largest result a worker may upload, bytes.
    pub max_result: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_input: 1 << 30, max_result: 256 << 20 }
    }
}

struct Metrics {
    registry: Registry,
    polls: Counter,
    grants: Counter,
    refused_polls: Counter,
    accepted: Counter,
    duplicates: Counter,
    refused_results: Counter,
    failures: Counter,
    submitted: Counter,
    running: Gauge,
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("switchyard_jobs");
        let mut count = |name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let polls = count("polls", "Polls answered (with a task or with nothing)");
        let grants = count("grants", "Polls answered with a task");
        let refused_polls = count("refused_polls", "Polls refused (too often, or malformed)");
        let accepted = count("results_accepted", "Results kept");
        let duplicates = count("results_duplicate", "Results of tasks another attempt had finished: not counted");
        let refused_results = count("results_refused", "Results refused (not the worker's, malformed, unknown)");
        let failures = count("failures_reported", "Failures workers reported");
        let submitted = count("apps_submitted", "Applications submitted");
        let running = Gauge::default();
        registry.register("attempts_running", "Attempts out now", running.clone());
        Self {
            registry,
            polls,
            grants,
            refused_polls,
            accepted,
            duplicates,
            refused_results,
            failures,
            submitted,
            running,
        }
    }
}

/// What the handlers share.
pub struct Shared {
    coordinator: Mutex<Coordinator>,
    readers: Mutex<Vec<Reader>>,
    token: String,
    metrics: Metrics,
}

impl Shared {
    /// The state of a server around `coordinator`, answering requests that carry `token`.
    pub fn new(coordinator: Coordinator, token: String) -> Arc<Self> {
        Arc::new(Self {
            coordinator: Mutex::new(coordinator),
            readers: Mutex::new(Vec::new()),
            token,
            metrics: Metrics::new(),
        })
    }

    fn coordinator(&self) -> std::sync::MutexGuard<'_, Coordinator> {
        // A handler that panicked mid-change left the state as the log says or rebuilt; the
        // lock's poison says nothing more.
        self.coordinator.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` with a reader of its own.
    fn with_reader<R>(&self, f: impl FnOnce(&mut Reader) -> Result<R, JobsError>) -> Result<R, JobsError> {
        let pooled = self.readers.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut reader = match pooled {
            Some(r) => r,
            None => self.coordinator().store().open_reader()?,
        };
        let r = f(&mut reader);
        self.readers.lock().unwrap_or_else(|p| p.into_inner()).push(reader);
        r
    }
}

/// Nanoseconds since the Unix epoch: the coordinator's clock, so that a restarted coordinator
/// continues the times its log holds.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The routes.
pub fn router(shared: Arc<Shared>, limits: Limits) -> Router {
    Router::new()
        .route("/v1/apps", post(submit).get(list).layer(DefaultBodyLimit::max(limits.max_input)))
        .route("/v1/apps/{id}", get(one))
        .route("/v1/apps/{id}/output", get(output))
        .route("/v1/apps/{id}/cancel", post(cancel))
        .route("/v1/workers", get(workers))
        .route("/v1/poll", post(poll))
        .route("/v1/attempts/{id}/input", get(input))
        .route("/v1/attempts/{id}/result", post(result).layer(DefaultBodyLimit::max(limits.max_result)))
        .route("/v1/attempts/{id}/failed", post(failed))
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(shared.clone(), auth))
        .with_state(shared)
}

async fn auth(State(s): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let given =
        req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    // Compared in constant time, so the answer's timing does not leak the token.
    let ok = given.is_some_and(|g| {
        g.len() == s.token.len() && g.bytes().zip(s.token.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    });
    if !ok {
        // Whether one was sent: "a token is needed" to a client that sent one misleads.
        let said = match given {
            None => {
                "a token is needed: send `Authorization: Bearer TOKEN` (switchyard jobs … --token, or SWITCHYARD_JOBS_TOKEN)"
            }
            Some(_) => {
                "wrong token: this coordinator was started with another; send that one as `Authorization: Bearer TOKEN` (switchyard jobs … --token, or SWITCHYARD_JOBS_TOKEN)"
            }
        };
        let mut r = text(StatusCode::UNAUTHORIZED, said.into());
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    next.run(req).await
}

fn text(status: StatusCode, msg: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], msg + "\n").into_response()
}

fn error(e: JobsError) -> Response {
    let status = match &e {
        JobsError::Bad(_) | JobsError::Program(_) | JobsError::Parts(_) => StatusCode::BAD_REQUEST,
        JobsError::NoApp(_) => StatusCode::NOT_FOUND,
        JobsError::NotDone { .. }
        | JobsError::Refused(_)
        | JobsError::Duplicate(_)
        | JobsError::NoWorker(_)
        | JobsError::Over { .. }
        | JobsError::NotCancelled(_) => StatusCode::CONFLICT,
        JobsError::TooOften { early_ms, .. } => {
            let mut r = text(StatusCode::TOO_MANY_REQUESTS, e.to_string());
            let secs = early_ms.div_ceil(1000).max(1);
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
            return r;
        }
        JobsError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    text(status, e.to_string())
}

async fn blocking<R: Send + 'static>(f: impl FnOnce() -> Result<R, JobsError> + Send + 'static) -> Result<R, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(error),
        Err(e) => Err(text(StatusCode::INTERNAL_SERVER_ERROR, format!("the request's task failed: {e}"))),
    }
}

fn json<T: serde::Serialize>(v: &T) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], serde_json::to_string(v).expect("serialises")).into_response()
}

/// A submission's query string.
#[derive(Deserialize)]
struct SubmitQuery {
    name: Option<String>,
    program: String,
    #[serde(default)]
    arg: String,
    reduces: u32,
    deadline: f64,
    split: Option<usize>,
    estimate: Option<f64>,
}

async fn submit(
    State(s): State<Arc<Shared>>,
    q: Result<Query<SubmitQuery>, axum::extract::rejection::QueryRejection>,
    body: Bytes,
) -> Response {
    let Query(q) = match q {
        Ok(q) => q,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!(
                    "{e}: a submission is POST /v1/apps?program=P&reduces=R&deadline=SECS[&arg=A&split=BYTES&name=N&estimate=SECS] with the input as its body"
                ),
            );
        }
    };
    let sub = Submission {
        name: q.name.unwrap_or_default(),
        program: q.program,
        arg: q.arg,
        reduces: q.reduces,
        deadline: q.deadline,
        split: q.split.unwrap_or(1 << 20),
        estimate: q.estimate,
    };
    let s2 = s.clone();
    match blocking(move || s2.coordinator().submit(sub, &body, now())).await {
        Ok(r) => {
            s.metrics.submitted.inc();
            json(&r)
        }
        Err(r) => r,
    }
}

async fn list(State(s): State<Arc<Shared>>) -> Response {
    let views = blocking(move || {
        let mut c = s.coordinator();
        c.refresh().map(|()| c.views(now()))
    });
    match views.await {
        Ok(v) => json(&v),
        Err(r) => r,
    }
}

async fn workers(State(s): State<Arc<Shared>>) -> Response {
    let views = blocking(move || {
        let mut c = s.coordinator();
        c.refresh().map(|()| c.worker_views())
    });
    match views.await {
        Ok(v) => json(&v),
        Err(r) => r,
    }
}

async fn one(State(s): State<Arc<Shared>>, Path(id): Path<u32>) -> Response {
    let view = blocking(move || {
        let mut c = s.coordinator();
        c.refresh().and_then(|()| c.view(id, now()))
    });
    match view.await {
        Ok(v) => json(&v),
        Err(r) => r,
    }
}

async fn cancel(State(s): State<Arc<Shared>>, Path(id): Path<u32>) -> Response {
    match blocking(move || s.coordinator().cancel(id, now())).await {
        Ok(v) => json(&v),
        Err(r) => r,
    }
}

async fn output(State(s): State<Arc<Shared>>, Path(id): Path<u32>) -> Response {
    let s2 = s.clone();
    match blocking(move || {
        let plan = {
            let mut c = s2.coordinator();
            c.refresh()?;
            c.output_of(id)?
        };
        s2.with_reader(|r| Ok(plan.read(r)?))
    })
    .await
    {
        Ok(out) => out.into_response(),
        Err(r) => r,
    }
}

async fn poll(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let p: Poll = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            s.metrics.refused_polls.inc();
            return text(StatusCode::BAD_REQUEST, format!("poll body: {e}: send {{\"worker\": \"NAME\"}}"));
        }
    };
    let s2 = s.clone();
    let r = blocking(move || {
        let mut c = s2.coordinator();
        let got = c.poll_from(&p, now());
        s2.metrics.running.set(i64::from(c.board().running()));
        got
    })
    .await;
    match r {
        Ok(Some(g)) => {
            s.metrics.polls.inc();
            s.metrics.grants.inc();
            json(&g)
        }
        Ok(None) => {
            s.metrics.polls.inc();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(r) => {
            s.metrics.refused_polls.inc();
            r
        }
    }
}

#[derive(Deserialize)]
struct WorkerQuery {
    worker: String,
}

async fn input(State(s): State<Arc<Shared>>, Path(id): Path<u64>, Query(q): Query<WorkerQuery>) -> Response {
    let s2 = s.clone();
    match blocking(move || {
        let plan = {
            let mut c = s2.coordinator();
            c.refresh()?;
            c.input_of(&q.worker, id)?
        };
        s2.with_reader(|r| Ok(plan.read(r)?))
    })
    .await
    {
        Ok(data) => data.into_response(),
        Err(r) => r,
    }
}

async fn result(
    State(s): State<Arc<Shared>>,
    Path(id): Path<u64>,
    Query(q): Query<WorkerQuery>,
    body: Bytes,
) -> Response {
    let s2 = s.clone();
    // Counted by what the coordinator said, not by status: a duplicate and a result for an
    // attempt the worker does not hold are both 409s.
    let said = blocking(move || Ok(s2.coordinator().result(&q.worker, id, &body, now()))).await;
    match said {
        Ok(Ok(a)) => {
            s.metrics.accepted.inc();
            json(&serde_json::json!({ "accepted": true, "phase_done": a.phase_done, "app_done": a.app_done }))
        }
        Ok(Err(e)) => {
            if matches!(e, JobsError::Duplicate(_)) {
                s.metrics.duplicates.inc();
            } else {
                s.metrics.refused_results.inc();
            }
            error(e)
        }
        Err(r) => r,
    }
}

async fn failed(
    State(s): State<Arc<Shared>>,
    Path(id): Path<u64>,
    Query(q): Query<WorkerQuery>,
    body: Bytes,
) -> Response {
    let why = String::from_utf8_lossy(&body).into_owned();
    let s2 = s.clone();
    match blocking(move || s2.coordinator().failed(&q.worker, id, &why, now())).await {
        Ok(()) => {
            s.metrics.failures.inc();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(r) => r,
    }
}

async fn metrics(State(s): State<Arc<Shared>>, _: HeaderMap) -> Response {
    let mut out = String::new();
    encode(&mut out, &s.metrics.registry).expect("writing to a String cannot fail");
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], out).into_response()
}

/// Serves on `listener` until `stop` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    limits: Limits,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let served = axum::serve(listener, router(shared.clone(), limits)).with_graceful_shutdown(stop).await;
    // PostgreSQL's blocking client closes its connection by blocking on a runtime of its own,
    // which it must not do on one of ours: the last handle goes on the blocking pool.
    let _ = tokio::task::spawn_blocking(move || drop(shared)).await;
    served
}

/// How long an idle worker waits between polls by default.
pub const IDLE_POLL: Duration = Duration::from_millis(100);
