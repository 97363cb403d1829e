//! The one place with `unsafe`: the shared mapping, its header words and the byte copies, and
//! taking ownership of descriptors received over a socket.
//!
//! Everything outside this module sees only safe accessors. The module's promise is memory
//! safety *whatever the peer writes into the shared file*: the peer can make us copy garbage
//! bytes or read absurd indices (the ring layer turns those into
//! [`RingError::Corrupt`](crate::RingError::Corrupt)), but it can never make us touch memory
//! outside the mapping, because every offset we dereference is computed from our private
//! capacity, never from shared data.
//!
//! # Layout (one header page, then the data area)
//!
//! | offset | word | written by |
//! |---|---|---|
//! | 0 | magic | creator, once |
//! | 8 | capacity | creator, once (checked against the file size on open) |
//! | 64 | head: bytes ever written (free-running u64) | writer only |
//! | 72 | writer waits for space | writer only |
//! | 80 | writer closed | writer only |
//! | 128 | tail: bytes ever read (free-running u64) | reader only |
//! | 136 | reader waits for data | reader only |
//! | 144 | reader closed | reader only |
//! | 4096.. | data, `capacity` bytes, a power of two | writer (into free space) |
//!
//! Head and tail sit on separate cache lines, each written by one side only. That is the step
//! past XenSocket's single shared `available_bytes` counter, which both sides update with an
//! atomic read-modify-write on every operation (notes 004a §10 (c)): here a side only ever
//! *loads* the other side's line, so there is no read-modify-write and no line ping-pong on
//! writes. 128-byte spacing also keeps the lines apart under adjacent-line prefetch.
//!
//! # Under `--cfg loom`
//!
//! The model check (`tests/loom.rs`) swaps the mapping for a heap copy of the same layout
//! (`model`): loom atomics for the header words, a `loom::cell::UnsafeCell` per data byte (so
//! loom reports a copy that races with the peer's), and a [`RingFile`] that is the shared
//! memory itself instead of a descriptor. Everything above this module, the protocol in
//! `ring`, is the same code in both builds: that is what the model check checks.

#[cfg(not(loom))]
use std::os::fd::{AsFd, OwnedFd};
#[cfg(not(loom))]
use std::ptr::NonNull;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, fence};
#[cfg(not(loom))]
use memmap2::{MmapMut, MmapOptions};
#[cfg(not(loom))]
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
#[cfg(not(loom))]
use nix::sys::memfd::{MFdFlags, memfd_create};

#[cfg(loom)]
pub(crate) use model::{Mapping, RingFile, create_file};

#[cfg(not(loom))]
use crate::RingError;

/// What holds the shared memory: the ring file's descriptor (a heap copy under loom).
#[cfg(not(loom))]
pub(crate) type RingFile = OwnedFd;

/// Bytes before the data area: one page, so the data area starts page-aligned.
pub(crate) const HEADER: usize = 4096;

/// One of the header's 64-bit words.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Word {
    Magic = 0,
    Capacity = 8,
    Head = 64,
    WriterWaits = 72,
    WriterClosed = 80,
    Tail = 128,
    ReaderWaits = 136,
    ReaderClosed = 144,
}

/// The seals every ring file carries: its size can never change, so no peer can `ftruncate`
/// it under our mapping (which would turn our next copy into SIGBUS).
#[cfg(not(loom))]
const SEALS: SealFlag = SealFlag::F_SEAL_SHRINK.union(SealFlag::F_SEAL_GROW).union(SealFlag::F_SEAL_SEAL);

/// Creates the shared file: an anonymous memfd of `HEADER + capacity` bytes, sealed against
/// resizing. The caller writes the header words through [`Mapping::open`].
#[cfg(not(loom))]
pub(crate) fn create_file(capacity: usize) -> Result<OwnedFd, RingError> {
    let fd = memfd_create(c"switchyard-shmring", MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
    let len = i64::try_from(HEADER + capacity).map_err(|_| RingError::Capacity(capacity))?;
    nix::unistd::ftruncate(&fd, len)?;
    fcntl(&fd, FcntlArg::F_ADD_SEALS(SEALS))?;
    Ok(fd)
}

#[cfg(not(loom))]
/// One side's mapping of the ring file.
#[derive(Debug)]
pub(crate) struct Mapping {
    /// Owns the mapping (unmapped on drop); never dereferenced as a slice, because the peer
    /// writes this memory concurrently and a `&[u8]` over it would promise otherwise.
    _map: MmapMut,
    base: NonNull<u8>,
    /// Private: taken from the file size on open, never re-read from shared memory.
    capacity: usize,
}

#[cfg(not(loom))]
// SAFETY: `Mapping` owns its mapping outright; `base` points into it and is only used through
// atomics (header) or raw byte copies (data), neither of which depends on the thread.
unsafe impl Send for Mapping {}

#[cfg(not(loom))]
impl Mapping {
    /// Maps a ring file after checking that its size fits the layout (a header page plus a
    /// power-of-two data area) and that it is sealed against resizing.
    pub(crate) fn open(fd: &OwnedFd) -> Result<Self, RingError> {
        let seals = match fcntl(fd, FcntlArg::F_GET_SEALS) {
            Ok(bits) => SealFlag::from_bits_truncate(bits),
            // EINVAL: a file that cannot carry seals at all (not a memfd or shmem file).
            Err(nix::errno::Errno::EINVAL) => return Err(RingError::Unsealed),
            Err(e) => return Err(e.into()),
        };
        if !seals.contains(SEALS) {
            return Err(RingError::Unsealed);
        }
        let size = usize::try_from(nix::sys::stat::fstat(fd.as_fd())?.st_size).map_err(|_| RingError::Capacity(0))?;
        let capacity = size.checked_sub(HEADER).ok_or(RingError::Capacity(0))?;
        if !capacity.is_power_of_two() {
            return Err(RingError::Capacity(capacity));
        }
        // SAFETY: memmap2 asks us to vouch that the file is not modified or truncated behind
        // the mapping. Truncation is ruled out by the seals checked above. Modification is the
        // point of the ring; it is sound because this module never hands out references to
        // the mapped bytes: header words are read and written only as atomics, and the data
        // area only through `ptr::copy_nonoverlapping` between raw pointers (see `copy_in`).
        let mut map = unsafe { MmapOptions::new().len(size).map_mut(fd)? };
        let base = NonNull::new(map.as_mut_ptr()).ok_or(RingError::Capacity(capacity))?;
        Ok(Self { _map: map, base, capacity })
    }

    /// The data area's size in bytes (a power of two).
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// A header word, shared with the peer.
    pub(crate) fn word(&self, word: Word) -> &AtomicU64 {
        // SAFETY: every `Word` offset is a multiple of 8 below `HEADER`, and the mapping is
        // page-aligned and at least `HEADER` bytes long, so the pointer is in bounds and
        // aligned for `AtomicU64`. Any bit pattern is a valid `u64`, and the memory lives as
        // long as `self`. The peer touches these words only through atomics of the same size
        // (or, if hostile, however it likes: that can change the values we load, not their
        // validity).
        unsafe { &*self.base.as_ptr().add(word as usize).cast::<AtomicU64>() }
    }

    /// Copies `src` into the data area starting at ring position `pos` (taken modulo the
    /// capacity), wrapping around the end in two copies if it must (notes 004a §10 (c),
    /// note 2).
    ///
    /// # Panics
    ///
    /// If `src` is longer than the capacity: a bug in the caller, which never asks for more
    /// than the free space it computed from its own private index.
    pub(crate) fn copy_in(&self, pos: u64, src: &[u8]) {
        let (first, second) = self.split(pos, src.len());
        // SAFETY: `split` keeps both runs inside the data area (`offset + first <= capacity`,
        // `second <= offset`), and `src` is a separate allocation of `first + second` bytes, so
        // the copies are in bounds and do not overlap. The peer may be writing the same bytes
        // (only if it breaks the protocol); bytes have no invalid values, so the worst outcome
        // is garbage in the ring, never UB in our own memory.
        unsafe {
            let data = self.base.as_ptr().add(HEADER);
            let offset = self.offset(pos);
            std::ptr::copy_nonoverlapping(src.as_ptr(), data.add(offset), first);
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), data, second);
        }
    }

    /// Copies `dst.len()` bytes out of the data area starting at ring position `pos`, wrapping
    /// as [`copy_in`](Self::copy_in) does.
    ///
    /// # Panics
    ///
    /// If `dst` is longer than the capacity (a caller bug, as for `copy_in`).
    pub(crate) fn copy_out(&self, pos: u64, dst: &mut [u8]) {
        let (first, second) = self.split(pos, dst.len());
        // SAFETY: as in `copy_in`, with source and destination swapped: `dst` is our own
        // exclusive buffer, and a racing peer can only change which bytes land in it.
        unsafe {
            let data = self.base.as_ptr().add(HEADER);
            let offset = self.offset(pos);
            std::ptr::copy_nonoverlapping(data.add(offset), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, dst.as_mut_ptr().add(first), second);
        }
    }

    fn offset(&self, pos: u64) -> usize {
        // The mask keeps the offset below the capacity whatever `pos` is; the truncating cast
        // is harmless because the mask fits in usize.
        (pos as usize) & (self.capacity - 1)
    }

    /// The run up to the end of the data area and the run from its start.
    fn split(&self, pos: u64, len: usize) -> (usize, usize) {
        assert!(len <= self.capacity, "copy of {len} bytes into a ring of {}", self.capacity);
        let first = len.min(self.capacity - self.offset(pos));
        (first, len - first)
    }
}

#[cfg(not(loom))]
/// What one `recvmsg` brought: how many data bytes, whether the control data was cut short,
/// and every descriptor it carried, now owned (closed on drop).
pub(crate) struct Received {
    pub(crate) bytes: usize,
    pub(crate) truncated: bool,
    pub(crate) fds: Vec<OwnedFd>,
}

#[cfg(not(loom))]
/// Receives one message with room for up to three descriptors (SCM_RIGHTS) from `socket`.
///
/// It lives here because turning the received numbers into `OwnedFd`s is `unsafe`; doing the
/// `recvmsg` in the same function keeps the reason it is sound in one place.
pub(crate) fn recv_fds(socket: &std::os::unix::net::UnixStream, data: &mut [u8]) -> Result<Received, RingError> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::{AsRawFd, FromRawFd, RawFd};

    let mut iov = [std::io::IoSliceMut::new(data)];
    let mut space = nix::cmsg_space!([RawFd; 3]);
    let msg = recvmsg::<()>(socket.as_raw_fd(), &mut iov, Some(&mut space), MsgFlags::MSG_CMSG_CLOEXEC)?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            // SAFETY: the kernel installed each of these descriptors in our table during the
            // `recvmsg` just above; nothing else in this process knows them yet, so each
            // becomes owned exactly once, here.
            fds.extend(raw.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
        }
    }
    Ok(Received { bytes: msg.bytes, truncated: msg.flags.contains(MsgFlags::MSG_CTRUNC), fds })
}

/// A descriptor type that owns its descriptor outright: the one promise
/// [`register`] needs from it.
#[cfg(all(feature = "tokio", not(loom)))]
pub(crate) trait OwnsFd: std::os::fd::AsRawFd {}

#[cfg(all(feature = "tokio", not(loom)))]
impl OwnsFd for OwnedFd {}

#[cfg(all(feature = "tokio", not(loom)))]
impl OwnsFd for crate::doorbell::Doorbell {}

/// Registers `inner` with the current tokio runtime's reactor, for readability.
///
/// It lives here because tokio's registration is `unsafe` (it cannot check that the
/// descriptor outlives the registration).
///
/// # Errors
///
/// Outside a tokio runtime, an error (where tokio itself would panic).
#[cfg(all(feature = "tokio", not(loom)))]
pub(crate) fn register<T: OwnsFd>(inner: T) -> std::io::Result<tokio::io::unix::AsyncFd<T>> {
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(std::io::Error::other("a ring's async end must be made within a tokio runtime"));
    }
    // SAFETY: tokio needs the descriptor to stay open, and `as_raw_fd` to keep returning it,
    // for as long as the `AsyncFd` owns `inner`. `OwnsFd` types (`OwnedFd`, and `Doorbell`,
    // a wrapper of one) own their descriptor, close it only on drop, and always return the
    // same one; the `AsyncFd` owns `inner`, and this crate never swaps it through `get_mut`.
    unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE) }.map_err(std::io::Error::from)
}

/// The ring's memory for the model check: the same header words and data area as the file,
/// on the heap, shared by the two ends of one `loom::model` run.
#[cfg(loom)]
mod model {
    use std::sync::Arc;

    use loom::cell::UnsafeCell;

    use super::{AtomicU64, Word};
    use crate::RingError;

    /// The shared memory itself: what a descriptor to the file stands for outside loom.
    #[derive(Clone, Debug)]
    pub(crate) struct RingFile(Arc<Shared>);

    impl RingFile {
        /// A second handle on the same memory, as `OwnedFd::try_clone` is on the same file.
        pub(crate) fn try_clone(&self) -> std::io::Result<Self> {
            Ok(self.clone())
        }
    }

    #[derive(Debug)]
    struct Shared {
        /// One atomic per 8-byte header slot, indexed by `Word as usize / 8`.
        words: Vec<AtomicU64>,
        /// One cell per byte, so loom tracks (and reports) a racing access to any one byte.
        data: Vec<UnsafeCell<u8>>,
    }

    // SAFETY: the header words are loom atomics. The data bytes are loom `UnsafeCell`s, which
    // are only reached through `with`/`with_mut`; loom checks every such access against the
    // happens-before order of the run and fails the model on a race instead of letting it
    // happen, which is exactly the check the model exists to make.
    unsafe impl Sync for Shared {}
    // SAFETY: as above; nothing in `Shared` is tied to the thread that made it.
    unsafe impl Send for Shared {}

    pub(crate) fn create_file(capacity: usize) -> Result<RingFile, RingError> {
        Ok(RingFile(Arc::new(Shared {
            // Up to the last word in use: loom tracks every atomic, and the rest of the page
            // is padding.
            words: (0..=Word::ReaderClosed as usize / 8).map(|_| AtomicU64::new(0)).collect(),
            data: (0..capacity).map(|_| UnsafeCell::new(0)).collect(),
        })))
    }

    #[derive(Debug)]
    pub(crate) struct Mapping {
        shared: Arc<Shared>,
        capacity: usize,
    }

    impl Mapping {
        pub(crate) fn open(file: &RingFile) -> Result<Self, RingError> {
            Ok(Self { shared: file.0.clone(), capacity: file.0.data.len() })
        }

        pub(crate) fn capacity(&self) -> usize {
            self.capacity
        }

        pub(crate) fn word(&self, word: Word) -> &AtomicU64 {
            &self.shared.words[word as usize / 8]
        }

        pub(crate) fn copy_in(&self, pos: u64, src: &[u8]) {
            assert!(src.len() <= self.capacity, "copy of {} bytes into a ring of {}", src.len(), self.capacity);
            for (i, &b) in src.iter().enumerate() {
                let cell = &self.shared.data[(pos as usize).wrapping_add(i) & (self.capacity - 1)];
                // SAFETY: loom checks this write against every other access to the byte.
                cell.with_mut(|p| unsafe { *p = b });
            }
        }

        pub(crate) fn copy_out(&self, pos: u64, dst: &mut [u8]) {
            assert!(dst.len() <= self.capacity, "copy of {} bytes out of a ring of {}", dst.len(), self.capacity);
            for (i, b) in dst.iter_mut().enumerate() {
                let cell = &self.shared.data[(pos as usize).wrapping_add(i) & (self.capacity - 1)];
                // SAFETY: loom checks this read against every other access to the byte.
                *b = cell.with(|p| unsafe { *p });
            }
        }
    }
}
