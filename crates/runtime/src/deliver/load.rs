//! The clients: real sockets that open connections to a delivery server (or any server that
//! streams bytes after a request, such as nginx) and count what each one receives — or, with
//! [`LoadConfig::upload`], send as fast as they can to a `sink` and count what each one sent
//! (iperf's client: one `write` of the message size at a time).
//!
//! Client threads only read and count into one atomic per connection; [`Windows`] samples those
//! counters at window boundaries and divides by the window's measured length, so a sampler that
//! wakes late does not look like a stream that ran fast.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};
use switchyard_core::measure::{DepartureLine, Deviation};
use switchyard_core::time::Nanos;

use super::request::{Answer, Request};

/// TCP or UDP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// One TCP connection per client.
    #[default]
    Tcp,
    /// One UDP socket per client.
    Udp,
}

/// How a client opens its connection.
#[derive(Clone, Debug, PartialEq)]
pub enum Handshake {
    /// Send a request line and read the server's answer line.
    Switchyard(Request),
    /// Send these bytes and count everything that comes back (an HTTP GET to nginx, say).
    Raw(Vec<u8>),
}

/// The clients' settings.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// The server.
    pub server: SocketAddr,
    /// TCP or UDP.
    pub transport: Transport,
    /// How many connections.
    pub conns: usize,
    /// What each one asks for.
    pub handshake: Handshake,
    /// Client threads reading (1 or 2 leaves the server its cores).
    pub threads: usize,
    /// SO_RCVBUF per socket, if set (UDP clients lose datagrams with a small one).
    pub recv_buffer: Option<usize>,
    /// Send instead of receive, in writes of this many bytes (TCP, after a `sink` request):
    /// [`Load::counts`] then counts bytes the kernel accepted.
    pub upload: Option<usize>,
    /// Pin client thread `t` to core `t mod cores`, so the core that sends each connection's
    /// packets (and, on loopback or a veth without RPS, processes their receipt) is known.
    pub pin: bool,
    /// Bytes per second each connection is promised, for its departure line
    /// ([`Load::departures`]): what a server told to hold a rate (nginx's `limit_rate`) should
    /// send. `None` takes a stream request's rate, and follows no line for anything else.
    pub promised: Option<f64>,
}

impl LoadConfig {
    /// The rate each connection's departure line follows, if any.
    fn line_rate(&self) -> Option<f64> {
        let asked = match &self.handshake {
            Handshake::Switchyard(r) => r.bytes_per_sec(),
            Handshake::Raw(_) => None,
        };
        self.promised.or(asked).filter(|r| *r > 0.0 && r.is_finite() && self.upload.is_none())
    }
}

/// What became of one connection's opening.
#[derive(Clone, Debug, PartialEq)]
pub enum Opened {
    /// Accepted (on this worker, if the server said).
    Accepted(Option<u32>),
    /// Refused by the server, with its reason.
    Refused(String),
    /// It could not connect or the server did not answer.
    Failed(String),
}

/// Why a connection ended while the load ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The server closed it (TCP: the end of the stream).
    Closed,
    /// The server's host answered ICMP port unreachable (UDP): the server's socket for the
    /// stream is gone — it closed the stream, or the server stopped.
    Unreachable,
    /// The socket failed (a reset, say), with the error.
    Error(String),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => f.write_str("closed by the server"),
            Self::Unreachable => {
                f.write_str("the server's port is unreachable (ICMP): its socket for the stream is gone")
            }
            Self::Error(e) => write!(f, "failed: {e}"),
        }
    }
}

impl Ended {
    fn of(e: &io::Error) -> Self {
        if e.kind() == io::ErrorKind::ConnectionRefused { Self::Unreachable } else { Self::Error(e.to_string()) }
    }
}

/// What became of one connection by the end of a run, as a [`Windows::summary`] counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fate {
    /// It never started (refused, or it failed to open): left out of the figures.
    NotStarted,
    /// It ran to the end.
    Ran,
    /// It started and ended before the run did: counted with what it got, and flagged.
    Ended(Ended),
}

struct Shared {
    counts: Vec<AtomicU64>,
    opened: Mutex<Vec<Option<Opened>>>,
    /// Why a connection ended before the load stopped (the first reason seen).
    ended: Mutex<Vec<Option<Ended>>>,
    stop: AtomicBool,
    /// Raised to ask every UDP stream at once whether it is still there ([`Load::probe`]).
    probe: AtomicU64,
    /// Per client thread, the last probe it has sent.
    probed: Vec<AtomicU64>,
    /// Each connection's departure line, if they are promised a rate (each is touched by its
    /// own client thread only, so the locks are not contended).
    lines: Vec<Mutex<DepartureLine>>,
    /// Time zero of the lines.
    epoch: Instant,
    /// Each open connection's local address (the wire's key for its stream).
    locals: Mutex<Vec<Option<SocketAddr>>>,
}

impl Shared {
    fn since_epoch(&self) -> Nanos {
        Nanos(self.epoch.elapsed().as_nanos() as u64)
    }
}

impl Shared {
    /// Records that connection `i` ended, unless the load is stopping (its own closing is no
    /// ending) or it ended already (the first reason is the one kept).
    fn end(&self, i: usize, why: Ended) {
        if !self.stop.load(Ordering::Relaxed) {
            self.ended.lock().expect("ended lock")[i].get_or_insert(why);
        }
    }
}

/// Running clients. Dropping them closes every connection.
pub struct Load {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    udp: bool,
}

/// How long [`Load::probe`] waits for the answers to its keepalives: an ICMP error comes back
/// within a round trip.
const PROBE_GRACE: Duration = Duration::from_millis(200);

impl Load {
    /// Opens every connection (spread over the client threads) and returns once each has been
    /// accepted, refused or has failed; from then on the threads count bytes.
    pub fn start(cfg: LoadConfig) -> io::Result<Self> {
        if cfg.conns == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "at least one connection"));
        }
        let shared = Arc::new(Shared {
            counts: (0..cfg.conns).map(|_| AtomicU64::new(0)).collect(),
            opened: Mutex::new(vec![None; cfg.conns]),
            ended: Mutex::new(vec![None; cfg.conns]),
            stop: AtomicBool::new(false),
            probe: AtomicU64::new(0),
            probed: (0..cfg.threads.clamp(1, cfg.conns)).map(|_| AtomicU64::new(0)).collect(),
            lines: cfg
                .line_rate()
                .map(|r| (0..cfg.conns).map(|_| Mutex::new(DepartureLine::new(r))).collect())
                .unwrap_or_default(),
            epoch: Instant::now(),
            locals: Mutex::new(vec![None; cfg.conns]),
        });
        if cfg.upload == Some(0) || (cfg.upload.is_some() && cfg.transport == Transport::Udp) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an upload is over TCP, in writes of at least 1 byte",
            ));
        }
        let threads = cfg.threads.clamp(1, cfg.conns);
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let mut handles = Vec::new();
        for t in 0..threads {
            let mine: Vec<usize> = (t..cfg.conns).step_by(threads).collect();
            let (s, c, ready) = (Arc::clone(&shared), cfg.clone(), ready_tx.clone());
            let body = move || client_thread(&s, &c, t, &mine, &ready);
            let pin = cfg.pin;
            handles.push(std::thread::Builder::new().name(format!("load-{t}")).spawn(move || {
                if pin {
                    crate::affinity::on_core(t % cores, body);
                } else {
                    body();
                }
            })?);
        }
        drop(ready_tx);
        for _ in 0..threads {
            let _ = ready_rx.recv();
        }
        Ok(Self { shared, threads: handles, udp: cfg.transport == Transport::Udp })
    }

    /// Bytes received so far by each connection.
    pub fn counts(&self) -> Vec<u64> {
        self.shared.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// How far each connection strayed from its departure line so far, as this client saw its
    /// bytes arrive (`None` where nothing came or no rate was promised). The client's view: a
    /// client thread late to read shows as lag the wire did not have.
    pub fn departures(&self) -> Vec<Option<Deviation>> {
        let now = self.shared.since_epoch();
        self.shared.lines.iter().map(|l| l.lock().expect("line lock").deviation(now)).collect()
    }

    /// Each connection's local address, where it opened: how the wire's view
    /// ([`super::Wire`]) finds its stream.
    pub fn local_addrs(&self) -> Vec<Option<SocketAddr>> {
        self.shared.locals.lock().expect("locals lock").clone()
    }

    /// How each connection's opening went.
    pub fn opened(&self) -> Vec<Opened> {
        let o = self.shared.opened.lock().expect("opened lock");
        o.iter().map(|x| x.clone().unwrap_or(Opened::Failed("never tried".into()))).collect()
    }

    /// For each connection, why it ended while the load ran, if it did: the server closed it,
    /// its port became unreachable (UDP) or the socket failed. Such a connection counts nothing
    /// from then on, which a summary must not pass off as a slow connection.
    pub fn ended(&self) -> Vec<Option<Ended>> {
        self.shared.ended.lock().expect("ended lock").clone()
    }

    /// Every connection's fate so far: not started, running, or ended (and why), for
    /// [`Windows::summary`].
    pub fn fates(&self) -> Vec<Fate> {
        self.opened()
            .into_iter()
            .zip(self.ended())
            .map(|(o, e)| match (o, e) {
                (Opened::Accepted(_), Some(why)) => Fate::Ended(why),
                (Opened::Accepted(_), None) => Fate::Ran,
                _ => Fate::NotStarted,
            })
            .collect()
    }

    /// Asks every UDP stream at once whether the server is still there (a keepalive each) and
    /// waits for the answers, so that a stream whose server socket closed since the last
    /// keepalive (they go once a second) is reported in [`Load::ended`]. Over TCP a closed
    /// connection is seen at once, and this returns at once.
    pub fn probe(&self) {
        if !self.udp || self.shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let asked = self.shared.probe.fetch_add(1, Ordering::Relaxed) + 1;
        let deadline = Instant::now() + Duration::from_secs(1);
        let sent = || self.shared.probed.iter().all(|p| p.load(Ordering::Relaxed) >= asked);
        while !sent() && Instant::now() < deadline && self.threads.iter().any(|t| !t.is_finished()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(PROBE_GRACE);
    }

    /// Measures for `windows` windows of `window` each, after `warmup`: every connection's
    /// bytes per window, sampled on the window's schedule (a late sample shortens the next
    /// window rather than shifting every later one). `each` is called after every window with
    /// its number (from 0) and the record so far, for live displays. At the end, UDP streams
    /// are [probed](Self::probe), so that [`Load::ended`] covers the whole run.
    pub fn measure(
        &self,
        warmup: Duration,
        window: Duration,
        windows: usize,
        mut each: impl FnMut(usize, &Windows),
    ) -> Windows {
        std::thread::sleep(warmup);
        let mut w = Windows::new(self.counts());
        let mut next = Instant::now() + window;
        for k in 0..windows {
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
            next += window;
            w.tick(self.counts());
            each(k, &w);
        }
        self.probe();
        w
    }

    /// Closes every connection and waits for the threads.
    pub fn stop(mut self) {
        self.halt();
    }

    /// Closes every connection, waits for the threads and returns each connection's final count
    /// (for an upload, every byte the kernel accepted: what the server must end up counting).
    pub fn finish(mut self) -> Vec<u64> {
        self.halt();
        self.counts()
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.halt();
    }
}

enum Sock {
    Tcp(mio::net::TcpStream),
    /// Connected to the server's socket for the stream, so that an ICMP error about it comes
    /// back as an error on the socket (Linux reports none on an unconnected one).
    Udp(mio::net::UdpSocket),
}

fn open_tcp(cfg: &LoadConfig) -> Result<(Sock, Opened), String> {
    let mut s = TcpStream::connect_timeout(&cfg.server, Duration::from_secs(5)).map_err(|e| format!("connect: {e}"))?;
    if let Some(b) = cfg.recv_buffer {
        let _ = socket2::SockRef::from(&s).set_recv_buffer_size(b);
    }
    let opened = match &cfg.handshake {
        Handshake::Raw(bytes) => {
            s.write_all(bytes).map_err(|e| format!("send: {e}"))?;
            Opened::Accepted(None)
        }
        Handshake::Switchyard(req) => {
            s.write_all(req.line().as_bytes()).map_err(|e| format!("send: {e}"))?;
            s.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
            // Byte by byte, so no data after the answer is swallowed by a buffer.
            let mut line = Vec::new();
            BufReader::with_capacity(1, (&s).take(512))
                .read_until(b'\n', &mut line)
                .map_err(|e| format!("no answer: {e}"))?;
            // An answer cut short by the end of the stream is no answer (`ok w1` of `ok w12`).
            let whole = line.ends_with(b"\n").then(|| Answer::parse(&line)).flatten();
            match whole {
                Some(Answer::Ok { worker }) => Opened::Accepted(Some(worker)),
                Some(Answer::Refused(why)) => {
                    return Ok((Sock::Tcp(mio::net::TcpStream::from_std(s)), Opened::Refused(why)));
                }
                None => return Err(format!("not a delivery server's answer: {:?}", String::from_utf8_lossy(&line))),
            }
        }
    };
    s.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok((Sock::Tcp(mio::net::TcpStream::from_std(s)), opened))
}

fn open_udp(cfg: &LoadConfig) -> Result<(Sock, Opened), String> {
    let local: SocketAddr = if cfg.server.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { ([0u16; 8], 0).into() };
    let s = UdpSocket::bind(local).map_err(|e| format!("bind: {e}"))?;
    if let Some(b) = cfg.recv_buffer {
        let _ = socket2::SockRef::from(&s).set_recv_buffer_size(b);
    }
    let hello = match &cfg.handshake {
        Handshake::Raw(b) => b.clone(),
        Handshake::Switchyard(r) => r.line().into_bytes(),
    };
    s.set_read_timeout(Some(Duration::from_millis(500))).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 65_536];
    for _ in 0..6 {
        s.send_to(&hello, cfg.server).map_err(|e| format!("send: {e}"))?;
        let Ok((n, from)) = s.recv_from(&mut buf) else { continue };
        let opened = match Answer::parse(&buf[..n]) {
            Some(Answer::Ok { worker }) => Opened::Accepted(Some(worker)),
            Some(Answer::Refused(why)) => Opened::Refused(why),
            None => Opened::Accepted(None), // the answer was lost and data came first
        };
        s.connect(from).map_err(|e| format!("connect to {from}: {e}"))?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        return Ok((Sock::Udp(mio::net::UdpSocket::from_std(s)), opened));
    }
    Err("no answer to 6 requests over 3 s".into())
}

/// Opens connection `i`, records how its opening went and, if it was accepted, anchors its
/// departure line at the moment it was (the server's answer, or the request sent when there is
/// none) and returns the socket.
fn open_one(shared: &Shared, cfg: &LoadConfig, i: usize) -> Option<Sock> {
    let r = match cfg.transport {
        Transport::Tcp => open_tcp(cfg),
        Transport::Udp => open_udp(cfg),
    };
    let (sock, outcome) = match r {
        Ok((sock, opened)) => (matches!(opened, Opened::Accepted(_)).then_some(sock), opened),
        Err(why) => (None, Opened::Failed(why)),
    };
    if sock.is_some()
        && let Some(line) = shared.lines.get(i)
    {
        line.lock().expect("line lock").start(shared.since_epoch());
    }
    let local = match &sock {
        Some(Sock::Tcp(t)) => t.local_addr().ok(),
        Some(Sock::Udp(u)) => u.local_addr().ok(),
        None => None,
    };
    shared.locals.lock().expect("locals lock")[i] = local;
    shared.opened.lock().expect("opened lock")[i] = Some(outcome);
    sock
}

/// The poller's token for the opener's "a new connection is open".
const OPENED: Token = Token(usize::MAX);

fn client_thread(
    shared: &Shared,
    cfg: &LoadConfig,
    thread: usize,
    mine: &[usize],
    ready: &std::sync::mpsc::Sender<()>,
) {
    let poll = match Poll::new() {
        Ok(p) => p,
        Err(e) => {
            let mut opened = shared.opened.lock().expect("opened lock");
            for &i in mine {
                opened[i] = Some(Opened::Failed(format!("no poller for the client thread: {e}")));
            }
            drop(opened);
            let _ = ready.send(());
            return;
        }
    };
    if let Some(message) = cfg.upload {
        let mut socks: Vec<(usize, Sock)> =
            mine.iter().filter_map(|&i| open_one(shared, cfg, i).map(|s| (i, s))).collect();
        let _ = ready.send(());
        return upload_thread(shared, poll, &mut socks, message);
    }
    // Streams are read from the moment each is open, while the rest are being opened: a client
    // that opened all of its 10,000 streams before reading any found a second of each early
    // stream's bytes waiting, and measured the server's pacing by its own delay.
    let waker = Waker::new(poll.registry(), OPENED).ok();
    let (opened_tx, opened_rx) = std::sync::mpsc::channel::<(usize, Sock)>();
    let (tx, waker) = (&opened_tx, waker.as_ref());
    let open_all = move || {
        for &i in mine {
            if let Some(sock) = open_one(shared, cfg, i) {
                let _ = tx.send((i, sock));
                if let Some(w) = waker {
                    let _ = w.wake();
                }
            }
        }
        let _ = ready.send(());
    };
    std::thread::scope(|scope| {
        // Without a thread (or a waker) to open them beside the reading, they are opened first.
        let apart = waker.is_some()
            && std::thread::Builder::new().name(format!("load-{thread}-open")).spawn_scoped(scope, open_all).is_ok();
        if !apart {
            open_all();
        }
        receive(shared, cfg, thread, poll, &opened_rx);
    });
}

/// Reads every connection the opener hands over, round-robin, until the load stops.
fn receive(
    shared: &Shared,
    cfg: &LoadConfig,
    thread: usize,
    mut poll: Poll,
    opened: &std::sync::mpsc::Receiver<(usize, Sock)>,
) {
    let mut socks: Vec<(usize, Sock)> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; 64 * 1024];
    // Sockets with data left, served round-robin a read at a time: draining one socket to empty
    // while a fast server keeps refilling it would starve the others.
    let mut ready: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let mut queued: Vec<bool> = Vec::new();
    let mut alive_at = Instant::now();
    let mut probed = 0;
    // Streams that ended: no more keepalives to them (the first reason is kept).
    let mut gone: Vec<bool> = Vec::new();
    while !shared.stop.load(Ordering::Relaxed) {
        // Newly opened: read at once (bytes may have come before it was registered).
        while let Ok((i, mut sock)) = opened.try_recv() {
            let k = socks.len();
            let src: &mut dyn mio::event::Source = match &mut sock {
                Sock::Tcp(t) => t,
                Sock::Udp(u) => u,
            };
            let _ = poll.registry().register(src, Token(k), Interest::READABLE);
            socks.push((i, sock));
            queued.push(true);
            gone.push(false);
            ready.push_back(k);
        }
        // UDP clients say they are still there once a second (the server drops a stream it has
        // not heard from in ten), and when asked to probe. An ICMP port unreachable in answer
        // ends the stream: the error comes back on this send or on the next receive.
        let probe = shared.probe.load(Ordering::Relaxed);
        if matches!(cfg.handshake, Handshake::Switchyard(_))
            && (alive_at.elapsed() >= Duration::from_secs(1) || probe != probed)
        {
            alive_at = Instant::now();
            for (k, (i, s)) in socks.iter().enumerate() {
                // A keepalive the kernel would not take (no buffer, no route for now) is lost as
                // on a wire, and the next one tries again; only the server's port unreachable
                // ends the stream here.
                if let Sock::Udp(u) = s
                    && !gone[k]
                    && let Err(e) = u.send(b"alive")
                    && e.kind() == io::ErrorKind::ConnectionRefused
                {
                    gone[k] = true;
                    shared.end(*i, Ended::Unreachable);
                }
            }
        }
        if probe != probed {
            probed = probe;
            shared.probed[thread].store(probe, Ordering::Relaxed);
        }
        let timeout = if ready.is_empty() { Duration::from_millis(20) } else { Duration::ZERO };
        if poll.poll(&mut events, Some(timeout)).is_err() {
            continue;
        }
        for ev in events.iter() {
            let k = ev.token().0;
            if k < queued.len() && !queued[k] {
                queued[k] = true;
                ready.push_back(k);
            }
        }
        for _ in 0..ready.len() {
            let Some(k) = ready.pop_front() else { break };
            let (i, sock) = &mut socks[k];
            let r = match sock {
                Sock::Tcp(t) => t.read(&mut buf),
                Sock::Udp(u) => u.recv(&mut buf),
            };
            match r {
                Ok(0) if matches!(sock, Sock::Tcp(_)) => {
                    queued[k] = false;
                    gone[k] = true;
                    shared.end(*i, Ended::Closed);
                }
                Ok(n) => {
                    shared.counts[*i].fetch_add(n as u64, Ordering::Relaxed);
                    if let Some(line) = shared.lines.get(*i) {
                        line.lock().expect("line lock").arrive(shared.since_epoch(), n as u64);
                    }
                    ready.push_back(k);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => ready.push_back(k),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => queued[k] = false,
                Err(e) => {
                    queued[k] = false;
                    gone[k] = true;
                    shared.end(*i, Ended::of(&e));
                }
            }
        }
    }
    for (k, (_, s)) in socks.iter().enumerate() {
        if let Sock::Udp(u) = s
            && !gone[k]
        {
            let _ = u.send(b"bye");
        }
    }
}

/// Writes `message`-byte writes to every socket round-robin until the load stops, counting what
/// the kernel took.
fn upload_thread(shared: &Shared, mut poll: Poll, socks: &mut [(usize, Sock)], message: usize) {
    for (k, (_, s)) in socks.iter_mut().enumerate() {
        if let Sock::Tcp(t) = s {
            let _ = poll.registry().register(t, Token(k), Interest::WRITABLE);
        }
    }
    let buf = vec![0xa5u8; message];
    let mut events = Events::with_capacity(1024);
    let mut writable: std::collections::VecDeque<usize> = (0..socks.len()).collect();
    let mut queued = vec![true; socks.len()];
    while !shared.stop.load(Ordering::Relaxed) {
        let timeout = if writable.is_empty() { Duration::from_millis(20) } else { Duration::ZERO };
        if poll.poll(&mut events, Some(timeout)).is_err() {
            continue;
        }
        for ev in events.iter() {
            let k = ev.token().0;
            if k < queued.len() && !queued[k] {
                queued[k] = true;
                writable.push_back(k);
            }
        }
        for _ in 0..writable.len() {
            let Some(k) = writable.pop_front() else { break };
            let (i, Sock::Tcp(t)) = &mut socks[k] else { continue };
            match t.write(&buf) {
                Ok(n) => {
                    shared.counts[*i].fetch_add(n as u64, Ordering::Relaxed);
                    writable.push_back(k);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => writable.push_back(k),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => queued[k] = false,
                Err(e) => {
                    queued[k] = false;
                    shared.end(*i, Ended::of(&e));
                }
            }
        }
    }
}

/// Per-window bytes of every connection, sampled from running [`Load`] counters.
#[derive(Clone, Debug, Default)]
pub struct Windows {
    started: Option<Instant>,
    last_at: Option<Instant>,
    last: Vec<u64>,
    /// Each window's start (seconds since the first sample) and length (seconds).
    pub times: Vec<(f64, f64)>,
    /// `bytes[w][c]`: what connection `c` received in window `w`.
    pub bytes: Vec<Vec<u64>>,
}

impl Windows {
    /// Starts the record at these counts.
    pub fn new(counts: Vec<u64>) -> Self {
        let now = Instant::now();
        Self { started: Some(now), last_at: Some(now), last: counts, ..Default::default() }
    }

    /// Closes a window at these counts (taken just now).
    pub fn tick(&mut self, counts: Vec<u64>) {
        let now = Instant::now();
        let (start, last_at) = (self.started.unwrap_or(now), self.last_at.unwrap_or(now));
        self.times.push((last_at.duration_since(start).as_secs_f64(), now.duration_since(last_at).as_secs_f64()));
        self.bytes.push(counts.iter().zip(&self.last).map(|(c, l)| c.saturating_sub(*l)).collect());
        self.last = counts;
        self.last_at = Some(now);
    }

    /// The same record in windows `k` times as long (a trailing part window is dropped): how the
    /// error looks at 1 s when it was measured at 100 ms.
    pub fn coarsen(&self, k: usize) -> Self {
        let k = k.max(1);
        let whole = self.bytes.len() / k;
        let conns = self.last.len();
        let mut out = Self { last: vec![0; conns], ..Default::default() };
        for g in 0..whole {
            let span = &self.times[g * k..(g + 1) * k];
            out.times.push((span[0].0, span.iter().map(|t| t.1).sum()));
            out.bytes.push((0..conns).map(|c| self.bytes[g * k..(g + 1) * k].iter().map(|w| w[c]).sum()).collect());
        }
        out
    }

    /// Each connection's rate in window `w`, bytes per second.
    pub fn rates(&self, w: usize) -> Vec<f64> {
        let secs = self.times[w].1.max(1e-9);
        self.bytes[w].iter().map(|b| *b as f64 / secs).collect()
    }

    /// Each connection's mean rate over windows `from..`, bytes per second.
    pub fn mean_rates(&self, from: usize) -> Vec<f64> {
        let conns = self.last.len();
        let secs: f64 = self.times.iter().skip(from).map(|t| t.1).sum();
        (0..conns).map(|c| self.bytes.iter().skip(from).map(|w| w[c]).sum::<u64>() as f64 / secs.max(1e-9)).collect()
    }
}

/// Connections that ended before the run did, by why (see [`Ended`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndedEarly {
    /// Closed by the server.
    pub closed: usize,
    /// Their server port unreachable (ICMP, UDP).
    pub unreachable: usize,
    /// Failed with a socket error.
    pub errors: usize,
}

impl EndedEarly {
    /// All of them.
    pub fn total(&self) -> usize {
        self.closed + self.unreachable + self.errors
    }

    /// Counts the ended among `fates`.
    pub fn of(fates: &[Fate]) -> Self {
        let mut n = Self::default();
        for f in fates {
            match f {
                Fate::Ended(Ended::Closed) => n.closed += 1,
                Fate::Ended(Ended::Unreachable) => n.unreachable += 1,
                Fate::Ended(Ended::Error(_)) => n.errors += 1,
                Fate::NotStarted | Fate::Ran => {}
            }
        }
        n
    }
}

impl std::fmt::Display for EndedEarly {
    /// The kinds that occurred, e.g. "3 closed by the server, 1 failed with an error".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [
            (self.closed, "closed by the server"),
            (self.unreachable, "unreachable (ICMP port unreachable: the server closed the stream or went away)"),
            (self.errors, "failed with an error"),
        ];
        let said: Vec<String> = parts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect();
        if said.is_empty() { f.write_str("none") } else { f.write_str(&said.join(", ")) }
    }
}

/// What a run of windows comes to: fairness across connections and, for streams, how far each
/// window was from the promise.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Connections counted: every one that started, those that ended early among them.
    pub conns: usize,
    /// Of those, the ones that ended before the run did, by why. They count with what they got
    /// (nothing after their end), so the figures understate the server and the run is a
    /// failure: a caller must say so.
    pub ended: EndedEarly,
    /// Windows counted.
    pub windows: usize,
    /// All connections together, bits per second.
    pub aggregate_bps: f64,
    /// The mean connection, bits per second.
    pub mean_bps: f64,
    /// Jain's index over the connections' mean rates.
    pub jain: f64,
    /// The thesis's percentile view of the connections' mean rates.
    pub spread: switchyard_core::measure::Spread,
    /// Per-window errors against the target (absolute, as fractions), if there was a target:
    /// median, 99th percentile and worst over every connection's every window.
    pub window_error: Option<[f64; 3]>,
    /// The worst connection's error over the whole run (its mean rate against the target).
    pub run_error: Option<f64>,
}

impl Windows {
    /// The summary of windows `from..`, against `target` bytes per second per connection if the
    /// connections are promised one. `fates` says what became of each connection
    /// ([`Load::fates`]): those that never started are left out; those that ended early are
    /// counted with what they got, and in [`Summary::ended`] — never silently omitted.
    pub fn summary(&self, from: usize, target: Option<f64>, fates: &[Fate]) -> Summary {
        use switchyard_core::measure::{balance, quantile_sorted, rate_error, spread};
        let keep = |c: usize| !matches!(fates.get(c), Some(Fate::NotStarted));
        let rates: Vec<f64> =
            self.mean_rates(from).into_iter().enumerate().filter(|(c, _)| keep(*c)).map(|(_, r)| r).collect();
        let aggregate: f64 = rates.iter().sum();
        let mut errors = Vec::new();
        if let Some(t) = target {
            for (w, bytes) in self.bytes.iter().enumerate().skip(from) {
                let promised = t * self.times[w].1;
                errors.extend(
                    bytes
                        .iter()
                        .enumerate()
                        .filter(|(c, _)| keep(*c))
                        .map(|(_, b)| rate_error(*b as f64, promised).abs()),
                );
            }
        }
        errors.sort_by(f64::total_cmp);
        let window_error = (!errors.is_empty())
            .then(|| [quantile_sorted(&errors, 0.5), quantile_sorted(&errors, 0.99), quantile_sorted(&errors, 1.0)]);
        let run_error = target
            .filter(|_| !rates.is_empty())
            .map(|t| rates.iter().map(|r| rate_error(*r, t).abs()).fold(0.0, f64::max));
        Summary {
            conns: rates.len(),
            ended: EndedEarly::of(fates),
            windows: self.bytes.len().saturating_sub(from),
            aggregate_bps: aggregate * 8.0,
            mean_bps: if rates.is_empty() { 0.0 } else { aggregate * 8.0 / rates.len() as f64 },
            jain: balance(&rates, None).jain,
            spread: spread(&rates),
            window_error,
            run_error,
        }
    }
}

/// The departure lines of a run's streams, over the streams that started: quantiles of lead,
/// lag and the longest owed spell (see [`switchyard_core::measure::DepartureLine`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Departures {
    /// Streams with a line (every one that received something).
    pub streams: usize,
    /// Lead over the line, bytes: median, 99th percentile (nearest rank) and worst over streams.
    pub lead: [f64; 3],
    /// Lag behind the line, bytes: the same.
    pub lag: [f64; 3],
    /// The longest spell a stream received nothing while owed data, seconds: the same.
    pub owed_gap: [f64; 3],
    /// Each stream's rate from its first arrival to its last against its line's, as absolute
    /// fractions: the same quantiles, over the streams with two arrivals or more (`None` if
    /// none has).
    pub rate_error: Option<[f64; 3]>,
    /// Each stream's least-squares rate over every arrival ([`Deviation::fit_rate`]) against
    /// its line's, as absolute fractions: the same quantiles (`None` if no stream has one).
    pub fit_error: Option<[f64; 3]>,
}

impl Departures {
    /// Over `lines` ([`Load::departures`]), leaving out streams that never started (`fates`).
    /// `None` if no stream has a line.
    pub fn of(lines: &[Option<Deviation>], fates: &[Fate]) -> Option<Self> {
        use switchyard_core::measure::quantile_sorted;
        let kept: Vec<&Deviation> = lines
            .iter()
            .enumerate()
            .filter(|(c, _)| !matches!(fates.get(*c), Some(Fate::NotStarted)))
            .filter_map(|(_, d)| d.as_ref())
            .collect();
        if kept.is_empty() {
            return None;
        }
        let q = |f: &dyn Fn(&Deviation) -> Option<f64>| {
            let mut xs: Vec<f64> = kept.iter().filter_map(|d| f(d)).collect();
            xs.sort_by(f64::total_cmp);
            (!xs.is_empty()).then(|| [quantile_sorted(&xs, 0.5), quantile_sorted(&xs, 0.99), quantile_sorted(&xs, 1.0)])
        };
        let every = |f: &dyn Fn(&Deviation) -> f64| q(&|d| Some(f(d))).expect("kept is not empty");
        Some(Self {
            streams: kept.len(),
            lead: every(&|d| d.lead),
            lag: every(&|d| d.lag),
            owed_gap: every(&|d| d.owed_gap),
            rate_error: q(&|d| d.arrival_error()),
            fit_error: q(&|d| d.fit_error()),
        })
    }
}
