//! Deadline-aware block writes (Dou 2011 ch. 2; notes 003 §2.1, §3.1, §7.1): streams append
//! small records, each due on stable storage by its deadline, and the device takes whole blocks
//! at a fixed cost per write. The scheduler decides, each time the device is free, which records
//! make up the next block.
//!
//! - [`BlockPolicy::Fifo`] and [`BlockPolicy::Edf`]: the thesis's baselines, one record a block,
//!   in order of arrival or of deadline.
//! - [`BlockPolicy::GEdf`] (§2.3.2): the earliest deadline's stream, and as many of its next
//!   records as fit in the block with it.
//! - [`BlockPolicy::RgEdf`] (§2.3.3): G-EDF, except that the next stream's group goes first when it
//!   is fuller and the earliest deadline has room to wait for it.
//! - The modern peers' rules, for comparison: [`BlockPolicy::Linger`] (Kafka's `batch.size` and
//!   `linger.ms`), [`BlockPolicy::GroupCommit`] (a database log: whatever waits, in arrival order,
//!   every stream together) and [`BlockPolicy::MqDeadline`] (Linux's mq-deadline: an elevator over
//!   the log's positions, in batches, broken off for a request past its expiry).
//!
//! A stream is a log: its records are written in the order they were offered, so a block holds a
//! run of one stream's consecutive records (except under group commit, which mixes streams).
//!
//! # Structure
//!
//! The thesis kept every request in one binary heap by deadline and scanned the heap for a
//! group; on its 8051 the scan cost more than the grouping won (notes 003 §5.1). Here each stream
//! has a queue, and an ordered index over the streams (a `BTreeSet`, which is a heap that can
//! also be walked to its second element) gives the earliest in O(log streams); a group is the
//! front of one queue. A stream's key is the earliest deadline among its records (or its
//! oldest arrival), found by a scan of its queue when the queue changes: queues are short (the
//! scheduler is bounded), and deadlines need not be in order within a stream. What the thesis's structure would have cost is the simulator's to charge
//! (`sim::models::flash`), not this code's.
//!
//! # Errata and choices
//!
//! - **RG-EDF's slack condition** is printed as `t_{i,k} > now + write_time + buffer_time`, with
//!   `t_{i,k}` the request's *issue* time, which is never in the future, so the reordering could
//!   never happen. The default ([`Slack::Corrected`]) reads it as the absolute deadline, and
//!   leaves room for both writes, the other stream's and then this one's:
//!   `deadline > now + 2·write_time + extra + buffer_time`, where `extra` is what the driver
//!   knows the two writes will take beyond `write_time` ([`Ahead`]: a first write into a new
//!   sector, 60–140 ms on the thesis's SD card, whose block number the driver knows and the
//!   scheduler does not; [`BlockScheduler::next_write_with`]) and `buffer_time` the margin for
//!   what it cannot know (longer writes, CPU time between them). Folding the sector's
//!   penalty into `buffer_time` for every write, as the notes suggest, would forbid reordering
//!   altogether at the thesis's 70 ms deadlines (158 ms of room needed). [`Slack::Printed`] is
//!   the formula as printed (RG-EDF is then G-EDF, which a test checks).
//! - **The group-size comparison** is strict, as printed: the other group goes first only if it
//!   is larger.
//! - **Only one other group** is considered: the next stream by deadline, as the thesis's
//!   implementation does.
//! - **Dropping predicted misses** (an option, as in the thesis): the records of a chosen block
//!   whose deadline falls before the write would end (`now + write_time`) are dropped and
//!   counted; the rest are written. A pass whose records are all dropped counts toward
//!   mq-deadline's batch. The thesis does not say what a stream's urgency is when its
//!   deadlines are not in order; here it is the earliest deadline among its queued records.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::Nanos;

/// Which records make up the next block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockPolicy {
    /// One record a block, oldest first (Dou's FIFO baseline).
    Fifo,
    /// One record a block, earliest deadline first (Dou's EDF).
    Edf,
    /// Grouped EDF (Dou §2.3.2).
    GEdf,
    /// Reordering grouped EDF (Dou §2.3.3).
    RgEdf,
    /// Kafka's producer batching: a stream's records go once they fill a block, or once the
    /// oldest has waited `linger` (Kafka's `linger.ms`; the block is its `batch.size`).
    Linger {
        /// How long a batch that is not full may wait.
        linger: Nanos,
    },
    /// A database's group commit: every record waiting, of any stream, oldest first, up to a
    /// block.
    GroupCommit,
    /// Linux's mq-deadline, with the log's position (stream, then sequence) as the sector: blocks
    /// are written in ascending position, `fifo_batch` at a time; a batch starts at the oldest
    /// record instead once that record has waited `write_expire`. The requests' own deadlines
    /// are not read. Only writes exist here, so the rule that keeps writes from starving reads
    /// has nothing to act on.
    MqDeadline {
        /// Blocks a batch writes before the expiry is looked at again (Linux: 16).
        fifo_batch: u32,
        /// How long a record waits before it is served out of position (Linux: 5 s).
        write_expire: Nanos,
    },
}

impl BlockPolicy {
    /// Every policy, with the peers' parameters at the given values.
    pub fn all(linger: Nanos, write_expire: Nanos) -> [Self; 7] {
        [
            Self::Fifo,
            Self::Edf,
            Self::GEdf,
            Self::RgEdf,
            Self::Linger { linger },
            Self::GroupCommit,
            Self::MqDeadline { fifo_batch: 16, write_expire },
        ]
    }

    /// Its name in reports and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Edf => "edf",
            Self::GEdf => "g-edf",
            Self::RgEdf => "rg-edf",
            Self::Linger { .. } => "linger",
            Self::GroupCommit => "group-commit",
            Self::MqDeadline { .. } => "mq-deadline",
        }
    }

    /// Whether streams are ordered by deadline (else by arrival).
    fn by_deadline(self) -> bool {
        matches!(self, Self::Edf | Self::GEdf | Self::RgEdf)
    }
}

/// RG-EDF's condition for letting another stream's group go first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Slack {
    /// `deadline > now + 2·write_time + buffer_time` (see the module's errata).
    #[default]
    Corrected,
    /// As printed: `issue time > now + write_time + buffer_time`.
    Printed,
}

/// The scheduler's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockConfig {
    /// Bytes a block holds for records (the thesis's SD card: 512): a device's block less any
    /// header the driver writes into it.
    pub block_size: u32,
    /// What one block write is expected to take (the thesis: 9–13 ms).
    pub write_time: Nanos,
    /// RG-EDF's margin beyond two writes of `write_time` (default 8 ms: the thesis's card takes
    /// 9–13 ms a write, so two can take 8 ms more; the thesis gives no value). A new sector's
    /// first write is added only where one is coming (see the module's errata).
    pub buffer_time: Nanos,
    /// RG-EDF's slack condition.
    pub slack: Slack,
    /// Drop the records of a block that would miss their deadlines, instead of writing them.
    pub drop_predicted_misses: bool,
    /// Records held at most; an offer beyond is refused (the thesis's "scheduler saturation").
    pub capacity: usize,
}

impl Default for BlockConfig {
    /// 512-byte blocks, 9 ms writes, 8 ms buffer time, the corrected slack, no dropping, 24
    /// records (what fits in the 8051's ~1.5 KB of buffer at 64 bytes a record).
    fn default() -> Self {
        Self {
            block_size: 512,
            write_time: Nanos::from_millis(9),
            buffer_time: Nanos::from_millis(8),
            slack: Slack::Corrected,
            drop_predicted_misses: false,
            capacity: 24,
        }
    }
}

/// A record offered for writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its stream.
    pub stream: u32,
    /// Bytes it takes in a block (with any framing).
    pub size: u32,
    /// When it must be on stable storage.
    pub deadline: Nanos,
}

/// A record the scheduler holds or has handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    /// Its stream.
    pub stream: u32,
    /// Its number within its stream, from 0, in order of offer (refused offers take none).
    pub seq: u64,
    /// Bytes it takes in a block.
    pub size: u32,
    /// When it must be on stable storage.
    pub deadline: Nanos,
    /// When it was offered.
    pub offered: Nanos,
    /// Its number among all records offered, from 0.
    arrival: u64,
}

/// Why an offer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The scheduler holds [`BlockConfig::capacity`] records.
    #[error("the scheduler is full ({0} records held)")]
    Full(usize),
    /// The record is larger than a block.
    #[error("a record of {size} bytes does not fit in a {block}-byte block")]
    TooLarge {
        /// The record's size.
        size: u32,
        /// The block's.
        block: u32,
    },
}

/// What the driver knows of the next two writes beyond [`BlockConfig::write_time`] each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ahead {
    /// Extra time the next write will take (a new sector's first write).
    pub first: Nanos,
    /// Extra time until the write after it is done: its own penalty, and any time the driver
    /// knows it will spend between the two (a node's CPU converting and choosing).
    pub second: Nanos,
}

/// The next block to write: records in the order they go into it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Write {
    /// The records.
    pub records: Vec<Queued>,
    /// Their bytes.
    pub bytes: u32,
}

/// What the scheduler has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockStats {
    /// Records accepted.
    pub accepted: u64,
    /// Offers refused because the scheduler was full.
    pub refused_full: u64,
    /// Records dropped as predicted misses.
    pub dropped_late: u64,
    /// Blocks handed out.
    pub writes: u64,
    /// Blocks RG-EDF gave to another stream than the earliest deadline's.
    pub reordered: u64,
}

#[derive(Debug, Default)]
struct Stream {
    queue: VecDeque<Queued>,
    /// Its place in the index, if it has records.
    key: Option<u64>,
}

/// Deadline-aware block scheduling (see the module documentation).
#[derive(Debug)]
pub struct BlockScheduler {
    policy: BlockPolicy,
    cfg: BlockConfig,
    /// Streams by id: mq-deadline's positions.
    streams: BTreeMap<u32, Stream>,
    /// Streams with records, by the policy's key (earliest deadline, or oldest arrival), then id.
    index: BTreeSet<(u64, u32)>,
    len: usize,
    next_arrival: u64,
    next_seq: BTreeMap<u32, u64>,
    /// mq-deadline: the stream last written, and blocks written in the batch so far.
    cursor: Option<u32>,
    batch: u32,
    dropped: Vec<Queued>,
    stats: BlockStats,
}

impl BlockScheduler {
    /// A scheduler with nothing queued.
    pub fn new(policy: BlockPolicy, cfg: BlockConfig) -> Self {
        Self {
            policy,
            cfg,
            streams: BTreeMap::new(),
            index: BTreeSet::new(),
            len: 0,
            next_arrival: 0,
            next_seq: BTreeMap::new(),
            cursor: None,
            batch: 0,
            dropped: Vec::new(),
            stats: BlockStats::default(),
        }
    }

    /// Its policy.
    pub fn policy(&self) -> BlockPolicy {
        self.policy
    }

    /// Its settings.
    pub fn config(&self) -> &BlockConfig {
        &self.cfg
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What it has done so far.
    pub fn stats(&self) -> BlockStats {
        self.stats
    }

    /// Records dropped as predicted misses since the last call.
    pub fn take_dropped(&mut self) -> Vec<Queued> {
        std::mem::take(&mut self.dropped)
    }

    /// Takes a record in, or refuses it (counted when full). Returns its number in its stream.
    ///
    /// `now` is when the record arrived: a driver that queues records before offering them (a
    /// writer thread busy with a write) passes the time each was appended, so that linger and
    /// mq-deadline count its age from then.
    pub fn offer(&mut self, r: Record, now: Nanos) -> Result<u64, Refused> {
        if r.size > self.cfg.block_size {
            return Err(Refused::TooLarge { size: r.size, block: self.cfg.block_size });
        }
        if self.len >= self.cfg.capacity {
            self.stats.refused_full += 1;
            return Err(Refused::Full(self.len));
        }
        let seq = self.next_seq.entry(r.stream).or_insert(0);
        let q = Queued {
            stream: r.stream,
            seq: *seq,
            size: r.size,
            deadline: r.deadline,
            offered: now,
            arrival: self.next_arrival,
        };
        *seq += 1;
        self.next_arrival += 1;
        self.len += 1;
        self.stats.accepted += 1;
        self.streams.entry(r.stream).or_default().queue.push_back(q);
        self.rekey(r.stream);
        Ok(q.seq)
    }

    /// When the scheduler will have a block to hand out with nothing new offered, if it holds
    /// records and will not hand one out now (a lingering batch): the driver may sleep until
    /// then.
    pub fn wake_at(&self, now: Nanos) -> Option<Nanos> {
        let BlockPolicy::Linger { linger } = self.policy else {
            return None;
        };
        let oldest = self.streams.values().filter_map(|s| s.queue.front()).map(|q| q.offered).min()?;
        let at = Nanos(oldest.0.saturating_add(linger.0));
        (at > now).then_some(at)
    }

    /// The next block to write, called when the device is free; `None` when nothing is held or
    /// the policy would rather wait (see [`Self::wake_at`]).
    #[must_use = "the records handed out have left the scheduler"]
    pub fn next_write(&mut self, now: Nanos) -> Option<Write> {
        self.next_write_with(now, Ahead::default())
    }

    /// [`Self::next_write`], where the driver knows that the next writes will take longer than
    /// [`BlockConfig::write_time`] (a first write into a new sector, whose block number the
    /// driver knows and the scheduler does not): RG-EDF's slack is measured with it.
    ///
    /// A predicted miss is judged without it. Some block has to pay a new sector's penalty, and
    /// where the penalty is longer than the deadlines (the thesis's 60–140 ms against 70 ms),
    /// counting it would drop every record offered to that write, for ever: the device would
    /// never reach the new sector.
    #[must_use = "the records handed out have left the scheduler"]
    pub fn next_write_with(&mut self, now: Nanos, ahead: Ahead) -> Option<Write> {
        let done_by = now.0.saturating_add(self.cfg.write_time.0);
        loop {
            let (chosen, reordered) = self.choose(now, ahead)?;
            let mut write = Write::default();
            for q in chosen {
                if self.cfg.drop_predicted_misses && q.deadline.0 < done_by {
                    self.stats.dropped_late += 1;
                    self.dropped.push(q);
                } else {
                    write.bytes += q.size;
                    write.records.push(q);
                }
            }
            if !write.records.is_empty() {
                self.stats.writes += 1;
                self.stats.reordered += u64::from(reordered);
                return Some(write);
            }
        }
    }

    /// Takes the records of the next block out of the queues, and says whether RG-EDF gave the
    /// block to another stream than the earliest deadline's.
    fn choose(&mut self, now: Nanos, ahead: Ahead) -> Option<(Vec<Queued>, bool)> {
        let &(_, first) = self.index.first()?;
        let block = self.cfg.block_size;
        let mut reordered = false;
        let taken = match self.policy {
            BlockPolicy::Fifo | BlockPolicy::Edf => self.take(first, 1, block),
            BlockPolicy::GEdf => self.take(first, usize::MAX, block),
            BlockPolicy::RgEdf => {
                let other = self.index.iter().nth(1).map(|&(_, s)| s);
                let head = *self.streams[&first].queue.front().expect("an indexed stream has records");
                let slack = match self.cfg.slack {
                    Slack::Corrected => {
                        let earliest = self.earliest_deadline(first);
                        let both = 2 * self.cfg.write_time.0 + ahead.first.0 + ahead.second.0;
                        earliest.0 > now.0 + both + self.cfg.buffer_time.0
                    }
                    Slack::Printed => {
                        head.offered.0 > now.0 + self.cfg.write_time.0 + ahead.first.0 + self.cfg.buffer_time.0
                    }
                };
                let stream = match other {
                    Some(j) if slack && self.group_bytes(first) < self.group_bytes(j) => {
                        reordered = true;
                        j
                    }
                    _ => first,
                };
                self.take(stream, usize::MAX, block)
            }
            BlockPolicy::Linger { linger } => {
                // The oldest batch that is full or has waited long enough.
                let ready = self.index.iter().map(|&(_, s)| s).find(|&s| {
                    let queue = &self.streams[&s].queue;
                    // Full: the block is filled, or the next record would not fit in it.
                    let group = self.group_bytes(s);
                    let full =
                        group == block || queue.iter().map(|q| u64::from(q.size)).sum::<u64>() > u64::from(group);
                    full || queue.front().is_some_and(|q| now.0.saturating_sub(q.offered.0) >= linger.0)
                })?;
                self.take(ready, usize::MAX, block)
            }
            BlockPolicy::GroupCommit => {
                let mut all = Vec::new();
                let mut room = block;
                while let Some(&(_, s)) = self.index.first() {
                    let next = self.streams[&s].queue.front().expect("an indexed stream has records");
                    if next.size > room {
                        break;
                    }
                    room -= next.size;
                    all.extend(self.take(s, 1, block));
                }
                all
            }
            BlockPolicy::MqDeadline { fifo_batch, write_expire } => {
                let oldest = *self.streams[&first].queue.front().expect("an indexed stream has records");
                let expired = now.0.saturating_sub(oldest.offered.0) >= write_expire.0;
                // A batch ends after `fifo_batch` blocks, or where nothing lies ahead of the
                // cursor; the next starts at the oldest record if it has expired or if the sweep
                // would have to wrap round (Linux's `deadline_check_fifo(...) || !next_rq`).
                let ahead_of_cursor = self.after_cursor();
                let stream = match ahead_of_cursor {
                    Some(s) if self.batch < fifo_batch => s,
                    Some(s) if !expired => {
                        self.batch = 0;
                        s
                    }
                    _ => {
                        self.batch = 0;
                        first
                    }
                };
                self.batch += 1;
                self.cursor = Some(stream);
                self.take(stream, usize::MAX, block)
            }
        };
        Some((taken, reordered))
    }

    /// mq-deadline's next position: the first stream with records at or after the cursor (none
    /// before the first block).
    fn after_cursor(&self) -> Option<u32> {
        let from = self.cursor?;
        self.streams.range(from..).find_map(|(&id, s)| (!s.queue.is_empty()).then_some(id))
    }

    /// Bytes of the group a block would take from `stream`'s front.
    fn group_bytes(&self, stream: u32) -> u32 {
        let mut bytes = 0;
        for q in &self.streams[&stream].queue {
            if bytes + q.size > self.cfg.block_size {
                break;
            }
            bytes += q.size;
        }
        bytes
    }

    fn earliest_deadline(&self, stream: u32) -> Nanos {
        self.streams[&stream].queue.iter().map(|q| q.deadline).min().expect("an indexed stream has records")
    }

    /// Takes up to `count` records from `stream`'s front that fit in `room` bytes together.
    fn take(&mut self, stream: u32, count: usize, mut room: u32) -> Vec<Queued> {
        let queue = &mut self.streams.get_mut(&stream).expect("a known stream").queue;
        let mut out = Vec::new();
        while out.len() < count {
            match queue.front() {
                Some(q) if q.size <= room => {
                    room -= q.size;
                    out.push(queue.pop_front().expect("just seen"));
                }
                _ => break,
            }
        }
        self.len -= out.len();
        self.rekey(stream);
        out
    }

    /// Puts `stream` back in the index under its current key.
    fn rekey(&mut self, stream: u32) {
        let s = self.streams.get_mut(&stream).expect("a known stream");
        if let Some(old) = s.key.take() {
            self.index.remove(&(old, stream));
        }
        let key = if self.policy.by_deadline() {
            s.queue.iter().map(|q| q.deadline.0).min()
        } else {
            s.queue.front().map(|q| q.arrival)
        };
        if let Some(key) = key {
            s.key = Some(key);
            self.index.insert((key, stream));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(stream: u32, size: u32, deadline_ms: u64) -> Record {
        Record { stream, size, deadline: Nanos::from_millis(deadline_ms) }
    }

    fn ids(w: &Write) -> Vec<(u32, u64)> {
        w.records.iter().map(|q| (q.stream, q.seq)).collect()
    }

    #[test]
    fn g_edf_groups_the_earliest_streams_next_records_into_one_block() {
        let mut s = BlockScheduler::new(BlockPolicy::GEdf, BlockConfig { capacity: 100, ..BlockConfig::default() });
        for k in 0..10 {
            s.offer(rec(1, 64, 100 + k), Nanos::ZERO).unwrap();
            s.offer(rec(2, 64, 50 + k), Nanos::ZERO).unwrap();
        }
        let w = s.next_write(Nanos::ZERO).unwrap();
        assert_eq!(ids(&w), (0..8).map(|k| (2, k)).collect::<Vec<_>>(), "stream 2 is due first; 8 × 64 B fill 512");
        assert_eq!(w.bytes, 512);
        let w = s.next_write(Nanos::ZERO).unwrap();
        assert_eq!(ids(&w), [(2, 8), (2, 9)]);
    }

    #[test]
    fn rg_edf_lets_a_fuller_group_go_first_only_with_slack() {
        let cfg = BlockConfig { capacity: 100, ..BlockConfig::default() };
        let offer = |s: &mut BlockScheduler, due_ms| {
            s.offer(rec(1, 64, due_ms), Nanos::ZERO).unwrap();
            for k in 0..6 {
                s.offer(rec(2, 64, due_ms + 10 + k), Nanos::ZERO).unwrap();
            }
        };
        // Stream 1's one record is due in 500 ms: room for two writes and the buffer time.
        let mut s = BlockScheduler::new(BlockPolicy::RgEdf, cfg);
        offer(&mut s, 500);
        assert_eq!(s.next_write(Nanos::ZERO).unwrap().records.len(), 6, "the fuller group went first");
        assert_eq!(s.stats().reordered, 1);
        // Due in 150 ms: room for 2 × 9 ms + 8 ms, but not for a new sector's 140 ms as well.
        let mut s = BlockScheduler::new(BlockPolicy::RgEdf, cfg);
        offer(&mut s, 150);
        let sector = Ahead { first: Nanos::ZERO, second: Nanos::from_millis(140) };
        assert_eq!(ids(&s.next_write_with(Nanos::ZERO, sector).unwrap()), [(1, 0)]);
        // Due in 20 ms: no room for two writes.
        let mut s = BlockScheduler::new(BlockPolicy::RgEdf, cfg);
        offer(&mut s, 20);
        assert_eq!(ids(&s.next_write(Nanos::ZERO).unwrap()), [(1, 0)]);
        // The printed condition (issue time in the future) never holds.
        let mut s = BlockScheduler::new(BlockPolicy::RgEdf, BlockConfig { slack: Slack::Printed, ..cfg });
        offer(&mut s, 500);
        assert_eq!(ids(&s.next_write(Nanos::ZERO).unwrap()), [(1, 0)]);
    }

    #[test]
    fn fifo_and_edf_write_one_record_a_block() {
        for (policy, first) in [(BlockPolicy::Fifo, 1), (BlockPolicy::Edf, 2)] {
            let mut s = BlockScheduler::new(policy, BlockConfig::default());
            s.offer(rec(1, 64, 90), Nanos::ZERO).unwrap();
            s.offer(rec(1, 64, 95), Nanos::ZERO).unwrap();
            s.offer(rec(2, 64, 80), Nanos::ZERO).unwrap();
            let w = s.next_write(Nanos::ZERO).unwrap();
            assert_eq!(w.records.len(), 1, "{policy:?}");
            assert_eq!(w.records[0].stream, first, "{policy:?}");
        }
    }

    #[test]
    fn a_full_scheduler_refuses_and_counts_and_an_oversized_record_is_refused() {
        let mut s = BlockScheduler::new(BlockPolicy::Fifo, BlockConfig { capacity: 2, ..BlockConfig::default() });
        s.offer(rec(1, 64, 90), Nanos::ZERO).unwrap();
        s.offer(rec(1, 64, 90), Nanos::ZERO).unwrap();
        assert_eq!(s.offer(rec(1, 64, 90), Nanos::ZERO), Err(Refused::Full(2)));
        assert_eq!(s.offer(rec(1, 513, 90), Nanos::ZERO), Err(Refused::TooLarge { size: 513, block: 512 }));
        assert_eq!(s.stats().refused_full, 1);
        assert_eq!(s.stats().accepted, 2);
        assert_eq!(
            s.offer(rec(2, 64, 90), Nanos::ZERO).unwrap_err().to_string(),
            "the scheduler is full (2 records held)"
        );
    }

    #[test]
    fn predicted_misses_are_dropped_and_the_rest_written() {
        let cfg = BlockConfig { drop_predicted_misses: true, capacity: 10, ..BlockConfig::default() };
        let mut s = BlockScheduler::new(BlockPolicy::GEdf, cfg);
        s.offer(rec(1, 64, 5), Nanos::ZERO).unwrap(); // due before a 9 ms write ends
        s.offer(rec(1, 64, 50), Nanos::ZERO).unwrap();
        let w = s.next_write(Nanos::ZERO).unwrap();
        assert_eq!(ids(&w), [(1, 1)]);
        assert_eq!(s.take_dropped().iter().map(|q| q.seq).collect::<Vec<_>>(), [0]);
        assert_eq!(s.stats().dropped_late, 1);
        assert!(s.is_empty());
    }

    #[test]
    fn linger_waits_for_a_full_block_or_the_linger_time() {
        let linger = Nanos::from_millis(20);
        let mut s = BlockScheduler::new(
            BlockPolicy::Linger { linger },
            BlockConfig { capacity: 100, ..BlockConfig::default() },
        );
        s.offer(rec(1, 64, 1000), Nanos::ZERO).unwrap();
        assert_eq!(s.next_write(Nanos::from_millis(5)), None);
        assert_eq!(s.wake_at(Nanos::from_millis(5)), Some(linger));
        assert_eq!(s.next_write(linger).unwrap().records.len(), 1);
        for _ in 0..8 {
            s.offer(rec(2, 64, 1000), Nanos::from_millis(30)).unwrap();
        }
        assert_eq!(s.next_write(Nanos::from_millis(30)).unwrap().bytes, 512, "a full block goes at once");
    }

    #[test]
    fn group_commit_mixes_streams_in_arrival_order() {
        let mut s =
            BlockScheduler::new(BlockPolicy::GroupCommit, BlockConfig { capacity: 100, ..BlockConfig::default() });
        for k in 0..10 {
            s.offer(rec(k % 3, 64, 1000), Nanos::ZERO).unwrap();
        }
        let w = s.next_write(Nanos::ZERO).unwrap();
        assert_eq!(w.records.iter().map(|q| q.stream).collect::<Vec<_>>(), [0, 1, 2, 0, 1, 2, 0, 1]);
    }

    #[test]
    fn mq_deadline_sweeps_positions_and_breaks_off_for_an_expired_record() {
        let policy = BlockPolicy::MqDeadline { fifo_batch: 2, write_expire: Nanos::from_millis(100) };
        let cfg = BlockConfig { capacity: 100, block_size: 64, ..BlockConfig::default() };
        let ms = Nanos::from_millis;
        let at = |s: &mut BlockScheduler, t| s.next_write(ms(t)).unwrap().records[0].stream;
        let setup = || {
            let mut s = BlockScheduler::new(policy, cfg);
            s.offer(rec(3, 64, 0), ms(0)).unwrap();
            s.offer(rec(1, 64, 0), ms(1)).unwrap();
            assert_eq!(at(&mut s, 2), 3, "the first batch starts at the oldest");
            for stream in [4, 5, 6] {
                s.offer(rec(stream, 64, 0), ms(2)).unwrap();
            }
            assert_eq!(at(&mut s, 3), 4, "then the sweep goes on upwards");
            s
        };
        // The batch of two is over: stream 1's record, 149 ms old, has expired.
        assert_eq!(at(&mut setup(), 150), 1);
        // Not yet expired: the sweep goes on, and where nothing lies ahead a batch starts at
        // the oldest instead of wrapping round.
        let mut s = setup();
        assert_eq!([at(&mut s, 50), at(&mut s, 51), at(&mut s, 52)], [5, 6, 1]);
    }

    fn policies() -> impl Strategy<Value = BlockPolicy> {
        prop_oneof![
            Just(BlockPolicy::Fifo),
            Just(BlockPolicy::Edf),
            Just(BlockPolicy::GEdf),
            Just(BlockPolicy::RgEdf),
            (0u64..50).prop_map(|ms| BlockPolicy::Linger { linger: Nanos::from_millis(ms) }),
            Just(BlockPolicy::GroupCommit),
            (1u32..4, 0u64..100)
                .prop_map(|(b, ms)| BlockPolicy::MqDeadline { fifo_batch: b, write_expire: Nanos::from_millis(ms) }),
        ]
    }

    proptest! {
        /// Under every policy: every accepted record is handed out once (written or dropped),
        /// each stream's in order; no block is over-full; only group commit mixes streams; FIFO
        /// and EDF write one record a block; the scheduler never holds more than its capacity.
        #[test]
        fn every_record_leaves_once_in_its_streams_order(
            policy in policies(),
            drop in any::<bool>(),
            capacity in 1usize..20,
            steps in proptest::collection::vec((0u32..4, 1u32..300, 0u64..200, 0u8..3), 1..150),
        ) {
            let cfg = BlockConfig { capacity, drop_predicted_misses: drop, ..BlockConfig::default() };
            let mut s = BlockScheduler::new(policy, cfg);
            let mut now = Nanos::ZERO;
            let mut accepted = Vec::new();
            let mut out: Vec<Queued> = Vec::new();
            // The highest number of each stream that has left so far.
            let mut last: BTreeMap<u32, u64> = BTreeMap::new();
            let mut check = |w: Option<Write>, dropped: Vec<Queued>, out: &mut Vec<Queued>| -> Result<(), TestCaseError> {
                let mut leaving = dropped;
                if let Some(w) = w {
                    prop_assert!(w.bytes <= cfg.block_size);
                    prop_assert_eq!(w.bytes, w.records.iter().map(|q| q.size).sum::<u32>());
                    if policy != BlockPolicy::GroupCommit {
                        prop_assert!(w.records.iter().all(|q| q.stream == w.records[0].stream));
                    }
                    if matches!(policy, BlockPolicy::Fifo | BlockPolicy::Edf) {
                        prop_assert_eq!(w.records.len(), 1);
                    }
                    leaving.extend(w.records);
                }
                // What leaves now comes after all that left before, in each stream.
                for q in &leaving {
                    prop_assert!(last.get(&q.stream).is_none_or(|&l| q.seq > l), "{:?} after {:?}", q, last.get(&q.stream));
                }
                for q in &leaving {
                    let l = last.entry(q.stream).or_insert(q.seq);
                    *l = (*l).max(q.seq);
                }
                out.extend(leaving);
                Ok(())
            };
            for (stream, size, due, action) in steps {
                now = Nanos(now.0 + 3_000_000);
                if action > 0 {
                    if let Ok(seq) = s.offer(Record { stream, size, deadline: Nanos(now.0 + due * 1_000_000) }, now) {
                        accepted.push((stream, seq));
                    }
                } else {
                    let w = s.next_write(now);
                    check(w, s.take_dropped(), &mut out)?;
                }
                prop_assert!(s.len() <= capacity);
            }
            // Drain: time moves on, so that lingering batches go.
            while !s.is_empty() {
                now = Nanos(now.0 + 100_000_000);
                loop {
                    let w = s.next_write(now);
                    let more = w.is_some();
                    check(w, s.take_dropped(), &mut out)?;
                    if !more {
                        break;
                    }
                }
            }
            let mut left: Vec<(u32, u64)> = out.iter().map(|q| (q.stream, q.seq)).collect();
            left.sort_unstable();
            accepted.sort_unstable();
            prop_assert_eq!(left, accepted);
            if !drop {
                prop_assert_eq!(s.stats().dropped_late, 0);
            }
        }

        /// With the slack condition as printed, RG-EDF never reorders: it is G-EDF.
        #[test]
        fn rg_edf_as_printed_is_g_edf(
            steps in proptest::collection::vec((0u32..4, 1u32..200, 0u64..300, any::<bool>()), 1..120),
        ) {
            let cfg = BlockConfig { capacity: 50, slack: Slack::Printed, ..BlockConfig::default() };
            let mut a = BlockScheduler::new(BlockPolicy::RgEdf, cfg);
            let mut b = BlockScheduler::new(BlockPolicy::GEdf, cfg);
            let mut now = Nanos::ZERO;
            for (stream, size, due, write) in steps {
                now = Nanos(now.0 + 5_000_000);
                if write {
                    prop_assert_eq!(a.next_write(now), b.next_write(now));
                } else {
                    let r = Record { stream, size, deadline: Nanos(now.0 + due * 1_000_000) };
                    prop_assert_eq!(a.offer(r, now), b.offer(r, now));
                }
            }
            prop_assert_eq!(a.stats().reordered, 0);
        }
    }
}
