//! A tunnel that runs out of file descriptors waits for them, rather than giving up: its own
//! test binary, since it lowers the process's descriptor limit.

mod web;

use std::time::Duration;

use switchyard_mux::tunnel::{self, Forward};
use switchyard_mux::{Listener, MuxConfig, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY: usize = 20_000;
const CLIENTS: usize = 20;

/// Lowers this process's descriptor limit to `n`, so that running out is cheap.
fn limit_descriptors(n: u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read or write the struct they are given, nothing else.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = n.min(limit.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0, "{}", std::io::Error::last_os_error());
    }
}

/// Descriptors open now.
fn open_descriptors() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Takes every descriptor left; dropping what it returns gives them back.
fn take_every_descriptor() -> Vec<std::fs::File> {
    let mut held = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        held.push(f);
    }
    assert!(!held.is_empty());
    held
}

/// Asks over any byte stream and reads the answer to its end.
async fn fetch(mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin) -> Result<usize, String> {
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await.map_err(|e| format!("write: {e}"))?;
    let mut got = Vec::new();
    stream.read_to_end(&mut got).await.map_err(|e| format!("read: {e}"))?;
    Ok(got.len())
}

/// Both ends of a tunnel in this process, out of descriptors for a moment, twice: the forward
/// cannot accept the clients waiting in its backlog, then the far end cannot connect a
/// channel to its target. Before, the forward gave up at its first failed accept (every
/// client waiting, and every one after, was refused), and the far end reset the channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_out_of_descriptors_waits_for_them() {
    let target = web::web_server((0..BODY).map(|i| i as u8).collect()).await;
    let config = MuxConfig { key: b"fds".to_vec(), connections: 2, ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let far = listener.local_addr();
    let logs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log: tunnel::Log = {
        let logs = std::sync::Arc::clone(&logs);
        std::sync::Arc::new(move |line| logs.lock().unwrap().push(line))
    };
    let server_log = log.clone();
    tokio::spawn(async move {
        while let Some(session) = listener.accept().await {
            tokio::spawn(tunnel::serve(session, Vec::new(), server_log.clone()));
        }
    });
    let session = Session::connect(far, config).await.unwrap();
    let local = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let forward =
        tokio::spawn(tunnel::forward(session.clone(), Forward { local, target: target.to_string(), weight: 1.0 }, log));
    tokio::time::sleep(Duration::from_millis(100)).await;
    limit_descriptors(open_descriptors() + CLIENTS as u64 + 100);
    let said = || logs.lock().unwrap().clone();

    // The clients' sockets are made, then every descriptor left is taken, then they connect:
    // the kernel completes their handshakes, and the forward cannot accept them.
    let sockets: Vec<_> = (0..CLIENTS).map(|_| tokio::net::TcpSocket::new_v4().unwrap()).collect();
    let held = take_every_descriptor();
    let clients: Vec<_> = sockets
        .into_iter()
        .map(|socket| {
            tokio::spawn(async move {
                let tcp = socket.connect(local).await.map_err(|e| format!("connect: {e}"))?;
                fetch(tcp).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!forward.is_finished(), "the forward gave up: {:?}", forward.await);
    drop(held);
    for c in clients {
        let got = tokio::time::timeout(Duration::from_secs(30), c).await.expect("no client hangs").unwrap();
        assert_eq!(got, Ok(BODY), "the tunnel said: {:?}", said());
    }

    // A channel whose far end cannot connect to its target for want of a descriptor. The
    // connections just carried close in their own time: the count settles first, and what
    // they free while the far end tries is taken too.
    let mut settled = open_descriptors();
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = open_descriptors();
        if now == settled {
            break;
        }
        settled = now;
    }
    let mut channel = session.open(1.0, true).await.unwrap();
    let mut held = take_every_descriptor();
    let name = target.to_string();
    let mut header = (name.len() as u16).to_be_bytes().to_vec();
    header.extend_from_slice(name.as_bytes());
    channel.write_all(&header).await.unwrap();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        held.extend(std::iter::from_fn(|| std::fs::File::open("/dev/null").ok()));
    }
    drop(held);
    let got = tokio::time::timeout(Duration::from_secs(30), fetch(channel)).await.expect("no hang");
    assert_eq!(got, Ok(BODY), "the tunnel said: {:?}", said());
}
