//! The delivery server: listeners, worker threads and the controller that samples them.
//!
//! - **Listeners** (TCP and UDP on the same port) read each client's request line, ask the core
//!   where the connection goes — [`Admission`] for rate-promised streams, the
//!   [`Rebalancer`]'s least-loaded worker for bulk and sink, or, with [`ServerConfig::steer`], the
//!   [`Steer`] policy given the core the kernel received the connection on (`SO_INCOMING_CPU`)
//!   — answer, and hand the socket to that worker.
//! - **Workers** ([`super::worker`]) serve their connections.
//! - **The controller** wakes every sample interval (100 ms), reads each worker's bytes sent, CPU
//!   time and lateness, feeds them to the rebalancer (soft scheduling) and the admission test,
//!   carries out any move, and keeps the history the reports are drawn from.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Poll, Waker};
use switchyard_core::order::{Admission, AdmissionConfig, PaceConfig, QuotaConfig};
use switchyard_core::place::rebalance::{ConnId, RebalanceConfig, Rebalancer};
use switchyard_core::place::steer::{Steer, Steering};
use switchyard_core::{Nanos, WorkerId};

use super::request::{self, Answer, MAX_LINE, Request};
use super::worker::{self, Cmd, Conn, Io, WAKE};

/// How streams are held to their rates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// Per-stream credit pacing (the default).
    Fine(PaceConfig),
    /// Yates's per-worker packets-per-pause quota.
    Quota(QuotaConfig),
    /// The kernel's: TCP's own pacing under `SO_MAX_PACING_RATE`, each stream written a packet
    /// at a time as the kernel takes it. TCP only: UDP streams are refused (the kernel paces
    /// UDP only under the fq qdisc). See [`super::KernelPacing`].
    Kernel,
}

/// A delivery server's settings.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Where to listen (TCP and UDP, same port; port 0 picks one).
    pub listen: SocketAddr,
    /// Worker threads: 1 per core is Yates's PPC, 1 per connection TPC, anything else VPPC.
    pub workers: usize,
    /// Pin worker `i` to core `i mod cores` (the thesis's "wired" threads).
    pub pin: bool,
    /// Bytes per send for bulk connections and per datagram (4096, the thesis's payload).
    pub packet: usize,
    /// Packets per turn for bulk connections: 16 (64 KB), the thesis's burst experiment, which
    /// it found gave 10–40% more than one packet a turn (its other runs' unit; `reproduce
    /// yates-clp` uses 1). Streams are paced, not bursted.
    pub burst: usize,
    /// How streams are paced.
    pub pacing: Pacing,
    /// Soft throughput-based rebalancing, if on.
    pub rebalance: Option<RebalanceConfig>,
    /// Admission control for streams.
    pub admission: AdmissionConfig,
    /// The monitor's sample interval (100 ms).
    pub sample_every: Duration,
    /// SO_SNDBUF for accepted sockets, if set.
    pub send_buffer: Option<usize>,
    /// Bytes per read on `sink` connections (iperf's `-l` on the receiving side: 128 KiB).
    pub recv_size: usize,
    /// Where bulk and sink connections go relative to the core that receives their packets.
    /// Anything but [`Steering::None`] pins the workers (as [`pin`](Self::pin) does) and cannot
    /// be combined with [`rebalance`](Self::rebalance), which would move connections off the
    /// core steering chose.
    pub steer: Steering,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            workers: 2,
            pin: false,
            packet: 4096,
            burst: 16,
            pacing: Pacing::Fine(PaceConfig::default()),
            rebalance: None,
            admission: AdmissionConfig::default(),
            sample_every: Duration::from_millis(100),
            send_buffer: None,
            recv_size: 128 * 1024,
            steer: Steering::None,
        }
    }
}

/// Per-connection counters, shared by the worker that serves it and the server's registry.
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Bytes sent.
    pub bytes: AtomicU64,
    /// Writes (TCP) or datagrams (UDP) that took bytes: what a send costs is mostly per call,
    /// not per byte, so bytes over writes is the figure that says whether pacing is affordable.
    pub writes: AtomicU64,
    /// Bytes received (sink connections).
    pub received: AtomicU64,
    /// The worker serving it.
    pub worker: AtomicU32,
    /// The core the kernel last processed its incoming packets on (`SO_INCOMING_CPU`), read at
    /// placement and again at every sample; [`UNKNOWN_CPU`] when the OS has not said.
    pub incoming_cpu: AtomicU32,
    /// The same, as read when the connection was placed: what steering decided on.
    pub placed_cpu: AtomicU32,
    /// Bytes of lateness the pacer made up for this stream so far (granted late, within its
    /// bound; `switchyard_core::order::Debts`), as of its last send.
    pub made_up: AtomicU64,
    /// Bytes of its promise the pacer forgave (lateness past the bound, never sent).
    pub forgiven: AtomicU64,
}

/// [`ConnStats::incoming_cpu`] and [`WorkerStats`]'s CPU when unknown.
pub const UNKNOWN_CPU: u32 = u32::MAX;

/// Per-worker counters the controller samples.
#[derive(Debug, Default)]
pub(crate) struct WorkerStats {
    pub(crate) bytes: AtomicU64,
    /// Of which to bulk connections: what soft scheduling balances (streams keep their thread).
    pub(crate) bulk_bytes: AtomicU64,
    pub(crate) cpu_ns: AtomicU64,
    pub(crate) late_ns: AtomicU64,
    /// Bytes read from sink connections.
    pub(crate) received: AtomicU64,
    /// The CPU the worker ran on at its last sample ([`UNKNOWN_CPU`] before it).
    pub(crate) cpu: AtomicU32,
    /// The pacer's bytes made up and forgiven, every stream's (closed ones too), and the most
    /// of each any one stream had.
    pub(crate) made_up: AtomicU64,
    pub(crate) forgiven: AtomicU64,
    pub(crate) made_up_max: AtomicU64,
    pub(crate) forgiven_max: AtomicU64,
}

impl WorkerStats {
    fn new() -> Self {
        Self { cpu: AtomicU32::new(UNKNOWN_CPU), ..Self::default() }
    }
}

struct Link {
    tx: Sender<Cmd>,
    waker: Waker,
}

struct ConnInfo {
    rate: Option<f64>,
    /// The worker admission recorded the stream's promise on (streams never move).
    admitted_on: Option<WorkerId>,
    udp_peer: Option<SocketAddr>,
    stats: Arc<ConnStats>,
}

/// The decisions' state: all of it the core's.
struct Control {
    rebalancer: Rebalancer,
    admission: Admission,
    conns: BTreeMap<ConnId, ConnInfo>,
    udp_peers: BTreeMap<SocketAddr, ConnId>,
    next_id: u64,
    accepted: u64,
    refused: u64,
}

impl Control {
    /// Open connections per worker, each counted on the worker serving it or, while it moves,
    /// the one it left: read from one map under one lock, the counts always add up to the
    /// connections open. (Counters the workers kept missed a connection in transit between
    /// two of them: 8 of 9 read in a CI run.)
    fn per_worker(&self, workers: usize) -> Vec<usize> {
        let mut n = vec![0; workers];
        for info in self.conns.values() {
            if let Some(k) = n.get_mut(info.stats.worker.load(Ordering::Relaxed) as usize) {
                *k += 1;
            }
        }
        n
    }
}

/// What the server's threads share.
pub(crate) struct Shared {
    pub(crate) cfg: ServerConfig,
    pub(crate) epoch: Instant,
    pub(crate) workers: Vec<WorkerStats>,
    links: Vec<Link>,
    steer: Steer,
    control: Mutex<Control>,
    stop: AtomicBool,
    failure: Mutex<Option<String>>,
    history: Mutex<Vec<Sample>>,
    /// What every worker sends from ([`worker::payload`]).
    pub(crate) payload: Box<[u8]>,
}

impl Shared {
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub(crate) fn fail(&self, why: String) {
        self.failure.lock().expect("failure lock").get_or_insert(why);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// A worker closed `conn`: forget it and release its promise.
    pub(crate) fn closed(&self, conn: ConnId, _worker: usize) {
        let mut c = self.control.lock().expect("control lock");
        c.rebalancer.detach(conn);
        if let Some(info) = c.conns.remove(&conn) {
            if let (Some(rate), Some(w)) = (info.rate, info.admitted_on) {
                c.admission.release(w, rate);
            }
            if let Some(peer) = info.udp_peer {
                c.udp_peers.remove(&peer);
            }
        }
    }

    /// A worker was told to hand over `conn` but does not have it: it closed, or its Add is
    /// still on the way. The rebalancer's record goes back to where it is (if it is anywhere).
    pub(crate) fn take_missed(&self, conn: ConnId, worker: usize) {
        let mut c = self.control.lock().expect("control lock");
        if c.conns.contains_key(&conn) {
            c.rebalancer.attach(conn, WorkerId(worker as u32));
        }
    }

    /// Passes a moving connection to worker `to`.
    pub(crate) fn hand_over(&self, conn: Conn, to: usize) {
        self.send(to, Cmd::Add(conn));
    }

    fn send(&self, to: usize, cmd: Cmd) {
        let link = &self.links[to];
        match link.tx.send(cmd) {
            // A failed wake only delays the command to the worker's next tick.
            Ok(()) => drop(link.waker.wake()),
            // The worker is gone (the server is stopping, or the worker failed, which fails the
            // server with its own reason, perhaps a moment after its channel closed): what it was
            // given is undone here, so that the counts do not keep a connection nobody serves
            // (the connection itself is closed as the command is dropped).
            Err(std::sync::mpsc::SendError(cmd)) => match cmd {
                Cmd::Add(conn) => self.closed(conn.id, to),
                Cmd::Take { conn, .. } => self.take_missed(conn, to),
                #[cfg(test)]
                Cmd::Panic => {}
            },
        }
    }

    /// Decides where a new connection goes, or why it is refused. `incoming_cpu` is the core
    /// its packets were received on, if known.
    fn place(
        &self,
        request: Request,
        udp_peer: Option<SocketAddr>,
        incoming_cpu: Option<u32>,
    ) -> Result<Placed, String> {
        if request == Request::Sink && udp_peer.is_some() {
            return Err("`sink` is TCP only: connect over TCP to send to the server".into());
        }
        if self.cfg.pacing == Pacing::Kernel && udp_peer.is_some() && request.bytes_per_sec().is_some() {
            return Err("this server paces by the kernel (--pacing kernel), which paces TCP only: ask for the stream over TCP, or run the server with --pacing fine".into());
        }
        let mut c = self.control.lock().expect("control lock");
        let rate = request.bytes_per_sec();
        let worker = match rate {
            Some(r) => c.admission.admit(r).map_err(|e| {
                c.refused += 1;
                e.to_string()
            })?,
            None if self.steer.mode() != Steering::None => {
                let conns: Vec<usize> =
                    (0..self.workers.len()).map(|w| c.rebalancer.conns_on(WorkerId(w as u32))).collect();
                self.steer.place(incoming_cpu, &conns).worker
            }
            None => c.rebalancer.least_loaded(),
        };
        let id = ConnId(c.next_id);
        c.next_id += 1;
        c.accepted += 1;
        // Only bulk connections are rebalanced: a stream's rate is a promise its worker made, and
        // moving it would carry the promise somewhere admission never checked.
        if rate.is_none() {
            c.rebalancer.attach(id, worker);
        }
        let stats = Arc::new(ConnStats::default());
        stats.worker.store(worker.0, Ordering::Relaxed);
        stats.incoming_cpu.store(incoming_cpu.unwrap_or(UNKNOWN_CPU), Ordering::Relaxed);
        stats.placed_cpu.store(incoming_cpu.unwrap_or(UNKNOWN_CPU), Ordering::Relaxed);
        let admitted_on = rate.map(|_| worker);
        c.conns.insert(id, ConnInfo { rate, admitted_on, udp_peer, stats: Arc::clone(&stats) });
        if let Some(peer) = udp_peer {
            c.udp_peers.insert(peer, id);
        }
        Ok(Placed { id, worker: worker.0 as usize, rate, sink: request == Request::Sink, stats })
    }
}

/// Where a new connection went.
struct Placed {
    id: ConnId,
    worker: usize,
    rate: Option<f64>,
    sink: bool,
    stats: Arc<ConnStats>,
}

/// One open connection's counters, as [`Server::connections`] reports them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ConnView {
    /// The server's number for it.
    pub id: u64,
    /// The worker serving it now.
    pub worker: u32,
    /// Bytes sent to it so far.
    pub bytes: u64,
    /// The writes (TCP) or datagrams (UDP) that carried them.
    pub writes: u64,
    /// Its promised rate, bytes per second, for streams.
    pub rate: Option<f64>,
    /// Bytes received from it so far (sink connections).
    pub received: u64,
    /// The core the kernel last received its packets on (`SO_INCOMING_CPU`), if known. It can
    /// change: seen over loopback, most likely because data that an ACK releases is sent — and
    /// so received — on the core that processed the ACK, which is the receiver's.
    pub incoming_cpu: Option<u32>,
    /// The same when the connection was placed (its handshake and request line): what
    /// steering decided on.
    pub placed_cpu: Option<u32>,
    /// The core its worker is pinned to, if pinned.
    pub worker_core: Option<u32>,
    /// The core its worker last ran on (pinned or not), if known.
    pub worker_cpu: Option<u32>,
}

impl ConnView {
    /// Whether its worker runs on the core that receives its packets: what steering is for.
    pub fn on_incoming_cpu(&self) -> bool {
        self.incoming_cpu.is_some() && self.worker_cpu == self.incoming_cpu
    }
}

/// One sample of every worker, taken by the controller.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Seconds since the server started.
    pub at: f64,
    /// Seconds since the previous sample.
    pub secs: f64,
    /// Bytes each worker sent in the interval.
    pub bytes: Vec<u64>,
    /// CPU nanoseconds each worker used in the interval.
    pub cpu_ns: Vec<u64>,
    /// Connections on each worker at the end of it.
    pub conns: Vec<usize>,
    /// Each worker's worst lateness in the interval, nanoseconds.
    pub late_ns: Vec<u64>,
    /// Bytes each worker read from sink connections in the interval.
    pub received: Vec<u64>,
}

/// A running delivery server. Dropping it stops it.
pub struct Server {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    addr: SocketAddr,
}

/// What lateness cost the fine pacer's streams (`switchyard_core::order::Debts`), every worker's
/// and every stream's since the server started, closed streams included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacerDebts {
    /// Bytes of lateness made up: owed past a stream's due time, granted late within the bound.
    pub made_up: u64,
    /// Bytes forgiven: lateness past the bound (`max_lag`, or `max_lag_bytes` of the stream),
    /// never sent — what a stream's rate truly lost.
    pub forgiven: u64,
    /// The most any one stream had made up.
    pub made_up_max: u64,
    /// The most any one stream had forgiven.
    pub forgiven_max: u64,
}

/// Totals at a moment.
#[derive(Clone, Debug, PartialEq)]
pub struct Totals {
    /// Connections accepted so far.
    pub accepted: u64,
    /// Streams refused so far.
    pub refused: u64,
    /// Connections moved by the rebalancer so far.
    pub moves: u64,
    /// Connections open now, per worker.
    pub conns: Vec<usize>,
}

impl Server {
    /// Binds the listeners and starts the workers and the controller.
    pub fn start(cfg: ServerConfig) -> io::Result<Self> {
        if cfg.workers == 0 || cfg.packet == 0 || cfg.burst == 0 || cfg.sample_every.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "workers, packet, burst and the sample interval must all be above 0",
            ));
        }
        if cfg.recv_size == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "the sink's read size must be above 0"));
        }
        if cfg.steer != Steering::None && cfg.rebalance.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "steering and rebalancing cannot both be on: the rebalancer would move connections off the core steering chose",
            ));
        }
        if cfg.packet > 65_000 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a packet must fit one UDP datagram (at most 65,000 bytes)",
            ));
        }
        let tcp = TcpListener::bind(cfg.listen)?;
        if cfg.pacing == Pacing::Kernel {
            // The kernel paces a segment at a time: one the size of loopback's 64 KiB MTU would
            // leave 8 s of a 64 kb/s stream at once. Segments no larger than a packet.
            super::kernel_pace::bound_segments(&tcp, cfg.packet as u32)?;
        }
        let addr = tcp.local_addr()?;
        let udp = UdpSocket::bind(addr)?;
        tcp.set_nonblocking(true)?;
        udp.set_read_timeout(Some(Duration::from_millis(20)))?;
        let n = cfg.workers;
        let mut polls = Vec::with_capacity(n);
        let mut links = Vec::with_capacity(n);
        let mut receivers = Vec::with_capacity(n);
        for _ in 0..n {
            let poll = Poll::new()?;
            let waker = Waker::new(poll.registry(), WAKE)?;
            let (tx, rx) = channel();
            polls.push(poll);
            links.push(Link { tx, waker });
            receivers.push(rx);
        }
        let control = Control {
            rebalancer: Rebalancer::new(n, cfg.rebalance.unwrap_or_default()),
            admission: Admission::new(n, cfg.admission),
            conns: BTreeMap::new(),
            udp_peers: BTreeMap::new(),
            next_id: 0,
            accepted: 0,
            refused: 0,
        };
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let pin = cfg.pin || cfg.steer != Steering::None;
        let pinned: Vec<Option<u32>> = (0..n).map(|i| pin.then_some((i % cores) as u32)).collect();
        let shared = Arc::new(Shared {
            workers: (0..n).map(|_| WorkerStats::new()).collect(),
            epoch: Instant::now(),
            links,
            steer: Steer::new(cfg.steer, pinned),
            control: Mutex::new(control),
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            history: Mutex::new(Vec::new()),
            payload: worker::payload(&cfg),
            cfg,
        });
        let mut threads = Vec::new();
        for (i, (poll, rx)) in polls.into_iter().zip(receivers).enumerate() {
            let s = Arc::clone(&shared);
            let t =
                std::thread::Builder::new().name(format!("deliver-w{i}")).stack_size(256 * 1024).spawn(move || {
                    let guard = Arc::clone(&s);
                    guarded(&guard, &format!("worker {i}"), || {
                        if let Some(core) = s.steer.cores()[i] {
                            crate::affinity::on_core(core as usize, || worker::run(i, s, poll, rx));
                        } else {
                            worker::run(i, s, poll, rx);
                        }
                    });
                })?;
            threads.push(t);
        }
        let s = Arc::clone(&shared);
        threads.push(
            std::thread::Builder::new()
                .name("deliver-tcp".into())
                .spawn(move || guarded(&s, "the TCP acceptor", || accept_tcp(&s, tcp)))?,
        );
        let s = Arc::clone(&shared);
        threads.push(
            std::thread::Builder::new()
                .name("deliver-udp".into())
                .spawn(move || guarded(&s, "the UDP acceptor", || accept_udp(&s, &udp)))?,
        );
        let s = Arc::clone(&shared);
        threads.push(
            std::thread::Builder::new()
                .name("deliver-control".into())
                .spawn(move || guarded(&s, "the control thread", || control_loop(&s)))?,
        );
        Ok(Self { shared, threads, addr })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The samples taken so far.
    pub fn history(&self) -> Vec<Sample> {
        self.shared.history.lock().expect("history lock").clone()
    }

    /// Counts at this moment.
    pub fn totals(&self) -> Totals {
        let c = self.shared.control.lock().expect("control lock");
        Totals {
            accepted: c.accepted,
            refused: c.refused,
            moves: c.rebalancer.moves(),
            conns: c.per_worker(self.shared.workers.len()),
        }
    }

    /// What lateness has cost the paced streams so far: bytes made up and forgiven, in all and
    /// at most for one stream.
    pub fn pacer_debts(&self) -> PacerDebts {
        let mut d = PacerDebts::default();
        for w in &self.shared.workers {
            d.made_up += w.made_up.load(Ordering::Relaxed);
            d.forgiven += w.forgiven.load(Ordering::Relaxed);
            d.made_up_max = d.made_up_max.max(w.made_up_max.load(Ordering::Relaxed));
            d.forgiven_max = d.forgiven_max.max(w.forgiven_max.load(Ordering::Relaxed));
        }
        d
    }

    /// Every open connection's counters (the send side's view: for UDP, what was sent, whether
    /// or not it arrived).
    pub fn connections(&self) -> Vec<ConnView> {
        let c = self.shared.control.lock().expect("control lock");
        let known = |cpu: u32| (cpu != UNKNOWN_CPU).then_some(cpu);
        c.conns
            .iter()
            .map(|(id, i)| {
                let worker = i.stats.worker.load(Ordering::Relaxed);
                ConnView {
                    id: id.0,
                    worker,
                    bytes: i.stats.bytes.load(Ordering::Relaxed),
                    writes: i.stats.writes.load(Ordering::Relaxed),
                    rate: i.rate,
                    received: i.stats.received.load(Ordering::Relaxed),
                    incoming_cpu: known(i.stats.incoming_cpu.load(Ordering::Relaxed)),
                    placed_cpu: known(i.stats.placed_cpu.load(Ordering::Relaxed)),
                    worker_core: self.shared.steer.cores().get(worker as usize).copied().flatten(),
                    worker_cpu: self
                        .shared
                        .workers
                        .get(worker as usize)
                        .and_then(|w| known(w.cpu.load(Ordering::Relaxed))),
                }
            })
            .collect()
    }

    /// The error that stopped the server, if one did.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure.lock().expect("failure lock").clone()
    }

    /// The core each worker is pinned to (`None`: not pinned).
    pub fn worker_cores(&self) -> &[Option<u32>] {
        self.shared.steer.cores()
    }

    /// Bytes read from sink connections so far, all workers together (closed connections
    /// included).
    pub fn received(&self) -> u64 {
        self.shared.workers.iter().map(|w| w.received.load(Ordering::Relaxed)).sum()
    }

    /// The settings it runs with.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.cfg
    }

    /// Stops every thread and waits for them.
    pub fn stop(mut self) {
        self.halt();
    }

    /// Stops serving now, from wherever the server is shared: every thread ends and every
    /// connection closes, as when the server fails (the threads are waited for when it is
    /// stopped or dropped). To its clients this is a server that went away mid-run.
    pub fn shut_down(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for l in &self.shared.links {
            let _ = l.waker.wake();
        }
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for l in &self.shared.links {
            let _ = l.waker.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Runs a server thread's body. A panic fails the server with what the panic said, which stops
/// every thread: a server that went on without a worker gave new connections to the dead
/// worker (they were answered `ok`, then closed) and kept its streams' promises for ever.
fn guarded(shared: &Shared, what: &str, body: impl FnOnce()) {
    if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        let said = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into());
        shared.fail(format!("{what} panicked: {said}"));
    }
}

/// A connection whose request line has not all arrived.
struct Opening {
    stream: mio::net::TcpStream,
    line: Vec<u8>,
    deadline: Instant,
}

/// How long a new connection has to send its request line.
const REQUEST_WITHIN: Duration = Duration::from_secs(2);

/// Accepts TCP connections and reads their request lines without blocking, each with its own
/// deadline, so a client that connects and says nothing holds up no one else.
fn accept_tcp(shared: &Shared, listener: TcpListener) {
    const LISTENER: mio::Token = mio::Token(usize::MAX);
    let mut listener = mio::net::TcpListener::from_std(listener);
    let Ok(mut poll) = Poll::new() else { return shared.fail("the TCP acceptor cannot make a poller".into()) };
    if poll.registry().register(&mut listener, LISTENER, mio::Interest::READABLE).is_err() {
        return shared.fail("the TCP acceptor cannot watch its listener".into());
    }
    let mut events = mio::Events::with_capacity(256);
    let mut opening: BTreeMap<usize, Opening> = BTreeMap::new();
    let mut next = 0usize;
    let mut retry_accept = false;
    while !shared.stopping() {
        if poll.poll(&mut events, Some(Duration::from_millis(20))).is_err() {
            continue;
        }
        let mut ready = Vec::new();
        let listener_ready = std::mem::take(&mut retry_accept) || events.iter().any(|ev| ev.token() == LISTENER);
        ready.extend(events.iter().filter(|ev| ev.token() != LISTENER).map(|ev| ev.token().0));
        if listener_ready {
            loop {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        let token = next;
                        next = next.wrapping_add(1) % (usize::MAX - 1);
                        if poll.registry().register(&mut stream, mio::Token(token), mio::Interest::READABLE).is_ok() {
                            opening.insert(
                                token,
                                Opening { stream, line: Vec::new(), deadline: Instant::now() + REQUEST_WITHIN },
                            );
                            // Its line may already be here; edge-triggered, so look now.
                            ready.push(token);
                        }
                    }
                    Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // Out of descriptors and the like: serve who is here, and try the backlog
                    // again next tick (the listener is edge-triggered and would not say so).
                    Err(_) => {
                        retry_accept = true;
                        break;
                    }
                }
            }
        }
        for token in ready {
            let Some(o) = opening.get_mut(&token) else { continue };
            let mut buf = [0u8; MAX_LINE + 1];
            let done = loop {
                match o.stream.read(&mut buf[..MAX_LINE + 1 - o.line.len().min(MAX_LINE)]) {
                    // The write side shut: a line without its newline is refused below.
                    Ok(0) => break Some(!o.line.is_empty()),
                    Ok(n) => {
                        o.line.extend_from_slice(&buf[..n]);
                        if o.line.contains(&b'\n') || o.line.len() > MAX_LINE {
                            break Some(true);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break None,
                    Err(_) => break Some(false),
                }
            };
            match done {
                None => {}
                Some(false) => drop(opening.remove(&token)),
                Some(true) => {
                    let mut o = opening.remove(&token).expect("present");
                    let _ = poll.registry().deregister(&mut o.stream);
                    match o.line.iter().position(|&b| b == b'\n') {
                        Some(end) => {
                            let (line, early) = o.line.split_at(end + 1);
                            open_tcp(shared, o.stream, line, early);
                        }
                        // Cut short (the peer shut its side first) or too long: a request that
                        // did not all come is not served (it was, as far as it went).
                        None => {
                            let why = request::RequestError::NotALine.to_string();
                            let _ = o.stream.write_all(Answer::Refused(why).line().as_bytes());
                        }
                    }
                }
            }
        }
        let now = Instant::now();
        let late: Vec<usize> = opening.iter().filter(|(_, o)| o.deadline <= now).map(|(t, _)| *t).collect();
        for t in late {
            if let Some(mut o) = opening.remove(&t) {
                let _ = poll.registry().deregister(&mut o.stream);
                let why = format!(
                    "no request line within {} s: send `bulk`, `stream <bits per second>` or `sink` and a newline",
                    REQUEST_WITHIN.as_secs()
                );
                let _ = o.stream.write_all(Answer::Refused(why).line().as_bytes());
            }
        }
    }
}

/// Places a TCP connection whose request line has arrived, answers it and hands it to its worker.
/// `early` is what the client sent after the line that was read with it: a `sink` client need
/// not wait for `ok` before it sends, and those bytes are its first (up to a line's length).
/// Any other client's bytes are read and dropped by its worker, and so are these.
fn open_tcp(shared: &Shared, mut stream: mio::net::TcpStream, line: &[u8], early: &[u8]) {
    let incoming = incoming_cpu(&stream);
    let placed = request::parse(line).map_err(|e| e.to_string()).and_then(|req| shared.place(req, None, incoming));
    let Placed { id, worker, rate, sink, stats } = match placed {
        Ok(p) => p,
        Err(why) => {
            let _ = stream.write_all(Answer::Refused(why).line().as_bytes());
            return;
        }
    };
    // Paced chunks are small: Nagle would hold each behind the last one's delayed ACK (up to
    // 40 ms), which shows as bursts in a 100 ms window.
    let ok = stream.write_all(Answer::Ok { worker: worker as u32 }.line().as_bytes()).is_ok()
        && stream.set_nodelay(true).is_ok()
        && shared.cfg.send_buffer.is_none_or(|b| socket2::SockRef::from(&stream).set_send_buffer_size(b).is_ok());
    if !ok {
        shared.closed(id, worker);
        return;
    }
    if sink && !early.is_empty() {
        let n = early.len() as u64;
        stats.received.fetch_add(n, Ordering::Relaxed);
        shared.workers[worker].received.fetch_add(n, Ordering::Relaxed);
    }
    shared.send(worker, Cmd::Add(Conn { id, io: Io::Tcp(stream), rate, sink, stats }));
}

/// The core the kernel processed `socket`'s latest incoming packet on (`SO_INCOMING_CPU`,
/// Linux 3.19+), or `None` where the OS cannot say. This is what RFS-style steering keys on.
pub(crate) fn incoming_cpu(socket: &impl std::os::fd::AsFd) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        // The kernel answers -1 until it has processed a packet for the socket.
        socket2::SockRef::from(socket).cpu_affinity().ok().and_then(|c| u32::try_from(c).ok())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = socket;
        None
    }
}

fn accept_udp(shared: &Shared, socket: &UdpSocket) {
    let mut buf = [0u8; 2048];
    while !shared.stopping() {
        let (n, peer) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue, // the read timeout, or an ICMP error from an earlier peer
        };
        // A repeated request (its answer was lost) is answered by the data that follows it.
        if shared.control.lock().expect("control lock").udp_peers.contains_key(&peer) {
            continue;
        }
        let placed =
            request::parse(&buf[..n]).map_err(|e| e.to_string()).and_then(|req| shared.place(req, Some(peer), None));
        let Placed { id, worker, rate, stats, .. } = match placed {
            Ok(p) => p,
            Err(why) => {
                let _ = socket.send_to(Answer::Refused(why).line().as_bytes(), peer);
                continue;
            }
        };
        let data = UdpSocket::bind(SocketAddr::new(socket.local_addr().map(|a| a.ip()).unwrap_or(peer.ip()), 0))
            .and_then(|d| {
                d.connect(peer)?;
                d.send(Answer::Ok { worker: worker as u32 }.line().as_bytes())?;
                d.set_nonblocking(true)?;
                if let Some(b) = shared.cfg.send_buffer {
                    socket2::SockRef::from(&d).set_send_buffer_size(b)?;
                }
                Ok(d)
            });
        match data {
            Ok(d) => {
                let conn = Conn { id, io: Io::Udp(mio::net::UdpSocket::from_std(d)), rate, sink: false, stats };
                shared.send(worker, Cmd::Add(conn));
            }
            Err(_) => shared.closed(id, worker),
        }
    }
}

fn control_loop(shared: &Shared) {
    let n = shared.workers.len();
    let every = shared.cfg.sample_every;
    let mut last_bytes = vec![0u64; n];
    let mut last_bulk = vec![0u64; n];
    let mut last_cpu = vec![0u64; n];
    let mut last_received = vec![0u64; n];
    let mut last = Instant::now();
    let mut next = last + every;
    while !shared.stopping() {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(20)));
            continue;
        }
        next += every;
        let secs = now.duration_since(last).as_secs_f64();
        last = now;
        let mut sample = Sample {
            at: shared.epoch.elapsed().as_secs_f64(),
            secs,
            bytes: vec![0; n],
            cpu_ns: vec![0; n],
            conns: vec![0; n],
            late_ns: vec![0; n],
            received: vec![0; n],
        };
        let mut bulk_bytes = vec![0u64; n];
        for (i, w) in shared.workers.iter().enumerate() {
            let b = w.bytes.load(Ordering::Relaxed);
            let c = w.cpu_ns.load(Ordering::Relaxed);
            let bulk = w.bulk_bytes.load(Ordering::Relaxed);
            bulk_bytes[i] = bulk - last_bulk[i];
            last_bulk[i] = bulk;
            sample.bytes[i] = b - last_bytes[i];
            sample.cpu_ns[i] = c.saturating_sub(last_cpu[i]);
            (last_bytes[i], last_cpu[i]) = (b, c);
            sample.late_ns[i] = w.late_ns.swap(0, Ordering::Relaxed);
            let r = w.received.load(Ordering::Relaxed);
            sample.received[i] = r - last_received[i];
            last_received[i] = r;
        }
        let t = Nanos(shared.epoch.elapsed().as_nanos() as u64);
        let decided = {
            let mut c = shared.control.lock().expect("control lock");
            sample.conns = c.per_worker(n);
            for (i, late) in sample.late_ns.iter().enumerate() {
                c.admission.report_late(WorkerId(i as u32), Nanos(*late));
            }
            if shared.cfg.rebalance.is_some() {
                c.rebalancer.sample(t, Nanos((secs * 1e9) as u64), &bulk_bytes)
            } else {
                None
            }
        };
        if let Some(m) = decided {
            shared.send(m.from.0 as usize, Cmd::Take { conn: m.conn, to: m.to.0 as usize });
        }
        shared.history.lock().expect("history lock").push(sample);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that panics fails the server, saying which and why, and the server stops (it
    /// went on without the worker, answering `ok` to connections given to it).
    #[test]
    fn a_panicking_worker_fails_the_server() {
        let server = Server::start(ServerConfig { workers: 2, ..Default::default() }).unwrap();
        server.shared.send(0, Cmd::Panic);
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.failure().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let failure = server.failure().expect("the failure is reported");
        assert!(failure.starts_with("worker 0 panicked: told to"), "{failure}");
        assert!(server.shared.stopping());
        // What is sent to the dead worker now is undone, not lost in a channel nobody reads.
        server.shared.send(0, Cmd::Take { conn: ConnId(7), to: 1 });
        assert_eq!(server.failure().as_deref(), Some(failure.as_str()), "the first failure is the one kept");
        server.stop();
    }
}
