//! A sensor node logging to flash (Dou 2011 ch. 2; notes 003 §2.1, §4.1): processes inject
//! records with deadlines, one loop on the node's CPU turns them into requests for the core's
//! [`BlockScheduler`] and, between conversions, has the SD card write the block the scheduler
//! chooses.
//!
//! # The node
//!
//! - **Processes.** Each injects a record every `period` from time 0 (synchronous injection, as
//!   the thesis's timers do), `size` bytes, due `deadline` after injection. Bursty: every 10th
//!   firing of the first process injects 5 records instead of 1 (§4.1).
//! - **Memory.** The injected records wait in the temporary request queue (TRQ) until the loop
//!   converts them; records held in the TRQ and the scheduler together are bounded by the
//!   scheduler's capacity (the thesis buffers about three blocks of data), and an injection
//!   beyond it is refused (saturation).
//! - **The loop** (Fig. 2.5, read as the notes read it): while the TRQ holds records, convert
//!   them; otherwise ask the scheduler for a block and write it. Converting and choosing take
//!   CPU time ([`CpuCost`]), during which the card is idle: on the thesis's 8051 this is what
//!   made EDF lose to FIFO.
//! - **The card** ([`SdCard`]): a block write takes 9–13 ms (uniform), and the first write into
//!   each sector of 256 blocks 60–140 ms more (§4.1). Writes go to consecutive blocks.
//!
//! # What the CPU is charged
//!
//! [`Structure::Thesis`] charges what the thesis's structures would do, not what the core's do
//! (the notes: without this charge EDF cannot fall below FIFO, nor G-EDF stay above RG-EDF):
//! - FIFO: the TRQ is the queue, so a record costs no conversion and one step to take;
//! - EDF, G-EDF, RG-EDF: a record costs its conversion into a full request and a heap insertion
//!   (`⌈log₂(n+1)⌉` steps in a heap of `n` with it); a block costs a heap removal per record
//!   (dropped ones too), and G-EDF a scan of the heap for the group (`n` steps), RG-EDF three
//!   (its group, the next other process, that process's group).
//!
//! [`Structure::Queues`] charges the core's structure (per-stream queues and an ordered index of
//! `s` streams): `⌈log₂(s+1)⌉ + 1` steps an insertion, the same plus one per record (two groups
//! for RG-EDF) a block. The modern peers' rules (linger, group commit, mq-deadline) are charged
//! this way under both.
//!
//! # Measures
//!
//! A record is a success if its block is on the card by its deadline ([`FlashOutcome::on_time`],
//! the thesis's throughput); end-to-end time runs from injection to the end of its block's
//! write. The run stops at `duration`: what is still held or being written then is counted as
//! left.
//!
//! # What the scheduler is told
//!
//! The node knows its card's block numbers, so it tells the scheduler ([`Ahead`]) when the next
//! write, or the one after, opens a sector (the penalty's mean, 100 ms), and what CPU time will
//! pass before the second (one choice at most its size, and one conversion per process). A
//! record is offered as of its injection, so that linger and mq-deadline count its age from
//! there.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use switchyard_core::order::blocks::{Ahead, BlockConfig, BlockPolicy, BlockScheduler, Queued, Record, Refused};

use crate::{EventQueue, Model, Nanos, SimError, Streams, run};

/// A process that logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Process {
    /// Time between injections (the thesis's default: 40 ms).
    pub period: Nanos,
    /// Bytes a record takes in a block (64).
    pub size: u32,
    /// How long after injection a record is due (70 ms).
    pub deadline: Nanos,
}

impl Default for Process {
    fn default() -> Self {
        Self { period: Nanos::from_millis(40), size: 64, deadline: Nanos::from_millis(70) }
    }
}

/// The SD card's timings (Dou §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SdCard {
    /// A block write takes between these (9–13 ms).
    pub write: (Nanos, Nanos),
    /// The first write into a sector takes between these more (60–140 ms).
    pub new_sector: (Nanos, Nanos),
    /// Blocks in a sector (256).
    pub blocks_per_sector: u64,
}

impl Default for SdCard {
    fn default() -> Self {
        Self {
            write: (Nanos::from_millis(9), Nanos::from_millis(13)),
            new_sector: (Nanos::from_millis(60), Nanos::from_millis(140)),
            blocks_per_sector: 256,
        }
    }
}

/// Whose structure the CPU is charged for (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Structure {
    /// The thesis's: the TRQ for FIFO, one array heap of requests for the EDF family.
    Thesis,
    /// The core's: per-stream queues and an ordered index over them.
    Queues,
}

/// What scheduling costs the node's CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuCost {
    /// Turning an injected record into a full request object.
    pub per_request: Nanos,
    /// One step: a heap level, or one request looked at in a scan.
    pub per_step: Nanos,
    /// Which structure's steps are counted.
    pub structure: Structure,
}

impl CpuCost {
    /// The CC1010's 8051 (an estimate; the thesis gives no costs). Its core runs a machine cycle
    /// every 4 clocks at 14.7456 MHz (3.7 M cycles a second). A heap step compares two 32-bit
    /// deadlines and swaps two 16-byte request objects in external memory, through a C
    /// compiler's generic pointers: about 40 byte moves of some 10 cycles, 400 cycles, ≈ 100 µs.
    /// Building a request object (its fields and a 32-bit deadline sum), ≈ 300 cycles, 80 µs.
    pub fn cc1010() -> Self {
        Self { per_request: Nanos::from_micros(80), per_step: Nanos::from_micros(100), structure: Structure::Thesis }
    }

    /// A present-day core running the core's structure: tens of nanoseconds.
    pub fn modern() -> Self {
        Self { per_request: Nanos(50), per_step: Nanos(20), structure: Structure::Queues }
    }

    /// No cost at all: what the policies do on their own.
    pub fn free() -> Self {
        Self { per_request: Nanos::ZERO, per_step: Nanos::ZERO, structure: Structure::Queues }
    }
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct FlashParams {
    /// The scheduling policy.
    pub policy: BlockPolicy,
    /// The scheduler's settings; its `capacity` bounds the records held.
    pub block: BlockConfig,
    /// The processes, the first of which bursts when `bursty`.
    pub processes: Vec<Process>,
    /// Every 10th firing of the first process injects 5 records.
    pub bursty: bool,
    /// The card.
    pub card: SdCard,
    /// What scheduling costs the CPU.
    pub cpu: CpuCost,
    /// How long the node runs (the thesis: 10 s).
    pub duration: Nanos,
    /// Root seed (the card's write times).
    pub seed: u64,
}

impl FlashParams {
    /// The thesis's defaults: three processes of 64-byte records every 40 ms due in 70 ms, 512-byte
    /// blocks, the CC1010's CPU, 10 s. The scheduler expects the card's mean write (11 ms), with
    /// 4 ms of margin for two writes at their longest.
    pub fn thesis(policy: BlockPolicy) -> Self {
        Self {
            policy,
            block: BlockConfig {
                write_time: Nanos::from_millis(11),
                buffer_time: Nanos::from_millis(4),
                ..BlockConfig::default()
            },
            processes: vec![Process::default(); 3],
            bursty: false,
            card: SdCard::default(),
            cpu: CpuCost::cc1010(),
            duration: Nanos::from_millis(10_000),
            seed: 1,
        }
    }
}

/// What happened.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlashOutcome {
    /// Records injected.
    pub injected: u64,
    /// Records on the card by their deadlines (the thesis's throughput).
    pub on_time: u64,
    /// Records written after their deadlines.
    pub late: u64,
    /// Injections refused because memory was full.
    pub refused: u64,
    /// Records dropped as predicted misses.
    pub dropped: u64,
    /// Records still held at the end.
    pub left: u64,
    /// Mean time from injection to the end of the write, over records written, in seconds.
    pub mean_end_to_end: f64,
    /// Blocks written, and the one being written at the end, if any.
    pub blocks: u64,
    /// Bytes of records written.
    pub record_bytes: u64,
    /// Blocks RG-EDF gave another stream than the earliest deadline's.
    pub reordered: u64,
    /// Share of the run the CPU spent scheduling.
    pub cpu_share: f64,
    /// The run's length, in seconds.
    pub seconds: f64,
}

impl FlashOutcome {
    /// Records on time per second.
    pub fn throughput(&self) -> f64 {
        self.on_time as f64 / self.seconds.max(1e-9)
    }

    /// Share of the records that left the node (written or dropped) that missed or were dropped.
    pub fn miss_share(&self) -> f64 {
        let out = self.on_time + self.late + self.dropped;
        (self.late + self.dropped) as f64 / out.max(1) as f64
    }

    /// Bytes written over bytes of records.
    pub fn amplification(&self, block_size: u32) -> f64 {
        (self.blocks * u64::from(block_size)) as f64 / self.record_bytes.max(1) as f64
    }
}

/// A flash node event.
#[derive(Clone, Debug)]
pub enum FlashEvent {
    /// Process `i` fires for the `n`th time.
    Inject {
        /// The process.
        process: usize,
        /// Its firing, from 0.
        n: u64,
    },
    /// The loop's current work (a conversion, or a block's choice and write) is done; the
    /// records of a block written are durable now.
    Done(Vec<Queued>),
    /// A lingering batch may be ready.
    Wake,
}

/// The node's state.
pub struct Flash {
    p: FlashParams,
    sched: BlockScheduler,
    card: ChaCha8Rng,
    /// Injected records not yet converted: (process, injection time).
    trq: Vec<(usize, Nanos)>,
    busy: bool,
    /// Records in the block being written.
    in_flight: usize,
    /// When a `Wake` is already due.
    wake: Option<Nanos>,
    /// Most records a block can hold.
    per_block: usize,
    out: FlashOutcome,
    end_to_end_sum: u128,
    cpu: u64,
}

fn steps(n: usize) -> u64 {
    u64::from(usize::BITS - n.leading_zeros())
}

impl Flash {
    /// Runs the node for its duration.
    pub fn simulate(p: &FlashParams) -> Result<FlashOutcome, SimError> {
        let bad = |name, value: String, expected| Err(SimError::BadParameter { name, value, expected });
        if p.processes.is_empty() {
            return bad("processes", "0".into(), "at least one process");
        }
        if let Some(q) = p.processes.iter().find(|q| q.period == Nanos::ZERO) {
            return bad("period", format!("{:?}", q.period), "a period above zero");
        }
        if let Some(q) = p.processes.iter().find(|q| q.size == 0 || q.size > p.block.block_size) {
            return bad("size", q.size.to_string(), "a record of 1 byte up to a block");
        }
        if p.card.write.0 > p.card.write.1 || p.card.new_sector.0 > p.card.new_sector.1 || p.card.blocks_per_sector == 0
        {
            return bad("card", format!("{:?}", p.card), "ranges low to high and at least one block a sector");
        }
        let mut model = Self {
            p: p.clone(),
            sched: BlockScheduler::new(p.policy, p.block),
            card: Streams::new(p.seed).stream(0),
            trq: Vec::new(),
            busy: false,
            in_flight: 0,
            wake: None,
            per_block: (p.block.block_size / p.processes.iter().map(|q| q.size).min().unwrap_or(1).max(1)) as usize,
            out: FlashOutcome::default(),
            end_to_end_sum: 0,
            cpu: 0,
        };
        let mut queue = EventQueue::new();
        for process in 0..p.processes.len() {
            queue.schedule_at(Nanos::ZERO, FlashEvent::Inject { process, n: 0 })?;
        }
        run(&mut model, &mut queue, p.duration);
        let mut out = model.out;
        out.left = (model.trq.len() + model.sched.len() + model.in_flight) as u64;
        out.reordered = model.sched.stats().reordered;
        out.seconds = p.duration.0 as f64 / 1e9;
        out.cpu_share = model.cpu as f64 / p.duration.0.max(1) as f64;
        let written = out.on_time + out.late;
        out.mean_end_to_end = model.end_to_end_sum as f64 / written.max(1) as f64 / 1e9;
        Ok(out)
    }

    fn thesis_heap(&self) -> bool {
        self.p.cpu.structure == Structure::Thesis
            && matches!(self.p.policy, BlockPolicy::Edf | BlockPolicy::GEdf | BlockPolicy::RgEdf)
    }

    /// CPU time to take in one record with `held` records already held.
    fn insert_cost(&self, held: usize) -> u64 {
        let c = self.p.cpu;
        let streams = self.p.processes.len();
        match (self.p.cpu.structure, self.p.policy) {
            (Structure::Thesis, BlockPolicy::Fifo) => 0,
            _ if self.thesis_heap() => c.per_request.0 + c.per_step.0 * steps(held + 1),
            _ => c.per_request.0 + c.per_step.0 * (steps(streams) + 1),
        }
    }

    /// CPU time to take `n` records out of a heap of `held` (dropped records leave this way too).
    fn removal_cost(&self, held: usize, n: usize) -> u64 {
        let per = if self.thesis_heap() { steps(held) } else { 1 };
        self.p.cpu.per_step.0 * per * n as u64
    }

    /// CPU time to choose a block of `group` records with `held` records held.
    fn choose_cost(&self, held: usize, group: usize) -> u64 {
        let step = self.p.cpu.per_step.0;
        let streams = self.p.processes.len() as u64;
        let group = group as u64;
        let held = held as u64;
        match (self.p.cpu.structure, self.p.policy) {
            (Structure::Thesis, BlockPolicy::Fifo) => step,
            (Structure::Thesis, BlockPolicy::Edf) => step * steps(held as usize),
            (Structure::Thesis, BlockPolicy::GEdf) => step * (held + group * steps(held as usize)),
            (Structure::Thesis, BlockPolicy::RgEdf) => step * (3 * held + group * steps(held as usize)),
            (_, BlockPolicy::RgEdf) => step * (steps(streams as usize) + 1 + 2 * group),
            _ => step * (steps(streams as usize) + 1 + group),
        }
    }

    /// The loop's next piece of work, if it is free.
    fn step(&mut self, now: Nanos, queue: &mut EventQueue<FlashEvent>) {
        if self.busy {
            return;
        }
        if !self.trq.is_empty() {
            // Convert every waiting record: the card idles meanwhile.
            let mut cost = 0;
            for (process, injected) in std::mem::take(&mut self.trq) {
                cost += self.insert_cost(self.sched.len());
                let q = self.p.processes[process];
                let r = Record { stream: process as u32, size: q.size, deadline: Nanos(injected.0 + q.deadline.0) };
                match self.sched.offer(r, injected) {
                    Ok(_) => {}
                    // Injection checked the room already; a refusal here would be a bug in the
                    // model's accounting, counted rather than hidden.
                    Err(Refused::Full(_) | Refused::TooLarge { .. }) => self.out.refused += 1,
                }
            }
            self.cpu += cost;
            self.busy = true;
            queue.schedule_in(Nanos(cost), FlashEvent::Done(Vec::new()));
            return;
        }
        let held = self.sched.len();
        if held == 0 {
            return;
        }
        // The choice is made with the time the write would start, at worst; its cost is charged
        // by the size of the group that came out.
        let guess = self.choose_cost(held, held.min(self.per_block));
        let card = self.p.card;
        let opens = |k: u64| (self.out.blocks + k).is_multiple_of(card.blocks_per_sector);
        let penalty = Nanos((card.new_sector.0.0 + card.new_sector.1.0) / 2);
        let between = guess + self.p.processes.len() as u64 * self.insert_cost(held);
        let ahead = Ahead {
            first: if opens(0) { penalty } else { Nanos::ZERO },
            second: Nanos(if opens(1) { penalty.0 } else { 0 } + between),
        };
        let write = self.sched.next_write_with(Nanos(now.0 + guess), ahead);
        let dropped = self.sched.take_dropped().len();
        self.out.dropped += dropped as u64;
        let Some(write) = write else {
            // Only dropped records, or a batch left to linger: the CPU's work still counts.
            self.cpu += self.removal_cost(held, dropped);
            if let Some(at) = self.sched.wake_at(now)
                && self.wake.is_none_or(|w| w > at)
            {
                self.wake = Some(at);
                queue.schedule_at(at, FlashEvent::Wake).expect("wake_at is later than now");
            }
            return;
        };
        let cost = self.choose_cost(held, write.records.len()) + self.removal_cost(held, dropped);
        self.cpu += cost;
        let mut took = self.card.random_range(card.write.0.0..=card.write.1.0);
        if self.out.blocks.is_multiple_of(card.blocks_per_sector) {
            took += self.card.random_range(card.new_sector.0.0..=card.new_sector.1.0);
        }
        self.out.blocks += 1;
        self.busy = true;
        self.in_flight = write.records.len();
        queue.schedule_in(Nanos(cost + took), FlashEvent::Done(write.records));
    }
}

impl Model for Flash {
    type Event = FlashEvent;

    fn handle(&mut self, now: Nanos, event: FlashEvent, queue: &mut EventQueue<FlashEvent>) {
        match event {
            FlashEvent::Inject { process, n } => {
                let q = self.p.processes[process];
                // Injections at 0, period, … up to but not at the end: 250 of 40 ms in 10 s.
                if now.0 + q.period.0 < self.p.duration.0 {
                    queue.schedule_in(q.period, FlashEvent::Inject { process, n: n + 1 });
                }
                let count = if self.p.bursty && process == 0 && n % 10 == 9 { 5 } else { 1 };
                for _ in 0..count {
                    self.out.injected += 1;
                    if self.trq.len() + self.sched.len() >= self.p.block.capacity {
                        self.out.refused += 1;
                    } else {
                        self.trq.push((process, now));
                    }
                }
                self.step(now, queue);
            }
            FlashEvent::Done(written) => {
                self.busy = false;
                self.in_flight = 0;
                for q in written {
                    let process = self.p.processes[q.stream as usize];
                    let injected = q.deadline.0 - process.deadline.0;
                    self.end_to_end_sum += u128::from(now.0 - injected);
                    self.out.record_bytes += u64::from(q.size);
                    if now <= q.deadline {
                        self.out.on_time += 1;
                    } else {
                        self.out.late += 1;
                    }
                }
                self.step(now, queue);
            }
            FlashEvent::Wake => {
                if self.wake == Some(now) {
                    self.wake = None;
                }
                self.step(now, queue);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(policy: BlockPolicy, f: impl FnOnce(&mut FlashParams)) -> FlashOutcome {
        let mut p = FlashParams::thesis(policy);
        f(&mut p);
        Flash::simulate(&p).unwrap()
    }

    #[test]
    fn at_the_thesis_defaults_every_policy_keeps_up() {
        // The thesis's "conservative" defaults: nothing refused; one record a block misses only
        // around the card's slow first writes into a sector (three in 750 blocks).
        for (policy, misses) in
            [(BlockPolicy::Fifo, 0.15), (BlockPolicy::Edf, 0.15), (BlockPolicy::GEdf, 0.05), (BlockPolicy::RgEdf, 0.05)]
        {
            let o = run(policy, |_| {});
            assert_eq!(o.injected, 3 * 250, "{policy:?}");
            assert!(o.refused == 0 && o.dropped == 0 && o.left == 0, "{policy:?}: {o:?}");
            assert!(o.miss_share() < misses, "{policy:?}: {o:?}");
        }
    }

    #[test]
    fn one_record_a_block_cannot_keep_up_where_grouping_can() {
        // Three processes every 10 ms: 300 records a second, against at most ~90 blocks a second.
        let fast = |p: &mut FlashParams| {
            p.processes = vec![Process { period: Nanos::from_millis(10), ..Process::default() }; 3]
        };
        let fifo = run(BlockPolicy::Fifo, fast);
        let gedf = run(BlockPolicy::GEdf, fast);
        assert!(fifo.throughput() < 100.0, "{fifo:?}");
        assert!(gedf.throughput() > 2.0 * fifo.throughput(), "fifo {fifo:?}\ng-edf {gedf:?}");
        assert!(gedf.amplification(512) < fifo.amplification(512));
    }

    #[test]
    fn the_cpu_charge_makes_edf_lose_to_fifo_and_only_then() {
        let loaded = |cpu: CpuCost| {
            move |p: &mut FlashParams| {
                p.processes = vec![Process { period: Nanos::from_millis(36), ..Process::default() }; 3];
                p.cpu = cpu;
            }
        };
        let (fifo, edf) =
            (run(BlockPolicy::Fifo, loaded(CpuCost::cc1010())), run(BlockPolicy::Edf, loaded(CpuCost::cc1010())));
        assert!(edf.on_time < fifo.on_time, "fifo {fifo:?}\nedf {edf:?}");
        assert!(fifo.on_time > 0);
        let (fifo, edf) =
            (run(BlockPolicy::Fifo, loaded(CpuCost::free())), run(BlockPolicy::Edf, loaded(CpuCost::free())));
        assert!(edf.on_time >= fifo.on_time, "fifo {fifo:?}\nedf {edf:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_run() {
        let a = run(BlockPolicy::RgEdf, |p| p.bursty = true);
        let b = run(BlockPolicy::RgEdf, |p| p.bursty = true);
        assert_eq!(a, b);
        assert_eq!(a.injected, 3 * 250 + 25 * 4, "every 10th firing of the first process injects 4 more");
    }

    #[test]
    fn every_injected_record_is_accounted_for() {
        for policy in BlockPolicy::all(Nanos::from_millis(20), Nanos::from_millis(50)) {
            for (period, drop, bursty) in [(40, false, false), (10, true, true), (7, false, true), (15, true, false)] {
                let o = run(policy, |p| {
                    p.processes = vec![Process { period: Nanos::from_millis(period), ..Process::default() }; 3];
                    p.block.drop_predicted_misses = drop;
                    p.bursty = bursty;
                    p.duration = Nanos::from_millis(3_333);
                });
                assert_eq!(
                    o.injected,
                    o.on_time + o.late + o.refused + o.dropped + o.left,
                    "{policy:?} {period} {o:?}"
                );
                assert!(drop || o.dropped == 0);
            }
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut p = FlashParams::thesis(BlockPolicy::Fifo);
        p.processes[1].size = 600;
        assert!(matches!(Flash::simulate(&p), Err(SimError::BadParameter { name: "size", .. })));
        p.processes.clear();
        assert!(matches!(Flash::simulate(&p), Err(SimError::BadParameter { name: "processes", .. })));
    }
}
