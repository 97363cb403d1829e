//! A target for the tunnel's load tests: a server that answers like a web server.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server that reads each request up to its blank line, then writes `body` and closes; on a
/// listener with the deepest backlog the system allows, so that a burst waits in it rather than
/// in SYN retries.
pub(crate) async fn web_server(body: Vec<u8>) -> SocketAddr {
    let listener = bind_wide("127.0.0.1:0".parse().unwrap());
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let body = Arc::new(body);
        loop {
            // Out of descriptors (the burst tests run clients, tunnel and server in one process):
            // a pause, as the tunnel's own accept loop makes. Retried at once, the failing accept
            // kept a runtime thread spinning that the tunnel's tasks needed.
            let Ok((mut tcp, _)) = listener.accept().await else {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            };
            let body = Arc::clone(&body);
            tokio::spawn(async move {
                let mut got = Vec::new();
                let mut buf = [0u8; 512];
                while !got.ends_with(b"\r\n\r\n") {
                    match tcp.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tcp.write_all(&body).await;
                let _ = tcp.shutdown().await;
            });
        }
    });
    addr
}

/// A listener with the deepest backlog the system allows (`net.core.somaxconn` caps it).
pub(crate) fn bind_wide(addr: SocketAddr) -> TcpListener {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_reuseaddr(true).unwrap();
    socket.bind(addr).unwrap();
    socket.listen(u32::MAX).unwrap()
}
