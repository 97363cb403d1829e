//! The loop that serves a gateway's routes on a listener: `axum::serve`'s, but with HTTP/1
//! half-closes allowed.
//!
//! A client may send its request and shut its sending side while it waits for the answer
//! (`shutdown(SHUT_WR)`: `nc -N`, some load balancers' health checks, scripts). hyper's default
//! (and so `axum::serve`'s, which does not expose the setting) takes that end of input in the
//! middle of a request as an aborted connection and drops it, answer and all: a miss waiting on
//! its origin was answered nothing, and the last of several pipelined requests was lost. With
//! half-closes allowed the answer is written, then the connection closed.

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tower_service::Service;

/// Serves `service` (an axum `Router`, or the gateway's own [`crate::origin::service`]) on
/// `listener` until `shutdown` completes, then lets the connections open finish the requests
/// they have begun and waits for them. Each request carries its peer's address as
/// `ConnectInfo<SocketAddr>` (for `--purge-from`).
pub async fn serve<S, B>(listener: TcpListener, service: S, shutdown: impl Future<Output = ()>)
where
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (stop, stopping) = tokio::sync::watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or memory: accepting again at once would spin.
                    if !is_connection_error(&e) {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Answers are written whole (head and body in one write where they fit): Nagle's
        // algorithm would only hold back the last segment of each.
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                service.clone().call(request)
            });
            let mut http1 = hyper::server::conn::http1::Builder::new();
            http1.half_close(true);
            let mut conn = pin!(http1.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stopping.changed() => conn.as_mut().graceful_shutdown(),
            }
            let _ = conn.await;
        });
    }
    drop(stopping);
    // Tell every connection to finish, and wait until they all have.
    let _ = stop.send(());
    stop.closed().await;
}

/// Whether accepting failed for the connection alone (it went before it was taken), not for
/// want of resources.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once told to stop, the loop takes no more connections and returns.
    #[tokio::test]
    async fn serving_stops_when_told() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(serve(listener, axum::Router::new(), async {
            let _ = rx.await;
        }));
        let r = reqwest::get(format!("http://{addr}/nothing")).await.unwrap();
        assert_eq!(r.status(), 404);
        tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), served).await.expect("serving stopped").unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "the listener is closed");
    }
}
