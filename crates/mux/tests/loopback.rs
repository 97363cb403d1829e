//! Sessions over loopback: bytes arrive whole and in order on every channel, a connection cut
//! mid-transfer loses nothing, a wrong key is refused, and backlogged channels share by weight.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use switchyard_mux::{ConnChoice, Listener, MuxConfig, MuxError, Peer, Scheme, SendConfig, Session, Tls};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn config(scheme: Scheme, connections: usize) -> MuxConfig {
    MuxConfig {
        key: b"test key".to_vec(),
        connections,
        send: SendConfig { scheme, ..MuxConfig::default().send },
        ..MuxConfig::default()
    }
}

/// A channel's bytes: position-dependent, so a lost, doubled or misplaced byte shows.
fn pattern(channel: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 13) as u8 ^ channel as u8).collect()
}

/// A server that reads every channel to its end and returns (channel, bytes) pairs.
async fn collecting_server(
    config: MuxConfig,
    channels: usize,
) -> (SocketAddr, tokio::task::JoinHandle<Vec<(u32, Vec<u8>)>>) {
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config).await.unwrap();
    let addr = listener.local_addr();
    let task = tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let mut readers = Vec::new();
        for _ in 0..channels {
            let mut ch = session.accept().await.unwrap();
            readers.push(tokio::spawn(async move {
                let mut all = Vec::new();
                ch.read_to_end(&mut all).await.unwrap();
                (ch.id(), all)
            }));
        }
        let mut out = Vec::new();
        for r in readers {
            out.push(r.await.unwrap());
        }
        out.sort_by_key(|(id, _)| *id);
        // The session stays a while, so the client can still read its counters (a session
        // whose peer's has ended ends too).
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(session);
        });
        out
    });
    (addr, task)
}

async fn send_all(session: &Session, sizes: &[usize]) {
    let mut writers = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        let mut ch = session.open(1.0 + i as f64, true).await.unwrap();
        let data = pattern(ch.id(), *size);
        writers.push(tokio::spawn(async move {
            for piece in data.chunks(50_000) {
                ch.write_all(piece).await.unwrap();
            }
            ch.shutdown().await.unwrap();
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
}

async fn transfer(scheme: Scheme, connections: usize) {
    let sizes = [3_000_000, 1_000_000, 10, 0];
    let (addr, server) = collecting_server(config(scheme, connections), sizes.len()).await;
    let session = Session::connect(addr, config(scheme, connections)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), send_all(&session, &sizes)).await.expect("the sender is not stuck");
    let got = tokio::time::timeout(Duration::from_secs(60), server).await.expect("the transfer finishes").unwrap();
    for ((id, bytes), size) in got.iter().zip(sizes) {
        assert_eq!(bytes.len(), size, "channel {id}");
        assert!(*bytes == pattern(*id, size), "channel {id}: bytes differ");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn striping_carries_every_byte_in_order() {
    transfer(Scheme::Stripe(ConnChoice::LeastQueued), 4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_delivery_striping_carries_every_byte_in_order() {
    transfer(Scheme::Stripe(ConnChoice::EarliestDelivery { slack: 0.1 }), 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinning_carries_every_byte_in_order() {
    transfer(Scheme::Pin { hysteresis: 0.01 }, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_key_is_refused_and_both_ends_say_key_mismatch() {
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config(scheme, 1)).await.unwrap();
    let addr = listener.local_addr();
    let mut refusals = listener.refusals();
    let mut wrong = config(scheme, 1);
    wrong.key = b"not the key".to_vec();
    match Session::connect(addr, wrong).await {
        Err(MuxError::Hello(e)) => assert!(e.to_string().starts_with("key mismatch"), "{e}"),
        other => panic!("expected a refused handshake, got {other:?}"),
    }
    let said = tokio::time::timeout(Duration::from_secs(5), refusals.recv()).await.unwrap().unwrap();
    assert!(said.contains("key mismatch") && said.contains("127.0.0.1"), "the listener said {said:?}");
}

/// A TCP forwarder to `to`. `watch` sees every chunk a client sends, with the connection's
/// number (from 1) and the bytes it has carried so far including the chunk; `false` cuts the
/// connection there, both directions, with frames in flight.
async fn forwarder<F>(to: SocketAddr, watch: F) -> SocketAddr
where
    F: Fn(u32, usize, &[u8]) -> bool + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let watch = std::sync::Arc::new(watch);
    tokio::spawn(async move {
        let mut n = 0u32;
        loop {
            let (a, _) = listener.accept().await.unwrap();
            n += 1;
            let watch = std::sync::Arc::clone(&watch);
            tokio::spawn(async move {
                let b = TcpStream::connect(to).await.unwrap();
                let (mut ar, mut aw) = a.into_split();
                let (mut br, mut bw) = b.into_split();
                let back = tokio::spawn(async move { tokio::io::copy(&mut br, &mut aw).await });
                let mut buf = vec![0u8; 16 << 10];
                let mut carried = 0;
                loop {
                    let k = match ar.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(k) => k,
                    };
                    if bw.write_all(&buf[..k]).await.is_err() {
                        break;
                    }
                    carried += k;
                    if !watch(n, carried, &buf[..k]) {
                        back.abort();
                        return;
                    }
                }
                let _ = bw.shutdown().await;
                let _ = back.await;
            });
        }
    });
    addr
}

/// A TCP forwarder that cuts its `n`th connection (from 1) once it has carried `after` bytes
/// from the client, for each `(n, after)` in `cuts`.
async fn cutting_proxy(to: SocketAddr, cuts: Vec<(u32, usize)>) -> SocketAddr {
    forwarder(to, move |n, carried, _| !cuts.iter().any(|(c, after)| *c == n && carried >= *after)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_cut_mid_transfer_lose_nothing() {
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    let sizes = [4_000_000, 2_000_000];
    let (server_addr, server) = collecting_server(config(scheme, 3), sizes.len()).await;
    // Two of the three connections die partway, one of them twice (its first replacement is
    // connection 4).
    let proxy = cutting_proxy(server_addr, vec![(2, 300_000), (1, 900_000), (4, 200_000)]).await;
    let session = Session::connect(proxy, config(scheme, 3)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), send_all(&session, &sizes)).await.expect("the sender is not stuck");
    let got = tokio::time::timeout(Duration::from_secs(60), server).await.expect("the transfer finishes").unwrap();
    for ((id, bytes), size) in got.iter().zip(sizes) {
        assert_eq!(bytes.len(), size, "channel {id}");
        assert!(*bytes == pattern(*id, size), "channel {id}: bytes differ");
    }
    let report = session.report().await.unwrap();
    assert!(report.lost >= 2, "connections were lost: {report:?}");
    // The channels finished and the session forgot them: their counters are in the totals.
    let resent: u64 = report.channels.iter().chain([&report.retired.1]).map(|c| c.sent.resent_frames).sum();
    assert!(resent > 0, "frames in flight on the cut connections were sent again: {report:?}");
}

/// The striped echo that lost bytes about once in 40 runs (issue 18): the server's task ended
/// right after its last `send` and `close`, its handles dropped, and its driver stopped with
/// frames still queued; the client waited out its idle timeout and then saw a clean end.
async fn echo_once() {
    let mut listener =
        Listener::bind("127.0.0.1:0".parse().unwrap(), config(Scheme::Stripe(ConnChoice::LeastQueued), 2))
            .await
            .unwrap();
    let addr = listener.local_addr();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let mut ch = session.accept().await.unwrap();
        // Echo.
        while let Some(b) = ch.recv().await.unwrap() {
            ch.send(b).await.unwrap();
        }
        ch.close().await.unwrap();
    });
    let session = Session::connect(addr, config(Scheme::Stripe(ConnChoice::LeastQueued), 2)).await.unwrap();
    let mut ch = session.open(2.0, true).await.unwrap();
    let data = pattern(1, 300_000);
    ch.send(Bytes::from(data.clone())).await.unwrap();
    ch.close().await.unwrap();
    let mut back = Vec::new();
    let end = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match ch.recv().await {
                Ok(Some(b)) => back.extend_from_slice(&b),
                other => return other,
            }
        }
    })
    .await
    .expect("the echo ends (before the fix it stalled for the client's 60 s idle timeout)");
    end.expect("a clean end");
    assert_eq!(back.len(), data.len());
    assert!(back == data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_flow_both_ways_on_one_channel() {
    echo_once().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_let_go_still_delivers_what_it_was_given() {
    // The server sends, closes and lets go at once, with most of its bytes still queued
    // behind credit and the sockets; the client reads only afterwards. Before the fix this lost
    // the tail in 3 runs of 6 and then reported a clean end.
    for _ in 0..5 {
        let mut listener =
            Listener::bind("127.0.0.1:0".parse().unwrap(), config(Scheme::Stripe(ConnChoice::LeastQueued), 2))
                .await
                .unwrap();
        let addr = listener.local_addr();
        let data = pattern(1, 2_000_000);
        let sent = data.clone();
        tokio::spawn(async move {
            let session = listener.accept().await.unwrap();
            let mut ch = session.accept().await.unwrap();
            ch.send(Bytes::from(sent)).await.unwrap();
            ch.close().await.unwrap();
        });
        let session = Session::connect(addr, config(Scheme::Stripe(ConnChoice::LeastQueued), 2)).await.unwrap();
        let mut ch = session.open(1.0, true).await.unwrap();
        ch.send(Bytes::from_static(b"go")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), ch.read_to_end(&mut got))
            .await
            .expect("the transfer ends")
            .expect("a clean end");
        assert!(got == data, "{} of {} bytes", got.len(), data.len());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_whose_session_stops_midway_ends_with_an_error_that_says_what_arrived() {
    // Every connection is cut after 400 kB and every later one is refused at once: the
    // server's session is alone, stops after its idle timeout, and its channel is cut off.
    let mut server_config = config(Scheme::Stripe(ConnChoice::LeastQueued), 2);
    server_config.idle_timeout = Duration::from_millis(300);
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), server_config).await.unwrap();
    let cut = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&cut);
    let proxy = forwarder(listener.local_addr(), move |_, carried, bytes| {
        let total = seen.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed) + bytes.len();
        total < 400_000 && carried < 400_000
    })
    .await;
    let mut client_config = config(Scheme::Stripe(ConnChoice::LeastQueued), 2);
    client_config.idle_timeout = Duration::from_millis(300);
    let client = Session::connect(proxy, client_config).await.unwrap();
    let ch = client.open(1.0, true).await.unwrap();
    let writer = tokio::spawn(async move {
        let data = Bytes::from(pattern(1, 4_000_000));
        let _ = ch.send(data).await;
        ch
    });
    let server = listener.accept().await.unwrap();
    let mut got = server.accept().await.unwrap();
    let mut read = 0u64;
    let end = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match got.recv().await {
                Ok(Some(b)) => read += b.len() as u64,
                other => return other,
            }
        }
    })
    .await
    .expect("the cut channel ends");
    match end {
        Err(MuxError::Cut { cut, why }) => {
            assert_eq!(cut.delivered_bytes, read, "the error counts what the application read");
            assert!(read < 4_000_000);
            assert!(cut.announced_frames.is_none(), "the client never closed it");
            let message = MuxError::Cut { cut, why }.to_string();
            assert!(message.contains("cut off") && message.contains("no connection"), "{message}");
        }
        other => panic!("a channel cut off mid-transfer must end with an error, not {other:?}"),
    }
    writer.abort();
}

/// A server with `server_config`, a client session with a channel that said "hello", and the
/// server's session and channel that heard it.
async fn said_hello(
    server_config: MuxConfig,
) -> (Listener, Session, switchyard_mux::Channel, Session, switchyard_mux::Channel) {
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), server_config).await.unwrap();
    let client =
        Session::connect(listener.local_addr(), config(Scheme::Stripe(ConnChoice::LeastQueued), 2)).await.unwrap();
    let ch = client.open(1.0, true).await.unwrap();
    ch.send(Bytes::from_static(b"hello")).await.unwrap();
    let server = listener.accept().await.unwrap();
    let mut got = server.accept().await.unwrap();
    assert_eq!(&got.recv().await.unwrap().unwrap()[..], b"hello");
    (listener, client, ch, server, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_server_session_has_ended_is_told_so_instead_of_redialling() {
    let (_listener, client, ch, server, got) = said_hello(config(Scheme::Stripe(ConnChoice::LeastQueued), 2)).await;
    // The server's application takes the session and lets it go; the listener stays.
    drop((got, server));
    // The client's connections close, it re-opens them, the server answers that it has no
    // such session, and the client's session ends: within seconds, not its 60 s idle timeout.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while client.report().await.is_ok() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(ended.is_ok(), "the client's session is still running");
    let e = ch.send(Bytes::from_static(b"more")).await.unwrap_err();
    assert!(matches!(e, MuxError::Ended), "{e}");
}

async fn shares(scheme: Scheme, connections: usize, weights: &[f64]) -> Vec<f64> {
    common::shares(Peer::Tcp("127.0.0.1:0".parse().unwrap()), config(scheme, connections), weights).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlogged_channels_share_by_weight() {
    let weights = [1.0, 2.0, 4.0, 8.0];
    let w: f64 = weights.iter().sum();
    for scheme in [Scheme::Stripe(ConnChoice::LeastQueued), Scheme::Stripe(ConnChoice::EarliestDelivery { slack: 0.1 })]
    {
        let got = shares(scheme, 3, &weights).await;
        eprintln!("{scheme:?}: shares {got:?}");
        for (g, wi) in got.iter().zip(weights) {
            // The bench measures adherence to 1%; a shared test machine gets a wider margin.
            assert!((g - wi / w).abs() < 0.03, "{scheme:?}: shares {got:?} against weights {weights:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_carries_a_tcp_conversation_and_refuses_targets_not_allowed() {
    use switchyard_mux::tunnel::{self, Forward, Log};
    // What each end logs.
    let logs: [std::sync::Arc<std::sync::Mutex<Vec<String>>>; 2] = Default::default();
    let log = |i: usize| -> Log {
        let lines = std::sync::Arc::clone(&logs[i]);
        std::sync::Arc::new(move |line| lines.lock().unwrap().push(line))
    };
    let far_log = log(0);
    // The far side's service.
    let echo_addr = common::echo_server().await;
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config(scheme, 2)).await.unwrap();
    let addr = listener.local_addr();
    let allowed = echo_addr.to_string();
    tokio::spawn(async move {
        while let Some(session) = listener.accept().await {
            tokio::spawn(tunnel::serve(session, vec![allowed.clone()], far_log.clone()));
        }
    });
    let session = Session::connect(addr, config(scheme, 2)).await.unwrap();
    // Bound before the forwards run, so a client's connect cannot race them.
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let good_forward = Forward { local: any, target: echo_addr.to_string(), weight: 4.0 };
    let bad_forward = Forward { local: any, target: "127.0.0.1:9".into(), weight: 1.0 };
    let (good_listener, bad_listener) = (tunnel::bind(&good_forward).unwrap(), tunnel::bind(&bad_forward).unwrap());
    let (good, bad) = (good_listener.local_addr().unwrap(), bad_listener.local_addr().unwrap());
    tokio::spawn(tunnel::forward_on(good_listener, session.clone(), good_forward, log(1)));
    tokio::spawn(tunnel::forward_on(bad_listener, session.clone(), bad_forward, log(1)));

    let data = pattern(9, 500_000);
    let back = common::round_trip(good, &data).await;
    assert!(back == data, "the echo came back whole");

    // A target not allowed: the client sees a reset, not an empty answer, even after sending
    // its request; and both ends say why.
    // The reset may come before the client's connect has returned: that is the same reset.
    if let Some(mut refused) = connected_unless_reset(bad).await {
        let _ = refused.write_all(b"GET / HTTP/1.0\r\n\r\n").await;
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), refused.read_to_end(&mut buf)).await.unwrap();
        assert_eq!(read.map_err(|e| e.kind()), Err(std::io::ErrorKind::ConnectionReset), "got {} bytes", buf.len());
    }
    let said = |i: usize| logs[i].lock().unwrap().join("\n");
    for (i, end) in [(0, "far"), (1, "near")] {
        assert!(said(i).contains("target not allowed: 127.0.0.1:9"), "the {end} end said: {:?}", said(i));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_session_ends_when_its_client_has_gone() {
    let mut server_config = config(Scheme::Stripe(ConnChoice::LeastQueued), 2);
    server_config.idle_timeout = Duration::from_millis(300);
    let (_listener, client, ch, server, mut got) = said_hello(server_config).await;
    // The client goes away without a word: its connections close.
    drop((ch, client));
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while got.recv().await.unwrap().is_some() {}
        server.accept().await
    })
    .await
    .expect("the server's session ends once it has been alone for its idle timeout");
    assert!(ended.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_whose_channel_is_cut_off_resets_its_tcp_connections_instead_of_closing_them() {
    use switchyard_mux::tunnel::{self, Forward};
    // The far side's service: a sink that reports how its connection ended.
    let sink = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sink_addr = sink.local_addr().unwrap();
    let (report, ended) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = sink.accept().await.unwrap();
        let mut got = Vec::new();
        let _ = report.send((s.read_to_end(&mut got).await.map_err(|e| e.kind()), got.len()));
    });
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    let mut server_config = config(scheme, 2);
    server_config.idle_timeout = Duration::from_millis(300);
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), server_config).await.unwrap();
    let addr = listener.local_addr();
    tokio::spawn(async move {
        while let Some(session) = listener.accept().await {
            tokio::spawn(tunnel::serve(session, Vec::new(), std::sync::Arc::new(|_| {})));
        }
    });
    // Every connection is cut once 1 MB has gone through, and every later one at once.
    let total = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let proxy = forwarder(addr, move |_, _, bytes| {
        total.fetch_add(bytes.len(), std::sync::atomic::Ordering::Relaxed) + bytes.len() < 1_000_000
    })
    .await;
    let mut client_config = config(scheme, 2);
    client_config.idle_timeout = Duration::from_millis(300);
    let session = Session::connect(proxy, client_config).await.unwrap();
    let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: sink_addr.to_string(), weight: 1.0 };
    let listener = tunnel::bind(&forward).unwrap();
    let local = listener.local_addr().unwrap();
    tokio::spawn(tunnel::forward_on(listener, session.clone(), forward, std::sync::Arc::new(|_| {})));
    let mut c = TcpStream::connect(local).await.unwrap();
    let data = pattern(5, 4_000_000);
    // The reset may reach the client while it still writes: then its write fails, and the
    // error is spent there (a later read sees an end of file).
    let wrote = async {
        c.write_all(&data).await?;
        c.shutdown().await
    }
    .await;
    let (how, got) =
        tokio::time::timeout(Duration::from_secs(20), ended).await.expect("the sink's connection ends").unwrap();
    assert!(got < data.len(), "the cut came mid-transfer");
    assert_eq!(how, Err(std::io::ErrorKind::ConnectionReset), "the sink got {got} bytes and must not see a clean end");
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), c.read_to_end(&mut rest)).await.unwrap();
    let reset = |e: Option<&std::io::Error>| {
        e.is_some_and(|e| matches!(e.kind(), std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe))
    };
    assert!(
        reset(wrote.as_ref().err()) || reset(read.as_ref().err()),
        "nor must the client: wrote {wrote:?}, read {read:?}"
    );
}

/// A server's and a client's TLS settings for a self-signed certificate naming `name`; the
/// client trusts that certificate and expects `expect`.
fn tls_pair(name: &str, expect: &str) -> (Tls, Tls) {
    switchyard_mux::SelfSigned::generate(&[name.to_owned()]).unwrap().pair(expect).unwrap()
}

fn with_tls(scheme: Scheme, connections: usize, tls: Tls) -> MuxConfig {
    MuxConfig { tls: Some(tls), ..config(scheme, connections) }
}

/// A TCP forwarder that keeps the first `keep` bytes its clients send.
async fn tapping_proxy(to: SocketAddr, keep: usize) -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let tap = std::sync::Arc::clone(&seen);
    let addr = forwarder(to, move |_, _, chunk| {
        let mut seen = tap.lock().unwrap();
        let room = keep.saturating_sub(seen.len()).min(chunk.len());
        seen.extend_from_slice(&chunk[..room]);
        true
    })
    .await;
    (addr, seen)
}

/// Whether `needle` occurs in `hay`.
fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_carries_every_byte_and_the_wire_shows_neither_hello_nor_data() {
    for (tls, scheme) in [(true, Scheme::Stripe(ConnChoice::LeastQueued)), (false, Scheme::Pin { hysteresis: 0.01 })] {
        let (server_tls, client_tls) = tls_pair("localhost", "localhost");
        let (server_config, client_config) = if tls {
            (with_tls(scheme, 3, server_tls), with_tls(scheme, 3, client_tls))
        } else {
            (config(scheme, 3), config(scheme, 3))
        };
        let sizes = [2_000_000, 300_000];
        let (server_addr, server) = collecting_server(server_config, sizes.len()).await;
        let (proxy, seen) = tapping_proxy(server_addr, 1 << 20).await;
        let session = Session::connect(proxy, client_config).await.unwrap();
        tokio::time::timeout(Duration::from_secs(60), send_all(&session, &sizes)).await.expect("not stuck");
        let got = tokio::time::timeout(Duration::from_secs(60), server).await.expect("the transfer finishes").unwrap();
        for ((id, bytes), size) in got.iter().zip(sizes) {
            assert_eq!(bytes.len(), size, "tls {tls}, channel {id}");
            assert!(*bytes == pattern(*id, size), "tls {tls}, channel {id}: bytes differ");
        }
        // In the clear the wire shows the protocol's name and the channels' bytes; under TLS,
        // neither.
        let seen = seen.lock().unwrap().clone();
        let sample = &pattern(got[0].0, 4096)[1000..1064];
        assert_eq!(contains(&seen, b"SYMUX"), !tls, "tls {tls}: the hello's magic on the wire");
        assert_eq!(contains(&seen, sample), !tls, "tls {tls}: a channel's bytes on the wire");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_refuses_an_untrusted_certificate_a_wrong_name_and_a_plain_client() {
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    let (server_tls, _) = tls_pair("localhost", "localhost");
    let (addr, _server) = collecting_server(with_tls(scheme, 1, server_tls.clone()), 1).await;
    // A client that trusts another certificate.
    let (_, stranger) = tls_pair("localhost", "localhost");
    match Session::connect(addr, with_tls(scheme, 1, stranger)).await {
        Err(e @ MuxError::Tls { .. }) => assert!(e.to_string().contains("certificate"), "{e}"),
        other => panic!("expected an untrusted certificate, got {other:?}"),
    }
    // A client that trusts the certificate but expects another name.
    let (server_tls, client_tls) = tls_pair("localhost", "example.org");
    let (addr, _server) = collecting_server(with_tls(scheme, 1, server_tls), 1).await;
    match Session::connect(addr, with_tls(scheme, 1, client_tls)).await {
        Err(e @ MuxError::Tls { .. }) => assert!(e.to_string().contains("certificate"), "{e}"),
        other => panic!("expected a name mismatch, got {other:?}"),
    }
    // A client without TLS gets no session, and is told the far end speaks TLS.
    let mut plain = config(scheme, 1);
    plain.handshake_timeout = Duration::from_millis(500);
    match Session::connect(addr, plain).await {
        Err(MuxError::Hello(e)) => {
            assert!(e.to_string().contains("speaks TLS") && e.to_string().contains("--tls-ca"), "{e}")
        }
        other => panic!("expected the far end's TLS named, got {other:?}"),
    }
    // A TLS client at a plain server: it is told the far end does not speak TLS.
    let (_, client_tls) = tls_pair("localhost", "localhost");
    let (plain_addr, _server) = collecting_server(config(scheme, 1), 1).await;
    match Session::connect(plain_addr, with_tls(scheme, 1, client_tls)).await {
        Err(e @ MuxError::Tls { .. }) => assert!(e.to_string().contains("does not speak TLS"), "{e}"),
        other => panic!("expected the far end's plain speech named, got {other:?}"),
    }
    // Settings for the wrong role are refused before any connection is made.
    assert!(matches!(
        Listener::bind("127.0.0.1:0".parse().unwrap(), with_tls(scheme, 1, tls_pair("a", "a").1)).await,
        Err(MuxError::Config(_))
    ));
    assert!(matches!(Session::connect(addr, with_tls(scheme, 1, server_tls_only())).await, Err(MuxError::Config(_))));
}

fn server_tls_only() -> Tls {
    tls_pair("localhost", "localhost").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_connections_cut_mid_transfer_lose_nothing() {
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    let (server_tls, client_tls) = tls_pair("localhost", "localhost");
    let sizes = [3_000_000, 1_000_000];
    let (server_addr, server) = collecting_server(with_tls(scheme, 3, server_tls), sizes.len()).await;
    let proxy = cutting_proxy(server_addr, vec![(2, 300_000), (1, 900_000)]).await;
    let session = Session::connect(proxy, with_tls(scheme, 3, client_tls)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), send_all(&session, &sizes)).await.expect("the sender is not stuck");
    let got = tokio::time::timeout(Duration::from_secs(60), server).await.expect("the transfer finishes").unwrap();
    for ((id, bytes), size) in got.iter().zip(sizes) {
        assert_eq!(bytes.len(), size, "channel {id}");
        assert!(*bytes == pattern(*id, size), "channel {id}: bytes differ");
    }
    assert!(session.report().await.unwrap().lost >= 2);
}

/// The same with each connection's records sealed and opened on a task of its own
/// (`MuxConfig::tls_task`), on both ends and on one end only: every byte arrives, in order,
/// though connections are cut mid-transfer (their records cut anywhere).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_on_connection_tasks_cut_mid_transfer_lose_nothing() {
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    for (server_task, client_task) in [(true, true), (false, true), (true, false)] {
        let (server_tls, client_tls) = tls_pair("localhost", "localhost");
        let sizes = [3_000_000, 1_000_000];
        let server_config = MuxConfig { tls_task: server_task, ..with_tls(scheme, 3, server_tls) };
        let client_config = MuxConfig { tls_task: client_task, ..with_tls(scheme, 3, client_tls) };
        let (server_addr, server) = collecting_server(server_config, sizes.len()).await;
        let proxy = cutting_proxy(server_addr, vec![(2, 300_000), (1, 900_000)]).await;
        let session = Session::connect(proxy, client_config).await.unwrap();
        tokio::time::timeout(Duration::from_secs(60), send_all(&session, &sizes))
            .await
            .expect("the sender is not stuck");
        let got = tokio::time::timeout(Duration::from_secs(60), server).await.expect("the transfer finishes").unwrap();
        for ((id, bytes), size) in got.iter().zip(sizes) {
            let which = format!("tasks: server {server_task}, client {client_task}; channel {id}");
            assert_eq!(bytes.len(), size, "{which}");
            assert!(*bytes == pattern(*id, size), "{which}: bytes differ");
        }
        assert!(session.report().await.unwrap().lost >= 2);
    }
}

/// Passes the first write through and holds every later one until [`HoldAfterFirst::release`],
/// so that a hand-made server's last hello message and its first frames leave in one TLS record.
struct HoldAfterFirst<S> {
    inner: S,
    writes: usize,
    held: Vec<u8>,
}

impl<S: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for HoldAfterFirst<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for HoldAfterFirst<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.writes == 0 {
            let n = std::task::ready!(std::pin::Pin::new(&mut self.inner).poll_write(cx, buf))?;
            if n == buf.len() {
                self.writes += 1;
            }
            return std::task::Poll::Ready(Ok(n));
        }
        self.held.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl<S: tokio::io::AsyncWrite + Unpin> HoldAfterFirst<S> {
    /// Writes what was held and `more` in one write, then flushes.
    async fn release(mut self, more: &[u8]) -> S {
        self.held.extend_from_slice(more);
        self.inner.write_all(&self.held).await.unwrap();
        self.inner.flush().await.unwrap();
        self.inner
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_frames_that_arrive_with_the_hello_are_not_left_behind() {
    use switchyard_core::carry::Frame;
    let (server_tls, client_tls) = tls_pair("localhost", "localhost");
    let Tls::Server(server_config) = server_tls else { unreachable!() };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = {
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let tls = tokio_rustls::TlsAcceptor::from(server_config).accept(tcp).await.unwrap();
            let mut held = HoldAfterFirst { inner: tls, writes: 0, held: Vec::new() };
            let claim = switchyard_mux::hello::accept(&mut held, b"test key").await.unwrap();
            switchyard_mux::hello::answer(&mut held, b"test key", &claim, switchyard_mux::hello::Answer::Joined)
                .await
                .unwrap();
            // The server gives the client leave to open a channel (open credit), right behind its
            // proof: the client's TLS reads it together with the proof. (The server may not
            // open channels of its own before the client's leave has come.)
            let mut frames = bytes::BytesMut::new();
            Frame::OpenCredit { limit: 1 }.encode(&mut frames);
            let tls = held.release(&frames).await;
            // Nothing more is sent; the connection stays open.
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(tls);
        })
    };
    let session =
        Session::connect(addr, with_tls(Scheme::Stripe(ConnChoice::LeastQueued), 1, client_tls)).await.unwrap();
    // The leave that came with the hello lets a channel open; left behind, the open would wait.
    tokio::time::timeout(Duration::from_secs(5), session.open(1.0, true))
        .await
        .expect("the frame that came with the hello is read")
        .expect("leave to open");
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_of_one_session_joining_at_once_make_one_session() {
    let key = b"test key";
    let mut listener =
        Listener::bind("127.0.0.1:0".parse().unwrap(), config(Scheme::Stripe(ConnChoice::LeastQueued), 4))
            .await
            .unwrap();
    let addr = listener.local_addr();
    // The race took 11 rounds to show once; 60 keep the test near 3 s.
    for round in 0..60 {
        // Four connections of one session, their handshakes run side by side.
        let id = switchyard_mux::hello::new_session_id();
        let joins = (0..4u16).map(|index| async move {
            let mut s = TcpStream::connect(addr).await.unwrap();
            switchyard_mux::hello::join(&mut s, key, &id, index, true).await.unwrap();
            s
        });
        let _streams = spawn_all(joins).await;
        let first = tokio::time::timeout(Duration::from_secs(5), listener.accept()).await.expect("a session");
        assert!(first.is_some());
        let second = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
        assert!(second.is_err(), "round {round}: one session's connections made two sessions");
    }
}

/// Runs the futures side by side on the runtime and returns their outputs in order.
async fn spawn_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[test]
fn a_tunnel_whose_far_end_restarts_opens_a_new_session_and_carries_on() {
    use switchyard_mux::tunnel::{self, Forward, Log, Near};
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log: Log = {
        let lines = std::sync::Arc::clone(&lines);
        std::sync::Arc::new(move |line| lines.lock().unwrap().push(line))
    };
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    // The far end runs on a runtime of its own, so that shutting it down is a restart: every
    // socket and session it had is gone.
    let far = move |addr: SocketAddr| {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let bound = rt.block_on(async move {
            let mut listener = Listener::bind(addr, config(scheme, 2)).await.unwrap();
            let bound = listener.local_addr();
            tokio::spawn(async move {
                while let Some(session) = listener.accept().await {
                    tokio::spawn(tunnel::serve(session, Vec::new(), std::sync::Arc::new(|_| {})));
                }
            });
            bound
        });
        (rt, bound)
    };
    let (first, addr) = far("127.0.0.1:0".parse().unwrap());
    let near_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let second = near_rt.block_on(async {
        let echo = common::echo_server().await;
        let near = Near::connect(Peer::Tcp(addr), config(scheme, 2), log).await.unwrap();
        let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: echo.to_string(), weight: 1.0 };
        let listener = tunnel::bind(&forward).unwrap();
        let local = listener.local_addr().unwrap();
        tokio::spawn(tunnel::forward_on(listener, near, forward, std::sync::Arc::new(|_| {})));
        let data = pattern(3, 100_000);
        assert!(common::round_trip(local, &data).await == data, "before the restart");

        first.shutdown_background();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Started from a thread of its own: a runtime is not started from within another.
        let (second, again) = std::thread::spawn(move || far(addr)).join().unwrap();
        assert_eq!(again, addr);
        let back = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                // A client that comes while the session is down is reset: it tries again.
                let attempt = tokio::time::timeout(Duration::from_secs(5), async {
                    let mut c = TcpStream::connect(local).await.ok()?;
                    let (mut r, mut w) = c.split();
                    let (wrote, back) = tokio::join!(
                        async {
                            w.write_all(&data).await?;
                            w.shutdown().await
                        },
                        async {
                            let mut back = Vec::new();
                            r.read_to_end(&mut back).await.map(|_| back)
                        }
                    );
                    wrote.ok()?;
                    back.ok().filter(|b| *b == data)
                });
                if let Ok(Some(back)) = attempt.await {
                    return back;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("the near end carries on with a new session after the far end restarts");
        assert!(back == data);
        let said = lines.lock().unwrap().join("\n");
        assert!(said.contains("stopped") && said.contains("a new session"), "the near end says so: {said}");
        second
    });
    second.shutdown_background();
    near_rt.shutdown_background();
}

/// A target that refuses is reset at once and said; one that never answers a connect holds up
/// no other channel, and is reset after the far end's connect timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_or_silent_target_holds_up_no_other_channel_and_its_client_is_reset() {
    use switchyard_mux::tunnel::{self, CONNECT_TIMEOUT, Forward, Log};
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log: Log = {
        let lines = std::sync::Arc::clone(&lines);
        std::sync::Arc::new(move |line| lines.lock().unwrap().push(line))
    };
    let echo = common::echo_server().await;
    // A closed port refuses; a listener whose accept queue is full (backlog 1, two connections
    // never accepted) lets a third connect hang, its SYNs dropped.
    let refusing = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let silent = tokio::net::TcpSocket::new_v4().unwrap();
    silent.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let silent = silent.listen(1).unwrap();
    let silent_addr = silent.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..2 {
        fillers.push(TcpStream::connect(silent_addr).await.unwrap());
    }
    let scheme = Scheme::Stripe(ConnChoice::LeastQueued);
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config(scheme, 2)).await.unwrap();
    let addr = listener.local_addr();
    tokio::spawn(async move {
        while let Some(session) = listener.accept().await {
            tokio::spawn(tunnel::serve(session, Vec::new(), log.clone()));
        }
    });
    let session = Session::connect(addr, config(scheme, 2)).await.unwrap();
    let mut forwarded = Vec::new();
    for target in [silent_addr, refusing, echo] {
        let f = Forward { local: "127.0.0.1:0".parse().unwrap(), target: target.to_string(), weight: 1.0 };
        let l = tunnel::bind(&f).unwrap();
        forwarded.push(l.local_addr().unwrap());
        tokio::spawn(tunnel::forward_on(l, session.clone(), f, std::sync::Arc::new(|_| {})));
    }
    let began = std::time::Instant::now();
    let reset_within = |to: SocketAddr, limit: Duration| async move {
        let Some(mut c) = connected_unless_reset(to).await else { return };
        let mut buf = Vec::new();
        let read = tokio::time::timeout(limit, c.read_to_end(&mut buf)).await.expect("the client is answered");
        assert_eq!(read.map_err(|e| e.kind()), Err(std::io::ErrorKind::ConnectionReset), "got {} bytes", buf.len());
    };
    let slow = tokio::spawn(reset_within(forwarded[0], CONNECT_TIMEOUT + Duration::from_secs(10)));
    tokio::time::sleep(Duration::from_millis(200)).await;
    reset_within(forwarded[1], Duration::from_secs(5)).await;
    let data = pattern(4, 200_000);
    assert!(common::round_trip(forwarded[2], &data).await == data);
    assert!(began.elapsed() < CONNECT_TIMEOUT, "the silent target held the others up");
    assert!(!slow.is_finished(), "the silent target's client is still waiting");
    slow.await.unwrap();
    let said = lines.lock().unwrap().join("\n");
    assert!(said.contains(&format!("cannot connect to {refusing}")), "{said}");
    assert!(said.contains(&format!("cannot connect to {silent_addr}: no answer")), "{said}");
    drop(fillers);
}

/// A client's connection to `to`, or `None` if the tunnel reset it before `connect` returned
/// (on loopback a refusal can travel both ends of the tunnel while the client's connect waits
/// to be polled; the kernel then reports the reset as the connect's error).
async fn connected_unless_reset(to: SocketAddr) -> Option<TcpStream> {
    match TcpStream::connect(to).await {
        Ok(c) => Some(c),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
        Err(e) => panic!("connecting to {to}: {e}"),
    }
}

/// A read with room for several frames takes every frame waiting for it, not one: eight 1 KiB
/// frames queued for the application come in one 64 KiB read. One frame a read cost a
/// `tokio::io::copy` a write to its target per frame.
#[tokio::test]
async fn a_read_takes_every_frame_waiting_not_one() {
    let frame = 1 << 10;
    let small = |c: MuxConfig| MuxConfig { send: SendConfig { max_frame: frame, ..c.send }, ..c };
    let config = small(config(Scheme::Stripe(ConnChoice::LeastQueued), 2));
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let addr = listener.local_addr();
    let client = Session::connect(addr, config).await.unwrap();
    let server = listener.accept().await.unwrap();
    let sent = pattern(1, 8 * frame);
    let ch = client.open(1.0, true).await.unwrap();
    ch.send(Bytes::from(sent.clone())).await.unwrap();
    let mut theirs = server.accept().await.unwrap();
    // Every frame in order at the core; the report after that one comes a driver turn later,
    // when they have gone into the channel's queue (8 frames of 1 KiB fit it).
    let arrived = async {
        loop {
            let report = server.report().await.unwrap();
            if report.channels.iter().any(|c| c.id == ch.id() && c.received.delivered_bytes == sent.len() as u64) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        server.report().await.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(30), arrived).await.expect("the frames arrived");
    let mut buf = vec![0u8; 64 << 10];
    let n = theirs.read(&mut buf).await.unwrap();
    assert_eq!(n, sent.len(), "one read took {n} bytes of the {} waiting", sent.len());
    assert!(buf[..n] == sent[..], "the bytes read differ from those sent");
    drop((ch, client));
}
