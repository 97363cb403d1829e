//! Writes over several back-ends that hold the same content: which must take a write before
//! the client is told it is stored, what is sent again to those that did not, and which
//! back-ends a read of the written key must avoid until they have it.
//!
//! Figurehead sends a write to every back-end of the file and answers at the first
//! acknowledgement; the paper says nothing of a back-end that fails it. Left at that, a
//! back-end that missed a write serves the old content for good, and the client was told
//! "stored". So (ours, not Figurehead's):
//!
//! - A [`WriteRule`] says how many back-ends must take a write for it to count as stored:
//!   every one ([`WriteRule::All`]) or a majority. The client's answer ([`Verdict`]) says
//!   "stored" only when the rule is met.
//! - A write one back-end took is sent again to those that did not, in order, until each
//!   takes it (a *lane* per key and back-end). A write no back-end took is withdrawn.
//! - A back-end that lacks a write some other back-end took is *behind* for that key
//!   ([`Replicas::behind`]): reads of the key avoid it ([`super::SlaRouter::route_avoiding`]).
//!   One that refused a write, or that cannot safely be sent it again, stays behind until it
//!   takes a later write that replaces the key's content (`PUT`, `DELETE`).
//! - Writes to one key are decided one at a time, in the order they came, and each lane sends
//!   in that order, so every back-end applies them in the same order.
//! - What is kept to be sent again is bounded in bytes: a write that would pass the bound is
//!   refused before it is sent anywhere ([`Full`]).
//!
//! Sans-IO: the driver sends, reports what each attempt became ([`Replicas::ended`]) and keeps
//! the bodies as the opaque `T`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many back-ends must take a write before it counts as stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteRule {
    /// Every back-end.
    #[default]
    All,
    /// More than half of them (all of two, two of three).
    Majority,
}

impl WriteRule {
    /// The names `--write-rule` takes.
    pub const NAMES: &'static str = "all, majority";

    /// Reads a name from [`WriteRule::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "all" => Some(Self::All),
            "majority" | "quorum" => Some(Self::Majority),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Majority => "majority",
        }
    }

    /// Back-ends of `n` that must take a write.
    pub fn needed(self, n: usize) -> usize {
        match self {
            Self::All => n,
            Self::Majority => n / 2 + 1,
        }
    }
}

/// What became of one attempt at a write on one back-end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempted {
    /// It took it (2xx, 3xx).
    Took,
    /// It refused it (4xx, but 408 and 429): sending it again would be refused again.
    Refused,
    /// It did not take it, and may later; `resend`: whether it may be sent again without
    /// risking that it acts on it twice.
    Failed {
        /// Whether sending it again is safe.
        resend: bool,
    },
}

/// What an attempt became, from the back-end's status (`None`: no answer). A write that
/// replaces or deletes (`idempotent`: `PUT`, `DELETE`) may always be sent again; another
/// (`POST`, `PATCH`) only when the back-end cannot have acted on it: it said so (408, 429,
/// 503; RFC 9110 §15.5.9, RFC 6585 §4, §15.6.4), or the request never `reached` it (the
/// connection failed).
pub fn attempted(status: Option<u16>, idempotent: bool, reached: bool) -> Attempted {
    match status {
        Some(200..=399) => Attempted::Took,
        Some(408 | 429 | 503) => Attempted::Failed { resend: true },
        Some(400..=499) => Attempted::Refused,
        Some(_) => Attempted::Failed { resend: idempotent },
        None => Attempted::Failed { resend: idempotent || !reached },
    }
}

/// What the client is told of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// As many took it as the rule needs: stored (those still without it are sent it again).
    Stored,
    /// Some took it, fewer than the rule needs, and it is sent again to the others until they
    /// take it: accepted, not yet stored.
    Pending,
    /// Some took it, fewer than the rule needs, and too many of the others refused it (or
    /// cannot safely be sent it again) for the rule to be met.
    Diverged,
    /// None took it, and one refused it: the refusal is the answer. Withdrawn.
    Refused,
    /// None took it, none refused it. Withdrawn.
    Failed,
}

/// A write's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteId(pub u64);

/// A write refused before it was sent: what is held to be sent again would pass the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{held} bytes of writes are held for back-ends that do not have them yet, and this one's {size} would pass the bound of {limit}"
)]
pub struct Full {
    /// Bytes held.
    pub held: u64,
    /// This write's size.
    pub size: u64,
    /// The bound.
    pub limit: u64,
}

/// Why a write cannot be admitted now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotNow {
    /// An earlier write to the key is not decided yet: ask again once it is.
    Busy,
    /// The bound on bytes held.
    Full(Full),
}

/// Where one back-end stands with one write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// First in its lane, not sent yet.
    Unsent,
    /// Behind earlier writes in its lane.
    Queued,
    /// On its way.
    Sending,
    Took,
    Refused,
    Failed {
        resend: bool,
    },
}

/// A write and where each back-end stands with it.
#[derive(Debug)]
struct Write<K, T> {
    key: K,
    payload: T,
    size: u64,
    /// The bytes of its key, of those `size` counts (a mark that a back-end lacks the key's
    /// content counts them as held, for as long as it stays).
    key_size: u64,
    replaces: bool,
    status: Vec<Status>,
    /// Whether each back-end's lane still holds it.
    in_lane: Vec<bool>,
    verdict: Option<Verdict>,
    /// Whether a client still waits on its verdict.
    watched: bool,
    /// Attempts sent after each back-end's first.
    resent: Vec<u32>,
}

impl<K, T> Write<K, T> {
    fn took(&self) -> usize {
        self.status.iter().filter(|s| **s == Status::Took).count()
    }

    /// Whether the write is withdrawn (none took it): what lanes still hold of it is dropped.
    fn withdrawn(&self) -> bool {
        matches!(self.verdict, Some(Verdict::Refused | Verdict::Failed))
    }
}

/// What a lane's sender does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<'a, T> {
    /// Send this write (`again`: not for the first time).
    Send {
        /// Which write.
        id: WriteId,
        /// Its payload.
        payload: &'a T,
        /// Whether it was sent to this back-end before.
        again: bool,
    },
    /// The write first in the lane failed here, and whether it is sent again waits on its
    /// verdict: ask again later.
    Wait,
    /// The lane is empty (and gone): the sender stops.
    Done,
}

/// Counts of what one write became, for the client's answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Back-ends that took it.
    pub took: Vec<usize>,
    /// Back-ends it is still to be sent to (again).
    pub owed: Vec<usize>,
    /// Back-ends that will not have it (refused it, or cannot safely be sent it again).
    pub lost: Vec<usize>,
}

/// The writes under way or held over several back-ends, and their lanes.
#[derive(Debug)]
pub struct Replicas<K, T> {
    rule: WriteRule,
    n: usize,
    limit: u64,
    held: u64,
    next_id: u64,
    writes: BTreeMap<WriteId, Write<K, T>>,
    /// Per key, per back-end, the writes it is owed, in order.
    lanes: BTreeMap<K, Vec<VecDeque<WriteId>>>,
    /// Per key, the back-ends that lack a write another took and will not be sent it, and the
    /// bytes the mark counts as held (its key's).
    missing: BTreeMap<K, (BTreeSet<usize>, u64)>,
    /// Per key, the write not yet decided.
    undecided: BTreeMap<K, WriteId>,
    /// Keys with writes held and no mark yet, and the bytes a mark would count for each: set
    /// aside at admission, so that a mark made later (when a back-end fails a write another
    /// took) keeps what is held within the limit. Without it, marks came on top of the writes
    /// admitted up to the limit (a property test found 51 bytes held under a limit of 50).
    reserved: BTreeMap<K, u64>,
    /// Their sum.
    reserved_bytes: u64,
}

impl<K: Ord + Clone, T> Replicas<K, T> {
    /// Writes over `n` back-ends under `rule`, holding at most `limit` bytes of them.
    pub fn new(n: usize, rule: WriteRule, limit: u64) -> Self {
        Self {
            rule,
            n,
            limit,
            held: 0,
            next_id: 0,
            writes: BTreeMap::new(),
            lanes: BTreeMap::new(),
            missing: BTreeMap::new(),
            undecided: BTreeMap::new(),
            reserved: BTreeMap::new(),
            reserved_bytes: 0,
        }
    }

    /// The rule.
    pub fn rule(&self) -> WriteRule {
        self.rule
    }

    /// Bytes held.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Writes back-end `b` is owed that another took (its backlog).
    pub fn owed(&self, b: usize) -> usize {
        self.lanes
            .values()
            .filter_map(|l| l.get(b))
            .flatten()
            .filter(|id| self.writes.get(id).is_some_and(|w| w.took() > 0))
            .count()
    }

    /// Admits a write of `size` bytes to `key` (of `key_size` bytes; `replaces`: it replaces
    /// the key's content whole, as `PUT` and `DELETE` do), carrying `payload`: queued in every
    /// back-end's lane. Returns its number and the back-ends whose lane was empty (their
    /// senders must be started). Refused while an earlier write to `key` is undecided, or if
    /// the bytes held would pass the bound.
    pub fn admit(
        &mut self,
        key: K,
        key_size: u64,
        payload: T,
        size: u64,
        replaces: bool,
    ) -> Result<(WriteId, Vec<usize>), NotNow> {
        if self.undecided.contains_key(&key) {
            return Err(NotNow::Busy);
        }
        let mark = if self.missing.contains_key(&key) || self.reserved.contains_key(&key) { 0 } else { key_size };
        let held = self.held.saturating_add(self.reserved_bytes);
        if held.saturating_add(size).saturating_add(mark) > self.limit {
            return Err(NotNow::Full(Full { held, size, limit: self.limit }));
        }
        if mark > 0 {
            self.reserved.insert(key.clone(), mark);
            self.reserved_bytes += mark;
        }
        let id = WriteId(self.next_id);
        self.next_id += 1;
        let lanes = self.lanes.entry(key.clone()).or_insert_with(|| vec![VecDeque::new(); self.n]);
        let mut start = Vec::new();
        let mut status = Vec::with_capacity(self.n);
        for (b, lane) in lanes.iter_mut().enumerate() {
            if lane.is_empty() {
                start.push(b);
                status.push(Status::Unsent);
            } else {
                status.push(Status::Queued);
            }
            lane.push_back(id);
        }
        self.held += size;
        self.undecided.insert(key.clone(), id);
        let write = Write {
            key,
            payload,
            size,
            key_size,
            replaces,
            status,
            in_lane: vec![true; self.n],
            verdict: None,
            watched: true,
            resent: vec![0; self.n],
        };
        self.writes.insert(id, write);
        self.decide(id);
        Ok((id, start))
    }

    /// What back-end `b`'s sender for `key` does next.
    pub fn next(&mut self, key: &K, b: usize) -> Step<'_, T> {
        loop {
            let Some(&id) = self.lanes.get(key).and_then(|l| l.get(b)).and_then(VecDeque::front) else {
                self.drop_lane(key);
                return Step::Done;
            };
            let w = self.writes.get_mut(&id).expect("a lane holds only writes kept");
            if w.withdrawn() {
                self.pop(key, b, id);
                continue;
            }
            let again = match w.status[b] {
                // A write queued behind others, first in the lane before its verdict, is sent
                // as a first attempt, and the verdict waits on it.
                Status::Unsent | Status::Queued => false,
                // Whether to send it again is the verdict's to say.
                Status::Failed { .. } if w.verdict.is_none() => return Step::Wait,
                Status::Failed { .. } => true,
                Status::Sending => return Step::Wait,
                Status::Took | Status::Refused => {
                    self.pop(key, b, id);
                    continue;
                }
            };
            w.status[b] = Status::Sending;
            if again {
                w.resent[b] += 1;
            }
            let w = &self.writes[&id];
            return Step::Send { id, payload: &w.payload, again };
        }
    }

    /// Back-end `b` answered write `id` to `key` as `how`.
    pub fn ended(&mut self, key: &K, b: usize, id: WriteId, how: Attempted) {
        let Some(w) = self.writes.get_mut(&id) else { return };
        if w.status[b] != Status::Sending {
            return;
        }
        let kept = match how {
            Attempted::Took => {
                w.status[b] = Status::Took;
                false
            }
            Attempted::Refused => {
                w.status[b] = Status::Refused;
                false
            }
            Attempted::Failed { resend } => {
                w.status[b] = Status::Failed { resend };
                resend
            }
        };
        let replaces = w.replaces;
        if !kept {
            self.pop(key, b, id);
        }
        if how == Attempted::Took && replaces {
            // It has the key's content whole again.
            if let Some((m, cost)) = self.missing.get_mut(key) {
                m.remove(&b);
                if m.is_empty() {
                    self.held -= *cost;
                    self.missing.remove(key);
                }
            }
        }
        self.decide(id);
        self.mark_missing(id);
        self.release(id);
    }

    /// The verdict on write `id`, once decided.
    pub fn verdict(&self, id: WriteId) -> Option<Verdict> {
        self.writes.get(&id).and_then(|w| w.verdict)
    }

    /// Where the back-ends stand with write `id`.
    pub fn tally(&self, id: WriteId) -> Tally {
        let mut t = Tally::default();
        if let Some(w) = self.writes.get(&id) {
            for (b, s) in w.status.iter().enumerate() {
                match s {
                    Status::Took => t.took.push(b),
                    _ if w.in_lane[b] && !w.withdrawn() => t.owed.push(b),
                    _ => t.lost.push(b),
                }
            }
        }
        t
    }

    /// The client no longer waits on write `id`: it may go once no lane holds it.
    pub fn forget(&mut self, id: WriteId) {
        if let Some(w) = self.writes.get_mut(&id) {
            w.watched = false;
        }
        self.release(id);
    }

    /// Back-ends a read of `key` must avoid: each lacks a write to it that another took. Empty
    /// if that would be every back-end (then none is known to have the newest content).
    pub fn behind(&self, key: &K) -> Vec<usize> {
        let mut out: BTreeSet<usize> = self.missing.get(key).map(|(m, _)| m.clone()).unwrap_or_default();
        if let Some(lanes) = self.lanes.get(key) {
            for (b, lane) in lanes.iter().enumerate() {
                if lane
                    .iter()
                    .any(|id| self.writes.get(id).is_some_and(|w| w.took() > 0 && w.status[b] != Status::Took))
                {
                    out.insert(b);
                }
            }
        }
        if out.len() >= self.n { Vec::new() } else { out.into_iter().collect() }
    }

    /// Decides write `id` if it can be: the rule is met, or every back-end not queued behind
    /// earlier writes has answered.
    fn decide(&mut self, id: WriteId) {
        let Some(w) = self.writes.get_mut(&id) else { return };
        if w.verdict.is_some() {
            return;
        }
        let took = w.took();
        let verdict = if took >= self.rule.needed(self.n) {
            Verdict::Stored
        } else if w.status.iter().any(|s| matches!(s, Status::Unsent | Status::Sending)) {
            return;
        } else if took == 0 {
            if w.status.contains(&Status::Refused) { Verdict::Refused } else { Verdict::Failed }
        } else {
            let owed = (0..self.n).filter(|&b| w.status[b] != Status::Took && w.in_lane[b]).count();
            if took + owed >= self.rule.needed(self.n) { Verdict::Pending } else { Verdict::Diverged }
        };
        w.verdict = Some(verdict);
        let key = w.key.clone();
        if self.undecided.get(&key) == Some(&id) {
            self.undecided.remove(&key);
        }
        if matches!(verdict, Verdict::Refused | Verdict::Failed) {
            // Withdrawn: no lane sends it (one sending it now cannot be: none is).
            for b in 0..self.n {
                if self.writes[&id].in_lane[b] {
                    self.pop(&key, b, id);
                }
            }
            self.release(id);
        }
    }

    /// Back-ends that will not have write `id`, which another took, are behind for its key
    /// until a later write replaces the content.
    fn mark_missing(&mut self, id: WriteId) {
        let Some(w) = self.writes.get(&id) else { return };
        if w.took() == 0 {
            return;
        }
        let lost: Vec<usize> = (0..self.n)
            .filter(|&b| !w.in_lane[b] && matches!(w.status[b], Status::Refused | Status::Failed { .. }))
            .collect();
        if !lost.is_empty() {
            let (key, cost) = (w.key.clone(), w.key_size);
            if let Some(set_aside) = self.reserved.remove(&key) {
                self.reserved_bytes -= set_aside;
            }
            let (m, _) = self.missing.entry(key).or_insert_with(|| {
                self.held += cost;
                (BTreeSet::new(), cost)
            });
            m.extend(lost);
        }
    }

    /// Takes write `id` out of back-end `b`'s lane for `key`.
    fn pop(&mut self, key: &K, b: usize, id: WriteId) {
        if let Some(lane) = self.lanes.get_mut(key).and_then(|l| l.get_mut(b)) {
            lane.retain(|x| *x != id);
        }
        if let Some(w) = self.writes.get_mut(&id) {
            w.in_lane[b] = false;
        }
    }

    /// Drops `key`'s lanes once all are empty.
    fn drop_lane(&mut self, key: &K) {
        if self.lanes.get(key).is_some_and(|l| l.iter().all(VecDeque::is_empty)) {
            self.lanes.remove(key);
        }
    }

    /// Lets write `id` go once it is decided, no lane holds it and no client waits on it.
    fn release(&mut self, id: WriteId) {
        let done =
            self.writes.get(&id).is_some_and(|w| w.verdict.is_some() && !w.watched && w.in_lane.iter().all(|l| !l));
        if done && let Some(w) = self.writes.remove(&id) {
            self.held -= w.size;
            self.drop_lane(&w.key);
            // No write of the key is left to make a mark: what was set aside for one goes.
            if !self.writes.values().any(|o| o.key == w.key)
                && let Some(set_aside) = self.reserved.remove(&w.key)
            {
                self.reserved_bytes -= set_aside;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn send(r: &mut Replicas<&'static str, u32>, key: &'static str, b: usize) -> (WriteId, bool) {
        match r.next(&key, b) {
            Step::Send { id, again, .. } => (id, again),
            s => panic!("back-end {b}: {s:?}"),
        }
    }

    #[test]
    fn rules_need_all_or_a_majority() {
        assert_eq!([1, 2, 3, 4].map(|n| WriteRule::All.needed(n)), [1, 2, 3, 4]);
        assert_eq!([1, 2, 3, 4, 5].map(|n| WriteRule::Majority.needed(n)), [1, 2, 2, 3, 3]);
        assert_eq!(WriteRule::parse(WriteRule::Majority.name()), Some(WriteRule::Majority));
        assert_eq!(WriteRule::parse("some"), None);
    }

    #[test]
    fn answers_are_classified_by_what_the_back_end_may_have_done() {
        assert_eq!(attempted(Some(204), false, true), Attempted::Took);
        assert_eq!(attempted(Some(409), true, true), Attempted::Refused);
        assert_eq!(attempted(Some(503), false, true), Attempted::Failed { resend: true });
        assert_eq!(attempted(Some(500), false, true), Attempted::Failed { resend: false });
        assert_eq!(attempted(Some(500), true, true), Attempted::Failed { resend: true });
        assert_eq!(attempted(None, false, true), Attempted::Failed { resend: false }, "a POST that timed out");
        assert_eq!(attempted(None, false, false), Attempted::Failed { resend: true }, "never reached");
    }

    /// The case: `a` takes the write, `b` answers 503. Under `all` the client is told
    /// it is pending (not stored), `b` is kept out of reads of the key and sent the write
    /// again until it takes it; then it is stored everywhere and the bytes are let go.
    #[test]
    fn a_laggard_is_behind_until_it_takes_the_write() {
        let mut r = Replicas::new(2, WriteRule::All, 1000);
        let (id, start) = r.admit("/doc", 0, 7, 100, true).unwrap();
        assert_eq!(start, [0, 1]);
        assert_eq!(r.held(), 100);
        assert_eq!(send(&mut r, "/doc", 0), (id, false));
        assert_eq!(send(&mut r, "/doc", 1), (id, false));
        assert_eq!(r.admit("/doc", 0, 8, 1, true), Err(NotNow::Busy), "one write to a key decided at a time");
        r.ended(&"/doc", 0, id, Attempted::Took);
        assert_eq!(r.verdict(id), None, "b has not answered");
        assert_eq!(r.behind(&"/doc"), [1], "a has the write, b not yet");
        r.ended(&"/doc", 1, id, Attempted::Failed { resend: true });
        assert_eq!(r.verdict(id), Some(Verdict::Pending));
        assert_eq!(r.tally(id), Tally { took: vec![0], owed: vec![1], lost: vec![] });
        assert_eq!(r.next(&"/doc", 0), Step::Done);
        assert_eq!(r.owed(1), 1);
        r.forget(id);
        assert_eq!(send(&mut r, "/doc", 1), (id, true), "sent again");
        r.ended(&"/doc", 1, id, Attempted::Failed { resend: true });
        assert_eq!(r.behind(&"/doc"), [1]);
        assert_eq!(send(&mut r, "/doc", 1), (id, true));
        r.ended(&"/doc", 1, id, Attempted::Took);
        assert_eq!(r.behind(&"/doc"), Vec::<usize>::new());
        assert_eq!(r.next(&"/doc", 1), Step::Done);
        assert_eq!((r.held(), r.owed(1)), (0, 0), "let go");
    }

    #[test]
    fn a_majority_is_stored_while_the_laggard_is_still_sent_it() {
        let mut r = Replicas::new(3, WriteRule::Majority, 1000);
        let (id, _) = r.admit("/k", 0, 1, 10, true).unwrap();
        for b in 0..3 {
            send(&mut r, "/k", b);
        }
        r.ended(&"/k", 0, id, Attempted::Took);
        r.ended(&"/k", 2, id, Attempted::Took);
        assert_eq!(r.verdict(id), Some(Verdict::Stored), "two of three, the third still on its way");
        assert_eq!(r.behind(&"/k"), [1]);
        // The next write to the key queues behind it on back-end 1, and goes at once elsewhere.
        let (id2, start) = r.admit("/k", 0, 2, 10, true).unwrap();
        assert_eq!(start, [0, 2]);
        r.ended(&"/k", 1, id, Attempted::Took);
        assert_eq!(send(&mut r, "/k", 1), (id2, false), "queued, then sent in order");
    }

    #[test]
    fn a_write_none_took_is_withdrawn_and_a_refusal_is_the_answer() {
        let mut r = Replicas::new(2, WriteRule::All, 1000);
        let (id, _) = r.admit("/k", 0, 1, 10, false).unwrap();
        send(&mut r, "/k", 0);
        send(&mut r, "/k", 1);
        r.ended(&"/k", 0, id, Attempted::Failed { resend: true });
        assert_eq!(r.next(&"/k", 0), Step::Wait, "sent again only once the verdict says so");
        r.ended(&"/k", 1, id, Attempted::Refused);
        assert_eq!(r.verdict(id), Some(Verdict::Refused));
        assert_eq!(r.next(&"/k", 0), Step::Done, "withdrawn: not sent again");
        assert!(r.behind(&"/k").is_empty(), "no back-end has it");
        r.forget(id);
        assert_eq!(r.held(), 0);
    }

    #[test]
    fn a_back_end_that_refuses_what_another_took_is_behind_until_a_replacing_write() {
        let mut r = Replicas::new(2, WriteRule::All, 1000);
        let (id, _) = r.admit("/k", 0, 1, 10, false).unwrap();
        send(&mut r, "/k", 0);
        send(&mut r, "/k", 1);
        r.ended(&"/k", 0, id, Attempted::Took);
        r.ended(&"/k", 1, id, Attempted::Refused);
        assert_eq!(r.verdict(id), Some(Verdict::Diverged));
        assert_eq!(r.tally(id).lost, [1]);
        r.forget(id);
        assert_eq!(r.behind(&"/k"), [1]);
        let (id2, _) = r.admit("/k", 0, 2, 10, true).unwrap();
        send(&mut r, "/k", 0);
        send(&mut r, "/k", 1);
        r.ended(&"/k", 0, id2, Attempted::Took);
        r.ended(&"/k", 1, id2, Attempted::Took);
        assert_eq!(r.verdict(id2), Some(Verdict::Stored));
        assert!(r.behind(&"/k").is_empty(), "the PUT replaced the content on both");
    }

    /// One step of a driver.
    #[derive(Clone, Debug)]
    enum Op {
        /// A client writes key `.0` (`.1`: a PUT).
        Write(u8, bool),
        /// Back-end `.1`'s sender for key `.0` takes a step, and the attempt ends as `.2`
        /// says (0 took, 1 refused, 2 failed and may be sent again, 3 failed and may not).
        Attempt(u8, usize, u8),
        /// The client of the oldest write still watched stops waiting.
        Forget,
    }

    proptest! {
        /// However attempts end, writes are stored only as the rule says, a withdrawn write is
        /// never taken, each back-end takes a key's writes in the order they came, the bytes
        /// held stay within the bound, and once every lane drains and no client waits, only
        /// back-ends that will never have a write are behind and nothing else is held.
        #[test]
        fn writes_keep_the_rule_the_order_and_the_bound(
            majority in any::<bool>(),
            ops in prop::collection::vec(
                prop_oneof![
                    2 => (0u8..2, any::<bool>()).prop_map(|(k, r)| Op::Write(k, r)),
                    6 => (0u8..2, 0usize..3, 0u8..4).prop_map(|(k, b, o)| Op::Attempt(k, b, o)),
                    1 => Just(Op::Forget),
                ],
                0..120,
            ),
        ) {
            let rule = if majority { WriteRule::Majority } else { WriteRule::All };
            let mut r: Replicas<u8, u64> = Replicas::new(3, rule, 50);
            let mut watched: VecDeque<WriteId> = VecDeque::new();
            let mut took: BTreeMap<WriteId, usize> = BTreeMap::new();
            let mut last: BTreeMap<(u8, usize), WriteId> = BTreeMap::new();
            let how = |o: u8| match o {
                0 => Attempted::Took,
                1 => Attempted::Refused,
                2 => Attempted::Failed { resend: true },
                _ => Attempted::Failed { resend: false },
            };
            let mut attempt = |r: &mut Replicas<u8, u64>, k: u8, b: usize, o: u8, took: &mut BTreeMap<WriteId, usize>| -> Result<bool, TestCaseError> {
                let id = match r.next(&k, b) {
                    Step::Send { id, .. } => id,
                    Step::Wait => return Ok(true),
                    Step::Done => return Ok(false),
                };
                prop_assert!(!matches!(r.verdict(id), Some(Verdict::Refused | Verdict::Failed)), "a withdrawn write was sent");
                r.ended(&k, b, id, how(o));
                if o == 0 {
                    *took.entry(id).or_default() += 1;
                    if let Some(before) = last.insert((k, b), id) {
                        prop_assert!(before < id, "back-end {} took {:?} after {:?}", b, id, before);
                    }
                }
                Ok(true)
            };
            for op in ops {
                match op {
                    Op::Write(k, replaces) => {
                        if let Ok((id, _)) = r.admit(k, 1, 0, 10, replaces) {
                            watched.push_back(id);
                        }
                    }
                    Op::Attempt(k, b, o) => {
                        attempt(&mut r, k, b, o, &mut took)?;
                    }
                    Op::Forget => {
                        if let Some(id) = watched.pop_front() {
                            r.forget(id);
                        }
                    }
                }
                prop_assert!(r.held() + r.reserved_bytes <= 50, "held {} and set aside {}", r.held(), r.reserved_bytes);
                for (&id, &n) in &took {
                    let withdrawn = matches!(r.verdict(id), Some(Verdict::Refused | Verdict::Failed));
                    prop_assert!(!withdrawn, "{:?} withdrawn, yet taken", id);
                    prop_assert!(n <= 3);
                }
                for &id in &watched {
                    if r.verdict(id) == Some(Verdict::Stored) {
                        prop_assert!(took.get(&id).copied().unwrap_or(0) >= rule.needed(3), "{:?} stored, too few took it", id);
                    }
                }
            }
            for id in watched.drain(..) {
                r.forget(id);
            }
            // Every lane drains once its back-end takes what it is sent.
            for _ in 0..200 {
                let mut busy = false;
                for k in 0..2 {
                    for b in 0..3 {
                        busy |= attempt(&mut r, k, b, 0, &mut took)?;
                    }
                }
                if !busy {
                    break;
                }
            }
            for k in 0..2u8 {
                let missing = r.missing.get(&k).map(|(m, _)| m.iter().copied().collect::<Vec<_>>()).unwrap_or_default();
                let behind = if missing.len() >= 3 { Vec::new() } else { missing };
                prop_assert_eq!(r.behind(&k), behind);
            }
            prop_assert!(r.writes.is_empty(), "{} writes still held", r.writes.len());
            prop_assert_eq!(r.held(), r.missing.len() as u64, "only the marks' keys are held");
            prop_assert_eq!(r.reserved_bytes, 0, "nothing set aside once no write is held");
        }
    }

    #[test]
    fn the_bytes_held_are_bounded() {
        let mut r = Replicas::new(2, WriteRule::All, 150);
        let (id, _) = r.admit("/a", 0, 1, 100, true).unwrap();
        assert_eq!(r.admit("/b", 0, 2, 60, true), Err(NotNow::Full(Full { held: 100, size: 60, limit: 150 })));
        send(&mut r, "/a", 0);
        send(&mut r, "/a", 1);
        r.ended(&"/a", 0, id, Attempted::Took);
        r.ended(&"/a", 1, id, Attempted::Took);
        assert_eq!(r.held(), 100, "the client still waits on its verdict");
        r.forget(id);
        assert!(r.admit("/b", 0, 2, 60, true).is_ok());
    }
}
