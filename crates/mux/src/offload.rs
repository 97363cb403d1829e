//! A TLS connection's records sealed and opened on a task of the connection's own, off the
//! session driver's task.
//!
//! With the crypto on the driver's task, while one connection's records were sealed or opened
//! no other connection of the session was served, and the session could use at most one core
//! however many connections it had. Here the driver still decides everything (which frame, on
//! which connection, in what order) and hands each connection's frames, already chosen and
//! encoded, to the connection's task, which seals them in that order and writes the socket;
//! the same task reads the socket, opens the records and cuts the frames, which the driver
//! takes as it took those it read itself. One task per connection seals every record of the
//! connection, so the sequence numbers stay per connection and per direction (RFC 8446 §5.3).
//! The task does its I/O with the driver's own code for a TLS connection (`conn.rs`); this is
//! only the hand-over between the two.
//!
//! Bounded both ways, in bytes, never dropping: the driver hands over at most [`TO_SEAL`]
//! bytes of frames not yet taken by the task, and a connection that has that much waiting
//! says it is full, as its socket would ([`Conn::full`](crate::conn::Conn)), so the core
//! chooses another connection or waits; the task takes them when what it took before is
//! sealed, and holds at most [`TO_SEAL`] more and 64 KiB of sealed records. It reads the
//! socket only while fewer than [`OPENED`] bytes of frames wait for the driver: past that the
//! socket fills and TCP holds the peer back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use switchyard_core::carry::Frame;
use tokio::task::JoinHandle;

use crate::conn::{Conn, Io, finish};
use crate::record::RecordError;

/// Bytes of encoded frames the driver may hand a connection's task before it takes them: one
/// batch sealed while the driver chooses the next.
pub(crate) const TO_SEAL: usize = 64 << 10;
/// Bytes of frames the task may have opened and cut before the driver takes them: a read
/// turn waiting while the task reads the next.
pub(crate) const OPENED: usize = 128 << 10;

/// The driver's side of a connection whose records its own task seals and opens.
pub(crate) struct Offload {
    shared: Arc<Mutex<Shared>>,
    task: Option<JoinHandle<()>>,
}

/// How the task ended its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The peer closed it (or its close_notify came), or the socket failed.
    Lost,
    /// The peer's records or frames failed their checks.
    Broken,
}

#[derive(Default)]
struct Shared {
    /// Encoded frames from the driver, in the order it chose them; `true` marks a frame's last
    /// piece.
    to_seal: VecDeque<(Bytes, bool)>,
    to_seal_bytes: usize,
    /// Frames opened and cut by the task, in the order they came.
    opened: Vec<Frame>,
    opened_bytes: usize,
    /// Set by the task after its last frames: the driver reads the end after them.
    end: Option<End>,
    refused: Option<RecordError>,
    /// The driver is done with the connection: what it handed over is written, then the
    /// close_notify.
    finishing: bool,
    /// The driver let go of the connection without finishing it: the task drops the socket.
    dropped: bool,
    driver_reads: Option<Waker>,
    driver_writes: Option<Waker>,
    task: Option<Waker>,
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panic while it was held ended a task of this connection; the state is still whole
    // (every change under the lock is a few assignments), and the connection then ends.
    shared.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn wake(waker: &mut Option<Waker>) {
    if let Some(w) = waker.take() {
        w.wake();
    }
}

fn register(slot: &mut Option<Waker>, cx: &Context<'_>) {
    if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
        *slot = Some(cx.waker().clone());
    }
}

impl Offload {
    /// Starts the task of `inner`, a TLS connection that does its own I/O and crypto.
    pub(crate) fn start(inner: Conn) -> Self {
        let shared = Arc::new(Mutex::new(Shared::default()));
        let task = tokio::spawn(work(inner, Arc::clone(&shared)));
        Self { shared, task: Some(task) }
    }

    /// Hands the task frames from the front of `out` while it has room, counting the frames
    /// handed over whole off `queued`. `(handed any, full)`: full when frames are left for
    /// want of room, or the task has ended (its end comes through [`Offload::take`]).
    pub(crate) fn hand_over(&self, out: &mut VecDeque<(Bytes, bool)>, queued: &mut usize) -> (bool, bool) {
        let mut s = lock(&self.shared);
        if s.end.is_some() {
            return (false, true);
        }
        let mut handed = false;
        while s.to_seal_bytes < TO_SEAL {
            let Some((piece, last)) = out.pop_front() else { break };
            *queued -= usize::from(last);
            s.to_seal_bytes += piece.len();
            s.to_seal.push_back((piece, last));
            handed = true;
        }
        if handed {
            wake(&mut s.task);
        }
        (handed, !out.is_empty())
    }

    /// Ready when the task has room for more frames, or has ended.
    pub(crate) fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = lock(&self.shared);
        if s.to_seal_bytes < TO_SEAL || s.end.is_some() {
            return Poll::Ready(());
        }
        register(&mut s.driver_writes, cx);
        Poll::Pending
    }

    /// Ready when frames have been opened, or the connection has ended.
    pub(crate) fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = lock(&self.shared);
        if !s.opened.is_empty() || s.end.is_some() {
            return Poll::Ready(());
        }
        register(&mut s.driver_reads, cx);
        Poll::Pending
    }

    /// Takes every frame opened so far onto `frames`, then, once none is left, the end if
    /// the connection has ended (and why its records were refused, if they were).
    pub(crate) fn take(&self, frames: &mut Vec<Frame>, refused: &mut Option<RecordError>) -> Io {
        let mut s = lock(&self.shared);
        if !s.opened.is_empty() {
            frames.append(&mut s.opened);
            // The task stopped reading at the bound, or may have: it reads on.
            if s.opened_bytes >= OPENED {
                wake(&mut s.task);
            }
            s.opened_bytes = 0;
        }
        match s.end {
            None => Io::Fine,
            Some(End::Lost) => Io::Lost,
            Some(End::Broken) => {
                *refused = s.refused.take();
                Io::Broken
            }
        }
    }

    /// Hands the task everything left in `out`, whatever the bound (the driver is done), and
    /// waits until it has written it, then its close_notify, and closed the connection.
    pub(crate) async fn finish(&mut self, out: &mut VecDeque<(Bytes, bool)>) {
        {
            let mut s = lock(&self.shared);
            for (piece, last) in out.drain(..) {
                s.to_seal_bytes += piece.len();
                s.to_seal.push_back((piece, last));
            }
            s.finishing = true;
            wake(&mut s.task);
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Offload {
    fn drop(&mut self) {
        let mut s = lock(&self.shared);
        s.dropped = true;
        wake(&mut s.task);
    }
}

/// What the task does once nothing is left to do turn by turn.
enum Step {
    /// The connection ended, or the driver let it go: the socket is dropped.
    Stop,
    /// The driver finished it: the last frames, the close_notify, the end.
    Finish,
}

/// The connection's task: seals and writes what the driver hands it, reads and opens what
/// comes, until the connection ends or the driver lets it go.
async fn work(mut conn: Conn, shared: Arc<Mutex<Shared>>) {
    let mut frames = Vec::new();
    // Frames that came with the hello's last record are already in hand, and will not make
    // the socket readable: the first turn reads without waiting.
    let mut first = true;
    let step = std::future::poll_fn(|cx| turn(&mut conn, &shared, &mut frames, &mut first, cx)).await;
    if let Step::Finish = step {
        finish(conn).await;
    }
}

/// Works on the connection until nothing is left to do now (then `Pending`, with every
/// wake-up registered) or it is over.
fn turn(
    conn: &mut Conn,
    shared: &Mutex<Shared>,
    frames: &mut Vec<Frame>,
    first: &mut bool,
    cx: &mut Context<'_>,
) -> Poll<Step> {
    loop {
        let mut busy = false;
        let room_to_read = {
            let mut s = lock(shared);
            if s.dropped {
                return Poll::Ready(Step::Stop);
            }
            register(&mut s.task, cx);
            // The next batch once the last one is sealed: a connection holds at most a batch
            // sealed and a batch waiting to be.
            if (!conn.holds_frames() || s.finishing) && !s.to_seal.is_empty() {
                for (piece, last) in s.to_seal.drain(..) {
                    conn.queue_piece(piece, last);
                }
                s.to_seal_bytes = 0;
                wake(&mut s.driver_writes);
                busy = true;
            }
            if s.finishing {
                return Poll::Ready(Step::Finish);
            }
            s.opened_bytes < OPENED
        };
        if conn.holds_bytes() {
            if conn.full && conn.link.poll_write_ready(cx).is_ready() {
                conn.full = false;
            }
            if !conn.full {
                match conn.write() {
                    Ok(wrote) => busy |= wrote,
                    Err(_) => {
                        let mut s = lock(shared);
                        s.end = Some(End::Lost);
                        wake(&mut s.driver_reads);
                        return Poll::Ready(Step::Stop);
                    }
                }
            }
        }
        if room_to_read && (std::mem::take(first) || conn.link.poll_read_ready(cx).is_ready()) {
            busy = true;
            let io = conn.read(frames);
            let mut s = lock(shared);
            let came = !frames.is_empty();
            for f in frames.drain(..) {
                s.opened_bytes += f.encoded_len();
                s.opened.push(f);
            }
            let end = match io {
                Io::Fine => None,
                Io::Lost => Some(End::Lost),
                Io::Broken => {
                    s.refused = conn.refused.take();
                    Some(End::Broken)
                }
            };
            if came || end.is_some() {
                wake(&mut s.driver_reads);
            }
            if end.is_some() {
                s.end = end;
                return Poll::Ready(Step::Stop);
            }
        }
        if !busy {
            return Poll::Pending;
        }
    }
}
