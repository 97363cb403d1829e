//! The ring as tokio's [`AsyncWrite`] and [`AsyncRead`]: [`AsyncWriter`] and [`AsyncReader`].
//!
//! The async ends run the same protocol as the blocking ones (`ring`) and differ only in how
//! they sleep. While the ring has room (or data) they never touch the kernel: `poll_write` and
//! `poll_read` are `try_write` and `try_read`. Only a full (or empty) ring makes an end raise
//! its "waits" flag and re-check (the handshake `ring` documents, the same code the blocking
//! ends run), and only if the re-check still finds nothing does the task park on readability
//! of the peer's eventfd, registered with tokio's reactor ([`AsyncFd`]). It does not spin
//! first: a spin would hold up every other task on the thread.
//!
//! A parked end wakes for any of three reasons: the peer rang, the lifeline hung up (the peer
//! died: [`RingError::PeerGone`]), or a nap of [`NAP`] passed (against a peer that moves its
//! index without ringing, as the blocking ends poll with a timeout). The nap needs tokio's
//! timer, so the async ends need a runtime with both IO and time enabled (`enable_all`).

use std::future::Future;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::doorbell::{Doorbell, hung_up};
use crate::raw;
use crate::ring::NAP;
use crate::{Reader, RingError, Writer};

/// Why a parked end woke.
enum Woken {
    /// Rung, or napped long enough: look at the ring again.
    Look,
    /// The lifeline hung up.
    PeerGone,
}

/// How an async end parks: the peer's doorbell and the lifeline, registered with the reactor,
/// and the nap.
#[derive(Debug)]
struct Sleeper {
    bell: AsyncFd<Doorbell>,
    lifeline: Option<AsyncFd<OwnedFd>>,
    /// Made on the first park, so an end that never waits never touches the timer.
    nap: Option<Pin<Box<Sleep>>>,
    /// Whether `nap` is armed for the current park (a re-poll must not push it back).
    napping: bool,
}

impl Sleeper {
    /// Registers duplicates of the descriptors, so the end's own (and the caller's copy of the
    /// lifeline socket, perhaps registered with the same reactor) stay untouched.
    fn new(bell: &Doorbell, lifeline: Option<BorrowedFd<'_>>) -> Result<Self, RingError> {
        let bell = raw::register(bell.try_clone()?)?;
        let lifeline = match lifeline {
            Some(fd) => Some(raw::register(fd.try_clone_to_owned()?)?),
            None => None,
        };
        Ok(Self { bell, lifeline, nap: None, napping: false })
    }

    /// Parks until the bell rings, the lifeline hangs up or the nap passes. `Pending` leaves
    /// the task's waker with all three.
    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<Woken>> {
        if let Some(lifeline) = &self.lifeline {
            while let Poll::Ready(mut guard) = lifeline.poll_read_ready(cx)? {
                if hung_up(lifeline.get_ref().as_fd())? {
                    return Poll::Ready(Ok(Woken::PeerGone));
                }
                // Data on the socket (or a half-close) wakes us too, but is not a death and
                // not ours to read: forget it until the socket's next change.
                guard.clear_ready();
            }
        }
        if let Poll::Ready(mut guard) = self.bell.poll_read_ready(cx)? {
            // Counter first, then readiness: a ring landing between the two bumps the
            // readiness tick, so `clear_ready` leaves it set and we do not miss it.
            guard.get_inner().clear()?;
            guard.clear_ready();
            self.napping = false;
            return Poll::Ready(Ok(Woken::Look));
        }
        let nap = self.nap.get_or_insert_with(|| Box::pin(tokio::time::sleep(NAP)));
        if !self.napping {
            nap.as_mut().reset(Instant::now() + NAP);
            self.napping = true;
        }
        ready!(nap.as_mut().poll(cx));
        self.napping = false;
        Poll::Ready(Ok(Woken::Look))
    }
}

/// The sending end of a ring as an [`AsyncWrite`]. Made by [`Writer::into_async`].
///
/// `poll_write` copies what fits and returns; `poll_flush` has nothing to do (every write is
/// published before it returns); `poll_shutdown` closes the writer as dropping it does, so the
/// reader gets the end after the last byte. Errors are [`RingError`]s wrapped in
/// [`io::Error`] (see its `From` impl): [`RingError::ReaderClosed`] and
/// [`RingError::PeerGone`] are `BrokenPipe`, [`RingError::Corrupt`] is `InvalidData`. Once the
/// lifeline has hung up, every later write fails with [`RingError::PeerGone`].
///
/// For a caller that does its own non-blocking I/O (as tokio's sockets offer it):
/// [`poll_write_ready`](Self::poll_write_ready), then [`try_write`](Self::try_write) or
/// [`try_write_vectored`](Self::try_write_vectored) until they return `WouldBlock`.
/// [`set_low_water`](Self::set_low_water) keeps what waits in the ring short.
#[derive(Debug)]
pub struct AsyncWriter {
    writer: Writer,
    sleeper: Sleeper,
    /// Our "waits" flag was left raised when we returned `Pending`.
    parked: bool,
    shut_down: bool,
    /// The end takes bytes only while fewer than this many are unread.
    low_water: u64,
    /// The lifeline hung up: the reader is dead.
    gone: bool,
}

impl Writer {
    /// This end as an [`AsyncWriter`], registered with the current tokio runtime (which must
    /// have IO and time enabled). Call [`watch`](Self::watch) first to have the lifeline
    /// watched while parked.
    ///
    /// # Errors
    ///
    /// [`RingError::Io`] if there is no runtime to register with, or the registration fails.
    pub fn into_async(self) -> Result<AsyncWriter, RingError> {
        let sleeper = Sleeper::new(self.space_ready(), self.lifeline())?;
        let low_water = self.capacity();
        Ok(AsyncWriter { writer: self, sleeper, parked: false, shut_down: false, low_water, gone: false })
    }
}

impl AsyncWriter {
    /// The blocking end underneath (its capacity, its file).
    pub fn get_ref(&self) -> &Writer {
        &self.writer
    }

    /// Makes the end take bytes only while fewer than `bytes` (at least 1) wait unread in the
    /// ring, as `TCP_NOTSENT_LOWAT` makes a socket writable only while its unsent bytes are
    /// below a mark: a write then takes all the room there is, but the next waits until the
    /// reader has caught up. A sender that chooses what to send next (a scheduler) keeps its
    /// choices open that way, instead of committing a whole ring ahead. By default the mark is
    /// the capacity: any room will do.
    pub fn set_low_water(&mut self, bytes: u64) {
        self.low_water = bytes.max(1);
    }

    /// Bytes written and not yet read by the peer (see [`Writer::unread`]).
    pub fn unread(&mut self) -> io::Result<u64> {
        Ok(self.writer.unread()?)
    }

    /// Lowers the flag a `Pending` left raised, so a reader that publishes while we are not
    /// parked (the task was woken, or its future dropped) does not keep ringing for nobody.
    fn unpark(&mut self) {
        if std::mem::take(&mut self.parked) {
            self.writer.end_wait();
        }
    }

    /// Whether a write now would take bytes: the ring is below the low-water mark. An error
    /// if no write ever will.
    fn writable(&mut self) -> Result<bool, RingError> {
        if self.gone {
            return Err(RingError::PeerGone);
        }
        let unread = self.writer.unread()?;
        if self.writer.reader_closed() {
            return Err(RingError::ReaderClosed);
        }
        Ok(unread < self.low_water.min(self.writer.capacity()))
    }

    /// Ready once a write would take bytes (or fail: the reader closed or died, the ring is
    /// corrupt); `Pending` parks the task on the reader's doorbell, as a full ring does in
    /// `poll_write`. Like a tokio socket's `poll_write_ready`, except that readiness is
    /// looked up afresh on every call rather than remembered, so a `try_write` need not
    /// clear it.
    pub fn poll_write_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.unpark();
        if self.shut_down {
            return Poll::Ready(Ok(()));
        }
        loop {
            match self.writable() {
                Ok(true) => return Poll::Ready(Ok(())),
                Ok(false) => {}
                Err(e) => return Poll::Ready(Err(e.into())),
            }
            if !self.writer.announce_wait() {
                self.writer.end_wait();
                continue;
            }
            let Poll::Ready(woken) = self.sleeper.poll_wait(cx) else {
                // The flag stays raised while we are parked: it is what makes the reader ring.
                self.parked = true;
                return Poll::Pending;
            };
            self.writer.end_wait();
            if let Woken::PeerGone = woken? {
                self.gone = true;
            }
        }
    }

    /// Copies what fits of `src` without waiting; `WouldBlock` if the ring is at its
    /// low-water mark or full.
    pub fn try_write(&mut self, src: &[u8]) -> io::Result<usize> {
        self.try_write_vectored(&[IoSlice::new(src)])
    }

    /// Copies what fits of `srcs`, in order, without waiting, as one write (see
    /// [`Writer::try_write_vectored`]); `WouldBlock` if the ring is at its low-water mark or
    /// full.
    pub fn try_write_vectored(&mut self, srcs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.unpark();
        if self.shut_down {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "write to a ring after its shutdown"));
        }
        if srcs.iter().all(|s| s.is_empty()) {
            return Ok(0);
        }
        if !self.writable()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        match self.writer.try_write_vectored(srcs)? {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => Ok(n),
        }
    }
}

impl AsyncWrite for AsyncWriter {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, src: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if src.is_empty() {
            return Poll::Ready(this.try_write(src));
        }
        loop {
            ready!(this.poll_write_ready(cx))?;
            match this.try_write(src) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return Poll::Ready(done),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.unpark();
        if !std::mem::replace(&mut this.shut_down, true) {
            this.writer.close();
        }
        Poll::Ready(Ok(()))
    }
}

impl Drop for AsyncWriter {
    fn drop(&mut self) {
        self.unpark();
    }
}

/// The receiving end of a ring as an [`AsyncRead`]. Made by [`Reader::into_async`].
///
/// A read that fills nothing (the end of the stream) comes only after the writer closed (was
/// dropped or shut down) *and* every byte it published has been read. A writer that died
/// without closing (its lifeline hung up) is, after its last byte, an `UnexpectedEof` error
/// wrapping [`RingError::PeerGone`]; [`RingError::Corrupt`] is `InvalidData`.
///
/// For a caller that does its own non-blocking I/O: [`poll_read_ready`](Self::poll_read_ready),
/// then [`try_read`](Self::try_read) until it returns `WouldBlock`.
#[derive(Debug)]
pub struct AsyncReader {
    reader: Reader,
    sleeper: Sleeper,
    /// Our "waits" flag was left raised when we returned `Pending`.
    parked: bool,
    /// The lifeline hung up: what the writer published is all there will be.
    gone: bool,
}

impl Reader {
    /// This end as an [`AsyncReader`], registered with the current tokio runtime (which must
    /// have IO and time enabled). Call [`watch`](Self::watch) first to have the lifeline
    /// watched while parked.
    ///
    /// # Errors
    ///
    /// [`RingError::Io`] if there is no runtime to register with, or the registration fails.
    pub fn into_async(self) -> Result<AsyncReader, RingError> {
        let sleeper = Sleeper::new(self.data_ready(), self.lifeline())?;
        Ok(AsyncReader { reader: self, sleeper, parked: false, gone: false })
    }
}

impl AsyncReader {
    /// The blocking end underneath (its capacity, its file).
    pub fn get_ref(&self) -> &Reader {
        &self.reader
    }

    /// As [`AsyncWriter`]'s: lower a flag a `Pending` left raised.
    fn unpark(&mut self) {
        if std::mem::take(&mut self.parked) {
            self.reader.end_wait();
        }
    }

    /// Bytes ready to read now, without waiting (see [`Reader::available`]).
    pub fn available(&mut self) -> io::Result<usize> {
        // At most the capacity, which is a usize.
        Ok(self.reader.available().map_err(read_error)? as usize)
    }

    /// Ready once a read would return something: bytes, the end, or an error (the writer
    /// died, the ring is corrupt); `Pending` parks the task on the writer's doorbell, as an
    /// empty ring does in `poll_read`. Like a tokio socket's `poll_read_ready`, except that
    /// readiness is looked up afresh on every call rather than remembered, so a `try_read`
    /// need not clear it.
    pub fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.unpark();
        loop {
            if self.gone {
                return Poll::Ready(Ok(()));
            }
            match self.reader.available() {
                Ok(0) if !self.reader.writer_closed() => {}
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) => return Poll::Ready(Err(read_error(e))),
            }
            if !self.reader.announce_wait() {
                self.reader.end_wait();
                continue;
            }
            let Poll::Ready(woken) = self.sleeper.poll_wait(cx) else {
                self.parked = true;
                return Poll::Pending;
            };
            self.reader.end_wait();
            if let Woken::PeerGone = woken? {
                self.gone = true;
            }
        }
    }

    /// Copies what is ready into `dst` without waiting: `Ok(0)` for a non-empty `dst` is the
    /// end (see the type's docs), `WouldBlock` means nothing yet.
    pub fn try_read(&mut self, dst: &mut [u8]) -> io::Result<usize> {
        self.unpark();
        if dst.is_empty() {
            return Ok(0);
        }
        if self.gone {
            return self.reader.read_remains(dst).map_err(read_error);
        }
        match self.reader.read_ready(dst).map_err(read_error)? {
            Some(n) => Ok(n),
            None => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

/// A writer gone without closing cut the stream short: for a reader that is an unexpected
/// end, not a broken pipe.
fn read_error(e: RingError) -> io::Error {
    match e {
        RingError::PeerGone => io::Error::new(io::ErrorKind::UnexpectedEof, e),
        e => e.into(),
    }
}

impl AsyncRead for AsyncReader {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, dst: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if dst.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        // No read takes more than the ring holds: zero (once) only what could be filled.
        let most = dst.remaining().min(usize::try_from(this.reader.capacity()).unwrap_or(usize::MAX));
        loop {
            ready!(this.poll_read_ready(cx))?;
            match this.try_read(dst.initialize_unfilled_to(most)) {
                Ok(n) => {
                    dst.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl Drop for AsyncReader {
    fn drop(&mut self) {
        self.unpark();
    }
}
