//! One connection of a session as the driver holds it: its link (a socket or two rings), and with
//! TLS the keys of its records ([`crate::record`]); the frames waiting to be written and the bytes
//! read and not yet decoded.
//!
//! The driver does the I/O itself, without blocking, when the link says it is ready: a task per
//! connection cost a wake-up or two per frame, which on loopback was most of the work. TLS
//! connections are the exception: the same code runs on a task of the connection's own
//! ([`crate::offload`]), which the driver wakes once a batch of frames (up to 64 KiB), not once
//! a frame, and which spreads the sealing and opening over the cores.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use switchyard_core::carry::Frame;
use switchyard_core::carry::frame::{DEFAULT_MAX_PAYLOAD, HEADER_LEN, MAX_REASON};

use crate::link::Link;
use crate::offload::Offload;
use crate::record::{MAX_PLAIN, MAX_RECORD, Opened, Opener, RecordError, Sealer};
use crate::tls::Records;

/// A joined connection: its link and, with TLS, its records' keys after the handshake (with
/// what the peer sent after its hello, if it came with the hello's last record).
pub(crate) struct Wire {
    pub(crate) link: Link,
    pub(crate) tls: Option<Box<Records>>,
}

impl Wire {
    /// A connection whose TLS handshake and hello are done: its keys are taken from rustls.
    pub(crate) async fn from_tls(stream: crate::tls::TlsStream) -> std::io::Result<Self> {
        let (stream, records) = crate::tls::records(stream).await?;
        Ok(Self { link: Link::tcp(stream), tls: Some(Box::new(records)) })
    }
}

/// A TLS connection's records, sealed and opened in the connection's own buffers.
struct TlsIo {
    sealer: Sealer,
    opener: Opener,
    /// Records sealed and not yet written in full, from `sent` on.
    sealed: Vec<u8>,
    sent: usize,
    /// The inbox holds plaintext up to `plain`, then (after the headers and tags of the records
    /// it came from) records not yet opened from `raw` on.
    plain: usize,
    raw: usize,
    /// The peer's close_notify has come: what it sends after is not read.
    closed: bool,
}

/// Bytes read from one connection before the driver turns to the others (at least
/// [`READ_FRAMES`] frames). More let one connection's frames run ahead of the others' and wait
/// in the reorder buffers: with 16 KiB frames, 256 KiB a turn held up to 4.5 MB in bench mux
/// and ran out of credit while credit was counted in frames. With credit in bytes, 256 KiB
/// turns cost less CPU per byte (bench mux's ×raw CPU 0.56–1.00 against 0.43–0.59, the same
/// runs interleaved on 2 cores at load 13–17), but least-queued striping's largest weight gap
/// reached 0.77 and 1.54 points in two runs of four (0.00–0.02 at 64 KiB). Fewer cost system
/// calls: with 128 KiB frames, 64 KiB a turn ran at 0.54–0.72 of raw TCP's cost per byte
/// against 0.76–1.04 for 256 KiB. 128 KiB keeps most of the saving and the weights: in bench
/// mux (AMD EPYC, 2 cores, load 14–17, six runs of each, binaries alternated) least-queued
/// striping cost 401–463 ns/KB against 467–514 at 64 KiB (×raw CPU 0.62–0.82 against
/// 0.56–0.65), earliest delivery 399–416 against 417–480, TLS 738–783 against 772–864, and the
/// largest weight gap stayed at 0.01–0.07 points (0.01–0.03 at 64 KiB); the reorder buffers
/// held 2.9–4.3 MB against 4.5–9.9. Each receive buffer is a turn and a frame, so a
/// connection's buffers (with [`SPARE_BUFFERS`]) hold up to 1.3 MB against 0.7.
const READ_TURN: usize = 128 << 10;
/// The fewest frames a turn reads, for frames larger than a quarter of [`READ_TURN`].
const READ_FRAMES: usize = 4;
/// Receive buffers a connection keeps after it has moved on to a fresh one, for reuse once
/// every frame cut from them has been dropped. The payloads handed to the core and the
/// application are slices of the buffer they were read into, so a buffer stays alive as long
/// as its last frame; reading into a new allocation each time cost the kernel's copy into it a
/// page fault per page (glibc hands freed arenas back with `madvise`) and a cold cache, and
/// that copy took 15–17% of a striping session's CPU against 12% for the copy out of the
/// writer. The one read into last is reused first, as the likeliest still in the cache: the
/// oldest first cycled every spare through the kernel's copy, which cost a striping session
/// about twice raw TCP's copy per byte (perf, cpu-clock). Each holds a turn and the end of a
/// frame cut by it; eight, as a striping session's reorder buffers hold frames of several:
/// with four, a 15-channel striping session on loopback faulted 27–52 thousand fresh pages in
/// 3 s, against 11–17 thousand in three runs of four with eight (256 KiB turns, load 15–17).
const SPARE_BUFFERS: usize = 8;
/// Pieces handed to one vectored write.
const WRITE_PIECES: usize = 64;
/// Plaintext sealed into records at a time for a connection and not yet sent: beyond the frames
/// the driver queues, this is what is bound to the connection before the socket takes it.
const TLS_BUFFER: usize = 64 << 10;

/// How a connection came by the buffers it read into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Buffers {
    pub(crate) allocated: u64,
    pub(crate) reused: u64,
}

/// What happened on a connection the driver worked on.
pub(crate) enum Io {
    /// It did what it could; nothing went wrong.
    Fine,
    /// The peer closed it, or the socket failed.
    Lost,
    /// The peer sent bytes that are not frames (or, with TLS, records that fail their checks).
    Broken,
}

pub(crate) struct Conn {
    /// The connection's link; with TLS sealed on the connection's own task ([`Offload`]), a
    /// second handle on its socket, only for the kernel's view of it.
    pub(crate) link: Link,
    tls: Option<Box<TlsIo>>,
    /// With TLS, the task that seals, opens and does the I/O ([`crate::offload`]).
    offload: Option<Offload>,
    /// Why the peer's records were refused, once they were ([`Io::Broken`]).
    pub(crate) refused: Option<RecordError>,
    /// Bytes read (decrypted, with TLS) and not yet decoded.
    inbox: BytesMut,
    /// Buffers read into before `inbox`, oldest first, emptied: reused once their frames are
    /// gone ([`SPARE_BUFFERS`]).
    spare: VecDeque<BytesMut>,
    /// Receive buffers allocated, and reused from `spare`.
    pub(crate) buffers: Buffers,
    /// Bytes read in one turn before the driver turns to the other connections.
    read_budget: usize,
    /// Each receive buffer's size: a turn, and the start of a frame cut by the last turn's end
    /// (the peer's largest frame), so that a spare holds both and can be reused.
    room: usize,
    /// Encoded frames not yet written, in order: each frame's head, then its payload if it has
    /// one; `true` marks a frame's last piece.
    out: VecDeque<(Bytes, bool)>,
    /// Frames (whole or partly unwritten) in `out`.
    pub(crate) queued: usize,
    /// Heads are encoded here and split off into `out`.
    heads: BytesMut,
    /// When the kernel's view of the connection was last read.
    pub(crate) viewed: Instant,
    /// The socket refused bytes and has not said since that it takes more: writing again
    /// before it does would be a system call for nothing.
    pub(crate) full: bool,
    /// When the connection joined the session.
    pub(crate) opened: Instant,
    /// When bytes last arrived on it.
    pub(crate) heard: Instant,
    /// When this end last pinged it.
    pub(crate) pinged: Instant,
}

/// Drops `n` written bytes from the front of `out`, counting the frames finished in `queued`.
fn consume(out: &mut VecDeque<(Bytes, bool)>, queued: &mut usize, mut n: usize) {
    while n > 0 {
        let (piece, last) = out.front_mut().expect("written bytes were queued");
        if n < piece.len() {
            piece.advance(n);
            break;
        }
        n -= piece.len();
        if *last {
            *queued -= 1;
        }
        out.pop_front();
    }
}

impl Conn {
    /// A connection whose peer sends frames of up to `frame` bytes. With TLS and `task`, its
    /// records are sealed and opened on a task of its own ([`crate::offload`]), or on the
    /// driver's where its socket cannot be shared (out of descriptors).
    pub(crate) fn new(wire: Wire, frame: usize, task: bool) -> Self {
        if task
            && wire.tls.is_some()
            && let Some(twin) = wire.link.twin()
        {
            let inner = Self::inline(wire, frame);
            let mut outer = Self::inline(Wire { link: twin, tls: None }, frame);
            outer.offload = Some(Offload::start(inner));
            return outer;
        }
        Self::inline(wire, frame)
    }

    /// A connection whose I/O (and crypto, with TLS) is done by whoever calls it.
    pub(crate) fn inline(wire: Wire, frame: usize) -> Self {
        let Wire { link, tls } = wire;
        let mut inbox = BytesMut::new();
        let tls = tls.map(|records| {
            let Records { sealer, opener, early } = *records;
            // Frames that came with the hello's last record are cut first.
            inbox.extend_from_slice(&early);
            let (plain, raw) = (inbox.len(), inbox.len());
            Box::new(TlsIo { sealer, opener, sealed: Vec::new(), sent: 0, plain, raw, closed: false })
        });
        let read_budget = (READ_FRAMES * frame).max(READ_TURN);
        // A turn and the largest frame (or TLS record) cut by its end.
        let largest = (HEADER_LEN + frame.max(MAX_REASON as usize + 8)).max(MAX_RECORD);
        Self {
            link,
            tls,
            offload: None,
            refused: None,
            read_budget,
            room: read_budget + largest,
            inbox,
            spare: VecDeque::new(),
            buffers: Buffers::default(),
            out: VecDeque::new(),
            queued: 0,
            heads: BytesMut::with_capacity(4 << 10),
            viewed: Instant::now(),
            full: false,
            opened: Instant::now(),
            heard: Instant::now(),
            pinged: Instant::now(),
        }
    }

    /// Queues `frame` for writing.
    pub(crate) fn push(&mut self, frame: &Frame) {
        let payload = frame.encode_head(&mut self.heads);
        let head = self.heads.split().freeze();
        match payload {
            Some(p) => {
                self.out.push_back((head, false));
                self.out.push_back((p, true));
            }
            None => self.out.push_back((head, true)),
        }
        self.queued += 1;
    }

    /// Queues one piece of an encoded frame (`last`: the frame's last) for writing.
    pub(crate) fn queue_piece(&mut self, piece: Bytes, last: bool) {
        self.queued += usize::from(last);
        self.out.push_back((piece, last));
    }

    /// Whether frames wait to be written (with TLS, to be sealed).
    pub(crate) fn holds_frames(&self) -> bool {
        !self.out.is_empty()
    }

    /// Ready when [`Conn::read`] has something: bytes from the link, or, with TLS on the
    /// connection's task, frames it opened or its end.
    pub(crate) fn poll_read_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match &self.offload {
            Some(o) => o.poll_read_ready(cx),
            None => self.link.poll_read_ready(cx).map(|_| ()),
        }
    }

    /// Ready when [`Conn::write`] would take bytes: the link's room, or, with TLS on the
    /// connection's task, room in what it has been handed.
    pub(crate) fn poll_write_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        match &self.offload {
            Some(o) => o.poll_write_ready(cx),
            None => self.link.poll_write_ready(cx).map(|_| ()),
        }
    }

    /// Whether bytes wait to be written (frames, or with TLS, records).
    pub(crate) fn holds_bytes(&self) -> bool {
        !self.out.is_empty() || self.tls.as_ref().is_some_and(|t| t.sent < t.sealed.len())
    }

    /// Writes what the socket takes now. `Ok(true)` if it took anything.
    pub(crate) fn write(&mut self) -> std::io::Result<bool> {
        if let Some(offload) = &self.offload {
            // The task's end, if it has ended, comes through `read`, after its last frames.
            let (handed, full) = offload.hand_over(&mut self.out, &mut self.queued);
            self.full = full;
            return Ok(handed);
        }
        if self.tls.is_some() {
            return self.write_tls();
        }
        let mut wrote_any = false;
        while !self.out.is_empty() && !self.full {
            // On the stack: this runs for every write.
            let mut slices = [std::io::IoSlice::new(&[]); WRITE_PIECES];
            let mut count = 0;
            for ((piece, _), slice) in self.out.iter().zip(&mut slices) {
                *slice = std::io::IoSlice::new(piece);
                count += 1;
            }
            match self.link.try_write_vectored(&slices[..count]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    wrote_any = true;
                    consume(&mut self.out, &mut self.queued, n);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.full = true,
                Err(e) => return Err(e),
            }
        }
        Ok(wrote_any)
    }

    /// [`Conn::write`] through TLS: frames sealed into records ([`TLS_BUFFER`] at a time), the
    /// records to the socket.
    fn write_tls(&mut self) -> std::io::Result<bool> {
        let tls = self.tls.as_mut().expect("a TLS connection");
        let mut wrote_any = false;
        loop {
            if tls.sent == tls.sealed.len() {
                tls.sealed.clear();
                tls.sent = 0;
                seal(&mut tls.sealer, &mut tls.sealed, &mut self.out, &mut self.queued)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
            }
            if self.full || tls.sent == tls.sealed.len() {
                return Ok(wrote_any);
            }
            match self.link.try_write(&tls.sealed[tls.sent..]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    tls.sent += n;
                    wrote_any = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => self.full = true,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads what has arrived (up to a turn's budget, [`READ_TURN`]) and decodes every whole
    /// frame in it.
    pub(crate) fn read(&mut self, frames: &mut Vec<Frame>) -> Io {
        if let Some(offload) = &self.offload {
            let before = frames.len();
            let io = offload.take(frames, &mut self.refused);
            if frames.len() > before {
                self.heard = Instant::now();
            }
            return io;
        }
        if self.tls.is_some() {
            return self.read_tls(frames);
        }
        let mut taken = 0;
        let budget = self.read_budget;
        while taken < budget {
            // Each turn begins a buffer unless a whole turn fits in what is left, though a read
            // on loopback takes a few tens of KB. Reading on into what is left (down to a frame)
            // was tried and cost more, not less (bench mux --cases stripe, the bench's machine
            // an Intel Xeon VM, 2 cores, load 13-17, 14 runs of each binary alternated): perf
            // showed the user-space copies (`make_room` carrying the frame cut by a read) fall
            // from 3.2-5.7% of the session's samples to 1.7-3.1%, page faults and the pages
            // they clear from 2.2-3.3% to 0.6-1.6%, and reads per vectored write from 0.78-0.81
            // to 0.63, but CPU per byte rose (median 419 ns/KB against 365 over the last 8
            // pairs; ×raw CPU median 0.76 against 0.85) and one run's weight gap reached 1.50
            // points (0.73 at most without). Likely, not measured: a buffer filled over many
            // turns lives until the last of their frames is read, so fewer spares are free.
            if self.inbox.capacity() - self.inbox.len() < budget - taken {
                self.make_room(budget - taken);
            }
            // A read that emptied what had arrived ends the turn: the link says when more comes.
            match self.link.read_into(&mut self.inbox, budget - taken) {
                Ok((0, _)) => return Io::Lost,
                Ok((got, false)) => taken += got,
                Ok((_, true)) => {
                    self.heard = Instant::now();
                    taken = budget;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => taken = budget,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Io::Lost,
            }
            if !self.decode(frames) {
                return Io::Broken;
            }
        }
        self.heard = Instant::now();
        Io::Fine
    }

    /// [`Conn::read`] through TLS: records are opened where they were read, their plaintext
    /// joining the plaintext before them, and frames cut from it as on a plain connection.
    fn read_tls(&mut self, frames: &mut Vec<Frame>) -> Io {
        let mut taken = 0;
        loop {
            let tls = self.tls.as_mut().expect("a TLS connection");
            let mut need = 0;
            while !tls.closed {
                match tls.opener.open(&mut self.inbox, tls.plain, tls.raw) {
                    Ok(Opened::Data { len, used }) => {
                        tls.plain += len;
                        tls.raw += used;
                    }
                    Ok(Opened::Nothing { used }) => tls.raw += used,
                    Ok(Opened::Closed { used }) => {
                        tls.raw += used;
                        tls.closed = true;
                    }
                    Ok(Opened::Partial { need: n }) => {
                        need = n;
                        break;
                    }
                    Err(e) => {
                        // Frames opened before are good: the core takes them.
                        let _ = decode_plain(&mut self.inbox, tls, frames);
                        self.refused = Some(e);
                        return Io::Broken;
                    }
                }
            }
            if !decode_plain(&mut self.inbox, tls, frames) {
                return Io::Broken;
            }
            if tls.closed {
                // The peer's close_notify, and every frame before it taken.
                return Io::Lost;
            }
            if taken >= self.read_budget {
                return Io::Fine;
            }
            // Room for the rest of the turn, and at least for the record begun.
            let room = (self.read_budget - taken).max(need);
            if self.inbox.capacity() - self.inbox.len() < room {
                self.make_room(room);
            }
            match self.link.read_into(&mut self.inbox, room) {
                Ok((0, _)) => return Io::Lost,
                Ok((got, drained)) => {
                    self.heard = Instant::now();
                    taken += got;
                    if drained {
                        // The link says when more comes; what came is opened first.
                        taken = taken.max(self.read_budget);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => taken = taken.max(self.read_budget),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Io::Lost,
            }
        }
    }

    /// Moves the inbox to a buffer with room for `more` bytes beyond what it holds (the start
    /// of a frame cut by the end of the last read): the spare read into last of those whose
    /// frames have all been dropped, if there is one, else a new one. The buffer left behind
    /// joins the spares.
    fn make_room(&mut self, more: usize) {
        let held = self.inbox.len() - self.tls.as_ref().map_or(0, |t| t.raw - t.plain);
        let size = self.room.max(held + more);
        let mut next = match self.spare.iter_mut().rposition(|b| b.try_reclaim(size)) {
            Some(i) => {
                self.buffers.reused += 1;
                self.spare.remove(i).expect("found there")
            }
            None => {
                self.buffers.allocated += 1;
                BytesMut::with_capacity(size)
            }
        };
        match self.tls.as_mut() {
            // The headers and tags of records already opened are left behind.
            Some(tls) => {
                next.extend_from_slice(&self.inbox[..tls.plain]);
                next.extend_from_slice(&self.inbox[tls.raw..]);
                tls.raw = tls.plain;
            }
            None => next.extend_from_slice(&self.inbox),
        }
        let mut left = std::mem::replace(&mut self.inbox, next);
        // Empty, it still holds its allocation, which it takes back whole once it is the
        // last holder (`try_reclaim`).
        left.clear();
        self.spare.push_back(left);
        if self.spare.len() > SPARE_BUFFERS {
            // The oldest: the one whose frames have waited longest, for a slow reader.
            self.spare.pop_front();
        }
    }

    /// Decodes every whole frame in the inbox; `false` if the bytes are not frames.
    fn decode(&mut self, frames: &mut Vec<Frame>) -> bool {
        decode(&mut self.inbox, frames)
    }
}

/// Decodes every whole frame in `bytes`; `false` if they are not frames.
fn decode(bytes: &mut BytesMut, frames: &mut Vec<Frame>) -> bool {
    loop {
        match Frame::decode(bytes, DEFAULT_MAX_PAYLOAD) {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// Decodes every whole frame in a TLS connection's plaintext, the front of `inbox`.
fn decode_plain(inbox: &mut BytesMut, tls: &mut TlsIo, frames: &mut Vec<Frame>) -> bool {
    // Split off and joined again without a copy: one allocation, contiguous.
    let records = inbox.split_off(tls.plain);
    let before = inbox.len();
    let ok = decode(inbox, frames);
    let cut = before - inbox.len();
    inbox.unsplit(records);
    tls.plain -= cut;
    tls.raw -= cut;
    if tls.plain == 0 {
        // Every frame cut: the headers and tags of the records they came in go without a copy
        // (left, they would pile up ahead of the plaintext, 22 bytes a record).
        inbox.advance(tls.raw);
        tls.raw = 0;
    }
    ok
}

/// Seals frames from `out` into records in `sealed`, up to [`TLS_BUFFER`] bytes of them, each
/// record as full as the frames waiting fill it (a frame may span records).
fn seal(
    sealer: &mut Sealer,
    sealed: &mut Vec<u8>,
    out: &mut VecDeque<(Bytes, bool)>,
    queued: &mut usize,
) -> Result<(), RecordError> {
    let mut taken = 0;
    while !out.is_empty() && taken < TLS_BUFFER {
        let start = sealed.len();
        sealed.reserve(MAX_RECORD);
        sealed.extend_from_slice(&[0; crate::record::HEADER]);
        let mut room = MAX_PLAIN;
        while room > 0 {
            let Some((piece, last)) = out.front() else { break };
            if piece.is_empty() {
                // An empty payload: nothing to copy, and `consume` takes bytes.
                *queued -= usize::from(*last);
                out.pop_front();
                continue;
            }
            let n = piece.len().min(room);
            sealed.extend_from_slice(&piece[..n]);
            consume(out, queued, n);
            room -= n;
        }
        taken += MAX_PLAIN - room;
        sealer.seal(sealed, start)?;
    }
    Ok(())
}

/// Writes what a connection still holds, then closes it (with TLS, after its close_notify).
pub(crate) async fn finish(mut conn: Conn) {
    if let Some(mut offload) = conn.offload.take() {
        offload.finish(&mut conn.out).await;
        return;
    }
    let mut notified = false;
    loop {
        conn.full = false;
        if conn.write().is_err() {
            return;
        }
        if !conn.holds_bytes() {
            match conn.tls.as_mut() {
                Some(tls) if !notified => {
                    if tls.sealer.close_notify(&mut tls.sealed).is_err() {
                        // The key's last record went: the end comes as the socket's.
                        break;
                    }
                    notified = true;
                    continue;
                }
                _ => break,
            }
        }
        if conn.link.writable().await.is_err() {
            return;
        }
    }
    let _ = conn.link.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpStream;

    /// A connection reading a peer's frames, and the peer's end to write them on.
    async fn pair(frame: usize) -> (Conn, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (ours, _) = listener.accept().await.unwrap();
        (Conn::new(Wire { link: Link::tcp(ours), tls: None }, frame, false), peer)
    }

    /// Reads until `n` frames have come.
    async fn frames(conn: &mut Conn, n: usize) -> Vec<Frame> {
        let read = async {
            let mut got = Vec::new();
            while got.len() < n {
                std::future::poll_fn(|cx| conn.poll_read_ready(cx)).await;
                assert!(matches!(conn.read(&mut got), Io::Fine));
            }
            got
        };
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("the frames came")
    }

    /// Where a TLS connection's records are sealed and opened.
    #[derive(Clone, Copy, Debug)]
    enum Crypto {
        /// On a task of the connection's own, as a session's connections are.
        Offloaded,
        /// By the caller of `read` and `write` (the connection's task does it this way).
        Inline,
    }

    const BOTH: [Crypto; 2] = [Crypto::Offloaded, Crypto::Inline];

    /// A TLS connection (the server) and its peer's ends: the socket, and the client's rustls
    /// state to make and read records with, by hand.
    async fn tls_pair(frame: usize, crypto: Crypto) -> (Conn, TcpStream, rustls::Connection) {
        let names = vec!["localhost".to_owned()];
        let (server, client) = crate::tls::SelfSigned::generate(&names).unwrap().pair("localhost").unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connecting = TcpStream::connect(listener.local_addr().unwrap());
        let (connected, accepted) = tokio::join!(connecting, listener.accept());
        let (theirs, ours) = tokio::join!(client.handshake(connected.unwrap()), server.handshake(accepted.unwrap().0));
        let tokio_rustls::TlsStream::Client(theirs) = theirs.unwrap() else { unreachable!("the client's end") };
        let (socket, peer) = theirs.into_inner();
        let mut peer = rustls::Connection::Client(peer);
        peer.set_buffer_limit(None);
        let wire = Wire::from_tls(ours.unwrap()).await.unwrap();
        let conn = match crypto {
            Crypto::Offloaded => Conn::new(wire, frame, true),
            Crypto::Inline => Conn::inline(wire, frame),
        };
        assert_eq!(conn.offload.is_some(), matches!(crypto, Crypto::Offloaded));
        (conn, socket.into_inner(), peer)
    }

    /// Data frames of the given payload sizes, each payload a pattern of its own.
    fn data_frames(sizes: &[usize]) -> Vec<Frame> {
        let payload = |seq: usize, n: usize| (0..n).map(|i| (i * 7 + seq * 13) as u8).collect::<Vec<u8>>();
        sizes
            .iter()
            .enumerate()
            .map(|(seq, &n)| Frame::Data { channel: 3, seq: seq as u64, payload: Bytes::from(payload(seq, n)) })
            .collect()
    }

    /// `frames` encrypted by `peer`, in writes of a few frames each (records of many sizes).
    fn sealed(peer: &mut rustls::Connection, frames: &[Frame]) -> Vec<u8> {
        let mut wire = Vec::new();
        for group in frames.chunks(3) {
            let mut plain = BytesMut::new();
            for f in group {
                f.encode(&mut plain);
            }
            peer.writer().write_all(&plain).unwrap();
            while peer.wants_write() {
                peer.write_tls(&mut wire).unwrap();
            }
        }
        wire
    }

    /// Reads until the connection ends (`Io::Lost`), with every frame that came before.
    async fn frames_to_end(conn: &mut Conn) -> Vec<Frame> {
        let read = async {
            let mut got = Vec::new();
            loop {
                std::future::poll_fn(|cx| conn.poll_read_ready(cx)).await;
                match conn.read(&mut got) {
                    Io::Fine => {}
                    Io::Lost => return got,
                    Io::Broken => panic!("broken after {} frames", got.len()),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("the connection ended")
    }

    /// Records reach the connection cut anywhere by the socket (a byte at a time, across a
    /// record's header, a bit more and less than a record, more than a read takes), and the
    /// last ones in a single burst after a pause, so that a turn's budget runs out with records
    /// read from the socket and not yet decrypted, and no more bytes come to wake the reader:
    /// every frame arrives, whole and in order.
    #[tokio::test]
    async fn tls_records_cut_anywhere_by_the_socket_arrive_whole_and_in_order() {
        for crypto in BOTH {
            let frame = 1 << 10;
            let (mut conn, mut socket, mut peer) = tls_pair(frame, crypto).await;
            let sizes: Vec<usize> = (0..900).map(|i| [1, 700, 16 << 10, 5000, 2, 20_000][i % 6]).collect();
            let mut sent = data_frames(&sizes);
            let cuts = sealed(&mut peer, &sent);
            // The burst starts at a record's start, so that rustls holds nothing when it comes, and
            // is more than a turn's budget (64 KiB): the turn ends with records already read.
            let last = data_frames(&[1000; 95]);
            let burst = sealed(&mut peer, &last);
            sent.extend(last);
            let writer = tokio::spawn(async move {
                let steps = [1, 3, 1, 5, 4096, 16_401, 16_406, 16_411, 65_535, 65_536, 65_537, 100_000];
                let mut at = 0;
                for step in steps.iter().cycle() {
                    let end = (at + step).min(cuts.len());
                    socket.write_all(&cuts[at..end]).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    at = end;
                    if at == cuts.len() {
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
                socket.write_all(&burst).await.unwrap();
                socket
            });
            let got = frames(&mut conn, sent.len()).await;
            assert_eq!(got.len(), sent.len());
            for (i, (got, sent)) in got.iter().zip(&sent).enumerate() {
                assert!(got == sent, "frame {i} differs");
            }
            drop(writer.await.unwrap());
        }
    }

    /// The peer's frames, its close_notify and bytes after it, in one read: the frames arrive,
    /// then the end, and what followed the close_notify is not taken as frames.
    #[tokio::test]
    async fn tls_frames_before_a_close_notify_in_the_same_read_all_arrive() {
        for crypto in BOTH {
            let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, crypto).await;
            let sent = data_frames(&[5, 16 << 10, 300, 9000, 1]);
            let mut wire = sealed(&mut peer, &sent);
            peer.send_close_notify();
            while peer.wants_write() {
                peer.write_tls(&mut wire).unwrap();
            }
            wire.extend(sealed(&mut peer, &data_frames(&[100])));
            socket.write_all(&wire).await.unwrap();
            let got = frames_to_end(&mut conn).await;
            assert!(got == sent, "{} frames of {} came, or they differ", got.len(), sent.len());
            drop(socket);
        }
    }

    /// Frames of many sizes, queued and then written through TLS while the peer reads: rustls
    /// takes them as far as its buffer goes, and the peer reads every frame, whole and in
    /// order.
    #[tokio::test]
    async fn tls_frames_written_arrive_whole_and_in_order() {
        for crypto in BOTH {
            let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, crypto).await;
            let sizes: Vec<usize> = (0..300).map(|i| [100, 16 << 10, 3000, 1, 2][i % 5]).collect();
            let sent = data_frames(&sizes);
            let mut plain = BytesMut::new();
            for f in &sent {
                conn.push(f);
                f.encode(&mut plain);
            }
            let writing = async {
                while conn.queued > 0 {
                    conn.full = false;
                    conn.write().unwrap();
                    std::future::poll_fn(|cx| conn.poll_write_ready(cx)).await;
                }
            };
            let reading = async {
                use tokio::io::AsyncReadExt;
                let mut wire = Vec::new();
                let mut got = Vec::new();
                let mut at = 0;
                while got.len() < plain.len() {
                    let mut buf = vec![0; 1 << 16];
                    let n = socket.read(&mut buf).await.unwrap();
                    assert!(n > 0, "the connection ended after {} of {} bytes", got.len(), plain.len());
                    wire.extend_from_slice(&buf[..n]);
                    // Decrypt the records whole on the wire.
                    while wire.len() >= at + 5 {
                        let len = usize::from(u16::from_be_bytes([wire[at + 3], wire[at + 4]]));
                        if wire.len() < at + 5 + len {
                            break;
                        }
                        let mut record = &wire[at..at + 5 + len];
                        while !record.is_empty() {
                            peer.read_tls(&mut record).unwrap();
                        }
                        peer.process_new_packets().unwrap();
                        let _ = peer.reader().read_to_end(&mut got);
                        at += 5 + len;
                    }
                }
                got
            };
            let ((), got) =
                tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(writing, reading) }).await.unwrap();
            assert!(got == plain[..], "the bytes read differ from the frames written");
        }
    }

    /// The headers and tags of records opened do not pile up in the receive buffer: once the
    /// frames they carried are cut, nothing of them is left (they were kept, 22 bytes a
    /// record, and copied along to every new buffer).
    #[tokio::test]
    async fn tls_opened_records_leave_nothing_behind_once_their_frames_are_cut() {
        let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, Crypto::Inline).await;
        let sent = data_frames(&[100; 3000]);
        let wire = sealed(&mut peer, &sent);
        let writer = tokio::spawn(async move {
            socket.write_all(&wire).await.unwrap();
            socket
        });
        let got = frames(&mut conn, sent.len()).await;
        assert!(got == sent, "{} frames of {}, or they differ", got.len(), sent.len());
        assert_eq!(conn.inbox.len(), 0, "bytes left in the receive buffer after every whole record's frames");
        drop(writer.await.unwrap());
    }

    /// A record altered on the way ends the connection, and the connection says why; the
    /// frames before it arrive.
    #[tokio::test]
    async fn tls_a_tampered_record_breaks_the_connection_naming_why() {
        for crypto in BOTH {
            let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, crypto).await;
            let sent = data_frames(&[300, 20]);
            let mut wire = sealed(&mut peer, &sent);
            let at = wire.len();
            wire.extend(sealed(&mut peer, &data_frames(&[100])));
            wire[at + 8] ^= 0x40;
            socket.write_all(&wire).await.unwrap();
            let mut got = Vec::new();
            let read = async {
                loop {
                    std::future::poll_fn(|cx| conn.poll_read_ready(cx)).await;
                    match conn.read(&mut got) {
                        Io::Fine => {}
                        Io::Lost => panic!("lost, not broken"),
                        Io::Broken => return,
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(30), read).await.expect("the record was refused");
            assert!(got == sent, "{} frames of {} came before the bad record", got.len(), sent.len());
            let why = conn.refused.as_ref().expect("a reason").to_string();
            assert!(why.contains("key mismatch or corruption"), "{why}");
        }
    }

    /// A finished connection's last frames, then its close_notify, reach the peer: the peer
    /// reads an intended end, not a truncation.
    #[tokio::test]
    async fn tls_a_finished_connection_ends_with_its_close_notify() {
        for crypto in BOTH {
            use tokio::io::AsyncReadExt;
            let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, crypto).await;
            let sent = data_frames(&[100, 16 << 10, 7]);
            let mut plain = BytesMut::new();
            for f in &sent {
                conn.push(f);
                f.encode(&mut plain);
            }
            tokio::time::timeout(Duration::from_secs(30), finish(conn)).await.expect("finished");
            let mut wire = Vec::new();
            socket.read_to_end(&mut wire).await.unwrap();
            let mut bytes = &wire[..];
            let mut got = Vec::new();
            while !bytes.is_empty() {
                peer.read_tls(&mut bytes).unwrap();
                peer.process_new_packets().unwrap();
                let _ = peer.reader().read_to_end(&mut got);
            }
            assert!(got == plain[..], "{} bytes of {}", got.len(), plain.len());
            assert!(peer.process_new_packets().unwrap().peer_has_closed(), "no close_notify came");
        }
    }

    /// Reads TLS records off `socket` with `peer` until `want` bytes of plaintext have come.
    async fn plaintext(socket: &mut TcpStream, peer: &mut rustls::Connection, want: usize) -> Vec<u8> {
        use tokio::io::AsyncReadExt;
        let mut got = Vec::new();
        let mut buf = vec![0; 1 << 16];
        while got.len() < want {
            let n = socket.read(&mut buf).await.unwrap();
            assert!(n > 0, "the connection ended after {} of {want} bytes", got.len());
            let mut bytes = &buf[..n];
            while !bytes.is_empty() {
                peer.read_tls(&mut bytes).unwrap();
                peer.process_new_packets().unwrap();
                let _ = peer.reader().read_to_end(&mut got);
            }
        }
        got
    }

    /// Frames handed to the connection's task as the driver hands them (a couple at a time,
    /// more each time it has room, small and large mixed, on a runtime with two threads, so
    /// that the task seals while the driver hands over) reach the peer in the order the
    /// driver chose them, whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_frames_handed_to_the_task_arrive_in_the_order_chosen() {
        let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, Crypto::Offloaded).await;
        let sizes: Vec<usize> = (0..2000).map(|i| [1, 16 << 10, 9, 700, 16 << 10, 2][i % 6]).collect();
        let sent = data_frames(&sizes);
        let mut plain = BytesMut::new();
        for f in &sent {
            f.encode(&mut plain);
        }
        let want = plain.len();
        let reading = tokio::spawn(async move { plaintext(&mut socket, &mut peer, want).await });
        let writing = async {
            let mut next = 0;
            while next < sent.len() || conn.queued > 0 {
                while !conn.full && conn.queued < 2 && next < sent.len() {
                    conn.push(&sent[next]);
                    next += 1;
                }
                conn.write().unwrap();
                if conn.full {
                    std::future::poll_fn(|cx| conn.poll_write_ready(cx)).await;
                    conn.full = false;
                }
            }
            conn
        };
        let conn = tokio::time::timeout(Duration::from_secs(60), writing).await.expect("every frame handed over");
        let got = tokio::time::timeout(Duration::from_secs(60), reading).await.expect("every byte came").unwrap();
        let mut got = BytesMut::from(&got[..]);
        let mut frames = Vec::new();
        assert!(decode(&mut got, &mut frames), "the bytes that came are not frames");
        assert_eq!(frames.len(), sent.len(), "frames came whole");
        for (i, (got, sent)) in frames.iter().zip(&sent).enumerate() {
            assert!(got == sent, "frame {i} is not the one handed over {i}th");
        }
        drop(conn);
    }

    /// While the peer reads nothing, the driver hands the connection's task frames until the
    /// socket and the task's bounded queue are full, and then the connection says it is full
    /// and stays so: the driver is held back, with its frames still queued, instead of the
    /// task taking everything (or dropping any). Once the peer reads, every frame comes, in
    /// order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_a_full_sealing_queue_holds_the_driver_back_and_drops_nothing() {
        let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, Crypto::Offloaded).await;
        // Far more than the socket's buffers hold while the peer reads nothing (4 MiB to
        // send and the receive buffer's initial 128 KiB here, net.ipv4.tcp_wmem/rmem).
        let sent = data_frames(&[16 << 10; 2048]);
        let mut next = 0;
        let held = loop {
            while !conn.full && conn.queued < 2 && next < sent.len() {
                conn.push(&sent[next]);
                next += 1;
            }
            conn.write().unwrap();
            if next == sent.len() && conn.queued == 0 {
                break false;
            }
            if conn.full {
                // Room that does not come within a second, with the peer reading nothing, is
                // the queue held full (the test does not depend on how fast room comes).
                let room = std::future::poll_fn(|cx| conn.poll_write_ready(cx));
                match tokio::time::timeout(Duration::from_secs(1), room).await {
                    Ok(()) => conn.full = false,
                    Err(_) => break true,
                }
            }
        };
        assert!(
            held && conn.queued > 0,
            "{next} frames of {} handed over ({} still queued) with the peer reading nothing: the task's \
             queue did not hold the driver back",
            sent.len(),
            conn.queued
        );
        let handed = (next - conn.queued) * (16 << 10);
        assert!(handed < 16 << 20, "{handed} bytes handed over before the queue held: not bounded");
        let mut plain = BytesMut::new();
        for f in &sent {
            f.encode(&mut plain);
        }
        let want = plain.len();
        let reading = tokio::spawn(async move { plaintext(&mut socket, &mut peer, want).await });
        let writing = async {
            while next < sent.len() || conn.queued > 0 {
                while !conn.full && conn.queued < 2 && next < sent.len() {
                    conn.push(&sent[next]);
                    next += 1;
                }
                conn.write().unwrap();
                if conn.full {
                    std::future::poll_fn(|cx| conn.poll_write_ready(cx)).await;
                    conn.full = false;
                }
            }
            conn
        };
        let conn = tokio::time::timeout(Duration::from_secs(120), writing).await.expect("every frame handed over");
        let got = tokio::time::timeout(Duration::from_secs(120), reading).await.expect("every byte came").unwrap();
        assert!(got == plain[..], "{} bytes came of {}, or they differ", got.len(), plain.len());
        drop(conn);
    }

    /// A connection whose peer goes away in the middle of a record: the frames of the whole
    /// records before it arrive, then the end (as a lost connection, whose unacknowledged
    /// frames the session sends again), neither a hang nor frames cut from half a record.
    #[tokio::test]
    async fn tls_a_connection_ending_mid_record_ends_after_the_frames_before_it() {
        for crypto in BOTH {
            let (mut conn, mut socket, mut peer) = tls_pair(16 << 10, crypto).await;
            let sent = data_frames(&[300, 16 << 10, 20]);
            let mut wire = sealed(&mut peer, &sent);
            let whole = wire.len();
            wire.extend(sealed(&mut peer, &data_frames(&[5000])));
            socket.write_all(&wire[..whole + 1000]).await.unwrap();
            drop(socket);
            let got = frames_to_end(&mut conn).await;
            assert!(
                got == sent,
                "{crypto:?}: {} frames of {} came before the end, or they differ",
                got.len(),
                sent.len()
            );
        }
    }

    /// A connection the driver lets go of (dropped, not finished) is closed: its task stops
    /// and the peer reads the end, as it did when the driver held the socket itself.
    #[tokio::test]
    async fn tls_a_connection_let_go_of_closes_its_socket() {
        use tokio::io::AsyncReadExt;
        let (conn, mut socket, _peer) = tls_pair(16 << 10, Crypto::Offloaded).await;
        drop(conn);
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(30), socket.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the socket stayed open after the connection was let go of");
    }

    fn payload_at(frame: &Frame) -> usize {
        match frame {
            Frame::Data { payload, .. } => payload.as_ptr() as usize,
            _ => panic!("a data frame"),
        }
    }

    /// The receive buffers' reuse: frames held keep their buffer, and once they are dropped
    /// the buffer is read into again instead of a new one allocated (the kernel's copy then
    /// lands in memory already mapped and warm), while the frames of later buffers are held.
    #[tokio::test]
    async fn a_receive_buffer_is_reused_once_its_frames_are_dropped() {
        let frame = 1 << 10;
        let (mut conn, mut peer) = pair(frame).await;
        let size = conn.room;
        let per_buffer = size / frame;
        let mut bytes = BytesMut::new();
        for seq in 0..per_buffer as u64 * 6 {
            Frame::Data { channel: 1, seq, payload: Bytes::from(vec![7u8; frame]) }.encode(&mut bytes);
        }
        let writer = tokio::spawn(async move {
            peer.write_all(&bytes).await.unwrap();
            peer
        });
        let first = frames(&mut conn, 1).await;
        let start = payload_at(&first[0]);
        let in_first = |f: &Frame| (start..start + size).contains(&payload_at(f));
        // Read on, holding every frame, until the reads have moved on to a third buffer.
        let mut held = first;
        while conn.buffers.allocated < 3 {
            held.extend(frames(&mut conn, 1).await);
        }
        // The first buffer's frames go; the others' stay.
        held.retain(|f| !in_first(f));
        let before = conn.buffers;
        let mut next = Vec::new();
        while conn.buffers == before {
            next.extend(frames(&mut conn, 1).await);
        }
        // The read that moved on, or the next: a buffer holds a turn.
        let after = frames(&mut conn, per_buffer / 2).await;
        assert!(
            next.iter().chain(&after).any(in_first),
            "{before:?} then {:?}: the first buffer, its frames gone, was not read into again",
            conn.buffers
        );
        assert_eq!(conn.buffers.reused, before.reused + 1);
        drop((held, next, writer));
    }

    /// Of the spare buffers whose frames are all gone, the one read into last is read into
    /// next: it is the one most likely still in the cache, and the kernel's copy into it is
    /// then cheaper. Reusing the oldest first cycled all the spares through that copy.
    #[tokio::test]
    async fn the_spare_buffer_read_into_last_is_read_into_first() {
        let frame = 1 << 10;
        let (mut conn, mut peer) = pair(frame).await;
        let mut bytes = BytesMut::new();
        for seq in 0..(8 << 20) / frame as u64 {
            Frame::Data { channel: 1, seq, payload: Bytes::from(vec![7u8; frame]) }.encode(&mut bytes);
        }
        let writer = tokio::spawn(async move {
            peer.write_all(&bytes).await.unwrap();
            peer
        });
        let read = async {
            // Which buffer the reads are in: a read that moves to a new buffer does so before
            // it reads, so every frame it decodes is in the buffer it ends in.
            let mut buffer = 0;
            let mut held: Vec<(usize, Frame)> = Vec::new();
            let mut second = None;
            loop {
                let before = conn.buffers;
                let mut got = Vec::new();
                std::future::poll_fn(|cx| conn.poll_read_ready(cx)).await;
                assert!(matches!(conn.read(&mut got), Io::Fine));
                if conn.buffers != before {
                    buffer += 1;
                }
                if buffer == 3 && second.is_none() {
                    // The first two buffers are spares now; every frame read into them goes.
                    let at: Vec<usize> = held.iter().filter(|(b, _)| *b == 2).map(|(_, f)| payload_at(f)).collect();
                    second = Some((*at.iter().min().unwrap(), at.iter().max().unwrap() + frame));
                    held.clear();
                }
                if buffer == 4 {
                    let (from, to) = second.unwrap();
                    let first = payload_at(&got[0]);
                    assert!(
                        (from..to).contains(&first),
                        "read into {first:#x}, not the second buffer ({from:#x}..{to:#x}), read into last: {:?}",
                        conn.buffers
                    );
                    return;
                }
                held.extend(got.into_iter().map(|f| (buffer, f)));
            }
        };
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("the frames came");
        drop(writer);
    }
}
