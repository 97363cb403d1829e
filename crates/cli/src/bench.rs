//! `switchyard bench inspect`: the real DPI pipeline against its single-threaded baseline and
//! against the simulator's prediction for the same trace, in one go.

use std::io::Write;

use anyhow::Result;
use clap::{Args, Subcommand};
use switchyard_core::Policy;
use switchyard_experiments::bench::inspect::{self, Setup, TraceRun};
use switchyard_runtime::pipeline::PipelineConfig;

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
    Jobs(crate::bench_jobs::JobsBench),
    Figurehead(crate::bench_figurehead::FigureheadBench),
    Blocklog(crate::bench_blocklog::BlocklogBench),
    Shm(crate::bench_shm::ShmBench),
    #[cfg(target_os = "linux")]
    Steer(crate::bench_steer::SteerBench),
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

    /// Instead of the pipeline's benchmark, compare with a peer on the same captures: `ndpi`
    /// runs nDPI's ndpiReader (Debian's libndpi-bin, from bench/install-peers.sh) with its
    /// per-flow report beside `inspect` on one thread, and prints agreement per protocol, what
    /// only one side names, and both sides' packets per second. The captures: the sample, a
    /// generated trace of `--connections`, the recorded conversations beside the sample
    /// (`conversations.pcap`), and each `--capture`.
    #[arg(long, value_enum)]
    peer: Option<Peer>,

    /// A capture to compare on as well (with `--peer`; repeat for more).
    #[arg(long)]
    capture: Vec<std::path::PathBuf>,

    /// Instead of the pipeline's benchmark, inspect live: the sample replayed by tcpreplay into
    /// a veth pair in a namespace made for the run, at rising rates, with 1 and 2 workers;
    /// prints the highest rate at which the rings dropped nothing (needs root and tcpreplay,
    /// from bench/install-peers.sh).
    #[arg(long, conflicts_with = "peer")]
    live: bool,
}

/// A DPI engine to compare with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Peer {
    /// nDPI 4.2's ndpiReader.
    Ndpi,
}

pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    match &args.what {
        BenchWhat::Inspect(a) => run_inspect(a),
        BenchWhat::Mux(a) => crate::bench_mux::run(a),
        BenchWhat::Gateway(a) => crate::bench_gateway::run(a),
        BenchWhat::Deliver(a) => crate::bench_deliver::run(a),
        BenchWhat::Jobs(a) => crate::bench_jobs::run(a),
        BenchWhat::Figurehead(a) => crate::bench_figurehead::run_bench(a),
        BenchWhat::Blocklog(a) => crate::bench_blocklog::run(a),
        BenchWhat::Shm(a) => crate::bench_shm::run(a),
        #[cfg(target_os = "linux")]
        BenchWhat::Steer(a) => crate::bench_steer::run(a),
    }
}

fn run_inspect(a: &InspectBench) -> Result<()> {
    if a.live {
        #[cfg(target_os = "linux")]
        return crate::bench_live::run(&a.sample);
        #[cfg(not(target_os = "linux"))]
        anyhow::bail!("--live: live capture is for Linux only");
    }
    if a.peer == Some(Peer::Ndpi) {
        return crate::bench_ndpi::run(a.connections, &a.sample, &a.capture, a.repeat);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "kernel {}\n", a.kernel.describe())?;
    let sample = match std::fs::read(&a.sample) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            writeln!(out, "sample {}: {e}; benchmarking the generated traces only\n", a.sample.display())?;
            None
        }
    };
    let has_sample = sample.is_some();
    let setup = Setup {
        connections: a.connections,
        elephants: a.elephants,
        workers: a.workers,
        repeat: a.repeat,
        queue: a.queue,
        batch: a.batch,
        engine: a.kernel.engine(),
        sample,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut goals = Vec::new();
    let mut failed = None;
    let result = inspect::run(&setup, &mut |t| {
        if let Err(e) = print_trace(&mut out, t, a.workers, cores) {
            failed.get_or_insert(e);
        }
        goals.extend(trace_goals(t, a.workers, has_sample, a.kernel.name()));
    });
    if let Some(e) = failed {
        return Err(e.into());
    }
    result?;
    for g in goals {
        writeln!(out, "{g}")?;
    }
    Ok(())
}

fn print_trace(out: &mut impl Write, t: &TraceRun, workers: u32, cores: usize) -> std::io::Result<()> {
    let dispatch_note = t.dispatch_ceiling.map_or(String::new(), |c| {
        format!(" with the producer's standalone cost, {c:.2}× with its cost inside the pipeline")
    });
    writeln!(
        out,
        "{} trace: {} packets, {} rounds; single thread {:.0} packets/s; producer alone {:.0} ns/packet; \
         workers' share {:.0} ns/packet (reassembly and scan: {:.0} ns + {:.0} ns/KiB per buffer); \
         ceiling for one producer and {workers} workers on {cores} cores: {:.2}×{dispatch_note}; \
         the machine's own ceiling, copies of the single thread run at once on {} cores: {:.2}×",
        t.name,
        t.packets,
        t.rounds,
        t.serial_pps,
        t.producer_ns,
        t.worker_ns,
        t.scan_ns.0,
        t.scan_ns.1,
        t.ceiling,
        (workers as usize).clamp(1, cores.max(1)),
        t.machine_ceiling
    )?;
    writeln!(
        out,
        "{:<12} {:>12} {:>9} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "", "", "", "", "", "sim ×1", "", "sim/real", ""
    )?;
    writeln!(
        out,
        "{:<12} {:>12} {:>9} {:>8} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "policy", "packets/s", "×1 thread", "cpu ×1", "producer ns", "own core", "floating", "own core", "floating"
    )?;
    let or_dash = |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    let mut waits = Vec::new();
    for p in &t.policies {
        writeln!(
            out,
            "{:<12} {:>12.0} {:>9.2} {:>8.2} {:>11} {:>10.2} {:>10} {:>10.2} {:>10}",
            p.policy.name(),
            p.packets_per_s,
            p.over_serial,
            p.cpu_over_serial,
            or_dash(p.producer_ns, 0),
            p.sim_own,
            or_dash(p.sim_floating, 2),
            p.sim_over_real.0,
            or_dash(p.sim_over_real.1, 2),
        )?;
        waits.push(format!(
            "{} {:.0}%{}",
            p.policy.name(),
            p.blocked * 100.0,
            p.sim_floating_blocked.map_or(String::new(), |b| format!(" (simulated, floating: {:.0}%)", b * 100.0))
        ));
    }
    writeln!(out, "producer waiting on full queues: {}", waits.join(", "))?;
    writeln!(
        out,
        "sharded, no producer: each of {workers} workers reads every packet and keeps its own (reading and placing one it leaves: {:.0} ns)",
        t.read_place_ns
    )?;
    writeln!(
        out,
        "{:<12} {:>12} {:>9} {:>8} {:>10} {:>10}",
        "policy", "packets/s", "×1 thread", "cpu ×1", "model ×1", "model/real"
    )?;
    for r in &t.shards {
        writeln!(
            out,
            "{:<12} {:>12.0} {:>9.2} {:>8.2} {:>10.2} {:>10.2}",
            r.policy.name(),
            r.packets_per_s,
            r.over_serial,
            r.cpu_over_serial,
            r.predicted,
            r.predicted / r.over_serial
        )?;
    }
    writeln!(out)
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
        goals
    } else if name == "skewed" {
        let over = |p: Policy| by(p).map_or(f64::NAN, |r| r.over_static);
        goals.push(format!(
            "skewed trace: AHRW {:.2}×, bounded {:.2}× static hash (goal: one of them > 1)",
            over(Policy::Ahrw),
            over(Policy::Bounded)
        ));
        goals
    } else {
        goals
    }
}
