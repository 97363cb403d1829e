//! What a submitter does: submit an application, read the applications' status, fetch an
//! output, cancel an application. Thin calls over [`crate::wire`]'s routes, with errors that
//! say what went wrong in the submitter's terms: a wrong token, a coordinator that cannot be
//! reached (and why), or what the coordinator said.

use std::time::Duration;

use reqwest::StatusCode;

use crate::coordinator::Submission;
use crate::wire::{AppView, Submitted, WorkerView};

/// A submitter's connection to a coordinator.
pub struct Submitter {
    http: reqwest::Client,
    base: String,
    token: String,
}

/// Why a submitter's request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The coordinator refused the token (401 or 403).
    #[error(
        "wrong token: the coordinator at {addr} refused it ({status}); give the token it was started with (--token or SWITCHYARD_JOBS_TOKEN)"
    )]
    Token {
        /// The coordinator.
        addr: String,
        /// What it answered.
        status: StatusCode,
    },
    /// The coordinator cannot be reached.
    #[error("cannot reach the coordinator at {addr}: {why}")]
    Unreachable {
        /// The coordinator.
        addr: String,
        /// Why, as the system said (connection refused, a timeout, …).
        why: String,
    },
    /// It refused.
    #[error("coordinator refused ({status}): {body}")]
    Refused {
        /// The status.
        status: StatusCode,
        /// What it said.
        body: String,
    },
    /// An answer that does not read.
    #[error("the coordinator at {url} answered something that does not read: {why}")]
    Answer {
        /// What was asked.
        url: String,
        /// Why.
        why: String,
    },
}

impl ClientError {
    /// Whether asking again later may succeed: the coordinator could not be reached, or
    /// failed (5xx). A wrong token or a refusal will not change by waiting.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::Answer { .. } => true,
            Self::Refused { status, .. } => status.is_server_error(),
            Self::Token { .. } => false,
        }
    }
}

/// Why a request to the coordinator could not be sent or answered, in words: the
/// innermost cause (connection refused, a reset, a timeout), with a hint where there is one.
pub fn unreachable_why(e: &reqwest::Error) -> String {
    let mut io = None;
    let mut inner: &dyn std::error::Error = e;
    while let Some(next) = inner.source() {
        if let Some(x) = next.downcast_ref::<std::io::Error>() {
            io = Some(x.kind());
        }
        inner = next;
    }
    match io {
        Some(std::io::ErrorKind::ConnectionRefused) => {
            "connection refused (is `switchyard jobs serve` running, and listening there?)".into()
        }
        _ if e.is_timeout() => format!("no answer in time ({inner})"),
        _ => inner.to_string(),
    }
}

impl Submitter {
    /// A submitter for the coordinator at `base` (`http://HOST:PORT`).
    pub fn new(base: &str, token: &str) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .build()
            .expect("a client without TLS builds");
        Self { http, base: base.trim_end_matches('/').to_string(), token: token.to_string() }
    }

    fn unreachable(&self, e: &reqwest::Error) -> ClientError {
        ClientError::Unreachable { addr: self.base.clone(), why: unreachable_why(e) }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, ClientError> {
        let r = match req.bearer_auth(&self.token).send().await {
            Ok(r) => r,
            Err(e) if e.is_connect() => return Err(self.unreachable(&e)),
            Err(e) => {
                // It connected, and the exchange broke: a coordinator refusing the token
                // answers at once and closes the connection while a large body is still being
                // sent, and the reset can reach the client before the answer does. A request
                // without a body tells whether that was it.
                if let Ok(probe) =
                    self.http.get(format!("{}/v1/workers", self.base)).bearer_auth(&self.token).send().await
                    && matches!(probe.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                {
                    return Err(ClientError::Token { addr: self.base.clone(), status: probe.status() });
                }
                return Err(self.unreachable(&e));
            }
        };
        let status = r.status();
        if status.is_success() {
            return Ok(r);
        }
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(ClientError::Token { addr: self.base.clone(), status });
        }
        Err(ClientError::Refused { status, body: r.text().await.unwrap_or_default().trim().to_string() })
    }

    async fn read<T: serde::de::DeserializeOwned>(&self, r: reqwest::Response, url: String) -> Result<T, ClientError> {
        r.json().await.map_err(|e| ClientError::Answer { url, why: e.to_string() })
    }

    /// Submits an application with `input`.
    pub async fn submit(&self, a: &Submission, input: Vec<u8>) -> Result<Submitted, ClientError> {
        let url = format!("{}/v1/apps", self.base);
        let mut q: Vec<(&str, String)> = vec![
            ("name", a.name.clone()),
            ("program", a.program.clone()),
            ("arg", a.arg.clone()),
            ("reduces", a.reduces.to_string()),
            ("deadline", a.deadline.to_string()),
            ("split", a.split.to_string()),
        ];
        if let Some(e) = a.estimate {
            q.push(("estimate", e.to_string()));
        }
        let with = reqwest::Url::parse_with_params(&url, &q)
            .map_err(|e| ClientError::Unreachable { addr: self.base.clone(), why: format!("not a URL: {e}") })?;
        let r = self.send(self.http.post(with).body(input)).await?;
        self.read(r, url).await
    }

    /// Every application.
    pub async fn status(&self) -> Result<Vec<AppView>, ClientError> {
        let url = format!("{}/v1/apps", self.base);
        let r = self.send(self.http.get(&url)).await?;
        self.read(r, url).await
    }

    /// Every worker the coordinator has heard from.
    pub async fn workers(&self) -> Result<Vec<WorkerView>, ClientError> {
        let url = format!("{}/v1/workers", self.base);
        let r = self.send(self.http.get(&url)).await?;
        self.read(r, url).await
    }

    /// Cancels application `app`: nothing more of it runs. Answers what it is now.
    pub async fn cancel(&self, app: u32) -> Result<AppView, ClientError> {
        let url = format!("{}/v1/apps/{app}/cancel", self.base);
        let r = self.send(self.http.post(&url)).await?;
        self.read(r, url).await
    }

    /// A done application's output.
    pub async fn output(&self, app: u32) -> Result<Vec<u8>, ClientError> {
        let url = format!("{}/v1/apps/{app}/output", self.base);
        let r = self.send(self.http.get(&url)).await?;
        Ok(r.bytes().await.map_err(|e| self.unreachable(&e))?.to_vec())
    }
}
