//! Channels under connections that are killed (RST), silenced and slowed mid-transfer: every
//! channel's bytes are checked by SHA-256 at the far end, and every channel must end cleanly
//! with all of them. Two networks:
//!
//! - **loopback**, through a proxy in this process that resets a connection (`SO_LINGER` 0, so
//!   both ends get an RST), stops forwarding it (silence: no byte, no close) or forwards it
//!   slowly;
//! - **emulated**, across the link emulator between two network namespaces, which drops a
//!   connection's packets, holds them back, or forges an RST to each end. Needs root; skipped
//!   with a message otherwise.
//!
//! A round is a new session and one of two transfers: an echo on one channel (issue 18's), or
//! several weighted channels to a sink that answers each with the length and SHA-256 of what it
//! read. One to three impairments fall at random moments. The short tests run in CI; the long
//! ones (`cargo test -p switchyard-mux --test stress -- --ignored --nocapture`) run
//! `SWITCHYARD_STRESS_ROUNDS` rounds (300 by default) from `SWITCHYARD_STRESS_SEED`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::{Digest, Sha256};
use switchyard_linkem::{Dumbbell, Impairment, Impairments, LinkConfig, LinkemError};
use switchyard_mux::{Channel, ConnChoice, Listener, MuxConfig, MuxError, Scheme, SendConfig, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ECHO: u8 = b'E';
const SINK: u8 = b'S';

fn config(scheme: Scheme, connections: usize) -> MuxConfig {
    MuxConfig {
        key: b"stress key".to_vec(),
        connections,
        send: SendConfig { scheme, ..MuxConfig::default().send },
        // A silenced connection is found within a second, not the default's fifteen.
        dead_after: Duration::from_secs(1),
        handshake_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(20),
        linger: Duration::from_secs(20),
        ..MuxConfig::default()
    }
}

/// The far end: echoes `E` channels; reads `S` channels to their end and answers with the
/// length and SHA-256 of what it read (or `CUT` and the error, if the channel was cut off).
async fn serve(mut listener: Listener) {
    while let Some(session) = listener.accept().await {
        tokio::spawn(async move {
            while let Some(ch) = session.accept().await {
                tokio::spawn(serve_channel(ch));
            }
        });
    }
}

async fn serve_channel(mut ch: Channel) {
    let Ok(mode) = ch.read_u8().await else { return };
    let mut hash = Sha256::new();
    let mut len = 0u64;
    loop {
        match ch.recv().await {
            Ok(Some(b)) => {
                if mode == ECHO {
                    if ch.send(b).await.is_err() {
                        return;
                    }
                } else {
                    hash.update(&b);
                    len += b.len() as u64;
                }
            }
            Ok(None) => break,
            Err(e) => {
                let _ = ch.send(Bytes::from(format!("CUT {e}"))).await;
                let _ = ch.close().await;
                return;
            }
        }
    }
    if mode == SINK {
        let mut answer = len.to_be_bytes().to_vec();
        answer.extend_from_slice(&hash.finalize());
        let _ = ch.send(Bytes::from(answer)).await;
    }
    let _ = ch.close().await;
}

/// Breaks single connections of the network under test.
trait Chaos: Send + Sync {
    /// Ports (the client's side) of connections to the server carried lately.
    fn live(&self) -> Vec<u16>;
    fn impair(&self, port: u16, what: Impairment);
    fn clear(&self);
}

impl Chaos for (Impairments, u16) {
    fn live(&self) -> Vec<u16> {
        let (imp, server) = self;
        imp.connections(Duration::from_millis(300))
            .into_iter()
            .filter(|c| c.has(*server))
            .map(|c| if c.a == *server { c.b } else { c.a })
            .collect()
    }
    fn impair(&self, port: u16, what: Impairment) {
        self.0.set(port, what);
    }
    fn clear(&self) {
        self.0.clear_all();
    }
}

/// What a proxied connection should suffer, and the bell that tells its pump to look.
type Control = (Mutex<Option<Impairment>>, tokio::sync::Notify);

/// A TCP proxy on loopback whose connections can be reset, silenced or slowed one by one.
#[derive(Clone, Default)]
struct Proxy {
    conns: Arc<Mutex<HashMap<u16, Arc<Control>>>>,
}

impl Proxy {
    async fn start(to: SocketAddr) -> (SocketAddr, Self) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let proxy = Self::default();
        let control = proxy.clone();
        tokio::spawn(async move {
            while let Ok((a, peer)) = listener.accept().await {
                let Ok(b) = TcpStream::connect(to).await else { continue };
                let state = Arc::new((Mutex::new(None), tokio::sync::Notify::new()));
                control.conns.lock().unwrap().insert(peer.port(), Arc::clone(&state));
                let conns = Arc::clone(&control.conns);
                tokio::spawn(async move {
                    pump(a, b, &state).await;
                    conns.lock().unwrap().remove(&peer.port());
                });
            }
        });
        (addr, proxy)
    }
}

/// Forwards both ways until either side closes, doing what the connection's state says.
async fn pump(mut a: TcpStream, mut b: TcpStream, state: &Control) {
    let (mut ab, mut ba) = (vec![0u8; 16 << 10], vec![0u8; 16 << 10]);
    loop {
        let what = *state.0.lock().unwrap();
        match what {
            Some(Impairment::Reset) => {
                let _ = a.set_zero_linger();
                let _ = b.set_zero_linger();
                return;
            }
            // Nothing more either way, and no close: the sockets stay open until the round ends.
            Some(Impairment::Silence) => {
                state.1.notified().await;
                continue;
            }
            Some(Impairment::Slow(d)) => tokio::time::sleep(d).await,
            None => {}
        }
        tokio::select! {
            r = a.read(&mut ab) => match r {
                Ok(n) if n > 0 => if b.write_all(&ab[..n]).await.is_err() { return },
                _ => { let _ = b.shutdown().await; return }
            },
            r = b.read(&mut ba) => match r {
                Ok(n) if n > 0 => if a.write_all(&ba[..n]).await.is_err() { return },
                _ => { let _ = a.shutdown().await; return }
            },
            () = state.1.notified() => {}
        }
    }
}

impl Chaos for Proxy {
    fn live(&self) -> Vec<u16> {
        let mut v: Vec<u16> = self.conns.lock().unwrap().keys().copied().collect();
        v.sort_unstable();
        v
    }
    fn impair(&self, port: u16, what: Impairment) {
        if let Some(s) = self.conns.lock().unwrap().get(&port) {
            *s.0.lock().unwrap() = Some(what);
            s.1.notify_one();
        }
    }
    fn clear(&self) {
        for s in self.conns.lock().unwrap().values() {
            // A silenced connection stays silent (the session has dropped it); slowed ones
            // speed up again.
            let mut w = s.0.lock().unwrap();
            if matches!(*w, Some(Impairment::Slow(_))) {
                *w = None;
                s.1.notify_one();
            }
        }
    }
}

/// A channel's bytes, made from the round's generator.
fn payload(rng: &mut ChaCha8Rng, len: usize) -> Bytes {
    let mut v = vec![0u8; len];
    rng.fill_bytes(&mut v);
    Bytes::from(v)
}

/// Writes `data` after the mode byte in pieces of random sizes.
async fn write_all(ch: &Channel, mode: u8, data: Bytes, seed: u64) -> Result<(), MuxError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    ch.send(Bytes::from(vec![mode])).await?;
    let mut at = 0;
    while at < data.len() {
        let n = rng.random_range(1..=200_000).min(data.len() - at);
        ch.send(data.slice(at..at + n)).await?;
        at += n;
    }
    Ok(())
}

/// Reads the channel to its end: everything, or the error that cut it off.
async fn read_all(ch: &mut Channel) -> Result<Vec<u8>, MuxError> {
    let mut all = Vec::new();
    while let Some(b) = ch.recv().await? {
        all.extend_from_slice(&b);
    }
    Ok(all)
}

#[derive(Debug, Default)]
struct Tally {
    rounds: u64,
    failures: Vec<String>,
    impairments: HashMap<&'static str, u64>,
    lost: u64,
    resent: u64,
    bytes: u64,
}

/// One round: a session, a transfer, impairments at random moments. `Err` says what failed.
async fn round(addr: SocketAddr, chaos: Arc<dyn Chaos>, seed: u64, tally: &mut Tally) -> Result<(), String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let scheme = match rng.random_range(0..3) {
        0 => Scheme::Stripe(ConnChoice::LeastQueued),
        1 => Scheme::Stripe(ConnChoice::EarliestDelivery { slack: 0.1 }),
        _ => Scheme::Pin { hysteresis: 0.01 },
    };
    let m = rng.random_range(2..=4);
    let session = Session::connect(addr, config(scheme, m))
        .await
        .map_err(|e| format!("seed {seed}: connect over {m} connections: {e}"))?;
    let echo = rng.random_bool(0.4);
    let events = rng.random_range(1..=3);
    let plan: Vec<(Duration, u8, u32)> = (0..events)
        .map(|_| (Duration::from_millis(rng.random_range(5..150)), rng.random_range(0..3u8), rng.random()))
        .collect();
    let chaos_task = {
        let chaos = Arc::clone(&chaos);
        tokio::spawn(async move {
            let mut done = Vec::new();
            for (after, kind, pick) in plan {
                tokio::time::sleep(after).await;
                let live = chaos.live();
                if live.is_empty() {
                    continue;
                }
                let port = live[pick as usize % live.len()];
                let (name, what) = match kind {
                    0 => ("reset", Impairment::Reset),
                    1 => ("silence", Impairment::Silence),
                    _ => ("slow", Impairment::Slow(Duration::from_millis(20))),
                };
                chaos.impair(port, what);
                done.push(name);
            }
            done
        })
    };
    let transfer = async {
        if echo {
            let ch = session.open(rng.random_range(1.0..4.0), true).await.map_err(|e| e.to_string())?;
            let len = rng.random_range(0..1_500_000);
            let data = payload(&mut rng, len);
            let want: [u8; 32] = Sha256::digest(&data).into();
            let mut sizes = ChaCha8Rng::seed_from_u64(rng.random());
            // Written and read at once: the echo comes back while the rest goes out.
            let (mut r, mut w) = tokio::io::split(ch);
            let writer = async {
                w.write_all(&[ECHO]).await?;
                let mut at = 0;
                while at < data.len() {
                    let n = sizes.random_range(1..=200_000).min(data.len() - at);
                    w.write_all(&data[at..at + n]).await?;
                    at += n;
                }
                w.shutdown().await
            };
            let reader = async {
                let mut back = Vec::new();
                r.read_to_end(&mut back).await.map(|_| back)
            };
            let (wrote, back) = tokio::join!(writer, reader);
            wrote.map_err(|e| format!("echo write: {e}"))?;
            let back = back.map_err(|e| format!("echo read: {e}"))?;
            let got: [u8; 32] = Sha256::digest(&back).into();
            if got != want {
                return Err(format!("echo: {} of {} bytes back, SHA-256 differs", back.len(), data.len()));
            }
            Ok(data.len() as u64)
        } else {
            let k = rng.random_range(2..=5);
            let mut tasks = Vec::new();
            let mut total = 0;
            for i in 0..k {
                let mut ch = session.open(0.8f64.powi(i), true).await.map_err(|e| e.to_string())?;
                let len = rng.random_range(0..1_200_000);
                let data = payload(&mut rng, len);
                total += data.len() as u64;
                let seed = rng.random();
                tasks.push(tokio::spawn(async move {
                    let want: [u8; 32] = Sha256::digest(&data).into();
                    let len = data.len() as u64;
                    write_all(&ch, SINK, data, seed).await.map_err(|e| format!("channel {}: write: {e}", ch.id()))?;
                    ch.close().await.map_err(|e| format!("close: {e}"))?;
                    let answer = read_all(&mut ch).await.map_err(|e| format!("channel {}: answer: {e}", ch.id()))?;
                    if answer.starts_with(b"CUT") {
                        return Err(format!("channel {}: the sink saw {}", ch.id(), String::from_utf8_lossy(&answer)));
                    }
                    let mut expect = len.to_be_bytes().to_vec();
                    expect.extend_from_slice(&want);
                    if answer != expect {
                        return Err(format!(
                            "channel {}: the sink's length and SHA-256 differ from what was sent",
                            ch.id()
                        ));
                    }
                    Ok(())
                }));
            }
            for t in tasks {
                t.await.map_err(|e| e.to_string())??;
            }
            Ok(total)
        }
    };
    let outcome = tokio::time::timeout(Duration::from_secs(90), transfer).await;
    let done = chaos_task.await.unwrap_or_default();
    chaos.clear();
    for name in &done {
        *tally.impairments.entry(name).or_default() += 1;
    }
    if let Ok(report) = session.report().await {
        tally.lost += report.lost;
        tally.resent += report.channels.iter().chain([&report.retired.1]).map(|c| c.sent.resent_frames).sum::<u64>();
    }
    tally.rounds += 1;
    let what = format!(
        "{} over {m} connections, {scheme:?}, impairments {done:?}",
        if echo { "echo" } else { "weighted sink" }
    );
    match outcome {
        Ok(Ok(bytes)) => {
            tally.bytes += bytes;
            Ok(())
        }
        Ok(Err(e)) => Err(format!("seed {seed}: {what}: {e}")),
        Err(_) => Err(format!("seed {seed}: {what}: no end within 90 s")),
    }
}

/// Runs `rounds` rounds from `seed` against `addr`; prints the tally; fails on any failure.
async fn rounds(name: &str, addr: SocketAddr, chaos: Arc<dyn Chaos>, seed: u64, rounds: u64) {
    let started = Instant::now();
    let mut tally = Tally::default();
    for r in 0..rounds {
        if let Err(e) = round(addr, Arc::clone(&chaos), seed.wrapping_add(r), &mut tally).await {
            eprintln!("{name}: FAILED {e}");
            tally.failures.push(e);
        }
    }
    let mut kinds: Vec<_> = tally.impairments.iter().collect();
    kinds.sort();
    eprintln!(
        "{name}: {} rounds from seed {seed} in {:.1} s, {} failures; {:.1} MB checked; impairments {kinds:?}; \
         connections lost {}, frames sent again {}",
        tally.rounds,
        started.elapsed().as_secs_f64(),
        tally.failures.len(),
        tally.bytes as f64 / 1e6,
        tally.lost,
        tally.resent
    );
    assert!(
        tally.failures.is_empty(),
        "{name}: {} of {} rounds failed: {:#?}",
        tally.failures.len(),
        tally.rounds,
        tally.failures
    );
}

fn seed() -> u64 {
    std::env::var("SWITCHYARD_STRESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(18)
}

fn long_rounds() -> u64 {
    std::env::var("SWITCHYARD_STRESS_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(300)
}

async fn on_loopback(n: u64) {
    let listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config(Scheme::Stripe(ConnChoice::LeastQueued), 2))
        .await
        .unwrap();
    let server = listener.local_addr();
    tokio::spawn(serve(listener));
    let (addr, proxy) = Proxy::start(server).await;
    rounds("loopback", addr, Arc::new(proxy), seed(), n).await;
}

fn on_emulator(n: u64) {
    let d = match Dumbbell::new(LinkConfig::default(), LinkConfig { seed: 2, ..LinkConfig::default() }) {
        Ok(d) => d,
        Err(LinkemError::Unavailable(why)) => {
            eprintln!("SKIPPED: the emulated stress needs network namespaces: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let runtime = || tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let addr = SocketAddr::from((Dumbbell::RIGHT, 7200));
    let (ready, bound) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = d.right.spawn(move || {
        runtime().block_on(async move {
            let listener = Listener::bind(addr, config(Scheme::Stripe(ConnChoice::LeastQueued), 2)).await.unwrap();
            ready.send(()).unwrap();
            tokio::select! {
                () = serve(listener) => {}
                _ = stopped => {}
            }
        })
    });
    bound.recv_timeout(Duration::from_secs(10)).expect("the server listens");
    let chaos: Arc<dyn Chaos> = Arc::new((d.impairments().clone(), 7200));
    // Rounds of their own (the loopback's first six silence nothing here).
    let from = seed().wrapping_add(1000);
    let client = d.left.spawn(move || runtime().block_on(rounds("emulated", addr, chaos, from, n)));
    let outcome = client.join();
    let _ = stop.send(());
    let _ = server.join();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    outcome.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_stress_on_loopback() {
    on_loopback(12).await;
}

#[test]
fn short_stress_on_the_emulated_link() {
    on_emulator(6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --ignored (SWITCHYARD_STRESS_ROUNDS rounds)"]
async fn stress_on_loopback() {
    on_loopback(long_rounds()).await;
}

#[test]
#[ignore = "long: run with --ignored (SWITCHYARD_STRESS_ROUNDS rounds)"]
fn stress_on_the_emulated_link() {
    on_emulator(long_rounds());
}
