//! Receive-side steering measured (`switchyard bench steer`, issue 26): the delivery server's
//! `sink` connections placed by `--steer` — `none` (the server's default: least-loaded worker,
//! threads left to the OS scheduler), `incoming-cpu` (the worker pinned to the core the kernel
//! receives the connection on, read from `SO_INCOMING_CPU`: Guo ch. 3's interrupt affinity, RFS
//! today) and `other-cpu` (pinned to another core: the wrong place on purpose) — beside the
//! simulator's interrupt-affinity model ([`switchyard_sim::models::irq`]) of this machine.
//!
//! # The runs
//!
//! One client connection per core, each from a client thread pinned to its core, uploading
//! messages of one size as fast as TCP takes them (iperf's client with `-l`); the server reads
//! with the same size. Three paths:
//! - **loopback**: the kernel processes a packet's receipt on the core that sent it, so each
//!   connection's receiving core is its sender's;
//! - **veth**: a veth pair between two network namespaces made for the run (server in one,
//!   clients in the other), receipt again on the sender's core, through the veth driver;
//! - **veth+RPS**: the same with RPS on the server's end steering every packet's receipt to
//!   core 0, as Guo's one NIC queue with its interrupt on one core (§2.2 step 5).
//!
//! The veth paths need root and `ip`; when they cannot be set up they are skipped with the
//! reason (in [`Report::skipped`]), and the namespaces are always deleted afterwards.
//!
//! Every (path, size) runs the three modes in turn, `rounds` times; the median round of each
//! is kept. Reported: bytes per second received; CPU per byte — this process's (every client and
//! server thread, and the kernel work done in their context) and the whole machine's (from
//! `/proc/stat`, which also holds ksoftirqd and anything else running); how many connections
//! were placed on their receiving core, and how many were on it at the end (the kernel may move
//! a connection's receipt: seen over loopback and veth, most likely because data an ACK releases
//! is sent, and so received, on the core that processed the ACK); and the ratios within the run.
//!
//! # The prediction
//!
//! [`predict`] runs the irq model with this machine's caches (sizes and sharing from sysfs;
//! latencies chosen, see [`MISS_NS`]) on `flat:<cores>`: `incoming-cpu` as
//! [`Placement::SameCore`], `other-cpu` as [`Placement::Affinity`] (softirq on core 0, the
//! application on core 1, which here shares only the L3), and `none` as
//! [`Placement::RoundRobin`]. On loopback and plain veth every core is busy with a connection
//! received where it is sent, so the throughput predicted is every core saturated
//! ([`Prediction::throughput_all_cores`]); with RPS all receipt is on core 0, Guo's setting, so
//! it is the model's one-stream pipeline ([`Prediction::throughput`]). `none` is the loosest
//! match: the model's round-robin rotates the interrupt per segment and moves the application
//! every tick, while Linux leaves a flow's receipt where it is and its scheduler tends to wake
//! the reader on the waker's core; what is compared is the ratios, and CPU per byte. The model's per-message costs are Guo's Clovertown-era choices and include a NIC's
//! interrupt and DMA copy, which loopback and veth do not have, and leave out the sender, which
//! here shares the cores: see [`CAN_AND_CANNOT`].

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use switchyard_core::place::steer::Steering;
use switchyard_runtime::deliver::{Handshake, Load, LoadConfig, Request, Server, ServerConfig, Transport};
use switchyard_sim::models::cache::{CacheHierarchy, SysCache};
use switchyard_sim::models::irq::{IrqParams, Placement, simulate};

use super::peers::found;
use crate::report::{self as rep, ColumnSpec, Progress, ReportSpec, Table, TableSpec, Value};

/// What a 2-core VM can and cannot show about receive-side steering; printed with every report.
pub const CAN_AND_CANNOT: &str = "\
What a 2-core VM can show: whether the server puts each connection on the worker whose core \
the kernel received it on (SO_INCOMING_CPU), and the throughput and CPU per byte of that \
placement against no steering and against the wrong core, as ratios measured in the same run; \
that the sink counts every byte sent; and that the kernel's receiving core moves (seen here \
over loopback and veth; most likely data that an ACK releases is sent, and so received, on \
the core that processed the ACK, the receiver's).
What it cannot: the vCPUs are threads of the hypervisor and need not stay on fixed physical \
cores, so 'same core' and 'other core' are the guest's view; a real NIC's interrupt path \
(and its smp_affinity) is the hypervisor's, not ours, so loopback and veth stand in for it, with \
no interrupt, no DMA and the sender sharing the two cores with the receiver; the L3 (260 MiB \
here) is shared by both cores and by other guests, so 'other core' still hits in L3 and the \
cost of a cross-core placement is an L2 miss, not a trip to memory as on Guo's Clovertown; \
there are no hardware counters in the guest (perf reports instructions and cache misses as \
not supported), so L2 misses are only the model's; and with two cores there is no core left \
for the sender or for a quiet measurement (another process's work shows up in the machine's \
CPU figure).";

/// Miss penalties (ns) given to this machine's cache levels, nearest first: Linux gives sizes
/// but no latencies. **Chosen**, not measured here: 7 ns for an L1d miss served by L2 (about
/// 16 cycles at 2.3 GHz, the usual L2 latency of recent Xeon cores), 33 ns for an L2 miss served
/// by the shared L3 (the order Sapphire Rapids–class parts show for their mesh-connected L3) and
/// 110 ns for memory, the last repeated for any further level.
pub const MISS_NS: [f64; 3] = [7.0, 33.0, 110.0];

/// The paths a run goes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Path {
    /// 127.0.0.1.
    Loopback,
    /// A veth pair between two namespaces, receipt on the sender's core.
    Veth,
    /// The same, RPS steering every packet's receipt to core 0.
    VethRps,
}

impl Path {
    /// Every path, in the order run.
    pub const ALL: [Self; 3] = [Self::Loopback, Self::Veth, Self::VethRps];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Loopback => "loopback",
            Self::Veth => "veth",
            Self::VethRps => "veth+RPS→cpu0",
        }
    }
}

/// A run's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// Message sizes (bytes per write and per read).
    pub sizes: Vec<usize>,
    /// Seconds measured per run.
    pub seconds: f64,
    /// Seconds run before measuring (connections opened, caches and TCP windows warm).
    pub warmup: f64,
    /// Rounds of every case; the median is kept.
    pub rounds: usize,
    /// The paths to run.
    pub paths: Vec<Path>,
}

impl Default for Setup {
    fn default() -> Self {
        Self { sizes: vec![1448, 16 << 10, 64 << 10], seconds: 2.0, warmup: 0.5, rounds: 3, paths: Path::ALL.to_vec() }
    }
}

/// One mode's measurement on one path and size (the median round).
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// The path.
    pub path: Path,
    /// Message size, bytes.
    pub size: usize,
    /// The server's steering.
    pub mode: Steering,
    /// Bytes per second the server received, all connections.
    pub throughput: f64,
    /// This process's CPU (client and server threads) per byte received, ns.
    pub process_ns_per_byte: f64,
    /// The whole machine's busy CPU per byte received, ns (`/proc/stat`).
    pub machine_ns_per_byte: f64,
    /// Connections, summed over the rounds.
    pub conns: usize,
    /// Of which placed on a worker pinned to their receiving core (as read at placement).
    pub placed_on_incoming: usize,
    /// Of which whose worker was running on their receiving core at the end of the run.
    pub on_incoming_at_end: usize,
    /// The receiving cores the connections were placed by, in every round (sorted, once each).
    pub receiving_cores: Vec<u32>,
}

/// The model's figures for one size and mode.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    /// Message size, bytes.
    pub size: usize,
    /// The mode it stands for.
    pub mode: Steering,
    /// The model's placement.
    pub placement: Placement,
    /// Bytes per second of one saturated stream whose receipt is on core 0 (the model as Guo
    /// ran it; the veth+RPS setting).
    pub throughput: f64,
    /// Bytes per second with every core saturated by a stream of its own, received where it
    /// is sent (loopback and plain veth: one connection per core, so each core does one
    /// connection's receive work, or, crossed, one's kernel half and another's application
    /// half): `cores × size ÷ CPU per message`.
    pub throughput_all_cores: f64,
    /// Receive CPU per byte (kernel and application), ns.
    pub ns_per_byte: f64,
    /// L2 misses per message.
    pub l2_per_message: f64,
}

/// Everything a run found.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The measurements, by path, size and mode.
    pub runs: Vec<Run>,
    /// The model's figures, by size and mode.
    pub predictions: Vec<Prediction>,
    /// Paths that could not run, and why.
    pub skipped: Vec<(Path, String)>,
    /// The caches the model was given, one line (or why the data-sheet default was used).
    pub machine: String,
    /// Whether `perf` could count instructions here.
    pub perf_counters: bool,
    /// Cores used.
    pub cores: usize,
}

impl Prediction {
    /// The throughput to set beside a measurement on `path`: receipt on the sender's core keeps
    /// every core busy (loopback, plain veth); RPS puts it all on core 0 (one stream).
    pub fn throughput_on(&self, path: Path) -> f64 {
        if path == Path::VethRps { self.throughput } else { self.throughput_all_cores }
    }

    /// The model's placement for this mode, in words, as it stands on this machine (whose cores
    /// share only the L3, so "L2 sibling" is not what the irq model's name says here).
    pub fn placement_text(&self) -> &'static str {
        match self.mode {
            Steering::None => "irq round-robin, app moved",
            Steering::IncomingCpu => "irq and app on core 0",
            Steering::OtherCpu => "irq on core 0, app on core 1",
        }
    }
}

/// A measured ratio beside the model's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ratio {
    /// Measured in this run.
    pub measured: f64,
    /// The model's for the same setting.
    pub predicted: f64,
}

/// One path and size's ratios, measured against the model.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// The path.
    pub path: Path,
    /// Message size, bytes.
    pub size: usize,
    /// Throughput, steered over none.
    pub steer_over_none: Ratio,
    /// Throughput, steered over the other core.
    pub steer_over_other: Ratio,
    /// This process's CPU per byte (the model's receive CPU), steered over the other core.
    pub cpu_steer_over_other: Ratio,
}

impl Report {
    /// Every path and size where all three modes ran and were predicted: paths in the order
    /// run, sizes ascending.
    pub fn comparisons(&self) -> Vec<Comparison> {
        let sizes = self.sizes();
        self.paths()
            .into_iter()
            .flat_map(|path| sizes.iter().map(move |&size| (path, size)))
            .filter_map(|(path, size)| {
                let run = |m| self.run(path, size, m);
                let pre = |m| self.prediction(size, m);
                let (st, no, ot) = (run(Steering::IncomingCpu)?, run(Steering::None)?, run(Steering::OtherCpu)?);
                let (pst, pno, pot) = (pre(Steering::IncomingCpu)?, pre(Steering::None)?, pre(Steering::OtherCpu)?);
                Some(Comparison {
                    path,
                    size,
                    steer_over_none: Ratio {
                        measured: st.throughput / no.throughput,
                        predicted: pst.throughput_on(path) / pno.throughput_on(path),
                    },
                    steer_over_other: Ratio {
                        measured: st.throughput / ot.throughput,
                        predicted: pst.throughput_on(path) / pot.throughput_on(path),
                    },
                    cpu_steer_over_other: Ratio {
                        measured: st.process_ns_per_byte / ot.process_ns_per_byte,
                        predicted: pst.ns_per_byte / pot.ns_per_byte,
                    },
                })
            })
            .collect()
    }

    /// The paths that ran, in the order run.
    pub fn paths(&self) -> Vec<Path> {
        let mut paths: Vec<Path> = self.runs.iter().map(|r| r.path).collect();
        paths.dedup();
        paths
    }

    /// The sizes that ran, ascending.
    pub fn sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = self.runs.iter().map(|r| r.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// The run of `mode` on `path` at `size`.
    pub fn run(&self, path: Path, size: usize, mode: Steering) -> Option<&Run> {
        self.runs.iter().find(|r| r.path == path && r.size == size && r.mode == mode)
    }

    /// The prediction for `mode` at `size`.
    pub fn prediction(&self, size: usize, mode: Steering) -> Option<&Prediction> {
        self.predictions.iter().find(|p| p.size == size && p.mode == mode)
    }
}

/// Runs every path, size and mode, then the model, advancing `progress` per run.
pub fn run(setup: &Setup, progress: &dyn Progress) -> Result<Report> {
    if setup.sizes.is_empty() || setup.sizes.contains(&0) || setup.rounds == 0 {
        bail!("give at least one message size above 0 and at least one round");
    }
    if !(setup.seconds.is_finite() && setup.seconds > 0.0 && setup.warmup.is_finite() && setup.warmup >= 0.0) {
        bail!("--seconds must be above 0 and --warmup 0 or more");
    }
    let cores = super::cores();
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    let per_path = (setup.sizes.len() * setup.rounds * Steering::ALL.len()) as u64;
    progress.stage("bench steer: runs", per_path * setup.paths.len() as u64);
    for &path in &setup.paths {
        let bed = match path {
            Path::Loopback => None,
            Path::Veth | Path::VethRps => match Pair::new(path == Path::VethRps) {
                Ok(p) => Some(p),
                Err(e) => {
                    progress.advance(per_path);
                    skipped.push((path, format!("{e:#}")));
                    continue;
                }
            },
        };
        for &size in &setup.sizes {
            let mut rounds: Vec<Vec<Measured>> = vec![Vec::new(); Steering::ALL.len()];
            for _ in 0..setup.rounds {
                for (k, mode) in Steering::ALL.into_iter().enumerate() {
                    rounds[k].push(measure(bed.as_ref(), size, mode, cores, setup)?);
                    progress.advance(1);
                }
            }
            for (k, mode) in Steering::ALL.into_iter().enumerate() {
                runs.push(summarise(path, size, mode, &rounds[k]));
            }
        }
    }
    let (caches, machine) = match this_machine_caches() {
        Ok(c) => {
            let text = c
                .levels
                .iter()
                .map(|l| format!("{} {} KiB/{} core(s) {} ns", l.name, l.size >> 10, l.shared_by, l.miss_ns))
                .collect::<Vec<_>>()
                .join(", ");
            (Some(c), format!("flat:{cores}, caches from sysfs: {text}"))
        }
        Err(e) => (None, format!("flat:{cores}, generic data-sheet caches ({e})")),
    };
    let predictions = predict(&setup.sizes, caches, cores);
    Ok(Report { runs, predictions, skipped, machine, perf_counters: perf_counts(), cores })
}

/// The measurements by path, size and mode.
pub const RUNS: TableSpec = TableSpec::new(
    "runs",
    "Measured, by path, message size and steering (median round)",
    &[
        ColumnSpec::text("path"),
        ColumnSpec::int("size").unit("B").about("message size (iperf's -l on both sides)"),
        ColumnSpec::text("steer"),
        ColumnSpec::num("throughput", 2).unit("Gb/s").about("received, all connections"),
        ColumnSpec::num("process_ns_per_byte", 3)
            .header("proc")
            .unit("ns/B")
            .about("this process's CPU (client and server threads) per byte received"),
        ColumnSpec::num("machine_ns_per_byte", 3)
            .header("mach")
            .unit("ns/B")
            .about("the whole machine's busy CPU per byte received (/proc/stat)"),
        ColumnSpec::int("placed")
            .about("connections placed on a worker pinned to their receiving core (none for unpinned workers)"),
        ColumnSpec::int("at_end")
            .header("at end")
            .about("connections whose worker ran on their receiving core at the end"),
        ColumnSpec::int("conns").about("connections, summed over the rounds"),
        ColumnSpec::text("received_on").header("received on").about("the receiving cores seen when placing"),
    ],
);

/// The model's figures by size and mode.
pub const MODEL: TableSpec = TableSpec::new(
    "model",
    "The model (sim irq) of this machine, by message size and steering",
    &[
        ColumnSpec::int("size").unit("B"),
        ColumnSpec::text("steer"),
        ColumnSpec::text("placement").header("as placement"),
        ColumnSpec::num("throughput", 2)
            .header("one stream (1)")
            .unit("Gb/s")
            .about("one saturated stream received on core 0"),
        ColumnSpec::num("throughput_all_cores", 2)
            .header("all cores")
            .unit("Gb/s")
            .about("every core saturated by a stream of its own"),
        ColumnSpec::num("ns_per_byte", 3)
            .header("CPU")
            .unit("ns/B")
            .about("receive CPU per byte (kernel and application)"),
        ColumnSpec::num("l2_per_message", 1).header("L2/msg").about("L2 misses per message"),
    ],
);

/// Measured ratios against the model's.
pub const RATIOS: TableSpec = TableSpec::new(
    "ratios",
    "Ratios, measured (this process's CPU per byte) against the model; diff = measured − predicted",
    &[
        ColumnSpec::text("path"),
        ColumnSpec::int("size").unit("B"),
        ColumnSpec::num("steer_over_none", 3).header("thr steer/none"),
        ColumnSpec::num("steer_over_none_model", 3).header("model"),
        ColumnSpec::num("steer_over_none_diff", 3).signed().header("diff"),
        ColumnSpec::num("steer_over_other", 3).header("thr steer/other"),
        ColumnSpec::num("steer_over_other_model", 3).header("model"),
        ColumnSpec::num("steer_over_other_diff", 3).signed().header("diff"),
        ColumnSpec::num("cpu_steer_over_other", 3).header("CPU/B steer/other"),
        ColumnSpec::num("cpu_steer_over_other_model", 3).header("model"),
        ColumnSpec::num("cpu_steer_over_other_diff", 3).signed().header("diff"),
    ],
);

/// What `bench steer` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-steer",
    title: "Receive-side steering measured (none, incoming-cpu, other-cpu) on loopback and a veth pair, beside the interrupt-affinity model of this machine",
    tables: &[&RUNS, &MODEL, &RATIOS],
};

impl Report {
    /// The run as a report: the measurements, the model, the ratios side by side, and what a
    /// 2-core VM can and cannot show.
    pub fn report(&self, setup: &Setup) -> rep::Report {
        let mut r = rep::Report::new(&SPEC);
        r.param(
            "sizes",
            setup.sizes.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
            "message sizes, bytes",
        )
        .param("seconds", setup.seconds, "seconds measured per run")
        .param("warmup", setup.warmup, "seconds each run warms up before measuring")
        .param("rounds", setup.rounds, "rounds of every case (the median is kept)")
        .param("paths", setup.paths.iter().map(|p| p.name()).collect::<Vec<_>>().join(","), "paths asked for")
        .param("connections", self.cores, "connections, one per core, from client threads pinned one per core");
        r.machine = Some(crate::machine::describe());
        let mut runs = Table::new(&RUNS).grouped_by("path");
        for x in &self.runs {
            runs.push(vec![
                x.path.name().into(),
                x.size.into(),
                x.mode.name().into(),
                (x.throughput * 8e-9).into(),
                x.process_ns_per_byte.into(),
                x.machine_ns_per_byte.into(),
                // Unpinned workers are placed on no core: only where they ran is known.
                if x.mode == Steering::None { Value::Null } else { x.placed_on_incoming.into() },
                x.on_incoming_at_end.into(),
                x.conns.into(),
                x.receiving_cores.iter().map(|c| format!("cpu{c}")).collect::<Vec<_>>().join(",").into(),
            ]);
        }
        for (path, why) in &self.skipped {
            runs.note(format!("{}: skipped: {why}", path.name()));
        }
        r.tables.push(runs);
        let mut model = Table::new(&MODEL);
        for p in &self.predictions {
            model.push(vec![
                p.size.into(),
                p.mode.name().into(),
                p.placement_text().into(),
                (p.throughput * 8e-9).into(),
                (p.throughput_all_cores * 8e-9).into(),
                p.ns_per_byte.into(),
                p.l2_per_message.into(),
            ]);
        }
        model.note(format!("the model's machine: {}", self.machine));
        model.note(
            "(1) one stream received on core 0 (compared with veth+RPS); 'all cores': every core saturated by its own stream (compared with loopback and veth). The model has a NIC's interrupt and DMA copy and no sender, so compare ratios, not Gb/s.",
        );
        r.tables.push(model);
        let mut ratios = Table::new(&RATIOS);
        for c in self.comparisons() {
            let mut row: Vec<Value> = vec![c.path.name().into(), c.size.into()];
            for x in [c.steer_over_none, c.steer_over_other, c.cpu_steer_over_other] {
                row.extend([x.measured.into(), x.predicted.into(), (x.measured - x.predicted).into()]);
            }
            ratios.push(row);
        }
        r.tables.push(ratios);
        r.note(format!(
            "perf counters in this guest: {}",
            if self.perf_counters { "available" } else { "not supported (L2 misses are the model's only)" }
        ));
        for line in CAN_AND_CANNOT.lines() {
            r.note(line);
        }
        r
    }
}

/// One round's figures.
#[derive(Clone, Debug)]
struct Measured {
    bytes_per_sec: f64,
    process_ns_per_byte: f64,
    machine_ns_per_byte: f64,
    conns: usize,
    placed: usize,
    at_end: usize,
    receiving: Vec<u32>,
}

fn measure(bed: Option<&Pair>, size: usize, steer: Steering, cores: usize, setup: &Setup) -> Result<Measured> {
    let listen = match bed {
        None => std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        Some(_) => std::net::SocketAddr::from((Pair::SERVER_IP, 0)),
    };
    let cfg = ServerConfig { listen, workers: cores, steer, recv_size: size, ..Default::default() };
    let server = match bed {
        None => Server::start(cfg),
        Some(b) => b.inside(&b.server_ns, move || Server::start(cfg))?,
    }
    .context("starting the server")?;
    let load_cfg = LoadConfig {
        server: server.local_addr(),
        transport: Transport::Tcp,
        conns: cores,
        handshake: Handshake::Switchyard(Request::Sink),
        threads: cores,
        recv_buffer: None,
        upload: Some(size),
        pin: true,
        promised: None,
    };
    let load = match bed {
        None => Load::start(load_cfg),
        Some(b) => b.inside(&b.client_ns, move || Load::start(load_cfg))?,
    }
    .context("starting the clients")?;
    if let Some(why) = load.opened().iter().find_map(|o| match o {
        switchyard_runtime::deliver::load::Opened::Accepted(_) => None,
        other => Some(format!("{other:?}")),
    }) {
        bail!("a connection did not open: {why}");
    }
    std::thread::sleep(Duration::from_secs_f64(setup.warmup));
    let (b0, p0, m0, t0) = (server.received(), super::process_cpu(), machine_busy_ns(), Instant::now());
    std::thread::sleep(Duration::from_secs_f64(setup.seconds));
    let (b1, p1, m1, secs) = (server.received(), super::process_cpu(), machine_busy_ns(), t0.elapsed().as_secs_f64());
    let views = server.connections();
    let ended = load.ended();
    load.finish();
    let failure = server.failure();
    server.stop();
    if let Some(f) = failure {
        bail!("the server failed: {f}");
    }
    if let Some(why) = ended.iter().flatten().next() {
        bail!("a connection ended early: {why}");
    }
    let bytes = (b1 - b0).max(1) as f64;
    Ok(Measured {
        bytes_per_sec: bytes / secs,
        process_ns_per_byte: (p1 - p0) * 1e9 / bytes,
        machine_ns_per_byte: m1.zip(m0).map_or(f64::NAN, |(a, b)| a.saturating_sub(b) as f64 / bytes),
        conns: views.len(),
        placed: views.iter().filter(|v| v.placed_cpu.is_some() && v.worker_core == v.placed_cpu).count(),
        at_end: views.iter().filter(|v| v.on_incoming_cpu()).count(),
        receiving: views.iter().filter_map(|v| v.placed_cpu).collect(),
    })
}

fn summarise(path: Path, size: usize, mode: Steering, rounds: &[Measured]) -> Run {
    let median = |f: fn(&Measured) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Run {
        path,
        size,
        mode,
        throughput: median(|m| m.bytes_per_sec),
        process_ns_per_byte: median(|m| m.process_ns_per_byte),
        machine_ns_per_byte: median(|m| m.machine_ns_per_byte),
        conns: rounds.iter().map(|m| m.conns).sum(),
        placed_on_incoming: rounds.iter().map(|m| m.placed).sum(),
        on_incoming_at_end: rounds.iter().map(|m| m.at_end).sum(),
        receiving_cores: {
            let mut c: Vec<u32> = rounds.iter().flat_map(|m| m.receiving.iter().copied()).collect();
            c.sort_unstable();
            c.dedup();
            c
        },
    }
}

/// The model's figures for every size: each mode's placement on `flat:<cores>` with `caches`
/// (the generic data-sheet hierarchy when `None`).
pub fn predict(sizes: &[usize], caches: Option<CacheHierarchy>, cores: usize) -> Vec<Prediction> {
    let cores = cores.max(2);
    let mut out = Vec::new();
    for &size in sizes {
        for (mode, placement) in [
            (Steering::None, Placement::RoundRobin),
            (Steering::IncomingCpu, Placement::SameCore),
            (Steering::OtherCpu, Placement::Affinity),
        ] {
            let o = simulate(&IrqParams {
                topology: format!("flat:{cores}"),
                caches: caches.clone(),
                ..IrqParams::guo(size as u64, placement, 1)
            });
            out.push(Prediction {
                size,
                mode,
                placement,
                throughput: o.throughput,
                throughput_all_cores: cores as f64 * size as f64 / (o.cpu_ns_per_message * 1e-9),
                ns_per_byte: o.cpu_ns_per_message / size as f64,
                l2_per_message: o.l2_per_message,
            });
        }
    }
    out
}

/// CPU 0's data and unified caches as Linux lists them, with [`MISS_NS`].
pub fn this_machine_caches() -> Result<CacheHierarchy, String> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut caches = Vec::new();
    for k in 0..16 {
        let d = dir.join(format!("index{k}"));
        if !d.exists() {
            break;
        }
        let read = |f: &str| std::fs::read_to_string(d.join(f)).map(|s| s.trim().to_owned());
        let (Ok(level), Ok(kind), Ok(size), Ok(line), Ok(shared)) =
            (read("level"), read("type"), read("size"), read("coherency_line_size"), read("shared_cpu_list"))
        else {
            return Err(format!("cannot read {}", d.display()));
        };
        caches.push(SysCache {
            level: level.parse().map_err(|_| format!("{}/level: {level:?}", d.display()))?,
            kind,
            size,
            line: line.parse().map_err(|_| format!("{}/coherency_line_size: {line:?}", d.display()))?,
            shared_cpu_list: shared,
        });
    }
    let data = caches.iter().filter(|c| c.kind != "Instruction").count();
    if data == 0 {
        return Err(format!("no caches listed under {}", dir.display()));
    }
    let miss: Vec<f64> = (0..data).map(|i| MISS_NS[i.min(MISS_NS.len() - 1)]).collect();
    CacheHierarchy::from_sys(&caches, &miss)
}

/// Whether `perf stat` counts instructions here (in a VM it often cannot).
fn perf_counts() -> bool {
    Command::new("perf")
        .args(["stat", "-x,", "-e", "instructions", "true"])
        .output()
        .is_ok_and(|o| o.status.success() && !String::from_utf8_lossy(&o.stderr).contains("not supported"))
}

/// Busy CPU time of the whole machine so far, ns: `/proc/stat`'s first line less idle and
/// iowait, in USER_HZ ticks (100 a second on Linux).
fn machine_busy_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = text.lines().next()?.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let busy: u64 = fields.iter().take(8).enumerate().filter(|(i, _)| *i != 3 && *i != 4).map(|(_, v)| v).sum();
    Some(busy * 10_000_000)
}

/// Two network namespaces joined by a veth pair: the server's end `SERVER_IP`, the clients' end
/// `CLIENT_IP`. Both namespaces (and with them the pair) are deleted when dropped.
#[derive(Debug)]
struct Pair {
    server_ns: String,
    client_ns: String,
}

impl Pair {
    const SERVER_IP: [u8; 4] = [10, 213, 0, 1];
    const SERVER_DEV: &'static str = "sy-steer-s";
    const CLIENT_DEV: &'static str = "sy-steer-c";

    fn new(rps_to_cpu0: bool) -> Result<Self> {
        if !nix::unistd::geteuid().is_root() {
            bail!("not root: network namespaces need it");
        }
        if found("ip").is_none() {
            bail!("no `ip` (iproute2)");
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let tag = format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let (server_ns, client_ns) = (format!("systeer-s{tag}"), format!("systeer-c{tag}"));
        ip(&["netns", "add", &server_ns])?;
        // From here on, dropping `pair` deletes whatever was made.
        let mut pair = Self { server_ns, client_ns: String::new() };
        ip(&["netns", "add", &client_ns])?;
        pair.client_ns = client_ns;
        let (s, c) = (pair.server_ns.as_str(), pair.client_ns.as_str());
        ip(&["-n", s, "link", "add", Self::SERVER_DEV, "type", "veth", "peer", "name", Self::CLIENT_DEV, "netns", c])?;
        ip(&["-n", s, "addr", "add", "10.213.0.1/24", "dev", Self::SERVER_DEV])?;
        ip(&["-n", c, "addr", "add", "10.213.0.2/24", "dev", Self::CLIENT_DEV])?;
        for (ns, dev) in [(s, Self::SERVER_DEV), (c, Self::CLIENT_DEV)] {
            ip(&["-n", ns, "link", "set", dev, "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let mask = if rps_to_cpu0 { "1" } else { "0" };
        // sysfs shows the devices of the namespace it was mounted in: `ip netns exec` mounts
        // the server namespace's own.
        let out = Command::new("ip")
            .args(["netns", "exec", s, "sh", "-c"])
            .arg(format!("echo {mask} > /sys/class/net/{}/queues/rx-0/rps_cpus", Self::SERVER_DEV))
            .output()
            .context("running ip netns exec")?;
        if !out.status.success() {
            bail!("setting RPS on {}: {}", Self::SERVER_DEV, String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(pair)
    }

    /// Runs `f` on a new thread inside namespace `ns`; sockets and threads it makes stay there.
    fn inside<T: Send>(&self, ns: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
        let file = std::fs::File::open(format!("/run/netns/{ns}")).context("opening the namespace")?;
        std::thread::scope(|sc| {
            sc.spawn(move || -> Result<T> {
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).context("entering the namespace")?;
                Ok(f())
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the thread inside the namespace panicked"))?
        })
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in [&self.server_ns, &self.client_ns] {
            if !ns.is_empty() {
                let _ = Command::new("ip").args(["netns", "del", ns]).status();
            }
        }
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's ordering on a machine shaped like this one (private L2, shared L3): the
    /// same core never costs more per byte than the other core.
    #[test]
    fn the_model_predicts_the_same_core_cheaper_per_byte() {
        let caches = this_machine_caches().ok();
        let p = predict(&[16 << 10], caches, 2);
        let get = |m| p.iter().find(|x| x.mode == m).unwrap();
        assert!(get(Steering::IncomingCpu).ns_per_byte < get(Steering::OtherCpu).ns_per_byte, "{p:?}");
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn comparisons_set_each_path_beside_the_prediction_it_stands_for() {
        let run = |path, mode, throughput, cpu| Run {
            path,
            size: 16 << 10,
            mode,
            throughput,
            process_ns_per_byte: cpu,
            machine_ns_per_byte: cpu,
            conns: 2,
            placed_on_incoming: 0,
            on_incoming_at_end: 0,
            receiving_cores: vec![0, 1],
        };
        let mut runs = Vec::new();
        for path in [Path::VethRps, Path::Loopback] {
            runs.push(run(path, Steering::None, 4.0, 1.0));
            runs.push(run(path, Steering::IncomingCpu, 6.0, 0.5));
            runs.push(run(path, Steering::OtherCpu, 3.0, 2.0));
        }
        let predictions = predict(&[16 << 10], None, 2);
        let report =
            Report { runs, predictions, skipped: Vec::new(), machine: String::new(), perf_counters: false, cores: 2 };
        let c = report.comparisons();
        assert_eq!(c.iter().map(|c| c.path).collect::<Vec<_>>(), [Path::VethRps, Path::Loopback], "order run");
        assert_eq!((c[0].steer_over_none.measured, c[0].steer_over_other.measured), (1.5, 2.0));
        assert_eq!(c[0].cpu_steer_over_other.measured, 0.25);
        let p = |m| report.prediction(16 << 10, m).unwrap();
        // RPS puts receipt on one core: the one-stream figure; loopback: every core busy.
        let one = p(Steering::IncomingCpu).throughput / p(Steering::OtherCpu).throughput;
        let all = p(Steering::IncomingCpu).throughput_all_cores / p(Steering::OtherCpu).throughput_all_cores;
        assert_eq!((c[0].steer_over_other.predicted, c[1].steer_over_other.predicted), (one, all));
    }

    #[test]
    fn bad_setups_are_refused_with_the_reason() {
        let quiet = &crate::report::Quiet;
        let e = run(&Setup { sizes: vec![], ..Setup::default() }, quiet).unwrap_err().to_string();
        assert!(e.contains("message size"), "{e}");
        let e = run(&Setup { seconds: 0.0, ..Setup::default() }, quiet).unwrap_err().to_string();
        assert!(e.contains("--seconds"), "{e}");
    }
}
