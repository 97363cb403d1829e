//! Switchyard's **shared-memory carry**: a one-way byte ring between two processes (or
//! threads) on one host, XenSocket's ring (Zhang, McIntosh, Rohatgi, Griffin, IBM; notes 004a §10) made
//! modern.
//!
//! # What lives here
//!
//! - [`channel`]: a ring in a sealed `memfd`, returned as its two ends.
//! - [`RingFds`]: a ring as its three descriptors (the file and two eventfds), to create in
//!   one process and send to another over a Unix socket (SCM_RIGHTS), then open as one end.
//! - [`Writer`] and [`Reader`]: blocking `write`/`write_all` and `read`, and non-blocking
//!   `try_write`/`try_read`. A side that must wait spins briefly, then sleeps on an `eventfd`
//!   that the other side rings only when told someone sleeps. A peer killed without closing
//!   its end is noticed through a lifeline that hangs up when it dies (the socket the ring came
//!   over: [`Writer::watch`], [`Reader::watch`]), as [`RingError::PeerGone`]. They are also
//!   `std::io::Write` and `std::io::Read` (`std_io`), for code written for files and pipes.
//! - With the `tokio` feature (on by default): `AsyncWriter` and `AsyncReader`
//!   (`Writer::into_async`, `Reader::into_async`), the ends as tokio's `AsyncWrite` and
//!   `AsyncRead`, which touch the kernel only when the ring is full or empty; and `Duplex`, a
//!   two-way stream as two rings (`duplex` in one process, `Duplex::offer`/`Duplex::accept`
//!   across two over a Unix socket). For callers that do their own non-blocking I/O, as the
//!   mux's driver does with sockets, the async ends also offer tokio's readiness style:
//!   `AsyncReader::poll_read_ready` + `try_read`, `AsyncWriter::poll_write_ready` +
//!   `try_write`/`try_write_vectored`, parking the same way `poll_read`/`poll_write` do; and
//!   `AsyncWriter::set_low_water`, the ring's `TCP_NOTSENT_LOWAT`.
//! - [`Writer::unread`] (bytes written and not yet read: the ring's "unsent" queue) and
//!   [`Reader::available`], exact and without waiting.
//! - [`RingError`]: among others, [`RingError::Corrupt`]: the reader and writer never trust the
//!   peer's index for their own safety, so a peer that scribbles on the shared header gets a
//!   typed error back, never undefined behaviour, a panic or an out-of-bounds copy.
//!
//! All `unsafe` code is in one private module (`raw`), which owns the mapping.
//!
//! # The model check
//!
//! `tests/loom.rs` runs the ring's protocol (the code in `ring`, unchanged) under
//! [loom](https://docs.rs/loom), which explores every interleaving and every reordering the
//! memory model allows of a writer and a reader on a tiny ring: every byte must arrive once
//! and in order, no copy may race with the peer's, and no sleep may miss its wake-up (a lost
//! wake-up is a loom deadlock, because under loom a doorbell waits without a timeout). Run it
//! with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p switchyard-shmring --test loom --release
//! ```
//!
//! (`--release` because loom is slow unoptimised; the test bounds preemptions at 3 unless
//! `LOOM_MAX_PREEMPTIONS` says otherwise.)
//! Under `--cfg loom` the mapping and the doorbells are heap-backed models (see `raw` and
//! `doorbell`), and the `tokio` ends and the descriptor handoff are not built.
//!
//! # What does not
//!
//! No policy: which bytes go on the ring, in what order, framed how, is the core's business
//! (`switchyard_core::carry`) and the callers'. The mux (`switchyard_mux`, `shm:` peers) carries a
//! session's connections over duplexes of these rings.
//!
//! # Trust and tear-down
//!
//! XenSocket's rules (notes 004a §10 (b)), kept where they still mean something on one host:
//!
//! - **The less-trusted side allocates.** [`RingFds::create`] makes the memory and the other
//!   side maps what it is handed. A memfd lives while any process holds it, so once the
//!   trusted side has closed its end, a ring the peer keeps is the peer's alone, not memory it
//!   can hold against us. (Linux charges a shared page to the cgroup of the process that first
//!   touches it, so the header page is the creator's and a data page is its first writer's.)
//!   In Switchyard's uses the client of a `shm:` mux session and the capture feeder allocate;
//!   the server and the inspector map.
//! - **Neither side trusts shared control data for its own correctness.** Each keeps its index
//!   privately and checks the peer's ([`RingError::Corrupt`]); the file is sealed against
//!   resizing ([`RingError::Unsealed`]).
//! - **The trusted side never blocks on the untrusted one.** Dropping an end stores its
//!   "closed" flag and rings the peer, and never waits. A wait for data or space can be bounded
//!   (`set_timeout`: [`RingError::TimedOut`]) and ends when the peer dies (the lifeline:
//!   [`RingError::PeerGone`]). A peer that stops reading, scribbles on the header or rings for
//!   nothing can hurt only its own stream.
//! - **Tear-down.** XenSocket needed two flags and a fixed order (the client first) because Xen
//!   cannot revoke a mapped grant. Here either end may go first: the reader sees the writer's
//!   "closed" after its last byte, the writer sees the reader's as [`RingError::ReaderClosed`],
//!   and the kernel frees the pages once both ends have unmapped and closed the file.
//!
//! # Why a one-way ring
//!
//! XenSocket measured that aggregating many small transfers into a few large copies through a
//! statically shared buffer beat Xen's inter-VM TCP by 72× (at its 16 KB peak) and a Unix domain
//! socket by 33% at 2 MB messages (notes 004a §10 (d)). One direction per ring keeps every shared word
//! written by exactly one side; a two-way carry is two rings.

#![deny(unsafe_code)]

#[cfg(all(feature = "tokio", not(loom)))]
mod async_io;
mod doorbell;
#[cfg(all(feature = "tokio", not(loom)))]
mod duplex;
mod handoff;
#[allow(unsafe_code)] // the one module allowed: see its docs
mod raw;
mod ring;
mod std_io;

#[cfg(all(feature = "tokio", not(loom)))]
pub use async_io::{AsyncReader, AsyncWriter};
#[cfg(all(feature = "tokio", not(loom)))]
pub use duplex::{Duplex, duplex};
pub use handoff::RingFds;
pub use ring::{Reader, Writer, channel};

/// What can go wrong with a ring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RingError {
    /// The data area must be a non-zero power of two, so positions wrap with a mask.
    #[error("ring capacity {0} is not a power of two (or too large)")]
    Capacity(usize),
    /// A ring file must be sealed against resizing, or the peer could shrink it under our
    /// mapping and turn the next copy into SIGBUS.
    #[error("the ring file is not sealed against resizing")]
    Unsealed,
    /// The peer wrote an index that no correct peer could have written. The end that saw it
    /// stays failed: every later call returns the same error.
    #[error("the peer corrupted the ring: {0}")]
    Corrupt(Corruption),
    /// The file is not a ring made by [`RingFds::create`]: wrong magic number, or a capacity
    /// word that disagrees with the file's size. A check against mistakes, not against a
    /// hostile peer, who can write a correct header as easily as a wrong one.
    #[error("the file is not a ring (magic {magic:#x}, capacity word {capacity}, file capacity {file_capacity})")]
    NotARing {
        /// The magic word found.
        magic: u64,
        /// The capacity word found.
        capacity: u64,
        /// The capacity implied by the file's size.
        file_capacity: u64,
    },
    /// What arrived on the socket was not one ring's three descriptors (too few or too many,
    /// truncated, or without the expected tag byte). Whatever descriptors did arrive are closed.
    #[error("the peer did not send a ring's descriptors")]
    BadHandoff,
    /// The reader has gone, so nothing written now would ever be read.
    #[error("the reader has closed the ring")]
    ReaderClosed,
    /// The peer's lifeline hung up (see [`Writer::watch`]) without the peer closing its end:
    /// it was killed, or exited without dropping it. A reader gets this once it has read
    /// everything the peer wrote; the last write may have been cut short.
    #[error("the peer went away without closing the ring (killed?)")]
    PeerGone,
    /// The wait for the peer lasted longer than the end's timeout (`set_timeout`): the peer
    /// neither read nor wrote in that time. The end stays usable.
    #[error("the peer did not move for {0:?} (the timeout)")]
    TimedOut(std::time::Duration),
    /// A system call failed (memfd, seals, eventfd, poll).
    #[error("system call failed: {0}")]
    Os(#[from] nix::errno::Errno),
    /// Mapping the ring file, or duplicating a descriptor, failed.
    #[error("mapping the ring failed: {0}")]
    Io(#[from] std::io::Error),
}

/// For `std::io` callers (and the async ends): the error keeps the [`RingError`] as its inner
/// error (`get_ref().and_then(|e| e.downcast_ref::<RingError>())`), under the kind a caller of
/// `Read`/`Write` would test for.
impl From<RingError> for std::io::Error {
    fn from(e: RingError) -> Self {
        use std::io::ErrorKind;
        let kind = match &e {
            RingError::Capacity(_) => ErrorKind::InvalidInput,
            RingError::Corrupt(_) | RingError::NotARing { .. } | RingError::BadHandoff => ErrorKind::InvalidData,
            RingError::Unsealed => ErrorKind::PermissionDenied,
            // Nobody is left to read what we write: as writing to a pipe nobody reads.
            RingError::ReaderClosed | RingError::PeerGone => ErrorKind::BrokenPipe,
            RingError::TimedOut(_) => ErrorKind::TimedOut,
            RingError::Os(errno) => Self::from(*errno).kind(),
            RingError::Io(io) => io.kind(),
        };
        Self::new(kind, e)
    }
}

/// An impossible shared index, as seen by one end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{word} went from {last} to {value}, against our own index {ours} and capacity {capacity}")]
pub struct Corruption {
    /// Which shared word: "head" (checked by the reader) or "tail" (checked by the writer).
    pub word: &'static str,
    /// The last value of that word that passed the checks.
    pub last: u64,
    /// The value just loaded from shared memory.
    pub value: u64,
    /// The end's own private index it was checked against (the reader's tail, the writer's
    /// head).
    pub ours: u64,
    /// The ring's capacity.
    pub capacity: u64,
}
