//! The reproductions that are simulator scenarios (Guo's dissertation, ch. 4–7): their files,
//! built in, and a run of one as rows and comparisons with the published figures.
//!
//! Each scenario file says what it reproduces: its `[[published]]` claims name the figure, the
//! source and why ours may differ (see `switchyard_sim::scenario`).
//!
//! A run's report is a table of runs (a row per policy and sweep combination, with the figures
//! policies are compared by) and one of the rest of each [`RunSummary`], keyed by `case`; the
//! published claims beside ours; and a bar chart per plotted metric.

use switchyard_sim::scenario::{Comparison, Scenario};
use switchyard_sim::summary::RunSummary;

use crate::ExperimentError;
use crate::report::{self, Chart, ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec};

/// The reproduction scenarios, by name (their files are in `scenarios/reproduce/`).
pub const REPRODUCTIONS: &[(&str, &str)] = &[
    ("dpi-affinity", include_str!("../../../scenarios/reproduce/dpi-affinity.toml")),
    ("niagara-hierarchy", include_str!("../../../scenarios/reproduce/niagara-hierarchy.toml")),
    ("gop-cache-aware", include_str!("../../../scenarios/reproduce/gop-cache-aware.toml")),
    ("niagara-hierarchy-cache", include_str!("../../../scenarios/reproduce/niagara-hierarchy-cache.toml")),
    ("gop-cache-aware-cache", include_str!("../../../scenarios/reproduce/gop-cache-aware-cache.toml")),
    ("ps-shares", include_str!("../../../scenarios/reproduce/ps-shares.toml")),
];

/// The scenario file of reproduction `name`, as text (to be changed before parsing, as a
/// reduced run does), or `None` if there is none by that name.
pub fn text(name: &str) -> Option<&'static str> {
    REPRODUCTIONS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Parses `text` as reproduction `name`'s scenario.
pub fn parse(name: &str, text: &str) -> Result<Scenario, ExperimentError> {
    Ok(Scenario::parse(text, &format!("scenarios/reproduce/{name}.toml"), None)?)
}

/// Reproduction `name`'s scenario.
pub fn scenario(name: &str) -> Result<Scenario, ExperimentError> {
    let text = text(name).ok_or_else(|| ExperimentError::Input(format!("no scenario reproduction `{name}`")))?;
    parse(name, text)
}

/// A scenario's runs: a row per run and, for reproductions, each published claim beside ours.
#[derive(Clone, Debug)]
pub struct Reproduction {
    /// One row per policy and sweep combination, in the scenario's case order.
    pub rows: Vec<RunSummary>,
    /// The published figures beside ours, with the difference and why.
    pub comparisons: Vec<Comparison>,
}

/// Runs `scenario` on `threads` threads (the result is the same whatever their number),
/// advancing `progress` by one after each run.
pub fn run(scenario: &Scenario, threads: usize, progress: &dyn Progress) -> Result<Reproduction, ExperimentError> {
    progress.stage(&format!("{}: runs", scenario.name), scenario.cases.len() as u64);
    let outcomes = scenario.run(threads, &|| progress.advance(1))?;
    let rows = scenario.cases.iter().zip(&outcomes).map(|(c, o)| RunSummary::new(c, o)).collect();
    Ok(Reproduction { rows, comparisons: scenario.compare(&outcomes) })
}

/// A row per run: the figures a person compares policies by (the rest are in [`DETAILS`]).
pub const RUNS: TableSpec = TableSpec::new(
    "runs",
    "Runs: one per policy and sweep combination",
    &[
        ColumnSpec::int("case").about("position in the sweep; the key shared with `details`"),
        ColumnSpec::text("policy"),
        ColumnSpec::text("swept").about("the swept values, `key=value` separated by spaces"),
        ColumnSpec::num("units_per_s", 0).header("throughput").unit("units/s").about("units served per second"),
        ColumnSpec::num("offered_gbps", 3).header("offered").unit("Gbit/s").about("the trace's bytes over the run"),
        ColumnSpec::num("utilisation_mean", 2).header("util").about("mean worker utilisation"),
        ColumnSpec::num("utilisation_spread", 2)
            .header("spread")
            .about("highest minus lowest worker utilisation (Guo's imbalance)"),
        ColumnSpec::num("busy_max_over_mean", 3).header("busy m/m").about("busy time, max over mean"),
        ColumnSpec::int("migrations").header("migr").about("units served away from their flow's previous worker"),
        ColumnSpec::int("out_of_order").header("reorder").about("units that left after a later unit of their flow"),
        ColumnSpec::num("latency_p50_us", 1).header("p50").unit("µs").about("median latency"),
        ColumnSpec::num("latency_p99_us", 1).header("p99").unit("µs").about("99th-percentile latency"),
    ],
);

/// The rest of each run's figures: with [`RUNS`], every field of its [`RunSummary`].
pub const DETAILS: TableSpec = TableSpec::new(
    "details",
    "Each run's counts, balance, jitter and shares",
    &[
        ColumnSpec::int("case").about("position in the sweep; the key shared with `runs`"),
        ColumnSpec::text("policy"),
        ColumnSpec::int("seed").about("the run's root seed"),
        ColumnSpec::int("emitted").about("units that reached the producer"),
        ColumnSpec::int("served").about("units served"),
        ColumnSpec::int("dropped").about("units dropped at full queues"),
        ColumnSpec::num("node_utilisation_spread", 3)
            .header("node spread")
            .about("highest minus lowest mean utilisation of the nodes just below the root (Guo Fig. 5.6)"),
        ColumnSpec::num("busy_cov", 3).header("busy CoV").about("busy time, coefficient of variation"),
        ColumnSpec::num("busy_jain", 3).header("busy Jain").about("busy time, Jain's index"),
        ColumnSpec::num("jitter_us", 1).header("jitter").unit("µs").about("inter-departure jitter within flows"),
        ColumnSpec::num("producer_blocked_ms", 1)
            .header("blocked")
            .unit("ms")
            .about("time the producer waited on full queues"),
        ColumnSpec::num("flow_share_cov", 3)
            .header("share CoV")
            .about("CoV of flows' worker shares against their proportional targets (0: exactly in proportion)"),
        ColumnSpec::num("flow_rate_jain", 3).header("rate Jain").about("Jain's index of flows' progress rates"),
    ],
);

/// The metrics charted, one bar chart each: (column, title, logarithmic axis). Latencies span
/// decades (66 µs beside 1,153 µs), so theirs is logarithmic.
pub const PLOTTED: &[(&str, &str, bool)] = &[
    ("units_per_s", "Throughput (units/s)", false),
    ("offered_gbps", "Offered throughput (Gbit/s)", false),
    ("utilisation_spread", "Utilisation spread (max − min)", false),
    ("busy_max_over_mean", "Busy time, max / mean", false),
    ("migrations", "Flow migrations", false),
    ("out_of_order", "Out-of-order departures", false),
    ("latency_p99_us", "99th-percentile latency (µs, log axis)", true),
];

/// `switchyard reproduce dpi-affinity`.
pub const DPI_AFFINITY: ReportSpec = ReportSpec {
    name: "dpi-affinity",
    title: "Guo ch. 4: DPI throughput by connection affinity against per-packet spraying (simulator)",
    tables: &[&RUNS, &DETAILS],
};
/// `switchyard reproduce niagara-hierarchy`.
pub const NIAGARA_HIERARCHY: ReportSpec = ReportSpec {
    name: "niagara-hierarchy",
    title: "Guo ch. 5: hierarchical HRW on the Niagara's cores and threads (simulator)",
    tables: &[&RUNS, &DETAILS],
};
/// `switchyard reproduce gop-cache-aware`.
pub const GOP_CACHE_AWARE: ReportSpec = ReportSpec {
    name: "gop-cache-aware",
    title: "Guo ch. 6: cache-aware placement of transcoding GOPs (simulator)",
    // With --real, bench transcode's tables follow: the GOPs measured and the prediction from them.
    tables: &[
        &RUNS,
        &DETAILS,
        &crate::bench::transcode::CASES_IF_REAL,
        &crate::bench::transcode::PREDICTION,
        &crate::bench::transcode::MACHINES,
    ],
};
/// `switchyard reproduce niagara-hierarchy-cache`.
pub const NIAGARA_HIERARCHY_CACHE: ReportSpec = ReportSpec {
    name: "niagara-hierarchy-cache",
    title: "Guo ch. 5 with the cache model on: the Niagara hierarchy's cache effects (simulator)",
    tables: &[&RUNS, &DETAILS],
};
/// `switchyard reproduce gop-cache-aware-cache`.
pub const GOP_CACHE_AWARE_CACHE: ReportSpec = ReportSpec {
    name: "gop-cache-aware-cache",
    title: "Guo ch. 6 with the cache model on: GOP placement's cache effects (simulator)",
    tables: &[&RUNS, &DETAILS],
};
/// `switchyard reproduce ps-shares`.
pub const PS_SHARES: ReportSpec = ReportSpec {
    name: "ps-shares",
    title: "Guo ch. 7: PS-HRW's proportional shares (simulator)",
    tables: &[&RUNS, &DETAILS],
};

/// The scenario reproductions' reports, in [`REPRODUCTIONS`]' order.
pub const SPECS: &[&ReportSpec] = &[
    &DPI_AFFINITY,
    &NIAGARA_HIERARCHY,
    &GOP_CACHE_AWARE,
    &NIAGARA_HIERARCHY_CACHE,
    &GOP_CACHE_AWARE_CACHE,
    &PS_SHARES,
];

/// `switchyard sim FILE`: any scenario file's runs.
pub const SIM: ReportSpec =
    ReportSpec { name: "sim", title: "A scenario in the simulator", tables: &[&RUNS, &DETAILS] };

/// The report spec of reproduction `name`.
pub fn spec(name: &str) -> Option<&'static ReportSpec> {
    SPECS.iter().copied().find(|s| s.name == name)
}

impl Reproduction {
    /// The runs as a report of `spec` (a reproduction's, or [`SIM`] for any scenario file): the
    /// runs and details tables, the published claims beside ours, and a bar chart per plotted
    /// metric.
    pub fn report(&self, spec: &ReportSpec, scenario: &Scenario) -> Report {
        let mut r = Report::new(spec);
        // A scenario says what it shows in its title, or at least its name.
        r.title.clone_from(if scenario.title.is_empty() { &scenario.name } else { &scenario.title });
        r.param("scenario", scenario.name.as_str(), "the scenario's name");
        if let Some(seed) = self.rows.first().map(|row| row.seed)
            && self.rows.iter().all(|row| row.seed == seed)
        {
            r.param("seed", seed, "the root seed of every run");
        }
        r.param("runs", self.rows.len(), "policies times sweep combinations");
        if !scenario.swept_keys.is_empty() {
            r.param("swept", scenario.swept_keys.join(", "), "the keys the sweep varies");
        }
        let (mut runs, mut details) = (Table::new(&RUNS), Table::new(&DETAILS));
        if !scenario.swept_keys.is_empty() {
            runs = runs.grouped_by("swept");
        }
        for s in &self.rows {
            runs.push(vec![
                s.case.into(),
                s.policy.as_str().into(),
                s.swept.as_str().into(),
                s.units_per_s.into(),
                s.offered_gbps.into(),
                s.utilisation_mean.into(),
                s.utilisation_spread.into(),
                s.busy_max_over_mean.into(),
                s.migrations.into(),
                s.out_of_order.into(),
                s.latency_p50_us.into(),
                s.latency_p99_us.into(),
            ]);
            details.push(vec![
                s.case.into(),
                s.policy.as_str().into(),
                s.seed.into(),
                s.emitted.into(),
                s.served.into(),
                s.dropped.into(),
                s.node_utilisation_spread.into(),
                s.busy_cov.into(),
                s.busy_jain.into(),
                s.jitter_us.into(),
                s.producer_blocked_ms.into(),
                s.flow_share_cov.into(),
                s.flow_rate_jain.into(),
            ]);
        }
        r.tables.push(runs);
        r.tables.push(details);
        for (column, title, log) in PLOTTED {
            let unit = RUNS.columns.iter().find(|c| c.name == *column).map_or("", |c| c.unit);
            let label = RUNS.columns.iter().find(|c| c.name == *column).map_or(*column, |c| c.about);
            let value = if unit.is_empty() { label.to_string() } else { format!("{label} ({unit})") };
            // A bar per run, labelled by its policy and swept values, coloured by policy.
            r.charts.push(
                Chart::new(column, title, RUNS.name, "swept", &[column])
                    .by("policy")
                    .labels("run", &value)
                    .log(false, *log),
            );
        }
        r.claims = self.comparisons.iter().map(claim).collect();
        r
    }
}

/// A published figure beside ours. A published figure of 0 (an exact target) makes a ratio say
/// nothing, so ours is then given with its absolute difference and `difference` is left empty.
fn claim(c: &Comparison) -> report::Claim {
    let p = &c.published;
    let (ours, ours_text) = match &c.ours {
        Ok(o) if p.value == 0.0 => (Some(*o), format!("{o:.3} ({})", c.difference_text())),
        Ok(o) => (Some(*o), format!("{o:.3}")),
        Err(e) => (None, format!("cannot compute ours: {e}")),
    };
    report::Claim {
        claim: p.claim.clone(),
        source: p.source.clone(),
        published: Some(p.value),
        published_text: format!("{:.3}", p.value),
        ours,
        ours_text,
        difference: if p.value == 0.0 { None } else { c.difference().filter(|d| d.is_finite()) },
        why: p.explain.clone(),
    }
}
