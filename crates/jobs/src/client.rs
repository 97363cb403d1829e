//! What a submitter does: submit an application, read the applications' status, fetch an
//! output. Thin calls over [`crate::wire`]'s routes, with errors that say what the
//! coordinator said.

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
    /// The coordinator cannot be reached.
    #[error("coordinator {url}: {why}")]
    Unreachable {
        /// What was asked.
        url: String,
        /// Why.
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

    async fn send(&self, req: reqwest::RequestBuilder, url: &str) -> Result<reqwest::Response, ClientError> {
        let r = req
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| ClientError::Unreachable { url: url.to_string(), why: e.to_string() })?;
        if r.status().is_success() {
            return Ok(r);
        }
        let status = r.status();
        Err(ClientError::Refused { status, body: r.text().await.unwrap_or_default().trim().to_string() })
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
            .map_err(|e| ClientError::Unreachable { url: url.clone(), why: e.to_string() })?;
        let r = self.send(self.http.post(with).body(input), &url).await?;
        r.json().await.map_err(|e| ClientError::Unreachable { url, why: e.to_string() })
    }

    /// Every application.
    pub async fn status(&self) -> Result<Vec<AppView>, ClientError> {
        let url = format!("{}/v1/apps", self.base);
        let r = self.send(self.http.get(&url), &url).await?;
        r.json().await.map_err(|e| ClientError::Unreachable { url, why: e.to_string() })
    }

    /// Every worker the coordinator has heard from.
    pub async fn workers(&self) -> Result<Vec<WorkerView>, ClientError> {
        let url = format!("{}/v1/workers", self.base);
        let r = self.send(self.http.get(&url), &url).await?;
        r.json().await.map_err(|e| ClientError::Unreachable { url, why: e.to_string() })
    }

    /// A done application's output.
    pub async fn output(&self, app: u32) -> Result<Vec<u8>, ClientError> {
        let url = format!("{}/v1/apps/{app}/output", self.base);
        let r = self.send(self.http.get(&url), &url).await?;
        Ok(r.bytes().await.map_err(|e| ClientError::Unreachable { url, why: e.to_string() })?.to_vec())
    }
}
