//! The sending half of a session: channels' bytes into frames, frames onto connections.
//!
//! Sans-IO in the manner of quinn-proto: the driver writes the application's bytes in with
//! [`Sender::write`], asks [`Sender::poll_transmit`] for the next frame whenever a connection has
//! room, and reports what it learns ([`Sender::on_credit`], [`Sender::connection_lost`],
//! [`Sender::set_view`]). Nothing here touches a socket or reads a clock.
//!
//! - **Backpressure.** Each channel accepts at most [`SendConfig::channel_buffer`] bytes that
//!   have not yet been framed; `write` takes what fits and says how much. The receiver's credit
//!   (a limit in payload bytes per channel, from protocol version 4; frame numbers before) bounds
//!   what is framed beyond that, so a channel's memory on both sides is bounded by configuration
//!   in bytes whatever the frame size (the thesis has no flow control at all, notes §2.8 and
//!   §3.8). A frame is cut to the credit left, so frames may grow on a fast path without
//!   raising the bound.
//! - **Nothing lost with a connection.** Every data frame is kept until the receiver acknowledges
//!   it (cumulatively, in [`Frame::Credit`]). When a connection dies, the frames sent on it and not
//!   acknowledged are sent again, first, on the connections left; the receiver drops duplicates
//!   by sequence number. A channel's `Close` is acknowledged too (it takes the number after the
//!   last data frame, as TCP's FIN takes a sequence number), so [`Sender::is_idle`] means the
//!   peer has every byte *and* every end: a driver may stop once it holds, and not before. The
//!   channels' `Open` and `SetWeight` frames, which are not acknowledged, are announced again
//!   when a connection dies, since they may have died with it.
//! - **Schedulers** ([`Scheme`]): striping (one [`Wfq`] over all channels, the connection chosen by
//!   [`ConnChoice`]), pinning (a [`Wfq`] per connection over the channels [`Pinning`] put there),
//!   and the per-channel baseline (channel k on connection k mod m). The single-connection baseline
//!   is striping over a session of one connection.
//! - **Opening under credit.** A channel opens only with the peer's leave ([`Frame::OpenCredit`],
//!   [`Sender::on_open_credit`]): the peer bounds how many of this end's channels may be
//!   opening there at once ([`OpenWindow`](super::OpenWindow)), and [`Sender::open`] refuses
//!   past it ([`SendError::NoOpenCredit`]), so that the driver makes the opener wait.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::choose::{ConnChoice, ConnView};
use super::frame::Frame;
use super::pin::Pinning;
use super::recv::RecvConfig;
use super::wfq::Wfq;
use crate::time::Nanos;

/// How channels are spread over connections.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scheme {
    /// Any channel's frame on any connection (Iwashima §5.4.1).
    Stripe(ConnChoice),
    /// Each channel on one connection (§5.4.2), re-pinned with this hysteresis (see
    /// [`Pinning::hysteresis`]).
    Pin {
        /// Model-error improvement a full re-pinning must bring.
        hysteresis: f64,
    },
    /// Channel k on connection k mod m: one connection per channel when m ≥ n (the thesis's
    /// "non-invasive" baseline, §6.1).
    PerChannel,
}

/// Sender settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SendConfig {
    /// Largest data payload per frame.
    pub max_frame: usize,
    /// Bytes a channel accepts from the application before they are framed.
    pub channel_buffer: usize,
    /// Payload bytes a channel may send before the receiver's first credit arrives (at most
    /// the receiver's [`RecvConfig::min_window`]).
    pub initial_credit: u64,
    /// The scheduler.
    pub scheme: Scheme,
    /// Pinning, when re-balanced ([`Sender::rebalance`]): also move channels by the service
    /// they got, so that over time each gets its weight's share, which one fixed assignment
    /// can only approach (see [`Sender::rebalance`]). `false`: by measured rates alone. On the
    /// emulator (15 channels weighted 0.8^i, 60 s runs) RMS_perc was 2.0% by service against
    /// 4.1% by rates at m = 2, and 2.3% against 11.7% at m = 5, with the same aggregate within
    /// the runs' noise.
    pub pin_by_service: bool,
}

impl Default for SendConfig {
    /// 16 KiB frames, 1 MiB per channel, the receiver's default least window as initial
    /// credit, least-queued striping, pinning re-balanced by service.
    fn default() -> Self {
        Self {
            max_frame: 16 << 10,
            channel_buffer: 1 << 20,
            initial_credit: RecvConfig::default().min_window,
            scheme: Scheme::Stripe(ConnChoice::LeastQueued),
            pin_by_service: true,
        }
    }
}

/// Per-channel counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Payload bytes framed and sent (first sends).
    pub sent_bytes: u64,
    /// Data frames sent (first sends).
    pub sent_frames: u64,
    /// Data frames sent again after their connection died.
    pub resent_frames: u64,
    /// Data frames sent a second time on another connection because the channel's window was
    /// held up waiting for them (see [`Sender::poll_transmit`]).
    pub rescued_frames: u64,
    /// Bytes waiting to be framed.
    pub queued_bytes: u64,
    /// Frames sent and not yet acknowledged (held for resending).
    pub unacked_frames: u64,
    /// Frames another channel sent while this one had no bytes waiting: turns it could not use
    /// because the application did not keep up.
    pub idle_turns: u64,
    /// Frames another channel sent while this one had bytes but no credit: turns it could not
    /// use because the receiver's window was used up.
    pub blocked_turns: u64,
}

#[derive(Debug)]
struct Channel {
    weight: f64,
    queue: VecDeque<Bytes>,
    queued: usize,
    next_seq: u64,
    /// The receiver's credit: payload bytes below this offset may be framed (the offset being
    /// `stats.sent_bytes`).
    limit: u64,
    acked: u64,
    /// Payload bytes of the frames in `unacked`.
    unacked_bytes: u64,
    /// Sent and not acknowledged: sequence number → (payload, connection it went on).
    unacked: BTreeMap<u64, (Bytes, usize)>,
    /// Whether the receiver restores order (announced in `Open`).
    ordered: bool,
    /// This end opened the channel (and so announces it), rather than adopting the peer's.
    opened_here: bool,
    /// The application has closed the channel; a `Close` follows its last byte.
    closing: bool,
    /// The connection the `Close` went on, once sent.
    close_sent: Option<usize>,
    /// The receiver has acknowledged the `Close` (or the `Reset`): it has every frame and knows
    /// there are no more.
    close_acked: bool,
    /// The channel was reset from this end, and why: a `Reset` goes instead of a `Close`.
    reset: Option<String>,
    /// Frames below this number have been rescued (sent a second time) already.
    rescued_below: u64,
    /// `stats.sent_bytes` at the last re-balance.
    sent_at_rebalance: u64,
    /// Bytes the channel is owed: its weighted share of what the backlogged channels sent,
    /// less what it sent, summed over re-balances while it had bytes waiting.
    owed: f64,
    /// The scheduler group holding the channel ([`STRIPED`], or a pinned connection's slot).
    group: Option<usize>,
    /// Where the sender's indexes hold the channel (kept by [`Sender::refresh`]).
    at: Indexed,
    stats: ChannelStats,
}

/// The key of the striped group among the groups (a slot number no connection has).
const STRIPED: usize = usize::MAX;

/// Where a channel stands in the sender's indexes. Each field is a function of the channel's
/// state ([`Indexed::of`]); [`Sender::refresh`] recomputes them after every change to the
/// channel and moves the channel between indexes where they differ, so that a frame costs
/// O(log n) in the channels held rather than a scan of them all.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Indexed {
    /// The length of the frame it would send now, if it can (bytes waiting and credit): it is
    /// then a candidate of its group's [`Wfq`], and in [`Sender::heads`].
    head: Option<usize>,
    /// What it is doing with the turns its group gives others.
    wait: Wait,
    /// Its group's turn count when `wait` last changed (or it joined the group): the turns
    /// since are counted as `wait` says when it next changes, or when its counters are read.
    since: u64,
    /// While it may be rescued ([`Sender::rescue`]): the connection its oldest unacknowledged
    /// frame went on.
    rescue: Option<usize>,
    /// Its `Close` is due.
    close_due: bool,
    /// Bytes, frames or a close of it that the peer has not acknowledged.
    busy: bool,
}

/// What a channel does while another in its group has the turn ([`ChannelStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Wait {
    /// No bytes waiting: `idle_turns`.
    #[default]
    Idle,
    /// Bytes but no credit: `blocked_turns`.
    Blocked,
    /// It could have sent: the turn was lost to a better claim, and is not counted.
    Ready,
}

impl Indexed {
    /// Where channel `ch` belongs (its `since` left to the caller).
    fn of(ch: &Channel, max_frame: usize) -> Self {
        let wait = if ch.queued == 0 {
            Wait::Idle
        } else if ch.credit() == 0 {
            Wait::Blocked
        } else {
            Wait::Ready
        };
        // Out of credit with more than half its window unacknowledged (frames missing, not an
        // application slow to read), and its oldest unacknowledged frame not yet rescued.
        let acked_off = ch.stats.sent_bytes - ch.unacked_bytes;
        let stuck = wait == Wait::Blocked && ch.unacked_bytes * 2 > ch.limit.saturating_sub(acked_off);
        let rescue =
            ch.unacked.first_key_value().filter(|(seq, _)| stuck && **seq >= ch.rescued_below).map(|(_, (_, on))| *on);
        Self {
            head: (wait == Wait::Ready).then(|| ch.next_len(max_frame)),
            wait,
            since: ch.at.since,
            rescue,
            close_due: ch.closing && ch.queued == 0 && ch.close_sent.is_none() && !ch.close_acked && ch.reset.is_none(),
            busy: !(ch.queued == 0 && ch.unacked.is_empty() && (!ch.closing || ch.close_acked)),
        }
    }
}

impl Channel {
    /// Payload bytes the receiver's credit allows now.
    fn credit(&self) -> u64 {
        self.limit.saturating_sub(self.stats.sent_bytes)
    }

    /// The length of the channel's next data frame: what waits, up to a frame and the credit.
    fn next_len(&self, max_frame: usize) -> usize {
        self.queued.min(max_frame).min(usize::try_from(self.credit()).unwrap_or(usize::MAX))
    }
}

/// What a driver cannot do with a channel.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SendError {
    /// No channel has this id.
    #[error("no channel {0} is open")]
    NoChannel(u32),
    /// The id is already in use.
    #[error("channel {0} is already open")]
    Exists(u32),
    /// Channel 0 belongs to the session.
    #[error("channel 0 is the session's own")]
    Reserved,
    /// A weight that is not a positive finite number.
    #[error("weight {0}: a weight is a positive finite number")]
    Weight(f64),
    /// The channel was closed.
    #[error("channel {0} is closed for sending")]
    Closed(u32),
    /// The peer has not given leave to open another channel: it has `limit` of this end's
    /// channels opening or accepted, and will give more as its application accepts them.
    #[error(
        "no leave to open a channel: {opened} opened, and the peer allows {limit} until its application accepts more"
    )]
    NoOpenCredit {
        /// Channels this end has opened, in all.
        opened: u64,
        /// The peer's limit.
        limit: u64,
    },
}

/// The sending half of a session.
#[derive(Debug)]
pub struct Sender {
    config: SendConfig,
    channels: BTreeMap<u32, Channel>,
    /// Connection slots: `Some(view)` while open.
    /// By slot; a slot whose connection is gone has `open` false.
    conns: Vec<ConnView>,
    /// Session and channel control frames waiting, any connection.
    control: VecDeque<Frame>,
    /// Frames to send again, oldest first, any connection: (channel, seq).
    resend: VecDeque<(u32, u64)>,
    striped: Wfq,
    pinned: BTreeMap<usize, Wfq>,
    pinning: Pinning,
    /// The heads of the channels that can send, with how many channels have each: striping
    /// asks the connection about the longest.
    heads: BTreeMap<usize, usize>,
    /// Channels that may be rescued, by the connection their oldest unacknowledged frame went
    /// on.
    rescuable: BTreeMap<usize, BTreeSet<u32>>,
    /// Channels whose `Close` is due.
    closes: BTreeSet<u32>,
    /// Channels with something the peer has not acknowledged.
    busy: usize,
    /// Channels this end has opened, in all, and the most the peer allows
    /// ([`Frame::OpenCredit`]; none until it says).
    opened: u64,
    open_limit: u64,
    /// The idle and blocked turns of each channel, counted as the scan over every channel on
    /// every frame counted them: the oracle for the lazy counts.
    #[cfg(test)]
    scanned_turns: BTreeMap<u32, (u64, u64)>,
}

impl Sender {
    /// A sender with no channels and no connections.
    pub fn new(config: SendConfig) -> Self {
        let hysteresis = match config.scheme {
            Scheme::Pin { hysteresis } => hysteresis,
            _ => 0.0,
        };
        Self {
            config,
            channels: BTreeMap::new(),
            conns: Vec::new(),
            control: VecDeque::new(),
            resend: VecDeque::new(),
            striped: Wfq::new(),
            pinned: BTreeMap::new(),
            pinning: Pinning::new(hysteresis),
            heads: BTreeMap::new(),
            rescuable: BTreeMap::new(),
            closes: BTreeSet::new(),
            busy: 0,
            opened: 0,
            open_limit: 0,
            #[cfg(test)]
            scanned_turns: BTreeMap::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SendConfig {
        &self.config
    }

    /// Connection `slot` is up (new, or re-opened after it died).
    pub fn connection_up(&mut self, slot: usize) {
        if self.conns.len() <= slot {
            self.conns.resize(slot + 1, ConnView::default());
        }
        self.conns[slot] = ConnView { open: true, ..ConnView::default() };
        self.repin();
    }

    /// Connection `slot` died: what it carried and was not acknowledged is sent again on the
    /// others.
    pub fn connection_lost(&mut self, slot: usize) {
        if let Some(c) = self.conns.get_mut(slot) {
            *c = ConnView::default();
        }
        let mut again = Vec::new();
        for (id, ch) in &mut self.channels {
            for (seq, (_, on)) in &mut ch.unacked {
                if *on == slot {
                    again.push((*id, *seq));
                }
            }
            // Every close not yet acknowledged goes again, whichever connection carried it: the
            // acknowledgement may have been on this one's way back, and a receiver that has
            // forgotten the channel acknowledges it only when a copy of something comes.
            if ch.close_sent.is_some() && !ch.close_acked {
                ch.close_sent = None;
            }
        }
        // Oldest first within each channel, channels in id order: the receiver's reorder
        // buffers wait on the lowest numbers.
        again.sort_by_key(|(c, s)| (*s, *c));
        self.resend.extend(again);
        // Announcements are not acknowledged, and any of them may have been on the connection:
        // each channel's is made again (an `Open` the peer already has only restates its
        // weight). A channel whose close was acknowledged needs none.
        let announce: Vec<Frame> = self
            .channels
            .iter()
            .filter(|(_, ch)| !ch.close_acked)
            .map(|(&channel, ch)| match (&ch.reset, ch.opened_here) {
                (Some(reason), _) => Frame::Reset { channel, reason: reason.clone() },
                (None, true) => Frame::Open { channel, weight: ch.weight, ordered: ch.ordered },
                (None, false) => Frame::SetWeight { channel, weight: ch.weight },
            })
            .collect();
        self.control.retain(|f| !matches!(f, Frame::Open { .. } | Frame::SetWeight { .. } | Frame::Reset { .. }));
        self.control.extend(announce);
        let ids: Vec<u32> = self.channels.keys().copied().collect();
        for id in ids {
            self.refresh(id);
        }
        self.repin();
    }

    /// The connections open now.
    pub fn open_connections(&self) -> usize {
        self.conns.iter().filter(|c| c.open).count()
    }

    /// What the driver measured of a connection (`TCP_INFO`: RTT, unsent bytes, delivery rate),
    /// for [`ConnChoice::EarliestDelivery`].
    pub fn set_view(&mut self, slot: usize, view: ConnView) {
        if let Some(c) = self.conns.get_mut(slot).filter(|c| c.open) {
            *c = ConnView { open: true, ..view };
        }
    }

    /// Opens a channel with `weight`; the receiver learns of it from the first frame. Refused
    /// ([`SendError::NoOpenCredit`]) while the peer's leave is used up ([`Sender::may_open`]).
    pub fn open(&mut self, channel: u32, weight: f64, ordered: bool) -> Result<(), SendError> {
        if !self.may_open() {
            return Err(SendError::NoOpenCredit { opened: self.opened, limit: self.open_limit });
        }
        self.insert(channel, weight, ordered, true)?;
        self.opened += 1;
        Ok(())
    }

    /// Whether the peer's leave allows another channel to open now.
    pub fn may_open(&self) -> bool {
        self.opened < self.open_limit
    }

    /// The peer's leave to open channels: `limit` in all ([`Frame::OpenCredit`]). The largest
    /// told holds, so a copy or a late frame changes nothing.
    pub fn on_open_credit(&mut self, limit: u64) {
        self.open_limit = self.open_limit.max(limit);
    }

    /// Channels this end has opened, in all, and the peer's limit.
    pub fn opens(&self) -> (u64, u64) {
        (self.opened, self.open_limit)
    }

    /// Opens a channel, announcing it if this end `opened_here`.
    fn insert(&mut self, channel: u32, weight: f64, ordered: bool, opened_here: bool) -> Result<(), SendError> {
        if channel == 0 {
            return Err(SendError::Reserved);
        }
        if !(weight.is_finite() && weight > 0.0) {
            return Err(SendError::Weight(weight));
        }
        if self.channels.contains_key(&channel) {
            return Err(SendError::Exists(channel));
        }
        self.channels.insert(
            channel,
            Channel {
                weight,
                queue: VecDeque::new(),
                queued: 0,
                next_seq: 0,
                limit: self.config.initial_credit,
                acked: 0,
                unacked_bytes: 0,
                unacked: BTreeMap::new(),
                ordered,
                opened_here,
                closing: false,
                close_sent: None,
                close_acked: false,
                reset: None,
                rescued_below: 0,
                sent_at_rebalance: 0,
                owed: 0.0,
                group: None,
                at: Indexed::default(),
                stats: ChannelStats::default(),
            },
        );
        if opened_here {
            self.control.push_back(Frame::Open { channel, weight, ordered });
        }
        self.refresh(channel);
        match self.config.scheme {
            // One group holds every channel: the newcomer joins it, and nothing else moves.
            Scheme::Stripe(_) => self.join(channel, STRIPED),
            _ => self.repin(),
        }
        Ok(())
    }

    /// Takes in a channel the peer opened, so that bytes can go back on it: like
    /// [`Sender::open`] with the peer's weight and order, but without an `Open` back. Does nothing
    /// if the channel is already open.
    pub fn adopt(&mut self, channel: u32, weight: f64, ordered: bool) -> Result<(), SendError> {
        match self.insert(channel, weight, ordered, false) {
            Ok(()) => Ok(()),
            Err(SendError::Exists(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Takes the peer's new weight for a channel, without telling the peer back.
    pub fn adopt_weight(&mut self, channel: u32, weight: f64) -> Result<(), SendError> {
        self.set_weight(channel, weight)?;
        self.control.retain(|f| !matches!(f, Frame::SetWeight { channel: c, .. } if *c == channel));
        Ok(())
    }

    /// Whether the channel is open for sending.
    pub fn has_channel(&self, channel: u32) -> bool {
        self.channels.contains_key(&channel)
    }

    /// Changes a channel's weight; the scheduler uses it from the channel's next frame.
    pub fn set_weight(&mut self, channel: u32, weight: f64) -> Result<(), SendError> {
        if !(weight.is_finite() && weight > 0.0) {
            return Err(SendError::Weight(weight));
        }
        let ch = self.channels.get_mut(&channel).ok_or(SendError::NoChannel(channel))?;
        ch.weight = weight;
        self.control.push_back(Frame::SetWeight { channel, weight });
        match self.config.scheme {
            Scheme::Stripe(_) => self.join(channel, STRIPED),
            _ => self.repin(),
        }
        Ok(())
    }

    /// Bytes `channel` would accept now.
    pub fn capacity(&self, channel: u32) -> usize {
        self.channels.get(&channel).map_or(0, |c| if c.closing { 0 } else { self.config.channel_buffer - c.queued })
    }

    /// Queues as much of `data` as the channel accepts; returns how much that was (0 when the
    /// channel's buffer is full: wait until frames go out).
    pub fn write(&mut self, channel: u32, data: Bytes) -> Result<usize, SendError> {
        let room = self.capacity(channel);
        let ch = self.channels.get_mut(&channel).ok_or(SendError::NoChannel(channel))?;
        if ch.closing {
            return Err(SendError::Closed(channel));
        }
        let take = data.len().min(room);
        if take > 0 {
            ch.queue.push_back(data.slice(..take));
            ch.queued += take;
            self.refresh(channel);
        }
        Ok(take)
    }

    /// The application will write no more on `channel`; a `Close` follows the last byte.
    pub fn close(&mut self, channel: u32) -> Result<(), SendError> {
        let ch = self.channels.get_mut(&channel).ok_or(SendError::NoChannel(channel))?;
        ch.closing = true;
        self.refresh(channel);
        Ok(())
    }

    /// Whether the channel was closed (or reset) for sending; `false` for a channel not held.
    pub fn is_closing(&self, channel: u32) -> bool {
        self.channels.get(&channel).is_some_and(|c| c.closing)
    }

    /// Whether every channel's bytes have been sent and acknowledged, and every closed
    /// channel's `Close` too: the peer has everything this end was given, so a driver may stop.
    /// (A `Close` merely sent is not enough: the connection carrying it may still die.)
    pub fn is_idle(&self) -> bool {
        self.resend.is_empty() && self.control.is_empty() && self.busy == 0
    }

    /// Whether the channel was closed and the receiver has acknowledged every frame and the
    /// close: the peer's application will read to its end.
    pub fn is_delivered(&self, channel: u32) -> bool {
        self.channels.get(&channel).is_some_and(|c| c.close_acked && c.unacked.is_empty())
    }

    /// Abandons a channel, both ways: what it had not delivered is dropped, and a
    /// [`Frame::Reset`] with `reason` goes instead of a close. The reset is acknowledged as a
    /// close is, and is sent again if its connection dies first; once it is acknowledged the
    /// channel is [delivered](Sender::is_delivered), and may be forgotten.
    pub fn reset(&mut self, channel: u32, reason: String) -> Result<(), SendError> {
        let ch = self.channels.get_mut(&channel).ok_or(SendError::NoChannel(channel))?;
        if ch.reset.is_some() {
            return Ok(());
        }
        ch.queue.clear();
        ch.queued = 0;
        ch.unacked.clear();
        ch.unacked_bytes = 0;
        ch.acked = ch.next_seq;
        ch.closing = true;
        ch.reset = Some(reason.clone());
        self.resend.retain(|(c, _)| *c != channel);
        self.control.retain(|f| f.channel() != channel);
        self.control.push_back(Frame::Reset { channel, reason });
        self.refresh(channel);
        Ok(())
    }

    /// Forgets a channel: its state, its place in the schedulers and any frame of it still
    /// waiting. A driver calls this once the channel is [delivered](Sender::is_delivered) and
    /// its other direction has finished too, so that a session carrying many short channels
    /// (a tunnel's connections) holds only the live ones. A credit for a forgotten channel is
    /// ignored.
    pub fn forget(&mut self, channel: u32) {
        if !self.channels.contains_key(&channel) {
            return;
        }
        self.leave(channel);
        self.unindex(channel);
        self.channels.remove(&channel);
        #[cfg(test)]
        self.scanned_turns.remove(&channel);
        self.control.retain(|f| f.channel() != channel);
        self.resend.retain(|(c, _)| *c != channel);
        if matches!(self.config.scheme, Scheme::Pin { .. }) {
            self.repin();
        }
    }

    /// The receiver's credit for a channel: frames below `ack` arrived, payload bytes below the
    /// offset `limit` (counted over the channel's first sends) may be sent. An `ack` one past
    /// the channel's last data frame acknowledges its `Close`.
    pub fn on_credit(&mut self, channel: u32, ack: u64, limit: u64) {
        let Some(ch) = self.channels.get_mut(&channel) else { return };
        // Only a receiver that has the close can count past the last frame; a peer that claims
        // to before the channel was closed is not believed (and cannot make `acked` pass
        // `next_seq`).
        if ack > ch.next_seq && ch.closing && ch.queued == 0 {
            ch.close_acked = true;
        }
        let ack = ack.min(ch.next_seq);
        if ack > ch.acked {
            ch.acked = ack;
            ch.unacked = ch.unacked.split_off(&ack);
            ch.unacked_bytes = ch.unacked.values().map(|(p, _)| p.len() as u64).sum();
        }
        ch.limit = ch.limit.max(limit);
        self.refresh(channel);
    }

    /// Payload bytes of `channel` the receiver has acknowledged: a prefix of its bytes, in the
    /// order written (0 for a channel not held).
    pub fn acked_bytes(&self, channel: u32) -> u64 {
        self.channels.get(&channel).map_or(0, |c| c.stats.sent_bytes - c.unacked_bytes)
    }

    /// A channel's counters.
    pub fn stats(&self, channel: u32) -> Option<ChannelStats> {
        self.channels.get(&channel).map(|c| {
            let mut stats =
                ChannelStats { queued_bytes: c.queued as u64, unacked_frames: c.unacked.len() as u64, ..c.stats };
            // The turns since its state last changed, not yet counted.
            if let Some(turns) = c.group.and_then(|g| self.group(g)).map(Wfq::turns) {
                let since = turns - c.at.since;
                match c.at.wait {
                    Wait::Idle => stats.idle_turns += since,
                    Wait::Blocked => stats.blocked_turns += since,
                    Wait::Ready => {}
                }
            }
            stats
        })
    }

    /// Channels and weights, in id order.
    pub fn weights(&self) -> Vec<(u32, f64)> {
        self.channels.iter().map(|(id, c)| (*id, c.weight)).collect()
    }

    /// The next frame to write on connection `slot`, which has room, at `now` (on the clock of
    /// the views given to [`Sender::set_view`]); `None` if it has nothing to send (nothing
    /// waiting, no credit, or a better connection should carry it).
    pub fn poll_transmit(&mut self, now: Nanos, slot: usize) -> Option<Frame> {
        if !self.conns.get(slot).is_some_and(|c| c.open) {
            return None;
        }
        if let Some(f) = self.control.pop_front() {
            return Some(f);
        }
        while let Some((channel, seq)) = self.resend.pop_front() {
            let Some(ch) = self.channels.get_mut(&channel) else { continue };
            // Acknowledged meanwhile: nothing to send again.
            let Some((payload, on)) = ch.unacked.get_mut(&seq) else { continue };
            *on = slot;
            ch.stats.resent_frames += 1;
            let frame = Frame::Data { channel, seq, payload: payload.clone() };
            // The frame may be the one a rescue would send, now on this connection.
            self.refresh(channel);
            return Some(frame);
        }
        if let Some(f) = self.rescue(slot) {
            return Some(f);
        }
        if let Some(f) = self.close_frame(slot) {
            return Some(f);
        }
        // The channels that can send are their groups' candidates already; the channels that
        // cannot count this turn against themselves when they next change (see `Indexed`).
        let picked = match self.config.scheme {
            Scheme::Stripe(choice) => {
                let (&len, _) = self.heads.last_key_value()?;
                if !choice.takes(&self.conns, slot, len, now.0) {
                    return None;
                }
                self.striped.pick()
            }
            Scheme::Pin { .. } | Scheme::PerChannel => self.pinned.get_mut(&slot)?.pick(),
        }?;
        #[cfg(test)]
        self.scan_turns(picked, slot);
        Some(self.frame_data(picked, slot))
    }

    /// The turns counted as they were before the counts were lazy: on every frame picked, every
    /// other channel that could have had the turn (all of them when striping, this
    /// connection's when pinning) and had no bytes, or bytes but no credit.
    #[cfg(test)]
    fn scan_turns(&mut self, picked: u32, slot: usize) {
        let rivals = match self.config.scheme {
            Scheme::Stripe(_) => None,
            _ => self.pinned.get(&slot),
        };
        for (id, ch) in &self.channels {
            if *id != picked && rivals.is_none_or(|g| g.contains(*id)) {
                let turns = self.scanned_turns.entry(*id).or_default();
                if ch.queued == 0 {
                    turns.0 += 1;
                } else if ch.credit() == 0 {
                    turns.1 += 1;
                }
            }
        }
    }

    /// Striping's bounded memory has a cost the thesis's unbounded buffer did not: a frame
    /// delayed on one connection holds every later frame of its channel in the receiver's reorder
    /// buffer, the window fills, and the channel stops, whatever its weight. When a channel is
    /// out of credit with more than half its window unacknowledged (frames missing, not an
    /// application slow to read), its oldest unacknowledged frame is sent once more on the
    /// connection asking, if it went on another; the receiver keeps whichever copy comes first.
    /// This is MPTCP's opportunistic retransmission (Raiciu et al., NSDI 2012) per channel.
    ///
    /// The lowest-numbered such channel goes first, as when every channel was scanned: the
    /// rescuable channels are indexed by the connection their oldest frame went on, so this
    /// looks at the first of each other connection's.
    fn rescue(&mut self, slot: usize) -> Option<Frame> {
        let channel = self
            .rescuable
            .iter()
            .filter(|(on, _)| **on != slot)
            .filter_map(|(_, channels)| channels.first().copied())
            .min()?;
        let ch = self.channels.get_mut(&channel).expect("rescuable channels are held");
        let (&seq, (payload, _)) = ch.unacked.first_key_value().expect("a rescuable channel has frames out");
        ch.rescued_below = seq + 1;
        ch.stats.rescued_frames += 1;
        let payload = payload.clone();
        self.refresh(channel);
        Some(Frame::Data { channel, seq, payload })
    }

    /// The lowest-numbered channel's `Close` that is due.
    fn close_frame(&mut self, slot: usize) -> Option<Frame> {
        let channel = *self.closes.first()?;
        let ch = self.channels.get_mut(&channel).expect("closing channels are held");
        ch.close_sent = Some(slot);
        let frame = Frame::Close { channel, frames: ch.next_seq };
        self.refresh(channel);
        Some(frame)
    }

    /// Cuts the channel's next frame (as long as the credit allows) and keeps it until
    /// acknowledged.
    fn frame_data(&mut self, channel: u32, slot: usize) -> Frame {
        let ch = self.channels.get_mut(&channel).expect("the scheduler picks open channels");
        let max_frame = ch.next_len(self.config.max_frame);
        let mut parts: Vec<Bytes> = Vec::new();
        let mut len = 0;
        while len < max_frame {
            let Some(mut front) = ch.queue.pop_front() else { break };
            if front.len() > max_frame - len {
                let rest = front.split_off(max_frame - len);
                ch.queue.push_front(rest);
            }
            len += front.len();
            parts.push(front);
        }
        let payload = if parts.len() == 1 { parts.pop().expect("one part") } else { Bytes::from(parts.concat()) };
        ch.queued -= payload.len();
        let seq = ch.next_seq;
        ch.next_seq += 1;
        ch.stats.sent_frames += 1;
        ch.stats.sent_bytes += payload.len() as u64;
        ch.unacked_bytes += payload.len() as u64;
        ch.unacked.insert(seq, (payload.clone(), slot));
        self.refresh(channel);
        Frame::Data { channel, seq, payload }
    }

    /// Re-pins by the connections' measured delivery rates ([`Sender::set_view`]): the thesis
    /// assumes every connection carries an equal share (§3.6), and when they do not, channels
    /// pinned by weight alone get shares off by the difference. Does nothing unless pinning and
    /// every open connection has a rate. A driver calls it periodically; the hysteresis keeps
    /// small rate changes from moving channels. Returns the channels moved.
    ///
    /// With [`SendConfig::pin_by_service`] (beyond the source), channels are also placed by
    /// what they were owed: whole channels on connections cannot split the total exactly by
    /// weight (the model error of the best assignment is 1.9% for 15 channels weighted 0.8^i
    /// on 5 equal connections, notes §3.6), and measured rates are noisy. Each backlogged
    /// channel is owed its weighted share of what the backlogged channels sent since the last
    /// re-balance, less what it sent, summed; it is then pinned as if its weight were
    /// `w · exp(owed / share)` (bounded to ½–2×, `share` its fair bytes of the last
    /// interval). A heavier-looking channel gets a connection with less other weight on it,
    /// so a channel behind gains and one ahead gives way: the assignment takes turns, and the
    /// shares over many intervals approach the weights. Channels that move may reorder the
    /// frames in flight, which the receiver's ordering absorbs.
    pub fn rebalance(&mut self) -> Vec<u32> {
        if !matches!(self.config.scheme, Scheme::Pin { .. }) {
            return Vec::new();
        }
        let caps: Vec<(usize, f64)> =
            self.conns.iter().enumerate().filter(|(_, c)| c.open).map(|(i, c)| (i, c.sending_rate())).collect();
        if caps.is_empty() || caps.iter().any(|(_, r)| *r <= 0.0) {
            return Vec::new();
        }
        let weights = if self.config.pin_by_service { self.weights_by_service(&caps) } else { self.weights() };
        let moved = self.pinning.update(&weights, &caps);
        let assign = self.pinning.assignment().clone();
        self.regroup(assign);
        moved
    }

    /// The weights pinning places channels by: each channel's own, scaled by what it is owed
    /// (see [`Sender::rebalance`]). Updates what each channel is owed. `caps` are the open
    /// connections' measured rates.
    fn weights_by_service(&mut self, caps: &[(usize, f64)]) -> Vec<(u32, f64)> {
        // Channels with bytes waiting competed for the interval; an idle one is owed nothing.
        let mut rivals: Vec<(u32, f64)> =
            self.channels.iter().filter(|(_, c)| c.queued > 0).map(|(id, c)| (*id, c.weight)).collect();
        let sent: u64 =
            self.channels.values().filter(|c| c.queued > 0).map(|c| c.stats.sent_bytes - c.sent_at_rebalance).sum();
        // What each could have had: its weighted share, except that a channel on one connection
        // gets at most that connection's rate. The heaviest take the fastest connections
        // whole while their share exceeds it; the rest share what is left by weight
        // (water-filling). A channel is not owed what no assignment could give it: chasing
        // that moved every other channel for nothing (RMS_perc 28% against 18% at m = 10 on
        // the emulator).
        rivals.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut rates: Vec<f64> = caps.iter().map(|(_, r)| *r).collect();
        rates.sort_by(|a, b| b.total_cmp(a));
        let all_rates: f64 = rates.iter().sum();
        let (mut left, mut weight) = (sent as f64, rivals.iter().map(|(_, w)| w).sum::<f64>());
        let mut due: BTreeMap<u32, f64> = BTreeMap::new();
        for (k, (id, w)) in rivals.iter().enumerate() {
            let whole = rates.get(k).map_or(0.0, |r| sent as f64 * r / all_rates);
            if left * w / weight <= whole || k + 1 >= rates.len() {
                break;
            }
            due.insert(*id, whole);
            left -= whole;
            weight -= w;
        }
        for (id, w) in &rivals {
            due.entry(*id).or_insert(left * w / weight);
        }
        self.channels
            .iter_mut()
            .map(|(id, ch)| {
                let got = ch.stats.sent_bytes - ch.sent_at_rebalance;
                ch.sent_at_rebalance = ch.stats.sent_bytes;
                let Some(&share) = due.get(id).filter(|s| **s > 0.0) else {
                    ch.owed = 0.0;
                    return (*id, ch.weight);
                };
                ch.owed += share - got as f64;
                (*id, ch.weight * libm::exp((ch.owed / share).clamp(-0.7, 0.7)))
            })
            .collect()
    }

    /// Brings the pinned groups up to date with channels, weights and connections. Striping's
    /// one group is kept up to date as channels open, change weight and are forgotten.
    fn repin(&mut self) {
        let open: Vec<usize> = self.conns.iter().enumerate().filter(|(_, c)| c.open).map(|(i, _)| i).collect();
        match self.config.scheme {
            Scheme::Stripe(_) => {}
            // Re-placing every channel: O(n) per channel opened or forgotten, as the pinning
            // itself is; a tunnel's thousands of short channels stripe.
            Scheme::PerChannel => {
                let assign = self
                    .channels
                    .keys()
                    .enumerate()
                    .filter(|_| !open.is_empty())
                    .map(|(k, id)| (*id, open[k % open.len()]))
                    .collect();
                self.regroup(assign);
            }
            Scheme::Pin { .. } => {
                let weights = self.weights();
                let caps: Vec<(usize, f64)> = open.iter().map(|s| (*s, 1.0)).collect();
                self.pinning.update(&weights, &caps);
                let assign = self.pinning.assignment().clone();
                self.regroup(assign);
            }
        }
    }

    /// Makes each open connection's group hold the channels `assign` puts there, keeping the
    /// virtual times of channels that stay put.
    fn regroup(&mut self, assign: BTreeMap<u32, usize>) {
        let open: Vec<usize> = self.conns.iter().enumerate().filter(|(_, c)| c.open).map(|(i, _)| i).collect();
        let leaving: Vec<u32> = self
            .channels
            .iter()
            .filter(|(id, ch)| ch.group.is_some_and(|g| assign.get(id) != Some(&g) || !open.contains(&g)))
            .map(|(id, _)| *id)
            .collect();
        for id in leaving {
            self.leave(id);
        }
        self.pinned.retain(|slot, _| open.contains(slot));
        for (id, slot) in assign {
            self.join(id, slot);
        }
    }

    /// The group `key` names.
    fn group(&self, key: usize) -> Option<&Wfq> {
        if key == STRIPED { Some(&self.striped) } else { self.pinned.get(&key) }
    }

    /// Puts the channel in group `key` (made if need be), or gives its lane there its weight
    /// if it is already in it.
    fn join(&mut self, channel: u32, key: usize) {
        let Some(ch) = self.channels.get(&channel) else { return };
        if ch.group.is_some_and(|g| g != key) {
            self.leave(channel);
        }
        let ch = self.channels.get_mut(&channel).expect("held above");
        let group = if key == STRIPED { &mut self.striped } else { self.pinned.entry(key).or_default() };
        group.set(channel, ch.weight);
        if ch.group != Some(key) {
            group.set_head(channel, ch.at.head);
            ch.group = Some(key);
            ch.at.since = group.turns();
        }
    }

    /// Takes the channel out of its group, its turns there counted.
    fn leave(&mut self, channel: u32) {
        let Some(ch) = self.channels.get_mut(&channel) else { return };
        let Some(key) = ch.group.take() else { return };
        let group = if key == STRIPED { Some(&mut self.striped) } else { self.pinned.get_mut(&key) };
        if let Some(group) = group {
            settle(ch, group.turns());
            group.remove(channel);
        }
    }

    /// Moves the channel to the indexes its state puts it in now. Called after every change
    /// to a channel's bytes, credit, acknowledgements, close or frames' connections.
    fn refresh(&mut self, channel: u32) {
        let Some(ch) = self.channels.get_mut(&channel) else { return };
        let was = ch.at;
        let now = Indexed::of(ch, self.config.max_frame);
        if now == was {
            return;
        }
        let group = match ch.group {
            Some(STRIPED) => Some(&mut self.striped),
            Some(slot) => self.pinned.get_mut(&slot),
            None => None,
        };
        if now.wait != was.wait
            && let Some(group) = group.as_deref()
        {
            settle(ch, group.turns());
        }
        ch.at = Indexed { since: ch.at.since, ..now };
        if now.head != was.head {
            if let Some(len) = was.head {
                remove_one(&mut self.heads, len);
            }
            if let Some(len) = now.head {
                *self.heads.entry(len).or_default() += 1;
            }
            if let Some(group) = group {
                group.set_head(channel, now.head);
            }
        }
        if now.rescue != was.rescue {
            if let Some(on) = was.rescue {
                remove_from(&mut self.rescuable, on, channel);
            }
            if let Some(on) = now.rescue {
                self.rescuable.entry(on).or_default().insert(channel);
            }
        }
        if now.close_due != was.close_due {
            if now.close_due {
                self.closes.insert(channel);
            } else {
                self.closes.remove(&channel);
            }
        }
        if now.busy != was.busy {
            if now.busy {
                self.busy += 1;
            } else {
                self.busy -= 1;
            }
        }
    }

    /// Takes a channel about to be forgotten out of every index.
    fn unindex(&mut self, channel: u32) {
        let Some(ch) = self.channels.get_mut(&channel) else { return };
        let was = std::mem::take(&mut ch.at);
        if let Some(len) = was.head {
            remove_one(&mut self.heads, len);
        }
        if let Some(on) = was.rescue {
            remove_from(&mut self.rescuable, on, channel);
        }
        if was.close_due {
            self.closes.remove(&channel);
        }
        if was.busy {
            self.busy -= 1;
        }
    }

    /// Panics unless every index agrees with the channels' state recomputed from scratch, and
    /// every channel's idle and blocked turns with the count made by scanning every channel
    /// on every frame.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let max_frame = self.config.max_frame;
        let mut heads: BTreeMap<usize, usize> = BTreeMap::new();
        let mut rescuable: BTreeMap<usize, BTreeSet<u32>> = BTreeMap::new();
        let mut closes = BTreeSet::new();
        let mut busy = 0;
        for (&id, ch) in &self.channels {
            let at = Indexed::of(ch, max_frame);
            assert_eq!(ch.at, at, "channel {id}'s place in the indexes");
            if let Some(len) = at.head {
                *heads.entry(len).or_default() += 1;
            }
            if let Some(on) = at.rescue {
                rescuable.entry(on).or_default().insert(id);
            }
            if at.close_due {
                closes.insert(id);
            }
            busy += usize::from(at.busy);
            match (self.config.scheme, ch.group) {
                (Scheme::Stripe(_), group) => assert_eq!(group, Some(STRIPED), "channel {id} stripes"),
                (_, Some(slot)) => {
                    assert!(self.pinned.get(&slot).is_some_and(|g| g.contains(id)), "channel {id} in {slot}")
                }
                (_, None) => {}
            }
            if let Some(group) = ch.group.and_then(|g| self.group(g)) {
                assert_eq!(group.head(id), at.head, "channel {id}'s head in its group");
                assert!(ch.at.since <= group.turns());
            }
            let stats = self.stats(id).expect("held");
            let scanned = self.scanned_turns.get(&id).copied().unwrap_or_default();
            assert_eq!((stats.idle_turns, stats.blocked_turns), scanned, "channel {id}'s idle and blocked turns");
        }
        assert_eq!(self.heads, heads, "heads");
        assert_eq!(self.rescuable, rescuable, "rescuable channels");
        assert_eq!(self.closes, closes, "closes due");
        assert_eq!(self.busy, busy, "busy channels");
        for (key, group) in std::iter::once((STRIPED, &self.striped)).chain(self.pinned.iter().map(|(k, g)| (*k, g))) {
            group.check_invariants();
            for (id, w) in group.weights() {
                let ch = &self.channels[&id];
                assert_eq!((ch.group, ch.weight), (Some(key), w), "channel {id} in group {key}");
            }
        }
    }
}

/// Counts the turns a channel's group gave others since its state last changed, as its state
/// says, and starts counting again from `turns`.
fn settle(ch: &mut Channel, turns: u64) {
    let since = turns - ch.at.since;
    match ch.at.wait {
        Wait::Idle => ch.stats.idle_turns += since,
        Wait::Blocked => ch.stats.blocked_turns += since,
        Wait::Ready => {}
    }
    ch.at.since = turns;
}

/// Takes one `len` from a count of lengths.
fn remove_one(counts: &mut BTreeMap<usize, usize>, len: usize) {
    if let Some(n) = counts.get_mut(&len) {
        *n -= 1;
        if *n == 0 {
            counts.remove(&len);
        }
    }
}

/// Takes `channel` from the set under `key`, and the set once empty.
fn remove_from(sets: &mut BTreeMap<usize, BTreeSet<u32>>, key: usize, channel: u32) {
    if let Some(set) = sets.get_mut(&key) {
        set.remove(&channel);
        if set.is_empty() {
            sets.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backlogged(scheme: Scheme, conns: usize, weights: &[f64]) -> Sender {
        let mut tx = Sender::new(SendConfig {
            max_frame: 1000,
            channel_buffer: 1 << 30,
            initial_credit: u64::MAX,
            scheme,
            pin_by_service: true,
        });
        // Leave to open every channel (open credit is tested on its own).
        tx.on_open_credit(u64::MAX);
        for c in 0..conns {
            tx.connection_up(c);
        }
        for (i, w) in weights.iter().enumerate() {
            let id = i as u32 + 1;
            tx.open(id, *w, true).unwrap();
            tx.write(id, Bytes::from(vec![0u8; 10 << 20])).unwrap();
        }
        tx
    }

    #[test]
    fn a_reset_drops_what_was_not_delivered_and_is_sent_again_until_acknowledged() {
        use super::super::{Receiver, RecvConfig};
        let mut tx = Sender::new(SendConfig { max_frame: 4, ..SendConfig::default() });
        // Leave to open every channel (open credit is tested on its own).
        tx.on_open_credit(u64::MAX);
        tx.connection_up(0);
        tx.connection_up(1);
        tx.open(1, 1.0, true).unwrap();
        tx.write(1, Bytes::from_static(b"abcdefgh")).unwrap();
        let mut rx = Receiver::new(RecvConfig::default());
        // The open and the first frame go on connection 0; then the application gives up.
        for _ in 0..2 {
            rx.on_frame(Nanos(0), tx.poll_transmit(Nanos(0), 0).unwrap()).unwrap();
        }
        tx.reset(1, "target refused".into()).unwrap();
        assert_eq!(tx.poll_transmit(Nanos(0), 0), Some(Frame::Reset { channel: 1, reason: "target refused".into() }));
        assert_eq!(tx.poll_transmit(Nanos(0), 0), None, "neither the rest of the bytes nor a close");
        assert!(!tx.is_delivered(1));
        // The connection that carried the reset dies: it goes again on the other.
        tx.connection_lost(0);
        let again = tx.poll_transmit(Nanos(0), 1).unwrap();
        assert_eq!(again, Frame::Reset { channel: 1, reason: "target refused".into() });
        rx.on_frame(Nanos(1), again).unwrap();
        assert_eq!(rx.poll_reset(), Some((1, "target refused".into())));
        assert_eq!(rx.read(1), None, "what arrived before the reset is dropped with it");
        while let Some(Frame::Credit { channel, ack, limit }) = rx.poll_credit() {
            tx.on_credit(channel, ack, limit);
        }
        assert!(tx.is_delivered(1) && tx.is_idle(), "the reset was acknowledged");
        tx.forget(1);
        assert!(!tx.has_channel(1));
    }

    /// Sends `frames` data frames, connections asking in turn; returns bytes per channel and
    /// the connections each channel used.
    fn drive(tx: &mut Sender, conns: usize, frames: usize) -> BTreeMap<u32, (u64, BTreeSet<usize>)> {
        let mut out: BTreeMap<u32, (u64, BTreeSet<usize>)> = BTreeMap::new();
        let mut sent = 0;
        let mut slot = 0;
        while sent < frames {
            if let Some(Frame::Data { channel, payload, .. }) = tx.poll_transmit(Nanos::ZERO, slot % conns) {
                let e = out.entry(channel).or_default();
                e.0 += payload.len() as u64;
                e.1.insert(slot % conns);
                sent += 1;
            }
            slot += 1;
        }
        out
    }

    #[test]
    fn striping_shares_bytes_by_weight_and_uses_every_connection() {
        let weights: Vec<f64> = (0..15).map(|i| libm::pow(0.8, f64::from(i))).collect();
        let mut tx = backlogged(Scheme::Stripe(ConnChoice::LeastQueued), 5, &weights);
        let out = drive(&mut tx, 5, 30_000);
        let total: u64 = out.values().map(|(b, _)| b).sum();
        let w: f64 = weights.iter().sum();
        for (id, (bytes, used)) in &out {
            let ideal = total as f64 * weights[*id as usize - 1] / w;
            assert!(ideal - *bytes as f64 <= 1000.0, "channel {id}: {bytes} vs {ideal}");
            assert_eq!(used.len(), 5);
        }
    }

    #[test]
    fn pinning_keeps_each_channel_on_one_connection() {
        let weights: Vec<f64> = (0..15).map(|i| libm::pow(0.8, f64::from(i))).collect();
        let mut tx = backlogged(Scheme::Pin { hysteresis: 0.01 }, 5, &weights);
        let out = drive(&mut tx, 5, 5_000);
        assert!(out.values().all(|(_, used)| used.len() == 1));
        let conns: BTreeSet<usize> = out.values().flat_map(|(_, u)| u.iter().copied()).collect();
        assert_eq!(conns.len(), 5, "every connection carries channels");
    }

    #[test]
    fn rebalancing_follows_measured_rates() {
        let weights = vec![1.0; 8];
        let mut tx = backlogged(Scheme::Pin { hysteresis: 0.01 }, 2, &weights);
        let on = |tx: &Sender, slot| tx.pinning.assignment().values().filter(|c| **c == slot).count();
        assert_eq!((on(&tx, 0), on(&tx, 1)), (4, 4));
        tx.set_view(0, ConnView { rate: 3e6, rtt_ns: 1, ..ConnView::default() });
        tx.set_view(1, ConnView { rate: 1e6, rtt_ns: 1, ..ConnView::default() });
        let moved = tx.rebalance();
        assert_eq!(moved.len(), 2);
        assert_eq!((on(&tx, 0), on(&tx, 1)), (6, 2));
        let out = drive(&mut tx, 2, 100);
        assert!(out.values().all(|(_, used)| used.len() == 1));
    }

    /// Pinning re-balanced every interval for `intervals`, each connection sending frames in
    /// proportion to its rate (`rates`, frames per interval) and reporting that rate; returns
    /// Iwashima's RMS_perc of the bytes each channel sent over the whole run, and of the last
    /// interval alone.
    fn pinned_run(by_service: bool, rates: &[usize], intervals: usize) -> (f64, f64) {
        let weights: Vec<f64> = (0..15).map(|i| libm::pow(0.8, f64::from(i))).collect();
        let mut tx = backlogged(Scheme::Pin { hysteresis: 0.01 }, rates.len(), &weights);
        tx.config.pin_by_service = by_service;
        let mut total = vec![0.0; weights.len()];
        let mut last = vec![0.0; weights.len()];
        let more = Bytes::from(vec![0u8; 4 << 20]);
        for _ in 0..intervals {
            // Every channel stays backlogged.
            for id in 1..=weights.len() as u32 {
                if tx.stats(id).unwrap().queued_bytes < 4 << 20 {
                    tx.write(id, more.clone()).unwrap();
                }
            }
            last.iter_mut().for_each(|b| *b = 0.0);
            for (slot, &frames) in rates.iter().enumerate() {
                let mut sent = 0;
                while sent < frames {
                    match tx.poll_transmit(Nanos::ZERO, slot) {
                        Some(Frame::Data { channel, payload, .. }) => {
                            last[channel as usize - 1] += payload.len() as f64;
                            sent += 1;
                        }
                        Some(_) => {}
                        None => break,
                    }
                }
                tx.set_view(slot, ConnView { rate: frames as f64, rtt_ns: 1, ..ConnView::default() });
            }
            total.iter_mut().zip(&last).for_each(|(t, l)| *t += l);
            tx.rebalance();
        }
        let error = |b: &[f64]| crate::measure::allocation(b, &weights).rms_perc;
        (error(&total), error(&last))
    }

    /// The least RMS_perc any pinning can reach over time: a channel's share is capped by the
    /// fastest connection it could have to itself, and the rest share by weight (water-filling).
    fn pinning_bound(weights: &[f64], rates: &[usize]) -> f64 {
        let total_rate: f64 = rates.iter().map(|r| *r as f64).sum();
        let cap = *rates.iter().max().unwrap() as f64 / total_rate;
        let w: f64 = weights.iter().sum();
        let mut shares: Vec<f64> = weights.iter().map(|x| x / w).collect();
        // Only the heaviest few can exceed a connection: cap them, spread the rest by weight.
        let capped: Vec<bool> = shares.iter().map(|s| *s > cap).collect();
        let free_weight: f64 = weights.iter().zip(&capped).filter(|(_, c)| !**c).map(|(x, _)| x).sum();
        let left = 1.0 - cap * capped.iter().filter(|c| **c).count() as f64;
        for ((s, x), c) in shares.iter_mut().zip(weights).zip(&capped) {
            *s = if *c { cap } else { left * x / free_weight };
        }
        crate::measure::allocation(&shares, weights).rms_perc
    }

    #[test]
    fn pinning_by_service_takes_turns_so_shares_over_time_approach_the_weights() {
        let weights: Vec<f64> = (0..15).map(|i| libm::pow(0.8, f64::from(i))).collect();
        // Equal connections: a fixed assignment is off by the model's 1.9% (notes §3.6) in
        // every interval, and so over the run. The heaviest channel wants 20.7% of the total
        // and one connection carries 20%, so no pinning gets below 1.27%.
        let equal = [400; 5];
        let bound = pinning_bound(&weights, &equal);
        assert!((bound - 0.0127).abs() < 0.0005, "{bound}");
        let (fixed, _) = pinned_run(false, &equal, 60);
        assert!((fixed - 0.019).abs() < 0.003, "by rates alone: {fixed}");
        let (turns, one) = pinned_run(true, &equal, 60);
        assert!(turns < bound + 0.001, "by service, over the run: {turns} (fixed {fixed}, bound {bound})");
        // Any one interval is one assignment, no closer than the fixed one.
        assert!(one > turns + 0.002, "one interval: {one}, the run: {turns}");
        // Unequal connections, measured: the heaviest channel can have the fastest to itself,
        // so the bound is 0; by rates alone 1.1%, by service 0.6% (the lightest channels, whose
        // moves the hysteresis holds back longest, stay a little behind).
        let rates = [520, 400, 360, 440, 280];
        assert!(pinning_bound(&weights, &rates) < 1e-9);
        let (fixed, _) = pinned_run(false, &rates, 60);
        let (turns, _) = pinned_run(true, &rates, 60);
        assert!(turns < 0.008 && turns < 0.7 * fixed, "unequal: by service {turns}, by rates {fixed}");
        // More connections than the heaviest channels' shares allow (m = 10: channels 1 to 4
        // want more than a tenth each): they are owed only a connection's worth.
        let ten = [200; 10];
        let bound = pinning_bound(&weights, &ten);
        let (fixed, _) = pinned_run(false, &ten, 60);
        let (turns, _) = pinned_run(true, &ten, 60);
        // Here whole channels on connections are far from any split by weight (bound 50%,
        // fixed 57%), and taking turns does not help: it must not make things much worse.
        assert!(turns < fixed + 0.03, "m = 10: by service {turns}, by rates {fixed}, bound {bound}");
    }

    #[test]
    fn earliest_delivery_returns_to_a_connection_once_its_old_view_has_drained() {
        let mut tx = backlogged(Scheme::Stripe(ConnChoice::EarliestDelivery { slack: 0.1 }), 3, &[1.0, 1.0]);
        let seen = |backlog: u64| ConnView {
            open: true,
            unsent: backlog,
            rtt_ns: 10_000_000,
            rate: 1e6,
            ..ConnView::default()
        };
        // Connection 2 was last seen with 200 KB waiting (0.2 s of sending); the others idle.
        tx.set_view(0, seen(0));
        tx.set_view(1, seen(0));
        tx.set_view(2, seen(200_000));
        let data = |f: Option<Frame>| matches!(f, Some(Frame::Data { .. }));
        // Control frames (the channels' opens) go first, on any connection.
        while !data(tx.poll_transmit(Nanos::ZERO, 0)) {}
        assert!(!data(tx.poll_transmit(Nanos::ZERO, 2)), "just seen busy, connection 2 waits");
        // A second later nobody has looked at it again, but its queue has long drained.
        assert!(data(tx.poll_transmit(Nanos::from_millis(1_000), 2)), "connection 2 is used again");
    }

    #[test]
    fn credit_and_buffer_limits_hold() {
        let mut tx = Sender::new(SendConfig {
            max_frame: 100,
            channel_buffer: 250,
            initial_credit: 200,
            ..SendConfig::default()
        });
        tx.connection_up(0);
        // No channel opens before the peer gives leave, and the leave bounds how many.
        assert_eq!(tx.open(1, 1.0, true), Err(SendError::NoOpenCredit { opened: 0, limit: 0 }));
        tx.on_open_credit(1);
        tx.open(1, 1.0, true).unwrap();
        assert!(!tx.may_open());
        assert_eq!(tx.open(3, 1.0, true), Err(SendError::NoOpenCredit { opened: 1, limit: 1 }));
        tx.on_open_credit(0);
        assert_eq!(tx.opens(), (1, 1), "a smaller limit (a late copy) changes nothing");
        tx.on_open_credit(u64::MAX);
        assert_eq!(tx.write(1, Bytes::from(vec![1u8; 1000])).unwrap(), 250);
        assert_eq!(tx.write(1, Bytes::from_static(b"x")).unwrap(), 0);
        assert!(matches!(tx.poll_transmit(Nanos::ZERO, 0), Some(Frame::Open { .. })));
        assert!(matches!(tx.poll_transmit(Nanos::ZERO, 0), Some(Frame::Data { seq: 0, .. })));
        assert!(matches!(tx.poll_transmit(Nanos::ZERO, 0), Some(Frame::Data { seq: 1, .. })));
        assert_eq!(tx.poll_transmit(Nanos::ZERO, 0), None, "no credit for frame 2");
        tx.on_credit(1, 2, 400);
        assert_eq!(tx.stats(1).unwrap().unacked_frames, 0);
        assert!(
            matches!(tx.poll_transmit(Nanos::ZERO, 0), Some(Frame::Data { seq: 2, ref payload, .. }) if payload.len() == 50)
        );
        assert_eq!(tx.open(0, 1.0, true), Err(SendError::Reserved));
        assert!(matches!(tx.open(2, f64::NAN, true), Err(SendError::Weight(_))));
        assert!(matches!(tx.open(2, 0.0, true), Err(SendError::Weight(_))));
    }
}
