//! Writes over several origins, carried out as the core's write rule says
//! (`switchyard_core::place::sla::write`): each write goes to every origin, the client is told
//! "stored" only when as many took it as `--write-rule` needs, an origin that did not take a
//! write another took is sent it again until it does (one sender per key and origin, in
//! order) and reads of the key avoid it meanwhile, and what is held to be sent again is
//! bounded by `--write-memory`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, Method};
use bytes::Bytes;
use prometheus_client::metrics::family::Family;
use switchyard_core::place::sla::write::{Full, NotNow, Replicas, Step, Tally, Verdict, WriteId, WriteRule, attempted};
use tokio::sync::Notify;

use crate::metrics::{Count, Level, Metrics};
use crate::origins::{FetchError, Fetched, OriginSpec, send_whole};

/// One write: what is sent, and what each origin first answered (kept while a client waits).
struct Job {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Bytes,
    /// `PUT` or `DELETE`: sending it again is safe, and it replaces the key's content whole.
    idempotent: bool,
    /// Each origin's first answer, in the order they came.
    answers: Mutex<Vec<(usize, Result<Fetched, FetchError>)>>,
    /// Whether a client still waits on it.
    watched: AtomicBool,
    /// Told when an origin has answered it.
    answered: Notify,
}

/// What became of a write, for the client's answer.
#[derive(Debug)]
pub(crate) enum Replicated {
    /// As many origins took it as the rule needs: the first one's answer.
    Stored {
        /// The first answer that took it.
        answer: Fetched,
        /// Where the origins stand.
        tally: Tally,
    },
    /// Some took it, fewer than the rule needs; it is sent again to the others.
    Pending {
        /// Where the origins stand.
        tally: Tally,
        /// What each origin first answered, as text.
        said: Vec<(usize, String)>,
    },
    /// Some took it, fewer than the rule needs, and the rule cannot be met: the others
    /// refused it or cannot safely be sent it again.
    Diverged {
        /// Where the origins stand.
        tally: Tally,
        /// What each origin first answered, as text.
        said: Vec<(usize, String)>,
    },
    /// None took it, and one refused it: its answer.
    Refused(Fetched),
    /// None took it or refused it.
    Failed(FetchError),
    /// Refused before it was sent: the bound on what is held.
    Full(Full),
    /// An earlier write to the key was still undecided after this long.
    Busy(Duration),
    /// Not decided within this long (it goes on).
    Undecided(Duration),
}

#[derive(Clone)]
struct Counts {
    attempts: Family<Vec<(String, String)>, Count>,
    answers: Family<Vec<(String, String)>, Count>,
    owed: Family<Vec<(String, String)>, Level>,
    held: Level,
}

/// The writes over several origins.
pub(crate) struct Writes {
    state: Mutex<Replicas<String, Arc<Job>>>,
    specs: Vec<OriginSpec>,
    /// Told when any write is decided (a later write to its key may then be admitted).
    decided: Notify,
    counts: Counts,
    rule: WriteRule,
    limit: u64,
}

/// The first pause before a write is sent again to an origin; it doubles up to [`MOST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest pause between sendings of a write to an origin that does not take it.
const MOST_BACKOFF: Duration = Duration::from_secs(5);

impl Writes {
    /// Writes over `specs` under `rule`, holding at most `limit` bytes to send again.
    pub(crate) fn new(specs: Vec<OriginSpec>, rule: WriteRule, limit: u64, metrics: &mut Metrics) -> Self {
        let counts = Counts {
            attempts: metrics.family(
                "gateway_origin_writes",
                "Writes sent to each origin, by outcome (took, refused, failed) and attempt (first, again).",
            ),
            answers: metrics.family(
                "gateway_writes",
                "Writes over several origins, by the client's answer: stored, pending (202), diverged (502), refused, failed, full, busy, undecided.",
            ),
            owed: metrics.family(
                "gateway_origin_writes_owed",
                "Writes another origin took that each origin has not yet: reads of their keys avoid it.",
            ),
            held: metrics.level(
                "gateway_write_backlog_bytes",
                "Bytes of writes held until every origin has them (bounded by --write-memory).",
            ),
        };
        Self {
            state: Mutex::new(Replicas::new(specs.len(), rule, limit)),
            specs,
            decided: Notify::new(),
            counts,
            rule,
            limit,
        }
    }

    /// Writes to `specs` under this rule and bound, counted in the same `/metrics` (a reload's
    /// new origins); nothing owed yet.
    pub(crate) fn again(&self, specs: Vec<OriginSpec>) -> Self {
        let state = Mutex::new(Replicas::new(specs.len(), self.rule, self.limit));
        Self { state, specs, decided: Notify::new(), counts: self.counts.clone(), rule: self.rule, limit: self.limit }
    }

    /// Origins a read of `key` avoids: each lacks a write to it another took.
    pub(crate) fn behind(&self, key: &str) -> Vec<usize> {
        self.state.lock().expect("no panic under the writes' lock").behind(&key.to_string())
    }

    fn label(&self, b: usize) -> Vec<(String, String)> {
        vec![("origin".into(), self.specs[b].url.clone())]
    }

    /// Refreshes the gauges from `st`.
    fn gauges(&self, st: &Replicas<String, Arc<Job>>) {
        self.counts.held.set(i64::try_from(st.held()).unwrap_or(i64::MAX));
        for b in 0..self.specs.len() {
            self.counts.owed.get_or_create(&self.label(b)).set(i64::try_from(st.owed(b)).unwrap_or(i64::MAX));
        }
    }

    /// Sends an unsafe request to every origin and waits, at most `bound`, for the rule's
    /// verdict on it (and before that, for an earlier write to the same key to be decided).
    pub(crate) async fn write(
        self: &Arc<Self>,
        client: &reqwest::Client,
        method: Method,
        path: &str,
        headers: HeaderMap,
        body: Bytes,
        bound: Duration,
    ) -> Replicated {
        let deadline = tokio::time::Instant::now() + bound;
        let idempotent = matches!(method, Method::PUT | Method::DELETE);
        let size =
            (body.len() + path.len() + headers.iter().map(|(n, v)| n.as_str().len() + v.len()).sum::<usize>()) as u64;
        let job = Arc::new(Job {
            method,
            path: path.to_string(),
            headers,
            body,
            idempotent,
            answers: Mutex::new(Vec::new()),
            watched: AtomicBool::new(true),
            answered: Notify::new(),
        });
        let (id, start) = loop {
            let notified = self.decided.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let admitted = {
                let mut st = self.state.lock().expect("no panic under the writes' lock");
                let got = st.admit(path.to_string(), path.len() as u64, Arc::clone(&job), size, idempotent);
                self.gauges(&st);
                got
            };
            match admitted {
                Ok(admitted) => break admitted,
                Err(NotNow::Full(full)) => return self.answered("full", Replicated::Full(full)),
                Err(NotNow::Busy) => {
                    if tokio::time::timeout_at(deadline, notified).await.is_err() {
                        return self.answered("busy", Replicated::Busy(bound));
                    }
                }
            }
        };
        // Whatever ends this wait (an answer, the client gone), the write is let go once its
        // lanes are done with it.
        let _waiting = Waiting { writes: Arc::clone(self), job: Arc::clone(&job), id };
        for b in start {
            tokio::spawn(lane(Arc::clone(self), client.clone(), path.to_string(), b));
        }
        loop {
            let notified = job.answered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let decided = {
                let st = self.state.lock().expect("no panic under the writes' lock");
                st.verdict(id).map(|v| (v, st.tally(id)))
            };
            if let Some((verdict, tally)) = decided {
                let answers = std::mem::take(&mut *job.answers.lock().expect("no panic under the answers' lock"));
                return self.verdict(verdict, tally, answers);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.answered("undecided", Replicated::Undecided(bound));
            }
        }
    }

    fn answered(&self, answer: &str, r: Replicated) -> Replicated {
        self.counts.answers.get_or_create(&vec![("answer".into(), answer.into())]).inc();
        r
    }

    /// The client's answer for `verdict`, from the origins' first `answers`.
    fn verdict(
        &self,
        verdict: Verdict,
        tally: Tally,
        answers: Vec<(usize, Result<Fetched, FetchError>)>,
    ) -> Replicated {
        let said = |answers: &[(usize, Result<Fetched, FetchError>)]| -> Vec<(usize, String)> {
            answers
                .iter()
                .map(|(b, a)| {
                    let text = match a {
                        Ok(f) => format!("answered {}", f.status),
                        Err(e) => format!("failed ({e})"),
                    };
                    (*b, text)
                })
                .collect()
        };
        match verdict {
            Verdict::Stored => {
                // Every origin's first answer is kept before its verdict can be seen; should
                // the one that took it be missing all the same, an empty 204 says as much.
                let answer = answers
                    .into_iter()
                    .find_map(|(_, a)| a.ok().filter(|f| f.status.is_success() || f.status.is_redirection()))
                    .unwrap_or_else(|| Fetched {
                        status: axum::http::StatusCode::NO_CONTENT,
                        headers: HeaderMap::new(),
                        body: crate::origins::Incoming::Whole(Bytes::new()),
                        origin: tally.took.first().copied().unwrap_or(0),
                    });
                self.answered("stored", Replicated::Stored { answer, tally })
            }
            Verdict::Pending => {
                let said = said(&answers);
                self.answered("pending", Replicated::Pending { tally, said })
            }
            Verdict::Diverged => {
                let said = said(&answers);
                self.answered("diverged", Replicated::Diverged { tally, said })
            }
            Verdict::Refused if answers.iter().any(|(_, a)| a.as_ref().is_ok_and(|f| f.status.is_client_error())) => {
                let refusal = answers.into_iter().find_map(|(_, a)| a.ok().filter(|f| f.status.is_client_error()));
                self.answered("refused", Replicated::Refused(refusal.expect("just seen")))
            }
            Verdict::Refused | Verdict::Failed => {
                let last = answers.into_iter().next_back().map(|(_, a)| match a {
                    Err(e) => e,
                    Ok(f) => FetchError {
                        timeout: false,
                        why: format!("{} answered {}", self.specs[f.origin].url, f.status),
                    },
                });
                let e = last.unwrap_or(FetchError { timeout: false, why: "no origin was sent the write".into() });
                self.answered("failed", Replicated::Failed(e))
            }
        }
    }

    /// The origins' URLs, for messages.
    pub(crate) fn urls(&self, origins: &[usize]) -> String {
        origins.iter().map(|&b| self.specs[b].url.as_str()).collect::<Vec<_>>().join(", ")
    }
}

/// A client waiting on a write: when it is done (or gone), the write may go once no origin is
/// owed it, and the answers kept for it are dropped.
struct Waiting {
    writes: Arc<Writes>,
    job: Arc<Job>,
    id: WriteId,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.job.watched.store(false, Ordering::SeqCst);
        self.job.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        let mut st = self.writes.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        st.forget(self.id);
        self.writes.gauges(&st);
    }
}

/// An attempt on its way: if its sender ends without an answer (cancelled, or a panic), the
/// attempt is reported failed, not to be sent again (the origin may have acted on it), so that
/// the write's verdict is not left waiting on it for ever.
struct Attempt {
    writes: Arc<Writes>,
    key: String,
    origin: usize,
    id: WriteId,
    armed: bool,
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.armed {
            let mut st = self.writes.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            st.ended(
                &self.key,
                self.origin,
                self.id,
                switchyard_core::place::sla::write::Attempted::Failed { resend: false },
            );
            self.writes.gauges(&st);
            drop(st);
            self.writes.decided.notify_waiters();
        }
    }
}

/// Sends origin `b` the writes to `key` it is owed, in order, each until it takes it (or
/// refuses it, or the verdict withdraws it); then ends.
async fn lane(w: Arc<Writes>, client: reqwest::Client, key: String, b: usize) {
    let mut wait = FIRST_BACKOFF;
    loop {
        let step = {
            let mut st = w.state.lock().expect("no panic under the writes' lock");
            match st.next(&key, b) {
                Step::Send { id, payload, again } => Some((id, Arc::clone(payload), again)),
                Step::Wait => None,
                Step::Done => return,
            }
        };
        let Some((id, job, again)) = step else {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MOST_BACKOFF);
            continue;
        };
        let mut attempt = Attempt { writes: Arc::clone(&w), key: key.clone(), origin: b, id, armed: true };
        let url = format!("{}{}", w.specs[b].url, job.path);
        let got = send_whole(&client, job.method.clone(), &url, job.headers.clone(), job.body.clone(), b).await;
        let reached = !matches!(&got, Err(e) if e.is_connect());
        let how = attempted(got.as_ref().ok().map(|f| f.status.as_u16()), job.idempotent, reached);
        let outcome = match how {
            switchyard_core::place::sla::write::Attempted::Took => "took",
            switchyard_core::place::sla::write::Attempted::Refused => "refused",
            switchyard_core::place::sla::write::Attempted::Failed { .. } => "failed",
        };
        let mut l = w.label(b);
        l.push(("outcome".into(), outcome.into()));
        l.push(("attempt".into(), if again { "again" } else { "first" }.into()));
        w.counts.attempts.get_or_create(&l).inc();
        // Kept before the verdict can be decided, so that a client that sees it finds it.
        if !again && job.watched.load(Ordering::SeqCst) {
            let got = got.map_err(|e| FetchError { timeout: e.is_timeout(), why: format!("{url}: {e}") });
            job.answers.lock().expect("no panic under the answers' lock").push((b, got));
        }
        {
            let mut st = w.state.lock().expect("no panic under the writes' lock");
            st.ended(&key, b, id, how);
            w.gauges(&st);
        }
        attempt.armed = false;
        job.answered.notify_waiters();
        w.decided.notify_waiters();
        if matches!(how, switchyard_core::place::sla::write::Attempted::Failed { .. }) {
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(MOST_BACKOFF);
        } else {
            wait = FIRST_BACKOFF;
        }
    }
}
