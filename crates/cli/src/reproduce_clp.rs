//! `switchyard reproduce yates-clp`: prints Yates ch. 2–4 as reproduced by
//! `switchyard_experiments::clp` — fairness against the number of threads, soft scheduling
//! closing the gap, hard scheduling holding 4 Mb/s on each of 384 connections, and the
//! processor-scaling curves in the simulator — each beside the thesis's figures, and writes its
//! CSV and charts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::ValueEnum;
use switchyard_experiments::clp::{
    self, HARD_BITS, Measured, PROCESSORS, Part, Progress, Report, Row, Section, published,
};
use switchyard_runtime::deliver::Transport;
use switchyard_sim::report::{Series, Style, line_chart};

/// The parts of the reproduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum PartArg {
    /// Per-thread and per-connection fairness against threads, UDP and TCP bulk (Ch. 3).
    Fairness,
    /// Soft throughput-based scheduling, off and on (Ch. 4).
    Soft,
    /// Hard throughput-based scheduling: 4 Mb/s on every connection (Ch. 4).
    Hard,
    /// Processor scaling, 1 to 20 processors, in the simulator (Ch. 2).
    Scaling,
}

/// yates-clp's settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct ClpArgs {
    /// yates-clp: the parts to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [PartArg::Fairness, PartArg::Soft, PartArg::Hard, PartArg::Scaling])]
    clp_parts: Vec<PartArg>,
    /// yates-clp: thread counts for the fairness part (the thesis: 12 to 384; this machine's
    /// core count is added).
    #[arg(long, value_delimiter = ',', default_values_t = [12, 24, 48, 96, 192, 384])]
    clp_threads: Vec<usize>,
    /// yates-clp: connections (the thesis: 384, and 3,072).
    #[arg(long, default_value_t = 384)]
    clp_conns: usize,
    /// yates-clp: seconds measured per case, after a second's warm-up (the thesis: 45 and 45).
    #[arg(long, default_value_t = 3.0)]
    clp_seconds: f64,
}

impl From<PartArg> for Part {
    fn from(p: PartArg) -> Self {
        match p {
            PartArg::Fairness => Self::Fairness,
            PartArg::Soft => Self::Soft,
            PartArg::Hard => Self::Hard,
            PartArg::Scaling => Self::Scaling,
        }
    }
}

/// Its line of yates-clp.csv.
fn csv_row(m: &Measured, part: &str, transport: &str) -> String {
    format!(
        "{part},{transport},{},{:.1},{:.4},{:.4},{:.5},{:.4},\n",
        m.threads,
        m.aggregate_bps / 1e6,
        m.per_thread.max_over_min(),
        m.per_conn.max_over_min(),
        m.conn_jain,
        m.cpu.max_over_min()
    )
}

fn note_refusals(not_accepted: usize, conns: usize) {
    if not_accepted > 0 {
        eprintln!("  note: {not_accepted} of {conns} connections were not accepted");
    }
}

pub(crate) fn run_rows(a: &ClpArgs, out_dir: Option<&Path>) -> Result<()> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut out = std::io::stdout().lock();
    if let Some(d) = out_dir {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    let setup = clp::Setup {
        parts: a.clp_parts.iter().map(|p| Part::from(*p)).collect(),
        threads: a.clp_threads.clone(),
        conns: a.clp_conns,
        seconds: a.clp_seconds,
    };
    let (conns, secs) = (setup.conns.max(1), setup.seconds.max(0.5));
    writeln!(
        out,
        "Yates ch. 2–4 on {cores} cores: {conns} connections over loopback, {secs} s per case after 1 s of warm-up"
    )?;
    writeln!(
        out,
        "(the thesis: 12 × 100 MHz processors, an in-memory device, 45 s runs; here the clients share the cores)\n"
    )?;
    let mut csv = String::from(
        "part,transport,threads,aggregate_mbps,thread_max_min,conn_max_min,conn_jain,cpu_max_min,admitted\n",
    );
    let mut printed: std::io::Result<()> = Ok(());
    // The current fairness section's (threads, per-thread max/min), for its closing line.
    let mut points: Vec<(f64, f64)> = Vec::new();
    let report = clp::run(&setup, &mut |p| {
        let line = match p {
            Progress::Begin(section) => {
                points.clear();
                begin(&mut out, section, conns)
            }
            Progress::Row(row) => {
                if let Row::Fairness { measured: m, .. } = row {
                    points.push((m.threads as f64, m.per_thread.max_over_min()));
                }
                print_row(&mut out, row, conns, &mut csv)
            }
            Progress::End(section) => end(&mut out, section, cores, &points),
        };
        if printed.is_ok() {
            printed = line;
        }
    })?;
    printed?;
    let charts = charts(&report)?;
    if let Some(d) = out_dir {
        std::fs::write(d.join("yates-clp.csv"), &csv).with_context(|| format!("cannot write in {}", d.display()))?;
        for (name, svg) in &charts {
            std::fs::write(d.join(name), svg).with_context(|| format!("cannot write {name} in {}", d.display()))?;
        }
        writeln!(out, "wrote yates-clp.csv and {} charts in {}", charts.len(), d.display())?;
    }
    Ok(())
}

fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Udp => "UDP",
        Transport::Tcp => "TCP",
    }
}

/// A section's heading and column names.
fn begin(out: &mut impl Write, section: Section, conns: usize) -> std::io::Result<()> {
    match section {
        Section::Fairness(t) => {
            writeln!(out, "Fairness against threads, {} bulk, send side (Ch. 3, Figs. 3.1–3.8)", transport_name(t))?;
            writeln!(
                out,
                "{:>8} {:>11} {:>16} {:>14} {:>10} {:>14}",
                "threads", "Mb/s", "thread max/min", "conn max/min", "conn Jain", "CPU max/min"
            )
        }
        Section::Soft => {
            writeln!(out, "Soft throughput-based scheduling, UDP bulk, {conns} connections (Ch. 4, Figs. 4.1–4.8)")?;
            writeln!(
                out,
                "{:>8} {:>11} {:>11} {:>22} {:>10} {:>7}",
                "threads", "soft", "Mb/s", "conn (max−min)/mean", "conn Jain", "moves"
            )
        }
        Section::Hard => {
            writeln!(
                out,
                "Hard throughput-based scheduling, {conns} UDP streams at 4 Mb/s ({:.3} Gb/s in all), received by the clients (Ch. 4, Figs. 4.17–4.24)",
                conns as f64 * HARD_BITS as f64 / 1e9
            )?;
            writeln!(
                out,
                "{:>8} {:>7} {:>10} {:>11} {:>10} {:>22} {:>20}",
                "threads", "pacing", "admitted", "Mb/s", "Jain", "worst conn over run", "100 ms windows p99"
            )
        }
        Section::Scaling => {
            writeln!(
                out,
                "Processor scaling in the simulator: PPC, one connection per processor (Ch. 2, Figs. 2.4–2.5; model crates/sim/src/models/clp.rs)"
            )?;
            writeln!(out, "{:>10} {}", "workload", PROCESSORS.iter().map(|p| format!("{p:>7}")).collect::<String>())
        }
    }
}

/// A row as a line of its table, and of the CSV.
fn print_row(out: &mut impl Write, row: &Row, conns: usize, csv: &mut String) -> std::io::Result<()> {
    match row {
        Row::Fairness { transport, measured: m } => {
            note_refusals(m.not_accepted, conns);
            csv.push_str(&csv_row(m, "fairness", transport_name(*transport)));
            writeln!(
                out,
                "{:>8} {:>11.0} {:>16.2} {:>14.2} {:>10.4} {:>14.2}",
                m.threads,
                m.aggregate_bps / 1e6,
                m.per_thread.max_over_min(),
                m.per_conn.max_over_min(),
                m.conn_jain,
                m.cpu.max_over_min()
            )
        }
        Row::Soft { rule, measured: m } => {
            note_refusals(m.not_accepted, conns);
            csv.push_str(&csv_row(m, &format!("soft-{rule}"), "UDP"));
            writeln!(
                out,
                "{:>8} {:>11} {:>11.0} {:>21.1}% {:>10.4} {:>7}",
                m.threads,
                rule,
                m.aggregate_bps / 1e6,
                (m.per_conn.max - m.per_conn.min) * 100.0,
                m.conn_jain,
                m.moves
            )
        }
        Row::Hard { threads, pacing, summary: s, not_accepted } => {
            note_refusals(*not_accepted, conns);
            csv.push_str(&format!(
                "hard-{pacing},UDP,{threads},{:.1},,{:.4},{:.5},,{}\n",
                s.aggregate_bps / 1e6,
                s.spread.max_over_min(),
                s.jain,
                s.conns
            ));
            let [_, p99, _] = s.window_error.unwrap_or([f64::NAN; 3]);
            writeln!(
                out,
                "{:>8} {:>7} {:>10} {:>11.1} {:>10.4} {:>21.2}% {:>19.1}%",
                threads,
                pacing,
                format!("{}/{conns}", s.conns),
                s.aggregate_bps / 1e6,
                s.jain,
                s.run_error.unwrap_or(f64::NAN) * 100.0,
                p99 * 100.0
            )
        }
        Row::Scaling { workload, rows } => writeln!(
            out,
            "{:>10} {}",
            workload.name(),
            rows.iter().map(|r| format!("{:>7.2}", r.speedup)).collect::<String>()
        ),
    }
}

/// A section's closing lines: the thesis's figures beside ours.
fn end(out: &mut impl Write, section: Section, cores: usize, points: &[(f64, f64)]) -> std::io::Result<()> {
    match section {
        Section::Fairness(t) => {
            let at =
                |t: f64| points.iter().find(|p| p.0 == t).map_or("not run".to_string(), |p| format!("{:.2}×", p.1));
            let fairest = points.iter().min_by(|x, y| x.1.total_cmp(&y.1)).map_or(0.0, |p| p.0);
            let said = if t == Transport::Udp { published::FAIRNESS_UDP } else { published::FAIRNESS_TCP };
            writeln!(out, "  published: {said}")?;
            writeln!(
                out,
                "  ours:      {} at 96 threads, {} at 384; fairest at {fairest} threads (this machine has {cores} cores)\n",
                at(96.0),
                at(384.0)
            )
        }
        Section::Soft => {
            writeln!(out, "  published: {}", published::SOFT)?;
            writeln!(
                out,
                "  `as-written` moves from the best-served thread to the worst, as the thesis's text says; `equalise` the other way (the default)\n"
            )
        }
        Section::Hard => {
            writeln!(out, "  published: {}", published::HARD)?;
            writeln!(
                out,
                "  a 100 ms window holds a whole number of sends, so part of its error is quantisation, not lateness\n"
            )
        }
        Section::Scaling => {
            writeln!(out, "  published: {}", published::SCALING)?;
            writeln!(
                out,
                "  ours: one shared bus costs only the receive side speedup; the rest of the thesis's loss (coherence, cache"
            )?;
            writeln!(
                out,
                "  conflicts, IRIX) is not in the model. A {cores}-core machine cannot show scaling past {cores}: that is why this part is simulated.\n"
            )
        }
    }
}

/// The fairness, hard-scheduling and scaling charts, for the parts that ran.
fn charts(report: &Report) -> Result<Vec<(String, String)>> {
    let mut charts = Vec::new();
    let runs = |t: Transport| report.fairness_points(t);
    if !runs(Transport::Udp).is_empty() {
        let mut lines: Vec<Series> = [Transport::Udp, Transport::Tcp]
            .into_iter()
            .map(|t| Series { name: format!("{}, ours", transport_name(t)), points: runs(t), style: Style::Measured })
            .collect();
        for (name, points) in ["UDP, thesis (≈10× at 96)", "TCP, thesis (3× at 96, 5× at 384)"]
            .into_iter()
            .zip(published::FAIRNESS_POINTS)
        {
            lines.push(Series { name: name.into(), points: points.to_vec(), style: Style::Published });
        }
        let svg = line_chart("Per-thread throughput max/min against threads", "threads", "max/min", &lines);
        charts.push(("fairness.svg".into(), svg.map_err(anyhow::Error::msg)?));
    }
    if let Some(w) = &report.hard_windows {
        let skip = vec![false; w.bytes.first().map_or(0, Vec::len)];
        let title = "4 Mb/s streams, 12 threads, Yates's quota";
        let svg = crate::deliver::rate_chart(w, &skip, Some(HARD_BITS as f64 / 8.0), title);
        charts.push(("hard-12-threads.svg".into(), svg.map_err(anyhow::Error::msg)?));
    }
    let mut lines: Vec<Series> = report
        .rows
        .iter()
        .filter_map(|r| match r {
            Row::Scaling { workload, rows } => Some(Series {
                name: workload.name().into(),
                points: rows.iter().map(|r| (f64::from(r.processors), r.speedup)).collect(),
                style: Style::Measured,
            }),
            _ => None,
        })
        .collect();
    if !lines.is_empty() {
        let (lo, hi) = published::SCALING_AT_20;
        lines.push(Series {
            name: "thesis: 14–17 at 20".into(),
            points: vec![(20.0, lo), (20.0, hi)],
            style: Style::Published,
        });
        let svg = line_chart("Speedup against processors (simulated)", "processors", "speedup", &lines);
        charts.push(("scaling.svg".into(), svg.map_err(anyhow::Error::msg)?));
    }
    Ok(charts)
}

/// `reproduce yates-clp`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(flatten)]
    pub(crate) clp: ClpArgs,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    run_rows(&a.clp, a.output.out.as_deref())
}
