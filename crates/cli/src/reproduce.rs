//! `switchyard reproduce`: run a reproduction scenario and print our figures beside the published
//! ones, with the difference and why it arises.

use std::io::Write;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use switchyard_experiments::scenarios;
use switchyard_sim::scenario::Scenario;

/// Reproduce a published result: our figures beside the published ones, the difference, and
/// why it arises.
///
/// Each reproduction is a subcommand with its own options (`switchyard reproduce NAME --help`).
/// Most run in the simulator; iwashima-m runs real TCP sessions in network namespaces joined by
/// an emulated bottleneck, and needs root; yates-clp and the `--real` runs use real sockets.
/// Absolute numbers are not expected to match (the model is not the authors' hardware); the
/// ranking and the rough size of each effect are what should reproduce.
///
/// Every reproduction prints through one printer: `--format table|json|csv`, `--out DIR` for
/// report.json, a CSV per table and the charts; `switchyard schema reproduce NAME` prints the
/// JSON's schema.
///
/// Examples:
///
///   switchyard reproduce --list
///
///   switchyard reproduce dpi-affinity --out results/dpi
///
///   switchyard reproduce dou-rgedf --runs 3 --format csv --table losses
///
///   switchyard reproduce iwashima-m --m 5,14 --seconds 20
#[derive(Args, Debug)]
#[command(verbatim_doc_comment, args_conflicts_with_subcommands = true, subcommand_required = false)]
pub(crate) struct ReproduceArgs {
    /// List the reproductions.
    #[arg(long)]
    list: bool,

    #[command(subcommand)]
    which: Option<Reproduction>,
}

/// The reproductions, one subcommand each.
#[derive(Subcommand, Debug)]
pub(crate) enum Reproduction {
    /// Guo ch. 4: DPI throughput by connection affinity against per-packet spraying (simulator).
    DpiAffinity(ScenarioArgs),
    /// Guo ch. 5: hierarchical HRW on the Niagara's cores and threads (simulator).
    NiagaraHierarchy(ScenarioArgs),
    /// Guo ch. 6: cache-aware placement of transcoding GOPs (simulator).
    GopCacheAware(GopCacheAwareArgs),
    /// Guo ch. 5 with the cache model on: the Niagara hierarchy's cache effects (simulator).
    NiagaraHierarchyCache(ScenarioArgs),
    /// Guo ch. 6 with the cache model on: GOP placement's cache effects (simulator).
    GopCacheAwareCache(ScenarioArgs),
    /// Guo ch. 7: PS-HRW's proportional shares (simulator).
    PsShares(ScenarioArgs),
    /// Iwashima ch. 7: striping and pinning against m over an emulated 10 Mb/s RED bottleneck
    /// (real TCP in network namespaces; needs root).
    IwashimaM(crate::reproduce_mux::Args),
    /// Yates ch. 5 Tables 5.4–5.9: the seven lookup policies on the 1,000-location lattice and
    /// the lab trace.
    YatesCache(crate::reproduce_cache::Args),
    /// Yates ch. 2–4: fairness against threads, soft and hard throughput-based scheduling (real
    /// sockets), processor scaling (simulated).
    YatesClp(crate::reproduce_clp::Args),
    /// Dou ch. 4: Cacheflow's cooperative hit rate against lone caches and the thesis's model.
    DouCacheflow(crate::reproduce_cacheflow::Args),
    /// Dou ch. 3: MiscoRT against EDF and other task schedulers on 30 unreliable workers.
    DouMiscort(crate::reproduce_miscort::Args),
    /// Dou ch. 2: G-EDF and RG-EDF against FIFO and EDF writing records to an SD card.
    DouRgedf(crate::reproduce_rgedf::Args),
    /// Ko et al. (Middleware 2007): worker-centric locality against storage affinity.
    KoWorkerCentric(crate::reproduce_ko::Args),
    /// Figurehead (Middleware 2007): Base against OptWait and today's routing policies.
    Figurehead(crate::reproduce_figurehead::Args),
    /// Guo ch. 3: iperf receive throughput and L2 misses by message size, interrupt affinity.
    GuoInterruptAffinity(crate::reproduce_irq::Args),
    /// Guo ch. 8: session capacity under Xen's credit scheduler against cache-aware migration.
    GuoXenCredit(crate::reproduce_xen::Args),
}

/// The options of a reproduction that is a simulator scenario (scenarios/reproduce/NAME.toml).
#[derive(Args, Debug)]
pub(crate) struct ScenarioArgs {
    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

/// Threads to run cases on: the option's, else the machine's cores.
pub(crate) fn threads(option: Option<usize>) -> usize {
    option.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The reproduction of the caching gateway's tables, which runs its own sensor-field model.
const CACHE: (&str, &str) = (
    "yates-cache",
    "Yates ch. 5 Tables 5.4–5.9: the seven lookup policies on the 1,000-location lattice and the lab trace",
);

/// Yates's delivery server on real threads and sockets, and its processor scaling simulated.
const CLP: (&str, &str) = (
    "yates-clp",
    "Yates ch. 2–4: fairness against threads, soft and hard throughput-based scheduling (real sockets), processor scaling (simulated)",
);

/// Cacheflow's hit rates, from its own model in the simulator.
const CACHEFLOW: (&str, &str) = (
    "dou-cacheflow",
    "Dou ch. 4: Cacheflow's cooperative hit rate (≈72%) against lone caches (35% at 1× memory) and the thesis's model",
);

/// MiscoRT's deadline scheduling on unreliable workers, in the simulator's jobs model.
const MISCORT: (&str, &str) = (
    "dou-miscort",
    "Dou ch. 3: MiscoRT against EDF and other task schedulers on 30 unreliable workers (miss rate, end-to-end time, waste)",
);

/// G-EDF and RG-EDF on the thesis's sensor node, in the simulator's flash model.
const RGEDF: (&str, &str) = (
    "dou-rgedf",
    "Dou ch. 2: G-EDF and RG-EDF against FIFO and EDF writing records to an SD card on a sensor node (Figs. 2.6–2.9), on its 8051 and on a modern core",
);

/// Worker-centric scheduling of data-intensive bags of tasks, in the simulator's grid model.
const KO: (&str, &str) = (
    "ko-worker-centric",
    "Ko et al. (Middleware 2007): worker-centric locality against storage affinity; makespan and transfers by store capacity, workers per site and computation cost",
);

/// Figurehead's latency SLA at least cost over several back-ends, in the simulator.
const FIGUREHEAD: (&str, &str) = (
    "figurehead",
    "Figurehead (Middleware 2007): Table 2's Base against OptWait, and every routing policy (hedging, P2C, least outstanding) for cost and SLA attainment as load and tails change",
);

/// Guo ch. 3's interrupt affinity, from its own model in the simulator.
const IRQ: (&str, &str) = (
    "guo-interrupt-affinity",
    "Guo ch. 3: iperf receive throughput and L2 misses by message size, interrupt affinity (L2-sharing cores) against round-robin and one core",
);

/// Guo ch. 8's cache-aware VCPU migration in Xen, from its own model in the simulator.
const XEN: (&str, &str) = (
    "guo-xen-credit",
    "Guo ch. 8: SPECweb2005-like session capacity under Xen's credit scheduler against Table 8.3's cache-aware VCPU migration, and the VMM's L2 misses",
);

/// The reproduction that runs real TCP on the link emulator rather than in the simulator.
const EMULATED: (&str, &str) = (
    "iwashima-m",
    "Iwashima ch. 7: striping and pinning against m over an emulated 10 Mb/s RED bottleneck (real TCP; needs root)",
);

pub(crate) fn run(args: &ReproduceArgs) -> Result<()> {
    let Some(which) = &args.which else {
        return list();
    };
    match which {
        Reproduction::DpiAffinity(a) => scenario("dpi-affinity", a),
        Reproduction::NiagaraHierarchy(a) => scenario("niagara-hierarchy", a),
        Reproduction::GopCacheAware(a) => gop_cache_aware(a),
        Reproduction::NiagaraHierarchyCache(a) => scenario("niagara-hierarchy-cache", a),
        Reproduction::GopCacheAwareCache(a) => scenario("gop-cache-aware-cache", a),
        Reproduction::PsShares(a) => scenario("ps-shares", a),
        Reproduction::IwashimaM(a) => crate::reproduce_mux::run(a),
        Reproduction::YatesCache(a) => crate::reproduce_cache::run(a),
        Reproduction::YatesClp(a) => crate::reproduce_clp::run(a),
        Reproduction::DouCacheflow(a) => crate::reproduce_cacheflow::run(a),
        Reproduction::DouMiscort(a) => crate::reproduce_miscort::run(a),
        Reproduction::DouRgedf(a) => crate::reproduce_rgedf::run(a),
        Reproduction::KoWorkerCentric(a) => crate::reproduce_ko::run(a),
        Reproduction::Figurehead(a) => crate::reproduce_figurehead::run(a),
        Reproduction::GuoInterruptAffinity(a) => crate::reproduce_irq::run(a),
        Reproduction::GuoXenCredit(a) => crate::reproduce_xen::run(a),
    }
}

fn list() -> Result<()> {
    let mut out = std::io::stdout().lock();
    for (name, text) in scenarios::REPRODUCTIONS {
        let s = Scenario::parse(text, name, None)?;
        writeln!(out, "{name:<24} {} ({} published figures)", s.title, s.published.len())?;
    }
    for (name, what) in [EMULATED, CACHE, CACHEFLOW, CLP, MISCORT, RGEDF, KO, FIGUREHEAD, IRQ, XEN] {
        writeln!(out, "{name:<24} {what}")?;
    }
    writeln!(out, "\nswitchyard reproduce NAME --help shows a reproduction's options.")?;
    Ok(())
}

/// `reproduce gop-cache-aware`'s options: the scenario's, and `--real`.
#[derive(Args, Debug)]
pub(crate) struct GopCacheAwareArgs {
    /// Also transcode real H.264 GOPs here (`bench transcode` with its defaults, ffmpeg left out)
    /// and feed the costs measured to the simulator: per policy the simulated ratio to one
    /// worker and to round robin beside the measured, and the Xeon and Opteron rows revisited
    /// with the measured costs beside the published +25.7% / +30.5%. Takes a minute or more.
    #[arg(long)]
    real: bool,

    #[command(flatten)]
    scenario: ScenarioArgs,
}

fn gop_cache_aware(a: &GopCacheAwareArgs) -> Result<()> {
    use switchyard_experiments::bench::transcode;
    let name = "gop-cache-aware";
    let spec = scenarios::spec(name).with_context(|| format!("no scenario reproduction `{name}`"))?;
    let scenario = scenarios::scenario(name)?;
    let bar = crate::print::Bar::new();
    let run = scenarios::run(&scenario, threads(a.scenario.threads), &bar)?;
    let mut report = run.report(spec, &scenario);
    if a.real {
        let setup = transcode::Setup { ffmpeg: false, ..transcode::Setup::default() };
        let outcome = transcode::run(&setup, &bar).context("reproduce gop-cache-aware --real")?;
        transcode::absorb(&mut report, &setup, &outcome);
    }
    drop(bar);
    a.scenario.output.emit(&report)
}

fn scenario(name: &str, a: &ScenarioArgs) -> Result<()> {
    let spec = scenarios::spec(name).with_context(|| format!("no scenario reproduction `{name}`"))?;
    let scenario = scenarios::scenario(name)?;
    let bar = crate::print::Bar::new();
    let run = scenarios::run(&scenario, threads(a.threads), &bar)?;
    drop(bar);
    a.output.emit(&run.report(spec, &scenario))
}
