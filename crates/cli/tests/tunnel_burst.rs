//! The tunnel under a burst as the issue measures it: `switchyard tunnel listen` and `tunnel
//! connect` as processes of their own, a web server in a third (this test binary run again),
//! and N clients here opening connections through one forward at the same moment, each
//! fetching a 100 kB body with a 30 s limit; then the same burst straight to the server. Each
//! process has its own descriptor limit, as in real use. A measurement:
//! `SWITCHYARD_BURST=10000 cargo test --release -p switchyard --test tunnel_burst -- --ignored --nocapture`.

// The same target the mux crate's burst tests use.
#[path = "../../mux/tests/web/mod.rs"]
mod web;

use std::io::BufRead;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BODY: usize = 100_000;
const WEB: &str = "SWITCHYARD_TEST_WEB_SERVER";

fn body() -> Vec<u8> {
    (0..BODY).map(|i| (i * 31 % 251) as u8).collect()
}

/// Kills the child when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Not a test on its own: run as a child by the test below, a web server that reads each
/// request to its blank line, writes the body and closes, until it is killed.
#[test]
fn web_server_child() {
    if std::env::var_os(WEB).is_none() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    rt.block_on(async {
        let addr = web::web_server(body()).await;
        println!("listening {addr}");
        std::future::pending::<()>().await;
    });
}

/// Starts `cmd` and returns it with the first line of `stream` that contains `marker`.
fn started(mut cmd: Command, stderr: bool, marker: &str) -> (Running, String) {
    let mut child = if stderr { cmd.stderr(Stdio::piped()) } else { cmd.stdout(Stdio::piped()) }.spawn().unwrap();
    let out: Box<dyn std::io::Read + Send> =
        if stderr { Box::new(child.stderr.take().unwrap()) } else { Box::new(child.stdout.take().unwrap()) };
    let mut lines = std::io::BufReader::new(out).lines();
    let line = loop {
        let line = lines.next().expect("the child says it is ready").unwrap();
        if line.contains(marker) {
            break line;
        }
    };
    std::thread::spawn(move || lines.for_each(|l| eprintln!("  {}", l.unwrap_or_default())));
    (Running(child), line)
}

#[derive(Debug, Default)]
struct Outcome {
    whole: usize,
    short: usize,
    reset: usize,
    timed_out: usize,
    seconds: f64,
}

async fn burst(to: SocketAddr, clients: usize) -> Outcome {
    let want = Arc::new(body());
    let began = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let want = Arc::clone(&want);
            tokio::spawn(async move {
                let go = async {
                    let mut tcp = tokio::net::TcpStream::connect(to).await?;
                    tcp.write_all(b"GET /body HTTP/1.0\r\n\r\n").await?;
                    let mut got = Vec::new();
                    tcp.read_to_end(&mut got).await?;
                    Ok::<_, std::io::Error>(got)
                };
                match tokio::time::timeout(Duration::from_secs(30), go).await {
                    Err(_) => 3,
                    Ok(Err(_)) => 2,
                    Ok(Ok(got)) if got == *want => 0,
                    Ok(Ok(_)) => 1,
                }
            })
        })
        .collect();
    let mut o = Outcome::default();
    for t in tasks {
        match t.await.unwrap() {
            0 => o.whole += 1,
            1 => o.short += 1,
            2 => o.reset += 1,
            _ => o.timed_out += 1,
        }
    }
    o.seconds = began.elapsed().as_secs_f64();
    o
}

#[ignore = "a measurement: thousands of clients through two tunnel processes"]
#[test]
fn a_burst_through_two_tunnel_processes() {
    let clients: usize = std::env::var("SWITCHYARD_BURST").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let bin = env!("CARGO_BIN_EXE_switchyard");
    let dir = std::env::temp_dir().join(format!("switchyard-tunnel-burst-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, b"a key for the burst, 32 bytes ok").unwrap();
    let mut web = Command::new(std::env::current_exe().unwrap());
    web.args(["--exact", "web_server_child", "--nocapture", "--test-threads=1"]).env(WEB, "1");
    let (_web, line) = started(web, false, "listening ");
    let web_addr: SocketAddr = line.rsplit(' ').next().unwrap().parse().unwrap();
    let mut listen = Command::new(bin);
    listen.args(["tunnel", "listen", "--bind", "127.0.0.1:0", "--key-file", key.to_str().unwrap(), "--every", "0"]);
    let (_listen, line) = started(listen, true, "listening on ");
    let far = line.split("listening on ").nth(1).unwrap().split(',').next().unwrap().to_string();
    let local = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut connect = Command::new(bin);
    connect.args(["tunnel", "connect", "--to", &far, "--key-file", key.to_str().unwrap(), "--every", "0"]);
    connect.args(["--forward", &format!("{local}={web_addr}")]);
    let (_connect, _) = started(connect, true, "→");
    // The forward binds before it prints its line; give its task a moment to accept.
    std::thread::sleep(Duration::from_millis(300));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let straight = rt.block_on(burst(web_addr, clients));
    let tunnelled = rt.block_on(burst(local, clients));
    println!("{clients} clients at once, 100 kB each, 30 s limit a client");
    println!("{:<22} {:>7} {:>7} {:>7} {:>9} {:>8}", "", "whole", "short", "reset", "timed out", "seconds");
    for (name, o) in [("straight to the server", &straight), ("through the tunnel", &tunnelled)] {
        println!("{name:<22} {:>7} {:>7} {:>7} {:>9} {:>8.1}", o.whole, o.short, o.reset, o.timed_out, o.seconds);
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!((tunnelled.short, tunnelled.timed_out), (0, 0), "{tunnelled:?}");
}
