//! `switchyard bench inspect`: the real DPI pipeline against its single-threaded baseline and
//! against the simulator's prediction for the same trace, in one go.

use anyhow::Result;
use clap::{Args, Subcommand};
use switchyard_experiments::bench::inspect::{self, Setup};
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
    /// bench deliver's tokio peer as a process of its own (its memory table runs it).
    #[command(hide = true)]
    DeliverTokioPeer(crate::bench_deliver::TokioPeer),
    Jobs(crate::bench_jobs::JobsBench),
    Figurehead(crate::bench_figurehead::FigureheadBench),
    Blocklog(crate::bench_blocklog::BlocklogBench),
    Shm(crate::bench_shm::ShmBench),
    Eviction(crate::bench_eviction::EvictionBench),
    Memory(crate::bench_memory::MemoryBench),
    Transcode(crate::bench_transcode::TranscodeBench),
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
    /// per-flow report beside `inspect` on one thread, and reports agreement per protocol, what
    /// only one side names, and both sides' packets per second (without ndpiReader, the report
    /// says so and has no tables). The captures: the sample, a
    /// generated trace of `--connections`, the recorded conversations beside the sample
    /// (`conversations.pcap`), and each `--capture`.
    #[arg(long, value_enum)]
    peer: Option<Peer>,

    /// A capture to compare on as well (with `--peer`; repeat for more).
    #[arg(long)]
    capture: Vec<std::path::PathBuf>,

    /// Instead of the pipeline's benchmark, inspect live: the sample replayed by tcpreplay into
    /// a veth pair in a namespace made for the run, at rising rates, with 1 and 2 workers;
    /// reports the highest rate at which the rings dropped nothing (needs root and tcpreplay,
    /// from bench/install-peers.sh; without them the report says so and has no tables).
    #[arg(long, conflicts_with = "peer")]
    live: bool,

    #[command(flatten)]
    output: crate::print::Output,
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
        BenchWhat::DeliverTokioPeer(a) => crate::bench_deliver::run_tokio_peer(a),
        BenchWhat::Jobs(a) => crate::bench_jobs::run(a),
        BenchWhat::Figurehead(a) => crate::bench_figurehead::run_bench(a),
        BenchWhat::Blocklog(a) => crate::bench_blocklog::run(a),
        BenchWhat::Shm(a) => crate::bench_shm::run(a),
        BenchWhat::Eviction(a) => crate::bench_eviction::run(a),
        BenchWhat::Memory(a) => crate::bench_memory::run(a),
        BenchWhat::Transcode(a) => crate::bench_transcode::run(a),
        #[cfg(target_os = "linux")]
        BenchWhat::Steer(a) => crate::bench_steer::run(a),
    }
}

fn run_inspect(a: &InspectBench) -> Result<()> {
    if a.live {
        #[cfg(target_os = "linux")]
        return crate::bench_live::run(&a.sample, &a.output);
        #[cfg(not(target_os = "linux"))]
        anyhow::bail!("--live: live capture is for Linux only");
    }
    if a.peer == Some(Peer::Ndpi) {
        return crate::bench_ndpi::run(a.connections, &a.sample, &a.capture, a.repeat, &a.output);
    }
    let (sample, sample_note) = match std::fs::read(&a.sample) {
        Ok(bytes) => (Some(bytes), None),
        Err(e) => (None, Some(format!("sample {}: {e}; benchmarking the generated traces only", a.sample.display()))),
    };
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
    let runs = inspect::run(&setup, &crate::print::Bar::new())?;
    let mut report = inspect::report(&setup, a.kernel.name(), &runs, sample_note.as_deref());
    report.note(format!("kernel {}", a.kernel.describe()));
    a.output.emit(&report)
}
