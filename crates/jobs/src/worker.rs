//! `switchyard jobs worker`: polls a coordinator, runs the tasks it is given, uploads their
//! results; and, for experiments, fails as the simulator's workers do.
//!
//! A worker knows nothing of other workers and keeps nothing across tasks: the coordinator's
//! board decides what it runs, and a result the board no longer wants (another attempt won)
//! is refused there, so the worker can never count anything twice. When the coordinator cannot
//! be reached (it is restarting), the worker retries the same request with a back-off rather
//! than dropping its task.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use reqwest::StatusCode;

use crate::programs::{self, Commands, Program};
use crate::wire::{Grant, Poll, encode_parts};

/// How a worker fails on purpose (the simulator's two injectors, `switchyard_sim::models::jobs`).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Failures {
    /// It does not.
    #[default]
    Never,
    /// Crashes at `rate` per second, busy or idle, each followed by a downtime with mean
    /// `recovery` seconds; the task it held is abandoned without a word.
    Poisson {
        /// λ, per second.
        rate: f64,
        /// Mean downtime, seconds.
        recovery: f64,
    },
    /// Each task it runs fails with probability `p`: the result is thrown away, unreported,
    /// and the worker is down for a downtime with mean `recovery` seconds. (The simulator
    /// fails the run at a uniform point of it; a real worker cannot know a task's length
    /// beforehand, so here the whole run is lost, which wastes more.)
    PerTask {
        /// The probability.
        p: f64,
        /// Mean downtime, seconds.
        recovery: f64,
    },
}

/// The commands this worker's operator allow-listed.
#[derive(Clone, Debug, Default)]
pub struct Allowed {
    /// Map commands by name.
    pub map: HashMap<String, String>,
    /// Reduce commands by name.
    pub reduce: HashMap<String, String>,
}

impl Allowed {
    /// The programs a worker with these commands runs: the built-in ones, and `exec:NAME` for
    /// each map command (a reduce of `exec:NAME` needs no command of its own, so a reduce
    /// command alone does not make a worker able to run the application).
    pub fn programs(&self) -> Vec<String> {
        let mut names: Vec<String> = programs::BUILT_IN.iter().map(|p| p.to_string()).collect();
        let mut exec: Vec<String> = self.map.keys().map(|n| format!("exec:{n}")).collect();
        exec.sort();
        names.extend(exec);
        names
    }
}

impl Commands for Allowed {
    fn map(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }
    fn reduce(&self, name: &str) -> Option<&str> {
        self.reduce.get(name).map(String::as_str)
    }
}

/// A worker's settings.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The coordinator's base URL, as `http://host:port`.
    pub coordinator: String,
    /// The token the coordinator wants.
    pub token: String,
    /// This worker's name (a restarted worker should keep its name).
    pub name: String,
    /// The wait after a poll that got nothing.
    pub idle: Duration,
    /// How it fails on purpose.
    pub failures: Failures,
    /// Seed of the failure injector.
    pub seed: u64,
    /// Allow-listed commands.
    pub allowed: Allowed,
    /// Stop after this many tasks run (results uploaded, kept or not), if given.
    pub max_tasks: Option<u64>,
    /// The site this worker is at, told to the coordinator with every poll.
    pub site: Option<String>,
    /// The site's store of splits (a folder the site's workers share) and its capacity in
    /// bytes.
    pub store: Option<(std::path::PathBuf, u64)>,
}

/// What a worker did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Results the coordinator kept.
    pub kept: u64,
    /// Results it refused (another attempt was first, or the attempt was no longer this
    /// worker's).
    pub refused: u64,
    /// Tasks whose program failed (reported as failures).
    pub failed: u64,
    /// Failures injected.
    pub crashes: u64,
    /// Maps whose split was read from the site's store.
    pub local: u64,
    /// Maps whose split was fetched from the coordinator.
    pub fetched: u64,
}

/// Why a worker stops.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The coordinator refused the token.
    #[error("wrong token: the coordinator at {0} refused it; give the one it was started with")]
    Token(String),
    /// An answer that makes no sense.
    #[error("the coordinator at {url} answered {status}: {body}")]
    Answer {
        /// What was asked.
        url: String,
        /// The status.
        status: StatusCode,
        /// What it said.
        body: String,
    },
    /// The URL is not one.
    #[error("coordinator URL {0:?}: {1}")]
    Url(String, String),
}

/// A line of what the worker is doing, for a person watching.
pub type Log = dyn Fn(&str) + Send + Sync;

struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
    name: String,
}

enum Sent {
    Ok(reqwest::Response),
    /// A 4xx the caller may want to read (409, 429, 204 …): its status and text.
    Refused(StatusCode, String, Option<u64>),
}

impl Client {
    /// Sends until the coordinator answers: a coordinator that is down or restarting is
    /// waited for (with a back-off up to 2 s), since the attempt stays valid across a restart.
    async fn send(
        &self,
        make: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
        log: &Log,
    ) -> Result<Sent, WorkerError> {
        let mut wait = Duration::from_millis(50);
        let mut told = false;
        loop {
            match make(&self.http).bearer_auth(&self.token).send().await {
                Ok(r) if matches!(r.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) => {
                    return Err(WorkerError::Token(self.base.clone()));
                }
                Ok(r) if r.status().is_server_error() => {
                    if !told {
                        log(&format!("coordinator error {}; retrying", r.status()));
                        told = true;
                    }
                }
                Ok(r) if r.status().is_success() && r.status() != StatusCode::NO_CONTENT => return Ok(Sent::Ok(r)),
                Ok(r) => {
                    let status = r.status();
                    let retry = r
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok());
                    let body = r.text().await.unwrap_or_default();
                    return Ok(Sent::Refused(status, body.trim().to_string(), retry));
                }
                Err(e) => {
                    if !told {
                        let why = crate::client::unreachable_why(&e);
                        log(&format!("cannot reach the coordinator at {}: {why}; retrying", self.base));
                        told = true;
                    }
                }
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// Runs a worker until `stop` resolves, or it has run `max_tasks`.
pub async fn run(config: WorkerConfig, stop: impl Future<Output = ()>, log: &Log) -> Result<WorkerReport, WorkerError> {
    let base = config.coordinator.trim_end_matches('/').to_string();
    let parsed = reqwest::Url::parse(&base).map_err(|e| WorkerError::Url(base.clone(), e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(WorkerError::Url(base, "give http://HOST:PORT".into()));
    }
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(|e| WorkerError::Url(base.clone(), e.to_string()))?;
    let client = Client { http, base, token: config.token.clone(), name: config.name.clone() };
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut report = WorkerReport::default();
    let store = match &config.store {
        Some((dir, capacity)) => Some(
            crate::site::SiteStore::open(dir, *capacity)
                .map_err(|e| WorkerError::Url(dir.display().to_string(), format!("the site's store: {e}")))?,
        ),
        None => None,
    };
    let mut site = SiteState { store, evicted: Vec::new(), local: 0, fetched: 0 };
    tokio::pin!(stop);
    loop {
        if config.max_tasks.is_some_and(|m| report.kept + report.refused + report.failed >= m) {
            return Ok(report);
        }
        let crash_in = match config.failures {
            Failures::Poisson { rate, .. } if rate > 0.0 => Some(exp(&mut rng, 1.0 / rate)),
            _ => None,
        };
        let fail_this = match config.failures {
            Failures::PerTask { p, .. } => rng.random::<f64>() < p,
            _ => false,
        };
        // One clock for the whole cycle, idle wait included: a Poisson failure comes busy or
        // idle, as the simulator's does.
        let crash_at = crash_in.map(|s| tokio::time::Instant::now() + Duration::from_secs_f64(s));
        let crash = || async move {
            match crash_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending::<()>().await,
            }
        };
        let outcome = tokio::select! {
            r = one(&client, &config, &mut site, fail_this, log) => Some(r?),
            () = crash() => None,
            () = &mut stop => return Ok(report),
        };
        (report.local, report.fetched) = (site.local, site.fetched);
        let down = match outcome {
            None => true,
            Some(Outcome::Idle(wait)) => {
                tokio::select! {
                    () = tokio::time::sleep(wait) => false,
                    () = crash() => true,
                    () = &mut stop => return Ok(report),
                }
            }
            Some(Outcome::Kept) => {
                report.kept += 1;
                false
            }
            Some(Outcome::Refused) => {
                report.refused += 1;
                false
            }
            Some(Outcome::Failed) => {
                report.failed += 1;
                false
            }
            Some(Outcome::Crashed) => true,
        };
        if down {
            report.crashes += 1;
            let recovery = match config.failures {
                Failures::Poisson { recovery, .. } | Failures::PerTask { recovery, .. } => recovery,
                Failures::Never => 0.0,
            };
            let downtime = if recovery > 0.0 { exp(&mut rng, recovery) } else { 0.0 };
            log(&format!("injected failure: down for {downtime:.2} s"));
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(downtime)) => {}
                () = &mut stop => return Ok(report),
            }
        }
    }
}

/// Runs a quiet worker as a task of the current runtime until `stop` turns true (workers in
/// the same process as their coordinator: tests and experiments).
pub fn spawn(
    config: WorkerConfig,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<Result<WorkerReport, WorkerError>> {
    tokio::spawn(async move {
        run(
            config,
            async move {
                let _ = stop.changed().await;
            },
            &|_| {},
        )
        .await
    })
}

fn exp(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    -mean * (1.0f64 - rng.random::<f64>()).ln()
}

enum Outcome {
    Idle(Duration),
    Kept,
    Refused,
    Failed,
    Crashed,
}

/// One poll and, if it gets a task, the task run and reported.
/// What a worker keeps of its site between tasks.
struct SiteState {
    store: Option<crate::site::SiteStore>,
    /// Evictions not yet told to the coordinator.
    evicted: Vec<u32>,
    local: u64,
    fetched: u64,
}

async fn one(
    client: &Client,
    config: &WorkerConfig,
    site: &mut SiteState,
    fail_this: bool,
    log: &Log,
) -> Result<Outcome, WorkerError> {
    let poll = Poll {
        worker: client.name.clone(),
        site: config.site.clone(),
        evicted: site.evicted.clone(),
        programs: Some(config.allowed.programs()),
    };
    let grant: Grant = match client.send(|h| h.post(client.url("/v1/poll")).json(&poll), log).await? {
        Sent::Ok(r) => {
            // The coordinator has the evictions (they are logged with the poll).
            site.evicted.clear();
            r.json().await.map_err(|e| WorkerError::Answer {
                url: client.url("/v1/poll"),
                status: StatusCode::OK,
                body: e.to_string(),
            })?
        }
        Sent::Refused(StatusCode::NO_CONTENT, ..) => {
            site.evicted.clear();
            return Ok(Outcome::Idle(config.idle));
        }
        Sent::Refused(StatusCode::TOO_MANY_REQUESTS, _, retry) => {
            return Ok(Outcome::Idle(retry.map_or(config.idle, |s| Duration::from_secs(s).min(config.idle * 4))));
        }
        Sent::Refused(status, body, _) => {
            return Err(WorkerError::Answer { url: client.url("/v1/poll"), status, body });
        }
    };
    let who = format!("worker={}", urlencode(&client.name));
    let input_url = client.url(&format!("/v1/attempts/{}/input?{who}", grant.attempt));
    let held = match (&site.store, grant.input_id) {
        (Some(store), Some(id)) => store.get(id),
        _ => None,
    };
    let input = match held {
        Some(data) => {
            site.local += 1;
            axum::body::Bytes::from(data)
        }
        None => match client.send(|h| h.get(&input_url), log).await? {
            Sent::Ok(r) => {
                let data = r.bytes().await.map_err(|e| WorkerError::Answer {
                    url: input_url.clone(),
                    status: StatusCode::OK,
                    body: e.to_string(),
                })?;
                if let (Some(store), Some(id)) = (&site.store, grant.input_id) {
                    site.fetched += 1;
                    match store.put(id, &data) {
                        Ok(gone) => site.evicted.extend(gone),
                        Err(e) => log(&format!("the site's store: {e}")),
                    }
                }
                data
            }
            // The attempt is no longer needed (another finished its task): nothing to run.
            Sent::Refused(status, text, _) => {
                log(&format!("attempt {}: input refused ({status}): {text}", grant.attempt));
                return Ok(Outcome::Refused);
            }
        },
    };
    let g = grant.clone();
    let allowed = config.allowed.clone();
    let ran = tokio::task::spawn_blocking(move || -> Result<Vec<u8>, programs::ProgramError> {
        let program = Program::parse(&g.program, &g.arg)?;
        if g.phase == "map" {
            Ok(encode_parts(&programs::run_map(&program, &input, g.reduces, &allowed)?))
        } else {
            Ok(encode_parts(&[programs::run_reduce(&program, &input, &allowed)?]))
        }
    })
    .await
    .unwrap_or_else(|e| Err(programs::ProgramError::Shape(format!("the program panicked: {e}"))));
    if fail_this {
        return Ok(Outcome::Crashed);
    }
    let body = match ran {
        Ok(body) => body,
        Err(e) => {
            log(&format!("attempt {} ({} {} of app {}): {e}", grant.attempt, grant.phase, grant.index, grant.app));
            let url = client.url(&format!("/v1/attempts/{}/failed?{who}", grant.attempt));
            let why = e.to_string();
            client.send(|h| h.post(&url).body(why.clone()), log).await?;
            return Ok(Outcome::Failed);
        }
    };
    let url = client.url(&format!("/v1/attempts/{}/result?{who}", grant.attempt));
    match client.send(|h| h.post(&url).body(body.clone()), log).await? {
        Sent::Ok(_) => Ok(Outcome::Kept),
        Sent::Refused(status, text, _) => {
            log(&format!("attempt {}: result not kept ({status}): {text}", grant.attempt));
            Ok(Outcome::Refused)
        }
    }
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
