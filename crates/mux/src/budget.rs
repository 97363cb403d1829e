//! The session's byte budget ([`MuxConfig::session_buffer`](crate::MuxConfig::session_buffer)),
//! shared by the session's driver and the tasks that read local sockets into its channels (a
//! tunnel's forwarders). A reader takes room before each read and reads no more than it got;
//! where there is none it waits, and is handed room as the driver gives bytes back (the peer
//! acknowledged them). Who gets room, and how much, is the core's
//! ([`switchyard_core::carry::Budget`]); this only hands the grants to the tasks waiting.

use std::collections::HashMap;
use std::sync::Mutex;

use switchyard_core::carry::Budget;
use tokio::sync::oneshot;

use crate::MuxError;

#[derive(Debug)]
pub(crate) struct SessionBudget {
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    core: Budget,
    /// Where each waiting channel's grant goes (one reader a channel).
    waiters: HashMap<u32, oneshot::Sender<u64>>,
    /// The session has stopped: nobody gives room back any more.
    closed: bool,
}

/// The budget's counters ([`SessionReport`](crate::SessionReport)).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub(crate) held: u64,
    pub(crate) peak: u64,
    pub(crate) waits: u64,
    pub(crate) waiting: usize,
}

impl SessionBudget {
    /// A budget of `bytes`, granted at most `most_grant` at a time.
    pub(crate) fn new(bytes: u64, most_grant: u64) -> Self {
        Self {
            inner: Mutex::new(Inner { core: Budget::new(bytes, most_grant), waiters: HashMap::new(), closed: false }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("nothing panics holding it")
    }

    /// Room for `channel` to read up to `want` bytes, charged to it: now if the session has
    /// room for it, else once the driver has given enough back. Fails once the session has
    /// stopped, or the channel was let go of (reset).
    pub(crate) async fn take(&self, channel: u32, want: u64) -> Result<u64, MuxError> {
        let granted = {
            let mut inner = self.lock();
            if inner.closed {
                return Err(MuxError::Ended);
            }
            let n = inner.core.take(channel, want);
            if n > 0 {
                return Ok(n);
            }
            inner.core.wait(channel);
            let (tx, rx) = oneshot::channel();
            inner.waiters.insert(channel, tx);
            rx
        };
        let n = granted.await.map_err(|_| MuxError::Ended)?;
        if n > want {
            self.give_back(channel, n - want);
        }
        Ok(n.min(want))
    }

    /// `channel` no longer holds `n` of its bytes: the peer has them, or a read took fewer than
    /// were granted. Room that comes back goes to the channels waiting.
    pub(crate) fn give_back(&self, channel: u32, n: u64) {
        if n == 0 {
            return;
        }
        let mut inner = self.lock();
        inner.core.give_back(channel, n);
        inner.grant();
    }

    /// `channel` holds nothing any more, and waits for nothing (it ended or was reset): a
    /// reader waiting for it is told the channel is gone.
    pub(crate) fn forget(&self, channel: u32) {
        let mut inner = self.lock();
        inner.waiters.remove(&channel);
        if inner.core.forget(channel) > 0 {
            inner.grant();
        }
    }

    /// The session has stopped: readers waiting, and those to come, are told so.
    pub(crate) fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        inner.waiters.clear();
    }

    pub(crate) fn counts(&self) -> Counts {
        let inner = self.lock();
        Counts {
            held: inner.core.held(),
            peak: inner.core.peak(),
            waits: inner.core.waits(),
            waiting: inner.core.waiting(),
        }
    }
}

impl Inner {
    /// Hands room to the channels waiting, as the core grants it.
    fn grant(&mut self) {
        while let Some((channel, n)) = self.core.poll_grant() {
            // A reader that stopped waiting (its task ended): the room goes back.
            let refused = match self.waiters.remove(&channel) {
                Some(tx) => tx.send(n).is_err(),
                None => true,
            };
            if refused {
                self.core.give_back(channel, n);
            }
        }
    }
}
