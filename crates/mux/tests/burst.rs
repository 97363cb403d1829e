//! A burst of clients through one tunnel forward, all at once, each fetching a body from a
//! local server: every response must arrive whole, or the client must see an error (a reset);
//! never a clean end with bytes missing. Among them, every fifth client half-closes after its
//! request (`shutdown(SHUT_WR)`, then reads) and every tenth aborts mid-transfer (a reset
//! after the first bytes). Afterwards neither end of the tunnel may hold a channel: finished,
//! half-closed and aborted ones alike are forgotten. The short burst runs in CI; the long one
//! (`cargo test -p switchyard-mux --release --test burst -- --ignored --nocapture`) takes
//! `SWITCHYARD_BURST` clients (10,000 by default), and prints why channels were reset (the
//! tunnel's log lines, counted) and how the channels left fell after the burst.
//!
//! Also here, in CI: half-closes under a full command queue, counted.

mod web;

use std::net::SocketAddr;
use std::time::Duration;

use switchyard_mux::tunnel::{self, Forward};
use switchyard_mux::{Listener, MuxConfig, Session, SessionReport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY: usize = 100_000;

fn body() -> Vec<u8> {
    (0..BODY).map(|i| (i * 31 % 251) as u8).collect()
}

#[derive(Debug, Default)]
struct Outcome {
    whole: usize,
    /// A clean end with part of the body: data loss.
    short: usize,
    /// An error the client saw (reset): a visible refusal.
    refused: usize,
    timed_out: usize,
    /// Clients that aborted as planned, after the first bytes.
    aborted: usize,
    /// The longest a client took.
    slowest: Duration,
}

/// How a client behaves.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Sends its request and reads to the end.
    Plain,
    /// Shuts its sending side after the request, then reads to the end.
    HalfClose,
    /// Resets its connection once the first bytes of the answer arrive.
    Abort,
}

fn kind(i: usize) -> Kind {
    match i % 10 {
        0 => Kind::Abort,
        5 => Kind::HalfClose,
        _ => Kind::Plain,
    }
}

async fn client(addr: SocketAddr, kind: Kind, limit: Duration) -> Result<Vec<u8>, &'static str> {
    let go = async {
        let mut tcp = TcpStream::connect(addr).await.map_err(|_| "refused")?;
        tcp.write_all(b"GET /body HTTP/1.0\r\n\r\n").await.map_err(|_| "refused")?;
        if kind == Kind::HalfClose {
            tcp.shutdown().await.map_err(|_| "refused")?;
        }
        let mut got = Vec::new();
        if kind == Kind::Abort {
            let mut first = [0u8; 1000];
            tcp.read_exact(&mut first).await.map_err(|_| "refused")?;
            tcp.set_zero_linger().map_err(|_| "refused")?;
            return Err("aborted");
        }
        tcp.read_to_end(&mut got).await.map_err(|_| "refused")?;
        Ok(got)
    };
    tokio::time::timeout(limit, go).await.map_err(|_| "timed out")?
}

/// The same burst straight to the server: the baseline under the same limit.
async fn direct(clients: usize, limit: Duration) -> Outcome {
    let target = web::web_server(body()).await;
    run_clients(target, clients, limit).await
}

/// The burst through a tunnel; then waits until both ends have forgotten every channel, and
/// fails if they stop forgetting them ([`forgotten`]).
async fn burst(clients: usize, limit: Duration) -> Outcome {
    let target = web::web_server(body()).await;
    let config = MuxConfig { key: b"burst".to_vec(), ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let far = listener.local_addr();
    let (near_log, far_log) = (Tally::default(), Tally::default());
    let far_tally = tally(&far_log);
    let (far_session, far_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let _ = far_session.send(session.clone());
        tunnel::serve(session, Vec::new(), far_tally).await;
    });
    let session = Session::connect(far, config).await.unwrap();
    let forward = Forward { local: "127.0.0.1:0".parse().unwrap(), target: target.to_string(), weight: 1.0 };
    let listener = tunnel::bind(&forward).unwrap();
    let local = listener.local_addr().unwrap();
    tokio::spawn(tunnel::forward_on(listener, session.clone(), forward, tally(&near_log)));
    let outcome = run_clients(local, clients, limit).await;
    print_tally("near end", &near_log);
    print_tally("far end", &far_log);
    let far_session = far_rx.await.unwrap();
    let (near, far) = forgotten(&session, &far_session).await.unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "channels forgotten: {} here, {} at the far end; reset: {} here, {} there",
        near.retired.0, far.retired.0, near.reset, far.reset
    );
    outcome
}

/// Lines a tunnel logged, counted by what they say (digits masked, so addresses and counts
/// fold together): why channels were reset, at a glance.
type Tally = std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>;

fn tally(into: &Tally) -> tunnel::Log {
    let into = std::sync::Arc::clone(into);
    std::sync::Arc::new(move |line: String| {
        let line: String = line.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
        *into.lock().unwrap().entry(line).or_default() += 1;
    })
}

fn print_tally(end: &str, tally: &Tally) {
    for (line, n) in tally.lock().unwrap().iter() {
        eprintln!("{end} logged {n} × {line}");
    }
}

/// How long the channels left may go without one of them forgotten before the wait counts as
/// a hang; and the longest the wait may take in all.
const STALL: Duration = Duration::from_secs(10);
const DRAIN_LIMIT: Duration = Duration::from_secs(120);

/// Waits until both ends of a session have forgotten every channel, and says how the count
/// fell. A loaded machine drains slowly, and the near end last: the far end forgets a channel
/// once the near end has every byte of it, the near end only once its client's task has taken
/// them and written them to a client that has gone. After 10,000 clients at load 13 with three
/// busy loops beside, the counts here/there went 4,453/4,193 at 2.3 s, 4,095/385 at 5.4 s,
/// 296/0 at 6.6 s, 0/0 at 6.7 s; in another run 4,805/2,434 at 5.9 s, 2,277/0 at 8.8 s, 0/0 at
/// 9.0 s. The fixed 10 s wait this replaces failed once at load 16 with "546 here, 0 at the
/// far end": the same shape, a drain, not a channel kept. What fails now is a stall (no
/// channel forgotten for [`STALL`]: a channel kept for good stops the count), or
/// [`DRAIN_LIMIT`] in all.
async fn forgotten(near: &Session, far: &Session) -> Result<(SessionReport, SessionReport), String> {
    let began = std::time::Instant::now();
    let (mut last, mut since) = (usize::MAX, began);
    let mut trail: Vec<(f64, usize, usize)> = Vec::new();
    loop {
        let (n, f) = (answer(near, "near").await?, answer(far, "far").await?);
        let left = n.channels.len() + f.channels.len();
        let at = began.elapsed().as_secs_f64();
        if trail.last().is_none_or(|&(t, ..)| at - t >= 0.5) || left == 0 {
            trail.push((at, n.channels.len(), f.channels.len()));
        }
        if left == 0 {
            let trail: Vec<String> = trail.iter().map(|(t, n, f)| format!("{t:.1} s: {n}/{f}")).collect();
            eprintln!("channels left here/at the far end after the burst: {}", trail.join(", "));
            return Ok((n, f));
        }
        if left < last {
            (last, since) = (left, std::time::Instant::now());
        }
        if since.elapsed() >= STALL || began.elapsed() >= DRAIN_LIMIT {
            return Err(format!(
                "channels left {at:.1} s after the burst, none forgotten for the last {:.1} s: {} here, {} at the \
                 far end",
                since.elapsed().as_secs_f64(),
                n.channels.len(),
                f.channels.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A session's report, or an error if its driver does not answer within [`STALL`] (a driver
/// that stops taking commands is a hang too; once, a burst test sat for minutes after its
/// clients had finished, both drivers ticking, and nothing said where).
async fn answer(session: &Session, end: &str) -> Result<SessionReport, String> {
    match tokio::time::timeout(STALL, session.report()).await {
        Ok(report) => report.map_err(|e| format!("the {end} end's session: {e}")),
        Err(_) => Err(format!("the {end} end's driver did not answer a report within {STALL:?}")),
    }
}

async fn run_clients(local: SocketAddr, clients: usize, limit: Duration) -> Outcome {
    let want = body();
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            tokio::spawn(async move {
                let began = std::time::Instant::now();
                let result = client(local, kind(i), limit).await;
                (began.elapsed(), result)
            })
        })
        .collect();
    let mut outcome = Outcome::default();
    for t in tasks {
        let (took, result) = t.await.unwrap();
        outcome.slowest = outcome.slowest.max(took);
        match result {
            Ok(got) if got == want => outcome.whole += 1,
            Ok(_) => outcome.short += 1,
            Err("timed out") => outcome.timed_out += 1,
            Err("aborted") => outcome.aborted += 1,
            Err(_) => outcome.refused += 1,
        }
    }
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_a_thousand_clients_loses_nothing() {
    let o = burst(1000, Duration::from_secs(30)).await;
    eprintln!("{o:?}");
    assert_eq!((o.short, o.timed_out, o.refused), (0, 0, 0), "{o:?}");
    assert_eq!((o.whole, o.aborted), (900, 100), "{o:?}");
}

#[ignore = "long: ten thousand clients at once"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_ten_thousand_clients_loses_nothing() {
    let clients = std::env::var("SWITCHYARD_BURST").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let started = std::time::Instant::now();
    let straight = direct(clients, Duration::from_secs(30)).await;
    eprintln!("{clients} clients straight to the server in {:.1} s: {straight:?}", started.elapsed().as_secs_f64());
    let started = std::time::Instant::now();
    let o = burst(clients, Duration::from_secs(30)).await;
    eprintln!("{clients} clients through the tunnel in {:.1} s: {o:?}", started.elapsed().as_secs_f64());
    assert_eq!((o.short, o.timed_out), (0, 0), "{o:?}");
    assert_eq!(o.whole + o.refused + o.aborted, clients, "{o:?}");
}

/// Half-closes under a full command queue: many channels send a request, `shutdown` their
/// sending side, then read; the far end answers only once it has read a channel to its end.
/// The channels' closes are released together, so most find the session's 64-slot command
/// queue full (counted: `closes_waited`); each must wait for room, never be dropped (a dropped
/// close left its far end waiting for an end that never came, and the answer never came).
/// Every channel gets its whole answer and ends, and both ends forget every channel.
///
/// On one thread, so that the queue is full every run: the closes released together all run
/// before the driver's next turn. (On two, the driver drained the queue beside them in half
/// of eight runs at load 13.)
#[tokio::test(flavor = "current_thread")]
async fn half_closes_under_a_full_command_queue_all_get_their_answers() {
    const CHANNELS: usize = 400;
    let answer = |request: &[u8]| -> Vec<u8> { request.iter().cycle().take(20_000).copied().collect() };
    let config = MuxConfig { key: b"half".to_vec(), ..MuxConfig::default() };
    let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config.clone()).await.unwrap();
    let far = listener.local_addr();
    let (far_session, far_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let session = listener.accept().await.unwrap();
        let _ = far_session.send(session.clone());
        while let Some(mut ch) = session.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                ch.read_to_end(&mut request).await.unwrap();
                ch.write_all(&answer(&request)).await.unwrap();
                ch.shutdown().await.unwrap();
            });
        }
    });
    let session = Session::connect(far, config).await.unwrap();
    let mut channels = Vec::new();
    for _ in 0..CHANNELS {
        channels.push(session.open(1.0, true).await.unwrap());
    }
    let go = std::sync::Arc::new(tokio::sync::Barrier::new(CHANNELS));
    let tasks: Vec<_> = channels
        .into_iter()
        .enumerate()
        .map(|(k, mut ch)| {
            let go = std::sync::Arc::clone(&go);
            tokio::spawn(async move {
                let request = format!("request {k}: ").into_bytes();
                ch.write_all(&request).await.unwrap();
                ch.flush().await.unwrap();
                go.wait().await;
                ch.shutdown().await.unwrap();
                let mut got = Vec::new();
                ch.read_to_end(&mut got).await.unwrap();
                got == answer(&request)
            })
        })
        .collect();
    let whole = tokio::time::timeout(Duration::from_secs(60), async {
        let mut whole = 0;
        for t in tasks {
            whole += usize::from(t.await.unwrap());
        }
        whole
    })
    .await
    .expect("every half-closed channel gets its answer and ends within 60 s");
    let near = session.report().await.unwrap();
    eprintln!("closes that waited for room in the command queue: {}", near.closes_waited);
    assert_eq!(whole, CHANNELS);
    assert!(near.closes_waited > 0, "the command queue was never full when a channel closed");
    let far_session = far_rx.await.unwrap();
    forgotten(&session, &far_session).await.unwrap();
}
