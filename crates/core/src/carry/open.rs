//! Channel opening under credit, as bytes are: the accepting end bounds how many channels its
//! peer may have *opening* at once — opened there, not yet accepted by the application here —
//! and gives leave to open more as its application accepts them. Past the bound the opener
//! waits ([`Sender::open`](super::Sender::open) refuses until [`Frame::OpenCredit`] raises its
//! limit) instead of the accepting end queuing without bound, or refusing.
//!
//! The leave is a cumulative count, as the data credit's limit is: "you may have opened `limit`
//! channels of this session in all". A copy, a late frame or one lost with its connection (it is
//! sent again, [`OpenWindow::connection_lost`]) cannot leave the two ends disagreeing. The
//! accepting end counts the peer's channels as they arrive (from their first frame of any kind,
//! since an `Open` may travel on a slower connection than its first data) and as they are
//! *settled*: accepted by the application, or refused, or dropped because nobody accepts any
//! more. A channel the peer opened and reset before anything else of it arrived is counted
//! arriving and settled at once, so its credit comes back too.

use super::frame::Frame;

/// The accepting end's side of open credit: how many channels the peer may have opening, and
/// the grants that say so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenWindow {
    window: u64,
    /// The peer's channels that have arrived, in all.
    arrived: u64,
    /// Of those, the ones settled (accepted, refused or dropped).
    settled: u64,
    /// The largest limit told the peer (0: none yet).
    told: u64,
    /// The limit must be told (again): never sent yet, or perhaps lost with a connection.
    due: bool,
}

/// A peer that opened a channel without leave: it broke the protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the peer opened its channel number {opened} of the session, beyond the {limit} it was given leave to open")]
pub struct OpenError {
    /// The count the channel would have made.
    pub opened: u64,
    /// The limit told.
    pub limit: u64,
}

impl OpenWindow {
    /// A window of `window` channels opening at once (at least 1: with none, no channel could
    /// ever open).
    pub fn new(window: u64) -> Self {
        Self { window: window.max(1), arrived: 0, settled: 0, told: 0, due: true }
    }

    /// The window.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// The peer's channels opening now: arrived and not settled.
    pub fn opening(&self) -> u64 {
        self.arrived - self.settled
    }

    /// The peer's channels that have arrived, in all.
    pub fn arrived(&self) -> u64 {
        self.arrived
    }

    /// The limit the peer may open up to now (told or not yet).
    pub fn limit(&self) -> u64 {
        self.settled + self.window
    }

    /// A channel the peer opened has arrived (its first frame); an error if the peer had no
    /// leave to open it (it is then not counted).
    pub fn on_open(&mut self) -> Result<(), OpenError> {
        if self.arrived >= self.told {
            return Err(OpenError { opened: self.arrived + 1, limit: self.told });
        }
        self.arrived += 1;
        Ok(())
    }

    /// `n` of the channels opening were accepted by the application (or refused, or dropped):
    /// their credit goes back to the peer.
    pub fn settle(&mut self, n: u64) {
        debug_assert!(self.settled + n <= self.arrived, "settling channels that never arrived");
        self.settled = (self.settled + n).min(self.arrived);
    }

    /// A connection died: the last grant may have died with it, and a peer waiting on it would
    /// wait for ever. It is sent again.
    pub fn connection_lost(&mut self) {
        self.due = true;
    }

    /// The grant to send (on any connection), if one is owed: the first, one that may have been
    /// lost, or once an eighth of the window (at least one channel) has been settled since the
    /// last. An opener that has used its leave is then waiting only on channels that are still
    /// opening here, never on a grant held back.
    pub fn poll_grant(&mut self) -> Option<Frame> {
        let limit = self.limit();
        let step = (self.window / 8).max(1);
        if !self.due && limit < self.told + step {
            return None;
        }
        self.due = false;
        self.told = self.told.max(limit);
        Some(Frame::OpenCredit { limit: self.told })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_grant_is_the_window_and_more_comes_as_channels_are_accepted() {
        let mut w = OpenWindow::new(16);
        assert_eq!(w.on_open(), Err(OpenError { opened: 1, limit: 0 }), "no leave before the first grant");
        assert_eq!(w.poll_grant(), Some(Frame::OpenCredit { limit: 16 }));
        assert_eq!(w.poll_grant(), None);
        for _ in 0..16 {
            w.on_open().unwrap();
        }
        assert_eq!(w.on_open(), Err(OpenError { opened: 17, limit: 16 }));
        assert_eq!(w.opening(), 16);
        // One accepted is less than an eighth of the window: no grant yet; two is.
        w.settle(1);
        assert_eq!(w.poll_grant(), None);
        w.settle(1);
        assert_eq!(w.poll_grant(), Some(Frame::OpenCredit { limit: 18 }));
        w.on_open().unwrap();
        assert_eq!(w.opening(), 15);
        // Lost with a connection: told again, unchanged.
        w.connection_lost();
        assert_eq!(w.poll_grant(), Some(Frame::OpenCredit { limit: 18 }));
    }

    #[test]
    fn a_window_of_one_grants_each_channel_as_it_is_accepted() {
        let mut w = OpenWindow::new(0);
        assert_eq!(w.window(), 1);
        assert_eq!(w.poll_grant(), Some(Frame::OpenCredit { limit: 1 }));
        w.on_open().unwrap();
        assert!(w.on_open().is_err());
        w.settle(1);
        assert_eq!(w.poll_grant(), Some(Frame::OpenCredit { limit: 2 }));
    }
}
