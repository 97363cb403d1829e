//! `switchyard bench steer`: prints receive-side steering measured on loopback and a veth pair
//! (`switchyard_experiments::bench::steer`) beside the interrupt-affinity model of this machine.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use switchyard_core::place::steer::Steering;
use switchyard_experiments::bench::steer::{self, CAN_AND_CANNOT, Path, Report, Setup};

/// Receive-side steering (Guo ch. 3's interrupt affinity; RFS on Linux today) measured: the
/// delivery server's `sink` connections (clients upload, the server reads and counts, like
/// iperf) placed with `--steer none` (least-loaded worker, threads left to the scheduler),
/// `incoming-cpu` (the worker pinned to the core the kernel receives the connection on, read
/// from SO_INCOMING_CPU) and `other-cpu` (pinned to another core: the wrong place on purpose),
/// one connection per core from client threads pinned one per core.
///
/// Paths: loopback; a veth pair between two network namespaces the bench makes (root and `ip`
/// needed, skipped with the reason otherwise, always deleted); and the same veth with RPS
/// sending every packet's receipt to CPU 0 (Guo's one NIC queue on one core).
///
/// Printed per path and message size: throughput, CPU per byte (this process's, and the whole
/// machine's from /proc/stat), connections placed on a worker pinned to their receiving core
/// ("placed"), whose worker ran on that core at the end ("at end"), the receiving cores seen
/// when placing, and the ratios steered/none and steered/other-cpu; then the simulator's irq model
/// of this machine (caches read from sysfs) for the same placements, and the difference
/// between measured and predicted ratios. Ratios are within one run; the modes alternate in
/// rounds and the median round is kept. The output ends with what a 2-core VM can and cannot
/// show.
///
/// Examples:
///
///   switchyard bench steer
///   switchyard bench steer --sizes 1448,64K --seconds 3 --rounds 5
///   switchyard bench steer --paths loopback --seconds 0.2 --rounds 1
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct SteerBench {
    /// Message sizes, comma-separated, with K or M (iperf's -l on both sides).
    #[arg(long, value_delimiter = ',', value_parser = crate::units::parse_size, default_value = "1448,16K,64K")]
    sizes: Vec<usize>,
    /// Seconds measured per run.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Seconds each run warms up before measuring.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Rounds of every case (the median is kept).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Paths, comma-separated: loopback, veth, veth-rps.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "loopback,veth,veth-rps")]
    paths: Vec<PathArg>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum PathArg {
    /// 127.0.0.1.
    Loopback,
    /// A veth pair between two namespaces made for the run.
    Veth,
    /// The same veth with RPS steering receipt to CPU 0.
    VethRps,
}

impl From<PathArg> for Path {
    fn from(p: PathArg) -> Self {
        match p {
            PathArg::Loopback => Self::Loopback,
            PathArg::Veth => Self::Veth,
            PathArg::VethRps => Self::VethRps,
        }
    }
}

pub(crate) fn run(a: &SteerBench) -> Result<()> {
    switchyard_runtime::deliver::raise_file_limit();
    let setup = Setup {
        sizes: a.sizes.clone(),
        seconds: a.seconds,
        warmup: a.warmup,
        rounds: a.rounds,
        paths: a.paths.iter().map(|&p| p.into()).collect(),
    };
    let report = steer::run(&setup, |what| eprintln!("  {what}"))?;
    let mut out = std::io::stdout().lock();
    out.write_all(render(&report).as_bytes())?;
    Ok(())
}

fn render(r: &Report) -> String {
    let mut s = String::new();
    let (paths, sizes) = (r.paths(), r.sizes());
    s += &format!(
        "Receive-side steering: {} connection(s), one per core, each from a client thread pinned to its core\n",
        r.cores
    );
    for (path, why) in &r.skipped {
        s += &format!("{}: skipped: {why}\n", path.name());
    }
    for &path in &paths {
        s += &format!("\n{}\n", path.name());
        s += &format!(
            "{:>7} {:>13} {:>10} {:>11} {:>11} {:>8} {:>8}  {}\n",
            "size", "steer", "Gb/s", "proc ns/B", "mach ns/B", "placed", "at end", "received on"
        );
        for &size in &sizes {
            for mode in Steering::ALL {
                let Some(x) = r.run(path, size, mode) else { continue };
                s += &format!(
                    "{:>7} {:>13} {:>10.2} {:>11.3} {:>11.3} {:>8} {:>8}  {}\n",
                    size,
                    mode.name(),
                    x.throughput * 8e-9,
                    x.process_ns_per_byte,
                    x.machine_ns_per_byte,
                    // Unpinned workers are placed on no core: only where they ran is known.
                    if mode == Steering::None {
                        "-".to_string()
                    } else {
                        format!("{}/{}", x.placed_on_incoming, x.conns)
                    },
                    format!("{}/{}", x.on_incoming_at_end, x.conns),
                    x.receiving_cores.iter().map(|c| format!("cpu{c}")).collect::<Vec<_>>().join(","),
                );
            }
        }
    }
    s += &format!("\nThe model (sim irq, {}):\n", r.machine);
    s += &format!(
        "{:>7} {:>13} {:>34} {:>10} {:>12} {:>9} {:>9}\n",
        "size", "steer", "as placement", "Gb/s (1)", "all cores", "ns/B", "L2/msg"
    );
    for &size in &sizes {
        for mode in Steering::ALL {
            let Some(p) = r.prediction(size, mode) else { continue };
            s += &format!(
                "{:>7} {:>13} {:>34} {:>10.2} {:>12.2} {:>9.3} {:>9.1}\n",
                size,
                mode.name(),
                p.placement_text(),
                p.throughput * 8e-9,
                p.throughput_all_cores * 8e-9,
                p.ns_per_byte,
                p.l2_per_message
            );
        }
    }
    s += "\nRatios, measured (this process's CPU per byte) against the model; diff = measured − predicted:\n";
    s += &format!(
        "{:>14} {:>7} {:>28} {:>28} {:>28}\n",
        "path", "size", "throughput steer/none", "throughput steer/other", "CPU per byte steer/other"
    );
    let cell = |r: steer::Ratio| format!("{:.3} vs {:.3} ({:+.3})", r.measured, r.predicted, r.measured - r.predicted);
    for c in r.comparisons() {
        s += &format!(
            "{:>14} {:>7} {:>28} {:>28} {:>28}\n",
            c.path.name(),
            c.size,
            cell(c.steer_over_none),
            cell(c.steer_over_other),
            cell(c.cpu_steer_over_other),
        );
    }
    s += "(1) one stream received on core 0 (compared with veth+RPS); 'all cores': every core \
saturated by its own stream (compared with loopback and veth). The model has a NIC's \
interrupt and DMA copy and no sender, so compare ratios, not Gb/s.\n";
    s += &format!(
        "perf counters in this guest: {}\n\n",
        if r.perf_counters { "available" } else { "not supported (L2 misses are the model's only)" }
    );
    s += CAN_AND_CANNOT;
    s.push('\n');
    s
}
