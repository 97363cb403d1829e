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

use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use memmap2::{MmapMut, MmapOptions};
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};

use crate::RingError;

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
const SEALS: SealFlag = SealFlag::F_SEAL_SHRINK.union(SealFlag::F_SEAL_GROW).union(SealFlag::F_SEAL_SEAL);

/// Creates the shared file: an anonymous memfd of `HEADER + capacity` bytes, sealed against
/// resizing. The caller writes the header words through [`Mapping::open`].
pub(crate) fn create_file(capacity: usize) -> Result<OwnedFd, RingError> {
    let fd = memfd_create(c"switchyard-shmring", MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
    let len = i64::try_from(HEADER + capacity).map_err(|_| RingError::Capacity(capacity))?;
    nix::unistd::ftruncate(&fd, len)?;
    fcntl(&fd, FcntlArg::F_ADD_SEALS(SEALS))?;
    Ok(fd)
}

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

// SAFETY: `Mapping` owns its mapping outright; `base` points into it and is only used through
// atomics (header) or raw byte copies (data), neither of which depends on the thread.
unsafe impl Send for Mapping {}

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

/// What one `recvmsg` brought: how many data bytes, whether the control data was cut short,
/// and every descriptor it carried, now owned (closed on drop).
pub(crate) struct Received {
    pub(crate) bytes: usize,
    pub(crate) truncated: bool,
    pub(crate) fds: Vec<OwnedFd>,
}

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
