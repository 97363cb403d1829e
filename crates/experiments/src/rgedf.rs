//! G-EDF and RG-EDF against FIFO and EDF on the thesis's sensor node (Dou 2011 ch. 2, Figs.
//! 2.6–2.9; notes 003 §4.1, §5.1), in the simulator's flash model, with the node's 8051 charged
//! for its scheduling and again with a present-day core.
//!
//! The sweeps:
//! - **all**: the injection period of all three processes (Figs. 2.6, 2.8);
//! - **one**: the period of the first process only, the others at 40 ms (Fig. 2.7);
//! - **size**: the record size, all three processes at 20 ms (Fig. 2.9; the thesis does not say
//!   at which period, and 40 ms loads the card too little for grouping to matter).
//!
//! Each with and without dropping predicted misses, bursty and steady. Memory holds 1.5 KB of
//! records (three blocks, §2.1), so the scheduler's capacity is `1536 / size` records. The thesis
//! averaged 10 runs of 10 s; so do we, each run with its own seed for the card's write times.

use switchyard_core::Nanos;
use switchyard_core::order::blocks::{BlockConfig, BlockPolicy};
use switchyard_sim::models::flash::{CpuCost, Flash, FlashOutcome, FlashParams, Process};

use crate::ExperimentError;
use crate::report::{self, Chart, ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec, Value};

/// A sweep of Figs. 2.6–2.9.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sweep {
    /// The period of all three processes, ms.
    All,
    /// The period of the first process, ms; the others at 40 ms.
    One,
    /// The record size, bytes; all three at 20 ms.
    Size,
}

impl Sweep {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::One => "one",
            Self::Size => "size",
        }
    }

    /// Its points.
    pub fn xs(self) -> &'static [u64] {
        match self {
            Self::All => &[80, 60, 40, 35, 30, 25, 20, 15, 10],
            Self::One => &[80, 40, 30, 20, 15, 10, 5],
            Self::Size => &[32, 64, 128, 192, 256, 320, 384, 512],
        }
    }

    /// What its x is.
    pub fn axis(self) -> &'static str {
        match self {
            Self::All => "period of all three, ms",
            Self::One => "period of the first, ms",
            Self::Size => "record size, bytes",
        }
    }
}

/// Which CPU is charged for the scheduling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cpu {
    /// The thesis's 8051 with the thesis's structures ([`CpuCost::cc1010`]).
    Cc1010,
    /// A present-day core with the core's structures ([`CpuCost::modern`]).
    Modern,
}

impl Cpu {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cc1010 => "8051",
            Self::Modern => "modern",
        }
    }

    fn cost(self) -> CpuCost {
        match self {
            Self::Cc1010 => CpuCost::cc1010(),
            Self::Modern => CpuCost::modern(),
        }
    }
}

/// One configuration of the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// The sweep.
    pub sweep: Sweep,
    /// Its x.
    pub x: u64,
    /// Predicted misses dropped.
    pub drop: bool,
    /// The first process bursts.
    pub bursty: bool,
    /// The CPU charged.
    pub cpu: Cpu,
}

/// The four schedulers of the thesis.
pub const POLICIES: [BlockPolicy; 4] = [BlockPolicy::Fifo, BlockPolicy::Edf, BlockPolicy::GEdf, BlockPolicy::RgEdf];

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The sweeps.
    pub sweeps: Vec<Sweep>,
    /// The CPUs.
    pub cpus: Vec<Cpu>,
    /// Runs per point and policy (the thesis: 10).
    pub runs: u64,
    /// The first seed.
    pub seed: u64,
    /// Each run's length (the thesis: 10 s).
    pub duration: Nanos,
    /// Threads the runs are spread over.
    pub threads: usize,
}

impl Setup {
    /// Everything, as the thesis ran it.
    pub fn thesis(threads: usize) -> Self {
        Self {
            sweeps: vec![Sweep::All, Sweep::One, Sweep::Size],
            cpus: vec![Cpu::Cc1010, Cpu::Modern],
            runs: 10,
            seed: 1,
            duration: Nanos::from_millis(10_000),
            threads,
        }
    }

    /// Every point to run, in order.
    pub fn points(&self) -> Vec<Point> {
        let mut points = Vec::new();
        for &cpu in &self.cpus {
            for &sweep in &self.sweeps {
                for &x in sweep.xs() {
                    for (drop, bursty) in [(false, false), (true, false), (false, true), (true, true)] {
                        points.push(Point { sweep, x, drop, bursty, cpu });
                    }
                }
            }
        }
        points
    }
}

/// One point and policy, averaged over the runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// The point.
    pub point: Point,
    /// The policy.
    pub policy: BlockPolicy,
    /// Records on the card by their deadlines, per second.
    pub throughput: f64,
    /// Mean time from injection to durable, ms, over records written.
    pub end_to_end_ms: f64,
    /// Share of records out of the node that missed or were dropped.
    pub missed: f64,
    /// Injections refused (memory full), per run.
    pub refused: f64,
    /// Records dropped as predicted misses, per run.
    pub dropped: f64,
    /// Blocks RG-EDF reordered, per run.
    pub reordered: f64,
    /// Blocks written, per run.
    pub blocks: f64,
    /// Bytes written over bytes of records.
    pub amplification: f64,
    /// Share of the time the CPU spent scheduling.
    pub cpu_share: f64,
}

/// The node's parameters at a point.
pub fn params(point: Point, policy: BlockPolicy, seed: u64, duration: Nanos) -> FlashParams {
    let ms = Nanos::from_millis;
    let base = Process::default();
    let processes = match point.sweep {
        Sweep::All => vec![Process { period: ms(point.x), ..base }; 3],
        Sweep::One => vec![Process { period: ms(point.x), ..base }, base, base],
        Sweep::Size => vec![Process { period: ms(20), size: point.x as u32, ..base }; 3],
    };
    let size = processes.iter().map(|p| p.size).max().unwrap_or(64);
    let block = BlockConfig {
        drop_predicted_misses: point.drop,
        capacity: (1536 / size as usize).max(1),
        ..BlockConfig::default()
    };
    FlashParams {
        policy,
        block,
        processes,
        bursty: point.bursty,
        cpu: point.cpu.cost(),
        duration,
        seed,
        ..FlashParams::thesis(policy)
    }
}

/// Runs every point, advancing `progress` by one a run.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Vec<Row>, ExperimentError> {
    let points = s.points();
    if s.runs == 0 || points.is_empty() {
        return Err(ExperimentError::Input("nothing to run: give at least one sweep, CPU and run".into()));
    }
    progress.stage("dou-rgedf runs", (points.len() * POLICIES.len()) as u64 * s.runs);
    let simulate =
        |p: usize, k: usize, run: u64| Flash::simulate(&params(points[p], POLICIES[k], s.seed + run, s.duration));
    let outcomes: Vec<FlashOutcome> =
        crate::sweep::sweep(points.len(), POLICIES.len(), s.runs, s.threads, &simulate, &|_| progress.advance(1))?;
    let n = s.runs as f64;
    let mut rows = Vec::new();
    for (i, &point) in points.iter().enumerate() {
        for (k, &policy) in POLICIES.iter().enumerate() {
            let at = (i * POLICIES.len() + k) * s.runs as usize;
            let os = &outcomes[at..at + s.runs as usize];
            let mean = |f: &dyn Fn(&FlashOutcome) -> f64| os.iter().map(f).sum::<f64>() / n;
            let block = params(point, policy, 0, s.duration).block.block_size;
            rows.push(Row {
                point,
                policy,
                throughput: mean(&|o| o.throughput()),
                end_to_end_ms: mean(&|o| o.mean_end_to_end * 1e3),
                missed: mean(&|o| o.miss_share()),
                refused: mean(&|o| o.refused as f64),
                dropped: mean(&|o| o.dropped as f64),
                reordered: mean(&|o| o.reordered as f64),
                blocks: mean(&|o| o.blocks as f64),
                amplification: mean(&|o| o.amplification(block)),
                cpu_share: mean(&|o| o.cpu_share),
            });
        }
    }
    Ok(rows)
}

/// A published figure beside ours.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    /// Which figure.
    pub figure: &'static str,
    /// What the thesis says.
    pub published: &'static str,
    /// What we measured.
    pub ours: String,
    /// Whether ours shows the same.
    pub holds: Option<bool>,
}

/// How often one policy's throughput is below, within 1% of, and above another's, over the
/// points both ran.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Versus {
    /// Points where the other's is more than 1% higher.
    pub below: usize,
    /// Points within 1% either way.
    pub tie: usize,
    /// Points where this one's is more than 1% higher.
    pub above: usize,
}

/// `a` against `b` at every point `keep` accepts.
pub fn versus(rows: &[Row], a: BlockPolicy, b: BlockPolicy, keep: impl Fn(&Point) -> bool) -> Versus {
    let mut v = Versus::default();
    for ra in rows.iter().filter(|r| r.policy == a && keep(&r.point)) {
        let Some(rb) = find(rows, ra.point, b) else { continue };
        if rb.throughput > ra.throughput * 1.01 {
            v.below += 1;
        } else if ra.throughput > rb.throughput * 1.01 {
            v.above += 1;
        } else {
            v.tie += 1;
        }
    }
    v
}

/// The policies at `point`, best throughput first, in tiers: a policy within 1% of the one
/// before it shares its tier (names sorted within one).
pub fn tiers(rows: &[Row], point: Point) -> Vec<Vec<&'static str>> {
    let mut rs: Vec<&Row> = rows.iter().filter(|r| r.point == point).collect();
    rs.sort_by(|a, b| b.throughput.total_cmp(&a.throughput).then(a.policy.name().cmp(b.policy.name())));
    let mut tiers: Vec<Vec<&'static str>> = Vec::new();
    let mut last = f64::INFINITY;
    for r in rs {
        match tiers.last_mut() {
            Some(t) if r.throughput >= last * 0.99 => t.push(r.policy.name()),
            _ => tiers.push(vec![r.policy.name()]),
        }
        last = r.throughput;
    }
    tiers.iter_mut().for_each(|t| t.sort_unstable());
    tiers
}

/// A configuration whose tiers differ between the 8051 and a modern core.
#[derive(Clone, Debug, PartialEq)]
pub struct Shift {
    /// The configuration (its `cpu` is the 8051's).
    pub point: Point,
    /// The tiers on the 8051.
    pub cc1010: Vec<Vec<&'static str>>,
    /// The tiers on a modern core.
    pub modern: Vec<Vec<&'static str>>,
}

/// Every configuration run on both CPUs whose tiers differ, and how many are the same.
pub fn shifts(rows: &[Row]) -> (Vec<Shift>, usize) {
    let (mut shifts, mut same) = (Vec::new(), 0);
    let mut points: Vec<Point> = rows.iter().map(|r| r.point).filter(|p| p.cpu == Cpu::Cc1010).collect();
    // A point's policies are neighbours in the rows.
    points.dedup();
    for point in points {
        let (cc1010, modern) = (tiers(rows, point), tiers(rows, Point { cpu: Cpu::Modern, ..point }));
        if modern.is_empty() {
            continue;
        }
        if cc1010 == modern {
            same += 1;
        } else {
            shifts.push(Shift { point, cc1010, modern });
        }
    }
    (shifts, same)
}

fn find(rows: &[Row], point: Point, policy: BlockPolicy) -> Option<&Row> {
    rows.iter().find(|r| r.point == point && r.policy == policy)
}

/// The better of G-EDF and RG-EDF at a point.
fn grouped(rows: &[Row], point: Point) -> Option<&Row> {
    let (g, r) = (find(rows, point, BlockPolicy::GEdf)?, find(rows, point, BlockPolicy::RgEdf)?);
    Some(if r.throughput > g.throughput { r } else { g })
}

/// The thesis's claims (notes 003 §5.1), each beside what `rows` show for `cpu`.
pub fn claims(rows: &[Row], cpu: Cpu) -> Vec<Claim> {
    let mut claims = Vec::new();
    let at = |sweep, x, drop, bursty| Point { sweep, x, drop, bursty, cpu };
    let pts = |sweep: Sweep, drop, bursty| sweep.xs().iter().map(move |&x| at(sweep, x, drop, bursty));
    // Peak throughput over a sweep, as Fig. 2.8a compares it: each policy's best point.
    let peak = |sweep: Sweep, drop, bursty, policy| {
        pts(sweep, drop, bursty)
            .filter_map(|p| find(rows, p, policy))
            .max_by(|a, b| a.throughput.total_cmp(&b.throughput))
    };
    let mut gains: Vec<(f64, &Row, &Row)> = Vec::new();
    for sweep in [Sweep::All, Sweep::One, Sweep::Size] {
        for (drop, bursty) in [(false, false), (true, false), (false, true), (true, true)] {
            let f = peak(sweep, drop, bursty, BlockPolicy::Fifo);
            let g = [BlockPolicy::GEdf, BlockPolicy::RgEdf]
                .into_iter()
                .filter_map(|p| peak(sweep, drop, bursty, p))
                .max_by(|a, b| a.throughput.total_cmp(&b.throughput));
            if let (Some(f), Some(g)) = (f, g) {
                gains.push((g.throughput / f.throughput.max(1e-9), f, g));
            }
        }
    }
    let describe =
        |r: &Row| format!("{} {:.1}/s at {} = {}", r.policy.name(), r.throughput, r.point.sweep.name(), r.point.x);
    if let Some(&(gain, f, g)) = gains.iter().max_by(|a, b| a.0.total_cmp(&b.0)) {
        let fig = gains.iter().find(|(_, f, _)| f.point.sweep == Sweep::All && f.point.drop && !f.point.bursty);
        claims.push(Claim {
            figure: "§2.5, Fig. 2.8a",
            published: "peak throughput up to 225% better than FIFO's (3.25×; read as \"225% of\", 2.25×)",
            ours: format!(
                "up to {:+.0}% ({gain:.2}×), {} against FIFO's {} ({}{}){}",
                (gain - 1.0) * 100.0,
                describe(g),
                describe(f),
                if f.point.drop { "dropping" } else { "not dropping" },
                if f.point.bursty { ", bursty" } else { "" },
                fig.map_or(String::new(), |(x, f, g)| format!(
                    "; Fig. 2.8a's setting (all three, dropping, steady): {:+.0}% ({x:.2}×), {} against {}",
                    (x - 1.0) * 100.0,
                    describe(g),
                    describe(f)
                ))
            ),
            // Fig. 2.8a's setting against the published figure's two readings, a sixth either way.
            holds: fig.map(|(x, _, _)| (2.25 / 1.2..=3.25 * 1.2).contains(x)),
        });
    }
    // End-to-end time past FIFO's peak (all three, dropping, steady).
    if let Some(fp) = peak(Sweep::All, true, false, BlockPolicy::Fifo) {
        let ratios: Vec<f64> = pts(Sweep::All, true, false)
            .filter(|p| p.x < fp.point.x)
            .filter_map(|p| {
                let (f, g) = (find(rows, p, BlockPolicy::Fifo)?, grouped(rows, p)?);
                Some(f.end_to_end_ms / g.end_to_end_ms.max(1e-9))
            })
            .collect();
        if let (Some(lo), Some(hi)) = (ratios.iter().copied().reduce(f64::min), ratios.iter().copied().reduce(f64::max))
        {
            claims.push(Claim {
                figure: "§2.5, Fig. 2.8b",
                published: "end-to-end time about half of FIFO's (\"twice as good\")",
                ours: format!(
                    "all three, dropping, steady, at periods past FIFO's peak ({} ms): FIFO's end-to-end time {lo:.1}–{hi:.1}× the better grouping policy's",
                    fp.point.x
                ),
                holds: Some(lo >= 1.8),
            });
        } else {
            claims.push(Claim {
                figure: "§2.5, Fig. 2.8b",
                published: "end-to-end time about half of FIFO's (\"twice as good\")",
                ours: format!("no period past FIFO's peak ({} ms) to compare at", fp.point.x),
                holds: None,
            });
        }
    }
    // EDF below FIFO where their order is the same: every point of the all-three sweep.
    for drop in [false, true] {
        let pairs: Vec<(f64, f64)> = pts(Sweep::All, drop, false)
            .filter_map(|p| {
                Some((find(rows, p, BlockPolicy::Fifo)?.throughput, find(rows, p, BlockPolicy::Edf)?.throughput))
            })
            .collect();
        let below = pairs.iter().filter(|(f, e)| e < f).count();
        let above = pairs.iter().filter(|(f, e)| e > f).count();
        claims.push(Claim {
            figure: "Fig. 2.6",
            published: "all three swept: EDF orders as FIFO does but does worse (heap overhead)",
            ours: format!(
                "{}: EDF below FIFO at {below} of {} periods, above at {above}",
                if drop { "dropping" } else { "not dropping" },
                pairs.len()
            ),
            holds: Some(below > above),
        });
    }
    // G-EDF above RG-EDF in the all-three sweep.
    let v = versus(rows, BlockPolicy::GEdf, BlockPolicy::RgEdf, |p| p.cpu == cpu && p.sweep == Sweep::All);
    claims.push(Claim {
        figure: "Fig. 2.6",
        published: "all three swept: G-EDF beats RG-EDF (few chances to reorder; its logic is overhead)",
        ours: format!(
            "G-EDF ahead by over 1% at {} of {} points, RG-EDF at {}, within 1% at the rest",
            v.above,
            v.above + v.below + v.tie,
            v.below
        ),
        holds: Some(v.above > v.below),
    });
    // FIFO and EDF collapse without dropping, recover with it.
    let heavy = |drop| at(Sweep::All, 20, drop, false);
    if let (Some(n), Some(d), Some(en), Some(ed)) = (
        find(rows, heavy(false), BlockPolicy::Fifo),
        find(rows, heavy(true), BlockPolicy::Fifo),
        find(rows, heavy(false), BlockPolicy::Edf),
        find(rows, heavy(true), BlockPolicy::Edf),
    ) {
        claims.push(Claim {
            figure: "Fig. 2.6",
            published: "without dropping predicted misses FIFO and EDF collapse (misses cascade); with dropping they do much better",
            ours: format!(
                "at 20 ms: FIFO {:.1}/s on time without dropping, {:.1}/s with; EDF {:.1}/s and {:.1}/s",
                n.throughput, d.throughput, en.throughput, ed.throughput
            ),
            holds: Some(d.throughput > 2.0 * n.throughput && ed.throughput > 2.0 * en.throughput),
        });
    }
    // G-EDF and RG-EDF's losses are saturation, not predicted misses.
    let (mut refused, mut dropped) = (0.0, 0.0);
    for p in pts(Sweep::All, true, false) {
        for policy in [BlockPolicy::GEdf, BlockPolicy::RgEdf] {
            if let Some(r) = find(rows, p, policy) {
                refused += r.refused;
                dropped += r.dropped;
            }
        }
    }
    claims.push(Claim {
        figure: "Fig. 2.8c",
        published: "G-EDF's and RG-EDF's drops are mostly scheduler saturation, not deadline misses",
        ours: format!(
            "dropping, all three swept: {refused:.0} refused for want of memory, {dropped:.0} dropped as predicted misses (per run, summed over periods)"
        ),
        holds: Some(refused > dropped),
    });
    // FIFO's throughput flat past saturation.
    let fifo: Vec<f64> = pts(Sweep::All, true, false)
        .filter(|p| p.x <= 30)
        .filter_map(|p| Some(find(rows, p, BlockPolicy::Fifo)?.throughput))
        .collect();
    if let (Some(lo), Some(hi)) = (fifo.iter().copied().reduce(f64::min), fifo.iter().copied().reduce(f64::max)) {
        claims.push(Claim {
            figure: "Fig. 2.8a",
            published: "FIFO's throughput is flat: a constant number written whatever the load",
            ours: format!("dropping, periods 30 ms and below: FIFO {lo:.1}–{hi:.1}/s on time"),
            holds: Some(hi <= lo * 1.25),
        });
    }
    // One process swept: RG-EDF reorders more as that process speeds up, and stays below G-EDF.
    let one: Vec<(u64, f64, f64, f64)> = pts(Sweep::One, false, false)
        .filter_map(|p| {
            let (g, r) = (find(rows, p, BlockPolicy::GEdf)?, find(rows, p, BlockPolicy::RgEdf)?);
            Some((p.x, r.reordered / r.blocks.max(1.0), r.throughput, g.throughput))
        })
        .collect();
    if let (Some(slow), Some(fast)) = (one.first(), one.last()) {
        claims.push(Claim {
            figure: "Fig. 2.7",
            published: "one process swept: RG-EDF finds more chances to reorder as that process's rate rises, but does not fully recover its overhead",
            ours: format!(
                "RG-EDF reordered {:.1}% of its blocks at {} ms, {:.1}% at {} ms; RG-EDF/G-EDF throughput {:.3} and {:.3}",
                slow.1 * 100.0,
                slow.0,
                fast.1 * 100.0,
                fast.0,
                slow.2 / slow.3.max(1e-9),
                fast.2 / fast.3.max(1e-9)
            ),
            holds: Some(fast.1 > slow.1 && fast.2 < fast.3 * 0.99),
        });
    }
    // The cliff past 256 bytes.
    let size = |x, policy| find(rows, at(Sweep::Size, x, true, false), policy).map(|r| r.throughput);
    if let (Some(g256), Some(g320), Some(e320)) =
        (size(256, BlockPolicy::GEdf), size(320, BlockPolicy::GEdf), size(320, BlockPolicy::Edf))
    {
        claims.push(Claim {
            figure: "Fig. 2.9",
            published: "past 256-byte records grouping drops sharply (no two fit a block) and does worse than EDF",
            ours: format!(
                "dropping, 20 ms: G-EDF {g256:.1}/s at 256 B, {g320:.1}/s at 320 B; EDF {e320:.1}/s at 320 B"
            ),
            holds: Some(g320 < 0.75 * g256 && g320 < 0.99 * e320),
        });
    }
    claims
}

/// Why ours may differ from the thesis's figures, printed under them.
pub const WHY: &str = "\
Why ours may differ: the thesis's plots did not survive extraction (notes 003), so only its prose's numbers \
and shapes are compared. The 8051's cost per scheduling step is our estimate from the chip's clock (the \
thesis gives none), and the shapes that depend on it (EDF below FIFO, G-EDF above RG-EDF) move with it; \
the card's write times are drawn uniformly from the thesis's ranges. RG-EDF's slack condition is the \
corrected one (absolute deadline, room for two writes, and for the card's 140 ms when a new sector is \
coming); as printed it never reorders. Where ours drops more predicted misses than it refuses (Fig. 2.8c), the \
drops gather at the card's first writes into new sectors: 60–140 ms, longer than the 70 ms deadline, so every \
record waiting through one is lost; the thesis does not say how often its card paid that penalty. The size \
sweep's period (20 ms) is our choice.";

/// The four variants of each sweep, in the order the thesis's figures take them: (drop, bursty).
const VARIANTS: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

/// A variant's name in reports.
fn setting(drop: bool, bursty: bool) -> &'static str {
    match (drop, bursty) {
        (false, false) => "steady",
        (true, false) => "drop",
        (false, true) => "bursty",
        (true, true) => "drop bursty",
    }
}

/// The columns that say where a row of [`SWEEPS`] or [`LOSSES`] was run.
macro_rules! point_columns {
    ($($rest:expr),* $(,)?) => {
        &[
            ColumnSpec::text("cpu").about("the CPU charged for the scheduling: the thesis's 8051 or a present-day core"),
            ColumnSpec::text("sweep").about("all: the period of all three processes; one: of the first; size: the record size"),
            ColumnSpec::text("setting").about("drop: predicted misses dropped; bursty: the first process bursts; steady: neither"),
            ColumnSpec::int("x").about("the swept value: a period in ms, or a record size in bytes"),
            $($rest),*
        ]
    };
}

/// Each point's throughput, end-to-end time and misses by policy: Figs. 2.6–2.9's measures.
pub const SWEEPS: TableSpec = TableSpec::new(
    "sweeps",
    "Records on time per second, end-to-end time and misses by policy",
    point_columns![
        ColumnSpec::num("fifo_per_s", 1)
            .header("fifo /s")
            .about("FIFO: records on the card by their deadlines, per second"),
        ColumnSpec::num("fifo_e2e", 0).header("e2e").unit("ms").about("FIFO: mean time from injection to durable"),
        ColumnSpec::num("fifo_missed", 0)
            .percent()
            .header("miss")
            .about("FIFO: share of records out of the node that missed or were dropped"),
        ColumnSpec::num("edf_per_s", 1).header("edf /s").about("EDF: records on time per second"),
        ColumnSpec::num("edf_e2e", 0).header("e2e").unit("ms").about("EDF: mean end-to-end time"),
        ColumnSpec::num("edf_missed", 0).percent().header("miss").about("EDF: share missed or dropped"),
        ColumnSpec::num("g_edf_per_s", 1).header("g-edf /s").about("G-EDF: records on time per second"),
        ColumnSpec::num("g_edf_e2e", 0).header("e2e").unit("ms").about("G-EDF: mean end-to-end time"),
        ColumnSpec::num("g_edf_missed", 0).percent().header("miss").about("G-EDF: share missed or dropped"),
        ColumnSpec::num("rg_edf_per_s", 1).header("rg-edf /s").about("RG-EDF: records on time per second"),
        ColumnSpec::num("rg_edf_e2e", 0).header("e2e").unit("ms").about("RG-EDF: mean end-to-end time"),
        ColumnSpec::num("rg_edf_missed", 0).percent().header("miss").about("RG-EDF: share missed or dropped"),
    ],
);

/// Where each point's records went besides the card (Fig. 2.8c), RG-EDF's reordering (Fig. 2.7)
/// and what the scheduling cost.
pub const LOSSES: TableSpec = TableSpec::new(
    "losses",
    "Records refused for want of memory and dropped as predicted misses (per run), RG-EDF's reordered blocks, the CPU's share spent scheduling",
    point_columns![
        ColumnSpec::num("fifo_refused", 0)
            .header("fifo refused")
            .about("FIFO: injections refused, memory full, per run"),
        ColumnSpec::num("fifo_dropped", 0)
            .header("dropped")
            .about("FIFO: records dropped as predicted misses, per run"),
        ColumnSpec::num("edf_refused", 0).header("edf refused").about("EDF: injections refused per run"),
        ColumnSpec::num("edf_dropped", 0).header("dropped").about("EDF: predicted misses dropped per run"),
        ColumnSpec::num("g_edf_refused", 0).header("g-edf refused").about("G-EDF: injections refused per run"),
        ColumnSpec::num("g_edf_dropped", 0).header("dropped").about("G-EDF: predicted misses dropped per run"),
        ColumnSpec::num("rg_edf_refused", 0).header("rg-edf refused").about("RG-EDF: injections refused per run"),
        ColumnSpec::num("rg_edf_dropped", 0).header("dropped").about("RG-EDF: predicted misses dropped per run"),
        ColumnSpec::num("rg_edf_reordered", 1)
            .percent()
            .header("reordered")
            .about("RG-EDF: share of its blocks written out of deadline order"),
        ColumnSpec::num("edf_cpu", 1)
            .percent()
            .header("edf cpu")
            .about("EDF: share of the time the CPU spent scheduling"),
        ColumnSpec::num("rg_edf_cpu", 1)
            .percent()
            .header("rg-edf cpu")
            .about("RG-EDF: share of the time the CPU spent scheduling"),
    ],
);

/// The columns of a figure table: records on time by policy against x, for both CPUs.
const FIGURE_COLUMNS: &[ColumnSpec] = &[
    ColumnSpec::text("cpu").about("the CPU charged for the scheduling"),
    ColumnSpec::int("x").about("the swept value: a period in ms, or a record size in bytes"),
    ColumnSpec::num("fifo", 1).unit("/s").about("FIFO: records on time per second"),
    ColumnSpec::num("edf", 1).unit("/s").about("EDF: records on time per second"),
    ColumnSpec::num("g_edf", 1).header("g-edf").unit("/s").about("G-EDF: records on time per second"),
    ColumnSpec::num("rg_edf", 1).header("rg-edf").unit("/s").about("RG-EDF: records on time per second"),
];

/// Fig. 2.8a's setting (dropping predicted misses, steady) with all three processes swept; a
/// figure table is given when its sweep ran.
pub const FIGURE_ALL: TableSpec = TableSpec::new(
    "figure_all",
    "Records on time per second, all three swept, dropping, steady (Fig. 2.8a)",
    FIGURE_COLUMNS,
)
.optional();
/// The same with the first process swept (Fig. 2.7).
pub const FIGURE_ONE: TableSpec = TableSpec::new(
    "figure_one",
    "Records on time per second, the first swept, dropping, steady (Fig. 2.7)",
    FIGURE_COLUMNS,
)
.optional();
/// The same with the record size swept (Fig. 2.9).
pub const FIGURE_SIZE: TableSpec = TableSpec::new(
    "figure_size",
    "Records on time per second, record size swept, dropping, steady (Fig. 2.9)",
    FIGURE_COLUMNS,
)
.optional();

/// The configurations whose ranking by throughput differs between the two CPUs.
pub const RANKING: TableSpec = TableSpec::new(
    "ranking",
    "How the ranking changes on a modern core (throughput, best first; within 1% a tie)",
    &[
        ColumnSpec::text("sweep"),
        ColumnSpec::int("x").about("the swept value"),
        ColumnSpec::text("setting").about("drop: predicted misses dropped; bursty: the first process bursts"),
        ColumnSpec::text("on_8051").header("8051").about("the policies best first, `=` joining those within 1%"),
        ColumnSpec::text("on_modern").header("modern").about("the same on a present-day core"),
    ],
);

/// The two pairs whose order the 8051's costs decided in the thesis, counted over the points.
pub const VERSUS: TableSpec = TableSpec::new(
    "versus",
    "The pairs whose order the 8051's costs decided: points where the first is below, within 1% of, above the second",
    &[
        ColumnSpec::text("policy"),
        ColumnSpec::text("against"),
        ColumnSpec::text("cpu"),
        ColumnSpec::int("below").about("points where `against` is more than 1% ahead"),
        ColumnSpec::int("tie").header("within 1%").about("points within 1% either way"),
        ColumnSpec::int("above").about("points where `policy` is more than 1% ahead"),
    ],
);

/// What `reproduce dou-rgedf` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "dou-rgedf",
    title: "Dou ch. 2 in the simulator: G-EDF and RG-EDF against FIFO and EDF writing records to an SD card on a CC1010 sensor node (Figs. 2.6–2.9), the scheduling charged to its 8051 and to a present-day core",
    tables: &[&SWEEPS, &LOSSES, &FIGURE_ALL, &FIGURE_ONE, &FIGURE_SIZE, &RANKING, &VERSUS],
};

/// The run's rows as a report: the sweeps, the losses, the figures' settings, how the ranking
/// moves on a modern core, and the thesis's claims beside ours for each CPU.
pub fn report(setup: &Setup, rows: &[Row]) -> Report {
    let mut r = Report::new(&SPEC);
    r.param("runs", setup.runs, "runs per point and policy, seeds seed, seed + 1, …")
        .param("seed", setup.seed, "the first seed")
        .param("run_seconds", setup.duration.0 as f64 * 1e-9, "each run's simulated length, s")
        .note("The node: three processes (64-byte records every 40 ms, due 70 ms after injection, unless swept), an SD card of 512-byte blocks (9–13 ms a write, 60–140 ms more into a new 256-block sector), 1.5 KB of memory for records.")
        .note("8051: ≈100 µs a heap step and 80 µs a request, the thesis's array heap; modern: 20 ns a step, per-stream queues.")
        .note(WHY);
    let cpus: Vec<Cpu> = [Cpu::Cc1010, Cpu::Modern].into_iter().filter(|c| setup.cpus.contains(c)).collect();
    let sweeps: Vec<Sweep> =
        [Sweep::All, Sweep::One, Sweep::Size].into_iter().filter(|s| setup.sweeps.contains(s)).collect();
    let mut main = Table::new(&SWEEPS).grouped_by("setting");
    main.note("/s: records on the card by their deadlines, per second; e2e: mean time from injection to durable; miss: share of records out of the node that missed or were dropped.");
    let mut losses = Table::new(&LOSSES).grouped_by("setting");
    for &cpu in &cpus {
        for &sweep in &sweeps {
            for (drop, bursty) in VARIANTS {
                for &x in sweep.xs() {
                    let point = Point { sweep, x, drop, bursty, cpu };
                    let at = |p| find(rows, point, p);
                    let head: [Value; 4] =
                        [cpu.name().into(), sweep.name().into(), setting(drop, bursty).into(), x.into()];
                    let mut cells = head.to_vec();
                    let mut lost = head.to_vec();
                    for policy in POLICIES {
                        let row = at(policy);
                        cells.extend([
                            row.map(|r| r.throughput).into(),
                            row.map(|r| r.end_to_end_ms).into(),
                            row.map(|r| r.missed).into(),
                        ]);
                        lost.extend([row.map(|r| r.refused).into(), row.map(|r| r.dropped).into()]);
                    }
                    let rg = at(BlockPolicy::RgEdf);
                    lost.extend([
                        rg.map(|r| r.reordered / r.blocks.max(1.0)).into(),
                        at(BlockPolicy::Edf).map(|r| r.cpu_share).into(),
                        rg.map(|r| r.cpu_share).into(),
                    ]);
                    main.push(cells);
                    losses.push(lost);
                }
            }
        }
    }
    r.tables.push(main);
    r.tables.push(losses);
    for (sweep, spec) in [(Sweep::All, &FIGURE_ALL), (Sweep::One, &FIGURE_ONE), (Sweep::Size, &FIGURE_SIZE)] {
        if !sweeps.contains(&sweep) {
            continue;
        }
        let mut t = Table::new(spec).grouped_by("cpu");
        for &cpu in &cpus {
            for &x in sweep.xs() {
                let point = Point { sweep, x, drop: true, bursty: false, cpu };
                let mut cells: Vec<Value> = vec![cpu.name().into(), x.into()];
                cells.extend(POLICIES.iter().map(|&p| find(rows, point, p).map(|r| r.throughput).into()));
                t.push(cells);
            }
        }
        r.tables.push(t);
        r.charts.push(
            Chart::new(
                &format!("dou-rgedf-{}", sweep.name()),
                &format!("Records on time per second, {} swept, dropping, steady", sweep.name()),
                spec.name,
                "x",
                &["fifo", "edf", "g_edf", "rg_edf"],
            )
            .by("cpu")
            .labels(sweep.axis(), "records on time / s"),
        );
    }
    let (shifts, same) = shifts(rows);
    let order = |tiers: &[Vec<&str>]| tiers.iter().map(|t| t.join(" = ")).collect::<Vec<_>>().join(" > ");
    let mut ranking = Table::new(&RANKING).grouped_by("sweep");
    for s in &shifts {
        let p = s.point;
        ranking.push(vec![
            p.sweep.name().into(),
            p.x.into(),
            setting(p.drop, p.bursty).into(),
            order(&s.cc1010).into(),
            order(&s.modern).into(),
        ]);
    }
    ranking.note(format!("the order is the same at {same} points and differs at {}", shifts.len()));
    r.tables.push(ranking);
    let mut versus_table = Table::new(&VERSUS);
    for (a, b) in [(BlockPolicy::Edf, BlockPolicy::Fifo), (BlockPolicy::RgEdf, BlockPolicy::GEdf)] {
        for &cpu in &cpus {
            let v = versus(rows, a, b, |p| p.cpu == cpu);
            versus_table.push(vec![
                a.name().into(),
                b.name().into(),
                cpu.name().into(),
                v.below.into(),
                v.tie.into(),
                v.above.into(),
            ]);
        }
    }
    r.tables.push(versus_table);
    for &cpu in &cpus {
        for c in claims(rows, cpu) {
            let mark = match c.holds {
                Some(true) => "same",
                Some(false) => "DIFFERS",
                None => "not compared",
            };
            r.claims.push(report::Claim {
                claim: format!("{} on the {}: {mark}", c.figure, cpu.name()),
                source: "Dou 2011; notes 003 §5.1".into(),
                published: None,
                published_text: c.published.into(),
                ours: None,
                ours_text: c.ours,
                difference: None,
                why: String::new(),
            });
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_gives_every_row_and_the_grouping_gain() {
        let setup = Setup {
            sweeps: vec![Sweep::All],
            cpus: vec![Cpu::Cc1010],
            runs: 1,
            duration: Nanos::from_millis(3_000),
            ..Setup::thesis(2)
        };
        let rows = run(&setup, &report::Quiet).unwrap();
        assert_eq!(rows.len(), Sweep::All.xs().len() * 4 * POLICIES.len());
        let p = Point { sweep: Sweep::All, x: 10, drop: true, bursty: false, cpu: Cpu::Cc1010 };
        let (f, g) = (find(&rows, p, BlockPolicy::Fifo).unwrap(), find(&rows, p, BlockPolicy::GEdf).unwrap());
        assert!(g.throughput > 2.0 * f.throughput, "{f:?}\n{g:?}");
        assert!(!claims(&rows, Cpu::Cc1010).is_empty());
    }
}
