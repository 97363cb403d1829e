//! `switchyard bench inspect`: the real DPI pipeline against its single-threaded baseline and
//! against the simulator's prediction for the same trace, in one go.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use switchyard_core::measure::median_of_rounds;
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowId, FlowKey, Policy, Topology, WorkerId};
use switchyard_ingest::{ConnConfig, ConnTable, SliceReader, Step, Tcp};
use switchyard_runtime::affinity::on_core;
use switchyard_runtime::pipeline::{self, PipelineConfig};
use switchyard_runtime::serial::{Verdict, inspect_serial_timed};
use switchyard_runtime::tracegen::{TraceSpec, generate};
use switchyard_sim::Nanos;
use switchyard_sim::models::server::{OnFull, ProducerCore, Server, ServerParams, Workload};
use switchyard_sim::models::trace::{Trace, TraceReplay};

/// Benchmarks that need more than `cargo bench`: real threads against a baseline and a model.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    Inspect(InspectBench),
    Mux(crate::bench_mux::MuxBench),
    Gateway(crate::bench_gateway::GatewayBench),
    Deliver(crate::bench_deliver::DeliverBench),
}

/// The DPI pipeline on a uniform and a skewed generated trace: single thread, then static hash,
/// connection affinity, HRW, AHRW and bounded loads on N workers, each beside the simulator's
/// prediction from costs measured on this machine in the same run.
///
/// The simulator is given the kernel's measured scan cost (a straight-line fit of time against
/// buffer length), the producer's measured cost per packet and per placement, where each
/// connection matched, and the same trace; it predicts each policy's throughput twice: with the
/// producer on a core of its own (a machine with a core to spare), and, where the workers take
/// every core, with the producer floating as the OS runs it (on an idle worker's core, sharing
/// one at half speed while every worker serves). The last columns are how far each prediction
/// is from the real run.
///
/// Example:
///
///   switchyard bench inspect --connections 20000 --workers 2
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
struct InspectBench {
    /// Connections per generated trace.
    #[arg(long, default_value_t = 20_000)]
    connections: u32,

    /// Fraction of elephant connections in the skewed trace.
    #[arg(long, default_value_t = 0.02)]
    elephants: f64,

    /// Worker threads for the parallel runs.
    #[arg(long, default_value_t = 2)]
    workers: u32,

    /// Rounds of every case (each round runs the single thread, the producer alone and every
    /// policy once, in turn); the median round is reported.
    #[arg(long, default_value_t = 3)]
    repeat: usize,

    /// Buffers each worker's queue holds.
    #[arg(long, default_value_t = PipelineConfig::default().queue_capacity)]
    queue: usize,

    /// Buffers handed to a worker at once.
    #[arg(long, default_value_t = PipelineConfig::default().batch)]
    batch: usize,

    /// How the signatures are matched in every run (see `switchyard inspect --help`).
    #[arg(long, value_enum, default_value_t = crate::inspect::Kernel::Combined)]
    kernel: crate::inspect::Kernel,

    /// The shipped sample capture, benchmarked first (skipped with a note if it is not there).
    #[arg(long, default_value = "data/traces/labelled.pcap")]
    sample: std::path::PathBuf,
}

/// Each case runs at least this long in all (repeating a short capture), so that thread
/// start-up and timer noise do not decide a small sample's figures.
const MIN_CASE_TIME: Duration = Duration::from_millis(300);

pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    match &args.what {
        BenchWhat::Inspect(a) => inspect(a),
        BenchWhat::Mux(a) => crate::bench_mux::run(a),
        BenchWhat::Gateway(a) => crate::bench_gateway::run(a),
        BenchWhat::Deliver(a) => crate::bench_deliver::run(a),
    }
}

/// What the producer keeps of an inspected packet for the workers: direction, TCP header and
/// the payload, borrowed from the capture.
type Piece<'a> = (bool, Option<Tcp>, &'a [u8]);

/// One round of every case on one trace.
struct Round {
    serial: Duration,
    producer: Duration,
    /// By policy, in the order benchmarked.
    runs: Vec<PolicyRun>,
    /// The producer's CPU time in a one-worker pipeline, on a core of its own, and how many
    /// times faster than the single thread that pipeline ran.
    lone: Option<(Duration, f64)>,
}

struct PolicyRun {
    elapsed: Duration,
    /// Placing time per buffer placed, and per packet read.
    place_ns: f64,
    placing_ns: f64,
    producer_cpu: Option<Duration>,
    /// Share of the run the producer waited on a full queue.
    blocked: f64,
}

/// The producer alone: what the pipeline's producer does for each packet (read, track, and for
/// each inspected packet its flow id and its payload left in the connection's slot for it, the
/// slots allocated together per connection as the pipeline's arena does), without placing or
/// handing over, and without workers.
fn producer_alone(pcap: &[u8], conn: ConnConfig) -> Result<Duration> {
    let t = Instant::now();
    let mut reader = SliceReader::new(pcap)?;
    let mut table: ConnTable<Option<(FlowId, usize)>> = ConnTable::new(conn);
    let mut slots: Vec<Piece<'_>> = Vec::new();
    let per_conn = conn.max_packets as usize;
    while let Some(p) = reader.next_packet()? {
        if let Step::Buffer { conn: c, from_client, index, .. } = table.on_packet(&p) {
            let key = c.key;
            let (_, base) = *c.data.get_or_insert_with(|| {
                slots.resize(slots.len() + per_conn, (false, None, &[]));
                (FlowKey::Tuple(key.undirected()).id(), slots.len() - per_conn)
            });
            slots[base + index as usize] = (from_client, p.tcp, p.payload);
        }
    }
    std::hint::black_box((table.len(), slots.len()));
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

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
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

fn inspect(a: &InspectBench) -> Result<()> {
    let inspector = a.kernel.inspector();
    let conn = ConnConfig::default();
    let policies = [Policy::ModN, Policy::Affinity, Policy::Hrw, Policy::Ahrw, Policy::Bounded];
    let mut out = std::io::stdout().lock();
    writeln!(out, "kernel {}\n", a.kernel.describe())?;
    let mut goals = Vec::new();
    let mut traces = Vec::new();
    match std::fs::read(&a.sample) {
        Ok(bytes) => traces.push(("sample".to_owned(), bytes)),
        Err(e) => writeln!(out, "sample {}: {e}; benchmarking the generated traces only\n", a.sample.display())?,
    }
    for (name, seed, elephants) in [("uniform", 1, 0.0), ("skewed", 2, a.elephants)] {
        let mut pcap = Vec::new();
        let spec = TraceSpec { connections: a.connections, elephants, seed, ..TraceSpec::default() };
        generate(&spec, &mut pcap).context("generating the trace")?;
        traces.push((name.to_owned(), pcap));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ids: Vec<WorkerId> = (0..a.workers).map(WorkerId).collect();
    let config = PipelineConfig { conn, queue_capacity: a.queue, batch: a.batch, ..PipelineConfig::default() };
    for (name, pcap) in &traces {
        let name = name.as_str();
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
        let mut trace = Trace::read(&pcap[..], true)?;
        trace.set_match_points(match_points);
        let trace = Arc::new(trace);
        // Rounds of every case in turn, so that all of them meet the machine in the same
        // moods (a shared VM's speed drifts by a fifth within a minute); each ratio to the
        // single thread is taken within a round, and the median round's is reported.
        let mut rounds: Vec<Round> = Vec::new();
        let begun = Instant::now();
        let enough = MIN_CASE_TIME * (2 + policies.len() as u32);
        while rounds.len() < a.repeat.max(1) || begun.elapsed() < enough {
            // The single thread and the producer alone run pinned, as the workers do.
            let (serial, producer) = on_core(0, || -> Result<(Duration, Duration)> {
                let t = Instant::now();
                switchyard_runtime::serial::inspect_serial(SliceReader::new(pcap)?, conn, &inspector)?;
                Ok((t.elapsed(), producer_alone(pcap, conn)?))
            })?;
            let mut runs = Vec::with_capacity(policies.len());
            for policy in policies {
                let mut placer = place::build(policy, &PlaceConfig::default(), &ids)?;
                let r = pipeline::run(SliceReader::new(pcap)?, placer.as_mut(), &config, &inspector)?;
                runs.push(PolicyRun {
                    elapsed: r.elapsed,
                    // Per buffer placed: those scanned and those the workers found stale.
                    place_ns: r.placing.as_nanos() as f64
                        / (r.summary.inspected + r.workers.iter().map(|w| w.skipped).sum::<u64>()).max(1) as f64,
                    placing_ns: r.placing.as_nanos() as f64 / packets.max(1) as f64,
                    producer_cpu: r.producer_cpu,
                    blocked: r.producer_blocked.as_secs_f64() / r.elapsed.as_secs_f64().max(1e-9),
                });
            }
            // The producer's own cost of dispatching, on a core no worker shares: one worker,
            // so that a core is free for the producer (where the machine has two).
            let lone = if cores > 1 {
                let mut placer = place::build(Policy::ModN, &PlaceConfig::default(), &[WorkerId(0)])?;
                let r = pipeline::run(SliceReader::new(pcap)?, placer.as_mut(), &config, &inspector)?;
                r.producer_cpu.map(|cpu| (cpu, serial.as_secs_f64() / r.elapsed.as_secs_f64().max(1e-9)))
            } else {
                None
            };
            rounds.push(Round { serial, producer, runs, lone });
        }
        let per_packet = |d: Duration| d.as_nanos() as f64 / packets.max(1) as f64;
        let serial = median(rounds.iter().map(|r| r.serial).collect());
        let producer_ns = per_packet(median(rounds.iter().map(|r| r.producer).collect()));
        let (base, per_kib) = fit.line();
        // Work per packet in the single thread that is not the producer's: reassembly and
        // scanning, which the workers share.
        let worker_ns = (per_packet(serial) - producer_ns).max(0.0);
        let used = (a.workers as usize).min(cores) as f64;
        let ceiling = (producer_ns + worker_ns) / producer_ns.max((producer_ns + worker_ns) / used);
        // The same with what the producer costs inside a pipeline (placing and handing over
        // too), measured on a core of its own: the bound a single producer sets in practice.
        let lone: Vec<Duration> = rounds.iter().filter_map(|r| r.lone.map(|l| l.0)).collect();
        let lone_ns = (!lone.is_empty()).then(|| per_packet(median(lone)));
        let lone_ratio: Vec<f64> = rounds.iter().filter_map(|r| r.lone.map(|l| l.1)).collect();
        let lone_ratio = (!lone_ratio.is_empty()).then(|| median_of_rounds(lone_ratio));
        let dispatch_ceiling = lone_ns.map(|p| per_packet(serial) / p.max((producer_ns + worker_ns) / used));
        let dispatch_note = dispatch_ceiling.map_or(String::new(), |c| {
            format!(" with the producer's standalone cost, {c:.2}× with its cost inside the pipeline")
        });
        let pps = |d: Duration| packets as f64 / d.as_secs_f64().max(1e-9);
        writeln!(
            out,
            "{name} trace: {packets} packets, {} rounds; single thread {:.0} packets/s; producer alone {producer_ns:.0} ns/packet; \
             workers' share {worker_ns:.0} ns/packet (reassembly and scan: {base:.0} ns + {per_kib:.0} ns/KiB per buffer); \
             ceiling for one producer and {} workers on {cores} cores: {ceiling:.2}×{dispatch_note}",
            rounds.len(),
            pps(serial),
            a.workers
        )?;
        writeln!(
            out,
            "{:<12} {:>12} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10}",
            "", "", "", "", "sim ×1", "", "sim/real", ""
        )?;
        writeln!(
            out,
            "{:<12} {:>12} {:>9} {:>11} {:>10} {:>10} {:>10} {:>10}",
            "policy", "packets/s", "×1 thread", "producer ns", "own core", "floating", "own core", "floating"
        )?;
        let mut by_policy = Vec::new();
        let mut producer_in_pipeline = Vec::new();
        let mut waits = Vec::new();
        for (k, policy) in policies.into_iter().enumerate() {
            let elapsed = median(rounds.iter().map(|r| r.runs[k].elapsed).collect());
            let ratio = median_of_rounds(
                rounds.iter().map(|r| r.serial.as_secs_f64() / r.runs[k].elapsed.as_secs_f64()).collect(),
            );
            let place_ns = median_of_rounds(rounds.iter().map(|r| r.runs[k].place_ns).collect());
            let placing_ns = median_of_rounds(rounds.iter().map(|r| r.runs[k].placing_ns).collect());
            let cpu: Vec<Duration> = rounds.iter().filter_map(|r| r.runs[k].producer_cpu).collect();
            let cpu_ns = (!cpu.is_empty()).then(|| per_packet(median(cpu)));
            producer_in_pipeline.push((policy, cpu_ns));
            let real = pps(elapsed);
            let params = ServerParams {
                topology: Topology::flat(a.workers)?,
                policy,
                place: PlaceConfig::default(),
                queue_capacity: a.queue,
                on_full: OnFull::Block,
                decision_cost: Nanos(place_ns.round() as u64),
                // What the producer cost per packet inside this policy's runs, less its placing
                // (given separately): the standalone figure left out what handing over costs.
                packet_cost: Nanos((cpu_ns.unwrap_or(producer_ns) - placing_ns).max(0.0).round() as u64),
                service_base: Nanos(base.round() as u64),
                service_per_kib: Nanos(per_kib.round() as u64),
                migration_penalty: Nanos(0),
                home_penalty: Nanos(0),
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
            let floating = if a.workers as usize >= cores { Some(sim_with(ProducerCore::Floats)?) } else { None };
            let shared = floating.map(|f| f.0);
            let blocked = median_of_rounds(rounds.iter().map(|r| r.runs[k].blocked).collect());
            waits.push(format!(
                "{} {:.0}%{}",
                policy.name(),
                blocked * 100.0,
                floating.map_or(String::new(), |f| format!(" (simulated, floating: {:.0}%)", f.1 * 100.0))
            ));
            let sim_serial = packets as f64 / ((producer_ns * packets as f64 + fit.sy) / 1e9);
            let or_dash = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
            writeln!(
                out,
                "{:<12} {:>12.0} {:>9.2} {:>11} {:>10.2} {:>10} {:>10.2} {:>10}",
                policy.name(),
                real,
                ratio,
                cpu_ns.map_or("-".to_owned(), |ns| format!("{ns:.0}")),
                own / sim_serial,
                or_dash(shared.map(|s| s / sim_serial)),
                own / real,
                or_dash(shared.map(|s| s / real)),
            )?;
            by_policy.push((policy, real, ratio));
        }
        writeln!(out, "producer waiting on full queues: {}", waits.join(", "))?;
        let best = by_policy.iter().map(|p| p.2).fold(0.0, f64::max);
        // How many times faster policy `k` ran than static hash, in the median round.
        let over_static = |p: Policy| {
            let k = policies.iter().position(|&q| q == p).expect("benchmarked");
            let s = policies.iter().position(|&q| q == Policy::ModN).expect("benchmarked");
            median_of_rounds(
                rounds.iter().map(|r| r.runs[s].elapsed.as_secs_f64() / r.runs[k].elapsed.as_secs_f64()).collect(),
            )
        };
        if name == "sample" || (name == "uniform" && traces[0].0 != "sample") {
            goals.push(format!(
                "{} workers over 1 thread on the {name} trace: {best:.2}× (goal ≥ 1.8×; ceiling {ceiling:.2}×{}){}",
                a.workers,
                dispatch_ceiling.map_or(String::new(), |c| format!(", {c:.2}× with the producer's in-pipeline cost")),
                lone_ratio.map_or(String::new(), |r| format!(
                    "; static hash on 1 worker, the producer on a core of its own: {r:.2}×"
                )),
            ));
            let percent = |ns: f64| ns * 1e6 / 1e9 * 100.0;
            let inside: Vec<f64> = producer_in_pipeline.iter().filter_map(|p| p.1).collect();
            let inside = if inside.is_empty() {
                String::new()
            } else {
                let (lo, hi) =
                    (inside.iter().copied().fold(f64::MAX, f64::min), inside.iter().copied().fold(0.0, f64::max));
                format!(
                    "; dispatching to {} workers, sharing a core with one, {:.1}–{:.1}%",
                    a.workers,
                    percent(lo),
                    percent(hi)
                )
            };
            let lone = lone_ns.map_or(String::new(), |ns| {
                format!("; dispatching to 1 worker from a core of its own {:.1}%", percent(ns))
            });
            goals.push(format!(
                "producer on the {name} trace: alone {:.1}% of a core per 10^6 packets/s{lone}{inside} (goal < 10%)",
                percent(producer_ns)
            ));
        } else if name == "skewed" {
            goals.push(format!(
                "skewed trace: AHRW {:.2}×, bounded {:.2}× static hash (goal: one of them > 1)",
                over_static(Policy::Ahrw),
                over_static(Policy::Bounded)
            ));
        }
        writeln!(out)?;
    }
    for g in goals {
        writeln!(out, "{g}")?;
    }
    Ok(())
}
