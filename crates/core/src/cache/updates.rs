//! The stream of a Cacheflow server's changes to one neighbour, kept whole across refusals,
//! restarts and outages (ours, not Cacheflow's: the thesis assumes its update messages arrive).
//!
//! A neighbour's view of this server is built only from the changes it takes, so a batch it
//! never takes leaves the view wrong for good: an object shown that is gone (a request left to
//! this server, not delivered) or one held that is not shown (loaded again from the origin).
//! So every batch carries the sender's `epoch` (drawn anew each time the sender starts) and a
//! sequence number, one more for each batch. The receiver ([`Inbox`]) takes a batch only if it
//! follows the last one it took from that epoch; any other is a gap (a batch lost or refused,
//! the sender or the receiver restarted), which it refuses, and the sender ([`Outbox`]) then
//! sends everything it holds instead, marked to replace the view (a `reset`). A reset is always
//! taken, and starts the count afresh.
//!
//! The outbox to a neighbour that does not take batches (down, or slow) holds at most `limit`
//! changes: past that, they are dropped for one snapshot of everything held, sent when the
//! neighbour is back. A snapshot is never larger than the cache, so what a neighbour that is
//! down costs is bounded by the limit and the cache's capacity, however long it is down.

use std::collections::VecDeque;

/// One batch on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Numbered<K> {
    /// The sender's epoch (never 0: a batch with epoch 0 is from a sender that numbers none).
    pub epoch: u64,
    /// Its number in the epoch.
    pub seq: u64,
    /// Its changes are everything the sender holds: the receiver forgets its view first.
    pub reset: bool,
    /// The receiver should answer with a reset of its own (the sender started, and knows
    /// nothing of it).
    pub ask: bool,
    /// (key, added), in the order they happened.
    pub changes: Vec<(K, bool)>,
}

/// What the sender should do next for this neighbour.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<'a, K> {
    /// Send this batch (again, until the neighbour takes it).
    Send(&'a Numbered<K>),
    /// Take a snapshot of everything held, now, and hand it to [`Outbox::snapshot`]; `ask`:
    /// ask the neighbour for its own.
    Snapshot {
        /// Ask the neighbour for a snapshot back.
        ask: bool,
    },
    /// Nothing is owed.
    Idle,
}

/// The most changes a batch gathers while it waits behind another ([`Outbox::push`]).
pub const MERGE_UP_TO: usize = 256;

/// The batches owed to one neighbour, numbered, in order.
#[derive(Clone, Debug)]
pub struct Outbox<K> {
    epoch: u64,
    next_seq: u64,
    /// Batches made and not yet taken, oldest first (the first may be on its way), each with
    /// whether its changes count against the limit (a snapshot's do not: the cache bounds it).
    queue: VecDeque<(Numbered<K>, bool)>,
    /// Changes queued that count against the limit.
    queued: usize,
    limit: usize,
    /// A snapshot is owed before anything else (`Some(ask)`).
    due: Option<bool>,
}

impl<K: Clone> Outbox<K> {
    /// The outbox of a sender starting epoch `epoch` (0 is taken as 1), holding at most
    /// `limit` changes. A sender that starts owes its neighbour everything it holds, and asks
    /// for the same back.
    pub fn new(epoch: u64, limit: usize) -> Self {
        Self { epoch: epoch.max(1), next_seq: 0, queue: VecDeque::new(), queued: 0, limit, due: Some(true) }
    }

    /// Its epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Changes waiting to be taken (a snapshot's not counted).
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Queues `changes`. Returns `true` if that overflowed the limit, so that what was queued
    /// is dropped for a snapshot. While a snapshot is owed, changes are dropped: the snapshot,
    /// taken later, has them.
    ///
    /// Changes join the last batch queued when it is not the first (which may be on its way)
    /// and has room ([`MERGE_UP_TO`]): a neighbour that was away then gets what it missed in a
    /// batch or two, not a batch for each change made meanwhile, however the sender's retries
    /// fell (a test that counted the batches failed now and then on exactly that).
    pub fn push(&mut self, changes: Vec<(K, bool)>) -> bool {
        if self.due.is_some() {
            return false;
        }
        if self.queued + changes.len() > self.limit {
            self.resync(false);
            return true;
        }
        self.queued += changes.len();
        if self.queue.len() >= 2
            && let Some((last, true)) = self.queue.back_mut()
            && last.changes.len() + changes.len() <= MERGE_UP_TO
        {
            last.changes.extend(changes);
            return false;
        }
        let batch = self.number(changes, false, false);
        self.queue.push_back((batch, true));
        false
    }

    fn number(&mut self, changes: Vec<(K, bool)>, reset: bool, ask: bool) -> Numbered<K> {
        let seq = self.next_seq;
        self.next_seq += 1;
        Numbered { epoch: self.epoch, seq, reset, ask, changes }
    }

    /// What to do next.
    pub fn next(&self) -> Next<'_, K> {
        match (self.due, self.queue.front()) {
            (Some(ask), _) => Next::Snapshot { ask },
            (None, Some((b, _))) => Next::Send(b),
            (None, None) => Next::Idle,
        }
    }

    /// The snapshot [`Next::Snapshot`] asked for: everything held, in `pieces` (each at most
    /// what one request carries; at least one, perhaps empty), of which the first is the
    /// reset. It replaces whatever was queued, which it includes.
    pub fn snapshot(&mut self, pieces: Vec<Vec<(K, bool)>>, ask: bool) {
        self.queue.clear();
        self.queued = 0;
        self.due = None;
        let mut pieces = pieces.into_iter();
        let first = self.number(pieces.next().unwrap_or_default(), true, ask);
        self.queue.push_back((first, false));
        for p in pieces {
            let b = self.number(p, false, false);
            self.queue.push_back((b, false));
        }
    }

    /// The neighbour took batch `seq`. Returns whether it was the one owed (a batch dropped
    /// for a snapshot meanwhile is not).
    pub fn delivered(&mut self, seq: u64) -> bool {
        match self.queue.front() {
            Some((b, _)) if b.seq == seq && self.due.is_none() => {
                let (b, counted) = self.queue.pop_front().expect("just seen");
                if counted {
                    self.queued -= b.changes.len();
                }
                true
            }
            _ => false,
        }
    }

    /// The neighbour's view of this server can no longer be trusted (it refused a batch, saw a
    /// gap, or restarted and asked): what is queued is dropped, and a snapshot is owed. `ask`
    /// (or an ask still undelivered) asks for the neighbour's own back.
    pub fn resync(&mut self, ask: bool) {
        let asked = self.due == Some(true) || self.queue.iter().any(|(b, _)| b.ask);
        self.queue.clear();
        self.queued = 0;
        self.due = Some(ask || asked);
    }
}

/// What a receiver does with a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Apply it (after forgetting the view, for a reset).
    Apply,
    /// It was taken already (sent again because its answer was lost): answer that it was
    /// taken, and apply nothing.
    Duplicate,
    /// It does not follow the last batch taken: refuse it, so that the sender sends a reset.
    Gap {
        /// The epoch and number that would have followed, if any batch was taken.
        expected: Option<(u64, u64)>,
    },
}

/// The last batch taken from one neighbour.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inbox {
    /// The neighbour's epoch, and the number that follows.
    expect: Option<(u64, u64)>,
}

impl Inbox {
    /// What to do with batch `seq` of epoch `epoch` (a `reset` or not). A batch of epoch 0 is
    /// from a sender that numbers none: always applied, as before there were numbers.
    pub fn accept(&mut self, epoch: u64, seq: u64, reset: bool) -> Verdict {
        if epoch == 0 {
            return Verdict::Apply;
        }
        match self.expect {
            Some((e, next)) if e == epoch && seq < next => Verdict::Duplicate,
            Some((e, next)) if e == epoch && seq == next => {
                self.expect = Some((e, next + 1));
                Verdict::Apply
            }
            _ if reset => {
                self.expect = Some((epoch, seq + 1));
                Verdict::Apply
            }
            expected => Verdict::Gap { expected },
        }
    }

    /// Forgets the neighbour (this server's view of it starts empty again).
    pub fn clear(&mut self) {
        self.expect = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    fn add(k: u8) -> Vec<(u8, bool)> {
        vec![(k, true)]
    }

    #[test]
    fn a_starting_outbox_owes_a_snapshot_that_asks_and_numbers_follow() {
        let mut o = Outbox::new(7, 10);
        assert_eq!(o.next(), Next::Snapshot { ask: true });
        assert!(!o.push(add(1)), "dropped: the snapshot has it");
        o.snapshot(vec![vec![(1, true)], vec![(2, true)]], true);
        let Next::Send(b) = o.next() else { panic!() };
        assert_eq!((b.epoch, b.seq, b.reset, b.ask), (7, 0, true, true));
        assert!(!o.delivered(5), "not the batch owed");
        assert!(o.delivered(0));
        let Next::Send(b) = o.next() else { panic!() };
        assert_eq!((b.seq, b.reset, b.ask), (1, false, false), "the snapshot's second piece");
        assert!(o.delivered(1));
        assert!(!o.push(add(3)));
        assert_eq!(o.queued(), 1);
        let Next::Send(b) = o.next() else { panic!() };
        assert_eq!((b.seq, &b.changes), (2, &add(3)));
        assert!(o.delivered(2));
        assert_eq!((o.next(), o.queued()), (Next::Idle, 0));
    }

    #[test]
    fn a_full_outbox_collapses_to_one_snapshot() {
        let mut o = Outbox::new(1, 3);
        o.snapshot(vec![vec![]], true);
        assert!(o.delivered(0));
        assert!(!o.push(vec![(1, true), (2, true)]));
        assert!(!o.push(add(3)));
        assert!(o.push(add(4)), "four changes over a limit of three");
        assert_eq!((o.next(), o.queued()), (Next::Snapshot { ask: false }, 0));
        assert!(!o.push(add(5)), "dropped while the snapshot is owed");
        // A snapshot larger than the limit is still sent whole, and changes after it queue.
        o.snapshot(vec![vec![(1, true), (2, true), (3, true), (4, true), (5, true)]], false);
        assert!(!o.push(add(6)));
        assert_eq!(o.queued(), 1);
    }

    #[test]
    fn changes_behind_a_batch_on_its_way_join_one_batch() {
        let mut o = Outbox::new(1, 1000);
        o.snapshot(vec![vec![(0, true)]], false);
        // The snapshot is on its way (the neighbour is away); changes keep coming.
        for k in 1..=10 {
            assert!(!o.push(add(k)));
        }
        assert_eq!(o.queued(), 10);
        assert!(o.delivered(0));
        let Next::Send(b) = o.next() else { panic!() };
        assert_eq!(b.changes, (1..=10).map(|k| (k, true)).collect::<Vec<_>>(), "one batch, not ten");
        assert!(o.delivered(b.seq));
        assert_eq!((o.next(), o.queued()), (Next::Idle, 0));
        // A batch gathers at most MERGE_UP_TO changes.
        o.snapshot(vec![vec![]], false);
        for k in 0..=MERGE_UP_TO {
            assert!(!o.push(add(k as u8)));
        }
        assert!(o.delivered(o.next_seq - 3));
        let Next::Send(b) = o.next() else { panic!() };
        assert_eq!(b.changes.len(), MERGE_UP_TO);
    }

    #[test]
    fn an_ask_not_yet_delivered_survives_a_resync() {
        let mut o = Outbox::<u8>::new(1, 3);
        o.snapshot(vec![vec![]], true);
        o.resync(false);
        assert_eq!(o.next(), Next::Snapshot { ask: true });
    }

    #[test]
    fn a_receiver_takes_batches_in_order_and_refuses_gaps() {
        let mut i = Inbox::default();
        assert_eq!(i.accept(9, 4, false), Verdict::Gap { expected: None }, "it knows nothing of epoch 9");
        assert_eq!(i.accept(9, 5, true), Verdict::Apply);
        assert_eq!(i.accept(9, 6, false), Verdict::Apply);
        assert_eq!(i.accept(9, 6, false), Verdict::Duplicate);
        assert_eq!(i.accept(9, 5, true), Verdict::Duplicate, "a reset taken already is not taken again");
        assert_eq!(i.accept(9, 8, false), Verdict::Gap { expected: Some((9, 7)) });
        assert_eq!(i.accept(3, 7, false), Verdict::Gap { expected: Some((9, 7)) }, "another epoch: it restarted");
        assert_eq!(i.accept(3, 0, true), Verdict::Apply);
        assert_eq!(i.accept(3, 1, false), Verdict::Apply);
        assert_eq!(i.accept(0, 0, false), Verdict::Apply, "unnumbered");
        i.clear();
        assert_eq!(i.accept(3, 2, false), Verdict::Gap { expected: None });
    }

    /// One step of a sender and a receiver.
    #[derive(Clone, Debug)]
    enum Step {
        /// The sender adds a key (or drops it, if held).
        Change(u8),
        /// The head batch reaches the receiver, and its answer the sender.
        Deliver,
        /// The head batch is lost on the way (the sender sends it again).
        Lose,
        /// The head batch is refused for a reason the sender cannot tell (a 4xx).
        Refuse,
        /// The head batch reaches the receiver, but its answer is lost.
        LoseAnswer,
        /// The receiver restarts: its view and inbox are empty; its reset, asking for ours,
        /// reaches the sender at a later step.
        RestartReceiver,
        /// The restarted receiver's ask reaches the sender.
        Ask,
        /// The sender restarts: empty, a new epoch.
        RestartSender,
    }

    /// Carries one step of the head batch, returning whether the sender learnt it was taken.
    fn reach(view: &mut BTreeSet<u8>, inbox: &mut Inbox, b: &Numbered<u8>) -> Result<(), ()> {
        match inbox.accept(b.epoch, b.seq, b.reset) {
            Verdict::Apply => {
                if b.reset {
                    view.clear();
                }
                for (k, added) in &b.changes {
                    if *added {
                        view.insert(*k);
                    } else {
                        view.remove(k);
                    }
                }
                Ok(())
            }
            Verdict::Duplicate => Ok(()),
            Verdict::Gap { .. } => Err(()),
        }
    }

    proptest! {
        /// However batches are lost, answered or not, and either side restarts, once the
        /// sender's outbox drains the receiver's view is exactly what the sender holds.
        #[test]
        fn the_view_matches_what_is_held_once_the_outbox_drains(
            limit in 1usize..6,
            steps in prop::collection::vec(
                prop_oneof![
                    6 => (0u8..8).prop_map(Step::Change),
                    6 => Just(Step::Deliver),
                    1 => Just(Step::Lose),
                    1 => Just(Step::Refuse),
                    1 => Just(Step::LoseAnswer),
                    1 => Just(Step::RestartReceiver),
                    2 => Just(Step::Ask),
                    1 => Just(Step::RestartSender),
                ],
                0..80,
            ),
        ) {
            let mut epoch = 1;
            let mut held = BTreeSet::new();
            let mut out = Outbox::new(epoch, limit);
            let (mut view, mut inbox) = (BTreeSet::new(), Inbox::default());
            let mut asking = false;
            // The sender's turn: take a snapshot if owed, then carry the head batch.
            let turn = |out: &mut Outbox<u8>, held: &BTreeSet<u8>, view: &mut BTreeSet<u8>, inbox: &mut Inbox, step: &Step| {
                if let Next::Snapshot { ask } = out.next() {
                    out.snapshot(vec![held.iter().map(|k| (*k, true)).collect()], ask);
                }
                let Next::Send(b) = out.next() else { return };
                let b = b.clone();
                match step {
                    Step::Lose => {}
                    Step::Refuse => out.resync(false),
                    Step::LoseAnswer => {
                        let _ = reach(view, inbox, &b);
                    }
                    _ => match reach(view, inbox, &b) {
                        Ok(()) => {
                            out.delivered(b.seq);
                        }
                        Err(()) => out.resync(false),
                    },
                }
            };
            for step in &steps {
                match step {
                    Step::Change(k) => {
                        let added = held.insert(*k);
                        if !added {
                            held.remove(k);
                        }
                        out.push(vec![(*k, added)]);
                    }
                    Step::RestartReceiver => {
                        view.clear();
                        inbox.clear();
                        asking = true;
                    }
                    Step::Ask => {
                        if std::mem::take(&mut asking) {
                            out.resync(false);
                        }
                    }
                    Step::RestartSender => {
                        epoch += 1;
                        held.clear();
                        out = Outbox::new(epoch, limit);
                    }
                    s => turn(&mut out, &held, &mut view, &mut inbox, s),
                }
                prop_assert!(out.queued() <= limit);
            }
            if asking {
                out.resync(false);
            }
            for _ in 0..1000 {
                if out.next() == Next::Idle {
                    break;
                }
                turn(&mut out, &held, &mut view, &mut inbox, &Step::Deliver);
            }
            prop_assert_eq!(out.next(), Next::Idle);
            prop_assert_eq!(view, held);
        }
    }
}
