//! `reproduce yates-cache`: Yates (2006) Tables 5.4–5.9, the seven lookup policies on the
//! 1,000-location lattice and the lab trace, in the simulator, beside the published tables; and
//! §5.4's cost–quality trade-off at A = 0.1 and 0.9.

use std::path::Path;

use switchyard_core::cache::{AgeFrom, Lookup, Rule};
use switchyard_core::measure::Moments;
use switchyard_sim::models::sensor::{ChangeModel, Experiment, FieldSpec, PolicyRun, SensorParams, Stations, Trace};

use crate::ExperimentError;
use crate::report::{self as rep, Chart, ColumnSpec, Progress, Report, ReportSpec, TableSpec};
use Lookup::*;

/// One published table: its number, its set-up, and (policy, hit ratio, cost, delay) rows.
#[derive(Debug)]
pub struct Table {
    /// The thesis's number for it ("5.4" to "5.9").
    pub number: &'static str,
    /// Its set-up, in words.
    pub what: &'static str,
    /// The lattice (true) or the lab trace.
    pub lattice: bool,
    /// The freshness bound T, in seconds.
    pub ttl_s: f64,
    /// The published rows: policy, hit ratio, cost per query, delay (s).
    pub rows: &'static [(Lookup, f64, f64, f64)],
}

/// Yates Tables 5.4–5.9 (notes 000 §5.4). All hits and All misses appear only in 5.4 and 5.5.
pub const TABLES: &[Table] = &[
    Table {
        number: "5.4",
        what: "1,000 locations, correlated changes 90/s, 90 q/s",
        lattice: true,
        ttl_s: 80.0 / 9.0,
        rows: &[
            (AllHits, 1.0, 0.0, 0.0),
            (AllMisses, 0.0, 94.0, 1.18),
            (Simple, 0.40, 56.0, 0.69),
            (GreedyAge, 0.62, 37.0, 0.39),
            (GreedyDistance, 0.60, 38.0, 0.44),
            (MedianOf3, 0.55, 43.0, 0.51),
            (Piggyback, 0.40, 57.0, 0.69),
        ],
    },
    Table {
        number: "5.5",
        what: "lab trace, 54 locations, 0.9 q/s",
        lattice: false,
        ttl_s: 90.0,
        rows: &[
            (AllHits, 1.0, 0.0, 0.0),
            (AllMisses, 0.0, 19.0, 4.4),
            (Simple, 0.59, 7.7, 1.0),
            (GreedyAge, 0.78, 4.0, 0.47),
            (GreedyDistance, 0.76, 4.4, 0.55),
            (MedianOf3, 0.71, 5.4, 0.68),
            (Piggyback, 0.59, 7.7, 1.0),
        ],
    },
    Table {
        number: "5.6",
        what: "1,000 locations, larger T",
        lattice: true,
        ttl_s: 800.0 / 9.0,
        rows: &[
            (Simple, 0.88, 12.0, 0.14),
            (GreedyAge, 0.88, 12.0, 0.13),
            (GreedyDistance, 0.89, 10.0, 0.13),
            (MedianOf3, 0.90, 10.0, 0.12),
            (Piggyback, 0.88, 12.0, 0.14),
        ],
    },
    Table {
        number: "5.7",
        what: "lab trace, larger T",
        lattice: false,
        ttl_s: 900.0,
        rows: &[
            (Simple, 0.94, 1.2, 0.14),
            (GreedyAge, 0.95, 0.97, 0.11),
            (GreedyDistance, 0.95, 0.94, 0.11),
            (MedianOf3, 0.95, 0.94, 0.11),
            (Piggyback, 0.94, 1.2, 0.14),
        ],
    },
    Table {
        number: "5.8",
        what: "1,000 locations, smaller T",
        lattice: true,
        ttl_s: 8.0 / 9.0,
        rows: &[
            (Simple, 0.02, 92.0, 1.15),
            (GreedyAge, 0.08, 88.0, 0.93),
            (GreedyDistance, 0.06, 89.0, 1.01),
            (MedianOf3, 0.05, 90.0, 1.07),
            (Piggyback, 0.02, 92.0, 1.14),
        ],
    },
    Table {
        number: "5.9",
        what: "lab trace, smaller T",
        lattice: false,
        ttl_s: 9.0,
        rows: &[
            (Simple, 0.12, 16.0, 3.2),
            (GreedyAge, 0.32, 13.0, 1.7),
            (GreedyDistance, 0.27, 13.0, 1.9),
            (MedianOf3, 0.20, 15.0, 2.3),
            (Piggyback, 0.12, 16.0, 2.9),
        ],
    },
];

/// What the reproduction may vary (the thesis's set-up by default, with the choices it leaves
/// open as options).
#[derive(Clone, Debug)]
pub struct Setup {
    /// Tables to run by number (empty: all).
    pub tables: Vec<String>,
    /// Scales the measured time (1: 2,000 s of queries on the lattice, 60,000 s on the trace).
    pub scale: f64,
    /// Root seed: every policy of a table sees the same field and queries.
    pub seed: u64,
    /// Threads the policies of a table are spread over.
    pub threads: usize,
    /// Where an answer's age is counted from.
    pub age_from: AgeFrom,
    /// Where the lattice's base stations stand.
    pub stations: Stations,
    /// Which motes stand in for a mote in the lab trace.
    pub neighbourhood: Rule,
    /// The lattice's neighbourhood (`None`: the six cells sharing a face).
    pub lattice_neighbourhood: Option<Rule>,
    /// Whether approximate answers are cached.
    pub keep_approximations: bool,
}

/// §5.4's claim about cost and quality at one A, and what our runs show.
#[derive(Clone, Debug)]
pub struct TradeOff {
    /// The weight of delay against deviation in Q_n.
    pub a: f64,
    /// What the thesis says.
    pub thesis: &'static str,
    /// Whether the thesis found a trade-off (quality bought with cost) at this A.
    pub thesis_trade_off: bool,
    /// Least-squares slope of Q_n on cost (in All misses's units) over the five age-based policies.
    pub slope: f64,
    /// Its r².
    pub r2: f64,
    /// The cheapest of them.
    pub cheapest: Option<Lookup>,
    /// The best (lowest Q_n) of them.
    pub best: Option<Lookup>,
}

/// One table's runs beside the published rows.
pub struct TableRun {
    /// The published table.
    pub table: &'static Table,
    /// The parameters the policies ran with.
    pub params: SensorParams,
    /// Every policy's run, in the table's row order, and their answers' quality.
    pub experiment: Experiment,
    /// §5.4's trade-off at A = 0.1 and A = 0.9.
    pub trade_offs: Vec<TradeOff>,
}

/// The published tables `numbers` names (all if it is empty).
pub fn chosen(numbers: &[String]) -> Result<Vec<&'static Table>, ExperimentError> {
    let chosen: Vec<&Table> =
        TABLES.iter().filter(|t| numbers.is_empty() || numbers.iter().any(|n| n == t.number)).collect();
    if chosen.is_empty() {
        return Err(ExperimentError::Input(format!("no table {numbers:?}; there are 5.4 to 5.9")));
    }
    Ok(chosen)
}

/// Runs the chosen tables; `trace` is the lab trace, needed by the trace's tables (5.5, 5.7,
/// 5.9). `progress` gets a stage per table and a step per policy run.
pub fn run(setup: &Setup, trace: Option<&Trace>, progress: &dyn Progress) -> Result<Vec<TableRun>, ExperimentError> {
    if !(setup.scale.is_finite() && setup.scale > 0.0) {
        return Err(ExperimentError::Input(format!(
            "scale {}: give a positive number (1: the default run)",
            setup.scale
        )));
    }
    chosen(&setup.tables)?
        .into_iter()
        .map(|table| {
            let (field, lambda, poll_s, link_capacity, max_wait_s, measure_s) = if table.lattice {
                let field = FieldSpec::Lattice {
                    model: ChangeModel::Correlated,
                    rate: 90.0,
                    stations: setup.stations,
                    rule: setup.lattice_neighbourhood,
                };
                (field, 81.0, 1000.0 / 9.0, 25.0, 2.0, 2000.0)
            } else {
                let trace = trace.ok_or_else(|| {
                    ExperimentError::Input(format!("table {} runs on the lab trace, and none was given", table.number))
                })?;
                (FieldSpec::Trace { trace: trace.clone(), rule: setup.neighbourhood }, 0.81, 600.0, 0.25, 7.5, 60_000.0)
            };
            let params = SensorParams {
                field,
                ttl_s: table.ttl_s,
                age_from: setup.age_from,
                keep_approximations: setup.keep_approximations,
                lambda,
                poll_s,
                link_capacity,
                max_wait_s,
                warmup_s: (5.0 * table.ttl_s).max(200.0),
                measure_s: measure_s * setup.scale,
                seed: setup.seed,
            };
            let lookups: Vec<Lookup> = table.rows.iter().map(|r| r.0).collect();
            progress.stage(
                &format!("Table {} ({}, T = {:.2} s): policies", table.number, table.what, table.ttl_s),
                lookups.len() as u64,
            );
            let experiment = experiment(&params, &lookups, setup.threads, progress)?;
            let trade_offs = trade_offs(&experiment);
            Ok(TableRun { table, params, experiment, trade_offs })
        })
        .collect()
}

/// Each of `lookups` run on `params` on up to `threads` threads, a step of `progress` per run,
/// their answers pooled for Q_n in the order asked, as `sensor::experiment` pools them (which
/// has no way to say when each run is done).
fn experiment(
    params: &SensorParams,
    lookups: &[Lookup],
    threads: usize,
    progress: &dyn Progress,
) -> Result<Experiment, ExperimentError> {
    let runs = crate::sweep::sweep(
        1,
        lookups.len(),
        1,
        threads,
        &|_, v, _| switchyard_sim::models::sensor::simulate(params, lookups[v]),
        &|_| progress.advance(1),
    )?;
    let (mut delay, mut deviation) = (Moments::default(), Moments::default());
    for &(d, v) in runs.iter().flat_map(|r| &r.answers) {
        delay.push(f64::from(d));
        deviation.push(f64::from(v));
    }
    Ok(Experiment { runs, delay, deviation })
}

/// The five age-based policies, whose cost–quality relation the thesis describes.
fn age_based(ex: &Experiment) -> Vec<&PolicyRun> {
    ex.runs.iter().filter(|r| !matches!(r.lookup, Some(AllHits | AllMisses) | None)).collect()
}

/// Yates §5.4: at A = 0.1 cost and quality trade off along a line; at A = 0.9 the cheapest
/// policies are also the best.
fn trade_offs(ex: &Experiment) -> Vec<TradeOff> {
    let runs = age_based(ex);
    [(0.1, true, "a linear trade-off"), (0.9, false, "no trade-off: the greedy policies are cheapest and best")]
        .into_iter()
        .map(|(a, thesis_trade_off, thesis)| {
            let points: Vec<(f64, f64)> =
                runs.iter().map(|r| (r.cost_per_query() / r.miss_cost, ex.quality(r, a))).collect();
            let (slope, r2) = fit(&points);
            let cheapest = runs.iter().min_by(|x, y| x.cost_per_query().total_cmp(&y.cost_per_query()));
            let best = runs.iter().min_by(|x, y| ex.quality(x, a).total_cmp(&ex.quality(y, a)));
            TradeOff {
                a,
                thesis,
                thesis_trade_off,
                slope,
                r2,
                cheapest: cheapest.and_then(|r| r.lookup),
                best: best.and_then(|r| r.lookup),
            }
        })
        .collect()
}

/// Least squares of y on x: slope and r².
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    let syy: f64 = points.iter().map(|p| (p.1 - my) * (p.1 - my)).sum();
    if sxx == 0.0 || syy == 0.0 {
        return (0.0, 0.0);
    }
    (sxy / sxx, sxy * sxy / (sxx * syy))
}

/// The lab trace's light readings as the simulator takes them.
pub fn lab_trace(data: &Path, locs: &Path) -> Result<(Trace, String), ExperimentError> {
    let input = |e: switchyard_ingest::labdata::LabError| ExperimentError::Input(format!("reading the lab trace: {e}"));
    let motes = switchyard_ingest::labdata::open_locations(locs).map_err(input)?;
    let read = switchyard_ingest::labdata::open_readings(data, &motes).map_err(input)?;
    let index = |mote: u16| motes.iter().position(|m| m.mote == mote);
    let readings: Vec<(f64, u32, f64)> =
        read.readings.iter().filter_map(|r| Some((r.time_s, index(r.mote)? as u32, r.light?))).collect();
    let span_h = readings.last().map_or(0.0, |l| l.0 - readings[0].0) / 3600.0;
    let said = format!(
        "{}: {} light readings of {} motes over {:.1} h{}",
        data.display(),
        readings.len(),
        motes.len(),
        span_h,
        if read.skipped.total() > 0 { format!("; {}", read.skipped) } else { String::new() }
    );
    Ok((Trace { positions: motes.iter().map(|m| (m.x, m.y)).collect(), readings }, said))
}

/// Why our figures differ from the thesis's, as far as the open choices explain it (each
/// claim below was checked with the option it names).
pub const WHY: &[&str] = &[
    "cost: the thesis's unit makes the cheapest message cost 1, so it depends on where base stations stand, which it \
     does not say; compare costs in All misses's units (÷miss). The lattice's All misses delay (1.35 s against 1.18 s) \
     is the same placement's longer round trips.",
    "simple lookups' hit ratio agrees with a renewal model of each location (notes 000 §5.4) in every table; the \
     thesis's smallest-T figure (Table 5.8: 0.02, the model and ours 0.07) is met by counting age from the sensor's \
     timestamp (--age-from sensor: 0.03), which barely moves the other tables.",
    "the approximate policies hit more than the thesis's (Table 5.4: 0.72 against 0.55–0.62) with the six lattice \
     neighbours sharing a face; with two (--lattice-neighbourhood nearest:2) greedy age gives the thesis's 0.62 and \
     0.39 s. The three share one hit ratio unless approximate answers are kept (--keep-approximations), which orders \
     them as the thesis's tables do.",
    "piggybacked queries: ours coalesce 0.1–9% of queries at no cost, so piggyback costs less than simple; the \
     thesis's equal costs suggest it charged coalesced queries as reads, or that they rarely happened in its runs.",
    "the trace's All misses: at 0.9 q/s its links run at 0.9 of capacity and 15% of queries would wait past 7.5 s; \
     ours drops them (counted apart; figures are per answered query), which keeps its delay (4.1 s) under the \
     thesis's 4.4 s.",
];

/// A thesis table's rows, ours beside the published: the columns of every `table_5_N`.
const POLICY_COLUMNS: &[ColumnSpec] = &[
    ColumnSpec::text("policy"),
    ColumnSpec::num("hit", 2).about("hit ratio: the share of queries answered from the cache"),
    ColumnSpec::num("hit_published", 2).header("hit pub"),
    ColumnSpec::num("cost", 1).about("cost per query, in messages (the cheapest message costs 1)"),
    ColumnSpec::num("cost_published", 1).header("cost pub"),
    ColumnSpec::num("cost_over_miss", 2)
        .header("÷miss")
        .about("cost per query over the mean cost of a read (All misses's cost per query)"),
    ColumnSpec::num("cost_over_miss_published", 2)
        .header("÷miss pub")
        .about("the published cost over the thesis's All misses (94 on the lattice, 19 on the trace)"),
    ColumnSpec::num("delay", 2).unit("s").about("mean delay of an answer"),
    ColumnSpec::num("delay_published", 2).header("delay pub").unit("s"),
    ColumnSpec::num("q_a01", 3)
        .header("Q A=.1")
        .about("mean Q_n with delay weighted 0.1 (Yates Eq 5.2; lower is better)"),
    ColumnSpec::num("q_a09", 3)
        .header("Q A=.9")
        .about("mean Q_n with delay weighted 0.9 (Yates Eq 5.2; lower is better)"),
    ColumnSpec::num("deviation", 3).about("mean deviation of an answer from the field's value"),
    ColumnSpec::num("waited", 1).percent().about("share of queries that waited for a read already under way"),
    ColumnSpec::num("dropped", 1)
        .percent()
        .about("share of queries dropped: they would have waited past the link's limit"),
    ColumnSpec::num("reads_per_s", 2).header("reads/s").about("field reads a second"),
];

/// One table of the report per thesis table, in [`TABLES`]' order (each given when it is run).
pub const TABLE_SPECS: [TableSpec; 6] = [
    TableSpec::new("table_5_4", "Table 5.4", POLICY_COLUMNS).optional(),
    TableSpec::new("table_5_5", "Table 5.5", POLICY_COLUMNS).optional(),
    TableSpec::new("table_5_6", "Table 5.6", POLICY_COLUMNS).optional(),
    TableSpec::new("table_5_7", "Table 5.7", POLICY_COLUMNS).optional(),
    TableSpec::new("table_5_8", "Table 5.8", POLICY_COLUMNS).optional(),
    TableSpec::new("table_5_9", "Table 5.9", POLICY_COLUMNS).optional(),
];

/// Each table's set-up as run: what a person reads over its rows, as data.
pub const SETUPS: TableSpec = TableSpec::new(
    "setups",
    "The tables' set-ups as run",
    &[
        ColumnSpec::text("table"),
        ColumnSpec::text("what"),
        ColumnSpec::num("ttl", 2).header("T").unit("s").about("the freshness bound"),
        ColumnSpec::int("queries").about("queries a policy answered while measured"),
        ColumnSpec::num("read_cost", 1).header("read cost").about("mean cost of a field read here"),
        ColumnSpec::num("read_cost_published", 0)
            .header("read cost pub")
            .about("the thesis's All misses cost, its cost of a read"),
        ColumnSpec::num("read_bound", 2)
            .header("Eq 5.1 bound")
            .unit("reads/s")
            .about("the blocking policies' bound on field reads, |N|/T (Yates Eq 5.1)"),
    ],
);

/// §5.4's cost–quality trade-off, ours beside the thesis's words.
pub const TRADE_OFFS: TableSpec = TableSpec::new(
    "trade_offs",
    "§5.4: Q_n against cost over the five age-based policies (cost in All misses's units; least squares Q = c + slope·cost)",
    &[
        ColumnSpec::text("table"),
        ColumnSpec::num("a", 1).header("A").about("the weight of delay against deviation in Q_n"),
        ColumnSpec::num("slope", 3).signed().about("least-squares slope of Q_n on cost"),
        ColumnSpec::num("r2", 2).header("r²"),
        ColumnSpec::flag("trade_off").header("trade-off").about("ours: Q_n falls as cost rises (slope < 0)"),
        ColumnSpec::text("cheapest"),
        ColumnSpec::text("best").about("lowest Q_n"),
        ColumnSpec::flag("thesis_trade_off").header("thesis trade-off").about("what the thesis found at this A"),
        ColumnSpec::text("thesis").about("the thesis's words"),
    ],
);

/// What `reproduce yates-cache` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "yates-cache",
    title: "Yates (2006) ch. 5 in the simulator: Tables 5.4–5.9, the seven lookup policies on the 1,000-location lattice and the lab trace, ours beside the thesis's",
    tables: &[
        &SETUPS,
        &TABLE_SPECS[0],
        &TABLE_SPECS[1],
        &TABLE_SPECS[2],
        &TABLE_SPECS[3],
        &TABLE_SPECS[4],
        &TABLE_SPECS[5],
        &TRADE_OFFS,
    ],
};

/// The thesis's cost of a read (its All misses's cost per query), by field.
fn published_read_cost(table: &Table) -> f64 {
    if table.lattice { 94.0 } else { 19.0 }
}

fn rule_text(rule: Rule) -> String {
    match rule {
        Rule::Nearest(k) => format!("nearest:{k}"),
        Rule::Within(r) => format!("within:{r}"),
        Rule::Lattice { .. } => "faces".into(),
    }
}

/// The tables run, as a report: their set-ups, each table's rows beside the published ones,
/// §5.4's trade-offs, and two cost–quality charts per table. `trace` says what was read of the
/// lab trace, when a table needed it.
pub fn report(setup: &Setup, runs: &[TableRun], trace: Option<&str>) -> Report {
    let mut r = Report::new(&SPEC);
    let numbers: Vec<&str> = runs.iter().map(|t| t.table.number).collect();
    r.param("tables", numbers.join(","), "the thesis's tables run")
        .param("scale", setup.scale, "measured time against 2,000 s on the lattice and 60,000 s on the trace")
        .param("seed", setup.seed, "the root seed")
        .param(
            "age_from",
            match setup.age_from {
                AgeFrom::Load => "load",
                AgeFrom::Sensor => "sensor",
            },
            "an entry's age counted from its load time or the sensor's timestamp",
        )
        .param(
            "stations",
            match setup.stations {
                Stations::Quadrants => "quadrants",
                Stations::Corners => "corners",
            },
            "the lattice's base stations: the centres of the z = 0 face's quadrants, or its corners one step out",
        )
        .param(
            "lattice_neighbourhood",
            setup.lattice_neighbourhood.map_or("faces".into(), rule_text),
            "the cells standing in for a lattice cell",
        )
        .param("neighbourhood", rule_text(setup.neighbourhood), "the motes standing in for a mote of the trace")
        .param("keep_approximations", setup.keep_approximations, "approximate answers cached");
    if let Some(said) = trace {
        r.note(format!("lab trace: {said}"));
    }
    let mut setups = rep::Table::new(&SETUPS);
    let mut trade = rep::Table::new(&TRADE_OFFS).grouped_by("table");
    for run in runs {
        let (table, ex) = (run.table, &run.experiment);
        // Every run's table is one of TABLES, each with its spec at the same index.
        let Some(spec) = TABLES.iter().position(|t| t.number == table.number).map(|i| &TABLE_SPECS[i]) else {
            continue;
        };
        let read_cost = ex.runs.first().map_or(0.0, |p| p.miss_cost);
        let queries = ex.runs.first().map_or(0, |p| p.queries);
        let locations = if table.lattice { 1000.0 } else { 54.0 };
        let bound = locations / run.params.ttl_s;
        setups.push(vec![
            table.number.into(),
            table.what.into(),
            table.ttl_s.into(),
            queries.into(),
            read_cost.into(),
            published_read_cost(table).into(),
            bound.into(),
        ]);
        let mut t = rep::Table::new(spec);
        t.title = format!(
            "Table {} — {}, T = {:.2} s ({queries} queries a policy measured)",
            table.number, table.what, table.ttl_s
        );
        for (p, &(lookup, hit, cost, delay)) in ex.runs.iter().zip(table.rows) {
            let q = p.queries.max(1) as f64;
            t.push(vec![
                lookup.name().into(),
                p.hit_ratio().into(),
                hit.into(),
                p.cost_per_query().into(),
                cost.into(),
                (p.cost_per_query() / p.miss_cost).into(),
                (cost / published_read_cost(table)).into(),
                p.mean_delay().into(),
                delay.into(),
                ex.quality(p, 0.1).into(),
                ex.quality(p, 0.9).into(),
                p.mean_deviation().into(),
                (p.coalesced as f64 / q).into(),
                (p.dropped as f64 / q).into(),
                p.read_rate().into(),
            ]);
        }
        t.note(format!(
            "a read costs {read_cost:.1} on average here, {} in the thesis (÷miss compares costs in that unit); the \
             blocking policies' bound on field reads (Eq 5.1): |N|/T = {bound:.2} a second",
            published_read_cost(table)
        ));
        r.tables.push(t);
        for (a, column) in [(0.1, "q_a01"), (0.9, "q_a09")] {
            r.charts.push(
                Chart::new(
                    &format!("table-{}-a{a}", table.number),
                    &format!("Table {}: cost against quality, A = {a}", table.number),
                    spec.name,
                    "cost_over_miss",
                    &[column],
                )
                .by("policy")
                .labels("cost per query (All misses = 1)", "Q_n (lower is better)"),
            );
        }
        for o in &run.trade_offs {
            let name = |l: Option<Lookup>| l.map_or("-", Lookup::name);
            trade.push(vec![
                table.number.into(),
                o.a.into(),
                o.slope.into(),
                o.r2.into(),
                (o.slope < 0.0).into(),
                name(o.cheapest).into(),
                name(o.best).into(),
                o.thesis_trade_off.into(),
                o.thesis.into(),
            ]);
        }
    }
    r.tables.insert(0, setups);
    r.tables.push(trade);
    r.note("why ours differ:");
    for why in WHY {
        r.note(format!("- {why}"));
    }
    r
}
