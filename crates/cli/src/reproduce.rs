//! `switchyard reproduce`: run a reproduction scenario and print our figures beside the published
//! ones, with the difference and why it arises.

use std::io::Write;
use std::path::PathBuf;

use crate::reproduce_mux::MuxScheme;
use anyhow::{Result, bail};
use clap::Args;
use switchyard_core::cache::{AgeFrom, Rule};
use switchyard_experiments::scenarios;
use switchyard_sim::models::sensor::Stations;
use switchyard_sim::scenario::Scenario;

use crate::report::{Format, print_comparisons};
use crate::sim::run_scenario;

/// Reproduce a published result in the simulator (or, for iwashima-m, on the link emulator).
///
/// Runs a scenario from scenarios/reproduce/ and prints, for each published claim, the published
/// figure, ours, the difference, and an explanation of it. iwashima-m runs real TCP sessions
/// in network namespaces joined by an emulated bottleneck, and needs root. Absolute numbers are not expected to
/// match (the model is not the authors' hardware); the ranking and the rough size of each effect
/// are what should reproduce.
///
/// Examples:
///
///   switchyard reproduce --list
///
///   switchyard reproduce dpi-affinity --out results/dpi
///
///   switchyard reproduce iwashima-m --m 5,14 --seconds 20
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct ReproduceArgs {
    /// The reproduction to run (see --list).
    #[arg(required_unless_present = "list")]
    name: Option<String>,

    /// List the reproductions.
    #[arg(long)]
    list: bool,

    /// Directory for runs.csv, runs.json, report.html and the charts.
    #[arg(long)]
    out: Option<PathBuf>,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,

    /// iwashima-m: the connection counts to run.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 5, 10, 14])]
    m: Vec<usize>,

    /// iwashima-m: seconds measured per run.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,

    /// iwashima-m: size each connection's send buffer by the thesis's Eq 7.5,
    /// max(5000, B·RTT/(m+2)), instead of leaving it to the kernel.
    #[arg(long)]
    eq75: bool,

    /// iwashima-m: the schemes to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [MuxScheme::Stripe, MuxScheme::Earliest, MuxScheme::Pin, MuxScheme::PinRates, MuxScheme::PinService])]
    schemes: Vec<MuxScheme>,

    /// yates-cache: the tables to run (5.4 to 5.9; default all).
    #[arg(long = "table", value_delimiter = ',')]
    tables: Vec<String>,

    /// yates-cache: scale the measured time by this (1: 2,000 s of queries on the lattice,
    /// 60,000 s on the trace; the thesis ran up to 4,000,000 queries).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,

    /// yates-cache, dou-cacheflow, dou-miscort, dou-rgedf, ko-worker-centric, figurehead, guo-interrupt-affinity, guo-xen-credit: the root seed (in yates-cache every policy in a table sees
    /// the same field and queries).
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// yates-cache: count an entry's age from `load` (the thesis's words) or from the
    /// `sensor`'s timestamp (what its smallest-T table suggests).
    #[arg(long, default_value = "load")]
    age_from: AgeFrom,

    /// yates-cache: where the lattice's four base stations stand (the thesis does not say).
    #[arg(long, value_enum, default_value_t = StationsArg::Quadrants)]
    stations: StationsArg,

    #[command(flatten)]
    lab: crate::reproduce_cache::LabArgs,

    #[command(flatten)]
    clp: crate::reproduce_clp::ClpArgs,

    /// dou-miscort, dou-rgedf, ko-worker-centric, guo-xen-credit: runs per point and scheduler
    /// (seeds --seed, --seed + 1, …; default 5, 10, 3 and 3).
    #[arg(long)]
    runs: Option<u64>,

    /// figurehead: requests per simulated run (9 scenarios × 9 policy runs).
    #[arg(long, default_value_t = 20_000)]
    figurehead_requests: u64,

    /// figurehead: plan Base and OptWait from the back-ends' model CDFs (the paper's "oracle
    /// CDFs") instead of from latencies observed during the run.
    #[arg(long)]
    oracle: bool,

    /// ko-worker-centric: the workload's and the stores' size against the paper's (1: 6,000
    /// tasks and 6,000-file stores; a run's time grows with the square of it).
    #[arg(long, default_value_t = 0.1)]
    ko_scale: f64,

    /// guo-xen-credit: simulated time per run against the default 1.2 s (smaller is faster and
    /// noisier).
    #[arg(long, default_value_t = 1.0)]
    xen_scale: f64,

    /// guo-xen-credit: the application's working set per request on its VCPU, in KiB, for every
    /// workload in place of the fitted 1,024 (`switchyard_sim::models::xen::APP_BYTES`): how the
    /// results depend on it.
    #[arg(long)]
    xen_app_kib: Option<u64>,

    /// dou-miscort: failures as a Poisson process of rate p / 20 s instead of a per-run
    /// probability p (the notes' §3.2: the two readings diverge at high rates).
    #[arg(long)]
    poisson: bool,

    /// dou-miscort: presume an attempt failed once it has run this many times its task's mean
    /// time (the thesis says only "significantly higher").
    #[arg(long, default_value_t = 3.0)]
    presume: f64,

    /// dou-cacheflow: also run the experiment on real gateways (HTTP on loopback).
    /// dou-miscort: run the workload on the real jobs coordinator over loopback instead (30
    /// workers that crash and recover, at p = 0.4 and 1/40 of real time, about 2 minutes),
    /// beside the simulator's runs of it, and compare the schedulers' rankings.
    #[arg(long)]
    real: bool,

    /// dou-cacheflow --real: the objects' size in KB (the thesis: 50).
    #[arg(long, default_value_t = 50)]
    object_kb: usize,

    /// dou-cacheflow --real: requests each client makes (a fifth of them warm-up).
    #[arg(long, default_value_t = 100)]
    requests: usize,

    /// yates-cache: which cells stand in for a cell of the lattice: `faces` (the up to six
    /// sharing a face), `nearest:K` or `within:DISTANCE` (spacing is 8, 6 and 4 along x, y, z).
    #[arg(long, default_value = "faces")]
    lattice_neighbourhood: String,

    /// yates-cache: cache approximate answers for the location they answered, as old as the
    /// entries they came from (the thesis does not say; its tables hint at it).
    #[arg(long)]
    keep_approximations: bool,
}

/// Where the lattice's base stations stand.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum StationsArg {
    /// The centres of the four quadrants of the lattice's z = 0 face.
    Quadrants,
    /// The four corners of the z = 0 face, one lattice step outside it.
    Corners,
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
    let mut out = std::io::stdout().lock();
    if args.list {
        for (name, text) in scenarios::REPRODUCTIONS {
            let s = Scenario::parse(text, name, None)?;
            writeln!(out, "{name:<20} {} ({} published figures)", s.title, s.published.len())?;
        }
        writeln!(out, "{:<20} {}", EMULATED.0, EMULATED.1)?;
        writeln!(out, "{:<20} {}", CACHE.0, CACHE.1)?;
        writeln!(out, "{:<20} {}", CACHEFLOW.0, CACHEFLOW.1)?;
        writeln!(out, "{:<20} {}", CLP.0, CLP.1)?;
        writeln!(out, "{:<20} {}", MISCORT.0, MISCORT.1)?;
        writeln!(out, "{:<20} {}", RGEDF.0, RGEDF.1)?;
        writeln!(out, "{:<20} {}", KO.0, KO.1)?;
        writeln!(out, "{:<20} {}", FIGUREHEAD.0, FIGUREHEAD.1)?;
        writeln!(out, "{:<20} {}", IRQ.0, IRQ.1)?;
        writeln!(out, "{:<20} {}", XEN.0, XEN.1)?;
        return Ok(());
    }
    let name = args.name.as_deref().unwrap_or_default();
    if name == EMULATED.0 {
        return crate::reproduce_mux::run(&args.m, args.seconds, args.eq75, &args.schemes, args.out.as_deref());
    }
    if name == CLP.0 {
        drop(out);
        return crate::reproduce_clp::run(&args.clp, args.out.as_deref());
    }
    let threads = args.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if name == MISCORT.0 && args.real {
        return crate::reproduce_miscort::run_real(args.seed, args.presume, args.runs.unwrap_or(10));
    }
    if name == MISCORT.0 {
        let runs = args.runs.unwrap_or(5);
        return crate::reproduce_miscort::run(
            runs,
            args.seed,
            args.poisson,
            args.presume,
            threads,
            args.out.as_deref(),
        );
    }
    if name == RGEDF.0 {
        return crate::reproduce_rgedf::run(args.runs.unwrap_or(10), args.seed, threads, args.out.as_deref());
    }
    if name == FIGUREHEAD.0 {
        drop(out);
        return crate::reproduce_figurehead::run(args.figurehead_requests, args.oracle, args.seed, args.out.as_deref());
    }
    if name == KO.0 {
        let runs = args.runs.unwrap_or(3);
        return crate::reproduce_ko::run(runs, args.seed, args.ko_scale, threads, args.out.as_deref());
    }
    if name == IRQ.0 {
        return crate::reproduce_irq::run(args.seed, threads);
    }
    if name == XEN.0 {
        return crate::reproduce_xen::run(args.seed, args.runs.unwrap_or(3), args.xen_scale, args.xen_app_kib, threads);
    }
    if name == CACHEFLOW.0 {
        let real = args.real.then_some((args.object_kb, args.requests));
        return crate::reproduce_cacheflow::run(args.seed, threads, real);
    }
    if name == CACHE.0 {
        return crate::reproduce_cache::run(&crate::reproduce_cache::CacheRepro {
            tables: &args.tables,
            scale: args.scale,
            seed: args.seed,
            threads,
            age_from: args.age_from,
            stations: match args.stations {
                StationsArg::Quadrants => Stations::Quadrants,
                StationsArg::Corners => Stations::Corners,
            },
            lab_data: &args.lab.lab_data,
            lab_locs: &args.lab.lab_locs,
            neighbourhood: args.lab.neighbourhood,
            lattice_neighbourhood: match args.lattice_neighbourhood.as_str() {
                "faces" => None,
                other => Some(
                    other.parse::<Rule>().map_err(|e| anyhow::anyhow!("--lattice-neighbourhood: {e}, or `faces`"))?,
                ),
            },
            keep_approximations: args.keep_approximations,
            out: args.out.as_deref(),
        });
    }
    let Some(text) = scenarios::text(name) else {
        let names: Vec<&str> = scenarios::REPRODUCTIONS
            .iter()
            .map(|(n, _)| *n)
            .chain([EMULATED.0, CACHE.0, CACHEFLOW.0, CLP.0, MISCORT.0, RGEDF.0, KO.0, FIGUREHEAD.0, IRQ.0, XEN.0])
            .collect();
        bail!("no reproduction `{name}`; there are: {}", names.join(", "));
    };
    let scenario = scenarios::parse(name, text)?;
    drop(out);
    let comparisons = run_scenario(&scenario, args.threads, args.out.as_deref(), Format::Table)?;
    print_comparisons(&comparisons)
}
