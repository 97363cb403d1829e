//! The serving layer every gateway mode shares: the accept loop, TLS to clients, one connection
//! builder for HTTP/1.1 and HTTP/2, and a graceful stop bounded in time.
//!
//! - Cleartext: HTTP/1.1; with `h2c`, HTTP/2 by prior knowledge too (the connection preface
//!   tells them apart; RFC 9113 §3.3). `Upgrade: h2c` is not offered: RFC 9113 removed it.
//! - TLS ([`TlsFiles`]): HTTP/2 where ALPN chose `h2`, HTTP/1.1 otherwise. The handshake runs in
//!   the connection's own task, so a slow client does not hold up the accept loop.
//! - Stop: when `stop` completes the listening socket is closed (new connections are refused),
//!   each connection is told to finish (HTTP/1.1: after the response under way, idle ones at
//!   once; HTTP/2: GOAWAY, then the streams already open), and the loop waits for them at most
//!   `drain_timeout`. What is still in flight then is cut, and [`Drained`] counts both.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tower_service::Service;

use crate::access_log::{AccessLog, CacheResult, Entry, Upstream};
use crate::tls::TlsFiles;

/// The longest a client may take over its TLS handshake: one that connects and says nothing
/// must not hold a task and a socket for ever.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How connections are served.
#[derive(Clone)]
pub struct ServeOptions {
    /// TLS to clients; `None` serves cleartext.
    pub tls: Option<Arc<TlsFiles>>,
    /// Cleartext HTTP/2 by prior knowledge beside HTTP/1.1 (ignored under TLS, where ALPN decides).
    pub h2c: bool,
    /// The longest a stop waits for requests in flight before cutting them.
    pub drain_timeout: Duration,
    /// A line for each request, written once its response is done with; its counters are
    /// added to the service's `/metrics`.
    pub access_log: Option<AccessLog>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self { tls: None, h2c: false, drain_timeout: Duration::from_secs(10), access_log: None }
    }
}

/// What a stop did to the requests in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drained {
    /// Requests in flight at the stop (or started after it on connections already open, as
    /// HTTP/2 streams the client had sent before its GOAWAY arrived) that ended within the bound.
    pub finished: u64,
    /// Requests still in flight when the bound passed, dropped with their connections.
    pub cut: u64,
}

/// What the loop serves: an axum `Router`, or the gateway's own [`crate::origin::service`]
/// (a hit answered without a router).
pub trait Served:
    Service<Request<Body>, Response = axum::response::Response, Error = Infallible, Future: Send>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<S> Served for S where
    S: Service<Request<Body>, Response = axum::response::Response, Error = Infallible, Future: Send>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// Serves `router` on `listener` until `stop` completes, then drains (see the module's doc).
pub async fn serve<S: Served>(
    listener: TcpListener,
    router: S,
    options: ServeOptions,
    stop: impl Future<Output = ()>,
) -> Drained {
    let requests = Arc::new(Requests::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            // Reaped as they end, so that the set holds only live connections.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    // Answers are written whole (head and body in one write where they fit):
                    // Nagle's algorithm would only hold back the last segment of each.
                    let _ = stream.set_nodelay(true);
                    let connection = Connection {
                        peer,
                        tls: options.tls.as_ref().map(|t| t.acceptor()),
                        h2c: options.h2c,
                        router: router.clone(),
                        log: options.access_log.clone(),
                        requests: requests.clone(),
                        stop: stop_rx.clone(),
                    };
                    connections.spawn(connection.run(stream));
                }
                // Out of descriptors (or memory) for now: the connection stays in the backlog;
                // wait a little rather than spin, as axum does.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    drop(listener);
    let ended_at_stop = requests.ended.load(Ordering::SeqCst);
    let _ = stop_tx.send(true);
    let drain = async {
        while connections.join_next().await.is_some() {}
        // HTTP/2 streams run in tasks of their own; their last body may end just after the
        // connection does.
        requests.idle().await;
    };
    let _ = tokio::time::timeout(options.drain_timeout, drain).await;
    let cut = requests.in_flight();
    let finished = requests.ended.load(Ordering::SeqCst) - ended_at_stop;
    connections.abort_all();
    Drained { finished, cut }
}

/// One accepted connection and what serving it needs.
struct Connection<S> {
    peer: SocketAddr,
    tls: Option<tokio_rustls::TlsAcceptor>,
    h2c: bool,
    router: S,
    log: Option<AccessLog>,
    requests: Arc<Requests>,
    stop: watch::Receiver<bool>,
}

impl<S: Served> Connection<S> {
    async fn run(mut self, stream: TcpStream) {
        let Some(tls) = self.tls.take() else {
            let builder = builder(if self.h2c { Protocols::Both } else { Protocols::Http1 });
            return self.drive(&builder, stream).await;
        };
        let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream));
        let mut stop = self.stop.clone();
        let stream = tokio::select! {
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                // A failed or late handshake: the client learns it from the TLS alert or the
                // closed socket; there is no request to answer.
                _ => return,
            },
            () = stopped(&mut stop) => return,
        };
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        let builder = builder(if h2 { Protocols::Http2 } else { Protocols::Http1 });
        self.drive(&builder, stream).await;
    }

    async fn drive<I>(self, builder: &Builder<TokioExecutor>, io: I)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let Self { peer, router, log, requests, mut stop, .. } = self;
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let guard = InFlight::start(requests.clone());
            let mut request = request.map(Body::new);
            // The peer's address, as `into_make_service_with_connect_info` gives it (PURGE's
            // --purge-from reads it).
            request.extensions_mut().insert(ConnectInfo(peer));
            // What the line needs of the request, taken before the service has it (clones of
            // the parsed head's shared buffers, no copies).
            let head = log.as_ref().map(|log| Head::of(&request, peer, log.clone()));
            let answer = router.clone().call(request);
            async move {
                let response = answer.await?;
                let Some(head) = head else {
                    return Ok::<_, Infallible>(response.map(|body| Counted { body, _guard: guard, log: None }));
                };
                let response = if head.metrics { with_log_metrics(response, &head.log).await } else { response };
                let logged = Logged::new(head, &response);
                Ok(response.map(|body| Counted { body, _guard: guard, log: Some(Box::new(logged)) }))
            }
        });
        let connection = builder.serve_connection(TokioIo::new(io), service);
        let mut connection = std::pin::pin!(connection);
        tokio::select! {
            // A connection that fails (the client went away, or spoke nonsense) has nobody to
            // tell; its requests count as ended when their guards drop.
            _ = connection.as_mut() => {}
            () = stopped(&mut stop) => {
                connection.as_mut().graceful_shutdown();
                let _ = connection.await;
            }
        }
    }
}

/// Completes once the stop is given (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns holds a lock; it must not live across the caller's awaits.
    let _ = stop.wait_for(|stopped| *stopped).await.map(|_| ());
}

enum Protocols {
    Http1,
    Http2,
    Both,
}

fn builder(protocols: Protocols) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    // A client may send its request and shut its sending side while it waits for the answer
    // (`shutdown(SHUT_WR)`: `nc -N`, health checks, scripts). hyper's default takes that end of
    // input as an aborted connection and drops it, answer and all (a miss waiting on its origin
    // was answered nothing, the last of pipelined requests lost); allowed, the answer is
    // written, then the connection closed.
    builder.http1().half_close(true);
    match protocols {
        Protocols::Http1 => builder.http1_only(),
        Protocols::Http2 => builder.http2_only(),
        Protocols::Both => builder,
    }
}

/// Requests started and ended, for the drain's count.
#[derive(Default)]
struct Requests {
    started: AtomicU64,
    ended: AtomicU64,
    idle: Notify,
}

impl Requests {
    fn in_flight(&self) -> u64 {
        // `ended` first: a request that ends between the two loads must not make it negative.
        let ended = self.ended.load(Ordering::SeqCst);
        self.started.load(Ordering::SeqCst).saturating_sub(ended)
    }

    async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// One request, from its head's arrival until its response's body has been handed to the
/// connection (or dropped with it).
struct InFlight(Arc<Requests>);

impl InFlight {
    fn start(requests: Arc<Requests>) -> Self {
        requests.started.fetch_add(1, Ordering::SeqCst);
        Self(requests)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.ended.fetch_add(1, Ordering::SeqCst);
        if self.0.in_flight() == 0 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A response body that keeps its request counted in flight until the body is done with, and,
/// with an access log, counts the bytes the connection takes of it and writes the request's
/// line when it is dropped.
struct Counted {
    body: Body,
    _guard: InFlight,
    log: Option<Box<Logged>>,
}

/// The most of a body handed to the connection at once when logging: a stored body is one
/// buffer, which hyper would take whole (and the line count whole) however little of it the
/// client then reads. In pieces, a client that leaves mid-body is logged with what the
/// connection took, past what the socket did by at most hyper's write buffer.
const LOGGED_PIECE: usize = 64 << 10;

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let Some(log) = this.log.as_mut() else { return Pin::new(&mut this.body).poll_frame(cx) };
        if let Some(rest) = log.rest.as_mut() {
            let piece = rest.split_to(rest.len().min(LOGGED_PIECE));
            if rest.is_empty() {
                log.rest = None;
            }
            log.bytes += piece.len() as u64;
            return Poll::Ready(Some(Ok(http_body::Frame::data(piece))));
        }
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        let Poll::Ready(Some(Ok(frame))) = polled else { return polled };
        match frame.into_data() {
            Ok(mut data) => {
                if data.len() > LOGGED_PIECE {
                    log.rest = Some(data.split_off(LOGGED_PIECE));
                }
                log.bytes += data.len() as u64;
                Poll::Ready(Some(Ok(http_body::Frame::data(data))))
            }
            Err(frame) => Poll::Ready(Some(Ok(frame))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.log.as_ref().is_none_or(|l| l.rest.is_none()) && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let rest = self.log.as_ref().and_then(|l| l.rest.as_ref()).map_or(0, |r| r.len() as u64);
        let inner = self.body.size_hint();
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

/// What a request's line needs of its request.
struct Head {
    log: AccessLog,
    peer: SocketAddr,
    started: std::time::Instant,
    method: axum::http::Method,
    target: axum::http::Uri,
    version: axum::http::Version,
    referer: Option<axum::http::HeaderValue>,
    agent: Option<axum::http::HeaderValue>,
    /// Whether this is a read of `/metrics`, to which the log's counters are added.
    metrics: bool,
}

impl Head {
    fn of(request: &Request<Body>, peer: SocketAddr, log: AccessLog) -> Self {
        let h = request.headers();
        Self {
            log,
            peer,
            started: std::time::Instant::now(),
            method: request.method().clone(),
            target: unshared_uri(request.uri()),
            version: request.version(),
            referer: h.get(axum::http::header::REFERER).map(unshared),
            agent: h.get(axum::http::header::USER_AGENT).map(unshared),
            metrics: request.uri().path() == "/metrics" && request.method() == axum::http::Method::GET,
        }
    }
}

// hyper's request fields are slices of its connection's read buffer: a clone kept for the log
// keeps that buffer (kilobytes) from being reused for the next request, so that each request
// allocated a new one and the log's thread freed the old. A copy of the few bytes is cheaper.

/// `v` in bytes of its own.
fn unshared(v: &axum::http::HeaderValue) -> axum::http::HeaderValue {
    axum::http::HeaderValue::from_maybe_shared(Bytes::copy_from_slice(v.as_bytes())).unwrap_or_else(|_| v.clone())
}

/// `uri` in bytes of its own (an origin-form target; another form is cloned as it is).
fn unshared_uri(uri: &axum::http::Uri) -> axum::http::Uri {
    match uri.path_and_query() {
        Some(pq) if uri.scheme().is_none() => {
            axum::http::uri::PathAndQuery::from_maybe_shared(Bytes::copy_from_slice(pq.as_str().as_bytes()))
                .map_or_else(|_| uri.clone(), axum::http::Uri::from)
        }
        _ => uri.clone(),
    }
}

/// A request being answered, for its line: written when the body is dropped, sent whole or
/// not (the client left, or the connection was cut at a stop).
struct Logged {
    head: Head,
    status: u16,
    cache: Option<axum::http::HeaderValue>,
    origin: Option<Arc<str>>,
    ttfb: Duration,
    bytes: u64,
    /// What is left of a data frame cut into pieces.
    rest: Option<Bytes>,
}

impl Logged {
    fn new(head: Head, response: &axum::response::Response) -> Self {
        // The origin mode says it in `X-Cache`; a mode without that field in its extensions.
        let cache = match response.extensions().get::<CacheResult>() {
            Some(CacheResult(word)) => Some(axum::http::HeaderValue::from_static(word)),
            None => response.headers().get("x-cache").cloned(),
        };
        Self {
            ttfb: head.started.elapsed(),
            head,
            status: response.status().as_u16(),
            cache,
            origin: response.extensions().get::<Upstream>().map(|u| Arc::clone(&u.0)),
            bytes: 0,
            rest: None,
        }
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let total = self.head.started.elapsed();
        let h = &mut self.head;
        h.log.record(Entry {
            peer: h.peer,
            at: std::time::SystemTime::now(),
            method: std::mem::replace(&mut h.method, axum::http::Method::GET),
            target: std::mem::take(&mut h.target),
            version: h.version,
            status: self.status,
            bytes: self.bytes,
            referer: h.referer.take(),
            agent: h.agent.take(),
            cache: self.cache.take(),
            origin: self.origin.take(),
            ttfb: self.ttfb,
            total,
        });
    }
}

/// `/metrics` with the access log's counters added before its closing `# EOF`.
async fn with_log_metrics(response: axum::response::Response, log: &AccessLog) -> axum::response::Response {
    if response.status() != axum::http::StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // A page of counters, whole at once: the bound only guards against a service gone wrong.
    let Ok(bytes) = axum::body::to_bytes(body, 16 << 20).await else {
        return axum::response::Response::from_parts(parts, Body::empty());
    };
    let text = String::from_utf8_lossy(&bytes);
    let (before, after) = text.rfind("# EOF").map_or((&*text, ""), |at| text.split_at(at));
    let joined = format!("{before}{}{after}", log.metrics_text());
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    axum::response::Response::from_parts(parts, Body::from(joined))
}
