//! A session's driver: one task owns the core's [`Sender`] and [`Receiver`] and the session's
//! connections, and carries out the core's decisions on them.
//!
//! The driver reads and writes the connections' links (TCP or Unix sockets, or shared-memory
//! rings: `link.rs`) itself, without blocking: it waits until one of them is readable (or
//! writable, with bytes waiting for it), a command comes from a channel, or the tick. Frames read are handed to the core as they are decoded; frames the core
//! chooses for a connection are written with vectored I/O, header beside payload, so a
//! payload is never copied in user space on the way out (with TLS, rustls encrypts and
//! decrypts between the frames and the socket; see `conn.rs`). The socket's `TCP_NOTSENT_LOWAT`
//! keeps the kernel's unsent bytes short, and at most [`MuxConfig::queue_frames`] frames wait
//! in user space per connection, so a connection takes its next frame only when it has room:
//! the thesis's NetHandler threshold (§2.7), with the kernel saying when. Every policy
//! decision (which frame, on which connection) is the core's.
//!
//! An earlier form gave each connection a reader task and a writer task, each passing every
//! frame to the driver through a queue. Each frame then cost a task wake-up or two; on
//! loopback, where bytes are cheap, the wake-ups were most of the work.
//!
//! Where striping's remaining cost against raw TCP goes (perf with DWARF stacks over bench mux's
//! stripe case, AMD EPYC 2 cores, load 13–15; samples per MB delivered, the session's against
//! raw TCP's in the same run, 1.84× in all): the kernel's copies into the application's buffers
//! 1.46× raw's per byte (the receive buffers cycle through the megabytes the reorder buffers
//! hold, so they are cold), its copies out of them the same as raw's, user-space copies
//! (`Conn::make_room` carrying a frame cut by a read's end into the next buffer; a frame cut
//! across the application's writes) 4% of the session's samples against none, and the rest of the kernel's and
//! our work per byte (more and smaller reads and writes, their wake-ups, the core's bookkeeping)
//! 2.25× raw's: the gap is per operation more than per byte copied.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use switchyard_core::Nanos;
use switchyard_core::carry::choose::ConnView;
use switchyard_core::carry::{
    ChannelEnd, ChannelStats, Cut, Frame, OpenWindow, Receiver, RecvConfig, RecvStats, SendConfig, Sender,
};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{mpsc, oneshot};

use crate::channel::{Channel, Room};
use crate::conn::{Conn, Io, Wire, finish};
use crate::hello::{self, Answer, HelloError, SessionId};
use crate::link::Link;
use crate::peer::Peer;
use crate::tls::Tls;

/// The largest data payload a session's frame carries by default: 16 KiB, as the core's.
/// Much of the session's cost is per frame and per system call, and 64 KiB frames (with the
/// socket mark at a frame) cut it: bench mux's session wrote 101 KB a call against 29 KB, and
/// in the same binary, runs interleaved (loopback, 2 loaded cores, load 12–13) CPU per byte
/// fell from 508–512 to 405–422 ns/KB for earliest delivery and from 534–566 to 470–499 for
/// least-queued. They are not the default because the weights suffered: twice in five CI
/// runs the loopback share test's heaviest channel lost 160–170 turns for want of bytes (one
/// 64 KiB write from the application a frame, where 16 KiB frames make four of each write)
/// and read 0.495 against 0.533; and on an 8 Mbit/s emulated link a 64 KiB frame is 64 ms,
/// which moved the shares read over six seconds by 3 points. `bench mux --frame 65536 --lowat
/// 65536` measures them. Credit is counted in bytes (protocol version 4), so the frame size
/// does not change the receiver's memory bound.
pub const DEFAULT_FRAME: usize = 16 << 10;

/// Bytes of received frames a channel's queue to its application holds (at least 2 frames,
/// at most 8): beyond its credit window, this is what a channel holds for an application that
/// does not read. 8 frames of 16 KiB before frames grew to [`DEFAULT_FRAME`]; 4 of them now.
const TO_APP_BYTES: usize = 256 << 10;

/// How a session runs.
#[derive(Clone, Debug)]
pub struct MuxConfig {
    /// The pre-shared key both ends prove they hold.
    pub key: Vec<u8>,
    /// Connections a client opens (m).
    pub connections: usize,
    /// The sending half: frame size, per-channel buffer, scheduler. The frame is
    /// [`DEFAULT_FRAME`] by default, not the core's 16 KiB.
    pub send: SendConfig,
    /// The receiving half: per-channel window.
    pub recv: RecvConfig,
    /// `TCP_NOTSENT_LOWAT` for every connection, in bytes; over `shm:`, the same mark on the
    /// bytes a ring holds unread (`AsyncWriter::set_low_water`). One frame by default
    /// ([`DEFAULT_FRAME`]): the kernel holds at most about a frame a connection unsent, and
    /// the scheduler still chooses the rest; a mark below the frame cut each frame's write
    /// in pieces, a system call and a wake-up each.
    pub notsent_lowat: u32,
    /// Frames queued in user space per connection, ahead of the socket: the most a connection
    /// is given for one write. Three by default. Each write costs the kernel a packet or two
    /// whatever its size, and three 16 KiB frames with their heads (49 KB) go as one loopback
    /// packet where two went as a smaller one: in bench mux (AMD EPYC, 2 cores, load 17–18,
    /// four runs of each alternated) CPU per byte fell from 626–709 ns/KB to 510–628 with
    /// least-queued striping and from 559–667 to 505–568 with earliest delivery (×raw CPU
    /// 0.54–0.59 to 0.59–0.76, and 0.50–0.75 to 0.70–0.81), the weights held as closely
    /// (largest gap 0.03 points). Four cost as much as two: four frames and their heads
    /// (65,608 bytes) are just over loopback's largest packet (65,483), and the rest goes as
    /// a packet of its own (`nstat`: 44 KB a packet with three, 38 with two, 34 with four,
    /// raw TCP's in the counts). Larger writes still are discussed in the driver's pump.
    pub queue_frames: usize,
    /// How often credits are flushed and the kernel's view of each connection is read.
    pub tick: Duration,
    /// How often pinning re-pins by measured rates.
    pub rebalance_every: Duration,
    /// A client re-opens connections that die.
    pub reconnect: bool,
    /// Longest a handshake may take.
    pub handshake_timeout: Duration,
    /// Bytes in each of the two rings of an `shm:` client's connection (a power of two): the
    /// client allocates them, the server maps them.
    pub ring_capacity: usize,
    /// `SO_SNDBUF` for a client's TCP connections, which also turns off the kernel's buffer
    /// autotuning. `None` leaves the kernel's. Iwashima sized it by hand (Eq 7.5:
    /// `max(5000, B·RTT/(m+2))`), which caps each connection's window; `TCP_NOTSENT_LOWAT`
    /// replaces that by default, and this reproduces it.
    pub send_buffer: Option<u32>,
    /// A session left without any connection this long ends: a server's whose client has gone,
    /// a client's that cannot re-open any. Its channels that had not finished then end with an
    /// error saying what arrived ([`MuxError::Cut`]).
    pub idle_timeout: Duration,
    /// Once the application has let go of every handle, the session goes on until the peer has
    /// acknowledged every byte and every channel's close, or this long, whichever comes first
    /// (`SO_LINGER` for the whole session). Without it, what was still queued or unacknowledged
    /// was dropped with the session and the peer's channels stalled.
    pub linger: Duration,
    /// A connection on which nothing has arrived for this long is taken as dead (a path that
    /// drops everything does not close a connection: TCP would retry for many minutes): what it
    /// carried is sent again on the others and a client re-opens it. Each end pings every
    /// connection a few times in this interval, so a quiet connection is not a dead one.
    pub dead_after: Duration,
    /// Channels the peer may have *opening* at once: opened there and not yet accepted by the
    /// application here ([`Session::accept`]). The peer's [`Session::open`] waits past it, and
    /// this end gives leave for more as its application accepts (open credit, see
    /// `switchyard_core::carry::OpenWindow`), so a burst of opens is paced by the accepting
    /// application instead of queued here without bound or refused. At least 1.
    ///
    /// Each channel opening may carry its first window of data before it is accepted, so this
    /// also bounds that memory here. The default, 4,096, is the accept backlog's (so a peer
    /// never reaches the backlog) and keeps a burst flowing: through a tunnel on 2 busy cores,
    /// 10,000 clients at once took 11 s with it, as long as with no window, and 24 s with a
    /// window of 1,024, where each round of leave waited on both drivers' turns.
    pub open_window: u64,
    /// Channels the peer opened that may wait for the application to accept them. One more
    /// is refused: reset, with a reason its opener's application sees, and counted in
    /// [`SessionReport::refused`]. Never dropped: a channel dropped here ended empty at the
    /// peer, its first bytes read and thrown away. A peer keeps within
    /// [`MuxConfig::open_window`], so with the window no larger than this (the defaults) no
    /// channel is refused; a backlog set below the window refuses rather than makes openers wait.
    pub accept_backlog: usize,
    /// TLS for every connection: a client's settings for [`Session::connect`], a server's for
    /// [`Listener::bind`]. `None`: frames travel in the clear (the keyed hello still keeps
    /// strangers out). TCP only: TLS is for networks, and a `unix:` or `shm:` peer is refused
    /// with it ([`MuxError::Config`]); on one host the socket file's permissions say who may
    /// connect. Its cost: AES-128-GCM's sealing and opening alone take 120–123 ns of CPU per
    /// KB for both ends with aws-lc-rs (the `aws-lc` feature, the binary's default) and 157–165
    /// with ring, on a Xeon with VAES and AVX-512 (`cargo run --release -p switchyard-mux --features
    /// aws-lc --example aead_cost`): a third to a half of plain striping's whole cost on loopback.
    pub tls: Option<Tls>,
    /// With TLS, seal and open each connection's records on a task of the connection's own
    /// (the driver hands it the frames it chose, in order, at most 64 KiB waiting) instead of
    /// on the driver's task. Off by default: on a 2-core machine shared with other work (load
    /// 18–19), `bench mux` carried 0.38–0.55× plain's rate with it against 0.50–0.74× without,
    /// in the same rounds, at 992–1,131 ns of CPU per KB against 823–897 (the hand-overs and
    /// wake-ups cost more than spreading the crypto gains when no core is idle);
    /// `bench mux --cases stripe,stripe-tls,stripe-tls-task` compares the two on a machine.
    pub tls_task: bool,
    /// Bytes the session's channels may hold, in all, of what was read from local sockets (a
    /// tunnel's connections) and not yet acknowledged by the peer: a reader waits for room
    /// before it reads, so a client or target that sends faster than the far end takes is held
    /// back by TCP, never refused or dropped. A channel is granted at most half of what is
    /// free (Choudhury and Hahne's dynamic threshold, `switchyard_core::carry::Budget`): alone
    /// it holds at most half the budget, and one that holds its share while its far end does
    /// not read leaves the rest to the others.
    ///
    /// 32 MiB by default. Before it, each channel was bounded on its own (its buffer, 1 MiB,
    /// and the peer's credit), and at the end of a tunnel reading 10,000 web servers' 100 kB
    /// answers the session held 70–89 KiB a channel. A channel alone gets 16 MiB, ten times
    /// what its own buffer and credit let it hold, so one fast transfer is not slowed; 10,000
    /// busy channels get about 3 KiB each at once, and each is given more as the peer
    /// acknowledges, every round trip.
    pub session_buffer: u64,
}

impl Default for MuxConfig {
    fn default() -> Self {
        Self {
            key: Vec::new(),
            connections: 5,
            send: SendConfig { max_frame: DEFAULT_FRAME, ..SendConfig::default() },
            recv: RecvConfig::default(),
            notsent_lowat: DEFAULT_FRAME as u32,
            queue_frames: 3,
            tick: Duration::from_millis(20),
            rebalance_every: Duration::from_secs(1),
            reconnect: true,
            handshake_timeout: Duration::from_secs(5),
            ring_capacity: 256 << 10,
            send_buffer: None,
            idle_timeout: Duration::from_secs(60),
            linger: Duration::from_secs(60),
            dead_after: Duration::from_secs(15),
            open_window: 4096,
            accept_backlog: 4096,
            tls: None,
            tls_task: false,
            session_buffer: 32 << 20,
        }
    }
}

/// What went wrong with a session or a channel.
#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    /// A socket failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The failure.
        source: std::io::Error,
    },
    /// A connection's handshake failed.
    #[error(transparent)]
    Hello(#[from] HelloError),
    /// The handshake took too long.
    #[error("the handshake with {0} timed out")]
    Timeout(Peer),
    /// The TLS handshake failed: the server's certificate is not trusted or does not carry the
    /// expected name, or the peer does not speak TLS.
    #[error("TLS with {addr}: {source}")]
    Tls {
        /// The peer.
        addr: SocketAddr,
        /// rustls's reason.
        source: std::io::Error,
    },
    /// The core refused a channel operation.
    #[error(transparent)]
    Channel(#[from] switchyard_core::carry::SendError),
    /// The session has ended.
    #[error("the session has ended")]
    Ended,
    /// The session stopped while the channel waited for the peer's leave to open it (the peer
    /// had as many of this end's channels opening as it allows, [`MuxConfig::open_window`]).
    #[error(
        "no channel: the session stopped ({0}) while the channel waited for the far end to accept the ones before it"
    )]
    NotOpened(Stopped),
    /// The channel ended without its peer's close, or with frames missing: what arrived was
    /// all there is, and it is not all that was sent.
    #[error("{cut}: {why}")]
    Cut {
        /// What arrived.
        cut: Cut,
        /// Why the session stopped.
        why: Stopped,
    },
    /// The channel was reset, by the peer or by this end, and so abandoned both ways: what
    /// had not been delivered is gone, as with TCP's RST.
    #[error("channel {channel} was reset {by}: {reason}")]
    Reset {
        /// The channel.
        channel: u32,
        /// "by the peer" or "here".
        by: &'static str,
        /// Why.
        reason: String,
    },
    /// The configuration cannot work.
    #[error("configuration: {0}")]
    Config(String),
}

/// Why a session's driver stopped.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Stopped {
    /// No connection for [`MuxConfig::idle_timeout`].
    #[error("the session had no connection for {0:?}")]
    Alone(Duration),
    /// A re-opened connection was refused: the peer no longer has the session.
    #[error("the peer refused to rejoin the session ({0})")]
    Refused(String),
    /// Every handle was dropped, and the peer had not acknowledged everything within
    /// [`MuxConfig::linger`].
    #[error("the application let go of the session and {0:?} of lingering ran out")]
    Linger(Duration),
    /// Every handle was dropped.
    #[error("the application let go of the session")]
    Dropped,
}

/// One channel's counters, both directions.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChannelReport {
    /// The channel.
    pub id: u32,
    /// Its weight.
    pub weight: f64,
    /// What this end sent.
    pub sent: ChannelStats,
    /// What this end received.
    pub received: RecvStats,
}

/// A session's counters.
#[derive(Clone, Debug, Default)]
pub struct SessionReport {
    /// Connections open now.
    pub connections: usize,
    /// Connections lost so far.
    pub lost: u64,
    /// Channels the peer opened and this end refused (reset) because
    /// [`MuxConfig::accept_backlog`] channels were already waiting to be accepted.
    pub refused: u64,
    /// Channels reset so far, by either end (the refused included).
    pub reset: u64,
    /// Channels this end's application asked to open that wait for the peer's leave (its
    /// application has not yet accepted the ones before them).
    pub waiting_to_open: usize,
    /// Channels the peer opened that this end's application has not yet accepted.
    pub opening: u64,
    /// Per channel, in id order: the channels live now.
    pub channels: Vec<ChannelReport>,
    /// Channels finished both ways (or reset, refused ones included) and forgotten since the
    /// session began, and their counters added up (their `id` and `weight` are 0;
    /// `max_held_bytes` is the largest of theirs).
    pub retired: (u64, ChannelReport),
    /// Closes (half-closes: [`Channel::close`], `shutdown`) from this end's application that
    /// found the session's command queue full and waited for room. Backpressure, counted so
    /// that a test can show the queue was full: a close is never dropped.
    pub closes_waited: u64,
    /// Bytes read from local sockets into the channels (a tunnel's forwarders) and not yet
    /// acknowledged by the peer, now: at most [`MuxConfig::session_buffer`].
    pub buffered: u64,
    /// The most of those held at once since the session began.
    pub max_buffered: u64,
    /// Times a reader found no room in the session buffer for its channel and waited.
    pub buffer_waits: u64,
    /// Readers waiting for room now.
    pub waiting_for_buffer: usize,
}

/// Where an open's channel (or why there is none) goes.
pub(crate) type OpenReply = oneshot::Sender<Result<Channel, MuxError>>;

pub(crate) enum Command {
    Open {
        weight: f64,
        ordered: bool,
        reply: OpenReply,
    },
    /// `charged`: the bytes were read into room the session's budget granted, and are given
    /// back as the peer acknowledges them.
    Write {
        id: u32,
        data: Bytes,
        charged: bool,
        reply: oneshot::Sender<Result<(), MuxError>>,
    },
    SetWeight {
        id: u32,
        weight: f64,
        reply: oneshot::Sender<Result<(), MuxError>>,
    },
    Close {
        id: u32,
    },
    Reset {
        id: u32,
        reason: String,
    },
    Report {
        reply: oneshot::Sender<SessionReport>,
    },
}

/// What the session's background tasks tell its driver.
enum Event {
    /// A connection joined the session: its slot and its socket.
    Up { slot: usize, wire: Wire },
    /// The peer refused a re-opened connection: it no longer has the session.
    Refused(HelloError),
}

/// A session's handle: open channels, accept the peer's, read counters. Cloning it shares the
/// session; the session ends when every handle and channel is dropped.
#[derive(Clone)]
pub struct Session {
    commands: mpsc::Sender<Command>,
    incoming: Arc<tokio::sync::Mutex<mpsc::Receiver<Channel>>>,
    /// Wakes the driver when the application takes a channel: the queue has room for the
    /// next one the peer opened.
    room: Arc<Room>,
    /// Why the driver stopped, once it has.
    why: Arc<Mutex<Option<Stopped>>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// Opens a session of `config.connections` connections to `addr` over TCP.
    pub async fn connect(addr: SocketAddr, config: MuxConfig) -> Result<Self, MuxError> {
        Self::connect_to(Peer::Tcp(addr), config).await
    }

    /// Opens a session of `config.connections` connections to `peer`: over TCP, over a Unix
    /// socket, or over shared-memory rings (two per connection, of
    /// [`MuxConfig::ring_capacity`] bytes, handed over a Unix socket). The channels, their
    /// weights and the scheduling are the same over each.
    pub async fn connect_to(peer: Peer, config: MuxConfig) -> Result<Self, MuxError> {
        if config.connections == 0 || config.connections > usize::from(u16::MAX) {
            return Err(MuxError::Config(format!("{} connections: a session has 1 to 65,535", config.connections)));
        }
        refuse_local_tls(&peer, &config)?;
        let id = hello::new_session_id();
        let mut wires = Vec::with_capacity(config.connections);
        for index in 0..config.connections {
            wires.push(dial(&peer, &config, &id, index as u16, true).await?);
        }
        let (session, events, driver) = Driver::new(config, true, Some((peer, id)));
        for (slot, wire) in wires.into_iter().enumerate() {
            events.send(Event::Up { slot, wire }).await.map_err(|_| MuxError::Ended)?;
        }
        tokio::spawn(driver.run());
        Ok(session)
    }

    /// Opens a channel with `weight` (its share is `weight / Σ weights`); `ordered: false` lets
    /// the receiver take frames as they arrive. Waits while the peer already has as many of
    /// this end's channels opening as it allows (its [`MuxConfig::open_window`]), until its
    /// application accepts some; fails with [`MuxError::NotOpened`] if the session stops
    /// meanwhile.
    pub async fn open(&self, weight: f64, ordered: bool) -> Result<Channel, MuxError> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::Open { weight, ordered, reply }).await.map_err(|_| MuxError::Ended)?;
        rx.await.map_err(|_| MuxError::Ended)?
    }

    /// The next channel the peer opened; `None` once the session has ended.
    pub async fn accept(&self) -> Option<Channel> {
        let channel = self.incoming.lock().await.recv().await;
        if channel.is_some() {
            self.room.accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.room.bell.notify_one();
        channel
    }

    /// Waits until the session has stopped, and says why: what a client that must carry on
    /// (a tunnel's near end) waits on before it opens a new session.
    pub async fn stopped(&self) -> Stopped {
        self.commands.closed().await;
        self.why.lock().expect("never held across a panic").clone().unwrap_or(Stopped::Dropped)
    }

    /// The session's counters.
    pub async fn report(&self) -> Result<SessionReport, MuxError> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::Report { reply }).await.map_err(|_| MuxError::Ended)?;
        rx.await.map_err(|_| MuxError::Ended)
    }
}

/// TLS runs on TCP only (see [`MuxConfig::tls`]).
fn refuse_local_tls(peer: &Peer, config: &MuxConfig) -> Result<(), MuxError> {
    if peer.is_local() && config.tls.is_some() {
        return Err(MuxError::Config(format!(
            "TLS with {peer}: TLS is for networks, and this peer is on this host (the socket file's \
             permissions say who may connect); leave TLS unset, or use a TCP address"
        )));
    }
    Ok(())
}

/// Connects and joins connection `index` of session `id`, which it may start if `new`.
async fn dial(peer: &Peer, config: &MuxConfig, id: &SessionId, index: u16, new: bool) -> Result<Wire, MuxError> {
    let (path, shm) = match peer {
        Peer::Tcp(addr) => return dial_tcp(*addr, config, id, index, new).await,
        Peer::Unix(path) => (path, false),
        Peer::Shm(path) => (path, true),
    };
    let join = async {
        let mut link = Link::connect_local(path, shm, config.ring_capacity)
            .await
            .map_err(|source| MuxError::Io { what: format!("connecting to {peer}"), source })?;
        hello::join(&mut link, &config.key, id, index, new).await?;
        Ok(Wire { link, tls: None })
    };
    tokio::time::timeout(config.handshake_timeout, join).await.map_err(|_| MuxError::Timeout(peer.clone()))?
}

/// [`dial`] over TCP.
async fn dial_tcp(
    addr: SocketAddr,
    config: &MuxConfig,
    id: &SessionId,
    index: u16,
    new: bool,
) -> Result<Wire, MuxError> {
    let io = |what: &str| {
        let what = format!("{what} {addr}");
        move |source| MuxError::Io { what, source }
    };
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }
        .map_err(io("a socket for"))?;
    if let Some(bytes) = config.send_buffer {
        socket.set_send_buffer_size(bytes).map_err(io("setting SO_SNDBUF for"))?;
    }
    let mut stream = socket.connect(addr).await.map_err(io("connecting to"))?;
    let join = async {
        match &config.tls {
            None => {
                hello::join(&mut stream, &config.key, id, index, new).await?;
                Ok(Wire { link: Link::tcp(stream), tls: None })
            }
            Some(tls @ Tls::Client { .. }) => {
                let mut stream = tls.handshake(stream).await.map_err(|source| MuxError::Tls { addr, source })?;
                hello::join(&mut stream, &config.key, id, index, new).await?;
                Wire::from_tls(stream).await.map_err(|source| MuxError::Tls { addr, source })
            }
            Some(Tls::Server(_)) => {
                Err(MuxError::Config("a client needs a client's TLS settings (the certificates it trusts)".into()))
            }
        }
    };
    tokio::time::timeout(config.handshake_timeout, join).await.map_err(|_| MuxError::Timeout(Peer::Tcp(addr)))?
}

/// Accepts sessions: each client's connections, joined by session id.
#[derive(Debug)]
pub struct Listener {
    local: Peer,
    sessions: mpsc::Receiver<Session>,
    refusals: mpsc::Receiver<String>,
}

/// Lines about refused connections a listener keeps for its application to read
/// ([`Listener::refused`]); past this, lines are counted and the next one says how many.
const REFUSALS_KEPT: usize = 256;

impl Listener {
    /// Listens on `addr` over TCP.
    pub async fn bind(addr: SocketAddr, config: MuxConfig) -> Result<Self, MuxError> {
        Self::bind_to(Peer::Tcp(addr), config).await
    }

    /// Listens at `peer`: a TCP address, or for `unix:PATH` and `shm:PATH` alike a Unix
    /// socket at `PATH`, which takes clients of both kinds. A socket file left at `PATH` by a
    /// server that has gone is replaced; one that a live server answers on, or a file that is
    /// not a socket, is refused. The file is removed once the listener, and every session it
    /// accepted, has ended.
    pub async fn bind_to(peer: Peer, config: MuxConfig) -> Result<Self, MuxError> {
        if matches!(config.tls, Some(Tls::Client { .. })) {
            return Err(MuxError::Config("a server needs a server's TLS settings (its certificate and key)".into()));
        }
        refuse_local_tls(&peer, &config)?;
        let (acceptor, local) = match &peer {
            Peer::Tcp(addr) => {
                let listener = TcpListener::bind(addr)
                    .await
                    .map_err(|source| MuxError::Io { what: format!("listening on {addr}"), source })?;
                let local =
                    listener.local_addr().map_err(|source| MuxError::Io { what: "local address".into(), source })?;
                (Acceptor::Tcp(listener), Peer::Tcp(local))
            }
            Peer::Unix(path) | Peer::Shm(path) => {
                let listener = bind_unix(path)?;
                // The file is removed at the end only if it is still ours.
                let inode = std::fs::metadata(path).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok();
                (Acceptor::Unix(listener, path.clone(), inode), peer.clone())
            }
        };
        let (tx, sessions) = mpsc::channel(16);
        let (said, refusals) = mpsc::channel(REFUSALS_KEPT);
        tokio::spawn(accept_loop(acceptor, config, tx, Refusals { said, unsaid: Arc::default() }));
        Ok(Self { local, sessions, refusals })
    }

    /// The TCP address it listens on (with the port chosen, if it was bound to port 0).
    ///
    /// # Panics
    ///
    /// For a listener on a Unix socket (`unix:` or `shm:`), which has no such address: see
    /// [`local`](Self::local).
    pub fn local_addr(&self) -> SocketAddr {
        match &self.local {
            Peer::Tcp(addr) => *addr,
            local => panic!("{local} is not a TCP address: use Listener::local"),
        }
    }

    /// Where it listens, as a client would name it.
    pub fn local(&self) -> &Peer {
        &self.local
    }

    /// The next new session.
    pub async fn accept(&mut self) -> Option<Session> {
        self.sessions.recv().await
    }

    /// The connections refused, a line each for the operator ("127.0.0.1:5000: key mismatch:
    /// …", "the client does not speak TLS: …"): a server that only dropped them left a client's
    /// operator guessing and its own saying nothing. Taken once (a second call gets a queue
    /// that is closed), so the caller can read it beside [`Listener::accept`].
    pub fn refusals(&mut self) -> mpsc::Receiver<String> {
        std::mem::replace(&mut self.refusals, mpsc::channel(1).1)
    }
}

/// Binds a Unix socket at `path`, replacing a stale socket file: one whose server has gone
/// (nobody answers on it).
fn bind_unix(path: &Path) -> Result<UnixListener, MuxError> {
    let io = |what: String| move |source| MuxError::Io { what, source };
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(MuxError::Config(format!(
                    "{}: exists and is not a socket; choose another path (nothing was removed)",
                    path.display()
                )));
            }
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => {
                    return Err(MuxError::Config(format!(
                        "{}: a server is listening there already; stop it or choose another path",
                        path.display()
                    )));
                }
                // Nobody listens: left by a server that has gone.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(io(format!("removing the stale socket {}", path.display())))?;
                }
                Err(e) => return Err(io(format!("checking the socket {}", path.display()))(e)),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("looking at {}", path.display()))(e)),
    }
    UnixListener::bind(path).map_err(io(format!("listening on {}", path.display())))
}

/// What a server accepts connections from.
enum Acceptor {
    Tcp(TcpListener),
    /// The socket, its file and the file's inode: the file is removed when the server is done
    /// with it, unless another has replaced it since.
    Unix(UnixListener, PathBuf, Option<u64>),
}

/// An accepted connection before its handshake.
enum Accepted {
    Tcp(tokio::net::TcpStream, SocketAddr),
    Unix(tokio::net::UnixStream),
}

impl Acceptor {
    async fn accept(&self) -> std::io::Result<Accepted> {
        match self {
            Self::Tcp(l) => l.accept().await.map(|(s, peer)| Accepted::Tcp(s, peer)),
            Self::Unix(l, ..) => l.accept().await.map(|(s, _)| Accepted::Unix(s)),
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        if let Self::Unix(_, path, Some(inode)) = self {
            let still_ours =
                std::fs::symlink_metadata(&*path).is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == *inode);
            if still_ours {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Where the accept loop says why it refused a connection.
#[derive(Clone)]
struct Refusals {
    said: mpsc::Sender<String>,
    /// Lines that found the queue full: the next line says how many.
    unsaid: Arc<std::sync::atomic::AtomicU64>,
}

impl Refusals {
    fn say(&self, line: String) {
        use std::sync::atomic::Ordering::Relaxed;
        let missed = self.unsaid.swap(0, Relaxed);
        let line = if missed > 0 { format!("{line} (and {missed} more refusals not shown)") } else { line };
        if self.said.try_send(line).is_err() {
            self.unsaid.fetch_add(missed + 1, Relaxed);
        }
    }
}

async fn accept_loop(listener: Acceptor, config: MuxConfig, sessions: mpsc::Sender<Session>, refusals: Refusals) {
    let known: Arc<Mutex<HashMap<SessionId, mpsc::Sender<Event>>>> = Arc::default();
    loop {
        // Once the application has dropped its listener, connections are still taken for the
        // sessions it accepted (a client re-opens the ones that die), until none is left.
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = tokio::time::sleep(Duration::from_secs(1)), if sessions.is_closed() => {
                let live = known.lock().expect("no task panics holding it").values().any(|tx| !tx.is_closed());
                if !live {
                    return;
                }
                continue;
            }
        };
        let accepted = match accepted {
            Ok(accepted) => accepted,
            // Out of descriptors (or another passing failure): a pause, not a spin on the
            // error; the connections wait in the backlog.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let (config, known, sessions, refusals) =
            (config.clone(), Arc::clone(&known), sessions.clone(), refusals.clone());
        let from = match &accepted {
            Accepted::Tcp(_, peer) => peer.to_string(),
            Accepted::Unix(_) => "a local client".to_owned(),
        };
        // Each handshake on its own task, so a slow or silent stranger holds up no one.
        tokio::spawn(async move {
            let join = async {
                let (claim, mut stream) = match (accepted, &config.tls) {
                    (Accepted::Tcp(stream, _), None) => {
                        let mut link = Link::tcp(stream);
                        (hello::accept(&mut link, &config.key).await?, Stream::Plain(link))
                    }
                    (Accepted::Tcp(stream, peer), Some(tls)) => {
                        let mut stream =
                            tls.handshake(stream).await.map_err(|source| MuxError::Tls { addr: peer, source })?;
                        (hello::accept(&mut stream, &config.key).await?, Stream::Tls(Box::new(stream)))
                    }
                    (Accepted::Unix(stream), _) => {
                        let mut link = Link::accept_local(stream, config.handshake_timeout)
                            .await
                            .map_err(|source| MuxError::Io { what: "a local client's link".into(), source })?;
                        (hello::accept(&mut link, &config.key).await?, Stream::Plain(link))
                    }
                };
                // Looked up and, if new, created under one hold of the lock: two connections
                // of a new session joining at once each found none and made a session of their
                // own, and the frames one of them carried never reached the application.
                let (answer, found) = {
                    let mut known = known.lock().expect("no task panics holding it");
                    match known.get(&claim.session) {
                        Some(tx) if !tx.is_closed() => (Answer::Joined, Some((tx.clone(), None))),
                        // Ended here (or, below, forgotten since): a connection the client
                        // re-opened. Taken as a new session it would start from frame 0 in the
                        // middle of the client's channels.
                        Some(_) => (Answer::NoSession, None),
                        None if !claim.new => (Answer::NoSession, None),
                        None if sessions.is_closed() => (Answer::NotAccepting, None),
                        None => {
                            let (session, events, driver) = Driver::new(config.clone(), false, None);
                            // Sessions that have ended are forgotten as new ones come: a
                            // rejoin says it is one, so it is refused all the same.
                            known.retain(|_, tx| !tx.is_closed());
                            known.insert(claim.session, events.clone());
                            (Answer::Joined, Some((events, Some((session, driver)))))
                        }
                    }
                };
                stream.answer(&config.key, &claim, answer).await?;
                Ok::<_, MuxError>((claim, stream.into_wire().await?, answer, found))
            };
            // A stranger, a wrong key, a failed TLS handshake, a timeout or a refusal: the
            // connection is dropped (a refused client has been told why), and the operator here
            // is told too.
            let (claim, wire, answer, found) = match tokio::time::timeout(config.handshake_timeout, join).await {
                Ok(Ok(joined)) => joined,
                Ok(Err(e)) => return refusals.say(format!("{from}: {e}")),
                Err(_) => {
                    return refusals.say(format!("{from}: no hello within {:?}", config.handshake_timeout));
                }
            };
            let Some((events, new)) = found else {
                return refusals.say(match answer {
                    Answer::NotAccepting => format!("{from}: a new session, and this end takes no more"),
                    _ => format!(
                        "{from}: a connection of a session this end no longer has (it ended here, or this end \
                         restarted); the client opens a new session"
                    ),
                });
            };
            if let Some((session, driver)) = new {
                tokio::spawn(driver.run());
                if sessions.send(session).await.is_err() {
                    return;
                }
            }
            let _ = events.send(Event::Up { slot: usize::from(claim.index), wire }).await;
        });
    }
}

/// A server's side of a connection between its hello and its answer.
enum Stream {
    Plain(Link),
    Tls(Box<crate::tls::TlsStream>),
}

impl Stream {
    async fn answer(&mut self, key: &[u8], claim: &hello::Claim, answer: Answer) -> Result<(), MuxError> {
        match self {
            Self::Plain(s) => hello::answer(s, key, claim, answer).await?,
            Self::Tls(s) => hello::answer(s, key, claim, answer).await?,
        }
        Ok(())
    }

    async fn into_wire(self) -> Result<Wire, MuxError> {
        match self {
            Self::Plain(link) => Ok(Wire { link, tls: None }),
            Self::Tls(s) => Wire::from_tls(*s)
                .await
                .map_err(|source| MuxError::Io { what: "the TLS records of a client's connection".into(), source }),
        }
    }
}

/// The first wait before a lost connection is re-opened.
const REDIAL_FIRST: Duration = Duration::from_millis(50);
/// The longest wait between attempts to re-open a connection.
const REDIAL_MOST: Duration = Duration::from_secs(5);
/// A connection that lived this long resets its slot's back-off.
const REDIAL_SETTLED: Duration = Duration::from_secs(2);

/// Bytes of frames one pump hands the connections before the driver takes commands again.
const PUMP_BUDGET: usize = 256 << 10;
/// How often a connection's `TCP_INFO` is read while it is being written to.
const VIEW_EVERY: Duration = Duration::from_millis(5);
/// How often an idle connection's `TCP_INFO` is read.
const VIEW_IDLE: Duration = Duration::from_millis(50);

/// Adds a retired channel's counters to the session's totals.
fn add_up(totals: &mut ChannelReport, sent: ChannelStats, received: RecvStats) {
    let (t, s) = (&mut totals.sent, sent);
    t.sent_bytes += s.sent_bytes;
    t.sent_frames += s.sent_frames;
    t.resent_frames += s.resent_frames;
    t.rescued_frames += s.rescued_frames;
    t.idle_turns += s.idle_turns;
    t.blocked_turns += s.blocked_turns;
    let (t, r) = (&mut totals.received, received);
    t.delivered_bytes += r.delivered_bytes;
    t.delivered_frames += r.delivered_frames;
    t.duplicates += r.duplicates;
    t.max_held_bytes = t.max_held_bytes.max(r.max_held_bytes);
    t.held_bytes_sum += r.held_bytes_sum;
    t.arrivals += r.arrivals;
    t.reorder_wait_ns += r.reorder_wait_ns;
}

/// Connections the driver should work on: those readable, and those writable with bytes
/// waiting. Registers to be woken for the others.
fn poll_ready(conns: &mut [Option<Conn>], cx: &mut std::task::Context<'_>) -> std::task::Poll<Vec<Ready>> {
    let ready: Vec<Ready> = conns
        .iter_mut()
        .enumerate()
        .filter_map(|(slot, c)| {
            let c = c.as_mut()?;
            let readable = c.poll_read_ready(cx).is_ready();
            let writable = c.full && c.poll_write_ready(cx).is_ready();
            (readable || writable).then_some(Ready { slot, readable, writable })
        })
        .collect();
    if ready.is_empty() { std::task::Poll::Pending } else { std::task::Poll::Ready(ready) }
}

/// What [`poll_ready`] found a connection ready for.
struct Ready {
    slot: usize,
    readable: bool,
    writable: bool,
}

/// How a channel's receiving side ended, shared with its [`Channel`]: set once, before the
/// queue to the application closes. A queue that closes with nothing set was cut off too (the
/// driver is gone).
pub(crate) type EndSlot = Arc<Mutex<Option<End>>>;

/// A channel's end as its driver leaves it.
pub(crate) struct End {
    /// Bytes that had arrived, in order, and did not fit the queue to the application when the
    /// session stopped: the channel hands them over before its end.
    pub(crate) tail: VecDeque<Bytes>,
    /// `None`: finished (every byte, then the peer's close); `Some`: cut off, and why.
    pub(crate) cut: Option<(Cut, Stopped)>,
    /// Reset (by whom, and why): the application gets that instead of anything else.
    pub(crate) reset: Option<(&'static str, String)>,
}

struct Ends {
    to_app: Option<mpsc::Sender<Bytes>>,
    end: EndSlot,
    /// Whether the application still holds the channel (a dropped one sends no more).
    held: std::sync::Weak<()>,
    pending: VecDeque<(Bytes, oneshot::Sender<Result<(), MuxError>>)>,
    close_when_sent: bool,
    /// Reset, by whom and why: writes fail with it until the application lets go.
    reset: Option<(&'static str, String)>,
    /// Which of its written bytes are charged to the session's budget.
    charges: Charges,
}

/// A channel's writes as offsets into its byte stream, and the ranges of them charged to the
/// session's budget and not yet acknowledged by the peer, in order: the peer acknowledges a
/// channel's bytes in the order written, so an acknowledged offset frees a prefix.
#[derive(Debug, Default)]
struct Charges {
    /// Bytes of writes taken so far: the offset of the next.
    written: u64,
    charged: VecDeque<(u64, u64)>,
}

impl Charges {
    /// A write of `len` bytes taken, charged to the budget or not.
    fn write(&mut self, len: u64, charged: bool) {
        let end = self.written + len;
        if charged {
            self.charged.push_back((self.written, end));
        }
        self.written = end;
    }

    /// The peer has every byte before offset `acked`: how many charged bytes that frees.
    fn acked(&mut self, acked: u64) -> u64 {
        let mut released = 0;
        while let Some((from, to)) = self.charged.front_mut() {
            if acked <= *from {
                break;
            }
            let upto = acked.min(*to);
            released += upto - *from;
            *from = upto;
            if from == to {
                self.charged.pop_front();
            }
        }
        released
    }
}

struct Driver {
    config: MuxConfig,
    sender: Sender,
    receiver: Receiver,
    conns: Vec<Option<Conn>>,
    lost: u64,
    refused: u64,
    resets: u64,
    /// Channels retired, and their counters added up ([`SessionReport::retired`]).
    retired: (u64, ChannelReport),
    ends: BTreeMap<u32, Ends>,
    next_id: u32,
    urgent: VecDeque<Frame>,
    commands: mpsc::Receiver<Command>,
    command_tx: mpsc::WeakSender<Command>,
    events: mpsc::Receiver<Event>,
    event_tx: mpsc::Sender<Event>,
    incoming: mpsc::Sender<Channel>,
    /// Channels the peer opened that the queue to the application had no room for yet, in the
    /// order they came: they wait here, never dropped (a dropped one ended empty at the peer,
    /// its first bytes read and thrown away).
    opened: VecDeque<Channel>,
    /// The application's ends call here: a full queue to the application has room, a channel
    /// was let go of.
    room: Arc<Room>,
    /// Channels with writes waiting for room in the core, or a close to make once their
    /// writes are in: each turn looks at these, not at every channel.
    writing: BTreeSet<u32>,
    /// The peer's channels opening here, and the leave it has to open more (the core's).
    open_window: OpenWindow,
    /// The application's opens waiting for the peer's leave, in the order asked.
    waiting_opens: VecDeque<(f64, bool, OpenReply)>,
    /// [`Room::accepted`] as last counted into `open_window`.
    accepted_seen: u64,
    started: Instant,
    /// The client's peer and session, for re-opening connections.
    redial: Option<(Peer, SessionId)>,
    /// Per slot, how long the next re-open waits: it doubles while re-opened connections die
    /// young, so that a peer that takes connections and drops them is not dialled in a loop.
    backoff: Vec<Duration>,
    /// Why the driver is stopping, once it is.
    stopped: Option<Stopped>,
    /// Where the handles read it ([`Session::stopped`]).
    why: Arc<Mutex<Option<Stopped>>>,
}

impl Driver {
    fn new(config: MuxConfig, client: bool, redial: Option<(Peer, SessionId)>) -> (Session, mpsc::Sender<Event>, Self) {
        let (command_tx, commands) = mpsc::channel(64);
        let (event_tx, events) = mpsc::channel(256);
        let (incoming, incoming_rx) = mpsc::channel(64);
        let room = Arc::new(Room::new(config.session_buffer));
        let session = Session {
            commands: command_tx.clone(),
            incoming: Arc::new(tokio::sync::Mutex::new(incoming_rx)),
            room: Arc::clone(&room),
            why: Arc::default(),
        };
        let why = Arc::clone(&session.why);
        let driver = Self {
            sender: Sender::new(config.send),
            receiver: Receiver::new(config.recv),
            open_window: OpenWindow::new(config.open_window),
            waiting_opens: VecDeque::new(),
            accepted_seen: 0,
            config,
            conns: Vec::new(),
            lost: 0,
            refused: 0,
            resets: 0,
            retired: (0, ChannelReport::default()),
            ends: BTreeMap::new(),
            // Clients number their channels odd, servers even, so both can open at once.
            next_id: if client { 1 } else { 2 },
            urgent: VecDeque::new(),
            commands,
            command_tx: command_tx.downgrade(),
            events,
            event_tx: event_tx.clone(),
            incoming,
            opened: VecDeque::new(),
            room,
            writing: BTreeSet::new(),
            started: Instant::now(),
            redial,
            backoff: Vec::new(),
            stopped: None,
            why,
        };
        (session, event_tx, driver)
    }

    async fn run(mut self) {
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_rebalance = Instant::now();
        let mut alone_since: Option<Instant> = None;
        // Set once every handle is gone: from then on the driver only finishes what it holds.
        let mut lingering: Option<Instant> = None;
        let mut busy = false;
        let mut more = false;
        while self.stopped.is_none() {
            tokio::select! {
                command = self.commands.recv(), if lingering.is_none() => match command {
                    // The rest waiting are taken below.
                    Some(c) => self.on_command(c),
                    // Every handle is gone: nobody can send or read any more, but what they
                    // sent is still owed to the peer.
                    None => {
                        lingering = Some(Instant::now());
                        let ids: Vec<u32> = self.ends.keys().copied().collect();
                        for id in ids {
                            self.close_when_sent(id);
                        }
                    }
                },
                Some(event) = self.events.recv() => match event {
                    Event::Up { slot, wire } => self.connection_up(slot, wire),
                    Event::Refused(why) => self.stopped = Some(Stopped::Refused(why.to_string())),
                },
                ready = std::future::poll_fn(|cx| poll_ready(&mut self.conns, cx)) => {
                    self.on_ready(&ready);
                    busy = true;
                }
                () = self.room.bell.notified() => {}
                // The last pump stopped at its budget with frames still to go.
                () = std::future::ready(()), if more => {}
                _ = tick.tick() => {
                    if self.conns.iter().all(Option::is_none) {
                        if alone_since.get_or_insert_with(Instant::now).elapsed() >= self.config.idle_timeout {
                            self.stopped = Some(Stopped::Alone(self.config.idle_timeout));
                        }
                    } else {
                        alone_since = None;
                    }
                    self.keep_alive();
                    self.retire_finished();
                    self.receiver.flush_acks();
                    if last_rebalance.elapsed() >= self.config.rebalance_every {
                        last_rebalance = Instant::now();
                        self.sender.rebalance();
                    }
                }
            }
            // Every command waiting, whichever branch woke the driver, not one per turn: a
            // turn also reads and writes every ready connection, and taking one write per turn
            // left channels short of bytes while their connections had room.
            while let Ok(c) = self.commands.try_recv() {
                self.on_command(c);
            }
            more = self.pump();
            if let Some(since) = lingering
                && self.stopped.is_none()
            {
                let written = self.writing.iter().all(|id| self.ends.get(id).is_none_or(|e| e.pending.is_empty()));
                if self.sender.is_idle() && written {
                    self.stopped = Some(Stopped::Dropped);
                } else if since.elapsed() >= self.config.linger {
                    self.stopped = Some(Stopped::Linger(self.config.linger));
                }
            }
            if std::mem::take(&mut busy) || more {
                // Sockets that stay ready would keep the driver on its thread turn after turn,
                // and the channels' own tasks (the application writing and reading) on the
                // same thread would wait: they then fell behind and channels went idle.
                tokio::task::yield_now().await;
            }
        }
        // Channels that have not finished end with what arrived, as an error: an application
        // must not take a session that stopped for a channel that ended.
        // What had arrived and not yet gone to the application goes with the end, so a peer
        // that sent everything and went away leaves its channels whole.
        let why = self.stopped.clone().unwrap_or(Stopped::Dropped);
        self.room.budget.close();
        *self.why.lock().expect("never held across a panic") = Some(why.clone());
        for (_, _, reply) in self.waiting_opens.drain(..) {
            let _ = reply.send(Err(MuxError::NotOpened(why.clone())));
        }
        for (id, ends) in &mut self.ends {
            if ends.to_app.is_some() {
                let tail = std::iter::from_fn(|| self.receiver.read(*id)).collect();
                let cut = match self.receiver.end(*id) {
                    ChannelEnd::Finished => None,
                    ChannelEnd::Cut(cut) => Some((cut, why.clone())),
                };
                *ends.end.lock().expect("never held across a panic") = Some(End { tail, cut, reset: None });
                // Only now: the application looks for the end as soon as its queue closes.
                ends.to_app = None;
            }
        }
        // What was handed to a connection is written out in the background, then the
        // connection is closed.
        for conn in self.conns.drain(..).flatten() {
            let limit = self.config.handshake_timeout;
            tokio::spawn(async move {
                let _ = tokio::time::timeout(limit, finish(conn)).await;
            });
        }
    }

    /// Forgets the channels finished both ways: every byte each way delivered, both closes
    /// acknowledged, and the application's end handed its end. A tunnel opens a channel per
    /// TCP connection; kept for ever, they made every turn of the driver, and every frame's
    /// scheduling in the core, scan every channel the session had ever carried.
    fn retire_finished(&mut self) {
        let finished: Vec<u32> = self
            .ends
            .iter()
            .filter(|(id, e)| match e.reset {
                // Once the application has let go, and a reset sent from here was acknowledged.
                Some(_) => {
                    e.held.strong_count() == 0 && (!self.sender.has_channel(**id) || self.sender.is_delivered(**id))
                }
                None => {
                    e.to_app.is_none()
                        && e.pending.is_empty()
                        && self.receiver.is_finished(**id)
                        && self.sender.is_delivered(**id)
                }
            })
            .map(|(id, _)| *id)
            .collect();
        for id in finished {
            self.ends.remove(&id);
            let (count, totals) = &mut self.retired;
            *count += 1;
            add_up(totals, self.sender.stats(id).unwrap_or_default(), self.receiver.stats(id).unwrap_or_default());
            self.sender.forget(id);
            self.receiver.retire(id);
            self.room.budget.forget(id);
        }
    }

    /// Ends channel `id` for the application with a reset (`by` whom, and why): writes waiting
    /// and to come fail with it, and reading ends with it.
    fn end_reset(&mut self, id: u32, by: &'static str, reason: String) {
        self.resets += 1;
        // What it held will not be acknowledged now.
        self.room.budget.forget(id);
        let Some(ends) = self.ends.get_mut(&id) else { return };
        let error = || MuxError::Reset { channel: id, by, reason: reason.clone() };
        for (_, reply) in ends.pending.drain(..) {
            let _ = reply.send(Err(error()));
        }
        *ends.end.lock().expect("never held across a panic") =
            Some(End { tail: VecDeque::new(), cut: None, reset: Some((by, reason.clone())) });
        ends.to_app = None;
        ends.reset = Some((by, reason));
        self.close_when_sent(id);
    }

    /// The channel sends no more once its writes waiting are in: its close is made then.
    fn close_when_sent(&mut self, id: u32) {
        if let Some(ends) = self.ends.get_mut(&id) {
            ends.close_when_sent = true;
            self.writing.insert(id);
        }
    }

    /// Refuses a channel the peer opened: reset, with `reason`. Its ends are kept, with nobody
    /// holding them, until the peer acknowledges the reset and [`Driver::retire_finished`]
    /// forgets it: without them the core held every refused channel for the session's life
    /// (the retirement looks only at channels with ends): 80 of a burst of 120 past a backlog
    /// of 8 stayed in its report for good.
    fn refuse(&mut self, channel: u32, reason: String) {
        self.refused += 1;
        self.resets += 1;
        let _ = self.sender.reset(channel, reason.clone());
        self.receiver.abandon(channel);
        let ends = Ends {
            to_app: None,
            end: EndSlot::default(),
            held: std::sync::Weak::new(),
            pending: VecDeque::new(),
            close_when_sent: true,
            reset: Some(("here", reason)),
            charges: Charges::default(),
        };
        self.ends.insert(channel, ends);
    }

    /// Pings every connection a few times per [`MuxConfig::dead_after`], and takes one that
    /// has been silent that long as dead.
    fn keep_alive(&mut self) {
        let now = Instant::now();
        let every = self.config.dead_after / 4;
        let mut dead = Vec::new();
        for (slot, conn) in self.conns.iter_mut().enumerate() {
            let Some(conn) = conn else { continue };
            if now.duration_since(conn.heard) >= self.config.dead_after {
                dead.push(slot);
            } else if now.duration_since(conn.pinged) >= every {
                conn.pinged = now;
                conn.push(&Frame::Ping { nonce: now.duration_since(self.started).as_nanos() as u64, pong: false });
            }
        }
        for slot in dead {
            self.lose(slot);
        }
    }

    fn now(&self) -> Nanos {
        Nanos(self.started.elapsed().as_nanos() as u64)
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Open { weight, ordered, reply } => {
                self.waiting_opens.push_back((weight, ordered, reply));
                self.open_waiting();
            }
            Command::Write { id, data, charged, reply } => match self.ends.get_mut(&id) {
                Some(Ends { reset: Some((by, reason)), .. }) => {
                    self.room.budget.forget(id);
                    let _ = reply.send(Err(MuxError::Reset { channel: id, by, reason: reason.clone() }));
                }
                Some(ends) if !ends.close_when_sent => {
                    ends.charges.write(data.len() as u64, charged);
                    ends.pending.push_back((data, reply));
                    self.writing.insert(id);
                }
                _ => {
                    // Refused: these bytes go no further (those before them still may).
                    if charged {
                        self.room.budget.give_back(id, data.len() as u64);
                    }
                    let _ = reply.send(Err(switchyard_core::carry::SendError::Closed(id).into()));
                }
            },
            Command::SetWeight { id, weight, reply } => {
                let _ = reply.send(self.sender.set_weight(id, weight).map_err(MuxError::from));
            }
            Command::Close { id } => self.close_when_sent(id),
            Command::Reset { id, reason } => {
                if self.ends.get(&id).is_some_and(|e| e.reset.is_none()) {
                    let _ = self.sender.reset(id, reason.clone());
                    self.receiver.abandon(id);
                    self.end_reset(id, "here", reason);
                }
            }
            Command::Report { reply } => {
                let weights: BTreeMap<u32, f64> = self.sender.weights().into_iter().collect();
                let ids: BTreeSet<u32> = weights.keys().copied().chain(self.receiver.channels()).collect();
                let channels = ids
                    .into_iter()
                    .map(|id| ChannelReport {
                        id,
                        weight: weights.get(&id).copied().unwrap_or(0.0),
                        sent: self.sender.stats(id).unwrap_or_default(),
                        received: self.receiver.stats(id).unwrap_or_default(),
                    })
                    .collect();
                let connections = self.conns.iter().flatten().count();
                let budget = self.room.budget.counts();
                let _ = reply.send(SessionReport {
                    connections,
                    lost: self.lost,
                    refused: self.refused,
                    reset: self.resets,
                    waiting_to_open: self.waiting_opens.len(),
                    opening: self.open_window.opening(),
                    channels,
                    retired: self.retired,
                    closes_waited: self.room.closes_waited.load(std::sync::atomic::Ordering::Relaxed),
                    buffered: budget.held,
                    max_buffered: budget.peak,
                    buffer_waits: budget.waits,
                    waiting_for_buffer: budget.waiting,
                });
            }
        }
    }

    /// Opens the channels the application asked for, in order, as far as the peer's leave goes;
    /// the rest wait for more ([`Frame::OpenCredit`]). An asker that gave up is passed over,
    /// its leave kept for the next.
    fn open_waiting(&mut self) {
        while self.sender.may_open() {
            let Some((weight, ordered, reply)) = self.waiting_opens.pop_front() else { return };
            if reply.is_closed() {
                continue;
            }
            let id = self.next_id;
            let result = self.sender.open(id, weight, ordered).map_err(MuxError::from).and_then(|()| {
                self.next_id += 2;
                self.channel_ends(id).ok_or(MuxError::Ended)
            });
            let _ = reply.send(result);
        }
    }

    /// Makes the application's ends of channel `id`; `None` if the application has let go of
    /// every handle (the driver is about to stop), and then what the channel carries is read
    /// and dropped, so that the peer's credit still flows.
    fn channel_ends(&mut self, id: u32) -> Option<Channel> {
        let end = EndSlot::default();
        let Some(commands) = self.command_tx.upgrade() else {
            // Nobody will send on it either.
            let ends = Ends {
                to_app: None,
                end,
                held: std::sync::Weak::new(),
                pending: VecDeque::new(),
                close_when_sent: true,
                reset: None,
                charges: Charges::default(),
            };
            self.ends.insert(id, ends);
            self.writing.insert(id);
            return None;
        };
        let (to_app, from_session) = mpsc::channel((TO_APP_BYTES / self.config.send.max_frame.max(1)).clamp(2, 8));
        let held = Arc::new(());
        let ends = Ends {
            to_app: Some(to_app),
            end: Arc::clone(&end),
            held: Arc::downgrade(&held),
            pending: VecDeque::new(),
            close_when_sent: false,
            reset: None,
            charges: Charges::default(),
        };
        self.ends.insert(id, ends);
        Some(Channel::new(id, commands, from_session, Arc::clone(&self.room), end, held))
    }

    /// Reads from the connections in `ready` and hands their frames to the core; pumping
    /// afterwards writes to those with room.
    fn on_ready(&mut self, ready: &[Ready]) {
        let mut frames = Vec::new();
        for &Ready { slot, readable, writable } in ready {
            let Some(conn) = self.conns[slot].as_mut() else { continue };
            if writable {
                conn.full = false;
            }
            if !readable {
                continue;
            }
            let io = conn.read(&mut frames);
            // Frames decoded before a failure are good: the core takes them.
            for frame in frames.drain(..) {
                if !self.on_frame(slot, frame) {
                    break;
                }
            }
            match io {
                Io::Fine => {}
                Io::Lost => self.lose(slot),
                Io::Broken => {
                    self.drop_broken(slot);
                }
            }
        }
    }

    /// The connection in `slot` is gone: what it carried unacknowledged is sent again on the
    /// others, and a client dials it again.
    fn lose(&mut self, slot: usize) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::take) else { return };
        self.forget(slot);
        self.lost += 1;
        if self.backoff.len() <= slot {
            self.backoff.resize(slot + 1, REDIAL_FIRST);
        }
        // A connection that lived a while was a good one: its replacement is dialled soon.
        self.backoff[slot] = match conn.opened.elapsed() >= REDIAL_SETTLED {
            true => REDIAL_FIRST,
            false => (self.backoff[slot] * 2).min(REDIAL_MOST),
        };
        self.redial(slot, self.backoff[slot]);
    }

    /// The peer broke the protocol on `slot`: the connection is not to be trusted, and is not
    /// dialled again. `false` if there was no connection there.
    fn drop_broken(&mut self, slot: usize) -> bool {
        let had = self.conns.get_mut(slot).and_then(Option::take).is_some();
        if had {
            self.forget(slot);
        }
        had
    }

    /// Both halves learn that whatever was in flight on `slot` may be gone: frames to be sent
    /// again, credits to be given again.
    fn forget(&mut self, slot: usize) {
        self.sender.connection_lost(slot);
        self.receiver.connection_lost();
        self.open_window.connection_lost();
    }

    fn connection_up(&mut self, slot: usize, mut wire: Wire) {
        wire.link.tune(self.config.notsent_lowat);
        if self.conns.len() <= slot {
            self.conns.resize_with(slot + 1, || None);
        }
        // The peer's frames are taken to be the size of ours.
        if let Some(old) = self.conns[slot].replace(Conn::new(wire, self.config.send.max_frame, self.config.tls_task)) {
            // A connection re-opened in a slot the driver still held: the old one is finished.
            drop(old);
            self.forget(slot);
        }
        self.sender.connection_up(slot);
        // Bytes the peer sent right after its hello may already be in hand (rustls reads past
        // the handshake), and they will not make the socket readable again.
        self.on_ready(&[Ready { slot, readable: true, writable: false }]);
    }

    /// A client re-opens a lost connection in the background after `wait`, backing off while
    /// it fails. A server that answers that it no longer has the session ends this one.
    fn redial(&self, slot: usize, mut wait: Duration) {
        let Some((peer, id)) = self.redial.clone() else { return };
        if !self.config.reconnect {
            return;
        }
        let (config, events) = (self.config.clone(), self.event_tx.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(wait).await;
                if events.is_closed() {
                    return;
                }
                match dial(&peer, &config, &id, slot as u16, false).await {
                    Ok(wire) => {
                        let _ = events.send(Event::Up { slot, wire }).await;
                        return;
                    }
                    Err(MuxError::Hello(e @ (HelloError::NoSession | HelloError::NotAccepting))) => {
                        let _ = events.send(Event::Refused(e)).await;
                        return;
                    }
                    Err(_) => wait = (wait * 2).min(REDIAL_MOST),
                }
            }
        });
    }

    /// Hands a frame from `slot` to the core; `false` if the frame broke the protocol and the
    /// connection was dropped.
    fn on_frame(&mut self, slot: usize, frame: Frame) -> bool {
        match frame {
            Frame::Credit { channel, ack, limit } => {
                self.sender.on_credit(channel, ack, limit);
                self.release_acked(channel);
            }
            // On the connection it came by: the peer is asking whether that one is alive.
            Frame::Ping { nonce, pong: false } => {
                if let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) {
                    conn.push(&Frame::Ping { nonce, pong: true });
                }
            }
            Frame::Ping { pong: true, .. } => {}
            Frame::OpenCredit { limit } => self.sender.on_open_credit(limit),
            Frame::SetWeight { channel, weight } => {
                // A channel's weight holds in both directions, and sizes its window here.
                let _ = self.sender.adopt_weight(channel, weight);
                let _ = self.receiver.on_frame(self.now(), Frame::SetWeight { channel, weight });
            }
            frame => {
                let channel = frame.channel();
                let (weight, ordered) = match frame {
                    Frame::Open { weight, ordered, .. } => (Some(weight), ordered),
                    _ => (None, true),
                };
                // A channel neither held nor forgotten: the peer opened it, and must have had
                // leave to (a peer that had not broke the protocol, as one that sends beyond
                // its data credit does).
                let new = !self.ends.contains_key(&channel) && !self.receiver.is_retired(channel);
                if new && self.open_window.on_open().is_err() {
                    let _ = self.drop_broken(slot);
                    return false;
                }
                if self.receiver.on_frame(self.now(), frame).is_err() {
                    let _ = self.drop_broken(slot);
                    return false;
                }
                if new && self.receiver.is_retired(channel) {
                    // Reset by the peer before anything else of it came: nothing to accept,
                    // and its leave goes back at once.
                    self.open_window.settle(1);
                } else if new {
                    let _ = self.sender.adopt(channel, weight.unwrap_or(1.0), ordered);
                    if self.opened.len() >= self.config.accept_backlog {
                        let n = self.opened.len();
                        self.refuse(
                            channel,
                            format!(
                                "refused: {n} channels were already waiting to be accepted at the far end (its accept \
                                 backlog; `tunnel listen --accept-backlog` sets it)"
                            ),
                        );
                        self.open_window.settle(1);
                    } else if let Some(ch) = self.channel_ends(channel) {
                        self.opened.push_back(ch);
                    } else {
                        // Nobody accepts any more: read and dropped, and not waited for.
                        self.open_window.settle(1);
                    }
                } else if let Some(w) = weight {
                    let _ = self.sender.adopt_weight(channel, w);
                }
                while let Some((id, reason)) = self.receiver.poll_reset() {
                    self.sender.forget(id);
                    if self.ends.contains_key(&id) {
                        self.end_reset(id, "by the peer", reason);
                    } else {
                        self.resets += 1;
                    }
                }
            }
        }
        true
    }

    /// Gives back to the session's budget the bytes of channel `id` charged to it that the
    /// peer has now acknowledged (its bytes are acknowledged in the order written).
    fn release_acked(&mut self, id: u32) {
        let Some(ends) = self.ends.get_mut(&id) else { return };
        if ends.charges.charged.is_empty() {
            return;
        }
        let released = ends.charges.acked(self.sender.acked_bytes(id));
        self.room.budget.give_back(id, released);
    }

    /// Hands channel `id`'s received bytes to its application as far as its queue has room;
    /// `true` if anything moved. A full queue asks to be called when the application takes
    /// from it; an application that let go gets nothing more (what comes is read and dropped,
    /// so that credit keeps flowing to the peer).
    fn deliver(&mut self, id: u32) -> bool {
        let Some(ends) = self.ends.get_mut(&id) else { return false };
        let mut moved = false;
        let mut dropped = false;
        if let Some(tx) = &ends.to_app {
            let mut asked = false;
            loop {
                match tx.try_reserve() {
                    Ok(permit) => match self.receiver.read(id) {
                        Some(b) => {
                            permit.send(b);
                            moved = true;
                        }
                        None => break,
                    },
                    // Asked, then tried once more: room made in between is not missed.
                    Err(mpsc::error::TrySendError::Full(())) if !asked => {
                        self.room.ask(id);
                        asked = true;
                    }
                    Err(mpsc::error::TrySendError::Full(())) => break,
                    Err(mpsc::error::TrySendError::Closed(())) => {
                        dropped = true;
                        break;
                    }
                }
            }
        }
        if dropped {
            ends.to_app = None;
            moved = true;
        }
        if ends.to_app.is_none() {
            while self.receiver.read(id).is_some() {
                moved = true;
            }
        }
        moved
    }

    /// Takes channel `id`'s writes waiting into the core as far as its buffer has room, and
    /// its close once they are in; `true` if anything moved. The channel stays in `writing`
    /// until nothing is left to do.
    fn take_writes(&mut self, id: u32) -> bool {
        let Some(ends) = self.ends.get_mut(&id) else {
            self.writing.remove(&id);
            return false;
        };
        let mut moved = false;
        while let Some((data, _)) = ends.pending.front_mut() {
            let took = match self.sender.write(id, data.clone()) {
                Ok(took) => took,
                // The core no longer takes this channel's bytes (it is gone or closing): every
                // writer waiting learns so; none is told its bytes were sent.
                Err(e) => {
                    for (_, reply) in ends.pending.drain(..) {
                        let _ = reply.send(Err(MuxError::from(e.clone())));
                    }
                    self.room.budget.forget(id);
                    moved = true;
                    break;
                }
            };
            if took == 0 {
                break;
            }
            moved = true;
            let _ = data.split_to(took);
            if data.is_empty() {
                let (_, reply) = ends.pending.pop_front().expect("front exists");
                let _ = reply.send(Ok(()));
            }
        }
        if ends.close_when_sent && ends.pending.is_empty() && self.sender.capacity(id) > 0 {
            let _ = self.sender.close(id);
        }
        let closed = !self.sender.has_channel(id) || self.sender.is_closing(id);
        if ends.pending.is_empty() && (!ends.close_when_sent || closed) {
            self.writing.remove(&id);
        }
        moved
    }

    /// Moves everything that can move: bytes to the application, credits and frames to the
    /// connections with room, the application's writes into the core.
    fn pump(&mut self) -> bool {
        let mut framed = 0;
        loop {
            let mut moved = false;
            // Channels the peer opened, to the application as far as its queue has room.
            while !self.opened.is_empty() {
                match self.incoming.try_reserve() {
                    Ok(permit) => {
                        permit.send(self.opened.pop_front().expect("not empty"));
                        moved = true;
                    }
                    // Nobody accepts any more: the channels go, and the driver sees them go.
                    Err(mpsc::error::TrySendError::Closed(())) => {
                        self.open_window.settle(self.opened.len() as u64);
                        self.opened.clear();
                        moved = true;
                    }
                    Err(mpsc::error::TrySendError::Full(())) => break,
                }
            }
            // Received bytes to the application, as far as its queues have room: the channels
            // the receiver says have had bytes, and those whose application called (it made
            // room in a queue found full, or let go). A session carries thousands of channels
            // (a tunnel's clients); each turn looks at the few with something to do.
            let mut visit = self.room.visits();
            visit.extend(std::iter::from_fn(|| self.receiver.pop_readable()));
            let mut let_go = Vec::new();
            for id in visit {
                moved |= self.deliver(id);
                if self.ends.get(&id).is_some_and(|e| !e.close_when_sent && e.held.strong_count() == 0) {
                    let_go.push(id);
                }
            }
            // A channel the application dropped sends no more (its close may not have reached
            // the driver: the command queue can be full when a handle drops). What it sent
            // before it let go is taken first: a reset (a tunnel's target refused) overtaken
            // by a close ended the channel cleanly at the peer, empty, and writes overtaken
            // were refused.
            if !let_go.is_empty() {
                while let Ok(c) = self.commands.try_recv() {
                    self.on_command(c);
                }
                for id in let_go {
                    if self.ends.get(&id).is_some_and(|e| !e.close_when_sent) {
                        self.close_when_sent(id);
                    }
                }
            }
            while let Some(id) = self.receiver.pop_finished() {
                if let Some(ends) = self.ends.get_mut(&id)
                    && ends.to_app.is_some()
                    && self.receiver.is_finished(id)
                {
                    // Every byte is in the queue to the application: its end is clean.
                    *ends.end.lock().expect("never held across a panic") =
                        Some(End { tail: VecDeque::new(), cut: None, reset: None });
                    ends.to_app = None;
                }
            }
            while let Some(f) = self.receiver.poll_credit() {
                self.urgent.push_back(f);
            }
            // Channels the application accepted give the peer leave to open as many more; the
            // peer's leave opens the application's channels waiting for it.
            let accepted = self.room.accepted.load(std::sync::atomic::Ordering::Relaxed);
            if accepted > self.accepted_seen {
                self.open_window.settle(accepted - self.accepted_seen);
                self.accepted_seen = accepted;
            }
            if let Some(f) = self.open_window.poll_grant() {
                self.urgent.push_back(f);
            }
            if !self.waiting_opens.is_empty() && self.sender.may_open() {
                self.open_waiting();
                moved = true;
            }
            // The application's writes, as far as each channel's buffer has room.
            let writing: Vec<u32> = self.writing.iter().copied().collect();
            for id in writing {
                moved |= self.take_writes(id);
            }
            // On loopback a socket takes all it is given (its bytes leave at once, so
            // `TCP_NOTSENT_LOWAT` never holds them back): framing until the sockets refuse
            // drained every channel's buffer in one pump, faster than the application's writes
            // reach the driver, and the heaviest channels ran dry and lost their turns. So a
            // pump frames at most a budget and then lets the commands in.
            if framed >= PUMP_BUDGET {
                return true;
            }
            // Frames to every connection with room: up to its queue, written as far as its
            // socket takes them.
            //
            // Larger writes were measured and cost more, not less (bench mux, least-queued
            // striping, AMD EPYC 2 cores, load 14): a connection whose socket had taken its
            // last write whole was given up to 64 KiB of frames a write, then up to 256 KiB.
            // Writes grew from 30 KiB a call to 92 KiB (strace, 256 KiB) and the kernel's
            // per-packet send cost fell, but CPU per byte rose: 511–532 ns/KB at 64 KiB against
            // 483–510 with two frames a write (`queue_frames` was 2), in four runs of each
            // alternated. At 256 KiB a connection's run of frames outran the others' at the
            // receiver, which read each a turn at a time: the reorder buffers held 6.5–8.3 MB
            // against 1.6–4.4, fresh receive buffers faulted in pages, and channels ran out of
            // credit (3,199–78,021 turns blocked in each of three runs; in one run of twelve
            // without). Three frames a write did pay, and 64 KiB is four frames and their heads,
            // just over a loopback packet (see `MuxConfig::queue_frames`).
            //
            // Fuller packets were tried twice and cost more (bench mux, stripe, AMD EPYC 2 cores,
            // load 11–14, base and trial alternated): writing a connection's frames with
            // `MSG_MORE` while its queue filled before the core ran dry (the held segment pushed
            // with `TCP_NODELAY` once the core had nothing for it) raised bytes a packet only
            // from 44.1 KB to 47.3 KB (nstat, raw TCP's packets in the count) and CPU per byte
            // from 437–540 ns/KB to 563–660 (×raw CPU 0.57–0.67 to 0.49–0.64; TLS 792–819 to
            // 898–928); and frames sized so that four with their heads fill one loopback packet
            // (`--frame 16352 --queue-frames 4`) cost 561–603 ns/KB against 461–493, the
            // application's 256 KiB writes no longer a whole number of frames.
            let mut lost = Vec::new();
            // One clock reading for the pass: the core's time, and the age of each view.
            let clock = Instant::now();
            let now = Nanos(clock.duration_since(self.started).as_nanos() as u64);
            for (slot, conn) in self.conns.iter_mut().enumerate() {
                let Some(conn) = conn else { continue };
                // A connection whose socket refused bytes asks for no frame until it takes
                // more: the frame may go to one with room, and the kernel says when (§2.7).
                while !conn.full && conn.queued < self.config.queue_frames.max(1) {
                    let frame = match self.urgent.pop_front() {
                        Some(f) => f,
                        None => match self.sender.poll_transmit(now, slot) {
                            Some(f) => f,
                            None => break,
                        },
                    };
                    framed += frame.encoded_len();
                    conn.push(&frame);
                    moved = true;
                }
                let wrote = match conn.write() {
                    Ok(wrote) => wrote,
                    Err(_) => {
                        lost.push(slot);
                        false
                    }
                };
                moved |= wrote;
                // The kernel's view is read just after a write, when the connection's unsent
                // bytes show how busy it is (the core drains them at the connection's rate as
                // the view ages).
                // A connection left idle while frames wait for others is looked at again now
                // and then: its queue has drained and its loss recovery has ended since, and
                // it may now be the one to deliver first.
                let age = clock.duration_since(conn.viewed);
                let idle = !wrote && conn.queued == 0 && age >= VIEW_IDLE;
                if (wrote && age >= VIEW_EVERY) || idle {
                    conn.viewed = clock;
                    if let Some(view) = conn.link.view(clock) {
                        self.sender.set_view(slot, ConnView { at_ns: now.0, ..view });
                    }
                }
            }
            for slot in lost {
                self.lose(slot);
                moved = true;
            }
            if !moved {
                return false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_the_peer_opens_after_the_application_let_go_is_drained_not_a_panic() {
        let (session, _events, mut driver) = Driver::new(MuxConfig::default(), false, None);
        // Every handle gone; the driver has not yet seen its commands end.
        drop(session);
        assert!(driver.open_window.poll_grant().is_some(), "the peer has leave to open");
        assert!(driver.on_frame(0, Frame::Open { channel: 1, weight: 1.0, ordered: true }));
        assert!(driver.on_frame(0, Frame::Data { channel: 1, seq: 0, payload: Bytes::from_static(b"late") }));
        assert!(driver.ends[&1].to_app.is_none(), "nobody to hand the channel to");
        driver.pump();
        assert_eq!(driver.receiver.read(1), None, "what arrived was read and dropped");
        // An open from a handle that has gone meanwhile is answered, not a panic.
        driver.sender.on_open_credit(1);
        let (reply, mut answer) = oneshot::channel();
        driver.on_command(Command::Open { weight: 1.0, ordered: true, reply });
        assert!(matches!(answer.try_recv(), Ok(Err(MuxError::Ended))));
    }

    /// The queue to a channel's application is sized in bytes, not frames: with the session's
    /// 64 KiB frames, the 8 frames it held at 16 KiB would have doubled what a channel whose
    /// application does not read holds beyond its credit window.
    #[test]
    fn acknowledged_bytes_free_only_the_charged_ranges_they_cover() {
        let mut c = Charges::default();
        c.write(100, true); // 0..100 charged
        c.write(50, false); // 100..150 not (an application's own write)
        c.write(100, true); // 150..250 charged
        assert_eq!(c.acked(40), 40);
        assert_eq!(c.acked(40), 0, "an acknowledgement seen twice frees nothing more");
        assert_eq!(c.acked(160), 70, "60 of the first range and 10 of the second");
        assert_eq!(c.acked(1_000), 90);
        assert!(c.charged.is_empty());
    }

    #[test]
    fn the_queue_to_the_application_holds_the_same_bytes_whatever_the_frame() {
        for (frame, slots) in [(16 << 10, 8), (64 << 10, 4), (1 << 20, 2), (1 << 10, 8)] {
            let config =
                MuxConfig { send: SendConfig { max_frame: frame, ..SendConfig::default() }, ..MuxConfig::default() };
            let (_session, _events, mut driver) = Driver::new(config, false, None);
            let _channel = driver.channel_ends(2).expect("the session is held");
            let queue = driver.ends[&2].to_app.as_ref().expect("an application to hand bytes to");
            assert_eq!(queue.max_capacity(), slots, "{frame}-byte frames");
            assert!(slots * frame <= TO_APP_BYTES || slots == 2, "{frame}-byte frames: {slots} slots");
        }
    }

    /// An application that resets a channel and lets go of it at once (a tunnel whose target
    /// refused) left the reset waiting in the command queue while the driver, seeing the handle
    /// gone, closed the channel: the peer read a clean end of nothing, and its client took an
    /// empty answer for the whole of one.
    #[tokio::test]
    async fn a_channel_reset_then_dropped_is_reset_not_closed() {
        let (_session, _events, mut driver) = Driver::new(MuxConfig::default(), false, None);
        driver.sender.connection_up(0);
        assert!(driver.open_window.poll_grant().is_some(), "the peer has leave to open");
        assert!(driver.on_frame(0, Frame::Open { channel: 1, weight: 1.0, ordered: true }));
        let mut channel = driver.opened.pop_front().expect("the peer's channel");
        channel.reset("target refused").await.unwrap();
        drop(channel);
        // The driver turns before it has taken the commands waiting.
        driver.pump();
        let frames: Vec<Frame> = std::iter::from_fn(|| driver.sender.poll_transmit(Nanos(0), 0)).collect();
        assert!(!frames.iter().any(|f| matches!(f, Frame::Close { .. })), "a close went: {frames:?}");
        assert!(frames.contains(&Frame::Reset { channel: 1, reason: "target refused".into() }), "{frames:?}");
    }

    /// A write waiting for a channel the core no longer takes bytes for (gone or closing) is
    /// answered with the error: it used to be counted as taken and answered "sent".
    #[test]
    fn a_write_the_core_refuses_fails_for_its_writer() {
        let (_session, _events, mut driver) = Driver::new(MuxConfig::default(), false, None);
        assert!(driver.open_window.poll_grant().is_some(), "the peer has leave to open");
        assert!(driver.on_frame(0, Frame::Open { channel: 1, weight: 1.0, ordered: true }));
        let (reply, mut answer) = oneshot::channel();
        driver.on_command(Command::Write { id: 1, data: Bytes::from_static(b"lost?"), charged: false, reply });
        driver.sender.close(1).unwrap();
        driver.take_writes(1);
        assert!(
            matches!(answer.try_recv(), Ok(Err(MuxError::Channel(switchyard_core::carry::SendError::Closed(1))))),
            "{answer:?}"
        );
    }
}
