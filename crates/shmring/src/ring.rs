//! The two ends of the ring and the protocol between them.
//!
//! # Indices
//!
//! `head` counts every byte the writer has ever published and `tail` every byte the reader has
//! ever consumed; both are free-running `u64`s (they would take 58 years to wrap at 10 GB/s,
//! and the arithmetic wraps correctly anyway). Occupancy is `head - tail`, the position in the
//! data area is `index mod capacity`. Unlike XenSocket's one shared `available_bytes` (notes
//! 004a §10 (c)), each word has one writer, so nobody needs an atomic read-modify-write.
//!
//! # Memory ordering
//!
//! - The writer copies bytes into free space, *then* stores `head` with `Release`. The reader
//!   loads `head` with `Acquire`, so every byte below that head is visible to its copies. (This
//!   is the barrier XenSocket's x86-only prototype got for free from locked instructions; notes
//!   004a §10 (c), note 3.)
//! - The reader copies bytes out, *then* stores `tail` with `Release`. The writer loads `tail`
//!   with `Acquire`, so the reader's copies are finished before the writer overwrites the
//!   space.
//! - Sleeping is a Dekker handshake. The sleeper stores its "waits" flag, issues a `SeqCst`
//!   fence, and re-checks the other index; the other side stores its index, issues a `SeqCst`
//!   fence, and loads the flag. The two fences guarantee that at least one side sees the
//!   other's store, so either the sleeper sees progress and does not sleep, or its peer sees
//!   the flag and rings the eventfd (whose counter keeps the ring until the sleeper polls).
//!   Both halves are written once, below (`announce_wait`, `publish`), and shared by the
//!   blocking ends and the async ones (`async_io`), which differ only in how they sleep.
//! - `closed` is stored with `Release` after the last `head`/`tail`, and loaded with `Acquire`
//!   before the final re-check, so a reader that sees the writer closed also sees all of its
//!   data.
//!
//! # Trust
//!
//! Each end keeps its own index privately and only *checks* the peer's: the reader never reads
//! `tail` back, the writer never reads `head` back. A peer index is accepted only if it lies
//! between the last accepted value and our own index plus (or minus) the capacity; anything
//! else is [`RingError::Corrupt`], and the end stays failed.

use std::hint::spin_loop;
use std::io::IoSlice;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::doorbell::Doorbell;
use crate::raw::{Mapping, RingFile, Word, fence};
use crate::{Corruption, RingError, RingFds};

/// "SYRING01": lets a process that is handed a file check it holds a ring.
const MAGIC: u64 = u64::from_le_bytes(*b"SYRING01");

/// Polls of the peer's index before going to sleep: about a microsecond or two of spinning,
/// enough to ride out a peer that is mid-copy without paying two system calls.
#[cfg(not(loom))]
const SPINS: u32 = 2000;
/// None under the model check: every spin is another branch of loom's state space, and
/// spinning changes nothing about the handshake it checks.
#[cfg(loom)]
const SPINS: u32 = 0;

/// The longest sleep before re-checking the ring on our own: bounds the stall when a peer
/// dies (or misbehaves) without ringing.
pub(crate) const NAP: Duration = Duration::from_millis(100);

/// How long the next sleep may last: a [`NAP`], or less where a timeout (`set_timeout`) runs out
/// first; [`RingError::TimedOut`] once it has.
fn nap(deadline: Option<Instant>, timeout: Option<Duration>) -> Result<Duration, RingError> {
    let Some(deadline) = deadline else { return Ok(NAP) };
    match deadline.saturating_duration_since(Instant::now()) {
        left if left.is_zero() => Err(RingError::TimedOut(timeout.unwrap_or_default())),
        left => Ok(left.min(NAP)),
    }
}

/// The most either end copies before publishing its index: a quarter of the ring, so a peer
/// waiting on a full (or empty) ring can start on the first quarter while the rest is being
/// copied, instead of the two ends taking turns a whole ring at a time.
fn step(capacity: usize) -> usize {
    (capacity / 4).max(1)
}

/// Creates a ring whose data area holds `capacity` bytes (a power of two) and returns its two
/// ends.
///
/// Each end maps the shared file separately, as a peer process would: they share only the
/// file's pages and two eventfds. For two processes, use [`RingFds`] directly.
pub fn channel(capacity: usize) -> Result<(Writer, Reader), RingError> {
    let fds = RingFds::create(capacity)?;
    let reader = Reader::open(fds.try_clone()?)?;
    Ok((Writer::open(fds)?, reader))
}

/// Writes the header words a fresh ring file starts with (the indices start at zero with the
/// file).
pub(crate) fn write_header(file: &RingFile) -> Result<(), RingError> {
    let map = Mapping::open(file)?;
    map.word(Word::Capacity).store(map.capacity() as u64, Ordering::Relaxed);
    map.word(Word::Magic).store(MAGIC, Ordering::Release);
    Ok(())
}

/// Maps a ring file as one end, after the checks `Mapping::open` makes (size, seals) and a
/// check of the header against mistakes.
fn open(file: &RingFile) -> Result<Mapping, RingError> {
    let map = Mapping::open(file)?;
    let magic = map.word(Word::Magic).load(Ordering::Acquire);
    let capacity = map.word(Word::Capacity).load(Ordering::Relaxed);
    if magic != MAGIC || capacity != map.capacity() as u64 {
        return Err(RingError::NotARing { magic, capacity, file_capacity: map.capacity() as u64 });
    }
    Ok(map)
}

/// The sleeper's half of the Dekker handshake (module docs), for both ends and both kinds of
/// sleep: raise our `waits` flag, fence, and re-check the peer's index and `closed` word.
/// Returns whether sleeping is safe: the peer's index is still `seen` and the peer still open,
/// so any later move of either comes with a ring. `false` means something moved: look again
/// instead of sleeping. Either way the flag stays raised until [`end_wait`].
fn announce_wait(map: &Mapping, waits: Word, peer_index: Word, seen: u64, peer_closed: Word) -> bool {
    map.word(waits).store(1, Ordering::Relaxed);
    // Our flag store before our re-load of the peer's index; pairs with the fence in
    // `publish`, so we see its new index or it sees our flag (or both).
    fence(Ordering::SeqCst);
    // Acquire, as the non-blocking paths load these: the re-check may be what lets us go on.
    map.word(peer_index).load(Ordering::Acquire) == seen && map.word(peer_closed).load(Ordering::Acquire) == 0
}

/// Lowers our `waits` flag once awake, so a busy peer stops paying for rings nobody needs.
fn end_wait(map: &Mapping, waits: Word) {
    map.word(waits).store(0, Ordering::Relaxed);
}

/// What the blocking ends share: how an end waits for its peer to move.
trait Blocking {
    /// The doorbell the peer rings when it moves (or closes).
    fn bell(&self) -> &Doorbell;
    /// The lifeline given to `watch`, if any.
    fn lifeline_fd(&self) -> Option<BorrowedFd<'_>>;
    /// The timeout given to `set_timeout`, if any.
    fn timeout(&self) -> Option<Duration>;
    /// Raises our "waits" flag and re-checks ([`announce_wait`]).
    fn announce(&self) -> bool;
    /// Lowers it ([`end_wait`]).
    fn unannounce(&self);
}

/// Both ends wait the same way; each names the doorbell it waits on (the writer for space, the
/// reader for data).
macro_rules! blocking_end {
    ($end:ty, $bell:ident) => {
        impl Blocking for $end {
            fn bell(&self) -> &Doorbell {
                &self.$bell
            }
            fn lifeline_fd(&self) -> Option<BorrowedFd<'_>> {
                self.lifeline.as_ref().map(AsFd::as_fd)
            }
            fn timeout(&self) -> Option<Duration> {
                self.timeout
            }
            fn announce(&self) -> bool {
                self.announce_wait()
            }
            fn unannounce(&self) {
                self.end_wait();
            }
        }
    };
}

blocking_end!(Writer, space_ready);
blocking_end!(Reader, data_ready);

/// The blocking ends' wait, one loop for both: tries `attempt` until it yields, spinning a
/// while, then sleeping on the peer's doorbell (the handshake in the module docs) for a nap at
/// most, or what is left of the end's timeout ([`RingError::TimedOut`] once it has passed).
/// `Ok(None)`: the lifeline hung up during a sleep (the peer is gone).
#[cfg_attr(loom, allow(clippy::absurd_extreme_comparisons))] // SPINS is 0 under loom
fn block<E: Blocking, T>(
    end: &mut E,
    mut attempt: impl FnMut(&mut E) -> Result<Option<T>, RingError>,
) -> Result<Option<T>, RingError> {
    let mut spins = 0;
    let deadline = end.timeout().map(|t| Instant::now() + t);
    loop {
        if let Some(done) = attempt(end)? {
            return Ok(Some(done));
        }
        if spins < SPINS {
            spins += 1;
            spin_loop();
            continue;
        }
        let nap = nap(deadline, end.timeout())?;
        // The lifeline hung up: true only if we slept and it ended the sleep.
        let gone = if end.announce() { end.bell().wait(nap, end.lifeline_fd()) } else { Ok(false) };
        end.unannounce();
        if gone? {
            return Ok(None);
        }
    }
}

/// The waker's half: store our index (`Release`, so what it covers is visible to whoever
/// acquires it), fence, and ring the peer's doorbell only if it said it waits.
fn publish(map: &Mapping, index: Word, value: u64, peer_waits: Word, bell: &Doorbell) {
    map.word(index).store(value, Ordering::Release);
    // Our index store before our load of the peer's flag; pairs with `announce_wait`.
    fence(Ordering::SeqCst);
    if map.word(peer_waits).load(Ordering::Relaxed) != 0 {
        bell.ring();
    }
}

/// The sending end of a ring.
#[derive(Debug)]
pub struct Writer {
    map: Mapping,
    #[cfg_attr(loom, allow(dead_code))] // read only by `file()`, which loom has no use for
    file: RingFile,
    /// Authoritative: the shared `head` is only ever a copy of this.
    head: u64,
    /// The last shared `tail` that passed the checks; the reader may not move it back.
    tail_seen: u64,
    data_ready: Doorbell,
    space_ready: Doorbell,
    failed: Option<Corruption>,
    lifeline: Option<OwnedFd>,
    /// The longest `write` waits for space (`None`: for ever).
    timeout: Option<Duration>,
    /// Let go of without closing ([`Writer::abandon`]).
    abandoned: bool,
}

impl Writer {
    /// Opens a ring's descriptors as its writer. A ring has one writer: a second one would
    /// corrupt it (safely: see [`RingError::Corrupt`]).
    pub fn open(fds: RingFds) -> Result<Self, RingError> {
        let map = open(&fds.file)?;
        Ok(Self {
            map,
            file: fds.file,
            head: 0,
            tail_seen: 0,
            data_ready: fds.data_ready,
            space_ready: fds.space_ready,
            failed: None,
            lifeline: None,
            timeout: None,
            abandoned: false,
        })
    }

    /// Copies as much of `src` as fits into the ring without waiting; `Ok(0)` means the ring is
    /// full (or `src` empty).
    pub fn try_write(&mut self, src: &[u8]) -> Result<usize, RingError> {
        self.try_write_vectored(&[IoSlice::new(src)])
    }

    /// Copies as much of `srcs`, in order, as fits into the ring without waiting, as one write:
    /// a frame's head and its payload go in without a copy to join them, and the reader is
    /// told of them together. `Ok(0)` means the ring is full (or `srcs` empty).
    pub fn try_write_vectored(&mut self, srcs: &[IoSlice<'_>]) -> Result<usize, RingError> {
        if let Some(c) = self.failed {
            return Err(RingError::Corrupt(c));
        }
        if self.map.word(Word::ReaderClosed).load(Ordering::Acquire) != 0 {
            return Err(RingError::ReaderClosed);
        }
        // Cannot underflow: `unread` checked that in-flight bytes are at most the capacity.
        let mut free = self.map.capacity() - self.unread()? as usize;
        let step = step(self.map.capacity());
        let (mut total, mut unpublished) = (0, 0);
        for src in srcs {
            let n = free.min(src.len());
            for piece in src[..n].chunks(step) {
                self.map.copy_in(self.head, piece);
                self.head = self.head.wrapping_add(piece.len() as u64);
                unpublished += piece.len();
                if unpublished >= step {
                    // The bytes just copied are visible to a reader that acquires this head.
                    publish(&self.map, Word::Head, self.head, Word::ReaderWaits, &self.data_ready);
                    unpublished = 0;
                }
            }
            free -= n;
            total += n;
            if free == 0 {
                break;
            }
        }
        if unpublished > 0 {
            publish(&self.map, Word::Head, self.head, Word::ReaderWaits, &self.data_ready);
        }
        Ok(total)
    }

    /// Bytes written and not yet read by the peer, as of the peer's latest published index:
    /// what a socket would call its unsent (or unacknowledged) bytes. Checks the peer's index as
    /// a write does ([`RingError::Corrupt`]).
    pub fn unread(&mut self) -> Result<u64, RingError> {
        if let Some(c) = self.failed {
            return Err(RingError::Corrupt(c));
        }
        // Acquire: pairs with the reader's Release store, so its copies out of the space it
        // frees are finished before we overwrite that space.
        let tail = self.map.word(Word::Tail).load(Ordering::Acquire);
        let in_flight = self.head.wrapping_sub(tail);
        // The tail may only move forward from the last value seen and never past our head;
        // as distances behind the head that is `in_flight <= head - tail_seen <= capacity`
        // (tail_seen was itself checked when accepted, or is the initial 0 == head).
        if in_flight > self.head.wrapping_sub(self.tail_seen) {
            let c = Corruption {
                word: "tail",
                last: self.tail_seen,
                value: tail,
                ours: self.head,
                capacity: self.capacity(),
            };
            self.failed = Some(c);
            return Err(RingError::Corrupt(c));
        }
        self.tail_seen = tail;
        Ok(in_flight)
    }

    /// Raises the "writer waits" flag and re-checks: whether sleeping on `space_ready` is
    /// safe now (see `announce_wait`). Call after a `try_write` that found the ring full.
    pub(crate) fn announce_wait(&self) -> bool {
        announce_wait(&self.map, Word::WriterWaits, Word::Tail, self.tail_seen, Word::ReaderClosed)
    }

    /// Lowers the flag `announce_wait` raised.
    pub(crate) fn end_wait(&self) {
        end_wait(&self.map, Word::WriterWaits);
    }

    /// Whether the reader has closed its end.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn reader_closed(&self) -> bool {
        self.map.word(Word::ReaderClosed).load(Ordering::Acquire) != 0
    }

    /// The doorbell the reader rings when it frees space.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn space_ready(&self) -> &Doorbell {
        &self.space_ready
    }

    /// The lifeline given to [`watch`](Self::watch), if any.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn lifeline(&self) -> Option<BorrowedFd<'_>> {
        self.lifeline.as_ref().map(AsFd::as_fd)
    }

    /// Marks the writer closed: once the reader has read everything published so far, its
    /// reads return the end. Dropping the writer does this too.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn close(&self) {
        self.mark_closed();
    }

    /// Lets go of the ring *without* saying the stream is complete: the reader reads what was
    /// published, then, once the lifeline hangs up (every end watching it gone), gets
    /// [`RingError::PeerGone`] rather than the end of the stream. For a writer that fails
    /// part-way, so that a reader does not take a stream cut short for the whole of it (as a
    /// process killed mid-write would be seen).
    pub fn abandon(mut self) {
        self.abandoned = true;
        // Wake a sleeping reader, which then finds no end and watches the lifeline.
        self.data_ready.ring();
    }

    fn mark_closed(&self) {
        // Release after the last head store: a reader that sees this sees all the data.
        self.map.word(Word::WriterClosed).store(1, Ordering::Release);
        self.data_ready.ring();
    }

    /// Copies at least one byte of a non-empty `src` into the ring, waiting for space if the
    /// ring is full; returns how many.
    pub fn write(&mut self, src: &[u8]) -> Result<usize, RingError> {
        if src.is_empty() {
            return Ok(0);
        }
        match block(self, |w| Ok(Some(w.try_write(src)?).filter(|&n| n > 0)))? {
            Some(n) => Ok(n),
            None => Err(RingError::PeerGone),
        }
    }

    /// Writes all of `src`, waiting for space as often as needed.
    pub fn write_all(&mut self, mut src: &[u8]) -> Result<(), RingError> {
        while !src.is_empty() {
            let n = self.write(src)?;
            src = &src[n..];
        }
        Ok(())
    }

    /// The data area's size in bytes.
    pub fn capacity(&self) -> u64 {
        self.map.capacity() as u64
    }

    /// Watches `lifeline` while waiting: a descriptor that hangs up when the reader is gone,
    /// such as this end of the Unix socket the ring was handed over (the peer keeping its end
    /// open while it lives). Without one, a reader killed without closing leaves a waiting
    /// writer asleep for good; with one, the wait ends in [`RingError::PeerGone`].
    pub fn watch(&mut self, lifeline: OwnedFd) {
        self.lifeline = Some(lifeline);
    }

    /// Bounds how long [`write`](Self::write) (and so each step of `write_all`) waits for
    /// space: past it, [`RingError::TimedOut`]. A reader that stops reading then costs a
    /// trusted writer at most this, never a thread stuck for good (`None`, the default: wait
    /// for ever, as a pipe does).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// The shared ring file: what a peer process needs (with the two eventfds) to map the
    /// ring. Writing into it is exactly what a hostile peer can do, which is how the tests
    /// play one.
    #[cfg(not(loom))]
    pub fn file(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.abandoned {
            self.mark_closed();
        }
    }
}

/// The receiving end of a ring.
#[derive(Debug)]
pub struct Reader {
    map: Mapping,
    #[cfg_attr(loom, allow(dead_code))] // read only by `file()`, which loom has no use for
    file: RingFile,
    /// Authoritative: the shared `tail` is only ever a copy of this.
    tail: u64,
    /// The last shared `head` that passed the checks; the writer may not move it back.
    head_seen: u64,
    data_ready: Doorbell,
    space_ready: Doorbell,
    failed: Option<Corruption>,
    lifeline: Option<OwnedFd>,
    /// The longest `read` waits for data (`None`: for ever).
    timeout: Option<Duration>,
}

impl Reader {
    /// Opens a ring's descriptors as its reader (one reader per ring).
    pub fn open(fds: RingFds) -> Result<Self, RingError> {
        let map = open(&fds.file)?;
        Ok(Self {
            map,
            file: fds.file,
            tail: 0,
            head_seen: 0,
            data_ready: fds.data_ready,
            space_ready: fds.space_ready,
            failed: None,
            lifeline: None,
            timeout: None,
        })
    }

    /// Copies as many bytes as are ready (up to `dst.len()`) without waiting; `Ok(0)` means
    /// nothing is ready (use [`read`](Self::read) to tell an empty ring from the end).
    pub fn try_read(&mut self, dst: &mut [u8]) -> Result<usize, RingError> {
        // `available() <= capacity`, which fits in usize.
        let n = (self.available()? as usize).min(dst.len());
        if n == 0 {
            return Ok(0);
        }
        for piece in dst[..n].chunks_mut(step(self.map.capacity())) {
            self.map.copy_out(self.tail, piece);
            self.tail = self.tail.wrapping_add(piece.len() as u64);
            // Our copy out is finished before the writer may reuse the space.
            publish(&self.map, Word::Tail, self.tail, Word::WriterWaits, &self.space_ready);
        }
        Ok(n)
    }

    /// Bytes ready to read now, as of the writer's latest published index (at most the
    /// capacity). Checks that index as a read does ([`RingError::Corrupt`]).
    pub fn available(&mut self) -> Result<u64, RingError> {
        if let Some(c) = self.failed {
            return Err(RingError::Corrupt(c));
        }
        // Acquire: pairs with the writer's Release store, so the bytes below this head are
        // visible to our copy.
        let head = self.map.word(Word::Head).load(Ordering::Acquire);
        let ready = head.wrapping_sub(self.tail);
        // The head may only move forward from the last value seen and at most `capacity` past
        // our tail; anything else would have us copy bytes the writer never wrote (or, without
        // the mask in `raw`, from outside the ring).
        if ready > self.capacity() || ready < self.head_seen.wrapping_sub(self.tail) {
            let c = Corruption {
                word: "head",
                last: self.head_seen,
                value: head,
                ours: self.tail,
                capacity: self.capacity(),
            };
            self.failed = Some(c);
            return Err(RingError::Corrupt(c));
        }
        self.head_seen = head;
        Ok(ready)
    }

    /// Whether the writer has closed its end (what it published before may still be unread).
    pub(crate) fn writer_closed(&self) -> bool {
        self.map.word(Word::WriterClosed).load(Ordering::Acquire) != 0
    }

    /// What `read` makes of the ring without waiting: `Some(n)` bytes read, `Some(0)` the
    /// end (the writer closed and everything it published has been read), `None` nothing
    /// yet.
    pub(crate) fn read_ready(&mut self, dst: &mut [u8]) -> Result<Option<usize>, RingError> {
        let n = self.try_read(dst)?;
        if n > 0 {
            return Ok(Some(n));
        }
        if self.writer_closed() {
            // The head stored before `closed` is visible now: one last look.
            return self.try_read(dst).map(Some);
        }
        Ok(None)
    }

    /// What `read` returns once the lifeline has hung up: whatever the writer published
    /// before it went is still ours to read, then the end if it closed first, else
    /// [`RingError::PeerGone`].
    pub(crate) fn read_remains(&mut self, dst: &mut [u8]) -> Result<usize, RingError> {
        self.read_ready(dst)?.ok_or(RingError::PeerGone)
    }

    /// Raises the "reader waits" flag and re-checks: whether sleeping on `data_ready` is safe
    /// now (see `announce_wait`). Call after `read_ready` found nothing.
    pub(crate) fn announce_wait(&self) -> bool {
        announce_wait(&self.map, Word::ReaderWaits, Word::Head, self.head_seen, Word::WriterClosed)
    }

    /// Lowers the flag `announce_wait` raised.
    pub(crate) fn end_wait(&self) {
        end_wait(&self.map, Word::ReaderWaits);
    }

    /// The doorbell the writer rings when it publishes data (or closes).
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn data_ready(&self) -> &Doorbell {
        &self.data_ready
    }

    /// The lifeline given to [`watch`](Self::watch), if any.
    #[cfg(all(feature = "tokio", not(loom)))]
    pub(crate) fn lifeline(&self) -> Option<BorrowedFd<'_>> {
        self.lifeline.as_ref().map(AsFd::as_fd)
    }

    /// Copies at least one byte into a non-empty `dst`, waiting for data; `Ok(0)` means the
    /// writer has closed and everything it wrote has been read.
    pub fn read(&mut self, dst: &mut [u8]) -> Result<usize, RingError> {
        if dst.is_empty() {
            return Ok(0);
        }
        match block(self, |r| r.read_ready(dst))? {
            Some(n) => Ok(n),
            None => self.read_remains(dst),
        }
    }

    /// The data area's size in bytes.
    pub fn capacity(&self) -> u64 {
        self.map.capacity() as u64
    }

    /// Watches `lifeline` while waiting (see [`Writer::watch`]): once it hangs up and
    /// everything the writer published has been read, `read` returns [`RingError::PeerGone`].
    pub fn watch(&mut self, lifeline: OwnedFd) {
        self.lifeline = Some(lifeline);
    }

    /// Bounds how long [`read`](Self::read) waits for data: past it, [`RingError::TimedOut`]
    /// (see [`Writer::set_timeout`]).
    pub fn set_timeout(&mut self, timeout: Option<Duration>) {
        self.timeout = timeout;
    }

    /// The shared ring file (see [`Writer::file`]).
    #[cfg(not(loom))]
    pub fn file(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.map.word(Word::ReaderClosed).store(1, Ordering::Release);
        self.space_ready.ring();
    }
}
