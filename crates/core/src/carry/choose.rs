//! Which connection a striped frame goes on.
//!
//! The driver asks on behalf of a connection that has room (its kernel's unsent queue fell below
//! the low-water mark), so the question is whether *that* connection should take the next frame.
//!
//! - [`ConnChoice::LeastQueued`] — Iwashima §6.3: the least-filled connection among those below
//!   the threshold takes it. In a driver that asks as connections drain, the connection asking is
//!   the one that drained first, so it always takes the frame.
//! - [`ConnChoice::EarliestDelivery`] — not in the thesis (notes §6.3, the ECF and BLEST
//!   schedulers of MPTCP): the frame should go where it will arrive first. A connection's expected
//!   delivery time for a frame of `len` bytes is `rtt/2 + (unsent + len) / rate`, from the
//!   kernel's smoothed RTT, its unsent bytes (drained at `rate` since they were seen) and the rate
//!   it can send at ([`ConnView::sending_rate`], from `TCP_INFO`), one RTT more while it is recovering from a loss. The asking
//!   connection takes the frame if its estimate is within `slack` of the best open connection's;
//!   otherwise the frame waits for that connection, which will ask when it drains. A connection
//!   stalled in loss recovery (its rate collapses, its RTT grows) stops receiving frames that
//!   would wait behind the stall: the reordering striping causes (§3.7) comes from exactly those.

/// What the scheduler knows of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ConnView {
    /// It can carry frames.
    pub open: bool,
    /// Bytes handed to it and not yet sent by the kernel.
    pub unsent: u64,
    /// Smoothed round-trip time in nanoseconds (0: not measured yet).
    pub rtt_ns: u64,
    /// Its recent delivery rate, in bytes per second (0: not measured yet).
    pub rate: f64,
    /// Its congestion window over its RTT, in bytes per second (0: not known).
    pub window_rate: f64,
    /// When the view was taken, in nanoseconds on the caller's clock.
    pub at_ns: u64,
    /// It is retransmitting lost segments: what is handed to it now waits behind them.
    pub recovering: bool,
}

impl ConnView {
    /// The rate it can send at: its delivery rate, or its window over its RTT if more. A
    /// connection given little to send delivers little, and its delivery rate says so; taken
    /// as what it can do, that kept it from being given more.
    pub fn sending_rate(&self) -> f64 {
        self.rate.max(self.window_rate)
    }

    /// Expected nanoseconds until a frame of `len` bytes handed over at `now_ns` is delivered,
    /// if the connection has been measured.
    ///
    /// The unsent bytes seen at `at_ns` have been draining since at its sending rate. Taken as they were,
    /// a view read just after a write says a connection that has since emptied is still busy;
    /// such a connection is then never chosen, so never written to, so its view is never read
    /// again: on the emulator, earliest delivery starved all but a few connections and carried
    /// 0.3 of the link at m = 5 and 10.
    pub fn delivery_ns(&self, len: usize, now_ns: u64) -> Option<f64> {
        let rate = self.sending_rate();
        (self.open && self.rtt_ns > 0 && rate > 0.0).then(|| {
            let drained = rate * now_ns.saturating_sub(self.at_ns) as f64 / 1e9;
            let unsent = (self.unsent as f64 - drained).max(0.0);
            // Recovery from a loss takes a round trip or so: a view that said so two round
            // trips ago no longer does (a connection left alone is not looked at again).
            let recovering = self.recovering && now_ns < self.at_ns + 2 * self.rtt_ns;
            let recovery = if recovering { self.rtt_ns as f64 } else { 0.0 };
            self.rtt_ns as f64 / 2.0 + recovery + (unsent + len as f64) / rate * 1e9
        })
    }
}

/// How striping chooses connections.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ConnChoice {
    /// The first connection with room (the thesis's least-queued).
    LeastQueued,
    /// The connection expected to deliver first, within `slack` (a fraction: 0.1 lets a
    /// connection 10% slower than the best take the frame rather than wait).
    EarliestDelivery {
        /// Tolerance over the best estimate.
        slack: f64,
    },
}

impl ConnChoice {
    /// Whether connection `asking`, which has room, should take the next frame of `len` bytes
    /// at `now_ns`. Until every open connection has been measured, earliest delivery behaves
    /// as least queued.
    pub fn takes(&self, conns: &[ConnView], asking: usize, len: usize, now_ns: u64) -> bool {
        match *self {
            Self::LeastQueued => conns.get(asking).is_some_and(|c| c.open),
            Self::EarliestDelivery { slack } => {
                let Some(mine) = conns.get(asking).filter(|c| c.open) else { return false };
                let Some(mine) = mine.delivery_ns(len, now_ns) else { return true };
                let mut best = mine;
                for c in conns.iter().filter(|c| c.open) {
                    match c.delivery_ns(len, now_ns) {
                        Some(t) => best = best.min(t),
                        None => return true,
                    }
                }
                mine <= best * (1.0 + slack)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(unsent: u64, rtt_ms: u64, rate: f64) -> ConnView {
        ConnView { open: true, unsent, rtt_ns: rtt_ms * 1_000_000, rate, ..ConnView::default() }
    }

    #[test]
    fn least_queued_takes_whenever_the_connection_is_open() {
        let conns = [conn(0, 50, 1e6), ConnView::default()];
        assert!(ConnChoice::LeastQueued.takes(&conns, 0, 1000, 0));
        assert!(!ConnChoice::LeastQueued.takes(&conns, 1, 1000, 0));
    }

    #[test]
    fn a_stalled_connection_leaves_the_frame_to_a_faster_one() {
        // Connection 1 is in recovery: a long RTT and a collapsed rate.
        let conns = [conn(40_000, 50, 1e6), conn(0, 400, 1e4)];
        let ecf = ConnChoice::EarliestDelivery { slack: 0.1 };
        assert!(!ecf.takes(&conns, 1, 1000, 0), "waiting for connection 0 delivers sooner");
        assert!(ecf.takes(&conns, 0, 1000, 0));
    }

    #[test]
    fn unmeasured_connections_fall_back_to_least_queued() {
        let conns = [conn(0, 0, 0.0), conn(10_000, 50, 1e6)];
        let ecf = ConnChoice::EarliestDelivery { slack: 0.0 };
        assert!(ecf.takes(&conns, 0, 1000, 0));
        assert!(ecf.takes(&conns, 1, 1000, 0));
    }

    #[test]
    fn a_view_read_long_ago_has_drained_since() {
        // Connection 0 was seen with 100 KB unsent at 1 MB/s, 100 ms ago: it has drained.
        let stale = ConnView { at_ns: 0, ..conn(100_000, 50, 1e6) };
        let fresh = ConnView { at_ns: 100_000_000, ..conn(2_000, 50, 1e6) };
        let ecf = ConnChoice::EarliestDelivery { slack: 0.1 };
        assert!(ecf.takes(&[stale, fresh], 0, 1000, 100_000_000));
        // Read just now, the same 100 KB keeps it out.
        assert!(!ecf.takes(&[stale, fresh], 0, 1000, 0));
    }

    #[test]
    fn a_connection_recovering_from_a_loss_waits_a_round_trip_longer() {
        let ecf = ConnChoice::EarliestDelivery { slack: 0.1 };
        let recovering = ConnView { recovering: true, ..conn(0, 50, 1e6) };
        assert!(!ecf.takes(&[recovering, conn(0, 50, 1e6)], 0, 1000, 0));
        assert!(ecf.takes(&[conn(0, 50, 1e6), conn(0, 50, 1e6)], 0, 1000, 0));
        // Two round trips later the recovery is taken to be over.
        assert!(ecf.takes(&[recovering, conn(0, 50, 1e6)], 0, 1000, 100_000_000));
    }

    #[test]
    fn equal_connections_all_take() {
        let conns = [conn(0, 50, 1e6), conn(0, 50, 1e6), conn(0, 50, 1e6)];
        let ecf = ConnChoice::EarliestDelivery { slack: 0.0 };
        assert!((0..3).all(|i| ecf.takes(&conns, i, 1000, 0)));
    }
}
