//! One delivery worker: a thread with its own poller that serves the connections placed on it —
//! bulk connections round-robin, one unit (a packet, or a burst of packets) per turn as in
//! Yates's CLP stack, rate-promised streams by the core's pacer or quota, and sink connections
//! (the client sends) read round-robin a few reads per turn and counted.
//!
//! Nothing here decides where a connection lives or how fast a stream goes: placement,
//! rebalancing and admission happen in [`super::server`] through the core, and the pace comes
//! from `switchyard_core::order`. The worker carries it out and counts what it sent.

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use mio::net::{TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token};
use switchyard_core::Nanos;
use switchyard_core::order::{Debts, PaceConfig, Pacer, Quota};
use switchyard_core::place::rebalance::ConnId;

use super::server::{ConnStats, Pacing, Shared};

/// The waker's token; connection slots are numbered from 0.
pub(crate) const WAKE: Token = Token(usize::MAX);

/// A connection on its way to a worker, or between workers.
pub(crate) struct Conn {
    pub(crate) id: ConnId,
    pub(crate) io: Io,
    /// Promised bytes per second, for streams.
    pub(crate) rate: Option<f64>,
    /// The client sends and the worker reads (`sink`), rather than the other way round.
    pub(crate) sink: bool,
    pub(crate) stats: Arc<ConnStats>,
}

/// The socket.
pub(crate) enum Io {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

impl Io {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Self::Tcp(s) => s,
            Self::Udp(s) => s,
        }
    }
}

/// What a worker is told to do.
pub(crate) enum Cmd {
    /// Serve this connection.
    Add(Conn),
    /// Hand this connection to worker `to` (a rebalancing move).
    Take { conn: ConnId, to: usize },
    /// Panic (tests of how a worker's failure is handled).
    #[cfg(test)]
    Panic,
}

/// What one attempt to send came to.
enum Push {
    /// All of it went.
    Sent(u64),
    /// This much went, then the socket was full.
    Blocked(u64),
    /// The peer is gone.
    Closed(u64),
    /// This much went, then a datagram was lost (UDP only): the stream goes on.
    Lost(u64),
}

/// Sends up to `want` bytes; `writes` counts the calls that took bytes.
fn push(io: &mut Io, buf: &[u8], packet: usize, want: u64, writes: &mut u64) -> Push {
    let mut sent = 0u64;
    while sent < want {
        let left = (want - sent) as usize;
        let r = match io {
            Io::Tcp(s) => s.write(&buf[..left.min(buf.len())]),
            Io::Udp(s) => s.send(&buf[..left.min(packet)]),
        };
        match r {
            Ok(0) => return Push::Closed(sent),
            Ok(n) => {
                sent += n as u64;
                *writes += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Push::Blocked(sent),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A UDP datagram the kernel would not take (no buffer, no route) is lost, as on a
            // wire, and the stream goes on: no writable edge would come to wake a stream marked
            // blocked. It is not counted as sent; the turn ends, so a lasting error does not
            // spin. Only an ICMP "port unreachable" (the client went away) ends the stream.
            Err(e) if matches!(io, Io::Udp(_)) && e.kind() != io::ErrorKind::ConnectionRefused => {
                return Push::Lost(sent);
            }
            Err(_) => return Push::Closed(sent),
        }
    }
    Push::Sent(sent)
}

/// The fewest bytes a paced stream sends at once under fine pacing. A datagram is a packet, so
/// UDP streams send whole ones. A TCP stream sends at least half a packet: its writes cost per
/// call, not per byte (over loopback each write is a segment whose receive path and ACK run in
/// the sender's and the reader's threads), and at the default 1 ms grain a 4 Mb/s stream sent
/// 500 B a write. `reproduce yates-clp`'s hard case (384 × 4 Mb/s, 24 threads, 2 cores, load 15)
/// then made 346,000 writes a second against UDP's 47,000, and took 1.15 cores to send and 0.63
/// to read against 0.12 and 0.10 for the same bytes paced by quota in 4 KB packets: the lone
/// client thread fell behind and the streams with it (TCP fine 454 Mb/s of 1,536). Half a
/// packet keeps the stream within half a packet of its line by construction, leaving the other
/// half of the one packet issue 42 allows for lateness, at a quarter of the writes.
fn smallest_send(udp: bool, packet: usize) -> u64 {
    let packet = packet as u64;
    if udp { packet } else { (packet / 2).max(1) }
}

/// Reads and drops whatever the client sent; true if it hung up (or said `bye` over UDP).
fn drain(io: &mut Io) -> bool {
    let mut buf = [0u8; 512];
    loop {
        let r = match io {
            Io::Tcp(s) => s.read(&mut buf),
            Io::Udp(s) => match s.recv(&mut buf) {
                Ok(n) if buf[..n].starts_with(b"bye") => return true,
                other => other,
            },
        };
        match r {
            Ok(0) if matches!(io, Io::Tcp(_)) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => return true,
            Err(_) => return matches!(io, Io::Tcp(_)),
        }
    }
}

struct Slot {
    conn: Conn,
    writable: bool,
    /// When the client was last heard from (UDP: its keepalives), ns since the server's epoch.
    heard: u64,
}

/// A UDP client silent this long is gone (its keepalives come every second): without it, a
/// client that vanished with no ICMP reply would keep its stream and its promise for ever.
pub(crate) const UDP_SILENCE: Duration = Duration::from_secs(10);

/// The worker's state; [`run`] is its loop.
struct Worker {
    index: usize,
    shared: Arc<Shared>,
    poll: Poll,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    by_id: BTreeMap<ConnId, u32>,
    /// Bulk connections that can take a send, in round-robin order.
    bulk: VecDeque<u32>,
    /// Streams under the quota, in round-robin order (writable or not).
    ring: VecDeque<u32>,
    /// Sink connections with bytes waiting, in round-robin order.
    sinks: VecDeque<u32>,
    /// Kernel-paced streams the kernel will take a packet from, in round-robin order.
    kernel: VecDeque<u32>,
    recv_buf: Vec<u8>,
    pacer: Pacer,
    quota: Option<Quota>,
    next_round: u64,
    round_late: u64,
    stream_bytes: u64,
}

impl Worker {
    fn now(&self) -> Nanos {
        Nanos(self.shared.epoch.elapsed().as_nanos() as u64)
    }

    fn promised(&self) -> f64 {
        self.slots.iter().flatten().filter_map(|s| s.conn.rate).sum()
    }

    fn add(&mut self, mut conn: Conn, now: Nanos) {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            (self.slots.len() - 1) as u32
        });
        if self
            .poll
            .registry()
            .register(conn.io.source(), Token(slot as usize), Interest::READABLE | Interest::WRITABLE)
            .is_err()
        {
            self.free.push(slot);
            self.shared.closed(conn.id, self.index);
            return;
        }
        conn.stats.worker.store(self.index as u32, Ordering::Relaxed);
        self.by_id.insert(conn.id, slot);
        let rate = conn.rate;
        self.slots[slot as usize] = Some(Slot { conn, writable: true, heard: now.0 });
        let sink = self.slots[slot as usize].as_ref().is_some_and(|s| s.conn.sink);
        match (rate, &self.shared.cfg.pacing) {
            // Bytes may have come before the socket was registered (the poller is
            // edge-triggered and would not say), so it is read at once.
            (None, _) if sink => self.sinks.push_back(slot),
            (None, _) => self.bulk.push_back(slot),
            (Some(r), Pacing::Fine(_)) => {
                let udp = matches!(self.slots[slot as usize].as_ref().map(|s| &s.conn.io), Some(Io::Udp(_)));
                self.pacer.add_with_min(slot, r, smallest_send(udp, self.shared.cfg.packet), now);
            }
            (Some(r), Pacing::Kernel) => {
                let paced = match &self.slots[slot as usize].as_ref().map(|s| &s.conn.io) {
                    Some(Io::Tcp(s)) => super::kernel_pace::pace(s, r, self.shared.cfg.packet as u32).is_ok(),
                    _ => false,
                };
                if paced {
                    self.kernel.push_back(slot);
                } else {
                    // Admission placed it; unpaced it would break the promise: closed, counted.
                    self.close(slot);
                }
            }
            (Some(_), Pacing::Quota(_)) => {
                if self.ring.is_empty() {
                    // The first stream after an idle spell: its round is due now, not late by
                    // the idle time, and owes nothing from before it came.
                    self.next_round = now.0;
                    if let Some(q) = &mut self.quota {
                        q.restart();
                    }
                }
                self.ring.push_back(slot);
                let target = self.promised();
                if let Some(q) = &mut self.quota {
                    q.set_target(target);
                }
            }
        }
    }

    /// Takes a connection off this worker (closed, or moving away).
    fn remove(&mut self, slot: u32) -> Option<Conn> {
        let mut s = self.slots.get_mut(slot as usize)?.take()?;
        let _ = self.poll.registry().deregister(s.conn.io.source());
        self.free.push(slot);
        self.by_id.remove(&s.conn.id);
        self.pacer.remove(slot);
        self.bulk.retain(|&b| b != slot);
        self.ring.retain(|&b| b != slot);
        self.sinks.retain(|&b| b != slot);
        self.kernel.retain(|&b| b != slot);
        if s.conn.rate.is_some() {
            let target = self.promised();
            if let Some(q) = &mut self.quota {
                q.set_target(target);
            }
        }
        Some(s.conn)
    }

    fn close(&mut self, slot: u32) {
        if let Some(conn) = self.remove(slot) {
            self.shared.closed(conn.id, self.index);
        }
    }

    fn count(&mut self, slot: u32, bytes: u64, stream: bool) {
        if bytes == 0 {
            return;
        }
        if let Some(Some(s)) = self.slots.get(slot as usize) {
            s.conn.stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        }
        let w = &self.shared.workers[self.index];
        w.bytes.fetch_add(bytes, Ordering::Relaxed);
        if stream {
            self.stream_bytes += bytes;
        } else {
            w.bulk_bytes.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Sends `want` bytes on `slot`; returns false if the socket is full or gone.
    fn send(&mut self, slot: u32, want: u64, stream: bool) -> (u64, bool) {
        let packet = self.shared.cfg.packet;
        let Some(Some(s)) = self.slots.get_mut(slot as usize) else { return (0, false) };
        let mut writes = 0;
        let pushed = push(&mut s.conn.io, &self.shared.payload, packet, want, &mut writes);
        s.conn.stats.writes.fetch_add(writes, Ordering::Relaxed);
        let (sent, ok) = match pushed {
            Push::Sent(n) => (n, true),
            // The datagram is gone and the stream's credit spent with it (the pacer is told the
            // whole want went), but the counters only show what left.
            Push::Lost(n) => {
                self.count(slot, n, stream);
                return (want, true);
            }
            Push::Blocked(n) => {
                s.writable = false;
                (n, false)
            }
            Push::Closed(n) => {
                self.count(slot, n, stream);
                self.close(slot);
                return (n, false);
            }
        };
        self.count(slot, sent, stream);
        (sent, ok)
    }

    fn serve_paced(&mut self) {
        pace_turn(self);
        let w = &self.shared.workers[self.index];
        w.made_up.store(self.pacer.made_up().round() as u64, Ordering::Relaxed);
        w.forgiven.store(self.pacer.forgiven().round() as u64, Ordering::Relaxed);
    }

    fn serve_quota(&mut self, now: Nanos) {
        let Some(q) = &mut self.quota else { return };
        if now.0 < self.next_round || self.ring.is_empty() {
            return;
        }
        self.round_late = self.round_late.max(now.0 - self.next_round);
        let round = q.next_round(now);
        let packet = self.shared.cfg.packet as u64;
        let mut left = round.packets;
        let mut partial = 0u64;
        let mut misses = 0;
        while left > 0 && misses < self.ring.len() {
            let Some(slot) = self.ring.pop_front() else { break };
            self.ring.push_back(slot);
            if !self.slots.get(slot as usize).is_some_and(|s| s.as_ref().is_some_and(|s| s.writable)) {
                misses += 1;
                continue;
            }
            // A packet that did not go whole is still owed, less the part that went.
            let (went, _) = self.send(slot, packet, true);
            if went == packet {
                misses = 0;
                left -= 1;
            } else {
                partial += went;
                misses += 1;
            }
        }
        if left > 0
            && let Some(q) = &mut self.quota
        {
            q.unsent_bytes((left * packet).saturating_sub(partial));
        }
        // The pause follows the sending, as in the thesis: the quota's correction absorbs the
        // time the sending took.
        self.next_round = self.now().0 + round.pause.0;
    }

    fn serve_bulk(&mut self) {
        let unit = (self.shared.cfg.packet * self.shared.cfg.burst) as u64;
        for _ in 0..self.bulk.len().min(64) {
            let Some(slot) = self.bulk.pop_front() else { break };
            if self.send(slot, unit, false).1 {
                self.bulk.push_back(slot);
            }
        }
    }

    /// Gives each kernel-paced stream that has room a packet: the kernel holds it to its rate,
    /// and says the socket is writable again once less than a packet waits unsent.
    fn serve_kernel(&mut self) {
        let packet = self.shared.cfg.packet as u64;
        for _ in 0..self.kernel.len().min(256) {
            let Some(slot) = self.kernel.pop_front() else { break };
            if self.send(slot, packet, true).1 {
                self.kernel.push_back(slot);
            }
        }
    }

    /// Reads each waiting sink connection a few times, round-robin: draining one to empty while
    /// a fast client refills it would starve the others (and the worker's commands).
    fn serve_sinks(&mut self) {
        const READS_PER_TURN: usize = 16;
        for _ in 0..self.sinks.len() {
            let Some(slot) = self.sinks.pop_front() else { break };
            let Some(Some(s)) = self.slots.get_mut(slot as usize) else { continue };
            let Io::Tcp(stream) = &mut s.conn.io else { continue };
            let (mut got, mut more, mut gone) = (0u64, true, false);
            for _ in 0..READS_PER_TURN {
                match stream.read(&mut self.recv_buf) {
                    Ok(0) => {
                        gone = true;
                        break;
                    }
                    Ok(n) => got += n as u64,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        more = false;
                        break;
                    }
                    Err(_) => {
                        gone = true;
                        break;
                    }
                }
            }
            s.conn.stats.received.fetch_add(got, Ordering::Relaxed);
            self.shared.workers[self.index].received.fetch_add(got, Ordering::Relaxed);
            if gone {
                self.close(slot);
            } else if more {
                self.sinks.push_back(slot);
            }
        }
    }

    fn command(&mut self, cmd: Cmd, now: Nanos) {
        match cmd {
            Cmd::Add(conn) => self.add(conn, now),
            #[cfg(test)]
            Cmd::Panic => panic!("told to"),
            Cmd::Take { conn, to } => {
                // Not here (it closed, or its Add has not arrived): the controller must put it
                // back where it is, or its record and the workers' would disagree.
                let Some(&slot) = self.by_id.get(&conn) else {
                    self.shared.take_missed(conn, self.index);
                    return;
                };
                if let Some(conn) = self.remove(slot) {
                    self.shared.hand_over(conn, to);
                }
            }
        }
    }

    fn timeout(&mut self, now: Nanos, next_sample: u64) -> Duration {
        if !self.bulk.is_empty() || !self.sinks.is_empty() || !self.kernel.is_empty() {
            return Duration::ZERO;
        }
        let mut wake = next_sample;
        if let Some(d) = self.pacer.next_due() {
            wake = wake.min(d.0);
        }
        if self.quota.is_some() && !self.ring.is_empty() {
            wake = wake.min(self.next_round);
        }
        Duration::from_nanos(wake.saturating_sub(now.0))
    }
}

/// What a turn of paced sends needs from the worker: a seam, so that a test can drive a turn
/// with a clock of its own.
trait PacedSends {
    fn pacer(&mut self) -> &mut Pacer;
    /// The time now, read afresh at each call.
    fn clock(&self) -> Nanos;
    /// Sends `bytes` of `slot`'s stream (which lateness has cost it `debts` so far): what went,
    /// and whether the socket can take more.
    fn send(&mut self, slot: u32, bytes: u64, debts: Debts) -> (u64, bool);
}

impl PacedSends for Worker {
    fn pacer(&mut self) -> &mut Pacer {
        &mut self.pacer
    }

    fn clock(&self) -> Nanos {
        self.now()
    }

    fn send(&mut self, slot: u32, bytes: u64, debts: Debts) -> (u64, bool) {
        let (made_up, forgiven) = (debts.made_up.round() as u64, debts.forgiven.round() as u64);
        if let Some(Some(s)) = self.slots.get(slot as usize) {
            s.conn.stats.made_up.store(made_up, Ordering::Relaxed);
            s.conn.stats.forgiven.store(forgiven, Ordering::Relaxed);
        }
        let w = &self.shared.workers[self.index];
        w.made_up_max.fetch_max(made_up, Ordering::Relaxed);
        w.forgiven_max.fetch_max(forgiven, Ordering::Relaxed);
        Self::send(self, slot, bytes, true)
    }
}

/// One turn of the paced streams. Each grant is made at the time of its send, the clock read
/// before every poll: a grant made at the turn's start is stale by the time the turn reaches
/// the streams served last, which then leave that far behind their line. At 10,000 streams on
/// a shared core a turn after a stall took hundreds of milliseconds, and the wire saw every
/// stream's rate from first departure to last off by up to 3.5% (the last departure of a
/// stream left behind its line by as much as the turn had taken).
fn pace_turn(d: &mut impl PacedSends) {
    // Each stream at most a couple of times a turn: a stream owed more than a chunk stays due,
    // and must not keep the loop from the sockets and the others.
    for _ in 0..(2 * d.pacer().len()).max(16) {
        let now = d.clock();
        let Some(due) = d.pacer().poll(now) else { break };
        let debts = d.pacer().debts(due.slot).unwrap_or_default();
        let (sent, ok) = d.send(due.slot, due.bytes, debts);
        if ok {
            d.pacer().sent(due.slot, sent);
        } else {
            d.pacer().blocked(due.slot, sent);
        }
    }
}

/// The bytes every worker sends from, one copy for the server: as long as the largest write
/// (a burst of packets, or the pacer's largest chunk). A copy per worker was 256 KiB each, 96
/// MiB of a 384-worker server's 127 MiB at idle.
pub(crate) fn payload(cfg: &super::ServerConfig) -> Box<[u8]> {
    let chunk = pace_config(cfg.pacing).max_chunk;
    vec![0x5a; (cfg.packet * cfg.burst).max(chunk as usize)].into_boxed_slice()
}

/// The settings of a worker's pacer: the server's under fine pacing; the defaults otherwise,
/// where the pacer paces no stream and only its largest chunk matters (the payload's length).
fn pace_config(pacing: Pacing) -> PaceConfig {
    match pacing {
        Pacing::Fine(p) => p,
        Pacing::Quota(_) | Pacing::Kernel => PaceConfig::default(),
    }
}

/// How many connections each of `workers` sizes its tables for at its start: its share of as
/// many as the process may hold descriptors (`RLIMIT_NOFILE`'s soft limit, each connection
/// needing one; at most 65,536 in all). A table that doubles copies itself into fresh memory
/// at once, and the worker sends nothing meanwhile (see [`Pacer::with_capacity`]); room
/// reserved and never used is address space, not memory, and shared out so that 384 workers
/// do not each reserve for every connection. A worker given more than its share grows its
/// tables as before.
fn room_for_conns(workers: usize) -> usize {
    use nix::sys::resource::{Resource, getrlimit};
    const MOST: u64 = 1 << 16;
    let all = getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft.min(MOST)) as usize;
    all.div_ceil(workers.max(1))
}

/// The worker's loop, until the server stops.
pub(crate) fn run(index: usize, shared: Arc<Shared>, poll: Poll, commands: Receiver<Cmd>) {
    let room = room_for_conns(shared.cfg.workers);
    let cfg = pace_config(shared.cfg.pacing);
    let (pacer, quota) = match shared.cfg.pacing {
        Pacing::Fine(_) => (Pacer::with_capacity(cfg, room), None),
        Pacing::Quota(q) => (Pacer::new(cfg), Some(Quota::new(q, 0.0))),
        Pacing::Kernel => (Pacer::new(cfg), None),
    };
    let shared_recv_size = shared.cfg.recv_size;
    let mut w = Worker {
        index,
        shared,
        poll,
        slots: Vec::with_capacity(room),
        free: Vec::new(),
        by_id: BTreeMap::new(),
        bulk: VecDeque::new(),
        ring: VecDeque::new(),
        sinks: VecDeque::new(),
        kernel: VecDeque::new(),
        recv_buf: vec![0; shared_recv_size],
        pacer,
        quota,
        next_round: 0,
        round_late: 0,
        stream_bytes: 0,
    };
    let every = w.shared.cfg.sample_every.as_nanos() as u64;
    let mut last_sample = w.now().0;
    let mut events = Events::with_capacity(1024);
    while !w.shared.stopping() {
        let now = w.now();
        let timeout = w.timeout(now, last_sample + every);
        // epoll waits whole milliseconds (mio rounds up), so a stream due sooner would go up to a
        // millisecond late: for short waits, look at the sockets without blocking, then sleep
        // the exact time.
        let (wait, nap) =
            if timeout < Duration::from_millis(1) { (Duration::ZERO, timeout) } else { (timeout, Duration::ZERO) };
        if let Err(e) = w.poll.poll(&mut events, Some(wait))
            && e.kind() != io::ErrorKind::Interrupted
        {
            w.shared.fail(format!("worker {index}: the poller failed: {e}"));
            return;
        }
        // Events before commands: a command may free a slot and another reuse it, and this
        // poll's events belong to the slots' old connections.
        let now = w.now();
        for ev in events.iter() {
            if ev.token() == WAKE {
                continue;
            }
            let slot = ev.token().0 as u32;
            let hung_up = match w.slots.get_mut(slot as usize) {
                Some(Some(s)) => {
                    let mut gone = ev.is_error() || ev.is_write_closed();
                    if s.conn.sink {
                        // Read (and the end of the stream seen) in turn by serve_sinks.
                        if (ev.is_readable() || ev.is_read_closed()) && !w.sinks.contains(&slot) {
                            w.sinks.push_back(slot);
                        }
                    } else if ev.is_readable() || ev.is_read_closed() {
                        gone |= drain(&mut s.conn.io);
                        s.heard = now.0;
                    }
                    if ev.is_writable() && !s.writable && !gone {
                        s.writable = true;
                        if s.conn.rate.is_none() {
                            w.bulk.push_back(slot);
                        } else if w.shared.cfg.pacing == Pacing::Kernel {
                            w.kernel.push_back(slot);
                        }
                        w.pacer.writable(slot, now);
                    }
                    gone
                }
                _ => false,
            };
            if hung_up {
                w.close(slot);
            }
        }
        while let Ok(cmd) = commands.try_recv() {
            let now = w.now();
            w.command(cmd, now);
        }
        if !nap.is_zero() && events.is_empty() {
            std::thread::sleep(nap);
        }
        w.serve_paced();
        let now = w.now();
        w.serve_quota(now);
        w.serve_bulk();
        w.serve_kernel();
        w.serve_sinks();
        if now.0 >= last_sample + every {
            let elapsed = Nanos(now.0 - last_sample);
            last_sample = now.0;
            let silent = UDP_SILENCE.as_nanos() as u64;
            let gone: Vec<u32> = (0..w.slots.len() as u32)
                .filter(|&i| {
                    w.slots[i as usize]
                        .as_ref()
                        .is_some_and(|s| matches!(s.conn.io, Io::Udp(_)) && now.0.saturating_sub(s.heard) > silent)
                })
                .collect();
            for slot in gone {
                w.close(slot);
            }
            if let Some(q) = &mut w.quota {
                q.sample(std::mem::take(&mut w.stream_bytes), elapsed);
            }
            let stats = &w.shared.workers[index];
            let late = w.pacer.take_max_late().0.max(std::mem::take(&mut w.round_late));
            stats.late_ns.fetch_max(late, Ordering::Relaxed);
            stats.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
            if let Some(cpu) = current_cpu() {
                stats.cpu.store(cpu, Ordering::Relaxed);
            }
            // The kernel may process a connection's packets elsewhere as time goes on (the
            // sender moved, RPS changed): what a steering report compares is the latest.
            for s in w.slots.iter().flatten() {
                if let (true, Io::Tcp(t)) = (s.conn.sink, &s.conn.io)
                    && let Some(cpu) = super::server::incoming_cpu(t)
                {
                    s.conn.stats.incoming_cpu.store(cpu, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The CPU this thread is running on, where the OS can say.
fn current_cpu() -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        nix::sched::sched_getcpu().ok().and_then(|c| u32::try_from(c).ok())
    }
    #[cfg(not(target_os = "linux"))]
    None
}

/// CPU time this thread has used, in nanoseconds (0 where the OS cannot say).
pub(crate) fn thread_cpu_ns() -> u64 {
    #[cfg(target_os = "linux")]
    {
        use nix::time::{ClockId, clock_gettime};
        if let Ok(t) = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID) {
            return t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    const MS: u64 = 1_000_000;

    /// A turn whose every send takes two milliseconds of `clock`.
    struct SlowSends {
        pacer: Pacer,
        clock: Cell<u64>,
        /// Per stream: bytes sent so far, and how far behind its line it was right after each
        /// send (the worst, bytes; its line `rate × t` from 0, where it was added).
        sent: Vec<u64>,
        behind: Vec<f64>,
        rate: f64,
    }

    impl PacedSends for SlowSends {
        fn pacer(&mut self) -> &mut Pacer {
            &mut self.pacer
        }
        fn clock(&self) -> Nanos {
            Nanos(self.clock.get())
        }
        fn send(&mut self, slot: u32, bytes: u64, _: Debts) -> (u64, bool) {
            self.clock.set(self.clock.get() + 2 * MS);
            let i = slot as usize;
            self.sent[i] += bytes;
            let line = self.rate * self.clock.get() as f64 / 1e9;
            self.behind[i] = self.behind[i].max(line - self.sent[i] as f64);
            (bytes, true)
        }
    }

    /// 100 streams at 64 kb/s with a 100 ms grain, a turn after a 400 ms stall, each send two
    /// milliseconds: every stream leaves at least on its line, the last as the first. (Grants
    /// made at the turn's start, 500 ms of the stream each, left the 100th stream, sent 200 ms
    /// later, 800 B behind.)
    #[test]
    fn each_grant_is_made_at_its_send_not_at_the_turns_start() {
        let n = 100;
        let mut d = SlowSends {
            pacer: Pacer::new(PaceConfig { grain: Nanos(100 * MS), ..Default::default() }),
            clock: Cell::new(0),
            sent: vec![0; n],
            behind: vec![f64::MIN; n],
            rate: 8_000.0,
        };
        for i in 0..n {
            d.pacer.add(i as u32, 8_000.0, Nanos(0));
        }
        d.clock.set(400 * MS);
        pace_turn(&mut d);
        assert!(d.sent.iter().all(|b| *b > 0), "every stream was served: {:?}", d.sent);
        let worst = d.behind.iter().copied().fold(f64::MIN, f64::max);
        assert!(worst <= 1.0, "a stream left {worst:.0} B behind its line: {:?}", d.behind);
    }
}
