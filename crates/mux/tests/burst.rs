//! A burst of clients through one tunnel forward, all at once, each fetching a body from a
//! local server: every response must arrive whole, or the client must see an error (a reset);
//! never a clean end with bytes missing. Among them, every fifth client half-closes after its
//! request (`shutdown(SHUT_WR)`, then reads) and every tenth aborts mid-transfer (a reset
//! after the first bytes). Afterwards neither end of the tunnel may hold a channel: finished,
//! half-closed and aborted ones alike are forgotten. The short burst runs in CI; the long one
//! (`cargo test -p switchyard-mux --release --test burst -- --ignored --nocapture`) takes
//! `SWITCHYARD_BURST` clients (10,000 by default) with the server, the far end and the near
//! end each in a process of its own (a process may hold 20,000 descriptors here), and prints
//! why channels were reset (the tunnel's log lines, counted), how the channels left fell after
//! the burst, and each end's peak resident memory.
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
    let (mut reports, trail) = drain(&[("here", near), ("at the far end", far)]).await?;
    eprintln!("channels left here/at the far end after the burst: {trail}");
    let far = reports.pop().expect("two ends");
    Ok((reports.pop().expect("two ends"), far))
}

/// [`forgotten`] for any ends (each named): their last reports, and the counts as they fell.
async fn drain(ends: &[(&str, &Session)]) -> Result<(Vec<SessionReport>, String), String> {
    let began = std::time::Instant::now();
    let (mut last, mut since) = (usize::MAX, began);
    let mut trail: Vec<(f64, Vec<usize>)> = Vec::new();
    loop {
        let mut reports = Vec::new();
        for (name, session) in ends {
            reports.push(answer(session, name).await?);
        }
        let counts: Vec<usize> = reports.iter().map(|r| r.channels.len()).collect();
        let left: usize = counts.iter().sum();
        let at = began.elapsed().as_secs_f64();
        if trail.last().is_none_or(|(t, _)| at - t >= 0.5) || left == 0 {
            trail.push((at, counts.clone()));
        }
        if left == 0 {
            let trail: Vec<String> = trail
                .iter()
                .map(|(t, c)| format!("{t:.1} s: {}", c.iter().map(usize::to_string).collect::<Vec<_>>().join("/")))
                .collect();
            return Ok((reports, trail.join(", ")));
        }
        if left < last {
            (last, since) = (left, std::time::Instant::now());
        }
        if since.elapsed() >= STALL || began.elapsed() >= DRAIN_LIMIT {
            let counts: Vec<String> = ends.iter().zip(&counts).map(|((name, _), n)| format!("{n} {name}")).collect();
            return Err(format!(
                "channels left {at:.1} s after the burst, none forgotten for the last {:.1} s: {}",
                since.elapsed().as_secs_f64(),
                counts.join(", ")
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
    let limit = Duration::from_secs(30);
    let web = Part::spawn("web", &[]);
    let target = web.next(Duration::from_secs(30));
    let started = std::time::Instant::now();
    let straight = run_clients(target.parse().unwrap(), clients, limit).await;
    eprintln!("{clients} clients straight to the server in {:.1} s: {straight:?}", started.elapsed().as_secs_f64());
    let far = Part::spawn("far", &[]);
    let far_addr = far.next(Duration::from_secs(30));
    let near = Part::spawn("near", &[("SWITCHYARD_BURST_FAR", far_addr), ("SWITCHYARD_BURST_TARGET", target.clone())]);
    let local = near.next(Duration::from_secs(30));
    let started = std::time::Instant::now();
    let o = run_clients(local.parse().unwrap(), clients, limit).await;
    eprintln!("{clients} clients through the tunnel in {:.1} s: {o:?}", started.elapsed().as_secs_f64());
    let (near, far) = (near.drained(), far.drained());
    let (near, far) = (near.next(DRAIN_LIMIT + STALL), far.next(DRAIN_LIMIT + STALL));
    eprintln!("near end: {near}\nfar end: {far}");
    assert!(near.starts_with("forgot every channel") && far.starts_with("forgot every channel"), "{near}\n{far}");
    assert_eq!((o.short, o.timed_out), (0, 0), "{o:?}");
    assert_eq!(o.whole + o.refused + o.aborted, clients, "{o:?}");
}

/// A part of the long burst in a process of its own: the server, the far end (`tunnel
/// listen`) or the near end (`tunnel connect` with its forward), as the issue has them. In one
/// process, the clients, the forward's connections, the far end's connections to the server
/// and the server's own came to 40,000 descriptors under a limit of 20,000 a process: the far
/// end's connects waited out their 10 s for one and were reset (3,769 to 5,789 of 10,000 in
/// six runs at load 13-15), and most of the rest timed out.
struct Part {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Part {
    /// Runs this test binary's [`burst_part`] as `role`, with `env`.
    fn spawn(role: &str, env: &[(&str, String)]) -> Self {
        use std::io::BufRead;
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args(["--ignored", "--exact", "burst_part", "--nocapture", "--test-threads=1"])
            .env("SWITCHYARD_BURST_PART", role)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                // Not always at the start of a line: libtest's "test burst_part ... " comes first.
                if let Some((_, said)) = line.split_once("PART ")
                    && tx.send(said.to_owned()).is_err()
                {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// The next line the part says.
    fn next(&self, limit: Duration) -> String {
        tokio::task::block_in_place(|| self.lines.recv_timeout(limit)).expect("the part answers")
    }

    /// Tells the part the clients are done: it waits for its session to forget every channel,
    /// then says how that went.
    fn drained(mut self) -> Self {
        use std::io::Write;
        let _ = self.child.stdin.as_mut().unwrap().write_all(b"drain\n");
        self
    }
}

impl Drop for Part {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The process's peak resident memory, in MiB.
fn peak_resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    kb / 1024.0
}

/// One part of [`a_burst_of_ten_thousand_clients_loses_nothing`] (see [`Part`]); does nothing
/// unless `SWITCHYARD_BURST_PART` names one. Says its address, then waits for the word that
/// the clients are done.
#[ignore = "a part of the long burst, which runs it in a process of its own"]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn burst_part() {
    let Ok(role) = std::env::var("SWITCHYARD_BURST_PART") else { return };
    let var = |k: &str| std::env::var(k).unwrap();
    let config = MuxConfig { key: b"burst".to_vec(), ..MuxConfig::default() };
    let log = Tally::default();
    let session = match role.as_str() {
        "web" => {
            println!("PART {}", web::web_server(body()).await);
            None
        }
        "far" => {
            let mut listener = Listener::bind("127.0.0.1:0".parse().unwrap(), config).await.unwrap();
            println!("PART {}", listener.local_addr());
            let session = listener.accept().await.unwrap();
            tokio::spawn(tunnel::serve(session.clone(), Vec::new(), tally(&log)));
            Some(session)
        }
        "near" => {
            let session = Session::connect(var("SWITCHYARD_BURST_FAR").parse().unwrap(), config).await.unwrap();
            let forward =
                Forward { local: "127.0.0.1:0".parse().unwrap(), target: var("SWITCHYARD_BURST_TARGET"), weight: 1.0 };
            let listener = tunnel::bind(&forward).unwrap();
            println!("PART {}", listener.local_addr().unwrap());
            tokio::spawn(tunnel::forward_on(listener, session.clone(), forward, tally(&log)));
            Some(session)
        }
        other => panic!("no part {other}"),
    };
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new())).await;
    let Some(session) = session else { return };
    print_tally(&format!("{role} end"), &log);
    let peak = peak_resident_mib();
    match drain(&[(role.as_str(), &session)]).await {
        Ok((reports, trail)) => println!(
            "PART forgot every channel ({} in all, {} reset), channels left: {trail}; peak resident {peak:.0} MiB",
            reports[0].retired.0, reports[0].reset
        ),
        Err(e) => println!("PART {e}"),
    }
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
