//! A channel's application end: send with backpressure, receive, change weight, close; and
//! tokio's `AsyncRead`/`AsyncWrite`, so existing code (`tokio::io::copy`, codecs) can use it.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, mpsc, oneshot};

use std::collections::VecDeque;

use crate::budget::SessionBudget;
use crate::session::{ChannelReport, Command, End, EndSlot, MuxError, Stopped};
use switchyard_core::carry::Cut;

type WriteOp = Pin<Box<dyn Future<Output = Result<(), MuxError>> + Send + Sync>>;

/// How the application's ends of a session's channels call its driver back, so that the driver
/// looks only at the channels that call instead of trying every channel on every turn: a
/// channel whose queue to the application was full, once the application takes from it, and a
/// channel the application let go of.
///
/// The driver asks before it tries the full queue once more, and the application answers
/// after taking, each under the one lock: either the driver's second try sees the room, or
/// the application sees the question. No room made in between is missed.
#[derive(Debug)]
pub(crate) struct Room {
    /// Wakes the driver: a channel called, or the application took a channel the peer opened
    /// (the queue of those has room).
    pub(crate) bell: Notify,
    /// Channels the peer opened that the application has accepted, in all: the driver gives
    /// the peer leave to open as many more (open credit).
    pub(crate) accepted: std::sync::atomic::AtomicU64,
    /// Closes (half-closes) that found the command queue full and waited for room
    /// ([`SessionReport::closes_waited`](crate::SessionReport::closes_waited)).
    pub(crate) closes_waited: std::sync::atomic::AtomicU64,
    /// The session's byte budget: a reader of a local socket takes room here before it reads.
    pub(crate) budget: SessionBudget,
    calls: Mutex<Calls>,
}

#[derive(Debug, Default)]
struct Calls {
    /// Channels whose queue to the application the driver found full.
    asked: HashSet<u32>,
    /// Channels for the driver to look at.
    visit: Vec<u32>,
}

impl Room {
    /// A session's, with a budget of `budget` bytes granted a read's worth at a time.
    pub(crate) fn new(budget: u64) -> Self {
        Self {
            bell: Notify::new(),
            accepted: Default::default(),
            closes_waited: Default::default(),
            budget: SessionBudget::new(budget, crate::forwarder::READ_BUFFER as u64),
            calls: Mutex::default(),
        }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, Calls> {
        self.calls.lock().expect("nothing panics holding it")
    }

    /// The driver found channel `id`'s queue full: it is called once the application takes.
    pub(crate) fn ask(&self, id: u32) {
        self.calls().asked.insert(id);
    }

    /// The channels that called since the driver last looked.
    pub(crate) fn visits(&self) -> Vec<u32> {
        std::mem::take(&mut self.calls().visit)
    }

    /// The application took from channel `id`'s queue.
    fn took(&self, id: u32) {
        let mut calls = self.calls();
        if calls.asked.remove(&id) {
            calls.visit.push(id);
            drop(calls);
            self.bell.notify_one();
        }
    }

    /// The application let go of channel `id`.
    fn dropped(&self, id: u32) {
        let mut calls = self.calls();
        calls.asked.remove(&id);
        calls.visit.push(id);
        drop(calls);
        self.bell.notify_one();
    }
}

/// How the receiving side ended.
enum Outcome {
    /// The peer's close, after every byte.
    Finished,
    /// Cut off: what arrived, and why the session stopped.
    Cut(Cut, Stopped),
    /// Reset: by whom, and why.
    Reset(&'static str, String),
    /// The driver is gone without leaving an end (it panicked, or its runtime was shut down).
    Gone,
}

/// One weighted channel of a session.
pub struct Channel {
    id: u32,
    commands: mpsc::Sender<Command>,
    incoming: mpsc::Receiver<Bytes>,
    /// Calls the session's driver when this end takes bytes from a queue the driver found full,
    /// and when it is dropped.
    room: Arc<Room>,
    unread: Bytes,
    writing: Option<WriteOp>,
    closed: bool,
    /// How the receiving side ended, once the queue from the session has closed.
    end: EndSlot,
    /// Once that queue has closed: bytes that came with the end, then the end.
    ended: Option<(VecDeque<Bytes>, Outcome)>,
    /// Held while the application holds the channel: the driver sees it go.
    held: Option<Arc<()>>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("id", &self.id).finish_non_exhaustive()
    }
}

async fn write(commands: mpsc::Sender<Command>, id: u32, data: Bytes) -> Result<(), MuxError> {
    let (reply, rx) = oneshot::channel();
    commands.send(Command::Write { id, data, charged: false, reply }).await.map_err(|_| MuxError::Ended)?;
    rx.await.map_err(|_| MuxError::Ended)?
}

impl Channel {
    pub(crate) fn new(
        id: u32,
        commands: mpsc::Sender<Command>,
        incoming: mpsc::Receiver<Bytes>,
        room: Arc<Room>,
        end: EndSlot,
        held: Arc<()>,
    ) -> Self {
        Self {
            id,
            commands,
            incoming,
            room,
            unread: Bytes::new(),
            writing: None,
            closed: false,
            end,
            ended: None,
            held: Some(held),
        }
    }

    /// The next bytes from the session, or how the channel ended: `Ok(None)` only if the peer
    /// closed it and every byte came; otherwise the error that says what arrived and why the
    /// session stopped.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, MuxError>> {
        if self.ended.is_none() {
            match ready!(self.incoming.poll_recv(cx)) {
                Some(b) => {
                    self.room.took(self.id);
                    return Poll::Ready(Ok(Some(b)));
                }
                None => {
                    let end = self.end.lock().expect("never held across a panic").take();
                    self.ended = Some(match end {
                        Some(End { tail, reset: Some((by, why)), .. }) => (tail, Outcome::Reset(by, why)),
                        Some(End { tail, cut: None, .. }) => (tail, Outcome::Finished),
                        Some(End { tail, cut: Some((cut, why)), .. }) => (tail, Outcome::Cut(cut, why)),
                        None => (VecDeque::new(), Outcome::Gone),
                    });
                }
            }
        }
        let (tail, cut) = self.ended.as_mut().expect("set above");
        Poll::Ready(match (tail.pop_front(), cut) {
            (Some(b), _) => Ok(Some(b)),
            (None, Outcome::Finished) => Ok(None),
            (None, Outcome::Cut(cut, why)) => Err(MuxError::Cut { cut: *cut, why: why.clone() }),
            (None, Outcome::Reset(by, reason)) => Err(MuxError::Reset { channel: self.id, by, reason: reason.clone() }),
            (None, Outcome::Gone) => Err(MuxError::Ended),
        })
    }

    /// The channel's number in the session (odd if the client opened it, even if the server did).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Sends `data`, waiting while the channel's buffer is full: the session takes a channel's
    /// bytes only as fast as the scheduler gives it turns and the receiver gives it credit.
    pub async fn send(&self, data: Bytes) -> Result<(), MuxError> {
        if data.is_empty() {
            return Ok(());
        }
        write(self.commands.clone(), self.id, data).await
    }

    /// The next bytes the peer sent on the channel; `Ok(None)` once the peer has closed it and
    /// every byte before the close has been read, and only then. A channel whose session
    /// stopped first (its connections gone for the idle timeout, the peer's session ended)
    /// ends with [`MuxError::Cut`], which says what arrived: what was read is then not all that
    /// was sent.
    pub async fn recv(&mut self) -> Result<Option<Bytes>, MuxError> {
        if !self.unread.is_empty() {
            return Ok(Some(std::mem::take(&mut self.unread)));
        }
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Changes the channel's weight (in both directions).
    pub async fn set_weight(&self, weight: f64) -> Result<(), MuxError> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::SetWeight { id: self.id, weight, reply }).await.map_err(|_| MuxError::Ended)?;
        rx.await.map_err(|_| MuxError::Ended)?
    }

    /// Sends no more: the peer reads to the end of what was sent, then sees the channel end.
    /// Receiving goes on.
    pub async fn close(&mut self) -> Result<(), MuxError> {
        self.closed = true;
        match self.close_now() {
            Ok(()) => Ok(()),
            Err(close) => close.await,
        }
    }

    /// Hands the close to the session if its command queue has room; otherwise counts the wait
    /// and returns the send that waits for room (a close is never dropped for a full queue: the
    /// peer would wait for an end that never came).
    fn close_now(&self) -> Result<(), WriteOp> {
        close_now(&self.commands, self.id, &self.room)
    }

    /// The channel's sending half, for a forwarder that sends and closes while it receives on
    /// the channel. A close sent through it counts as this channel's ([`Channel::sent_close`]).
    pub(crate) fn sending_half(&self) -> SendingHalf {
        SendingHalf { id: self.id, commands: self.commands.clone(), room: Arc::clone(&self.room) }
    }

    /// The channel was closed through its [`SendingHalf`]: dropping it sends no second close.
    pub(crate) fn sent_close(&mut self) {
        self.closed = true;
    }

    /// Abandons the channel both ways, as TCP's RST does: what has not been delivered is
    /// dropped, and the peer's application gets `reason` as an error instead of an end (a
    /// tunnel's far end says "target not allowed: HOST:PORT" this way). Reading and writing
    /// here fail from now on.
    pub async fn reset(&mut self, reason: impl Into<String>) -> Result<(), MuxError> {
        self.closed = true;
        let reason = reason.into();
        self.commands.send(Command::Reset { id: self.id, reason }).await.map_err(|_| MuxError::Ended)
    }

    /// The channel's counters.
    pub async fn report(&self) -> Result<ChannelReport, MuxError> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::Report { reply }).await.map_err(|_| MuxError::Ended)?;
        let report = rx.await.map_err(|_| MuxError::Ended)?;
        Ok(report.channels.into_iter().find(|c| c.id == self.id).unwrap_or_default())
    }
}

fn close_now(commands: &mpsc::Sender<Command>, id: u32, room: &Room) -> Result<(), WriteOp> {
    use tokio::sync::mpsc::error::TrySendError;
    let close = match commands.try_send(Command::Close { id }) {
        Ok(()) => return Ok(()),
        Err(TrySendError::Closed(_)) => return Err(Box::pin(std::future::ready(Err(MuxError::Ended)))),
        Err(TrySendError::Full(close)) => close,
    };
    room.closes_waited.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let commands = commands.clone();
    Err(Box::pin(async move { commands.send(close).await.map_err(|_| MuxError::Ended) }))
}

/// A channel's sending half (`Channel::sending_half`): its bytes and its close, handed to the
/// session while the [`Channel`] itself is read from.
pub(crate) struct SendingHalf {
    id: u32,
    commands: mpsc::Sender<Command>,
    room: Arc<Room>,
}

/// The session's answer to one write: `Ok` once it has taken every byte.
pub(crate) type Taken = oneshot::Receiver<Result<(), MuxError>>;

impl SendingHalf {
    /// Hands `data`, read into room the budget granted ([`SendingHalf::room`]), to the session
    /// (waiting only for room in its command queue) and returns
    /// its answer to wait for: the caller may read its next bytes meanwhile, as
    /// `AsyncWrite::poll_write` lets `tokio::io::copy` do.
    pub(crate) async fn start(&self, data: Bytes) -> Result<Taken, MuxError> {
        let (reply, taken) = oneshot::channel();
        self.commands
            .send(Command::Write { id: self.id, data, charged: true, reply })
            .await
            .map_err(|_| MuxError::Ended)?;
        Ok(taken)
    }

    /// Room in the session's budget to read up to `want` bytes for [`SendingHalf::start`],
    /// charged to the channel until the peer acknowledges them: waits while the session holds
    /// its budget. Bytes handed over with `start` are the charge; what was not read goes back
    /// with [`SendingHalf::give_back`].
    pub(crate) async fn room(&self, want: usize) -> Result<usize, MuxError> {
        self.room.budget.take(self.id, want as u64).await.map(|n| n as usize)
    }

    /// Gives back room [`SendingHalf::room`] granted and a read did not use.
    pub(crate) fn give_back(&self, n: usize) {
        self.room.budget.give_back(self.id, n as u64);
    }

    /// Waits for the session to take a write [`SendingHalf::start`] handed it.
    pub(crate) async fn taken(taken: Taken) -> Result<(), MuxError> {
        taken.await.map_err(|_| MuxError::Ended)?
    }

    /// Sends no more, as [`Channel::close`] does.
    pub(crate) async fn close(&self) -> Result<(), MuxError> {
        match close_now(&self.commands, self.id, &self.room) {
            Ok(()) => Ok(()),
            Err(close) => close.await,
        }
    }
}

impl Drop for Channel {
    /// A dropped channel is closed for sending (what was sent still arrives), and the driver
    /// is called to see it gone: if the command queue was full, the close did not go, and the
    /// driver closes a channel whose application let go.
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.commands.try_send(Command::Close { id: self.id });
        }
        // Before the call: the driver then finds the queue closed and nobody holding it.
        self.incoming.close();
        self.held = None;
        self.room.dropped(self.id);
    }
}

impl AsyncRead for Channel {
    /// Fills `buf` from every frame already waiting, not from one: one frame a read cost a
    /// `tokio::io::copy` (a tunnel's) a read and a write to its target per frame. It waits
    /// only while nothing has been read; an end or error met after some bytes comes with the
    /// next read (the channel keeps its end once it has one).
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let mut read_any = false;
        while buf.remaining() > 0 {
            if self.unread.is_empty() {
                let next = match self.poll_next(cx) {
                    Poll::Ready(next) => next,
                    Poll::Pending if read_any => break,
                    Poll::Pending => return Poll::Pending,
                };
                match next {
                    Ok(Some(b)) => self.unread = b,
                    Ok(None) => break,
                    Err(_) if read_any => break,
                    // A clean end of file only for a channel that finished; a cut is an
                    // error, so that `read_to_end` and `copy` do not take part of a stream
                    // for all of it.
                    Err(e) => return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, e))),
                }
            }
            let n = self.unread.len().min(buf.remaining());
            buf.put_slice(&self.unread[..n]);
            self.unread.advance(n);
            // Only bytes count: a read that returns none reads as the end.
            read_any |= n > 0;
        }
        Poll::Ready(Ok(()))
    }
}

fn io_error(e: MuxError) -> std::io::Error {
    match e {
        MuxError::Io { source, .. } => source,
        other => std::io::Error::new(std::io::ErrorKind::BrokenPipe, other),
    }
}

impl AsyncWrite for Channel {
    /// Takes the bytes at once and hands them to the session; the next write, flush or
    /// shutdown waits until the session has taken them, so at most one buffer is in flight.
    /// The hand-over starts here, not at the next flush, so a writer that then waits for an
    /// answer without flushing is not left waiting forever.
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        ready!(self.as_mut().poll_flush(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut op: WriteOp = Box::pin(write(self.commands.clone(), self.id, Bytes::copy_from_slice(buf)));
        match op.as_mut().poll(cx) {
            Poll::Ready(r) => r.map_err(io_error)?,
            Poll::Pending => self.writing = Some(op),
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if let Some(op) = self.writing.as_mut() {
            let r = ready!(op.as_mut().poll(cx));
            self.writing = None;
            r.map_err(io_error)?;
        }
        Poll::Ready(Ok(()))
    }

    /// Waits for the session to take the close, as a write waits: a close dropped because the
    /// command queue was full left the peer waiting for an end that never came.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        if !self.closed {
            self.closed = true;
            if let Err(close) = self.close_now() {
                self.writing = Some(close);
                ready!(self.as_mut().poll_flush(cx))?;
            }
        }
        Poll::Ready(Ok(()))
    }
}
