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
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use crate::doorbell::Doorbell;
use crate::raw::{Mapping, Word};
use crate::{Corruption, RingError, RingFds};

/// "SYRING01": lets a process that is handed a file check it holds a ring.
const MAGIC: u64 = u64::from_le_bytes(*b"SYRING01");

/// Polls of the peer's index before going to sleep: about a microsecond or two of spinning,
/// enough to ride out a peer that is mid-copy without paying two system calls.
const SPINS: u32 = 2000;

/// The longest sleep before re-checking the ring on our own: bounds the stall when a peer
/// dies (or misbehaves) without ringing.
const NAP: Duration = Duration::from_millis(100);

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
pub(crate) fn write_header(file: &OwnedFd) -> Result<(), RingError> {
    let map = Mapping::open(file)?;
    map.word(Word::Capacity).store(map.capacity() as u64, Ordering::Relaxed);
    map.word(Word::Magic).store(MAGIC, Ordering::Release);
    Ok(())
}

/// Maps a ring file as one end, after the checks `Mapping::open` makes (size, seals) and a
/// check of the header against mistakes.
fn open(file: &OwnedFd) -> Result<Mapping, RingError> {
    let map = Mapping::open(file)?;
    let magic = map.word(Word::Magic).load(Ordering::Acquire);
    let capacity = map.word(Word::Capacity).load(Ordering::Relaxed);
    if magic != MAGIC || capacity != map.capacity() as u64 {
        return Err(RingError::NotARing { magic, capacity, file_capacity: map.capacity() as u64 });
    }
    Ok(map)
}

/// The sending end of a ring.
#[derive(Debug)]
pub struct Writer {
    map: Mapping,
    file: OwnedFd,
    /// Authoritative: the shared `head` is only ever a copy of this.
    head: u64,
    /// The last shared `tail` that passed the checks; the reader may not move it back.
    tail_seen: u64,
    data_ready: Doorbell,
    space_ready: Doorbell,
    failed: Option<Corruption>,
    lifeline: Option<OwnedFd>,
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
        })
    }

    /// Copies as much of `src` as fits into the ring without waiting; `Ok(0)` means the ring is
    /// full (or `src` empty).
    pub fn try_write(&mut self, src: &[u8]) -> Result<usize, RingError> {
        if let Some(c) = self.failed {
            return Err(RingError::Corrupt(c));
        }
        if self.map.word(Word::ReaderClosed).load(Ordering::Acquire) != 0 {
            return Err(RingError::ReaderClosed);
        }
        // Acquire: pairs with the reader's Release store, so its copies out of the space it
        // frees are finished before we overwrite that space.
        let tail = self.map.word(Word::Tail).load(Ordering::Acquire);
        let in_flight = self.head.wrapping_sub(tail);
        // The tail may only move forward from the last value seen and never past our head;
        // as distances behind the head that is `in_flight <= head - tail_seen <= capacity`.
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
        // Cannot underflow: in_flight <= head - tail_seen <= capacity (checked above, and
        // tail_seen was itself checked when accepted, or is the initial 0 == head).
        let free = self.map.capacity() - in_flight as usize;
        let n = free.min(src.len());
        if n == 0 {
            return Ok(0);
        }
        for piece in src[..n].chunks(step(self.map.capacity())) {
            self.map.copy_in(self.head, piece);
            self.head = self.head.wrapping_add(piece.len() as u64);
            // Release: the bytes just copied are visible to a reader that acquires this head.
            self.map.word(Word::Head).store(self.head, Ordering::Release);
            // Dekker with the reader's sleep (module docs): our head store before its flag
            // load.
            fence(Ordering::SeqCst);
            if self.map.word(Word::ReaderWaits).load(Ordering::Relaxed) != 0 {
                self.data_ready.ring();
            }
        }
        Ok(n)
    }

    /// Copies at least one byte of a non-empty `src` into the ring, waiting for space if the
    /// ring is full; returns how many.
    pub fn write(&mut self, src: &[u8]) -> Result<usize, RingError> {
        if src.is_empty() {
            return Ok(0);
        }
        let mut spins = 0;
        loop {
            let n = self.try_write(src)?;
            if n > 0 {
                return Ok(n);
            }
            if spins < SPINS {
                spins += 1;
                spin_loop();
                continue;
            }
            self.map.word(Word::WriterWaits).store(1, Ordering::Relaxed);
            // Dekker with the reader's tail store (module docs): our flag before its tail.
            fence(Ordering::SeqCst);
            let tail = self.map.word(Word::Tail).load(Ordering::Acquire);
            let closed = self.map.word(Word::ReaderClosed).load(Ordering::Acquire);
            let gone = tail == self.tail_seen
                && closed == 0
                && self.space_ready.wait(NAP, self.lifeline.as_ref().map(AsFd::as_fd))?;
            self.map.word(Word::WriterWaits).store(0, Ordering::Relaxed);
            if gone {
                return Err(RingError::PeerGone);
            }
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

    /// The shared ring file: what a peer process needs (with the two eventfds) to map the
    /// ring. Writing into it is exactly what a hostile peer can do, which is how the tests
    /// play one.
    pub fn file(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Release after the last head store: a reader that sees this sees all the data.
        self.map.word(Word::WriterClosed).store(1, Ordering::Release);
        self.data_ready.ring();
    }
}

/// The receiving end of a ring.
#[derive(Debug)]
pub struct Reader {
    map: Mapping,
    file: OwnedFd,
    /// Authoritative: the shared `tail` is only ever a copy of this.
    tail: u64,
    /// The last shared `head` that passed the checks; the writer may not move it back.
    head_seen: u64,
    data_ready: Doorbell,
    space_ready: Doorbell,
    failed: Option<Corruption>,
    lifeline: Option<OwnedFd>,
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
        })
    }

    /// Copies as many bytes as are ready (up to `dst.len()`) without waiting; `Ok(0)` means
    /// nothing is ready (use [`read`](Self::read) to tell an empty ring from the end).
    pub fn try_read(&mut self, dst: &mut [u8]) -> Result<usize, RingError> {
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
        // `ready <= capacity`, which fits in usize.
        let n = (ready as usize).min(dst.len());
        if n == 0 {
            return Ok(0);
        }
        for piece in dst[..n].chunks_mut(step(self.map.capacity())) {
            self.map.copy_out(self.tail, piece);
            self.tail = self.tail.wrapping_add(piece.len() as u64);
            // Release: our copy out is finished before the writer may reuse the space.
            self.map.word(Word::Tail).store(self.tail, Ordering::Release);
            // Dekker with the writer's sleep (module docs).
            fence(Ordering::SeqCst);
            if self.map.word(Word::WriterWaits).load(Ordering::Relaxed) != 0 {
                self.space_ready.ring();
            }
        }
        Ok(n)
    }

    /// Copies at least one byte into a non-empty `dst`, waiting for data; `Ok(0)` means the
    /// writer has closed and everything it wrote has been read.
    pub fn read(&mut self, dst: &mut [u8]) -> Result<usize, RingError> {
        if dst.is_empty() {
            return Ok(0);
        }
        let mut spins = 0;
        loop {
            let n = self.try_read(dst)?;
            if n > 0 {
                return Ok(n);
            }
            if self.map.word(Word::WriterClosed).load(Ordering::Acquire) != 0 {
                // The head stored before `closed` is visible now: one last look.
                return self.try_read(dst);
            }
            if spins < SPINS {
                spins += 1;
                spin_loop();
                continue;
            }
            self.map.word(Word::ReaderWaits).store(1, Ordering::Relaxed);
            // Dekker with the writer's head store (module docs).
            fence(Ordering::SeqCst);
            let head = self.map.word(Word::Head).load(Ordering::Acquire);
            let closed = self.map.word(Word::WriterClosed).load(Ordering::Acquire);
            let gone = head == self.head_seen
                && closed == 0
                && self.data_ready.wait(NAP, self.lifeline.as_ref().map(AsFd::as_fd))?;
            self.map.word(Word::ReaderWaits).store(0, Ordering::Relaxed);
            if gone {
                // Whatever the peer published before it went is still ours to read.
                return match self.try_read(dst)? {
                    0 => Err(RingError::PeerGone),
                    n => Ok(n),
                };
            }
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

    /// The shared ring file (see [`Writer::file`]).
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
