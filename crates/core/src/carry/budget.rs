//! A session-wide byte budget for what its channels hold: who may read more from its local
//! socket, and how much.
//!
//! Each channel's buffers are bounded on their own (`SendConfig::channel_buffer`, the credit
//! window), but a session carrying thousands of channels (a tunnel's clients) multiplied those
//! bounds by thousands: through a tunnel, 10,000 clients each fetching 100 kB held 70–89 KiB a
//! channel at the end that read the answers. The budget bounds the sum. A driver charges a
//! channel the bytes it reads from the channel's socket ([`Budget::take`], granted before the
//! read), and gives them back once the peer has acknowledged them ([`Budget::give_back`]); a
//! channel that finds no room waits ([`Budget::wait`]) and is granted room, in turn, as room
//! comes back ([`Budget::poll_grant`]). Nothing is refused or dropped for want of room: the
//! reader waits, and its socket's sender with it.
//!
//! # Who gets room
//!
//! The dynamic threshold of Choudhury and Hahne ("Dynamic Queue Length Thresholds for
//! Shared-Memory Packet Switches", IEEE/ACM Trans. Networking 6(2), 1998, §II): a queue may grow
//! only while its length is below `T = α·(B − Q)`, with `B` the buffer shared and `Q` what all
//! queues hold. We take α = 1. Their queues grow a cell at a time; ours by reads, so a grant
//! `g` to a channel holding `q` keeps it within the threshold the grant itself leaves,
//! `q + g ≤ B − Q − g`, i.e. `g ≤ (B − Q − q)/2` (a grant of all that was free would let one
//! channel take the rest at once). So:
//!
//! - A channel alone holds at most `B/2`; `S` channels that all want more settle at
//!   `B/(1+S)` each, and `B/(1+S)` stays free: a channel that holds nothing always finds room
//!   (half of what is free, while that is a least grant or more: `B/(1+S) ≥ 2·least`). One
//!   greedy channel, or a few,
//!   cannot starve the others of the budget, however long they hold theirs (a peer that stops
//!   reading), and the sum never passes `B`.
//! - Room that comes back goes to the waiting channel that holds least (then to the one that
//!   waited longest): it has the most room under the threshold, so if it has none, no waiting
//!   channel has. A fixed share per channel (`B/n`) was not chosen: it needs the count of
//!   channels that want room, which changes with every client, and leaves room idle while a
//!   few channels are busy.
//!
//! A grant is at least a least grant (4 KiB, or half the budget if smaller), so that a
//! reader waits for room worth a read rather than making a system call per few bytes, and at
//! most the driver's read size.

use std::collections::{BTreeMap, BTreeSet};

/// The smallest grant: a read's worth.
pub const LEAST_GRANT: u64 = 4 << 10;

/// A session's byte budget and the channels' shares of it.
#[derive(Clone, Debug)]
pub struct Budget {
    bytes: u64,
    least: u64,
    most_grant: u64,
    /// Bytes each channel holds (only channels holding some).
    held: BTreeMap<u32, u64>,
    total: u64,
    /// The most `total` has been.
    peak: u64,
    /// Channels waiting for room: (bytes held when it last changed, arrival, channel).
    waiting: BTreeSet<(u64, u64, u32)>,
    /// Each waiting channel's key in `waiting`.
    keys: BTreeMap<u32, (u64, u64)>,
    arrivals: u64,
    waits: u64,
}

impl Budget {
    /// A budget of `bytes` (at least 2), granting at most `most_grant` bytes at a time (at
    /// least the least grant).
    pub fn new(bytes: u64, most_grant: u64) -> Self {
        let bytes = bytes.max(2);
        let least = LEAST_GRANT.min(bytes / 2);
        Self {
            bytes,
            least,
            most_grant: most_grant.max(least),
            held: BTreeMap::new(),
            total: 0,
            peak: 0,
            waiting: BTreeSet::new(),
            keys: BTreeMap::new(),
            arrivals: 0,
            waits: 0,
        }
    }

    /// The budget, in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes held now, by every channel.
    pub fn held(&self) -> u64 {
        self.total
    }

    /// Bytes `channel` holds now.
    pub fn held_by(&self, channel: u32) -> u64 {
        self.held.get(&channel).copied().unwrap_or(0)
    }

    /// The most bytes held at once so far.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// Times a channel found no room and waited.
    pub fn waits(&self) -> u64 {
        self.waits
    }

    /// Channels waiting for room now.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Bytes `channel` may be granted now: up to the dynamic threshold (see the module's
    /// doc), at most the most grant; 0 if that is less than the least grant.
    pub fn room(&self, channel: u32) -> u64 {
        let free = self.bytes - self.total;
        // α = 1: the threshold is what is free once the grant is made.
        let room = (free.saturating_sub(self.held_by(channel)) / 2).min(self.most_grant);
        if room < self.least { 0 } else { room }
    }

    /// Grants `channel` up to `want` bytes if it has room, and charges them; 0 if it has none
    /// (it should [wait](Budget::wait)).
    pub fn take(&mut self, channel: u32, want: u64) -> u64 {
        let n = self.room(channel).min(want);
        self.charge(channel, n);
        n
    }

    fn charge(&mut self, channel: u32, n: u64) {
        if n == 0 {
            return;
        }
        *self.held.entry(channel).or_default() += n;
        self.total += n;
        self.peak = self.peak.max(self.total);
        debug_assert!(self.total <= self.bytes);
    }

    /// `channel` waits for room: [`Budget::poll_grant`] grants it some once there is. One wait
    /// per channel at a time; waiting again while waiting changes nothing.
    pub fn wait(&mut self, channel: u32) {
        if self.keys.contains_key(&channel) {
            return;
        }
        let key = (self.held_by(channel), self.arrivals);
        self.arrivals += 1;
        self.waits += 1;
        self.keys.insert(channel, key);
        self.waiting.insert((key.0, key.1, channel));
    }

    /// Gives `n` of `channel`'s bytes back (the peer has them, or the reader read fewer than
    /// it was granted). Never more than it holds.
    pub fn give_back(&mut self, channel: u32, n: u64) {
        let Some(held) = self.held.get_mut(&channel) else { return };
        let n = n.min(*held);
        *held -= n;
        self.total -= n;
        if *held == 0 {
            self.held.remove(&channel);
        }
        // A waiting channel's place follows what it holds.
        if let Some(key) = self.keys.get_mut(&channel) {
            self.waiting.remove(&(key.0, key.1, channel));
            key.0 = self.held.get(&channel).copied().unwrap_or(0);
            self.waiting.insert((key.0, key.1, channel));
        }
    }

    /// The next waiting channel that now has room, and the bytes granted to it (charged): the
    /// one holding least, then the one that waited longest. `None` while none has room.
    pub fn poll_grant(&mut self) -> Option<(u32, u64)> {
        let &(held, arrival, channel) = self.waiting.first()?;
        let n = self.room(channel);
        if n == 0 {
            return None;
        }
        self.waiting.remove(&(held, arrival, channel));
        self.keys.remove(&channel);
        self.charge(channel, n);
        Some((channel, n))
    }

    /// Forgets `channel` (it ended, or was reset): what it held comes back, and it no longer
    /// waits. Returns the bytes it held.
    pub fn forget(&mut self, channel: u32) -> u64 {
        if let Some(key) = self.keys.remove(&channel) {
            self.waiting.remove(&(key.0, key.1, channel));
        }
        let held = self.held.remove(&channel).unwrap_or(0);
        self.total -= held;
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const B: u64 = 1 << 20;
    const READ: u64 = 64 << 10;

    /// Takes for `channel` until it has no room; what it got in all.
    fn greedy(b: &mut Budget, channel: u32) -> u64 {
        std::iter::from_fn(|| Some(b.take(channel, READ)).filter(|&n| n > 0)).sum()
    }

    #[test]
    fn a_channel_alone_holds_at_most_half_and_others_still_find_room() {
        let mut b = Budget::new(B, READ);
        assert_eq!(greedy(&mut b, 1), B / 2);
        assert_eq!(b.room(1), 0, "past the threshold");
        // The one that holds nothing has the other half's half.
        assert_eq!(greedy(&mut b, 3), B / 4);
        assert!(b.room(5) >= LEAST_GRANT, "a third still finds room");
        assert!(b.held() <= B);
    }

    #[test]
    fn many_greedy_channels_settle_at_their_share_and_leave_it_free() {
        let mut b = Budget::new(B, READ);
        let s = 15;
        // Rounds until none can take: each ends within a least grant of B/(1+S).
        while (1..=s).map(|c| b.take(c, LEAST_GRANT)).sum::<u64>() > 0 {}
        let share = B / (1 + u64::from(s));
        for c in 1..=s {
            assert!(b.held_by(c).abs_diff(share) <= LEAST_GRANT, "channel {c}: {} against {share}", b.held_by(c));
        }
        assert!(B - b.held() >= share - LEAST_GRANT, "free: {}", B - b.held());
        assert!(b.room(99) >= LEAST_GRANT, "a newcomer has room");
    }

    #[test]
    fn room_that_comes_back_goes_to_the_waiter_holding_least_then_the_oldest() {
        let mut b = Budget::new(256 << 10, READ);
        assert_eq!(greedy(&mut b, 1), 128 << 10);
        assert_eq!(greedy(&mut b, 3), 64 << 10);
        assert_eq!(greedy(&mut b, 5), 32 << 10);
        assert_eq!(greedy(&mut b, 7), 16 << 10);
        // 16 KiB free: each of these holds too much to take any of it.
        for c in [1, 3, 5, 7] {
            assert_eq!(b.room(c), 0, "channel {c}");
            b.wait(c);
        }
        assert_eq!(b.poll_grant(), None, "no room yet");
        // Half of 1's bytes are acknowledged: 80 KiB free. 7 holds least, then 5; 1 and 3 hold
        // too much for what is left.
        b.give_back(1, 64 << 10);
        assert_eq!(b.poll_grant(), Some((7, 32 << 10)));
        assert_eq!(b.poll_grant(), Some((5, 8 << 10)));
        assert_eq!(b.poll_grant(), None);
        // 3 and 1 both hold nothing now: 1 waited first.
        b.give_back(3, 64 << 10);
        b.give_back(1, 64 << 10);
        assert_eq!(b.poll_grant(), Some((1, 64 << 10)));
        assert_eq!(b.poll_grant(), Some((3, 52 << 10)));
        assert_eq!((b.poll_grant(), b.waiting(), b.waits()), (None, 0, 4));
        assert!(b.held() <= 256 << 10);
    }

    #[test]
    fn a_forgotten_channel_gives_back_all_it_held_and_no_longer_waits() {
        let mut b = Budget::new(B, READ);
        let got = greedy(&mut b, 1);
        b.wait(1);
        assert_eq!(b.forget(1), got);
        assert_eq!((b.held(), b.waiting()), (0, 0));
        assert_eq!(b.poll_grant(), None);
        // Giving back more than held, or for a channel holding nothing, changes nothing.
        b.take(3, 10_000);
        b.give_back(3, 1 << 30);
        b.give_back(5, 7);
        assert_eq!(b.held(), 0);
        assert_eq!(b.peak(), got);
    }

    #[test]
    fn a_budget_below_two_least_grants_grants_half_of_it() {
        let mut b = Budget::new(1000, READ);
        assert_eq!(b.take(1, READ), 500);
        assert_eq!(b.take(3, READ), 0, "a quarter is below the least grant");
    }

    proptest! {
        /// Whatever is taken, waited for, given back and forgotten, the budget is never passed,
        /// what is held adds up, and a waiter is granted only room under its threshold.
        #[test]
        fn the_budget_is_never_passed(ops in proptest::collection::vec((0u8..5, 1u32..8, 1u64..100_000), 1..300)) {
            let mut b = Budget::new(300_000, READ);
            for (op, channel, n) in ops {
                match op {
                    0 => { b.take(channel, n); }
                    1 => b.wait(channel),
                    2 => b.give_back(channel, n),
                    3 => { b.forget(channel); }
                    _ => {
                        while let Some((c, g)) = b.poll_grant() {
                            prop_assert!(g >= 1 && b.held_by(c) <= b.bytes() - b.held(), "channel {c} over its threshold");
                        }
                    }
                }
                prop_assert!(b.held() <= b.bytes());
                prop_assert_eq!(b.held(), (1..8).map(|c| b.held_by(c)).sum::<u64>());
            }
        }
    }
}
