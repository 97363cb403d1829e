//! The receiving half of a session: frames from any connection back into each channel's bytes.
//!
//! Iwashima's receiver (Fig 6‑5) keeps an unbounded buffer per channel keyed by sequence number
//! and never removes what it delivered (notes §2.7). Ours holds a channel's early frames in a
//! [`ReorderBuffer`], hands bytes over in sequence order (or as they arrive, for an unordered
//! channel), and bounds memory with credit in payload bytes (protocol version 4; frames
//! before, so a larger frame raised the bound): the sender may frame only bytes below the
//! offset `limit = read + window`, where `read` counts the bytes the application has taken.
//! Bytes held plus bytes waiting to be read therefore never exceed the channel's window,
//! whatever the connections do and whatever the frames' sizes; a peer that sends beyond its
//! credit is refused ([`RecvError::Credit`]).
//!
//! Reorder delay (the thesis's application delay less TCP delay, §3.7) and reorder memory
//! (bytes held, sampled after each arrival, §3.9) are measured here, with time passed in.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::exact_sum::ExactSum;
use super::frame::Frame;
use super::reorder::ReorderBuffer;
use crate::flow::FlowId;
use crate::time::Nanos;

/// Receiver settings.
///
/// The session's window is shared among its channels in proportion to their weights. When
/// the receiving side is the bottleneck (or the path holds more than a channel's window), each
/// channel moves at most its window per credit round trip; equal windows would then give equal
/// shares whatever the weights (measured on loopback: a channel weighted 8 of 15 got 30% of the
/// session instead of 53%). Windows in proportion to weight keep the shares in that regime too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvConfig {
    /// Payload bytes held or unread over the whole session, shared by weight.
    pub window: u64,
    /// The least window a channel gets, in bytes, and the credit a channel has before the
    /// receiver has said anything (the sender's initial credit must not exceed it).
    pub min_window: u64,
}

impl Default for RecvConfig {
    /// 64 MiB for the session (what 4,096 frames of 16 KiB were before credit was counted in
    /// bytes), at least 512 KiB per channel.
    fn default() -> Self {
        Self { window: 64 << 20, min_window: 512 << 10 }
    }
}

/// A peer's frame that breaks the protocol; the session should end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// A data frame beyond the credit given: with it, the channel's bytes held and unread
    /// would pass the room the credit left.
    #[error("channel {channel}: frame {seq} sent beyond the credit: {bytes} bytes held and unread, {room} allowed")]
    Credit {
        /// The channel.
        channel: u32,
        /// The frame's number.
        seq: u64,
        /// Bytes held and unread with the frame.
        bytes: u64,
        /// Bytes the credit given allows beyond what was read.
        room: u64,
    },
    /// A data frame numbered at or after the channel's announced end.
    #[error("channel {channel}: frame {seq} after the close at {frames} frames")]
    AfterClose {
        /// The channel.
        channel: u32,
        /// The frame's number.
        seq: u64,
        /// Frames the close announced.
        frames: u64,
    },
}

/// How a channel's receiving side ended ([`Receiver::end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelEnd {
    /// The peer closed the channel and every byte before the close has been read.
    Finished,
    /// Not (yet) finished: taken as an end only when the session stops, and then an error.
    Cut(Cut),
}

/// What a channel that did not finish had received: the sentence an application gets instead
/// of a clean end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The channel.
    pub channel: u32,
    /// Bytes handed to the application, in order (ordered channels) or as they came.
    pub delivered_bytes: u64,
    /// Frames handed to the application.
    pub delivered_frames: u64,
    /// Frames that arrived ahead of a missing one and were held (lost with the cut).
    pub held_frames: u64,
    /// Data frames the peer's close announced, if the close arrived: the frames missing are
    /// then known; if not, how much more the peer sent is not.
    pub announced_frames: Option<u64>,
}

impl std::fmt::Display for Cut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "channel {} was cut off: {} bytes in {} frames arrived",
            self.channel, self.delivered_bytes, self.delivered_frames
        )?;
        if self.held_frames > 0 {
            write!(f, " (and {} more frames out of order, dropped)", self.held_frames)?;
        }
        match self.announced_frames {
            Some(n) => write!(
                f,
                "; the peer closed it after {n} frames, so {} never arrived",
                n.saturating_sub(self.delivered_frames)
            ),
            None => write!(f, "; the peer's close never arrived, so what else it sent is unknown"),
        }
    }
}

/// Per-channel counters.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RecvStats {
    /// Payload bytes handed to the application's queue.
    pub delivered_bytes: u64,
    /// Frames handed over.
    pub delivered_frames: u64,
    /// Frames that arrived twice (sent again after a connection died) and were dropped.
    pub duplicates: u64,
    /// Bytes held for reordering now.
    pub held_bytes: u64,
    /// Most bytes ever held.
    pub max_held_bytes: u64,
    /// Sum over arrivals of the bytes held after the arrival (÷ `arrivals` for the thesis's
    /// per-arrival average reorder memory, §3.9).
    pub held_bytes_sum: u128,
    /// Data frames arrived (duplicates included).
    pub arrivals: u64,
    /// Sum over delivered frames of the time each waited for earlier ones (ns).
    pub reorder_wait_ns: u128,
}

#[derive(Debug, Default)]
struct Channel {
    ordered: bool,
    /// The weight the sender gave the channel (1 until its `Open` arrives).
    weight: f64,
    /// Next frame to hand over in order (ordered), or the lowest not yet received (unordered).
    next: u64,
    /// Unordered: numbers received above `next`.
    seen: BTreeSet<u64>,
    /// Handed over, waiting for the application.
    ready: VecDeque<Bytes>,
    /// Frames the application has taken.
    read: u64,
    /// Bytes the application has taken: the offset the credit's limit counts from.
    read_bytes: u64,
    /// Bytes handed over and not yet taken (in `ready`).
    unread_bytes: u64,
    /// The limit (bytes) last told to the sender, and the acknowledgement (frames).
    told: (u64, u64),
    /// `stats.delivered_bytes` when the last credit was told.
    told_delivered: u64,
    closed_at: Option<u64>,
    /// The weight counted in the session's sum of live weights, while the channel is live
    /// (not closed, or not yet read to its close).
    counted: Option<f64>,
    stats: RecvStats,
}

/// The receiving half of a session.
#[derive(Debug)]
pub struct Receiver {
    config: RecvConfig,
    channels: BTreeMap<u32, Channel>,
    held: ReorderBuffer<(Nanos, Bytes)>,
    /// Channels whose credit should be sent.
    credit_due: BTreeSet<u32>,
    /// Channels finished and forgotten ([`Receiver::retire`]).
    retired: Retired,
    /// Retired channels owed a credit that acknowledges everything (their close included).
    retired_due: BTreeSet<u32>,
    /// Channels the peer reset, and why, for the driver to end ([`Receiver::poll_reset`]).
    resets: VecDeque<(u32, String)>,
    /// Σ weight over the live channels, kept as they change ([`Receiver::window_of`]), and
    /// its value.
    live_sum: ExactSum,
    live_weight: f64,
    /// Channels that have had bytes handed over since the driver last took them
    /// ([`Receiver::pop_readable`]).
    readable: BTreeSet<u32>,
    /// Channels that have finished since the driver last took them ([`Receiver::pop_finished`]).
    finished: BTreeSet<u32>,
    /// Channels whose acknowledgement lags what arrived ([`Receiver::flush_acks`]).
    lagging: BTreeSet<u32>,
}

/// Channel ids retired, as runs of consecutive ids of one parity (each end numbers the channels
/// it opens in steps of two), so that a session that carried a million short channels beside
/// one long one holds a few runs, not a million ids.
#[derive(Debug, Default)]
struct Retired {
    /// Per parity, the runs: first index → one past the last (an id's index is `id / 2`).
    runs: [BTreeMap<u32, u32>; 2],
}

impl Retired {
    fn contains(&self, id: u32) -> bool {
        let (runs, i) = (&self.runs[(id % 2) as usize], id / 2);
        runs.range(..=i).next_back().is_some_and(|(_, end)| i < *end)
    }

    fn insert(&mut self, id: u32) {
        if self.contains(id) {
            return;
        }
        let (runs, i) = (&mut self.runs[(id % 2) as usize], id / 2);
        let (mut start, mut end) = (i, i + 1);
        if let Some((&s, &e)) = runs.range(..i).next_back()
            && e == i
        {
            runs.remove(&s);
            start = s;
        }
        if let Some(e) = runs.remove(&end) {
            end = e;
        }
        runs.insert(start, end);
    }

    fn runs(&self) -> usize {
        self.runs[0].len() + self.runs[1].len()
    }
}

impl Receiver {
    /// A receiver with no channels.
    pub fn new(config: RecvConfig) -> Self {
        Self {
            config,
            channels: BTreeMap::new(),
            held: ReorderBuffer::new(),
            credit_due: BTreeSet::new(),
            retired: Retired::default(),
            retired_due: BTreeSet::new(),
            resets: VecDeque::new(),
            live_sum: ExactSum::default(),
            live_weight: 0.0,
            readable: BTreeSet::new(),
            finished: BTreeSet::new(),
            lagging: BTreeSet::new(),
        }
    }

    fn channel(&mut self, id: u32) -> &mut Channel {
        if !self.channels.contains_key(&id) {
            let initial = self.config.min_window;
            self.channels.insert(id, Channel { ordered: true, weight: 1.0, told: (initial, 0), ..Channel::default() });
            self.relive(id);
        }
        self.channels.get_mut(&id).expect("made above")
    }

    /// The channel's share of the session's window: `window · w / Σw` over the channels still
    /// open, and at least `min_window`.
    ///
    /// Σw is kept as channels open, finish and change weight ([`Receiver::relive`]), not summed
    /// per data frame: a tunnel carries thousands of channels. It is kept exactly
    /// ([`ExactSum`]), so it does not drift as channels come and go, and is the `f64` nearest
    /// the true sum. (Summed afresh in id order, as it once was, it was rounded once per
    /// channel: where that rounding crossed a whole frame, the share is now the exact one.)
    fn window_of(&self, id: u32) -> u64 {
        let total = self.live_weight;
        let w = self.channels.get(&id).map_or(1.0, |c| c.weight);
        let share = if total > 0.0 { self.config.window as f64 * w / total } else { 0.0 };
        (share as u64).max(self.config.min_window)
    }

    /// Counts the channel's weight in the live sum if it is live and not counted, takes it out
    /// if it is counted and no longer live, and counts its new weight if it changed.
    fn relive(&mut self, id: u32) {
        let Some(c) = self.channels.get_mut(&id) else { return };
        let now = c.closed_at.is_none_or(|f| c.read < f).then_some(c.weight);
        let was = std::mem::replace(&mut c.counted, now);
        if now != was {
            self.recount(was, now);
        }
    }

    /// Takes weight `was` out of the live sum and puts `now` in (either may be none).
    fn recount(&mut self, was: Option<f64>, now: Option<f64>) {
        if let Some(w) = was {
            self.live_sum.sub(w);
        }
        if let Some(w) = now {
            self.live_sum.add(w);
        }
        self.live_weight = self.live_sum.value();
    }

    /// Takes in a frame that concerns the receiver (data, open, close); others are ignored.
    /// A channel is known from its first frame of any kind, since its `Open` may travel on a
    /// slower connection than its first data.
    pub fn on_frame(&mut self, now: Nanos, frame: Frame) -> Result<(), RecvError> {
        let channel = frame.channel();
        if channel != super::frame::SESSION_CHANNEL && self.retired.contains(channel) {
            // A copy that was in flight when the channel finished (sent again after a
            // connection died): the sender is owed the acknowledgement it may have missed.
            if matches!(frame, Frame::Data { .. } | Frame::Close { .. } | Frame::Reset { .. }) {
                self.retired_due.insert(channel);
            }
            return Ok(());
        }
        match frame {
            Frame::Open { channel, ordered, weight } => {
                self.channel(channel).weight = weight;
                self.relive(channel);
                let ch = self.channel(channel);
                if ch.ordered && !ordered {
                    // Data that came before the Open waited for an order it does not need.
                    ch.ordered = false;
                    let mut released = Vec::new();
                    self.held.drain_flow(FlowId(u64::from(channel)), |seq, (_, payload)| released.push((seq, payload)));
                    let ch = self.channel(channel);
                    for (seq, payload) in released {
                        ch.seen.insert(seq);
                        ch.stats.held_bytes -= payload.len() as u64;
                        ch.stats.delivered_bytes += payload.len() as u64;
                        ch.stats.delivered_frames += 1;
                        ch.unread_bytes += payload.len() as u64;
                        ch.ready.push_back(payload);
                    }
                    while ch.seen.remove(&ch.next) {
                        ch.next += 1;
                    }
                    let (some, lags) = (!ch.ready.is_empty(), ch.next > ch.told.1);
                    if some {
                        self.readable.insert(channel);
                    }
                    if lags {
                        self.lagging.insert(channel);
                    }
                }
                Ok(())
            }
            Frame::Close { channel, frames } => {
                let ch = self.channel(channel);
                ch.closed_at = Some(frames);
                if ch.next >= frames {
                    self.credit_due.insert(channel);
                }
                self.relive(channel);
                self.note_finished(channel);
                Ok(())
            }
            Frame::SetWeight { channel, weight } => {
                self.channel(channel).weight = weight;
                self.relive(channel);
                Ok(())
            }
            Frame::Data { channel, seq, payload } => self.on_data(now, channel, seq, payload),
            Frame::Reset { channel, reason } => {
                // What it carried is dropped, as TCP's RST drops it: the application gets the
                // reason instead, and the peer an acknowledgement of everything.
                self.abandon(channel);
                self.retired_due.insert(channel);
                self.resets.push_back((channel, reason));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn on_data(&mut self, now: Nanos, channel: u32, seq: u64, payload: Bytes) -> Result<(), RecvError> {
        let window = self.window_of(channel);
        // A frame held early arrives again when the connection that carried it died before the
        // acknowledgement came back (held frames are not acknowledged): a copy, like one below
        // `next`, not more bytes held.
        let held_already = self.held.holds(FlowId(u64::from(channel)), seq);
        let ch = self.channel(channel);
        if let Some(frames) = ch.closed_at.filter(|f| seq >= *f) {
            return Err(RecvError::AfterClose { channel, seq, frames });
        }
        ch.stats.arrivals += 1;
        if seq < ch.next || ch.seen.contains(&seq) || held_already {
            ch.stats.duplicates += 1;
            ch.stats.held_bytes_sum += u128::from(ch.stats.held_bytes);
            self.credit_due.insert(channel);
            return Ok(());
        }
        // What the sender was told is the limit; a window that has since shrunk (more channels,
        // new weights) cannot take back credit already given. Every byte held or unread lies
        // between what was read and the end of a frame the credit allowed, so a frame that
        // would make them more than that was sent beyond it (the frame carries no offset: the
        // memory it would take is what the credit bounds).
        let room = ch.told.0.saturating_sub(ch.read_bytes);
        let bytes = ch.stats.held_bytes + ch.unread_bytes + payload.len() as u64;
        if bytes > room {
            ch.stats.arrivals -= 1;
            return Err(RecvError::Credit { channel, seq, bytes, room });
        }
        if ch.ordered {
            ch.stats.held_bytes += payload.len() as u64;
            let mut out = Vec::new();
            self.held.push(FlowId(u64::from(channel)), seq, (now, payload), |_, unit| out.push(unit));
            let ch = self.channels.get_mut(&channel).expect("made above");
            for (arrived, p) in out {
                ch.next += 1;
                ch.stats.reorder_wait_ns += u128::from(now.0.saturating_sub(arrived.0));
                ch.stats.held_bytes -= p.len() as u64;
                ch.stats.delivered_bytes += p.len() as u64;
                ch.stats.delivered_frames += 1;
                ch.unread_bytes += p.len() as u64;
                ch.ready.push_back(p);
            }
        } else {
            ch.seen.insert(seq);
            while ch.seen.remove(&ch.next) {
                ch.next += 1;
            }
            ch.stats.delivered_bytes += payload.len() as u64;
            ch.stats.delivered_frames += 1;
            ch.unread_bytes += payload.len() as u64;
            ch.ready.push_back(payload);
        }
        let ch = self.channels.get_mut(&channel).expect("made above");
        if !ch.ready.is_empty() {
            self.readable.insert(channel);
        }
        if ch.next > ch.told.1 {
            self.lagging.insert(channel);
        }
        ch.stats.max_held_bytes = ch.stats.max_held_bytes.max(ch.stats.held_bytes);
        ch.stats.held_bytes_sum += u128::from(ch.stats.held_bytes);
        // Acknowledge once an eighth of the window has arrived since the last credit, and when
        // the channel's last frame is in.
        // Also when the window has opened since the last credit: a channel's share grows once
        // its Open (with its weight) arrives, before the application reads anything.
        if ch.stats.delivered_bytes >= ch.told_delivered + (window / 8).max(1)
            || ch.closed_at.is_some_and(|f| ch.next >= f)
            || ch.read_bytes + window >= ch.told.0 + (window / 8).max(1)
        {
            self.credit_due.insert(channel);
        }
        Ok(())
    }

    /// The application takes the channel's next bytes in order (or arrival order, unordered).
    pub fn read(&mut self, channel: u32) -> Option<Bytes> {
        let p = self.channels.get_mut(&channel)?.ready.pop_front()?;
        let window = self.window_of(channel);
        let ch = self.channels.get_mut(&channel).expect("popped above");
        ch.read += 1;
        ch.read_bytes += p.len() as u64;
        ch.unread_bytes -= p.len() as u64;
        // Tell the sender of new room once an eighth of the window has opened.
        if ch.read_bytes + window >= ch.told.0 + (window / 8).max(1) {
            self.credit_due.insert(channel);
        }
        // Read to its close, the channel no longer counts in the shares of the window.
        if ch.closed_at.is_some_and(|f| ch.read >= f) {
            self.relive(channel);
            self.note_finished(channel);
        }
        Some(p)
    }

    /// A channel that has had bytes handed over since it was last returned here, for the
    /// driver to [read](Receiver::read) as far as its application takes them: a driver need
    /// not ask every channel. (One whose application has no room left is the driver's to come
    /// back to; a channel is returned again only when more bytes arrive.)
    pub fn pop_readable(&mut self) -> Option<u32> {
        self.readable.pop_first()
    }

    /// A channel that has [finished](Receiver::is_finished) since it was last returned here:
    /// every byte before the peer's close has been read.
    pub fn pop_finished(&mut self) -> Option<u32> {
        self.finished.pop_first()
    }

    fn note_finished(&mut self, channel: u32) {
        if self.is_finished(channel) {
            self.finished.insert(channel);
        }
    }

    /// Whether the channel was closed and everything it carried has been read.
    pub fn is_finished(&self, channel: u32) -> bool {
        self.channels.get(&channel).is_some_and(|c| c.closed_at.is_some_and(|f| c.read >= f) && c.ready.is_empty())
    }

    /// How the channel stands as an end: [`ChannelEnd::Finished`] only when
    /// [`Receiver::is_finished`] holds; otherwise what a cut now would have lost. A driver that
    /// stops (the session ended, the connections are gone) reports each channel's end from
    /// this, so that no channel can end cleanly with a gap.
    pub fn end(&self, channel: u32) -> ChannelEnd {
        if self.is_finished(channel) {
            return ChannelEnd::Finished;
        }
        let c = self.channels.get(&channel);
        ChannelEnd::Cut(Cut {
            channel,
            delivered_bytes: c.map_or(0, |c| c.stats.delivered_bytes),
            delivered_frames: c.map_or(0, |c| c.stats.delivered_frames),
            held_frames: self.held.held_of(FlowId(u64::from(channel))) as u64,
            announced_frames: c.and_then(|c| c.closed_at),
        })
    }

    /// A connection died: credits sent on it may have died too, and a sender waiting on one
    /// would wait for ever (the receiver thinks it has told it). Every channel's credit is
    /// sent again.
    pub fn connection_lost(&mut self) {
        self.credit_due.extend(self.channels.keys().copied());
    }

    /// Forgets a [finished](Receiver::is_finished) channel, so that a session that carries many
    /// short channels holds only the live ones (each data frame sums the live channels'
    /// weights). Its id is remembered as retired, in runs: a frame of it that comes later (a
    /// copy sent again after a connection died) is dropped, not taken for a new channel, and
    /// answered with a credit acknowledging everything, the close included, so the sender
    /// can finish too. One such credit is sent at once, in case the last one died with its
    /// connection. Returns `false`, and forgets nothing, if the channel has not finished.
    pub fn retire(&mut self, channel: u32) -> bool {
        if !self.is_finished(channel) {
            return false;
        }
        self.remove(channel);
        self.retired_due.insert(channel);
        true
    }

    /// Forgets a channel and retires its id.
    fn remove(&mut self, channel: u32) {
        self.held.forget(FlowId(u64::from(channel)));
        if let Some(ch) = self.channels.remove(&channel) {
            self.recount(ch.counted, None);
        }
        self.credit_due.remove(&channel);
        self.readable.remove(&channel);
        self.finished.remove(&channel);
        self.lagging.remove(&channel);
        self.retired.insert(channel);
    }

    /// Forgets a channel whatever its state (this end reset it, or the peer did): what it holds
    /// is dropped and its id retired, so that what the peer still sends on it is dropped and
    /// acknowledged.
    pub fn abandon(&mut self, channel: u32) {
        self.remove(channel);
    }

    /// The next channel the peer reset, and its reason: the channel is already forgotten here
    /// ([`Receiver::abandon`]); the driver ends it for the application with the reason.
    pub fn poll_reset(&mut self) -> Option<(u32, String)> {
        self.resets.pop_front()
    }

    /// Whether the channel was [retired](Receiver::retire).
    pub fn is_retired(&self, channel: u32) -> bool {
        self.retired.contains(channel)
    }

    /// Runs of retired ids held (the memory retirement keeps: two numbers a run).
    pub fn retired_runs(&self) -> usize {
        self.retired.runs()
    }

    /// Channels known, in id order.
    pub fn channels(&self) -> impl Iterator<Item = u32> + '_ {
        self.channels.keys().copied()
    }

    /// The payload bytes of a channel this end holds: early frames waiting for order and
    /// frames waiting for the application. Never more than the credit it gave: the memory
    /// bound.
    pub fn buffered(&self, channel: u32) -> Option<u64> {
        self.channels.get(&channel).map(|c| c.stats.held_bytes + c.unread_bytes)
    }

    /// A channel's counters.
    pub fn stats(&self, channel: u32) -> Option<RecvStats> {
        self.channels.get(&channel).map(|c| c.stats)
    }

    /// Marks every channel whose acknowledgement lags what arrived as due a credit. Credits are
    /// otherwise sent every eighth of a window; a driver calls this on a timer (an RTT or so) so
    /// that the sender can free the last frames of a burst.
    pub fn flush_acks(&mut self) {
        self.credit_due.extend(self.lagging.iter().copied());
    }

    /// The next credit frame to send (on any connection).
    pub fn poll_credit(&mut self) -> Option<Frame> {
        if let Some(channel) = self.retired_due.pop_first() {
            // Everything arrived: an acknowledgement past any frame number.
            return Some(Frame::Credit { channel, ack: u64::MAX, limit: 0 });
        }
        let channel = self.credit_due.pop_first()?;
        let window = self.window_of(channel);
        let ch = self.channels.get_mut(&channel)?;
        let limit = ch.told.0.max(ch.read_bytes + window);
        ch.told = (limit, ch.next);
        ch.told_delivered = ch.stats.delivered_bytes;
        self.lagging.remove(&channel);
        // Every frame in and the close too: the close takes the next number, so the sender
        // knows it has arrived (see `Sender::is_idle`).
        let ack = ch.next + u64::from(ch.closed_at.is_some_and(|f| ch.next >= f));
        Some(Frame::Credit { channel, ack, limit })
    }

    /// Panics unless the kept sums and sets agree with the channels recomputed from scratch.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut total = ExactSum::default();
        for (id, c) in &self.channels {
            let counted = c.closed_at.is_none_or(|f| c.read < f).then_some(c.weight);
            assert_eq!(c.counted, counted, "channel {id} counted in the live weight");
            if let Some(w) = counted {
                total.add(w);
            }
            assert_eq!(self.lagging.contains(id), c.next > c.told.1, "channel {id} lagging");
            let held: u64 = self.held.units_of(FlowId(u64::from(*id))).map(|(_, p)| p.len() as u64).sum();
            assert_eq!(c.stats.held_bytes, held, "channel {id}: bytes held, counted against the reorder buffer");
            if self.is_finished(*id) {
                assert!(c.counted.is_none());
            }
        }
        assert_eq!(self.live_sum, total, "the live weight kept against summed afresh");
        assert_eq!(self.live_weight, total.value());
        for set in [&self.readable, &self.finished, &self.lagging] {
            assert!(set.iter().all(|id| self.channels.contains_key(id)), "only channels held");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credit_of(rx: &mut Receiver) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        while let Some(Frame::Credit { channel, limit, .. }) = rx.poll_credit() {
            out.push((channel, limit));
        }
        out.sort_unstable();
        out
    }

    #[test]
    fn the_session_window_is_shared_by_weight_with_a_floor() {
        let mut rx = Receiver::new(RecvConfig { window: 1000, min_window: 10 });
        for (channel, weight) in [(1, 1.0), (3, 3.0), (5, 0.001)] {
            rx.on_frame(Nanos(0), Frame::Open { channel, weight, ordered: true }).unwrap();
        }
        rx.flush_acks();
        for c in [1, 3, 5] {
            rx.on_frame(Nanos(1), Frame::Data { channel: c, seq: 0, payload: Bytes::from_static(b"x") }).unwrap();
        }
        // Σw ≈ 4: channel 1 gets a quarter, channel 3 three quarters, channel 5 the floor.
        assert_eq!(credit_of(&mut rx), [(1, 249), (3, 749), (5, 10)]);
    }

    #[test]
    fn retired_ids_are_kept_as_runs_whatever_the_order() {
        let mut r = Retired::default();
        // Odd ids (a client's) retired out of order, and one long-lived channel (11) among them.
        for id in [1, 5, 3, 9, 13, 7, 15] {
            r.insert(id);
        }
        assert!([1, 3, 5, 7, 9, 13, 15].iter().all(|&id| r.contains(id)));
        assert!(!r.contains(11) && !r.contains(17) && !r.contains(2), "only what was retired");
        assert_eq!(r.runs(), 2, "1..=9 and 13..=15");
        r.insert(11);
        assert_eq!(r.runs(), 1);
        r.insert(4);
        assert!(r.contains(4) && !r.contains(6) && !r.contains(5 + 1));
        assert_eq!(r.runs(), 2);
    }

    #[test]
    fn a_retired_channel_is_not_reborn_by_a_late_copy_and_its_sender_is_answered() {
        let mut rx = Receiver::new(RecvConfig { window: 100, min_window: 4 });
        let data = |seq, b: &'static [u8]| Frame::Data { channel: 3, seq, payload: Bytes::from_static(b) };
        rx.on_frame(Nanos(0), Frame::Open { channel: 3, weight: 1.0, ordered: true }).unwrap();
        rx.on_frame(Nanos(0), data(0, b"once")).unwrap();
        assert!(!rx.retire(3), "not finished: nothing forgotten");
        rx.on_frame(Nanos(0), Frame::Close { channel: 3, frames: 1 }).unwrap();
        assert!(!rx.retire(3), "finished only once read");
        assert_eq!(rx.read(3).as_deref(), Some(&b"once"[..]));
        while rx.poll_credit().is_some() {}
        assert!(rx.retire(3));
        assert_eq!(rx.poll_credit(), Some(Frame::Credit { channel: 3, ack: u64::MAX, limit: 0 }));
        assert_eq!(rx.poll_credit(), None);
        // The first frame again, and the close, sent again after a connection died.
        rx.on_frame(Nanos(1), data(0, b"once")).unwrap();
        rx.on_frame(Nanos(1), Frame::Close { channel: 3, frames: 1 }).unwrap();
        assert_eq!(rx.read(3), None, "not delivered twice");
        assert_eq!(rx.channels().count(), 0, "not taken for a new channel");
        assert_eq!(rx.poll_credit(), Some(Frame::Credit { channel: 3, ack: u64::MAX, limit: 0 }));
        assert!(rx.is_retired(3) && !rx.is_retired(5));
    }

    #[test]
    fn frames_beyond_the_credit_given_are_refused() {
        let mut rx = Receiver::new(RecvConfig { window: 100, min_window: 4 });
        let data = |seq, b: &'static [u8]| Frame::Data { channel: 1, seq, payload: Bytes::from_static(b) };
        // Credit counts bytes: one frame larger than the initial credit is refused whole.
        assert_eq!(
            rx.on_frame(Nanos(0), data(0, b"abcde")),
            Err(RecvError::Credit { channel: 1, seq: 0, bytes: 5, room: 4 })
        );
        // Frames out of order, held: their bytes count as much as bytes waiting to be read.
        rx.on_frame(Nanos(0), data(1, b"b")).unwrap();
        rx.on_frame(Nanos(0), data(2, b"cd")).unwrap();
        assert_eq!(
            rx.on_frame(Nanos(0), data(0, b"xy")),
            Err(RecvError::Credit { channel: 1, seq: 0, bytes: 5, room: 4 })
        );
        rx.on_frame(Nanos(0), data(0, b"a")).unwrap();
        assert_eq!(rx.buffered(1), Some(4));
        assert_eq!(
            rx.on_frame(Nanos(0), data(3, b"e")),
            Err(RecvError::Credit { channel: 1, seq: 3, bytes: 5, room: 4 })
        );
        // The credit told lets the next frame in.
        assert_eq!(credit_of(&mut rx), [(1, 100)]);
        rx.on_frame(Nanos(0), data(3, b"e")).unwrap();
        assert_eq!(rx.read(1).as_deref(), Some(&b"a"[..]));
        assert_eq!(rx.buffered(1), Some(4), "what was read no longer counts");
    }

    /// A frame held behind a gap can arrive again (sent again after the connection that carried
    /// it died before its acknowledgement came back): the copy is a duplicate, not more bytes
    /// held. Seen as `every_byte_arrives_once_and_in_order` failing with "channel 0 holds 5800
    /// bytes" (over a window of 8 frames of 700).
    #[test]
    fn a_copy_of_a_held_frame_is_a_duplicate_not_more_bytes_held() {
        let mut rx = Receiver::new(RecvConfig { window: 100, min_window: 12 });
        let data = |seq, b: &'static [u8]| Frame::Data { channel: 1, seq, payload: Bytes::from_static(b) };
        rx.on_frame(Nanos(0), data(1, b"second")).unwrap();
        rx.on_frame(Nanos(1), data(1, b"second")).unwrap();
        let s = rx.stats(1).unwrap();
        assert_eq!((s.held_bytes, s.max_held_bytes, s.duplicates, s.arrivals), (6, 6, 1, 2));
        rx.on_frame(Nanos(2), data(0, b"first")).unwrap();
        let s = rx.stats(1).unwrap();
        assert_eq!((s.held_bytes, s.delivered_frames, s.delivered_bytes), (0, 2, 11));
        assert_eq!(rx.read(1).as_deref(), Some(&b"first"[..]));
        assert_eq!(rx.read(1).as_deref(), Some(&b"second"[..]));
        assert_eq!(rx.read(1), None);
    }
}
