//! Wake-ups between the two ends: an `eventfd` each way, rung only when the other side said it
//! is about to sleep.
//!
//! XenSocket used one Xen event channel for both directions and slept "with timeout" (notes
//! 004a §10 (c)); an eventfd is the host-local equivalent, and its counter is sticky, so a ring
//! that lands between a sleeper's last check and its `poll` is not lost. The timeout stays:
//! it bounds the damage of a peer that never rings (hostile, or killed before it could).
//!
//! Under `--cfg loom` the doorbell is a sticky counter behind a loom `Mutex` and `Condvar`
//! instead, and `wait` ignores its timeout: a lost wake-up then leaves the sleeper blocked for
//! good, which loom reports as a deadlock rather than hiding it behind a nap.

#[cfg(not(loom))]
pub(crate) use os::Doorbell;
#[cfg(all(feature = "tokio", not(loom)))]
pub(crate) use os::hung_up;

#[cfg(loom)]
pub(crate) use model::Doorbell;

#[cfg(not(loom))]
mod os {
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
    use std::time::Duration;

    use nix::errno::Errno;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::eventfd::{EfdFlags, EventFd};

    /// One direction's eventfd (non-blocking; the sleeper blocks in `poll`, not in `read`).
    #[derive(Debug)]
    pub(crate) struct Doorbell(OwnedFd);

    impl Doorbell {
        pub(crate) fn new() -> Result<Self, Errno> {
            let efd = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
            // A plain descriptor, so both ends can hold a duplicate (`EventFd` has no safe clone).
            Ok(Self(OwnedFd::from(efd)))
        }

        /// Takes a descriptor received from a peer as a doorbell, made non-blocking first: if
        /// it is not an eventfd at all, a `ring` or `wait` on it still cannot block for good.
        pub(crate) fn adopt(fd: OwnedFd) -> Result<Self, Errno> {
            use nix::fcntl::{FcntlArg, OFlag, fcntl};
            let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
            fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
            Ok(Self(fd))
        }

        pub(crate) fn try_clone(&self) -> std::io::Result<Self> {
            Ok(Self(self.0.try_clone()?))
        }

        /// Wakes the sleeper, or the next one to sleep.
        pub(crate) fn ring(&self) {
            // EAGAIN means the counter is near u64::MAX: the sleeper is certainly awake already.
            let _ = nix::unistd::write(&self.0, &1u64.to_ne_bytes());
        }

        /// Sleeps until rung, `timeout` passes or `lifeline` hangs up, then clears the counter;
        /// returns whether the lifeline hung up (the peer is gone). Spurious returns are fine:
        /// every caller re-checks the ring.
        pub(crate) fn wait(&self, timeout: Duration, lifeline: Option<BorrowedFd<'_>>) -> Result<bool, Errno> {
            let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
            let bell = PollFd::new(self.0.as_fd(), PollFlags::POLLIN);
            let mut fds: Vec<PollFd<'_>> =
                std::iter::once(bell).chain(lifeline.map(|fd| PollFd::new(fd, PollFlags::empty()))).collect();
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
            let gone = fds.get(1).and_then(PollFd::revents).is_some_and(is_hang_up);
            self.clear()?;
            Ok(gone)
        }

        /// Resets the counter, so the next `poll` sleeps until the next ring.
        pub(crate) fn clear(&self) -> Result<(), Errno> {
            let mut buf = [0u8; 8];
            match nix::unistd::read(&self.0, &mut buf) {
                Ok(_) | Err(Errno::EAGAIN) => Ok(()),
                Err(e) => Err(e),
            }
        }

        pub(crate) fn fd(&self) -> BorrowedFd<'_> {
            self.0.as_fd()
        }
    }

    /// So an async end can register the doorbell with tokio's reactor.
    impl AsRawFd for Doorbell {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_raw_fd()
        }
    }

    /// Whether `lifeline` has hung up, without waiting. The async ends ask this when the
    /// reactor says the lifeline is ready: that may be only data on it (or a half-close),
    /// which does not mean the peer is gone.
    #[cfg(feature = "tokio")]
    pub(crate) fn hung_up(lifeline: BorrowedFd<'_>) -> Result<bool, Errno> {
        let mut fds = [PollFd::new(lifeline, PollFlags::empty())];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(_) => Ok(fds[0].revents().is_some_and(is_hang_up)),
            Err(Errno::EINTR) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// No events are asked of a lifeline: only a hang-up (always reported) counts, and data on
    /// it is not ours to read. A Unix stream socket hangs up when its peer's end is closed,
    /// which a process's death does.
    fn is_hang_up(revents: PollFlags) -> bool {
        revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
    }
}

#[cfg(loom)]
mod model {
    use std::os::fd::BorrowedFd;
    use std::sync::Arc;
    use std::time::Duration;

    use loom::sync::{Condvar, Mutex};
    use nix::errno::Errno;

    /// An eventfd's semantics: a counter that `ring` adds to and `wait` sleeps on and clears.
    #[derive(Clone, Debug)]
    pub(crate) struct Doorbell(Arc<(Mutex<u64>, Condvar)>);

    impl Doorbell {
        pub(crate) fn new() -> Result<Self, Errno> {
            Ok(Self(Arc::new((Mutex::new(0), Condvar::new()))))
        }

        pub(crate) fn try_clone(&self) -> std::io::Result<Self> {
            Ok(self.clone())
        }

        pub(crate) fn ring(&self) {
            let (count, bell) = &*self.0;
            *count.lock().unwrap() += 1;
            bell.notify_all();
        }

        /// No timeout and no lifeline: only a ring ends the wait.
        pub(crate) fn wait(&self, _timeout: Duration, _lifeline: Option<BorrowedFd<'_>>) -> Result<bool, Errno> {
            let (count, bell) = &*self.0;
            let mut rung = count.lock().unwrap();
            while *rung == 0 {
                rung = bell.wait(rung).unwrap();
            }
            *rung = 0;
            Ok(false)
        }
    }
}
