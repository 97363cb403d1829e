//! A ring as its three descriptors, so one process can create it and hand one end to another
//! over a Unix socket (SCM_RIGHTS).
//!
//! XenSocket passed the descriptor page's grant reference "manually out of band" (notes 004a
//! §10 (b)); on one host the kernel can carry the descriptors themselves, and a receiver can
//! check what it got instead of trusting a number.

#[cfg(not(loom))]
use std::io::IoSlice;
#[cfg(not(loom))]
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
#[cfg(not(loom))]
use std::os::unix::net::UnixStream;

#[cfg(not(loom))]
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

use crate::RingError;
use crate::doorbell::Doorbell;
use crate::raw::{self, RingFile};

/// The one byte sent with the descriptors (a message must carry some data), and a version
/// check on the way.
#[cfg(not(loom))]
const TAG: u8 = b'R';

/// A ring not yet opened as either end: the shared file and the two eventfds.
#[derive(Debug)]
pub struct RingFds {
    pub(crate) file: RingFile,
    /// Rung by the writer when it publishes data to a sleeping reader.
    pub(crate) data_ready: Doorbell,
    /// Rung by the reader when it frees space for a sleeping writer.
    pub(crate) space_ready: Doorbell,
}

impl RingFds {
    /// Creates a ring whose data area holds `capacity` bytes (a non-zero power of two): a
    /// sealed memfd with its header written, and two eventfds.
    pub fn create(capacity: usize) -> Result<Self, RingError> {
        if !capacity.is_power_of_two() || capacity.checked_add(raw::HEADER).is_none() {
            return Err(RingError::Capacity(capacity));
        }
        let file = raw::create_file(capacity)?;
        crate::ring::write_header(&file)?;
        Ok(Self { file, data_ready: Doorbell::new()?, space_ready: Doorbell::new()? })
    }

    /// Duplicates the three descriptors (for the other end, in this process or to send).
    pub fn try_clone(&self) -> Result<Self, RingError> {
        Ok(Self {
            file: self.file.try_clone()?,
            data_ready: self.data_ready.try_clone()?,
            space_ready: self.space_ready.try_clone()?,
        })
    }

    #[cfg(not(loom))]
    /// Sends the three descriptors to the peer at the other end of `socket`.
    pub fn send(&self, socket: &UnixStream) -> Result<(), RingError> {
        let fds = [self.file.as_raw_fd(), self.data_ready.fd().as_raw_fd(), self.space_ready.fd().as_raw_fd()];
        let iov = [IoSlice::new(&[TAG])];
        sendmsg::<()>(socket.as_raw_fd(), &iov, &[ControlMessage::ScmRights(&fds)], MsgFlags::empty(), None)?;
        Ok(())
    }

    #[cfg(not(loom))]
    /// Receives a ring's descriptors from `socket`, as sent by [`send`](Self::send). What
    /// arrives is only checked as far as descriptors can be: the file when it is opened as an
    /// end ([`RingError::Unsealed`], [`RingError::NotARing`]), the eventfds by being made
    /// non-blocking here, so a peer that sends something else cannot make a ring or a wait
    /// block forever.
    pub fn recv(socket: &UnixStream) -> Result<Self, RingError> {
        let mut tag = [0u8; 1];
        let got = raw::recv_fds(socket, &mut tag)?;
        let mut fds = got.fds.into_iter();
        match (got.bytes, tag[0], got.truncated, fds.next(), fds.next(), fds.next(), fds.next()) {
            (1, TAG, false, Some(file), Some(data), Some(space), None) => {
                Ok(Self { file, data_ready: Doorbell::adopt(data)?, space_ready: Doorbell::adopt(space)? })
            }
            _ => Err(RingError::BadHandoff),
        }
    }

    #[cfg(not(loom))]
    /// The shared ring file.
    pub fn file(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}
