//! The writer: one thread per device, owning the core's block scheduler, and the application's
//! handle on it.
//!
//! The thread runs the thesis's two-state loop (Dou §2.4, Fig. 2.5, with the states in the
//! order notes 003 §2.1 infers): take in every record that has arrived (offer it to the
//! scheduler), then, the device being free, ask the scheduler for the next block, write exactly
//! that block, and report each of its records durable. When the scheduler has nothing to hand
//! out it sleeps until a record arrives or until the scheduler's own wake time (a lingering
//! batch). Which records go into a block, and when, is never decided here.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use switchyard_core::Nanos;
use switchyard_core::order::BlockScheduler;
use switchyard_core::order::blocks::{Ahead, BlockConfig, BlockPolicy, Queued, Record, Refused};

use crate::device::{BlockBuf, Device, DeviceError, DeviceInfo, Pacing};
use crate::frame;

/// How a log is written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogConfig {
    /// Which records make up each block.
    pub policy: BlockPolicy,
    /// Bytes of a device block: a power of two from 512 bytes to 1 MiB.
    pub block_size: usize,
    /// What the scheduler expects a block write to take (RG-EDF's slack, the drop prediction).
    pub write_time: Duration,
    /// RG-EDF's margin beyond two writes of `write_time`. A paced device's sector penalty is
    /// added only before the writes that pay it ([`Pacing::ahead`]).
    pub buffer_time: Duration,
    /// Drop records the scheduler predicts will miss, instead of writing them late.
    pub drop_predicted_misses: bool,
    /// Records held at most; an append beyond is refused.
    pub capacity: usize,
    /// Emulate a slow device.
    pub pacing: Option<Pacing>,
    /// Overwrite a non-empty regular file even if it is not a blocklog of `block_size` blocks
    /// (by default such a file is refused: [`DeviceError::WouldOverwrite`]). A block device is
    /// always written: naming one is the operator's choice.
    pub overwrite_any: bool,
}

impl Default for LogConfig {
    /// RG-EDF on 512-byte blocks, with the core's defaults (`BlockConfig::default()`: its
    /// write time, buffer time and capacity; nothing dropped), not paced.
    fn default() -> Self {
        let core = BlockConfig::default();
        Self {
            policy: BlockPolicy::RgEdf,
            block_size: 512,
            write_time: Duration::from_nanos(core.write_time.0),
            buffer_time: Duration::from_nanos(core.buffer_time.0),
            drop_predicted_misses: core.drop_predicted_misses,
            capacity: core.capacity,
            pacing: None,
            overwrite_any: false,
        }
    }
}

impl LogConfig {
    /// The scheduler's settings: its block is the room after the block header, so that its
    /// packing of framed records is the block's.
    fn scheduler(&self) -> BlockConfig {
        BlockConfig {
            block_size: frame::room(self.block_size) as u32,
            write_time: nanos(self.write_time),
            buffer_time: nanos(self.buffer_time),
            drop_predicted_misses: self.drop_predicted_misses,
            capacity: self.capacity,
            ..BlockConfig::default()
        }
    }
}

/// A log failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The block size is not one the format allows.
    #[error("block size {0} is not a power of two from 512 to 1048576 bytes")]
    BlockSize(usize),
    /// The payload does not fit in a block with its framing.
    #[error("a {size}-byte payload does not fit in a {block}-byte block (at most {max} bytes)")]
    TooLarge {
        /// The payload's bytes.
        size: usize,
        /// The block's.
        block: usize,
        /// The largest payload a block takes.
        max: usize,
    },
    /// The device failed; records not yet durable were reported failed.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// The writer has stopped (after a device failure): nothing more can be appended.
    #[error("the log's writer has stopped")]
    Closed,
}

/// What became of an appended record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The caller's tag, given at append.
    pub tag: u64,
    /// The record's stream.
    pub stream: u32,
    /// Its number in its stream (none if it was refused before getting one).
    pub seq: Option<u64>,
    /// When it was due, since the log opened.
    pub deadline: Duration,
    /// What happened.
    pub fate: Fate,
}

/// The end of a record's way through the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// On stable storage since `at` (since the log opened); it may be after the deadline.
    Durable {
        /// When its block's write returned.
        at: Duration,
    },
    /// Refused: the scheduler held as many records as it may.
    Refused,
    /// Dropped by the scheduler as a predicted miss.
    Dropped,
    /// Its block's write failed, or the writer stopped first.
    Failed,
}

impl Outcome {
    /// Whether the record was durable by its deadline.
    #[must_use]
    pub fn on_time(&self) -> bool {
        matches!(self.fate, Fate::Durable { at } if at <= self.deadline)
    }
}

/// A claim on one record's outcome.
#[derive(Debug)]
#[must_use = "a receipt is how the caller learns whether its record is durable"]
pub struct Receipt {
    rx: Receiver<Outcome>,
    tag: u64,
    stream: u32,
    deadline: Duration,
}

impl Receipt {
    /// Blocks until the record is durable, refused, dropped or failed.
    pub fn wait(self) -> Outcome {
        self.rx.recv().unwrap_or(Outcome {
            tag: self.tag,
            stream: self.stream,
            seq: None,
            deadline: self.deadline,
            fate: Fate::Failed,
        })
    }
}

/// What a log has done, when it closes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogStats {
    /// The policy's name.
    pub policy: &'static str,
    /// How the device was opened.
    pub device: DeviceInfo,
    /// Records appended.
    pub appended: u64,
    /// Records durable by their deadline.
    pub on_time: u64,
    /// Records durable after their deadline.
    pub late: u64,
    /// Records refused (scheduler full).
    pub refused: u64,
    /// Records dropped as predicted misses.
    pub dropped: u64,
    /// Records whose write failed.
    pub failed: u64,
    /// Blocks written.
    pub blocks: u64,
    /// Bytes written to the device.
    pub bytes_written: u64,
    /// Payload bytes of the durable records.
    pub payload_bytes: u64,
    /// Blocks RG-EDF gave to another stream than the earliest deadline's.
    pub reordered: u64,
    /// Longest time from append to durable.
    pub max_latency: Duration,
    /// Longest block write, pacing included: how far the real device strayed above the paced
    /// time (an ext4 journal commit under `O_DSYNC` can take tens of milliseconds).
    pub max_write: Duration,
    /// From open to close.
    pub elapsed: Duration,
}

impl LogStats {
    /// Bytes written over bytes of payload made durable (∞ when none was).
    #[must_use]
    pub fn write_amplification(&self) -> f64 {
        self.bytes_written as f64 / self.payload_bytes as f64
    }

    /// Records not durable by their deadline: late, refused, dropped or failed.
    #[must_use]
    pub fn missed(&self) -> u64 {
        self.late + self.refused + self.dropped + self.failed
    }

    /// Of the records appended, the fraction missed.
    #[must_use]
    pub fn miss_ratio(&self) -> f64 {
        if self.appended == 0 { 0.0 } else { self.missed() as f64 / self.appended as f64 }
    }

    /// Records durable on time per second of the run.
    #[must_use]
    pub fn on_time_per_second(&self) -> f64 {
        self.on_time as f64 / self.elapsed.as_secs_f64()
    }
}

struct Append {
    stream: u32,
    payload: Vec<u8>,
    deadline: Nanos,
    tag: u64,
    appended: Nanos,
    reply: Sender<Outcome>,
}

/// An open log: appends go to its writer thread.
#[derive(Debug)]
pub struct Log {
    tx: Option<Sender<Append>>,
    thread: Option<JoinHandle<Result<LogStats, LogError>>>,
    epoch: Instant,
    info: DeviceInfo,
    block_size: usize,
    log_id: u64,
}

impl Log {
    /// Opens the device at `path` and starts its writer.
    pub fn open(path: &Path, cfg: LogConfig) -> Result<Self, LogError> {
        if !frame::valid_block_size(cfg.block_size) {
            return Err(LogError::BlockSize(cfg.block_size));
        }
        let device = Device::open(path, cfg.block_size, cfg.pacing, cfg.overwrite_any)?;
        let info = device.info();
        let epoch = Instant::now();
        let log_id = log_id(path);
        let (tx, rx) = mpsc::channel();
        let scheduler = BlockScheduler::new(cfg.policy, cfg.scheduler());
        let writer = Writer {
            device,
            scheduler,
            rx,
            epoch,
            log_id,
            block_size: cfg.block_size,
            pending: BTreeMap::new(),
            stats: LogStats {
                policy: cfg.policy.name(),
                device: info,
                appended: 0,
                on_time: 0,
                late: 0,
                refused: 0,
                dropped: 0,
                failed: 0,
                blocks: 0,
                bytes_written: 0,
                payload_bytes: 0,
                reordered: 0,
                max_latency: Duration::ZERO,
                max_write: Duration::ZERO,
                elapsed: Duration::ZERO,
            },
        };
        let thread = std::thread::Builder::new()
            .name("blocklog-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| DeviceError::Open { path: path.to_owned(), source: e })?;
        Ok(Self { tx: Some(tx), thread: Some(thread), epoch, info, block_size: cfg.block_size, log_id })
    }

    /// How the device was opened.
    #[must_use]
    pub fn info(&self) -> DeviceInfo {
        self.info
    }

    /// The id every block of this log carries: what `read` checks block 0 against, and what a
    /// reader needs to be told when block 0 is torn ([`crate::read::ReadOptions::log_id`]).
    #[must_use]
    pub fn log_id(&self) -> u64 {
        self.log_id
    }

    /// The largest payload one record may carry.
    #[must_use]
    pub fn max_payload(&self) -> usize {
        frame::room(self.block_size) - frame::RECORD_HEADER_LEN
    }

    /// Time since the log opened: the clock deadlines and outcomes are given on.
    #[must_use]
    pub fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// Appends a record due `deadline` from now; the receipt says what became of it.
    pub fn append(&self, stream: u32, payload: &[u8], deadline: Duration) -> Result<Receipt, LogError> {
        let (tx, rx) = mpsc::channel();
        let due = self.append_to(stream, payload, deadline, 0, &tx)?;
        Ok(Receipt { rx, tag: 0, stream, deadline: due })
    }

    /// Appends a record due `deadline` from now, its outcome to be sent to `outcomes` with
    /// `tag`: for a caller that follows many records on one channel. Returns the absolute
    /// deadline (since the log opened).
    pub fn append_to(
        &self,
        stream: u32,
        payload: &[u8],
        deadline: Duration,
        tag: u64,
        outcomes: &Sender<Outcome>,
    ) -> Result<Duration, LogError> {
        if payload.len() > self.max_payload() {
            return Err(LogError::TooLarge { size: payload.len(), block: self.block_size, max: self.max_payload() });
        }
        let now = self.now();
        let due = now + deadline;
        let append = Append {
            stream,
            payload: payload.to_vec(),
            deadline: nanos(due),
            tag,
            appended: nanos(now),
            reply: outcomes.clone(),
        };
        self.tx.as_ref().ok_or(LogError::Closed)?.send(append).map_err(|_| LogError::Closed)?;
        Ok(due)
    }

    /// Writes out every record appended so far and stops the writer.
    pub fn close(mut self) -> Result<LogStats, LogError> {
        self.stop().unwrap_or(Err(LogError::Closed))
    }

    fn stop(&mut self) -> Option<Result<LogStats, LogError>> {
        self.tx.take();
        let thread = self.thread.take()?;
        Some(thread.join().unwrap_or(Err(LogError::Closed)))
    }
}

impl Drop for Log {
    /// Flushes like [`Log::close`], for a log dropped without being closed.
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A record held until its block is durable.
struct Pending {
    payload: Vec<u8>,
    tag: u64,
    appended: Nanos,
    deadline: Nanos,
    reply: Sender<Outcome>,
}

struct Writer {
    device: Device,
    scheduler: BlockScheduler,
    rx: Receiver<Append>,
    epoch: Instant,
    log_id: u64,
    block_size: usize,
    pending: BTreeMap<(u32, u64), Pending>,
    stats: LogStats,
}

impl Writer {
    fn run(mut self) -> Result<LogStats, LogError> {
        let mut buf = BlockBuf::new(self.block_size);
        let mut open = true;
        loop {
            // Take in what has arrived, before the next I/O (the thesis's state (b)).
            while open {
                match self.rx.try_recv() {
                    Ok(a) => self.offer(a),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => open = false,
                }
            }
            let now = self.now();
            let (first, second) = self.device.info().paced.map(|p| p.ahead(self.stats.blocks)).unwrap_or_default();
            let ahead = Ahead { first: nanos(first), second: nanos(second) };
            let write = self.scheduler.next_write_with(now, ahead);
            self.report_dropped();
            if let Some(write) = write {
                if let Err(e) = self.write(&write.records, &mut buf) {
                    self.fail(&write.records);
                    return Err(e);
                }
                continue;
            }
            if !open && self.scheduler.is_empty() {
                break;
            }
            // Nothing to write now: wait for a record, or for the scheduler's wake time.
            let wake = self.scheduler.wake_at(now).map(|at| Duration::from_nanos(at.0 - now.0));
            match (open, wake) {
                (true, Some(wait)) => match self.rx.recv_timeout(wait) {
                    Ok(a) => self.offer(a),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => open = false,
                },
                (true, None) => match self.rx.recv() {
                    Ok(a) => self.offer(a),
                    Err(_) => open = false,
                },
                (false, Some(wait)) => std::thread::sleep(wait),
                // Records held, none to write and no wake time: the scheduler's contract says
                // this cannot be; rather than spin, report what is left as failed.
                (false, None) => break,
            }
        }
        self.fail(&[]);
        let sched = self.scheduler.stats();
        self.stats.reordered = sched.reordered;
        self.stats.elapsed = self.epoch.elapsed();
        Ok(self.stats)
    }

    fn now(&self) -> Nanos {
        nanos(self.epoch.elapsed())
    }

    fn offer(&mut self, a: Append) {
        self.stats.appended += 1;
        let record = Record { stream: a.stream, size: frame::framed_len(a.payload.len()) as u32, deadline: a.deadline };
        // Offered as of its append, so that linger and mq-deadline count its age from then, not
        // from when this thread got to it after a long write.
        match self.scheduler.offer(record, a.appended) {
            Ok(seq) => {
                let p = Pending {
                    payload: a.payload,
                    tag: a.tag,
                    appended: a.appended,
                    deadline: a.deadline,
                    reply: a.reply,
                };
                self.pending.insert((a.stream, seq), p);
            }
            // The log checked the size against the block; only a full scheduler refuses.
            Err(Refused::Full(_) | Refused::TooLarge { .. }) => {
                self.stats.refused += 1;
                let _ = a.reply.send(Outcome {
                    tag: a.tag,
                    stream: a.stream,
                    seq: None,
                    deadline: Duration::from_nanos(a.deadline.0),
                    fate: Fate::Refused,
                });
            }
        }
    }

    /// Encodes the block the scheduler chose, writes it, and reports its records durable.
    fn write(&mut self, records: &[Queued], buf: &mut BlockBuf) -> Result<(), LogError> {
        let number = self.stats.blocks;
        let pending = &self.pending;
        let entries = records.iter().map(|q| (q.stream, q.seq, pending[&(q.stream, q.seq)].payload.as_slice()));
        frame::encode(self.log_id, number, entries, buf.bytes_mut())
            .expect("the scheduler packs framed sizes into the room after the header");
        let started = self.now();
        self.device.write_block(number, buf)?;
        let at = self.now();
        self.stats.max_write = self.stats.max_write.max(Duration::from_nanos(at.0 - started.0));
        self.stats.blocks += 1;
        self.stats.bytes_written += self.block_size as u64;
        for q in records {
            let fate = Fate::Durable { at: Duration::from_nanos(at.0) };
            if let Some(p) = self.pending.get(&(q.stream, q.seq)) {
                self.stats.payload_bytes += p.payload.len() as u64;
                let latency = Duration::from_nanos(at.0.saturating_sub(p.appended.0));
                self.stats.max_latency = self.stats.max_latency.max(latency);
            }
            if at <= q.deadline {
                self.stats.on_time += 1;
            } else {
                self.stats.late += 1;
            }
            self.finish((q.stream, q.seq), fate);
        }
        Ok(())
    }

    fn report_dropped(&mut self) {
        for q in self.scheduler.take_dropped() {
            self.stats.dropped += 1;
            self.finish((q.stream, q.seq), Fate::Dropped);
        }
    }

    /// Reports the records of a block whose write failed, and every other record held, failed.
    fn fail(&mut self, records: &[Queued]) {
        let keys: Vec<(u32, u64)> =
            records.iter().map(|q| (q.stream, q.seq)).chain(self.pending.keys().copied()).collect();
        for key in keys {
            if self.pending.contains_key(&key) {
                self.stats.failed += 1;
                self.finish(key, Fate::Failed);
            }
        }
    }

    /// Tells the record's appender what became of it.
    fn finish(&mut self, (stream, seq): (u32, u64), fate: Fate) {
        if let Some(p) = self.pending.remove(&(stream, seq)) {
            let deadline = Duration::from_nanos(p.deadline.0);
            // An appender that stopped listening is not the writer's concern.
            let _ = p.reply.send(Outcome { tag: p.tag, stream, seq: Some(seq), deadline, fate });
        }
    }
}

fn nanos(d: Duration) -> Nanos {
    Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A log's id: different for every log opened, so that blocks left on a device by an earlier
/// log are not read as this one's.
fn log_id(path: &Path) -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&now.as_nanos().to_le_bytes());
    h.update(&std::process::id().to_le_bytes());
    h.update(path.as_os_str().as_encoded_bytes());
    h.digest()
}
