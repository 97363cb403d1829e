//! `switchyard place`: place a key set with each policy and measure balance, disruption and
//! decision cost.

use std::io::Write;

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use switchyard_core::place::{HashFn, ParentLoad, PsDispatch, QminReading};
use switchyard_core::{PlaceConfig, Policy, QueueMeasure, Topology};
use switchyard_experiments::keys::KeySource;
use switchyard_experiments::placement;

use crate::print::RowFormat as Format;

/// Place keys on workers with one or more policies, and compare them.
///
/// Each policy places every unit of the key source in order. A placed unit stays queued on its
/// worker (nothing completes), so load-aware policies see the load built up so far. Reported per
/// policy:
///
///   max/mean, CoV, Jain  balance of units over workers (relative to --weights if given)
///
///   moved-rm             fraction of units placed on a different worker when the pass is
///                        repeated after removing worker w0 (same placer, loads reset)
///
///   moved-add            the same when worker w(N-1) is added to the other N-1
///
///   ns/decision          mean time of one placement against the final loads of the pass,
///                        with a fresh placer each pass, over 50 ms of placements or at
///                        most 0.5 s in all, builds included, so a few keys are quick too
///                        (timed here, so noisy: benchmarks are in
///                        `cargo bench -p switchyard-core`)
///
/// Examples:
///
///   switchyard place --policy all
///
///   switchyard place --policy hrw,ahrw,bounded --workers 64 --keys zipf:1.0:1000000
///
///   switchyard place --policy h-ahrw,h-cahrw --topology xeon-e5335 --format json
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct PlaceArgs {
    /// Policies to compare, comma-separated, or `all`.
    ///
    /// round-robin, jsq, mod-n, affinity, hrw, hrw-classic, weighted-hrw, weighted-hrw-carp, h-hrw,
    /// ahrw, ahrw-nonzero, h-ahrw, ca-ahrw, h-cahrw, ps-hrw, ring, jump, maglev, bounded,
    /// p2c-hrw, in-flight.
    #[arg(long, short, value_delimiter = ',', required = true)]
    policy: Vec<String>,

    /// Number of workers (w0 … wN-1). Defaults to the topology's leaves, or 8.
    #[arg(long, short)]
    workers: Option<u32>,

    /// Worker weights, comma-separated, one per worker. With `all`, only the policies that
    /// honour weights are run.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    weights: Option<Vec<f64>>,

    /// Machine topology for topology-aware policies: xeon-e5335, opteron-2350, niagara2, a
    /// generic SxCxT such as 4x4x4, or flat:N; append @c0,c1,… to set the per-level costs.
    #[arg(long, short)]
    topology: Option<String>,

    /// Where keys come from: `sample` (shipped), uniform:COUNT, zipf:S:COUNT[:KEYS], a pcap or
    /// pcapng capture (each TCP or UDP packet's 5-tuple; e.g. data/traces/sample.pcap), or a file
    /// with one key per line (`tcp 10.0.0.1:4000 10.0.0.2:80`, a number, or any text; - reads
    /// standard input).
    #[arg(long, short, default_value = "sample")]
    keys: String,

    /// Bounded-load slack ε: each worker holds at most ⌈(1+ε)·mean⌉.
    #[arg(long, default_value_t = 0.25, allow_negative_numbers = true)]
    epsilon: f64,

    /// Queue length load-aware policies compare.
    #[arg(long, value_enum, default_value_t = Measure::Units)]
    queue: Measure,

    /// Rendezvous score of the AHRW family and p2c-hrw.
    #[arg(long, value_enum, default_value_t = Hash::Fast)]
    hash: Hash,

    /// Reading of Q_min for the hierarchical and cache-aware forms (ahrw and ahrw-nonzero fix
    /// their own): the true minimum (Guo ch. 5) or the non-zero minimum (ch. 6).
    #[arg(long, value_enum, default_value_t = Qmin::True)]
    qmin: Qmin,
    /// Load of an inner tree node for h-ahrw and h-cahrw: `eq67` is 0 if any child is idle, else
    /// the sum (Guo Eq. 6.7 as its text means it); `sum` is the plain sum of ch. 6.4.1.
    #[arg(long, value_enum, default_value_t = Parent::Eq67)]
    parent_load: Parent,

    /// Whether CA-AHRW's Q_min is taken over the cost-weighted queues or the raw ones (Guo §6.3
    /// leaves it open).
    #[arg(long, value_enum, default_value_t = CaMin::Weighted)]
    ca_min: CaMin,

    /// How ps-hrw spreads a flow's units: within its set of workers by load (Table 7.1), or each
    /// unit by hash in the flow's target proportions over all workers.
    #[arg(long, value_enum, default_value_t = Ps::Set)]
    ps_dispatch: Ps,

    /// Ring points per unit weight (ring, bounded).
    #[arg(long, default_value_t = 160)]
    vnodes: u32,

    /// Maglev table size (a prime).
    #[arg(long, default_value_t = 65_537)]
    maglev_table: u32,

    /// PS-HRW recomputation threshold β (0.16 = 16%).
    #[arg(long, default_value_t = 0.16, allow_negative_numbers = true)]
    beta: f64,

    /// Seed of the uniform and zipf generators.
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Treat both directions of a 5-tuple as one flow.
    #[arg(long)]
    undirected: bool,

    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    format: Format,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Measure {
    Units,
    Bytes,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Hash {
    Fast,
    Classic,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Qmin {
    True,
    Nonzero,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Parent {
    Eq67,
    Sum,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CaMin {
    Weighted,
    Raw,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Ps {
    Set,
    PerUnit,
}

/// The run's setting, shared by every policy.
struct Setup {
    /// What every policy is measured in.
    measured: placement::Setup,
    /// Distinct flows among the units.
    flows: usize,
    source: KeySource,
}

pub(crate) fn run(args: &PlaceArgs) -> Result<()> {
    let mut policies = policies(&args.policy)?;
    let setup = setup(args, &policies)?;
    if setup.measured.weighted {
        let (keep, skip): (Vec<Policy>, Vec<Policy>) = policies.iter().partition(|p| p.supports_weights());
        if !skip.is_empty() {
            if args.policy.iter().any(|p| p == "all") {
                eprintln!(
                    "note: --weights given; skipping policies that ignore weights: {}",
                    skip.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                );
            } else {
                bail!(
                    "--weights given but {} ignore{} weights; weighted policies are: {}",
                    skip.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "),
                    if skip.len() == 1 { "s" } else { "" },
                    Policy::weighted_names()
                );
            }
        }
        policies = keep;
    }
    let n = setup.measured.workers.len();
    let mut out = std::io::stdout().lock();
    if args.format == Format::Table {
        writeln!(
            out,
            "{} units of {} flows from {} on {} workers{}; loads in {}",
            setup.measured.units.len(),
            setup.flows,
            setup.source,
            n,
            setup
                .measured
                .config
                .topology
                .as_ref()
                .filter(|t| t.depth() > 1)
                .map(|t| format!(" ({t})"))
                .unwrap_or_default(),
            match setup.measured.config.measure {
                QueueMeasure::Units => "units",
                QueueMeasure::Bytes => "bytes",
            },
        )?;
    }
    let bar = ProgressBar::new((policies.len() * 4) as u64);
    bar.set_style(ProgressStyle::with_template("{prefix:>18} [{bar:30}] {pos}/{len} passes").expect("static template"));
    let mut rows = Vec::new();
    for &p in &policies {
        bar.set_prefix(p.name());
        rows.push(placement::measure(p, &setup.measured, &|n| bar.inc(n)).with_context(|| format!("policy {p}"))?);
    }
    bar.finish_and_clear();
    // The JSON stays the array of rows it has always been (users' scripts read it); the table
    // and the CSV are the one printer's.
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?,
        Format::Csv => crate::print::csv(&mut out, &placement::table(&rows))?,
        Format::Table => crate::print::aligned(&mut out, &placement::table(&rows))?,
    }
    out.flush()?;
    Ok(())
}

/// The policies a list of names asks for, `all` for every one, each once in the order given;
/// shared by every command that takes a list (`place --policy`, `bench transcode --policies`).
pub(crate) fn policies(names: &[String]) -> Result<Vec<Policy>> {
    let mut out = Vec::new();
    for name in names {
        let name = name.trim();
        if name == "all" {
            out.extend_from_slice(Policy::ALL);
        } else {
            out.push(name.parse::<Policy>().map_err(|e| anyhow::anyhow!("{e}, or `all`"))?);
        }
    }
    let mut seen = Vec::with_capacity(out.len());
    out.retain(|p| {
        if seen.contains(p) {
            false
        } else {
            seen.push(*p);
            true
        }
    });
    Ok(out)
}

fn setup(args: &PlaceArgs, policies: &[Policy]) -> Result<Setup> {
    let topology = args.topology.as_deref().map(Topology::parse).transpose()?;
    let (workers, topology) =
        placement::members(policies, args.workers, args.weights.as_deref(), topology, placement::FLAG_NAMES)?;
    let config = PlaceConfig {
        measure: match args.queue {
            Measure::Units => QueueMeasure::Units,
            Measure::Bytes => QueueMeasure::Bytes,
        },
        hash: match args.hash {
            Hash::Fast => HashFn::Fast,
            Hash::Classic => HashFn::Classic,
        },
        qmin: match args.qmin {
            Qmin::True => QminReading::TrueMin,
            Qmin::Nonzero => QminReading::NonZeroMin,
        },
        epsilon: args.epsilon,
        vnodes: args.vnodes,
        maglev_table: args.maglev_table,
        beta: args.beta,
        parent_load: match args.parent_load {
            Parent::Eq67 => ParentLoad::AnyIdleIsZero,
            Parent::Sum => ParentLoad::Sum,
        },
        ca_min_weighted: matches!(args.ca_min, CaMin::Weighted),
        ps_dispatch: match args.ps_dispatch {
            Ps::Set => PsDispatch::Set,
            Ps::PerUnit => PsDispatch::PerUnit,
        },
        topology,
    };
    let source: KeySource = args.keys.parse()?;
    let units = source.load(args.seed, args.undirected)?;
    if let Some(said) = &units.left_out {
        eprintln!("{said}");
    }
    let measured = placement::Setup { weighted: args.weights.is_some(), workers, config, units: units.units };
    Ok(Setup { measured, flows: units.flows, source })
}
