//! `switchyard reproduce yates-cache`: prints Yates's Tables 5.4–5.9 as reproduced by
//! `switchyard_experiments::yates_cache`, beside the published ones, and writes their CSV and
//! charts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use switchyard_core::cache::{AgeFrom, Lookup, Rule};
use switchyard_experiments::yates_cache::{self, Setup, Table, TradeOff, WHY};
use switchyard_sim::models::sensor::{Experiment, SensorParams, Stations};
use switchyard_sim::report::{Series, Style, line_chart};

/// Where the Intel lab trace comes from, and which motes stand in for a mote: shared by
/// `reproduce yates-cache` and `field serve --field lab`.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct LabArgs {
    /// The lab trace's readings (the Intel Berkeley lab format, .gz or plain).
    #[arg(long, default_value = "data/labdata/data.txt.gz")]
    pub(crate) lab_data: std::path::PathBuf,

    /// The lab trace's mote locations.
    #[arg(long, default_value = "data/labdata/mote_locs.txt")]
    pub(crate) lab_locs: std::path::PathBuf,

    /// Which motes stand in for a mote in the lab: `nearest:K` or `within:METRES`.
    #[arg(long, default_value = "nearest:4")]
    pub(crate) neighbourhood: Rule,
}

/// What the reproduction may vary.
pub(crate) struct CacheRepro<'a> {
    pub(crate) tables: &'a [String],
    pub(crate) scale: f64,
    pub(crate) seed: u64,
    pub(crate) threads: usize,
    pub(crate) age_from: AgeFrom,
    pub(crate) stations: Stations,
    pub(crate) lab_data: &'a Path,
    pub(crate) lab_locs: &'a Path,
    pub(crate) neighbourhood: Rule,
    pub(crate) lattice_neighbourhood: Option<Rule>,
    pub(crate) keep_approximations: bool,
    pub(crate) out: Option<&'a Path>,
}

pub(crate) fn run_rows(a: &CacheRepro<'_>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let chosen = yates_cache::chosen(a.tables)?;
    let trace = if chosen.iter().any(|t| !t.lattice) {
        let (trace, said) = yates_cache::lab_trace(a.lab_data, a.lab_locs)?;
        writeln!(out, "{said}")?;
        Some(trace)
    } else {
        None
    };
    writeln!(
        out,
        "Yates (2006) ch. 5 in the simulator: age counted from {}, lattice base stations at the {}, lattice neighbourhood {}, trace neighbourhood {:?}, approximate answers {}; seed {}\n",
        match a.age_from {
            AgeFrom::Load => "load time",
            AgeFrom::Sensor => "the sensor's timestamp",
        },
        match a.stations {
            Stations::Quadrants => "centres of the z = 0 face's quadrants",
            Stations::Corners => "corners of the z = 0 face, one step out",
        },
        a.lattice_neighbourhood.map_or("the six cells sharing a face".to_string(), |r| format!("{r:?}")),
        a.neighbourhood,
        if a.keep_approximations { "cached" } else { "not cached" },
        a.seed
    )?;
    if let Some(dir) = a.out {
        // A fresh table file for this run (rows are appended table by table).
        let _ = std::fs::remove_file(dir.join("tables.csv"));
    }
    let setup = Setup {
        tables: a.tables.to_vec(),
        scale: a.scale,
        seed: a.seed,
        threads: a.threads,
        age_from: a.age_from,
        stations: a.stations,
        neighbourhood: a.neighbourhood,
        lattice_neighbourhood: a.lattice_neighbourhood,
        keep_approximations: a.keep_approximations,
    };
    // Table by table, so that each is printed as soon as it has run.
    for number in chosen.iter().map(|t| t.number.to_string()) {
        let one = Setup { tables: vec![number], ..setup.clone() };
        for run in yates_cache::run(&one, trace.as_ref())? {
            print_table(&mut out, run.table, &run.params, &run.experiment)?;
            print_trade_off(&mut out, &run.trade_offs)?;
            if let Some(dir) = a.out {
                write_outputs(dir, run.table, &run.experiment)?;
            }
        }
    }
    if let Some(dir) = a.out {
        writeln!(out, "tables.csv and a cost–quality chart per table and A written to {}", dir.display())?;
    }
    writeln!(out, "{WHY}")?;
    Ok(())
}

/// Yates §5.4's trade-off, ours beside the thesis's words.
fn print_trade_off(out: &mut impl Write, trade_offs: &[TradeOff]) -> Result<()> {
    for t in trade_offs {
        let name = |l: Option<Lookup>| l.map_or("-", Lookup::name);
        let verdict = if t.slope < 0.0 {
            format!("a trade-off, Q = c {:+.3}·cost, r² = {:.2}", t.slope, t.r2)
        } else {
            format!("no trade-off (Q rises with cost, slope {:+.3}, r² = {:.2})", t.slope, t.r2)
        };
        writeln!(
            out,
            "A = {}: across the five age-based policies (cost in All misses's units), {verdict}; cheapest {}, best {}. Thesis: {}",
            t.a,
            name(t.cheapest),
            name(t.best),
            t.thesis
        )?;
    }
    writeln!(out)?;
    Ok(())
}

fn write_outputs(dir: &Path, table: &Table, ex: &Experiment) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let csv = dir.join("tables.csv");
    let fresh = !csv.exists();
    let mut w = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&csv)
        .with_context(|| format!("opening {}", csv.display()))?;
    if fresh {
        writeln!(
            w,
            "table,policy,hit_ratio,hit_ratio_published,cost,cost_published,cost_over_miss,delay_s,delay_s_published,deviation,q_a01,q_a09,coalesced,dropped,reads_per_s"
        )?;
    }
    for (run, &(lookup, hit, cost, delay)) in ex.runs.iter().zip(table.rows) {
        let q = run.queries.max(1) as f64;
        writeln!(
            w,
            "{},{},{:.4},{hit},{:.3},{cost},{:.4},{:.4},{delay},{:.5},{:.5},{:.5},{:.5},{:.5},{:.4}",
            table.number,
            lookup.name(),
            run.hit_ratio(),
            run.cost_per_query(),
            run.cost_per_query() / run.miss_cost,
            run.mean_delay(),
            run.mean_deviation(),
            ex.quality(run, 0.1),
            ex.quality(run, 0.9),
            run.coalesced as f64 / q,
            run.dropped as f64 / q,
            run.read_rate(),
        )?;
    }
    for a in [0.1, 0.9] {
        let series: Vec<Series> = ex
            .runs
            .iter()
            .map(|r| Series {
                name: r.lookup.map_or("-", Lookup::name).to_string(),
                points: vec![(r.cost_per_query() / r.miss_cost, ex.quality(r, a))],
                style: Style::Measured,
            })
            .collect();
        let svg = line_chart(
            &format!("Table {}: cost against quality, A = {a}", table.number),
            "cost per query (All misses = 1)",
            "Q_n (lower is better)",
            &series,
        )
        .map_err(|e| anyhow::anyhow!("drawing the chart: {e}"))?;
        let path = dir.join(format!("table-{}-a{}.svg", table.number, a));
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn print_table(out: &mut impl Write, table: &Table, params: &SensorParams, ex: &Experiment) -> Result<()> {
    let locations = if table.lattice { 1000.0 } else { 54.0 };
    writeln!(
        out,
        "Table {} — {}, T = {:.2} s ({} queries a policy measured)",
        table.number,
        table.what,
        table.ttl_s,
        ex.runs.first().map_or(0, |r| r.queries)
    )?;
    writeln!(
        out,
        "{:<16} {:>12} {:>14} {:>15} {:>14} {:>7} {:>7} {:>9} {:>8} {:>8} {:>8}",
        "policy",
        "hit ours/pub",
        "cost ours/pub",
        "÷miss ours/pub",
        "delay ours/pub",
        "Q A=.1",
        "Q A=.9",
        "deviation",
        "waited",
        "dropped",
        "reads/s"
    )?;
    for (run, &(lookup, hit, cost, delay)) in ex.runs.iter().zip(table.rows) {
        let q = run.queries.max(1) as f64;
        writeln!(
            out,
            "{:<16} {:>5.2} / {:<4.2} {:>6.1} / {:<5} {:>6.2} / {:<6.2} {:>5.2} / {:<6.2} {:>7.3} {:>7.3} {:>9.3} {:>7.1}% {:>7.1}% {:>8.2}",
            lookup.name(),
            run.hit_ratio(),
            hit,
            run.cost_per_query(),
            cost,
            run.cost_per_query() / run.miss_cost,
            cost / if table.lattice { 94.0 } else { 19.0 },
            run.mean_delay(),
            delay,
            ex.quality(run, 0.1),
            ex.quality(run, 0.9),
            run.mean_deviation(),
            100.0 * run.coalesced as f64 / q,
            100.0 * run.dropped as f64 / q,
            run.read_rate(),
        )?;
    }
    writeln!(
        out,
        "a read costs {:.1} on average here, {} in the thesis (÷miss compares costs in that unit); the blocking policies' bound on field reads (Eq 5.1): |N|/T = {:.2} a second\n",
        ex.runs.first().map_or(0.0, |r| r.miss_cost),
        if table.lattice { 94 } else { 19 },
        locations / params.ttl_s
    )?;
    Ok(())
}

/// Where the lattice's base stations stand.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum StationsArg {
    /// The centres of the four quadrants of the lattice's z = 0 face.
    Quadrants,
    /// The four corners of the z = 0 face, one lattice step outside it.
    Corners,
}

/// `reproduce yates-cache`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The thesis's tables to run (5.4 to 5.9; default all).
    #[arg(long, value_delimiter = ',')]
    pub(crate) tables: Vec<String>,

    /// Scale the measured time by this (1: 2,000 s of queries on the lattice, 60,000 s on the
    /// trace; the thesis ran up to 4,000,000 queries).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) scale: f64,

    /// The root seed (every policy in a table sees the same field and queries).
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// Count an entry's age from `load` (the thesis's words) or from the `sensor`'s timestamp
    /// (what its smallest-T table suggests).
    #[arg(long, default_value = "load")]
    pub(crate) age_from: AgeFrom,

    /// Where the lattice's four base stations stand (the thesis does not say).
    #[arg(long, value_enum, default_value_t = StationsArg::Quadrants)]
    pub(crate) stations: StationsArg,

    /// Which cells stand in for a cell of the lattice: `faces` (the up to six sharing a face),
    /// `nearest:K` or `within:DISTANCE` (spacing is 8, 6 and 4 along x, y, z).
    #[arg(long, default_value = "faces")]
    pub(crate) lattice_neighbourhood: String,

    /// Cache approximate answers for the location they answered, as old as the entries they came
    /// from (the thesis does not say; its tables hint at it).
    #[arg(long)]
    pub(crate) keep_approximations: bool,

    #[command(flatten)]
    pub(crate) lab: LabArgs,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    run_rows(&CacheRepro {
        tables: &a.tables,
        scale: a.scale,
        seed: a.seed,
        threads: crate::reproduce::threads(a.threads),
        age_from: a.age_from,
        stations: match a.stations {
            StationsArg::Quadrants => Stations::Quadrants,
            StationsArg::Corners => Stations::Corners,
        },
        lab_data: &a.lab.lab_data,
        lab_locs: &a.lab.lab_locs,
        neighbourhood: a.lab.neighbourhood,
        lattice_neighbourhood: match a.lattice_neighbourhood.as_str() {
            "faces" => None,
            other => {
                Some(other.parse::<Rule>().map_err(|e| anyhow::anyhow!("--lattice-neighbourhood: {e}, or `faces`"))?)
            }
        },
        keep_approximations: a.keep_approximations,
        out: a.output.out.as_deref(),
    })
}
