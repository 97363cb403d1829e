//! `bench inspect`: the real DPI pipeline against its single-threaded baseline and against the
//! simulator's prediction for the same trace, in one go.
//!
//! The simulator is given the kernel's measured scan cost (a straight-line fit of time against
//! buffer length), the producer's measured cost per packet and per placement, where each
//! connection matched, and the same trace; it predicts each policy's throughput twice: with the
//! producer on a core of its own (a machine with a core to spare), and, where the workers take
//! every core, with the producer floating as the OS runs it (on an idle worker's core, sharing
//! one at half speed while every worker serves).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use switchyard_core::measure::median_of_rounds;
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowId, FlowKey, Policy, Topology, WorkerId};
use switchyard_ingest::{ConnConfig, ConnTable, SliceReader, Step, Tcp};
use switchyard_runtime::affinity::on_core;
use switchyard_runtime::inspect::{Engine, Inspector};
use switchyard_runtime::pipeline::{self, PipelineConfig};
use switchyard_runtime::serial::{Verdict, inspect_serial, inspect_serial_timed};
use switchyard_runtime::sharded;
use switchyard_runtime::tracegen::{TraceSpec, generate};
use switchyard_sim::Nanos;
use switchyard_sim::models::server::{OnFull, ProducerCore, Server, ServerParams, Workload};
use switchyard_sim::models::trace::{Trace, TraceReplay};

use super::{cores, median, process_cpu};
use crate::ExperimentError;
use crate::report::{ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec};

/// The policies the sharded design is benchmarked with (of those that place by the flow alone).
pub const SHARDED: [Policy; 2] = [Policy::ModN, Policy::Hrw];

/// The policies benchmarked, in order; static hash (mod-N) is the reference of the skewed goal.
pub const POLICIES: [Policy; 5] = [Policy::ModN, Policy::Affinity, Policy::Hrw, Policy::Ahrw, Policy::Bounded];

/// Each case runs at least this long in all (repeating a short capture), so that thread
/// start-up and timer noise do not decide a small sample's figures.
const MIN_CASE_TIME: Duration = Duration::from_millis(300);

/// What to benchmark.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Connections per generated trace (a uniform and a skewed one).
    pub connections: u32,
    /// Fraction of elephant connections in the skewed trace.
    pub elephants: f64,
    /// Worker threads for the parallel runs.
    pub workers: u32,
    /// Rounds of every case at least (each runs the single thread, the producer alone and every
    /// policy once, in turn); the median round is reported.
    pub repeat: usize,
    /// Buffers each worker's queue holds.
    pub queue: usize,
    /// Buffers handed to a worker at once.
    pub batch: usize,
    /// How the signatures are matched in every run.
    pub engine: Engine,
    /// A capture benchmarked before the generated traces (the shipped sample), as bytes.
    pub sample: Option<Vec<u8>>,
}

/// One trace's figures.
#[derive(Clone, Debug)]
pub struct TraceRun {
    /// `sample`, `uniform` or `skewed`.
    pub name: String,
    /// Packets in the trace.
    pub packets: u64,
    /// Rounds run.
    pub rounds: usize,
    /// The single thread's packets per second (median round).
    pub serial_pps: f64,
    /// The producer alone, ns per packet: reading, tracking and keeping each inspected payload.
    pub producer_ns: f64,
    /// The single thread's work per packet that is not the producer's (reassembly and scanning).
    pub worker_ns: f64,
    /// The kernel's fitted cost of a buffer: ns at length 0, and ns per KiB.
    pub scan_ns: (f64, f64),
    /// The speed-up one producer allows with this many workers on this machine's cores.
    pub ceiling: f64,
    /// The same with the producer's cost measured inside a pipeline, where it could be.
    pub dispatch_ceiling: Option<f64>,
    /// The producer's CPU per packet dispatching to one worker from a core of its own.
    pub lone_ns: Option<f64>,
    /// That one-worker pipeline over the single thread.
    pub lone_ratio: Option<f64>,
    /// By policy, in the order of [`POLICIES`].
    pub policies: Vec<PolicyRow>,
    /// The sharded design (no producer), by policy, in the order of [`SHARDED`].
    pub shards: Vec<ShardRow>,
    /// Each shard's cost of reading and placing a packet it leaves to another, ns.
    pub read_place_ns: f64,
    /// The machine's own ceiling for the workers on its cores: as many copies of the single
    /// thread as workers (no more than the cores) run at once, one per core, the copies' count
    /// times the single thread's time over their time together (median round). No design
    /// splitting the work across those cores can beat it.
    pub machine_ceiling: f64,
    /// Those copies' CPU time over as many single threads' alone (median round): what a packet
    /// costs when every core works, before any cost of splitting the work.
    pub machine_cpu_floor: f64,
}

/// The sharded design's figures for one policy on one trace, beside the model's prediction.
#[derive(Clone, Debug)]
pub struct ShardRow {
    /// The policy that shards the connections.
    pub policy: Policy,
    /// Packets per second (median round).
    pub packets_per_s: f64,
    /// Times faster than the single thread, within a round (median round).
    pub over_serial: f64,
    /// The process's CPU time over the single thread's, within a round (median round).
    pub cpu_over_serial: f64,
    /// The model's speed-up: each shard reads and places every packet at the measured cost,
    /// and does the rest of its own packets' work at the single thread's cost per packet, on
    /// as many cores as the machine has.
    pub predicted: f64,
}

/// One policy's figures on one trace, real beside simulated.
#[derive(Clone, Debug)]
pub struct PolicyRow {
    /// The policy.
    pub policy: Policy,
    /// Packets per second (median round).
    pub packets_per_s: f64,
    /// Times faster than the single thread, within a round (median round).
    pub over_serial: f64,
    /// Times faster than static hash, within a round (median round).
    pub over_static: f64,
    /// The whole process's CPU time (producer, workers, their idle spinning) over the single
    /// thread's, within a round (median round): the pipeline's overhead per packet.
    pub cpu_over_serial: f64,
    /// The producer's CPU per packet in this policy's runs, where the OS could say.
    pub producer_ns: Option<f64>,
    /// Share of the run the producer waited on a full queue.
    pub blocked: f64,
    /// The simulator's speed-up over its own single thread: the producer on a core of its own.
    pub sim_own: f64,
    /// The same with the producer floating, where the workers take every core.
    pub sim_floating: Option<f64>,
    /// The simulated throughput over the real one: own core, floating.
    pub sim_over_real: (f64, Option<f64>),
    /// The simulated producer's waiting share, floating.
    pub sim_floating_blocked: Option<f64>,
}

/// What the producer keeps of an inspected packet for the workers: direction, TCP header and
/// the payload, borrowed from the capture.
type Piece<'a> = (bool, Option<Tcp>, &'a [u8]);

/// One round of every case on one trace.
struct Round {
    serial: Duration,
    /// The process's CPU seconds in the single thread's run.
    serial_cpu: f64,
    producer: Duration,
    /// By policy, in the order benchmarked.
    runs: Vec<Timed>,
    /// The sharded design, by policy: wall time, process CPU seconds, packets per shard.
    sharded: Vec<(Duration, f64, Vec<u64>)>,
    /// One shard reading and placing every packet and keeping none.
    read_place: Duration,
    /// The producer's CPU time in a one-worker pipeline, on a core of its own, and how many
    /// times faster than the single thread that pipeline ran.
    lone: Option<(Duration, f64)>,
    /// Copies of the single thread run at once, one per core, until the last is done, and the
    /// process's CPU seconds in that time.
    copies: (Duration, f64),
}

struct Timed {
    elapsed: Duration,
    /// The process's CPU seconds in the run: producer, workers, and their idle spinning.
    cpu: f64,
    /// Placing time per buffer placed, and per packet read.
    place_ns: f64,
    placing_ns: f64,
    producer_cpu: Option<Duration>,
    /// Share of the run the producer waited on a full queue.
    blocked: f64,
}

/// Runs the benchmark: the sample (if given), then a uniform and a skewed generated trace,
/// advancing `progress` as each one's figures are ready.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Vec<TraceRun>, ExperimentError> {
    Ok(bench(s, progress)?)
}

fn bench(s: &Setup, progress: &dyn Progress) -> Result<Vec<TraceRun>> {
    let mut traces = Vec::new();
    if let Some(bytes) = &s.sample {
        traces.push(("sample".to_owned(), bytes.clone()));
    }
    for (name, seed, elephants) in [("uniform", 1, 0.0), ("skewed", 2, s.elephants)] {
        let mut pcap = Vec::new();
        let spec = TraceSpec { connections: s.connections, elephants, seed, ..TraceSpec::default() };
        generate(&spec, &mut pcap).context("generating the trace")?;
        traces.push((name.to_owned(), pcap));
    }
    let mut runs = Vec::new();
    progress.stage("bench inspect: traces", traces.len() as u64);
    for (name, pcap) in &traces {
        runs.push(trace(s, name, pcap)?);
        progress.advance(1);
    }
    Ok(runs)
}

/// The producer alone: what the pipeline's producer does for each packet (read, track, and for
/// each inspected packet its flow id and its payload left in the connection's slot for it, the
/// slots allocated together per connection from an arena, as the pipeline's are), without
/// placing or handing over, and without workers.
fn producer_alone(pcap: &[u8], conn: ConnConfig) -> Result<Duration> {
    let t = Instant::now();
    let mut reader = SliceReader::new(pcap)?;
    let arena: typed_arena::Arena<Piece<'_>> = typed_arena::Arena::new();
    let mut table: ConnTable<Option<(FlowId, &mut [Piece<'_>])>> = ConnTable::new(conn);
    let per_conn = conn.max_packets as usize;
    // Read as the producer reads, each packet handed to the loop's body.
    reader.for_each_kept(
        |_, _| false,
        |p| {
            if let Step::Buffer { conn: c, from_client, index, .. } = table.on_packet(&p) {
                let key = c.key();
                let (_, slots) = c.data.get_or_insert_with(|| {
                    let slots = arena.alloc_extend((0..per_conn).map(|_| (false, None, &[][..])));
                    (FlowKey::Tuple(key.undirected()).id(), slots)
                });
                slots[index as usize] = (from_client, p.tcp, p.payload);
            }
            std::ops::ControlFlow::Continue(())
        },
    )?;
    std::hint::black_box(table.len());
    Ok(t.elapsed())
}

/// What timing costs: the median of many back-to-back `Instant::now()` and `elapsed()` pairs
/// (on this VM about 68 ns, as much as scanning a short buffer).
fn clock_cost() -> Duration {
    let samples = (0..1001)
        .map(|_| {
            let t = Instant::now();
            t.elapsed()
        })
        .collect();
    median(samples)
}

/// Least-squares fit of scan time against buffer length: (ns at length 0, ns per KiB).
#[derive(Default)]
struct Fit {
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

impl Fit {
    fn add(&mut self, len: usize, t: Duration) {
        let (x, y) = (len as f64 / 1024.0, t.as_nanos() as f64);
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
    }

    fn line(&self) -> (f64, f64) {
        let d = self.n * self.sxx - self.sx * self.sx;
        let slope = if d.abs() < 1e-9 { 0.0 } else { (self.n * self.sxy - self.sx * self.sy) / d };
        let base = (self.sy - slope * self.sx) / self.n.max(1.0);
        (base.max(0.0), slope.max(0.0))
    }
}

/// Rounds of every case on one trace, and the simulator's prediction for each policy.
fn trace(s: &Setup, name: &str, pcap: &[u8]) -> Result<TraceRun> {
    let inspector = Inspector::with_engine(s.engine);
    let conn = ConnConfig::default();
    let cores = cores();
    let used_cores = (s.workers as usize).clamp(1, cores.max(1));
    let ids: Vec<WorkerId> = (0..s.workers).map(WorkerId).collect();
    let config = PipelineConfig { conn, queue_capacity: s.queue, batch: s.batch, ..PipelineConfig::default() };
    // One timed single-thread run fits the kernel's cost and says where each connection
    // matched; the throughput runs below are not timed per buffer.
    let mut fit = Fit::default();
    let first = on_core(0, || {
        // Each buffer's time includes one reading of the clock; that is not the kernel's.
        let clock = clock_cost();
        inspect_serial_timed(SliceReader::new(pcap)?, conn, &inspector, &mut |len, d| {
            fit.add(len, d.saturating_sub(clock));
        })
    })?;
    let packets = first.packets;
    let m = first.conns.iter().filter(|c| matches!(c.verdict, Verdict::Matched(_))).count();
    let matched = m as f64 / first.conns.len().max(1) as f64;
    let match_points = first
        .conns
        .iter()
        .map(|c| (FlowKey::Tuple(c.key.undirected()).id(), c.matched_at.map_or(0, |i| u64::from(i) + 1)));
    // The simulator replays each connection's match where the real run found it.
    let mut trace = Trace::read(pcap, true)?;
    trace.set_match_points(match_points);
    let trace = Arc::new(trace);
    // Rounds of every case in turn, so that all of them meet the machine in the same moods (a
    // shared VM's speed drifts by a fifth within a minute); each ratio to the single thread is
    // taken within a round, and the median round's is reported.
    let mut rounds: Vec<Round> = Vec::new();
    let begun = Instant::now();
    let enough = MIN_CASE_TIME * (2 + POLICIES.len() as u32);
    while rounds.len() < s.repeat.max(1) || begun.elapsed() < enough {
        // The single thread and the producer alone run pinned, as the workers do.
        let (serial, serial_cpu, producer) = on_core(0, || -> Result<(Duration, f64, Duration)> {
            let (t, cpu) = (Instant::now(), process_cpu());
            inspect_serial(SliceReader::new(pcap)?, conn, &inspector)?;
            Ok((t.elapsed(), process_cpu() - cpu, producer_alone(pcap, conn)?))
        })?;
        let mut runs = Vec::with_capacity(POLICIES.len());
        for policy in POLICIES {
            let mut placer = place::build(policy, &PlaceConfig::default(), &ids)?;
            let cpu = process_cpu();
            let r = pipeline::run(SliceReader::new(pcap)?, placer.as_mut(), &config, &inspector)?;
            runs.push(Timed {
                elapsed: r.elapsed,
                cpu: process_cpu() - cpu,
                // Per buffer placed: those scanned and those the workers found stale.
                place_ns: r.placing.as_nanos() as f64
                    / (r.summary.inspected + r.workers.iter().map(|w| w.skipped).sum::<u64>()).max(1) as f64,
                placing_ns: r.placing.as_nanos() as f64 / packets.max(1) as f64,
                producer_cpu: r.producer_cpu,
                blocked: r.producer_blocked.as_secs_f64() / r.elapsed.as_secs_f64().max(1e-9),
            });
        }
        let mut sharded_runs = Vec::with_capacity(SHARDED.len());
        for policy in SHARDED {
            let cpu = process_cpu();
            let r = sharded::run(pcap, s.workers, policy, conn, &inspector, true)?;
            sharded_runs.push((r.elapsed, process_cpu() - cpu, r.shards.iter().map(|x| x.packets).collect()));
        }
        let read_place = on_core(0, || sharded::leave_all(pcap, s.workers, Policy::Hrw, conn, &inspector))?;
        // The producer's own cost of dispatching, on a core no worker shares: one worker, so
        // that a core is free for the producer (where the machine has two).
        let lone = if cores > 1 {
            let mut placer = place::build(Policy::ModN, &PlaceConfig::default(), &[WorkerId(0)])?;
            let r = pipeline::run(SliceReader::new(pcap)?, placer.as_mut(), &config, &inspector)?;
            r.producer_cpu.map(|cpu| (cpu, serial.as_secs_f64() / r.elapsed.as_secs_f64().max(1e-9)))
        } else {
            None
        };
        let cpu = process_cpu();
        let copies = (copies_at_once(pcap, used_cores, conn, &inspector)?, process_cpu() - cpu);
        rounds.push(Round { serial, serial_cpu, producer, runs, sharded: sharded_runs, read_place, lone, copies });
    }
    let per_packet = |d: Duration| d.as_nanos() as f64 / packets.max(1) as f64;
    let machine_ceiling = median_of_rounds(
        rounds
            .iter()
            .map(|r| used_cores as f64 * r.serial.as_secs_f64() / r.copies.0.as_secs_f64().max(1e-9))
            .collect(),
    );
    let machine_cpu_floor =
        median_of_rounds(rounds.iter().map(|r| r.copies.1 / (used_cores as f64 * r.serial_cpu).max(1e-9)).collect());
    let serial = median(rounds.iter().map(|r| r.serial).collect());
    let producer_ns = per_packet(median(rounds.iter().map(|r| r.producer).collect()));
    let (base, per_kib) = fit.line();
    let worker_ns = (per_packet(serial) - producer_ns).max(0.0);
    let used = (s.workers as usize).min(cores) as f64;
    let ceiling = (producer_ns + worker_ns) / producer_ns.max((producer_ns + worker_ns) / used);
    // The same with what the producer costs inside a pipeline (placing and handing over too),
    // measured on a core of its own: the bound a single producer sets in practice.
    let lone: Vec<Duration> = rounds.iter().filter_map(|r| r.lone.map(|l| l.0)).collect();
    let lone_ns = (!lone.is_empty()).then(|| per_packet(median(lone)));
    let lone_ratio: Vec<f64> = rounds.iter().filter_map(|r| r.lone.map(|l| l.1)).collect();
    let lone_ratio = (!lone_ratio.is_empty()).then(|| median_of_rounds(lone_ratio));
    let dispatch_ceiling = lone_ns.map(|p| per_packet(serial) / p.max((producer_ns + worker_ns) / used));
    let pps = |d: Duration| packets as f64 / d.as_secs_f64().max(1e-9);
    let static_at = POLICIES.iter().position(|&q| q == Policy::ModN).expect("benchmarked");
    let mut policies = Vec::new();
    for (k, policy) in POLICIES.into_iter().enumerate() {
        let elapsed = median(rounds.iter().map(|r| r.runs[k].elapsed).collect());
        let over_serial =
            median_of_rounds(rounds.iter().map(|r| r.serial.as_secs_f64() / r.runs[k].elapsed.as_secs_f64()).collect());
        let cpu_over_serial = median_of_rounds(rounds.iter().map(|r| r.runs[k].cpu / r.serial_cpu.max(1e-9)).collect());
        let over_static = median_of_rounds(
            rounds.iter().map(|r| r.runs[static_at].elapsed.as_secs_f64() / r.runs[k].elapsed.as_secs_f64()).collect(),
        );
        let place_ns = median_of_rounds(rounds.iter().map(|r| r.runs[k].place_ns).collect());
        let placing_ns = median_of_rounds(rounds.iter().map(|r| r.runs[k].placing_ns).collect());
        let cpu: Vec<Duration> = rounds.iter().filter_map(|r| r.runs[k].producer_cpu).collect();
        let cpu_ns = (!cpu.is_empty()).then(|| per_packet(median(cpu)));
        let real = pps(elapsed);
        let params = ServerParams {
            topology: Topology::flat(s.workers)?,
            policy,
            place: PlaceConfig::default(),
            queue_capacity: s.queue,
            on_full: OnFull::Block,
            decision_cost: Nanos(place_ns.round() as u64),
            // What the producer cost per packet inside this policy's runs, less its placing
            // (given separately): the standalone figure left out what handing over costs.
            packet_cost: Nanos((cpu_ns.unwrap_or(producer_ns) - placing_ns).max(0.0).round() as u64),
            service_base: Nanos(base.round() as u64),
            service_per_kib: Nanos(per_kib.round() as u64),
            migration_penalty: Nanos(0),
            home_penalty: Nanos(0),
            cache: None,
            sibling_sharing: 0.0,
            producer_core: ProducerCore::Own,
            workers: None,
            workload: Workload::Trace(TraceReplay {
                trace: Arc::clone(&trace),
                time_scale: 0.0,
                dpi: Some((u64::from(conn.max_packets), matched)),
            }),
            seed: 1,
        };
        // The producer on a core of its own (a machine with a core to spare), and as it runs
        // here when there is none: unpinned, where a worker is idle, sharing when none is.
        // Throughput, and the share of the run the producer waited on a full queue.
        let sim_with = |producer_core: ProducerCore| -> Result<(f64, f64)> {
            let o = Server::simulate(&ServerParams { producer_core, ..params.clone() })?;
            let span = o.makespan.0.max(1) as f64;
            Ok((packets as f64 / (span / 1e9), o.producer_blocked.0 as f64 / span))
        };
        let (own, _) = sim_with(ProducerCore::Own)?;
        let floating = if s.workers as usize >= cores { Some(sim_with(ProducerCore::Floats)?) } else { None };
        let sim_serial = packets as f64 / ((producer_ns * packets as f64 + fit.sy) / 1e9);
        policies.push(PolicyRow {
            policy,
            packets_per_s: real,
            over_serial,
            over_static,
            cpu_over_serial,
            producer_ns: cpu_ns,
            blocked: median_of_rounds(rounds.iter().map(|r| r.runs[k].blocked).collect()),
            sim_own: own / sim_serial,
            sim_floating: floating.map(|f| f.0 / sim_serial),
            sim_over_real: (own / real, floating.map(|f| f.0 / real)),
            sim_floating_blocked: floating.map(|f| f.1),
        });
    }
    let read_place_ns = per_packet(median(rounds.iter().map(|r| r.read_place).collect()));
    let rest_ns = (per_packet(serial) - read_place_ns).max(0.0);
    let shards = SHARDED
        .into_iter()
        .enumerate()
        .map(|(k, policy)| {
            let elapsed = median(rounds.iter().map(|r| r.sharded[k].0).collect());
            let over_serial = median_of_rounds(
                rounds.iter().map(|r| r.serial.as_secs_f64() / r.sharded[k].0.as_secs_f64().max(1e-9)).collect(),
            );
            let cpu_over_serial =
                median_of_rounds(rounds.iter().map(|r| r.sharded[k].1 / r.serial_cpu.max(1e-9)).collect());
            // Each shard's time: every packet read and placed, its own packets' other work.
            let times: Vec<f64> = rounds[0].sharded[k]
                .2
                .iter()
                .map(|&own| packets as f64 * read_place_ns + own as f64 * rest_ns)
                .collect();
            let longest = times.iter().copied().fold(0.0, f64::max);
            let shared = times.iter().sum::<f64>() / cores as f64;
            let predicted = per_packet(serial) * packets as f64 / longest.max(shared).max(1e-9);
            ShardRow { policy, packets_per_s: pps(elapsed), over_serial, cpu_over_serial, predicted }
        })
        .collect();
    Ok(TraceRun {
        name: name.to_owned(),
        packets,
        rounds: rounds.len(),
        serial_pps: pps(serial),
        producer_ns,
        worker_ns,
        scan_ns: (base, per_kib),
        ceiling,
        dispatch_ceiling,
        lone_ns,
        lone_ratio,
        policies,
        shards,
        read_place_ns,
        machine_ceiling,
        machine_cpu_floor,
    })
}

/// Runs `copies` copies of the single thread at once, each pinned to a core of its own, and
/// times them until the last is done: with nothing shared but the machine, the slowdown of each
/// against the single thread alone is what the machine takes from parallel work (shared caches,
/// memory bandwidth, clock speed with every core busy) before any cost of splitting it.
fn copies_at_once(pcap: &[u8], copies: usize, conn: ConnConfig, inspector: &Inspector) -> Result<Duration> {
    let start = Instant::now();
    std::thread::scope(|scope| {
        let runs: Vec<_> = (0..copies)
            .map(|core| scope.spawn(move || on_core(core, || inspect_serial(SliceReader::new(pcap)?, conn, inspector))))
            .collect();
        runs.into_iter().try_for_each(|r| r.join().expect("a copy does not panic").map(drop))
    })?;
    Ok(start.elapsed())
}

/// Each trace's figures that are not a policy's.
pub const TRACES: TableSpec = TableSpec::new(
    "traces",
    "Each trace: the single thread, the producer alone, and the ceilings",
    &[
        ColumnSpec::text("trace"),
        ColumnSpec::int("packets"),
        ColumnSpec::int("rounds"),
        ColumnSpec::num("serial_pps", 0).header("single thread").unit("packets/s"),
        ColumnSpec::num("producer_ns", 0).header("producer alone").unit("ns/packet"),
        ColumnSpec::num("worker_ns", 0).header("workers' share").unit("ns/packet").about("reassembly and scanning"),
        ColumnSpec::num("scan_base_ns", 0)
            .header("scan")
            .unit("ns/buffer")
            .about("the kernel's fitted cost of a buffer at length 0"),
        ColumnSpec::num("scan_per_kib_ns", 0).header("scan").unit("ns/KiB").about("the kernel's fitted cost per KiB"),
        ColumnSpec::num("ceiling", 2)
            .header("ceiling ×1")
            .about("the speed-up one producer allows with the workers on this machine's cores"),
        ColumnSpec::num("dispatch_ceiling", 2)
            .header("with dispatch ×1")
            .about("the same with the producer's cost measured inside a pipeline"),
        ColumnSpec::num("machine_ceiling", 2)
            .header("machine ×1")
            .about("copies of the single thread at once, one per core: no design can beat it"),
        ColumnSpec::num("machine_cpu_floor", 2)
            .header("machine cpu ×1")
            .about("those copies' CPU time over as many single threads' alone"),
        ColumnSpec::num("read_place_ns", 0)
            .header("shard read+place")
            .unit("ns")
            .about("a shard's cost of reading and placing a packet it leaves"),
        ColumnSpec::num("lone_ns", 0)
            .header("lone producer")
            .unit("ns/packet")
            .about("the producer's CPU dispatching to one worker from a core of its own"),
        ColumnSpec::num("lone_ratio", 2).header("lone ×1").about("that one-worker pipeline over the single thread"),
    ],
)
.optional();

/// The producer design by trace and policy, real beside simulated.
pub const POLICY_TABLE: TableSpec = TableSpec::new(
    "policies",
    "The producer design by trace and policy, beside the simulator (sim ×1) and its error (sim/real)",
    &[
        ColumnSpec::text("trace"),
        ColumnSpec::text("policy"),
        ColumnSpec::num("packets_per_s", 0).header("packets/s"),
        ColumnSpec::num("over_serial", 2)
            .header("×1 thread")
            .about("times faster than the single thread (median round)"),
        ColumnSpec::num("cpu_over_serial", 2).header("cpu ×1").about("the process's CPU time over the single thread's"),
        ColumnSpec::num("producer_ns", 0)
            .header("producer")
            .unit("ns")
            .about("the producer's CPU per packet, where the OS could say"),
        ColumnSpec::num("sim_own", 2)
            .header("sim ×1 own core")
            .about("simulated speed-up, the producer on a core of its own"),
        ColumnSpec::num("sim_floating", 2).header("sim ×1 floating").about("simulated speed-up, the producer floating"),
        ColumnSpec::num("sim_over_real_own", 2).header("sim/real own core"),
        ColumnSpec::num("sim_over_real_floating", 2).header("sim/real floating"),
        ColumnSpec::num("blocked", 0)
            .percent()
            .header("waiting")
            .about("share of the run the producer waited on a full queue"),
        ColumnSpec::num("sim_floating_blocked", 0)
            .percent()
            .header("sim waiting")
            .about("the simulated producer's waiting share, floating"),
        ColumnSpec::num("over_static", 2).header("×static").about("times faster than static hash (median round)"),
    ],
)
.optional();

/// The sharded design by trace and policy, beside its model.
pub const SHARD_TABLE: TableSpec = TableSpec::new(
    "sharded",
    "Sharded, no producer: each worker reads every packet and keeps its own",
    &[
        ColumnSpec::text("trace"),
        ColumnSpec::text("policy"),
        ColumnSpec::num("packets_per_s", 0).header("packets/s"),
        ColumnSpec::num("over_serial", 2).header("×1 thread"),
        ColumnSpec::num("cpu_over_serial", 2).header("cpu ×1"),
        ColumnSpec::num("predicted", 2).header("model ×1"),
        ColumnSpec::num("predicted_over_real", 2).header("model/real"),
    ],
)
.optional();

/// `--peer ndpi`: each capture, both sides' speed and how far they agree.
pub const NDPI_CAPTURES: TableSpec = TableSpec::new(
    "ndpi_captures",
    "Beside nDPI's ndpiReader (-v 2, its per-flow report), each on one thread",
    &[
        ColumnSpec::text("capture"),
        ColumnSpec::int("packets"),
        ColumnSpec::num("ours_pps", 0)
            .header("ours")
            .unit("packets/s")
            .about("inspect --workers 1 --results, whole runs"),
        ColumnSpec::num("ours_inspect_pps", 0).header("ours reading+inspecting").unit("packets/s"),
        ColumnSpec::num("ndpi_pps", 0).header("ndpiReader").unit("packets/s").about("ndpiReader's whole runs"),
        ColumnSpec::num("ndpi_reported_pps", 0).header("its own figure").unit("packets/s"),
        ColumnSpec::num("ours_over_ndpi", 1).header("×nDPI").about("ours over ndpiReader, whole runs (goal ≥ 3)"),
        ColumnSpec::num("inspect_over_reported", 1)
            .header("×its figure")
            .about("reading and inspecting alone over nDPI's own throughput figure"),
        ColumnSpec::int("both").header("both named").about("connections both name from payload"),
        ColumnSpec::int("alike"),
        ColumnSpec::num("agreement", 1).percent(),
        ColumnSpec::int("by_port").header("nDPI by port").about("connections nDPI named by port alone"),
        ColumnSpec::int("unpaired").about("flows only one side reported"),
    ],
)
.optional();

/// `--peer ndpi`: agreement per protocol.
pub const NDPI_PROTOCOLS: TableSpec = TableSpec::new(
    "ndpi_protocols",
    "Agreement by protocol on connections both name from payload",
    &[
        ColumnSpec::text("capture"),
        ColumnSpec::text("protocol"),
        ColumnSpec::int("both").header("both named"),
        ColumnSpec::int("alike"),
    ],
)
.optional();

/// `--peer ndpi`: what only one side names, and where they differ.
pub const NDPI_DIFFERENCES: TableSpec = TableSpec::new(
    "ndpi_differences",
    "Where the two differ, and what only one side names",
    &[
        ColumnSpec::text("capture"),
        ColumnSpec::text("kind")
            .about("differ, only ours (nDPI: unknown or by port), ours where nDPI names outside our set, only nDPI's in our set, nDPI's outside our set"),
        ColumnSpec::text("ours"),
        ColumnSpec::text("ndpi").header("nDPI"),
        ColumnSpec::int("connections"),
    ],
)
.optional();

/// `--live`: every run at every rate tried.
pub const LIVE_RUNS: TableSpec = TableSpec::new(
    "live_runs",
    "Live: the sample replayed by tcpreplay into a veth pair, about 1 s at each rate",
    &[
        ColumnSpec::int("workers"),
        ColumnSpec::int("asked_pps")
            .header("asked")
            .unit("packets/s")
            .about("the rate asked of tcpreplay; none: its top speed"),
        ColumnSpec::num("sent_pps", 0).header("sent").unit("packets/s").about("the rate tcpreplay reports it reached"),
        ColumnSpec::int("packets").header("packets read"),
        ColumnSpec::int("frames"),
        ColumnSpec::int("dropped"),
    ],
)
.optional();

/// `--live`: the highest rate without a drop, by workers.
pub const LIVE_CLEAN: TableSpec = TableSpec::new(
    "live_clean",
    "Live: the highest rate at which the rings dropped nothing",
    &[
        ColumnSpec::int("workers"),
        ColumnSpec::text("rate").about(
            "the highest rate asked that dropped nothing (top: tcpreplay's top speed; none: even the first dropped)",
        ),
        ColumnSpec::num("sent_pps", 0).header("sent").unit("packets/s"),
    ],
)
.optional();

/// What `bench inspect` reports: the pipeline's tables, or with `--peer ndpi` or `--live`
/// those modes' (so every table is optional).
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-inspect",
    title: "The DPI pipeline against its single thread and the simulator's prediction; or beside nDPI (--peer ndpi); or live on a veth pair (--live)",
    tables: &[
        &TRACES,
        &POLICY_TABLE,
        &SHARD_TABLE,
        &NDPI_CAPTURES,
        &NDPI_PROTOCOLS,
        &NDPI_DIFFERENCES,
        &LIVE_RUNS,
        &LIVE_CLEAN,
    ],
};

/// The pipeline benchmark as a report: the runs of [`run`] on `setup` with `kernel` named as
/// the user named it; `sample_note` says why the sample was left out, if it was.
pub fn report(s: &Setup, kernel: &str, runs: &[TraceRun], sample_note: Option<&str>) -> Report {
    let mut r = Report::new(&SPEC);
    r.param("connections", s.connections, "connections per generated trace")
        .param("elephants", s.elephants, "fraction of elephant connections in the skewed trace")
        .param("workers", s.workers, "worker threads for the parallel runs")
        .param("repeat", s.repeat, "rounds of every case at least (the median round is reported)")
        .param("queue", s.queue, "buffers each worker's queue holds")
        .param("batch", s.batch, "buffers handed to a worker at once")
        .param("kernel", kernel, "how the signatures are matched");
    r.machine = Some(crate::machine::describe());
    if let Some(why) = sample_note {
        r.note(why);
    }
    let mut traces = Table::new(&TRACES);
    let mut policies = Table::new(&POLICY_TABLE).grouped_by("trace");
    let mut shards = Table::new(&SHARD_TABLE).grouped_by("trace");
    for t in runs {
        traces.push(vec![
            t.name.as_str().into(),
            t.packets.into(),
            t.rounds.into(),
            t.serial_pps.into(),
            t.producer_ns.into(),
            t.worker_ns.into(),
            t.scan_ns.0.into(),
            t.scan_ns.1.into(),
            t.ceiling.into(),
            t.dispatch_ceiling.into(),
            t.machine_ceiling.into(),
            t.machine_cpu_floor.into(),
            t.read_place_ns.into(),
            t.lone_ns.into(),
            t.lone_ratio.into(),
        ]);
        for p in &t.policies {
            policies.push(vec![
                t.name.as_str().into(),
                p.policy.name().into(),
                p.packets_per_s.into(),
                p.over_serial.into(),
                p.cpu_over_serial.into(),
                p.producer_ns.into(),
                p.sim_own.into(),
                p.sim_floating.into(),
                p.sim_over_real.0.into(),
                p.sim_over_real.1.into(),
                p.blocked.into(),
                p.sim_floating_blocked.into(),
                p.over_static.into(),
            ]);
        }
        for x in &t.shards {
            shards.push(vec![
                t.name.as_str().into(),
                x.policy.name().into(),
                x.packets_per_s.into(),
                x.over_serial.into(),
                x.cpu_over_serial.into(),
                x.predicted.into(),
                (x.predicted / x.over_serial).into(),
            ]);
        }
    }
    policies.note("sim ×1: the simulator's speed-up over its own single thread, from costs measured in this run; own core: the producer on a core of its own; floating: where the workers take every core, the producer as the OS runs it (none when a core is spare)");
    shards.note("model ×1: each shard reads and places every packet at the measured cost and does the rest of its own packets' work at the single thread's cost");
    r.tables.extend([traces, policies, shards]);
    let has_sample = runs.iter().any(|t| t.name == "sample");
    for t in runs {
        for g in trace_goals(t, s.workers, has_sample, kernel) {
            r.note(g);
        }
    }
    r
}

/// The goals, as this trace bears on them. The speed-up and CPU goals are reported on
/// every trace: on the sample (a few thousand packets, about a millisecond of work) starting
/// and joining the threads is a large part of a run, which the generated traces amortise.
fn trace_goals(t: &TraceRun, workers: u32, has_sample: bool, kernel: &str) -> Vec<String> {
    let name = &t.name;
    let by = |p: Policy| t.policies.iter().find(|r| r.policy == p);
    // The first policy with the highest score (the ratio, or less CPU), as `1.23× (hrw)`.
    let best = |rows: &mut dyn Iterator<Item = (Policy, f64)>, score: fn(f64) -> f64| {
        rows.min_by(|a, b| score(b.1).total_cmp(&score(a.1)))
            .map_or("-".to_string(), |(p, v)| format!("{v:.2}× ({})", p.name()))
    };
    let serial_ms = t.packets as f64 / t.serial_pps.max(1e-9) * 1e3;
    let mut goals = vec![
        format!(
            "{name} trace ({} packets, {serial_ms:.1} ms on the single thread), kernel {kernel}: {workers} workers over 1 thread, producer design {}, sharded {}, the machine's ceiling {:.2}× (issue 21's goal with --kernel sequential ≥ 1.7×)",
            t.packets,
            best(&mut t.policies.iter().map(|r| (r.policy, r.over_serial)), |v| v),
            best(&mut t.shards.iter().map(|r| (r.policy, r.over_serial)), |v| v),
            t.machine_ceiling,
        ),
        format!(
            "{name} trace, kernel {kernel}: CPU time per packet, {workers} workers over the single thread, producer design {}, sharded {}, the machine's floor {:.2}× (issue 21's goal ≤ 1.15×)",
            best(&mut t.policies.iter().map(|r| (r.policy, r.cpu_over_serial)), |v| -v),
            best(&mut t.shards.iter().map(|r| (r.policy, r.cpu_over_serial)), |v| -v),
            t.machine_cpu_floor,
        ),
    ];
    if name == "sample" || (name == "uniform" && !has_sample) {
        let best = t.policies.iter().map(|p| p.over_serial).fold(0.0, f64::max);
        let percent = |ns: f64| ns * 1e6 / 1e9 * 100.0;
        let inside: Vec<f64> = t.policies.iter().filter_map(|p| p.producer_ns).collect();
        let inside = if inside.is_empty() {
            String::new()
        } else {
            let (lo, hi) =
                (inside.iter().copied().fold(f64::MAX, f64::min), inside.iter().copied().fold(0.0, f64::max));
            format!(
                "; dispatching to {workers} workers, sharing a core with one, {:.1}–{:.1}%",
                percent(lo),
                percent(hi)
            )
        };
        let lone = t.lone_ns.map_or(String::new(), |ns| {
            format!("; dispatching to 1 worker from a core of its own {:.1}%", percent(ns))
        });
        goals.extend([
            format!(
                "producer alone on the {name} trace: {:.0} ns/packet (issue 21's goal ≤ 50 ns); sharded, a worker's cost of a packet it leaves to another: {:.0} ns",
                t.producer_ns, t.read_place_ns
            ),
            format!(
                "producer design on the {name} trace: {best:.2}× at best, ceiling {:.2}×{}{}",
                t.ceiling,
                t.dispatch_ceiling.map_or(String::new(), |c| format!(", {c:.2}× with the producer's in-pipeline cost")),
                t.lone_ratio.map_or(String::new(), |r| format!(
                    "; static hash on 1 worker, the producer on a core of its own: {r:.2}×"
                )),
            ),
            format!(
                "producer on the {name} trace: alone {:.1}% of a core per 10^6 packets/s{lone}{inside} (issue 4's goal < 10%)",
                percent(t.producer_ns)
            ),
        ]);
    } else if name == "skewed" {
        let over = |p: Policy| by(p).map_or(f64::NAN, |r| r.over_static);
        goals.push(format!(
            "skewed trace: AHRW {:.2}×, bounded {:.2}× static hash (goal: one of them > 1)",
            over(Policy::Ahrw),
            over(Policy::Bounded)
        ));
    }
    goals
}
