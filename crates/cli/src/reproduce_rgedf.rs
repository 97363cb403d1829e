//! `switchyard reproduce dou-rgedf`: prints the flash-scheduling reproduction
//! (`switchyard_experiments::rgedf`) beside the thesis's figures, and writes its CSV and charts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use switchyard_core::order::blocks::BlockPolicy;
use switchyard_experiments::rgedf::{self, Cpu, POLICIES, Point, Row, Setup, Sweep, WHY};
use switchyard_sim::report::{Series, Style, line_chart};

pub(crate) fn run_rows(runs: u64, seed: u64, threads: usize, dir: Option<&Path>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let setup = Setup { runs, seed, ..Setup::thesis(threads) };
    writeln!(
        out,
        "G-EDF and RG-EDF (Dou 2011 ch. 2) in the simulator: a CC1010 sensor node, three processes (64-byte records every \
         40 ms, due 70 ms after injection, unless swept), an SD card of 512-byte blocks (9–13 ms a write, 60–140 ms more \
         into a new 256-block sector), 1.5 KB of memory for records; {runs} runs of 10 s a point from seed {seed}.\n\
         Throughput is records on the card by their deadlines, per second; e2e the mean time from injection to durable.\n"
    )?;
    let total = setup.points().len() * POLICIES.len() * runs as usize;
    let bar = ProgressBar::new(total as u64);
    bar.set_style(ProgressStyle::with_template("dou-rgedf [{bar:30}] {pos}/{len} runs {elapsed}").expect("static"));
    let rows = rgedf::run(&setup, &|done| bar.set_position(done as u64));
    bar.finish_and_clear();
    let rows = rows?;
    for cpu in [Cpu::Cc1010, Cpu::Modern] {
        writeln!(
            out,
            "=== scheduling charged to {} ===\n",
            match cpu {
                Cpu::Cc1010 => "the 8051 (≈100 µs a heap step, 80 µs a request; the thesis's array heap)",
                Cpu::Modern => "a present-day core (20 ns a step, per-stream queues)",
            }
        )?;
        for sweep in [Sweep::All, Sweep::One, Sweep::Size] {
            for (drop, bursty) in [(false, false), (true, false), (false, true), (true, true)] {
                table(&mut out, &rows, Point { sweep, x: 0, drop, bursty, cpu })?;
            }
        }
        writeln!(out, "published beside ours ({}; notes 003 §5.1)", cpu.name())?;
        for c in rgedf::claims(&rows, cpu) {
            let mark = match c.holds {
                Some(true) => "same",
                Some(false) => "DIFFERS",
                None => "—",
            };
            writeln!(out, "- [{mark}] {} — published: {} | ours: {}", c.figure, c.published, c.ours)?;
        }
        writeln!(out)?;
    }
    ranking_change(&mut out, &rows)?;
    writeln!(out, "\n{WHY}")?;
    if let Some(d) = dir {
        write_outputs(d, &rows)?;
        writeln!(out, "\nwrote dou-rgedf.csv and dou-rgedf-{{all,one,size}}-{{8051,modern}}.svg in {}", d.display())?;
    }
    Ok(())
}

/// One sweep under one variant: each policy's throughput, e2e and misses by x.
fn table(out: &mut impl Write, rows: &[Row], at: Point) -> Result<()> {
    let same = |r: &&Row| {
        r.point.sweep == at.sweep && r.point.drop == at.drop && r.point.bursty == at.bursty && r.point.cpu == at.cpu
    };
    writeln!(
        out,
        "{} swept ({}), {}, {}",
        at.sweep.name(),
        at.sweep.axis(),
        if at.drop { "dropping predicted misses" } else { "not dropping" },
        if at.bursty { "bursty" } else { "steady" }
    )?;
    write!(out, "{:>6}", "x")?;
    for p in POLICIES {
        write!(out, " {:>22}", format!("{} /s e2e miss", p.name()))?;
    }
    writeln!(out)?;
    for &x in at.sweep.xs() {
        write!(out, "{x:>6}")?;
        for p in POLICIES {
            match rows.iter().filter(same).find(|r| r.point.x == x && r.policy == p) {
                Some(r) => write!(out, " {:>7.1} {:>7.0} {:>5.0}%", r.throughput, r.end_to_end_ms, r.missed * 100.0)?,
                None => write!(out, " {:>22}", "—")?,
            }
        }
        writeln!(out)?;
    }
    writeln!(out)?;
    Ok(())
}

/// Where the policies' order by throughput differs between the 8051 and a modern core.
fn ranking_change(out: &mut impl Write, rows: &[Row]) -> Result<()> {
    writeln!(out, "=== how the ranking changes on a modern core (throughput, best first; within 1% a tie) ===")?;
    let (shifts, same) = rgedf::shifts(rows);
    let order = |tiers: &[Vec<&str>]| tiers.iter().map(|t| t.join(" = ")).collect::<Vec<_>>().join(" > ");
    for s in &shifts {
        let p = s.point;
        writeln!(
            out,
            "{:>4} {:>4}{}{}: 8051 {} | modern {}",
            p.sweep.name(),
            p.x,
            if p.drop { " drop" } else { "" },
            if p.bursty { " bursty" } else { "" },
            order(&s.cc1010),
            order(&s.modern)
        )?;
    }
    writeln!(out, "the order is the same at {same} points and differs at {}", shifts.len())?;
    // The two pairs whose order the 8051's costs decided in the thesis.
    for (a, b) in [(BlockPolicy::Edf, BlockPolicy::Fifo), (BlockPolicy::RgEdf, BlockPolicy::GEdf)] {
        for cpu in [Cpu::Cc1010, Cpu::Modern] {
            let v = rgedf::versus(rows, a, b, |p| p.cpu == cpu);
            writeln!(
                out,
                "{} against {} {}: below at {} points, within 1% at {}, above at {}",
                a.name(),
                b.name(),
                match cpu {
                    Cpu::Cc1010 => "on the 8051",
                    Cpu::Modern => "on a modern core",
                },
                v.below,
                v.tie,
                v.above
            )?;
        }
    }
    Ok(())
}

fn write_outputs(dir: &Path, rows: &[Row]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut csv = String::from(
        "cpu,sweep,x,drop,bursty,policy,throughput_per_s,end_to_end_ms,missed,refused,dropped,reordered,amplification,cpu_share\n",
    );
    for r in rows {
        let p = r.point;
        csv.push_str(&format!(
            "{},{},{},{},{},{},{:.3},{:.2},{:.4},{:.2},{:.2},{:.2},{:.3},{:.4}\n",
            p.cpu.name(),
            p.sweep.name(),
            p.x,
            p.drop,
            p.bursty,
            r.policy.name(),
            r.throughput,
            r.end_to_end_ms,
            r.missed,
            r.refused,
            r.dropped,
            r.reordered,
            r.amplification,
            r.cpu_share
        ));
    }
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text).with_context(|| format!("cannot write {name} in {}", dir.display()))
    };
    write("dou-rgedf.csv", &csv)?;
    for cpu in [Cpu::Cc1010, Cpu::Modern] {
        for sweep in [Sweep::All, Sweep::One, Sweep::Size] {
            // Dropping predicted misses, steady: the thesis's Fig. 2.8a setting.
            let series: Vec<Series> = POLICIES
                .iter()
                .map(|&p| {
                    let points = rows
                        .iter()
                        .filter(|r| {
                            r.policy == p
                                && r.point.cpu == cpu
                                && r.point.sweep == sweep
                                && r.point.drop
                                && !r.point.bursty
                        })
                        .map(|r| (r.point.x as f64, r.throughput))
                        .collect();
                    Series { name: p.name().to_owned(), points, style: Style::Measured }
                })
                .collect();
            let title = format!("records on time per second, {} swept, {}", sweep.name(), cpu.name());
            let svg = line_chart(&title, sweep.axis(), "records on time / s", &series).map_err(anyhow::Error::msg)?;
            write(&format!("dou-rgedf-{}-{}.svg", sweep.name(), cpu.name()), &svg)?;
        }
    }
    Ok(())
}

/// `reproduce dou-rgedf`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Runs per point and scheduler (seeds --seed, --seed + 1, …).
    #[arg(long, default_value_t = 10)]
    pub(crate) runs: u64,

    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    /// Threads to run cases on (default: the machine's cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    run_rows(a.runs, a.seed, crate::reproduce::threads(a.threads), a.output.out.as_deref())
}
