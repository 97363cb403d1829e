//! Bodies in flight: what the gateway carries without storing, and what it holds while it
//! reads a response to store it, each counted for `/metrics`.
//!
//! A body carried through (a response over `--max-object-size` or one RFC 9111 does not let a
//! shared cache store, and every request body passed to the origin) goes chunk by chunk: the
//! next chunk is read only when the one before has been taken by the other side, so a reader
//! that stops reading stops the writer (hyper's buffers, a few hundred KB a connection, and
//! the sockets' are all that is held), and a reader that goes away drops the body, which
//! closes the connection it came on. An error mid-body is passed on as an error, so hyper
//! cuts the answer short (a `Content-Length` not met, or a chunked body with no last chunk),
//! never a clean end.
//!
//! Each chunk handed on is counted in `gateway_streamed_bytes` until the last reference to it
//! is dropped (written to the socket, or copied into hyper's write buffer); bytes read to be
//! stored are counted in `gateway_buffered_bytes` until they are stored or let go.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

use crate::metrics::{Level, Metrics};

/// The two gauges of bytes in flight.
#[derive(Clone, Debug)]
pub(crate) struct InFlight {
    /// Bytes of bodies carried through, received and not yet written on.
    pub(crate) streamed: Level,
    /// Bytes of responses being read whole to be stored.
    pub(crate) buffered: Level,
}

impl InFlight {
    pub(crate) fn new(metrics: &mut Metrics) -> Self {
        Self {
            streamed: metrics.level(
                "gateway_streamed_bytes",
                "Bytes of bodies carried through without being stored (responses over --max-object-size or not storable, request bodies), received and not yet written on; about 1 MB a connection at most.",
            ),
            buffered: metrics.level(
                "gateway_buffered_bytes",
                "Bytes of responses being read whole to be stored, not yet stored; at most --max-object-size a read.",
            ),
        }
    }
}

/// Bytes counted in a gauge for as long as any reference to them lives.
struct Counted {
    bytes: Bytes,
    gauge: Level,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.gauge.dec_by(self.bytes.len() as i64);
    }
}

/// `bytes`, counted in `gauge` until the last reference to them is dropped.
fn counted(bytes: Bytes, gauge: &Level) -> Bytes {
    if bytes.is_empty() {
        return bytes;
    }
    gauge.inc_by(bytes.len() as i64);
    Bytes::from_owner(Counted { bytes, gauge: gauge.clone() })
}

/// Bytes held while a response is read whole, counted in a gauge until they are let go.
#[derive(Debug)]
pub(crate) struct Buffer {
    gauge: Level,
    held: i64,
}

impl Buffer {
    pub(crate) fn new(gauge: &Level) -> Self {
        Self { gauge: gauge.clone(), held: 0 }
    }

    fn add(&mut self, n: usize) {
        self.held += n as i64;
        self.gauge.inc_by(n as i64);
    }

    fn release(&mut self, n: usize) {
        let n = (n as i64).min(self.held);
        self.held -= n;
        self.gauge.dec_by(n);
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.gauge.dec_by(self.held);
    }
}

/// How reading a response whole to store it ended.
pub(crate) enum Whole {
    /// The body, in one allocation of its own (nothing of the connection's buffers kept).
    Read(Bytes),
    /// Past `limit`: what was read, and the rest still to come.
    Over(Box<FromOrigin>),
    /// The origin failed mid-body.
    Failed(reqwest::Error),
}

/// Reads `r`'s body whole if it is at most `limit` bytes; past that, hands back what it read
/// and the rest as one body to carry through.
pub(crate) async fn read_whole(mut r: reqwest::Response, limit: u64, gauges: &InFlight, idle: Duration) -> Whole {
    let length = r.content_length();
    let mut buffer = Buffer::new(&gauges.buffered);
    let mut chunks = VecDeque::new();
    let mut total = 0u64;
    loop {
        match r.chunk().await {
            Ok(Some(c)) => {
                total += c.len() as u64;
                buffer.add(c.len());
                chunks.push_back(c);
                if total > limit {
                    let rest = FromOrigin { prefix: chunks, buffer, length, ..FromOrigin::new(r, gauges, idle) };
                    return Whole::Over(Box::new(rest));
                }
            }
            Ok(None) => break,
            Err(e) => return Whole::Failed(e),
        }
    }
    let mut body = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for c in &chunks {
        body.extend_from_slice(c);
    }
    Whole::Read(Bytes::from(body))
}

type NextChunk = Pin<Box<dyn Future<Output = (reqwest::Response, Result<Option<Bytes>, Broke>)> + Send>>;

/// Why a body carried through broke off.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Broke {
    #[error("{}", crate::origins::explain(.0))]
    Origin(reqwest::Error),
    #[error("the origin sent nothing for {0:?} (--upstream-timeout)")]
    Silent(Duration),
}

/// An origin's body carried on to a client as it comes (after what was read of it already).
pub(crate) struct FromOrigin {
    /// Chunks read before it was decided to carry it through, counted in `buffer`.
    prefix: VecDeque<Bytes>,
    buffer: Buffer,
    /// The rest, with the read of the next chunk when one is under way.
    rest: Option<reqwest::Response>,
    next: Option<NextChunk>,
    /// Bytes not yet handed on, if the origin said how many.
    length: Option<u64>,
    streamed: Level,
    /// The longest the origin may send nothing.
    idle: Duration,
}

impl std::fmt::Debug for FromOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FromOrigin").field("length", &self.length).finish_non_exhaustive()
    }
}

impl FromOrigin {
    /// `r`'s body, none of it read yet, broken off if the origin sends nothing for `idle`.
    pub(crate) fn new(r: reqwest::Response, gauges: &InFlight, idle: Duration) -> Self {
        Self {
            prefix: VecDeque::new(),
            buffer: Buffer::new(&gauges.buffered),
            length: r.content_length(),
            rest: Some(r),
            next: None,
            streamed: gauges.streamed.clone(),
            idle,
        }
    }

    /// The body's length, if the origin said it.
    pub(crate) fn length(&self) -> Option<u64> {
        self.length
    }
}

impl http_body::Body for FromOrigin {
    type Data = Bytes;
    type Error = Broke;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let chunk = if let Some(c) = this.prefix.pop_front() {
            this.buffer.release(c.len());
            c
        } else {
            if this.next.is_none() {
                let Some(mut r) = this.rest.take() else { return Poll::Ready(None) };
                let idle = this.idle;
                this.next = Some(Box::pin(async move {
                    let c = match tokio::time::timeout(idle, r.chunk()).await {
                        Ok(c) => c.map_err(Broke::Origin),
                        Err(_) => Err(Broke::Silent(idle)),
                    };
                    (r, c)
                }));
            }
            let Some(next) = this.next.as_mut() else { return Poll::Ready(None) };
            let Poll::Ready((r, got)) = next.as_mut().poll(cx) else { return Poll::Pending };
            this.next = None;
            match got {
                Ok(Some(c)) => {
                    this.rest = Some(r);
                    c
                }
                Ok(None) => return Poll::Ready(None),
                Err(e) => return Poll::Ready(Some(Err(e))),
            }
        };
        if let Some(l) = this.length.as_mut() {
            *l = l.saturating_sub(chunk.len() as u64);
        }
        Poll::Ready(Some(Ok(Frame::data(counted(chunk, &this.streamed)))))
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.rest.is_none() && self.next.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.length.map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

/// A client's request body carried on to the origin as it comes.
///
/// reqwest takes only bodies it may share between threads; axum's is not, so it is kept
/// behind a mutex that is never contended (polling takes `&mut self`).
pub(crate) struct ToOrigin {
    inner: Mutex<axum::body::Body>,
    streamed: Level,
    activity: Arc<Activity>,
}

impl ToOrigin {
    /// `body`, each piece of it taken by the origin recorded in `activity`.
    pub(crate) fn new(body: axum::body::Body, gauges: &InFlight, activity: Arc<Activity>) -> Self {
        Self { inner: Mutex::new(body), streamed: gauges.streamed.clone(), activity }
    }
}

/// When a request carried through last moved: a request body the origin is still taking is
/// not an origin that does not answer, however long it takes to send.
#[derive(Debug)]
pub(crate) struct Activity {
    since: Instant,
    /// Nanoseconds after `since`.
    last: AtomicU64,
}

impl Activity {
    pub(crate) fn new() -> Self {
        Self { since: Instant::now(), last: AtomicU64::new(0) }
    }

    fn moved(&self) {
        self.last.store(self.since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn last(&self) -> tokio::time::Instant {
        (self.since + Duration::from_nanos(self.last.load(Ordering::Relaxed))).into()
    }

    /// `f`'s output, or `None` if nothing moved for `idle` before it came.
    pub(crate) async fn bounded<F: Future>(&self, f: F, idle: Duration) -> Option<F::Output> {
        let mut f = std::pin::pin!(f);
        loop {
            tokio::select! {
                out = &mut f => return Some(out),
                () = tokio::time::sleep_until(self.last() + idle) => {
                    if self.last() + idle <= tokio::time::Instant::now() {
                        return None;
                    }
                }
            }
        }
    }
}

impl http_body::Body for ToOrigin {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let inner = this.inner.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let polled = Pin::new(inner).poll_frame(cx);
        if polled.is_ready() {
            this.activity.moved();
        }
        polled.map(|f| f.map(|f| f.map(|f| f.map_data(|d| counted(d, &this.streamed)))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner).size_hint()
    }
}
