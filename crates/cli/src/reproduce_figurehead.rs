//! `switchyard reproduce figurehead`: Figurehead's Table 2 (Base against OptWait) beside the
//! paper's, the published plans priced by our Eq 6, and every routing policy in the
//! simulator as load and the tail change (`switchyard_experiments::figurehead`).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use switchyard_experiments::figurehead::{self, SweepRow, Table2Row, WHY};
use switchyard_sim::report::{Series, Style, line_chart};

use crate::report::series_by_name;

pub(crate) fn run_rows(requests: u64, oracle: bool, seed: u64, dir: Option<&Path>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Figurehead (Middleware 2007, notes 004b §1): a latency SLA over back-ends of different speed and price, at least cost\n"
    )?;
    writeln!(out, "Table 2: three back-ends, 95 % within L; published costs beside ours (stand-in CDFs, see below)")?;
    writeln!(
        out,
        "{:>8} {:>12} {:>9} {:>9} {:>7} {:>12} {:>9} {:>7}  our plans",
        "L ms", "prices", "Base pub", "Base", "diff", "OptWait pub", "OptWait", "diff"
    )?;
    let diff = |ours: Option<f64>, published: f64| ours.map_or("-".to_string(), |o| format!("{:+.2}", o - published));
    let show = |v: Option<f64>| v.map_or("infeas.".to_string(), |v| format!("{v:.2}"));
    let mut search_us: f64 = 0.0;
    let table = figurehead::table2(seed);
    for r in table.iter().cloned() {
        let p = r.published;
        search_us = search_us.max(r.optwait_us);
        writeln!(
            out,
            "{:>8} {:>12} {:>9.2} {:>9} {:>7} {:>12.2} {:>9} {:>7}  {}",
            p.within_ms,
            format!("{}/{}/{}", p.prices[0], p.prices[1], p.prices[2]),
            p.base,
            show(r.base),
            diff(r.base, p.base),
            p.optwait,
            show(r.optwait),
            diff(r.optwait, p.optwait),
            r.plans
        )?;
    }
    writeln!(out, "{WHY}")?;
    writeln!(
        out,
        "OptWait's search took at most {:.1} ms here (the paper: 14 ms in Java; Base 710 µs with lp_solve, ours exact and O(n²)).\n",
        search_us / 1e3
    )?;
    let [w, b] = figurehead::worked_check();
    writeln!(
        out,
        "The published 600 ms plans priced by our Eq 6 (CDFs agreeing with the paper where the plans look):"
    )?;
    writeln!(
        out,
        "  OptWait [(0,0),(511 ms,89%),(∞,100)]: ours {:.2}, published {:.2}, difference {:+.2}",
        w.0,
        w.1,
        w.0 - w.1
    )?;
    writeln!(
        out,
        "  Base [0,50,50]:                       ours {:.2}, published {:.2}, difference {:+.2}\n",
        b.0,
        b.1,
        b.0 - b.1
    )?;

    let scenarios = figurehead::scenarios();
    let total = scenarios.len() * 9;
    let bar = ProgressBar::new(total as u64);
    bar.set_style(ProgressStyle::with_template("figurehead [{bar:30}] {pos}/{len} runs {elapsed}").expect("static"));
    let rows = figurehead::sweep(&scenarios, requests, oracle, seed, &|done| bar.set_position(done as u64));
    bar.finish_and_clear();
    let rows = rows?;
    let sla = figurehead::SWEEP_SLA;
    writeln!(
        out,
        "Every policy in the simulator: four back-ends (fast-dear 10, slow-cheap-a 1, slow-cheap-b 1.5, heavy-tail 2 per \
         request; 16 servers each), SLA {:.0} % within {} ms, {requests} requests a run, plans from {}",
        sla.percent * 100.0,
        sla.within.as_millis(),
        if oracle { "the models' CDFs (oracle)" } else { "latencies observed, re-planned every 1,000 requests" }
    )?;
    writeln!(
        out,
        "{:<20} {:<18} {:>6} {:>9} {:>6} {:>8} {:>8} {:>9} {:>9}  share fast/a/b/tail",
        "scenario", "route", "cancel", "attained", "met", "cost/req", "p99 ms", "attempts", "waste ms"
    )?;
    for r in &rows {
        let o = &r.outcome;
        writeln!(
            out,
            "{:<20} {:<18} {:>6} {:>8.2}% {:>6} {:>8.2} {:>8.1} {:>9.2} {:>9.2}  {}",
            r.scenario,
            r.route,
            if r.cancel { "yes" } else { "no" },
            o.attained * 100.0,
            if o.attained >= sla.percent { "yes" } else { "NO" },
            o.cost,
            o.p99.as_secs_f64() * 1e3,
            o.attempts,
            o.wasted.as_secs_f64() * 1e3,
            o.share.iter().map(|s| format!("{:.0}", s * 100.0)).collect::<Vec<_>>().join("/")
        )?;
    }
    writeln!(out)?;
    for line in figurehead::findings(&rows) {
        writeln!(out, "- {line}")?;
    }
    if let Some(d) = dir {
        write_csv(d, &rows)?;
        write_charts(d, &rows, &table)?;
        writeln!(
            out,
            "\nwrote figurehead.csv, figurehead-table2.svg and figurehead-{{cost,attained}}.svg in {}",
            d.display()
        )?;
    }
    Ok(())
}

fn write_csv(dir: &Path, rows: &[SweepRow]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut csv =
        String::from("scenario,route,cancel,attained,cost,p50_ms,p99_ms,attempts,wasted_ms,share,utilisation,plan\n");
    for r in rows {
        let o = &r.outcome;
        let list = |v: &[f64]| v.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(";");
        csv.push_str(&format!(
            "{},{},{},{:.5},{:.4},{:.2},{:.2},{:.3},{:.3},{},{},\"{}\"\n",
            r.scenario,
            r.route,
            r.cancel,
            o.attained,
            o.cost,
            o.p50.as_secs_f64() * 1e3,
            o.p99.as_secs_f64() * 1e3,
            o.attempts,
            o.wasted.as_secs_f64() * 1e3,
            list(&o.share),
            list(&o.utilisation),
            r.plan
        ));
    }
    let path = dir.join("figurehead.csv");
    std::fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))
}

/// Table 2 (ours and published, prices 5/10/15, against L), and the sweep at the middle tail
/// (price and attainment against load, a line per route).
fn write_charts(dir: &Path, rows: &[SweepRow], table: &[Table2Row]) -> Result<()> {
    let same = |r: &&Table2Row| r.published.prices == [5.0, 10.0, 15.0];
    let pts = |f: &dyn Fn(&Table2Row) -> Option<f64>| -> Vec<(f64, f64)> {
        table.iter().filter(same).filter_map(|r| Some((r.published.within_ms as f64, f(r)?))).collect()
    };
    let series = vec![
        Series { name: "Base (ours)".into(), points: pts(&|r| r.base), style: Style::Measured },
        Series { name: "OptWait (ours)".into(), points: pts(&|r| r.optwait), style: Style::Measured },
        Series { name: "Base (published)".into(), points: pts(&|r| Some(r.published.base)), style: Style::Published },
        Series {
            name: "OptWait (published)".into(),
            points: pts(&|r| Some(r.published.optwait)),
            style: Style::Published,
        },
    ];
    let svg =
        line_chart("Table 2: price per read for 95 % within L (prices 5, 10, 15)", "L, ms", "price per read", &series)
            .map_err(anyhow::Error::msg)?;
    std::fs::write(dir.join("figurehead-table2.svg"), svg).context("writing figurehead-table2.svg")?;
    let mid: Vec<&SweepRow> = rows.iter().filter(|r| (r.tail - 0.08).abs() < 1e-9).collect();
    let name = |r: &&SweepRow| if r.cancel { format!("{} (cancel)", r.route) } else { r.route.clone() };
    let names: Vec<String> = mid.iter().map(name).collect();
    for (file, title, y, f) in [
        (
            "figurehead-cost.svg",
            "Price per read against load (heavy tail 8 %)",
            "price per read",
            (&|r: &SweepRow| r.outcome.cost) as &dyn Fn(&SweepRow) -> f64,
        ),
        (
            "figurehead-attained.svg",
            "Reads within 100 ms against load (heavy tail 8 %)",
            "% within the SLA's latency",
            &|r: &SweepRow| r.outcome.attained * 100.0,
        ),
    ] {
        let series = series_by_name(
            &mid,
            |r| names[mid.iter().position(|m| std::ptr::eq(*m, *r)).unwrap_or(0)].as_str(),
            |r| Some((r.rate, f(r))),
        );
        let svg = line_chart(title, "reads per second", y, &series).map_err(anyhow::Error::msg)?;
        std::fs::write(dir.join(file), svg).with_context(|| format!("writing {file}"))?;
    }
    Ok(())
}

/// `reproduce figurehead`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Requests per simulated run (9 scenarios × 9 policy runs).
    #[arg(long, default_value_t = 20_000)]
    pub(crate) requests: u64,

    /// Plan Base and OptWait from the back-ends' model CDFs (the paper's "oracle CDFs") instead
    /// of from latencies observed during the run.
    #[arg(long)]
    pub(crate) oracle: bool,

    /// The root seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    run_rows(a.requests, a.oracle, a.seed, a.output.out.as_deref())
}
