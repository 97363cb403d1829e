//! `reproduce guo-interrupt-affinity`: Guo ch. 3's interrupt affinity (notes 002 §2.2, §5.2)
//! in the simulator's [`irq`](switchyard_sim::models::irq) model: iperf's receive throughput
//! and L2 misses per message over message sizes, for the default round-robin placement,
//! interrupt affinity (interrupt on one core, the application on its L2 sibling) and the prior
//! work's same-core placement, with each published claim beside ours.
//!
//! The VM variant (§3.3.3, +12%) is left out: its gain comes from virtual interrupts costing
//! more per message (Dom0's bridge and back-end, the grant copy, event channels, §2.7), and
//! ch. 3 gives none of those costs; a model of it would be a guess dressed as a result.

use switchyard_sim::models::irq::{IrqOutcome, IrqParams, Placement, simulate};

use crate::ExperimentError;
pub use crate::claim::Claim;
use crate::report::{Chart, ColumnSpec, Report, ReportSpec, Table, TableSpec};

/// The experiment's setup.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Message sizes in bytes (iperf's `-l`).
    pub sizes: Vec<u64>,
    /// Root seed (the default placement's draws).
    pub seed: u64,
    /// Messages per run against [`IrqParams::guo`]'s (1: about 16 MiB a run).
    pub scale: f64,
    /// Threads the independent runs are spread over (the result does not depend on it).
    pub threads: usize,
}

impl Setup {
    /// 64 B to 64 KiB in powers of two, full length.
    pub fn guo(seed: u64, threads: usize) -> Self {
        Self { sizes: (6..=16).map(|k| 1u64 << k).collect(), seed, scale: 1.0, threads }
    }
}

/// One run: a message size and a placement.
#[derive(Clone, Debug)]
pub struct Row {
    /// Message size in bytes.
    pub size: u64,
    /// Placement.
    pub placement: Placement,
    /// What it measured (the per-message costs dropped).
    pub outcome: IrqOutcome,
}

/// The runs and the claims.
#[derive(Clone, Debug)]
pub struct Reproduction {
    /// One row per size and placement, sizes ascending, placements in [`Placement::ALL`]'s order.
    pub rows: Vec<Row>,
    /// Every published claim of §5.2, ours beside it.
    pub claims: Vec<Claim>,
}

impl Reproduction {
    /// The row of `size` and `placement`.
    pub fn row(&self, size: u64, placement: Placement) -> Option<&Row> {
        self.rows.iter().find(|r| r.size == size && r.placement == placement)
    }

    /// `placement`'s throughput over round-robin's at `size`.
    pub fn gain(&self, size: u64, placement: Placement) -> Option<f64> {
        Some(self.row(size, placement)?.outcome.throughput / self.row(size, Placement::RoundRobin)?.outcome.throughput)
    }
}

// Written after running the model with its chosen costs (seed 1, 64 B to 64 KiB); nothing was
// changed to move them.
const WHY_AVERAGE: &str = "ours is far above: the gain peaks at 512 B–2 KB (+110–150%), where round-robin \
pays the socket's state moving between cores on every segment: its 2 KiB (chosen, not measured) written on \
each side, 32 dependent misses at memory's 127 ns each (the cache model has no cache-to-cache transfers), \
some 8 µs a message against affinity's L2 hits; at 64 B the state moves once per 22 messages (+31%) and \
above 4 KB the copies dominate (+19–34%). Our round-robin is also the harshest reading of the default: a \
new core every segment and a random core every 1 ms, where 2.6.18's irqbalance may move an interrupt far \
less often, so Guo's baseline likely shared its cache more than 1 in 4 times. The average also depends \
on which sizes are swept (Guo does not list his)";
const WHY_MAX: &str = "close, but not for the same reason: ours is largest at 8 KB and falls to +19–21% \
from 16 KB on, where the DMA'd bytes (cold in every placement: no direct cache placement on the \
Clovertown) and the copies' fixed cost dilute the slot's L2 hit; Guo's maximum is over sizes above 4 KB \
without saying which. The ratio comes from the cache model's penalties and the chosen copy cost and \
8 misses in flight, none fitted";
const WHY_L2: &str = "Guo gives no number, only the direction, which ours has: with affinity the only L2 \
misses are the DMA'd bytes (one line per 64 B), where round-robin also misses the socket-buffer slot on \
both sides and the socket's state whenever softirq and receive run on cores sharing no L2 (3 messages \
in 4)";
const WHY_SAME: &str = "the +20% is the cited work's [21], on other hardware, not Guo's measurement. Here \
one core wins over round-robin at small and middle sizes (nothing moves between cores) and gains \
nothing from 16 KB on, where doing both copies on one core costs as much as round-robin's misses on \
two overlapping cores; affinity beats it at every size by pipelining the two stages, which is Guo's \
case for separate cores sharing an L2";
const WHY_VM: &str = "left out: the VM's larger gain comes from virtual interrupts costing more per \
message (Dom0's bridge and back-end, the grant copy, event channels), and ch. 3 gives none of those \
costs to model it with";

/// Runs every size and placement, then compares with §5.2.
pub fn run(setup: &Setup) -> Result<Reproduction, ExperimentError> {
    if setup.sizes.is_empty() || setup.sizes.contains(&0) {
        return Err(ExperimentError::Input("message sizes must be positive and at least one".into()));
    }
    if !(setup.scale > 0.0 && setup.scale.is_finite()) {
        return Err(ExperimentError::Input(format!("scale {} must be a positive number", setup.scale)));
    }
    let cases: Vec<(u64, Placement, IrqParams)> = setup
        .sizes
        .iter()
        .flat_map(|&size| {
            Placement::ALL.into_iter().map(move |placement| {
                let base = IrqParams::guo(size, placement, setup.seed);
                let messages = ((base.messages as f64 * setup.scale) as u64).max(20);
                (size, placement, IrqParams { messages, warmup: messages / 10, ..base })
            })
        })
        .collect();
    // Independent, deterministic runs: spread over the threads, each in its place.
    let outcomes: Vec<IrqOutcome> = std::thread::scope(|s| {
        let chunks: Vec<_> = cases.chunks(cases.len().div_ceil(setup.threads.max(1))).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk.iter().map(|(_, _, p)| IrqOutcome { messages: Vec::new(), ..simulate(p) }).collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a simulator run panicked")).collect()
    });
    let rows: Vec<Row> = cases
        .into_iter()
        .zip(outcomes)
        .map(|((size, placement, _), outcome)| Row { size, placement, outcome })
        .collect();
    let mut repro = Reproduction { rows, claims: Vec::new() };
    let gains = |p: Placement, above: u64| -> Vec<f64> {
        setup.sizes.iter().filter(|&&s| s > above).filter_map(|&s| repro.gain(s, p)).collect()
    };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let average = mean(&gains(Placement::Affinity, 0));
    let maximum = gains(Placement::Affinity, 4096).into_iter().reduce(f64::max);
    let same = mean(&gains(Placement::SameCore, 0));
    let l2: Vec<f64> = setup
        .sizes
        .iter()
        .filter_map(|&s| {
            let rr = repro.row(s, Placement::RoundRobin)?.outcome.l2_per_message;
            (rr > 0.0).then(|| repro.row(s, Placement::Affinity).map(|a| a.outcome.l2_per_message / rr))?
        })
        .collect();
    repro.claims = vec![
        Claim {
            claim: "iperf throughput, affinity over round-robin, average over message sizes (native)",
            source: "Guo 2010 ch. 3 (notes 002 §5.2)",
            published: Some(1.10),
            published_text: "+10%",
            ours: average,
            why: WHY_AVERAGE,
            gain: true,
        },
        Claim {
            claim: "iperf throughput, affinity over round-robin, maximum for messages above 4 KB",
            source: "Guo 2010 ch. 3 (notes 002 §5.2)",
            published: Some(1.37),
            published_text: "+37%",
            ours: maximum,
            why: WHY_MAX,
            gain: true,
        },
        Claim {
            claim: "L2 misses per message, affinity over round-robin, average over sizes",
            source: "Guo 2010 ch. 3 (notes 002 §5.2)",
            published: None,
            published_text: "\"significantly reduced\" (no number)",
            ours: mean(&l2),
            why: WHY_L2,
            gain: true,
        },
        Claim {
            claim: "same core over round-robin, average over sizes (prior work [21], cited by Guo)",
            source: "Guo 2010 ch. 3, citing [21] (notes 002 §5.2)",
            published: Some(1.20),
            published_text: "+20%",
            ours: same,
            why: WHY_SAME,
            gain: true,
        },
        Claim {
            claim: "iperf throughput, affinity over round-robin, average (VM, Xen)",
            source: "Guo 2010 ch. 3 §3.3.3 (notes 002 §2.2, §5.2)",
            published: Some(1.12),
            published_text: "+12%",
            ours: None,
            why: WHY_VM,
            gain: true,
        },
    ];
    Ok(repro)
}

/// The report's one table: a row per message size and placement.
pub const RESULTS: TableSpec = TableSpec::new(
    "results",
    "iperf's TCP receive by message size and placement",
    &[
        ColumnSpec::int("message").unit("B").about("iperf's message size (-l)"),
        ColumnSpec::text("placement"),
        ColumnSpec::num("throughput", 0).header("throughput").unit("Mbit/s"),
        ColumnSpec::num("gain", 1).gain().header("vs rr").about("throughput over round-robin's at the same size"),
        ColumnSpec::num("l2_misses", 1).header("L2 miss/msg").about("L2 misses per message"),
        ColumnSpec::num("cpu", 2).header("cpu").unit("µs/msg").about("CPU time per message"),
        ColumnSpec::num("shared_l2", 0)
            .percent()
            .header("shared L2")
            .about("share of the time both stages ran on cores sharing an L2"),
    ],
);

/// What `reproduce guo-interrupt-affinity` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "guo-interrupt-affinity",
    title: "Guo ch. 3 in the simulator: iperf's receive on a Xeon E5335 (L2 shared by core pairs), interrupts round-robin against interrupt affinity and one core",
    tables: &[&RESULTS],
};

impl Reproduction {
    /// The reproduction as a report: the table of runs and the claims.
    pub fn report(&self, setup: &Setup) -> Report {
        let mut r = Report::new(&SPEC);
        r.param("seed", setup.seed, "the root seed")
            .param("scale", setup.scale, "messages per run against the default")
            .note("round-robin: interrupts spread over the cores and the application moved every 1 ms; affinity: the interrupt on core 0, the application on its L2 sibling; same core: both on core 0");
        let mut t = Table::new(&RESULTS).grouped_by("message");
        for row in &self.rows {
            let o = &row.outcome;
            t.push(vec![
                row.size.into(),
                row.placement.name().into(),
                (o.throughput * 8e-6).into(),
                self.gain(row.size, row.placement).into(),
                o.l2_per_message.into(),
                (o.cpu_ns_per_message * 1e-3).into(),
                o.shared_l2.into(),
            ]);
        }
        r.tables.push(t);
        r.charts.push(
            Chart::new("throughput", "Receive throughput by message size", "results", "message", &["throughput"])
                .by("placement")
                .labels("message size (bytes)", "throughput (Mbit/s)")
                .log(true, false),
        );
        r.charts.push(
            Chart::new("l2-misses", "L2 misses per message", "results", "message", &["l2_misses"])
                .by("placement")
                .labels("message size (bytes)", "L2 misses per message")
                .log(true, true),
        );
        r.claims = self.claims.iter().map(Into::into).collect();
        r
    }
}
