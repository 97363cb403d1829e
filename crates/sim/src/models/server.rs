//! A multicore network server (Guo §2.4, §4.1): one producer thread places units of work on
//! per-worker FIFO run-queues, and each worker serves its queue in order.
//!
//! Modelling choices, each a parameter:
//! - **Producer.** Units arrive at the producer, which handles them one at a time in arrival
//!   order. Each decision costs [`ServerParams::decision_cost`], and every packet, queued or
//!   only marked, costs [`ServerParams::packet_cost`] (Guo's preprocessing thread reassembles
//!   every packet with libnids before it schedules the new buffer, §2.4). It asks the configured core
//!   [`Placer`], reading a [`LoadView`](switchyard_core::LoadView) in which a worker's queue counts its queued units plus the
//!   one in service. When the chosen queue is full, the producer either waits until that queue
//!   has room, as in the dissertation's L7-filter design ([`OnFull::Block`]), or drops the unit
//!   ([`OnFull::Drop`]).
//! - **Run-queues.** A worker holds at most [`ServerParams::queue_capacity`] units, the one in
//!   service included.
//! - **Service time.** `base + per_kib · bytes / 1024`, where `bytes` is the unit's size (for DPI,
//!   the buffer's length, or 0 for a buffer of an already classified connection), plus a locality penalty when a unit is
//!   served on a different worker than its flow's previous unit. The penalty is
//!   `migration_penalty · (C[prev][this] − 1)`, with `C` the topology's cost matrix, so a move
//!   within a shared cache costs less than a move across sockets (Guo Eq. 6.3).
//! - **Shared execution** ([`ServerParams::sibling_sharing`], σ ∈ [0, 1]). Leaves under one
//!   lowest-level node (a Niagara 2 pipeline's four hardware threads) issue from one execution
//!   unit. While k of them are serving, each runs at speed 1 / (1 + σ·(k − 1)): σ = 0 makes them
//!   independent cores, σ = 1 makes the group as fast as one thread however many are busy. The
//!   dissertation gives no figure (Guo §5.1 names the 16 pipelines as the "ideal" 16×, which is
//!   σ = 1); the scenarios state theirs. A unit's work is fixed when it starts; when a sibling
//!   starts or stops, the rest of the work runs at the new speed.
//! - **Metrics**, from the core's measure stage:
//!   - throughput and per-worker utilisation (busy time over the run);
//!   - balance of busy time;
//!   - flow migrations, out-of-order departures and jitter ([`FlowOrder`]);
//!   - latency from arrival at the producer to departure ([`Latency`]).
//! - **GOP streams** ([`Workload::Gop`]): each stream's departure order is restored at its home
//!   node, as the policy sees it ([`Placer::home`]: the plain-HRW worker, or for the tree
//!   policies the plain descent of their tree), so that the cost a cache-aware policy weighs and
//!   the cost the model charges are the same. A finished GOP waits there for the earlier ones. Out-of-order
//!   counts finishes, while jitter and latency are taken at the in-order release.
//!   [`ServerParams::home_penalty`] charges each GOP for the distance between its worker and
//!   that home.
//! - **Caches** ([`ServerParams::cache`], off by default). With a [`CacheParams`], every unit's
//!   service time also pays the misses the [cache model](super::cache) finds for its flow's
//!   footprint (the flow's state plus the bytes the unit is worked on) and for the footprint all
//!   units share, on the worker that serves it; for GOP streams, handing the finished GOP to its
//!   home node pays the transfer of its bytes through the lowest cache the two share (or memory).
//!   The cache model *adds to* the penalties above rather than replacing them, so that a scenario
//!   says what it charges: the cache variants of the reproductions set both penalties to 0, and
//!   with the cache off every result is what it was before the model existed.
//!
//! The producer's queue is unbounded, because units arriving while it is blocked wait there. Every
//! unit is served, dropped by the rule above, or still queued when the run stops. With a finite
//! workload the run goes on until all have left.

use std::collections::VecDeque;

use switchyard_core::carry::ReorderBuffer;
use switchyard_core::measure::{Balance, FlowOrder, Latency, balance};
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowId, FlowMap, LoadTracker, Placer, Policy, Topology, Unit, WorkerId};

use super::cache::{CacheHierarchy, Caches};
use super::trace::TraceReplay;
use super::workload::{DpiConnections, FlowSource, GopStreams, MeasuredGops, SyntheticFlows};
use crate::{EventQueue, Model, Nanos, SimError, Streams, run};

pub use switchyard_core::OnFull;

/// A server scenario.
#[derive(Clone, Debug)]
pub struct ServerParams {
    /// The machine; its leaves are the workers.
    pub topology: Topology,
    /// The placement policy.
    pub policy: Policy,
    /// The policy's knobs (its `topology` is set from [`ServerParams::topology`]).
    pub place: PlaceConfig,
    /// Units a worker may hold, the one in service included.
    pub queue_capacity: usize,
    /// What happens when the chosen queue is full.
    pub on_full: OnFull,
    /// Producer time per placement decision.
    pub decision_cost: Nanos,
    /// Producer time per packet that reaches it, whether it becomes a unit or is only marked.
    pub packet_cost: Nanos,
    /// Fixed service time per unit.
    pub service_base: Nanos,
    /// Service time per KiB of unit size.
    pub service_per_kib: Nanos,
    /// Locality penalty per unit of extra communication cost when a flow moves.
    pub migration_penalty: Nanos,
    /// Cost per unit of extra communication cost between the serving worker and the flow's home
    /// node ([`Placer::home`]), paid by every unit (Guo §6.2: every GOP communicates with its
    /// stream's home node, which restores departure order).
    pub home_penalty: Nanos,
    /// How much leaves under one lowest-level node share its execution (0: not at all; 1: the
    /// group is as fast as one leaf). See the module documentation.
    pub sibling_sharing: f64,
    /// Where the producer runs: on a core of its own, or on a worker's (see [`ProducerCore`]).
    pub producer_core: ProducerCore,
    /// Workers used: the first this many leaves of the topology (all of them when `None`).
    pub workers: Option<u32>,
    /// The offered work.
    pub workload: Workload,
    /// The cache model, if any (see the module documentation).
    pub cache: Option<CacheParams>,
    /// Root seed.
    pub seed: u64,
}

/// The cache model of a server scenario: the machine's caches and the workload's footprints.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheParams {
    /// The caches (usually [`CacheHierarchy::data_sheet`] of the scenario's topology).
    pub hierarchy: CacheHierarchy,
    /// Bytes of each flow's own state, touched by every unit of the flow besides the unit's bytes
    /// (a connection's matcher state; a transcoding stream's codec context and frame buffers).
    pub flow_state_bytes: u64,
    /// Bytes every unit touches whatever its flow (the L7 pattern set, the codec's tables), one
    /// footprint for all flows; 0 for none.
    pub shared_bytes: u64,
}

/// The footprint key of [`CacheParams::shared_bytes`]; flow digests are hashes, so a clash with
/// this one is as unlikely as any other.
const SHARED_FOOTPRINT: u64 = u64::MAX;

/// Where the producer thread runs, for a machine with no core to spare for it (one producer and
/// two workers on two cores). While the producer and the worker whose core it is on are both
/// busy, each runs at half speed, as two threads sharing a core do under a fair scheduler;
/// either runs at full speed while the other waits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ProducerCore {
    /// A core of its own.
    #[default]
    Own,
    /// Always this worker's core (a producer pinned beside a worker).
    Shares(WorkerId),
    /// Wherever a worker is idle, as an OS scheduler places an unpinned thread: it moves to an
    /// idle worker's core when the worker beside it is serving, and shares (staying where it
    /// is) only while every worker serves.
    Floats,
}

/// The offered work of a server scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum Workload {
    /// Flows of packets, each packet a unit.
    Synthetic(SyntheticFlows),
    /// Connection buffers for deep packet inspection.
    Dpi(DpiConnections),
    /// GOPs of video streams, whose departure order is restored at the stream's home node.
    Gop(GopStreams),
    /// The flows of a packet capture, replayed.
    Trace(TraceReplay),
    /// GOPs of video streams measured on a real run, each taking its measured time (plus the
    /// service terms above, which a replay of measured costs sets to 0); their order is restored
    /// at the home node as for [`Workload::Gop`], and the run records where each GOP went
    /// ([`ServerOutcome::placements`]).
    Measured(MeasuredGops),
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct ServerOutcome {
    /// The policy.
    pub policy: Policy,
    /// Units that reached the producer.
    pub emitted: u64,
    /// Units served.
    pub served: u64,
    /// Units dropped at a full queue.
    pub dropped: u64,
    /// Bytes served (units' sizes; for DPI, buffer lengths).
    pub bytes: u64,
    /// Bytes the workers actually processed (for DPI, scans: a buffer scanned twice counts twice,
    /// a skipped one not at all).
    pub scanned_bytes: u64,
    /// Bytes the workload offered (every packet's payload, whether queued or only marked).
    pub offered_bytes: u64,
    /// Offered bits per second of virtual time (Guo's L7-filter throughput: the trace's bytes
    /// over the run).
    pub offered_gbps: f64,
    /// Time of the last departure.
    pub makespan: Nanos,
    /// Units served per second of virtual time.
    pub units_per_s: f64,
    /// Busy time over the makespan, per worker.
    pub utilisation: Vec<f64>,
    /// Mean utilisation of the workers under each node just below the root (a socket of the
    /// Xeon, a core of the Niagara 2), for the spread of load across them (Guo Fig. 5.6).
    pub node_utilisation: Vec<f64>,
    /// Balance of busy time over workers.
    pub balance: Balance,
    /// Units served on a different worker than their flow's previous unit.
    pub migrations: u64,
    /// Units that departed after a later unit of their flow.
    pub out_of_order: u64,
    /// Standard deviation of inter-departure times within flows, in nanoseconds.
    pub jitter_ns: f64,
    /// Latency from arrival at the producer to departure, in nanoseconds.
    pub latency: Latency,
    /// Time the producer spent waiting for a full queue.
    pub producer_blocked: Nanos,
    /// Per-flow shares against proportional targets (Guo Eq. 7.2–7.4): for each finished flow,
    /// the workers it held on average while active (its busy time over the span from its first
    /// arrival to its last departure), balanced against its weight φ, the mean size of its
    /// units. A CoV of 0 means every flow got workers exactly in proportion to φ.
    pub flow_shares: Balance,
    /// Jain's index of the flows' progress rates (units per second while active): 1 when every
    /// flow advances at the same pace, as GPS with φ = size gives flows of equal unit counts.
    pub flow_rate_jain: f64,
    /// Time the cache model charged (misses and home-node transfers), in nanoseconds; 0 without
    /// it.
    pub cache_ns: u64,
    /// Lines missed at each cache level, nearest the core first; empty without the cache model.
    pub cache_misses: Vec<u64>,
    /// For a [`Workload::Measured`] run, each GOP's stream, index and worker, in the order
    /// service began; empty for the others (a long synthetic run would hold millions).
    pub placements: Vec<(FlowId, u64, WorkerId)>,
    /// Events handled.
    pub events: u64,
}

/// Events of the server model.
#[derive(Clone, Copy, Debug)]
pub enum ServerEvent {
    /// Flow `i` of the workload starts.
    FlowStart(u32),
    /// The next unit of flow `i` reaches the producer.
    Unit(u32),
    /// The producer's current decision is done, unless its speed changed since this event was
    /// scheduled (the field is then stale; see [`ServerParams::producer_core`]).
    DecisionDone(u32),
    /// Worker `w` finished the unit at the head of its queue, unless its speed changed since
    /// this event was scheduled (the second field is then stale; see [`ServerParams::sibling_sharing`]).
    ServiceDone(u32, u32),
}

#[derive(Clone, Copy, Debug)]
struct Queued {
    unit: Unit,
    arrived: Nanos,
}

/// The unit a worker is serving: solo-speed work left as of `since`, at `speed`.
#[derive(Clone, Copy, Debug)]
struct Service {
    started: Nanos,
    since: Nanos,
    left: f64,
    speed: f64,
}

/// A live flow's account, for its share (see [`ServerOutcome::flow_shares`]).
#[derive(Clone, Copy, Debug)]
struct FlowAccount {
    first: Nanos,
    last: Nanos,
    busy: u64,
    units: u64,
    bytes: u64,
    /// The worker that served the flow's previous unit, for the migration penalty.
    worker: Option<WorkerId>,
}

/// The producer's current piece of work, when it shares a core: solo-speed work left as of
/// `since`, at `speed`.
#[derive(Clone, Copy, Debug)]
struct Run {
    since: Nanos,
    left: f64,
    speed: f64,
}

#[derive(Debug)]
enum Producer {
    Idle,
    Deciding(Queued, WorkerId),
    /// Preprocessing a packet that is only marked.
    Marking,
    Blocked(Queued, WorkerId, Nanos),
}

/// The server model's state.
pub struct Server {
    params: ServerParams,
    placer: Box<dyn Placer>,
    source: FlowSource,
    /// Each live flow's home node, as the policy sees it ([`Placer::home`]), when a home penalty
    /// is charged: it never changes, so it is found once per flow.
    homes: FlowMap<WorkerId>,
    /// Units finished ahead of their turn, per flow (when order is restored at the home node).
    reorder: Option<ReorderBuffer<Queued>>,
    /// Order of released (in-order) departures, for jitter when order is restored.
    released: FlowOrder,
    load: LoadTracker,
    /// Packets waiting for the producer: units, or `None` for one it only marks.
    input: VecDeque<Option<Queued>>,
    producer: Producer,
    /// The producer's work in progress and the epoch of its completion event.
    run: Option<Run>,
    /// The worker whose core the producer is on (`None`: a core of its own).
    producer_on: Option<WorkerId>,
    producer_epoch: u32,
    queues: Vec<VecDeque<Queued>>,
    busy: Vec<Nanos>,
    serving: Vec<Option<Service>>,
    /// Per worker, bumped on every speed change, so earlier completion events are known stale.
    epochs: Vec<u32>,
    /// Leaves per execution group (the lowest level's fanout; 1 when nothing is shared).
    group: u32,
    accounts: FlowMap<FlowAccount>,
    /// Finished flows: (workers held on average, units per second, φ).
    finished: Vec<(f64, f64, f64)>,
    order: FlowOrder,
    latency: Latency,
    emitted: u64,
    served: u64,
    dropped: u64,
    bytes: u64,
    blocked: Nanos,
    last_departure: Nanos,
    scanned: u64,
    caches: Option<Caches>,
    cache_ns: f64,
    cache_misses: Vec<u64>,
    /// Where each unit was served, when the workload asks (see [`ServerOutcome::placements`]).
    placements: Option<Vec<(FlowId, u64, WorkerId)>>,
}

impl Server {
    /// Runs a scenario to completion.
    pub fn simulate(params: &ServerParams) -> Result<ServerOutcome, SimError> {
        let bad = |name, value: String, expected| SimError::BadParameter { name, value, expected };
        if params.queue_capacity == 0 {
            return Err(bad("queue_capacity", "0".into(), "at least 1 unit per worker"));
        }
        let n = match params.workers {
            Some(k) if k == 0 || k > params.topology.leaves() => {
                return Err(bad("workers", k.to_string(), "from 1 to the topology's number of leaves"));
            }
            Some(k) => k,
            None => params.topology.leaves(),
        };
        let config = PlaceConfig { topology: Some(params.topology.clone()), ..params.place.clone() };
        let workers: Vec<WorkerId> = (0..n).map(WorkerId).collect();
        let placer = place::build(params.policy, &config, &workers)?;
        let streams = Streams::new(params.seed);
        let source = match &params.workload {
            Workload::Synthetic(w) => FlowSource::new(w, streams)?,
            Workload::Dpi(d) => FlowSource::dpi(d, streams)?,
            Workload::Gop(g) => FlowSource::gop(g, streams)?,
            Workload::Trace(t) => FlowSource::trace(&t.trace, t.time_scale, t.dpi, streams)?,
            Workload::Measured(m) => FlowSource::measured(m, streams)?,
        };
        let measured = matches!(params.workload, Workload::Measured(_));
        let reorder = measured || matches!(params.workload, Workload::Gop(_));
        if !(0.0..=1.0).contains(&params.sibling_sharing) {
            return Err(bad("sibling_sharing", params.sibling_sharing.to_string(), "a fraction from 0 to 1"));
        }
        if let ProducerCore::Shares(w) = params.producer_core
            && w.0 >= n
        {
            return Err(bad("producer_core", w.0.to_string(), "one of the workers, numbered from 0"));
        }
        if let Some(c) = &params.cache {
            c.hierarchy
                .validate(params.topology.leaves())
                .map_err(|e| bad("cache", e, "a cache hierarchy for the topology"))?;
        }
        let group = if params.sibling_sharing > 0.0 {
            params.topology.span(params.topology.depth().saturating_sub(1))
        } else {
            1
        };
        let mut model = Self {
            params: params.clone(),
            placer,
            source,
            homes: FlowMap::new(),
            reorder: reorder.then(ReorderBuffer::new),
            released: FlowOrder::new(),
            load: LoadTracker::new(),
            input: VecDeque::new(),
            producer: Producer::Idle,
            run: None,
            producer_on: match params.producer_core {
                ProducerCore::Own => None,
                ProducerCore::Shares(w) => Some(w),
                ProducerCore::Floats => Some(WorkerId(0)),
            },
            producer_epoch: 0,
            queues: vec![VecDeque::new(); n as usize],
            busy: vec![Nanos::ZERO; n as usize],
            serving: vec![None; n as usize],
            epochs: vec![0; n as usize],
            group,
            accounts: FlowMap::new(),
            finished: Vec::new(),
            order: FlowOrder::new(),
            latency: Latency::new(),
            emitted: 0,
            served: 0,
            dropped: 0,
            bytes: 0,
            blocked: Nanos::ZERO,
            last_departure: Nanos::ZERO,
            scanned: 0,
            caches: params.cache.as_ref().map(|c| Caches::new(c.hierarchy.clone(), params.topology.leaves())),
            cache_ns: 0.0,
            cache_misses: params.cache.as_ref().map_or_else(Vec::new, |c| vec![0; c.hierarchy.levels.len()]),
            placements: measured.then(Vec::new),
        };
        let mut queue = EventQueue::new();
        model.source.start(&mut queue);
        let stats = run(&mut model, &mut queue, Nanos(u64::MAX));
        Ok(model.outcome(stats.events))
    }

    fn outcome(self, events: u64) -> ServerOutcome {
        let span = self.last_departure.0.max(1) as f64;
        let busy: Vec<f64> = self.busy.iter().map(|b| b.0 as f64).collect();
        let utilisation: Vec<f64> = busy.iter().map(|b| b / span).collect();
        let topology = &self.params.topology;
        let per_node = topology.span(1.min(topology.depth())) as usize;
        let node_utilisation =
            utilisation.chunks(per_node.max(1)).map(|c| c.iter().sum::<f64>() / c.len() as f64).collect();
        ServerOutcome {
            policy: self.params.policy,
            emitted: self.emitted,
            served: self.served,
            dropped: self.dropped,
            bytes: self.bytes,
            scanned_bytes: self.scanned,
            offered_bytes: self.source.offered_bytes(),
            offered_gbps: self.source.offered_bytes() as f64 * 8.0 / span,
            makespan: self.last_departure,
            units_per_s: self.served as f64 / span * 1e9,
            utilisation,
            node_utilisation,
            balance: balance(&busy, None),
            migrations: self.order.migrations(),
            out_of_order: self.order.out_of_order(),
            jitter_ns: if self.reorder.is_some() { self.released.jitter_ns() } else { self.order.jitter_ns() },
            latency: self.latency,
            producer_blocked: self.blocked,
            flow_shares: balance(
                &self.finished.iter().map(|f| f.0).collect::<Vec<_>>(),
                Some(&self.finished.iter().map(|f| f.2).collect::<Vec<_>>()),
            ),
            flow_rate_jain: balance(&self.finished.iter().map(|f| f.1).collect::<Vec<_>>(), None).jain,
            cache_ns: self.cache_ns.round() as u64,
            cache_misses: self.cache_misses,
            placements: self.placements.unwrap_or_default(),
            events,
        }
    }

    /// Starts the next decision if the producer is idle and a unit waits.
    fn next_decision(&mut self, queue: &mut EventQueue<ServerEvent>) {
        if !matches!(self.producer, Producer::Idle) {
            return;
        }
        let Some(next) = self.input.pop_front() else { return };
        let Some(q) = next else {
            self.producer = Producer::Marking;
            self.start_run(self.params.packet_cost, queue);
            return;
        };
        let w = self.placer.place(&q.unit, &self.load.view());
        self.producer = Producer::Deciding(q, w);
        self.start_run(Nanos(self.params.decision_cost.0 + self.params.packet_cost.0), queue);
    }

    /// The producer starts `work` (solo-speed time), slowed if it shares a busy worker's core.
    fn start_run(&mut self, work: Nanos, queue: &mut EventQueue<ServerEvent>) {
        self.run = Some(Run { since: queue.now(), left: work.0 as f64, speed: 0.0 });
        self.place_producer(queue);
        if let Some(w) = self.producer_on {
            self.respeed(w, queue);
        }
    }

    /// A floating producer whose core's worker is serving moves to an idle worker's core, if
    /// there is one; the workers it leaves and joins, and the producer, are re-speeded.
    fn place_producer(&mut self, queue: &mut EventQueue<ServerEvent>) {
        if self.params.producer_core == ProducerCore::Floats
            && let Some(on) = self.producer_on
            && self.serving[on.0 as usize].is_some()
            && let Some(idle) = self.serving.iter().position(Option::is_none)
        {
            let to = WorkerId(idle as u32);
            self.producer_on = Some(to);
            self.respeed(on, queue);
            self.respeed(to, queue);
        }
        self.respeed_producer(queue);
    }

    /// The producer's speed: half while it shares its core with a serving worker, else whole.
    fn respeed_producer(&mut self, queue: &mut EventQueue<ServerEvent>) {
        let shared = self.producer_on.is_some_and(|w| self.serving[w.0 as usize].is_some());
        let speed = if shared { 0.5 } else { 1.0 };
        let now = queue.now();
        let Some(run) = &mut self.run else { return };
        if run.speed == speed {
            return;
        }
        run.left = (run.left - (now.0 - run.since.0) as f64 * run.speed).max(0.0);
        run.since = now;
        run.speed = speed;
        self.producer_epoch = self.producer_epoch.wrapping_add(1);
        queue.schedule_in(Nanos((run.left / speed).ceil() as u64), ServerEvent::DecisionDone(self.producer_epoch));
    }

    /// Puts `q` on worker `w`'s queue, starting service if the worker was idle.
    fn enqueue(&mut self, q: Queued, w: WorkerId, queue: &mut EventQueue<ServerEvent>) {
        self.load.on_enqueue(w, &q.unit);
        let wq = &mut self.queues[w.0 as usize];
        wq.push_back(q);
        if wq.len() == 1 {
            self.start_service(w, queue);
        }
    }

    /// A unit finished: without reordering it departs now; with it, it waits at its flow's home
    /// node until every earlier unit of the flow has finished, then departs in order.
    fn release(&mut self, now: Nanos, done: Queued, w: WorkerId) {
        let Some(buffer) = &mut self.reorder else {
            self.latency.record(now.0 - done.arrived.0);
            return;
        };
        let (latency, released) = (&mut self.latency, &mut self.released);
        buffer.push(done.unit.flow, done.unit.seq, done, |seq, q| {
            latency.record(now.0 - q.arrived.0);
            released.on_departure(q.unit.flow, seq, w, now);
        });
    }

    /// Every unit of `flow` has left: its state goes, everywhere.
    fn forget(&mut self, flow: FlowId) {
        if let Some(a) = self.accounts.remove(flow)
            && a.units > 0
        {
            let active = (a.last.0 - a.first.0).max(1) as f64;
            self.finished.push((
                a.busy as f64 / active,
                a.units as f64 / active * 1e9,
                a.bytes as f64 / a.units as f64,
            ));
        }
        self.placer.forget_flow(flow);
        self.order.forget(flow);
        self.released.forget(flow);
        self.homes.remove(flow);
        if let Some(buffer) = &mut self.reorder {
            buffer.forget(flow);
        }
    }

    fn start_service(&mut self, w: WorkerId, queue: &mut EventQueue<ServerEvent>) {
        let Some(&head) = self.queues[w.0 as usize].front() else { return };
        let now = queue.now();
        let p = &self.params;
        let work = self.source.work_bytes(&head.unit);
        self.scanned += work;
        let mut t = p.service_base.0 + p.service_per_kib.0.saturating_mul(work) / 1024;
        let last = self.accounts.get_mut(head.unit.flow).and_then(|a| a.worker.replace(w));
        if let Some(prev) = last {
            let extra = p.topology.cost(prev.0, w.0) - 1.0;
            t += (p.migration_penalty.0 as f64 * extra).round() as u64;
        }
        if let Some((cost, moved)) = self.source.measured_cost(&head.unit) {
            // The first GOP of a stream has no previous worker to be warm on: it is charged as
            // measured, as is every GOP that stays.
            let factor = if last.is_some_and(|prev| prev != w) { moved } else { 1.0 };
            t += (cost as f64 * factor).round() as u64;
        }
        if let Some(placed) = &mut self.placements {
            placed.push((head.unit.flow, head.unit.seq, w));
        }
        if p.home_penalty.0 > 0 {
            let placer = &mut self.placer;
            let h = *self.homes.get_or_insert_with(head.unit.flow, || placer.home(&head.unit));
            t += (p.home_penalty.0 as f64 * (p.topology.cost(h.0, w.0) - 1.0)).round() as u64;
        }
        if let (Some(caches), Some(c)) = (&mut self.caches, &p.cache) {
            let mut ns = 0.0;
            let mut charge = |a: super::cache::Access| {
                ns += a.ns;
                for (total, m) in self.cache_misses.iter_mut().zip(a.misses) {
                    *total += m;
                }
            };
            charge(caches.access(w.0, head.unit.flow.0, c.flow_state_bytes + work));
            if c.shared_bytes > 0 {
                charge(caches.access(w.0, SHARED_FOOTPRINT, c.shared_bytes));
            }
            if self.reorder.is_some() {
                let placer = &mut self.placer;
                let h = *self.homes.get_or_insert_with(head.unit.flow, || placer.home(&head.unit));
                ns += caches.transfer_ns(w.0, h.0, head.unit.size);
            }
            self.cache_ns += ns;
            t += ns.round() as u64;
        }
        self.serving[w.0 as usize] = Some(Service { started: now, since: now, left: t as f64, speed: 0.0 });
        self.respeed(w, queue);
        if self.producer_on.is_some() {
            self.place_producer(queue);
        }
    }

    /// Worker `w` finished its unit: its busy time is counted and its siblings speed up.
    fn end_service(&mut self, w: WorkerId, queue: &mut EventQueue<ServerEvent>) {
        let s = self.serving[w.0 as usize].take().expect("a worker finishes only what it serves");
        let (now, took) = (queue.now(), queue.now().0 - s.started.0);
        self.busy[w.0 as usize].0 += took;
        if let Some(head) = self.queues[w.0 as usize].front()
            && let Some(a) = self.accounts.get_mut(head.unit.flow)
        {
            (a.last, a.busy, a.units, a.bytes) = (now, a.busy + took, a.units + 1, a.bytes + head.unit.size);
        }
        self.respeed(w, queue);
        // A worker with more queued serves again at once: only one going idle frees its core.
        if self.producer_on == Some(w) || (self.producer_on.is_some() && self.queues[w.0 as usize].len() <= 1) {
            self.place_producer(queue);
        }
    }

    /// Sets the speed of every serving worker in `w`'s execution group from how many of them
    /// serve, rescheduling the completion of any whose speed changed.
    fn respeed(&mut self, w: WorkerId, queue: &mut EventQueue<ServerEvent>) {
        let now = queue.now();
        let first = (w.0 / self.group * self.group) as usize;
        let members = first..(first + self.group as usize).min(self.serving.len());
        let k = self.serving[members.clone()].iter().flatten().count();
        let group_speed = 1.0 / (1.0 + self.params.sibling_sharing * k.saturating_sub(1) as f64);
        for i in members {
            let with_producer = self.run.is_some() && self.producer_on == Some(WorkerId(i as u32));
            let speed = if with_producer { group_speed * 0.5 } else { group_speed };
            let Some(s) = &mut self.serving[i] else { continue };
            if s.speed == speed {
                continue;
            }
            s.left = (s.left - (now.0 - s.since.0) as f64 * s.speed).max(0.0);
            s.since = now;
            s.speed = speed;
            self.epochs[i] = self.epochs[i].wrapping_add(1);
            queue
                .schedule_in(Nanos((s.left / speed).ceil() as u64), ServerEvent::ServiceDone(i as u32, self.epochs[i]));
        }
    }
}

impl Model for Server {
    type Event = ServerEvent;

    fn handle(&mut self, now: Nanos, event: ServerEvent, queue: &mut EventQueue<ServerEvent>) {
        match event {
            ServerEvent::FlowStart(i) => self.source.on_flow_start(i, queue),
            ServerEvent::Unit(i) => {
                match self.source.on_unit(i, queue) {
                    Some(unit) => {
                        self.emitted += 1;
                        self.accounts.get_or_insert_with(unit.flow, || FlowAccount {
                            first: now,
                            last: now,
                            busy: 0,
                            units: 0,
                            bytes: 0,
                            worker: None,
                        });
                        self.input.push_back(Some(Queued { unit, arrived: now }));
                        self.next_decision(queue);
                    }
                    None if self.params.packet_cost.0 > 0 => {
                        self.input.push_back(None);
                        self.next_decision(queue);
                    }
                    None => {}
                }
                for flow in self.source.take_finished() {
                    self.forget(flow);
                }
            }
            ServerEvent::DecisionDone(epoch) => {
                if epoch != self.producer_epoch {
                    return;
                }
                self.run = None;
                if let Some(shared) = self.producer_on {
                    self.respeed(shared, queue);
                }
                let (q, w) = match std::mem::replace(&mut self.producer, Producer::Idle) {
                    Producer::Deciding(q, w) => (q, w),
                    Producer::Marking => return self.next_decision(queue),
                    Producer::Idle | Producer::Blocked(..) => unreachable!("a decision completes only while deciding"),
                };
                if self.queues[w.0 as usize].len() < self.params.queue_capacity {
                    self.enqueue(q, w, queue);
                } else if self.params.on_full == OnFull::Block {
                    self.producer = Producer::Blocked(q, w, now);
                    return;
                } else {
                    self.dropped += 1;
                }
                self.next_decision(queue);
            }
            ServerEvent::ServiceDone(wi, epoch) => {
                if self.epochs[wi as usize] != epoch {
                    return;
                }
                let w = WorkerId(wi);
                self.end_service(w, queue);
                let Some(done) = self.queues[wi as usize].pop_front() else {
                    unreachable!("a worker finishes only what it holds")
                };
                self.load.on_complete(w, &done.unit);
                self.source.on_served(&done.unit);
                self.served += 1;
                self.bytes += done.unit.size;
                self.last_departure = now;
                self.order.on_departure(done.unit.flow, done.unit.seq, w, now);
                self.release(now, done, w);
                if self.source.on_departure(done.unit.flow) {
                    self.forget(done.unit.flow);
                }
                self.start_service(w, queue);
                if let Producer::Blocked(q, bw, since) = self.producer
                    && bw == w
                {
                    self.blocked.0 += now.0 - since.0;
                    self.producer = Producer::Idle;
                    self.enqueue(q, w, queue);
                    self.next_decision(queue);
                }
            }
        }
    }
}
