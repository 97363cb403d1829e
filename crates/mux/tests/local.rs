//! Sessions between processes on one host, over a Unix socket (`unix:`) and over shared-memory
//! rings (`shm:`): every byte arrives on every channel both ways, backlogged channels share by
//! weight as they do over TCP, a peer that dies or lets go is noticed, a tunnel works over
//! rings, and peers parse from what a user types.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use switchyard_mux::{ConnChoice, Listener, MuxConfig, MuxError, Peer, Scheme, SendConfig, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn config(connections: usize) -> MuxConfig {
    MuxConfig {
        key: b"test key".to_vec(),
        connections,
        send: SendConfig { scheme: Scheme::Stripe(ConnChoice::LeastQueued), ..MuxConfig::default().send },
        ..MuxConfig::default()
    }
}

/// A socket path of this test's own (Unix socket paths are short: 108 bytes).
fn socket_path(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("swy-mux-{}-{name}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// The peer `kind` ("unix" or "shm") at a fresh path named after `name`.
fn peer(kind: &str, name: &str) -> Peer {
    format!("{kind}:{}", socket_path(&format!("{kind}-{name}")).display()).parse().unwrap()
}

/// A channel's bytes: position-dependent, so a lost, doubled or misplaced byte shows.
fn pattern(channel: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 13) as u8 ^ channel as u8).collect()
}

/// Writes `pattern(seed, len)` on `ch` in pieces and closes it, while reading what the peer
/// sends on it to the end; returns what was read.
async fn exchange(mut ch: switchyard_mux::Channel, seed: u32, len: usize) -> Vec<u8> {
    let data = pattern(seed, len);
    let (mut r, mut w) = tokio::io::split(&mut ch);
    let (_, got) = tokio::join!(
        async {
            for piece in data.chunks(50_000) {
                w.write_all(piece).await.unwrap();
            }
            w.shutdown().await.unwrap();
        },
        async {
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            got
        }
    );
    got
}

/// Several weighted channels carry a few MiB each way at once over `kind`, byte for byte.
async fn both_ways(kind: &str) {
    let sizes = [3 << 20, 2 << 20, 1 << 20, 10, 0];
    let peer = peer(kind, "both-ways");
    let mut listener = Listener::bind_to(peer.clone(), config(3)).await.unwrap();
    assert_eq!(listener.local(), &peer);
    let server = tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let mut tasks = Vec::new();
        for _ in 0..sizes.len() {
            let ch = session.accept().await.unwrap();
            let id = ch.id();
            // The server sends each channel its own pattern, sized by the channel's place.
            let len = sizes[(id as usize - 1) / 2];
            tasks.push(tokio::spawn(async move { (id, exchange(ch, id + 100, len).await) }));
        }
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.unwrap());
        }
        // The session is handed back, so it outlives the exchange while the client reads its
        // counters (a session whose peer's has ended ends too).
        (got, session)
    });
    let session = Session::connect_to(peer, config(3)).await.unwrap();
    if kind == "shm" {
        // Each of the 3 connections is two rings, each held open by both ends: the bytes below
        // go through shared memory, not through the socket that handed it over.
        let rings = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().contains("memfd:switchyard-shmring"))
            .count();
        assert!(rings >= 12, "{rings} ring files open");
    }
    let mut tasks = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let ch = session.open(1.0 + i as f64, true).await.unwrap();
        let id = ch.id();
        tasks.push(tokio::spawn(async move { (id, exchange(ch, id, len).await) }));
    }
    let all = async {
        let mut got = Vec::new();
        for t in tasks {
            got.push(t.await.unwrap());
        }
        (got, server.await.unwrap())
    };
    let (client_got, (server_got, _server)) = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .unwrap_or_else(|_| panic!("the exchange over {kind} finishes"));
    for (id, got) in &server_got {
        let len = sizes[(*id as usize - 1) / 2];
        assert_eq!(got.len(), len, "{kind}: channel {id} client → server");
        assert!(*got == pattern(*id, len), "{kind}: channel {id} client → server: bytes differ");
    }
    for (id, got) in &client_got {
        let len = sizes[(*id as usize - 1) / 2];
        assert_eq!(got.len(), len, "{kind}: channel {id} server → client");
        assert!(*got == pattern(id + 100, len), "{kind}: channel {id} server → client: bytes differ");
    }
    let report = session.report().await.unwrap();
    assert_eq!(report.connections, 3, "{kind}: {report:?}");
    assert_eq!(report.lost, 0, "{kind}: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_over_a_unix_socket_carry_every_byte_both_ways() {
    both_ways("unix").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels_over_shared_memory_rings_carry_every_byte_both_ways() {
    both_ways("shm").await;
}

async fn shares(peer: Peer, connections: usize, weights: &[f64]) -> Vec<f64> {
    common::shares(peer, config(connections), weights).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlogged_channels_share_by_weight_over_unix_sockets_and_rings() {
    let weights = [1.0, 2.0, 4.0, 8.0];
    let w: f64 = weights.iter().sum();
    for kind in ["unix", "shm"] {
        let got = shares(peer(kind, "shares"), 3, &weights).await;
        eprintln!("{kind}: shares {got:?}");
        for (g, wi) in got.iter().zip(weights) {
            // The tolerance loopback.rs allows over TCP.
            assert!((g - wi / w).abs() < 0.03, "{kind}: shares {got:?} against weights {weights:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_lets_go_ends_the_servers_session_over_rings() {
    let peer = peer("shm", "let-go");
    let mut server_config = config(2);
    server_config.idle_timeout = Duration::from_millis(300);
    let mut listener = Listener::bind_to(peer.clone(), server_config).await.unwrap();
    let client = Session::connect_to(peer, config(2)).await.unwrap();
    let ch = client.open(1.0, true).await.unwrap();
    ch.send(Bytes::from_static(b"hello")).await.unwrap();
    let server = listener.accept().await.unwrap();
    let mut got = server.accept().await.unwrap();
    assert_eq!(&got.recv().await.unwrap().unwrap()[..], b"hello");
    // Without a close: the client's rings go with its session.
    drop((ch, client));
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(Some(_)) = got.recv().await {}
        server.accept().await
    })
    .await
    .expect("the server's session ends once its client's rings are gone");
    assert!(ended.is_none());
}

/// Set in a child copy of this test binary: the server's socket path.
const CHILD_SERVER: &str = "SWITCHYARD_MUX_LOCAL_TEST_SERVER";

/// Not a test on its own: run as a child process by the test below, it serves `shm:` at the
/// path it is given and reads whatever arrives, until it is killed.
#[test]
fn child_server() {
    let Some(path) = std::env::var_os(CHILD_SERVER) else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.block_on(async move {
        let mut listener = Listener::bind_to(Peer::Shm(path.into()), config(2)).await.unwrap();
        // Tells the parent it can connect.
        println!("listening");
        while let Some(session) = listener.accept().await {
            tokio::spawn(async move {
                while let Some(mut ch) = session.accept().await {
                    tokio::spawn(async move { while let Ok(Some(_)) = ch.recv().await {} });
                }
            });
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_process_killed_mid_transfer_is_noticed_over_rings() {
    use std::io::BufRead;
    let path = socket_path("killed");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_server", "--nocapture", "--test-threads=1"])
        .env(CHILD_SERVER, &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child server exited before listening");
    }
    let mut client_config = config(2);
    client_config.idle_timeout = Duration::from_millis(500);
    // Not by silence: the rings' lifeline must say so, long before this.
    client_config.dead_after = Duration::from_secs(60);
    let session = Session::connect_to(Peer::Shm(path.clone()), client_config).await.unwrap();
    let ch = session.open(1.0, true).await.unwrap();
    let chunk = Bytes::from(vec![1u8; 64 << 10]);
    // Bytes are flowing when the server dies.
    for _ in 0..32 {
        ch.send(chunk.clone()).await.unwrap();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Err(e) = ch.send(chunk.clone()).await {
                return e;
            }
        }
    })
    .await
    .expect("the client notices its server died instead of waiting on its rings");
    assert!(matches!(ended, MuxError::Ended), "{ended}");
    let _ = std::fs::remove_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_carries_a_tcp_conversation_over_rings() {
    use switchyard_mux::tunnel::{self, Forward};
    // The far side's service.
    let echo_addr = common::echo_server().await;
    let peer = peer("shm", "tunnel");
    let mut listener = Listener::bind_to(peer.clone(), config(2)).await.unwrap();
    tokio::spawn(async move {
        while let Some(session) = listener.accept().await {
            tokio::spawn(tunnel::serve(session, Vec::new(), std::sync::Arc::new(|_| {})));
        }
    });
    let session = Session::connect_to(peer, config(2)).await.unwrap();
    let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: echo_addr.to_string(), weight: 4.0 };
    let listener = tunnel::bind(&forward).unwrap();
    let local = listener.local_addr().unwrap();
    tokio::spawn(tunnel::forward_on(listener, session.clone(), forward, std::sync::Arc::new(|_| {})));
    let data = pattern(9, 2_000_000);
    let back = tokio::time::timeout(Duration::from_secs(30), common::round_trip(local, &data))
        .await
        .expect("the echo comes back");
    assert!(back == data, "the echo came back whole ({} of {} bytes)", back.len(), data.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_servers_socket_is_not_taken_a_stale_one_is_and_tls_is_refused() {
    let peer = peer("unix", "taken");
    let Peer::Unix(path) = &peer else { unreachable!() };
    let first = Listener::bind_to(peer.clone(), config(1)).await.unwrap();
    let e = Listener::bind_to(Peer::Shm(path.clone()), config(1)).await.unwrap_err();
    assert!(e.to_string().contains("listening there already"), "{e}");
    // A socket file whose server has gone (a crash leaves it) is replaced.
    let stale = socket_path("stale");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let second = Listener::bind_to(Peer::Unix(stale.clone()), config(1)).await.unwrap();
    // A file that is not a socket is left alone.
    let plain = socket_path("plain");
    std::fs::write(&plain, b"mine").unwrap();
    let e = Listener::bind_to(Peer::Unix(plain.clone()), config(1)).await.unwrap_err();
    assert!(e.to_string().contains("not a socket"), "{e}");
    assert_eq!(std::fs::read(&plain).unwrap(), b"mine");
    std::fs::remove_file(&plain).unwrap();

    let (server_tls, client_tls) =
        switchyard_mux::SelfSigned::generate(&["localhost".to_owned()]).unwrap().pair("localhost").unwrap();
    let with = |tls| MuxConfig { tls: Some(tls), ..config(1) };
    let e = Session::connect_to(peer.clone(), with(client_tls)).await.unwrap_err();
    assert!(matches!(e, MuxError::Config(_)) && e.to_string().contains("TLS is for networks"), "{e}");
    let e = Listener::bind_to(Peer::Shm(socket_path("tls")), with(server_tls)).await.unwrap_err();
    assert!(matches!(e, MuxError::Config(_)) && e.to_string().contains("TLS is for networks"), "{e}");
    drop((first, second));
}

#[test]
fn peers_parse_from_the_three_forms_and_bad_ones_say_what_is_expected() {
    assert_eq!("127.0.0.1:7000".parse::<Peer>().unwrap(), Peer::Tcp("127.0.0.1:7000".parse().unwrap()));
    assert_eq!("[::1]:7000".parse::<Peer>().unwrap(), Peer::Tcp("[::1]:7000".parse().unwrap()));
    assert!(matches!("localhost:7000".parse::<Peer>().unwrap(), Peer::Tcp(a) if a.port() == 7000));
    assert_eq!("unix:/run/sy.sock".parse::<Peer>().unwrap(), Peer::Unix("/run/sy.sock".into()));
    assert_eq!("shm:/run/sy.sock".parse::<Peer>().unwrap(), Peer::Shm("/run/sy.sock".into()));
    for good in ["127.0.0.1:7000", "unix:/run/sy.sock", "shm:/run/sy.sock"] {
        assert_eq!(good.parse::<Peer>().unwrap().to_string(), good, "Display gives back what was parsed");
    }
    for bad in ["", "7000", "unix:", "shm:", "host:", ":7000", "host:port", "127.0.0.1:99999"] {
        let e = bad.parse::<Peer>().unwrap_err();
        assert!(e.contains("HOST:PORT") && e.contains("unix:/PATH") && e.contains("shm:/PATH"), "{bad:?}: {e}");
    }
    assert!(!Peer::Tcp("127.0.0.1:1".parse().unwrap()).is_local());
    assert!(Peer::Shm("/x".into()).is_local());
}

/// CPU seconds this process has used (user + system), from /proc (in clock ticks of 10 ms).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// Not a check: one backlogged channel's throughput, and the CPU both ends spend per byte,
/// over TCP loopback, a Unix socket and rings, with 1 and 5 connections. Run it with
/// `cargo test --release -p switchyard-mux --test local -- --ignored --nocapture throughput`.
#[ignore = "a measurement, not a check"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_of_one_channel_over_each_transport() {
    for connections in [1, 5] {
        for kind in ["tcp", "unix", "shm"] {
            let peer = match kind {
                "tcp" => Peer::Tcp("127.0.0.1:0".parse().unwrap()),
                kind => peer(kind, "throughput"),
            };
            let mut listener = Listener::bind_to(peer, config(connections)).await.unwrap();
            let peer = listener.local().clone();
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                let session = listener.accept().await.unwrap();
                let mut ch = session.accept().await.unwrap();
                let _ = tx.send(session);
                while let Ok(Some(_)) = ch.recv().await {}
            });
            let session = Session::connect_to(peer, config(connections)).await.unwrap();
            let ch = session.open(1.0, true).await.unwrap();
            let chunk = Bytes::from(vec![7u8; 1 << 20]);
            ch.send(chunk.clone()).await.unwrap();
            let server = rx.await.unwrap();
            let writer = tokio::spawn(async move { while ch.send(chunk.clone()).await.is_ok() {} });
            let delivered =
                |r: switchyard_mux::SessionReport| r.channels.iter().map(|c| c.received.delivered_bytes).sum::<u64>();
            tokio::time::sleep(Duration::from_millis(500)).await;
            let (t0, c0, b0) = (std::time::Instant::now(), cpu_seconds(), delivered(server.report().await.unwrap()));
            tokio::time::sleep(Duration::from_secs(3)).await;
            let (t1, c1, b1) = (std::time::Instant::now(), cpu_seconds(), delivered(server.report().await.unwrap()));
            writer.abort();
            let bytes = (b1 - b0) as f64;
            println!(
                "{kind:>4}, {connections} connection(s): {:7.0} MB/s, {:.3} CPU ns/byte (both ends)",
                bytes / (t1 - t0).as_secs_f64() / 1e6,
                (c1 - c0) * 1e9 / bytes
            );
        }
    }
}
