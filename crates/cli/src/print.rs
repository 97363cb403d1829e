//! The one printer: any [`Report`] as aligned tables for a person, as JSON, or as CSV; with
//! `--out DIR`, the JSON, one CSV per table and the SVG charts written beside each other. Also
//! the progress bar that long work draws on stderr.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use switchyard_experiments::report::{Chart, Column, Kind, LineStyle, Progress, Report, Show, Table, Value};
use switchyard_sim::report::{Axes, Series, Style, line_chart_with};

/// How a report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned tables, the published figures beside ours, and notes, for a person.
    Table,
    /// The whole report as one JSON document (its schema: `switchyard schema`).
    Json,
    /// One table as CSV (pick it with --table when the report has more than one).
    Csv,
}

/// How `place` and `inspect` print their rows. Their `--format json` is the array of rows it
/// has always been (users' scripts read it), not a report; their table and CSV are this module's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum RowFormat {
    /// Aligned columns for a person.
    Table,
    /// An array of objects, one per row.
    Json,
    /// A header line and one line per row.
    Csv,
}

/// Where and how a report goes: shared by every reproduction and benchmark.
#[derive(Args, Debug, Clone)]
pub(crate) struct Output {
    /// How to print the report on stdout.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub(crate) format: Format,

    /// Also write the report into this directory: report.json, one NAME.csv per table and an
    /// SVG per chart.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    /// With --format csv: the table to print (the report's tables are listed if it is missing
    /// and there is more than one).
    #[arg(long, value_name = "NAME")]
    pub(crate) table: Option<String>,
}

impl Output {
    /// Prints `report` as asked, and writes it under `--out` if given.
    pub(crate) fn emit(&self, report: &Report) -> Result<()> {
        if let Some(dir) = &self.out {
            write_dir(report, dir)?;
        }
        let mut out = std::io::stdout().lock();
        match self.format {
            Format::Table => {
                human(&mut out, report)?;
                if let Some(dir) = &self.out {
                    writeln!(out, "\nreport.json, a CSV per table and the charts written to {}", dir.display())?;
                }
            }
            Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(report)?)?,
            Format::Csv => {
                let t = pick(report, self.table.as_deref())?;
                csv(&mut out, t)?;
            }
        }
        Ok(())
    }
}

fn pick<'a>(report: &'a Report, name: Option<&str>) -> Result<&'a Table> {
    let names = || report.tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ");
    match name {
        Some(n) => report.table(n).with_context(|| format!("no table `{n}` in this report; it has: {}", names())),
        None if report.tables.len() == 1 => Ok(&report.tables[0]),
        None if report.tables.is_empty() => bail!("this report has no tables"),
        None => bail!("this report has {} tables; name one with --table: {}", report.tables.len(), names()),
    }
}

/// Writes report.json, a CSV per table and an SVG per chart into `dir`.
pub(crate) fn write_dir(report: &Report, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("report.json");
    std::fs::write(&path, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    for t in &report.tables {
        let path = dir.join(format!("{}.csv", t.name));
        let mut w = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        csv(&mut w, t)?;
        w.flush().with_context(|| format!("writing {}", path.display()))?;
    }
    for c in &report.charts {
        let svg = chart(report, c)?;
        let path = dir.join(format!("{}.svg", c.name));
        std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Draws one chart of a report as SVG.
pub(crate) fn chart(report: &Report, c: &Chart) -> Result<String> {
    let t = report.table(&c.table).with_context(|| format!("chart `{}`: no table `{}`", c.name, c.table))?;
    let col =
        |name: &str| t.column(name).with_context(|| format!("chart `{}`: no column `{name}` in `{}`", c.name, t.name));
    let x = col(&c.x)?;
    if t.columns[x].kind == Kind::Text {
        return bars(t, c, x);
    }
    let groups: Vec<Option<String>> = match &c.series {
        None => vec![None],
        Some(s) => {
            let i = col(s)?;
            let mut seen: Vec<Option<String>> = Vec::new();
            for r in &t.rows {
                let v = Some(cell_text(&r[i]));
                if !seen.contains(&v) {
                    seen.push(v);
                }
            }
            seen
        }
    };
    let mut series = Vec::new();
    for line in &c.y {
        let y = col(&line.column)?;
        for g in &groups {
            let rows = t.rows.iter().filter(|r| match (g, &c.series) {
                (Some(g), Some(s)) => t.column(s).is_some_and(|i| &cell_text(&r[i]) == g),
                _ => true,
            });
            let points: Vec<(f64, f64)> = rows.filter_map(|r| Some((r[x].as_f64()?, r[y].as_f64()?))).collect();
            if points.is_empty() {
                continue;
            }
            let header = &t.columns[y].header;
            let name = match g {
                Some(g) if c.y.len() > 1 => format!("{g}, {header}"),
                Some(g) => g.clone(),
                None => header.clone(),
            };
            let style = match line.style {
                LineStyle::Measured => Style::Measured,
                LineStyle::Model => Style::Model,
                LineStyle::Published => Style::Published,
            };
            series.push(Series { name, points, style });
        }
    }
    line_chart_with(&c.title, &c.x_label, &c.y_label, &series, Axes { log_x: c.log_x, log_y: c.log_y })
        .map_err(|e| anyhow::anyhow!("drawing chart `{}`: {e}", c.name))
}

/// A chart whose x column is text: one bar per row and y column, labelled by its series value
/// and x, coloured by series; the values' axis is logarithmic when `log_y` is set.
fn bars(t: &Table, c: &Chart, x: usize) -> Result<String> {
    let col =
        |name: &str| t.column(name).with_context(|| format!("chart `{}`: no column `{name}` in `{}`", c.name, t.name));
    let series = c.series.as_deref().map(col).transpose()?;
    let mut groups: Vec<String> = Vec::new();
    let mut bars = Vec::new();
    for line in &c.y {
        let y = col(&line.column)?;
        for r in &t.rows {
            let Some(value) = r[y].as_f64() else { continue };
            let group = series.map(|i| cell_text(&r[i])).unwrap_or_default();
            let label = [group.as_str(), &cell_text(&r[x])].join(" ").trim().to_string();
            let label = if c.y.len() > 1 { format!("{label}, {}", t.columns[y].header) } else { label };
            let g = groups.iter().position(|n| *n == group).unwrap_or_else(|| {
                groups.push(group.clone());
                groups.len() - 1
            });
            bars.push(switchyard_sim::report::Bar { label, value, group: g });
        }
    }
    switchyard_sim::report::bar_chart(&c.title, &c.y_label, &bars, c.log_y)
        .map_err(|e| anyhow::anyhow!("drawing chart `{}`: {e}", c.name))
}

fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Text(s) => s.clone(),
    }
}

/// One table as CSV: a header of column names, then the values as they are (not rounded).
pub(crate) fn csv(out: &mut impl Write, t: &Table) -> Result<()> {
    let quote = |s: &str| {
        if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
    };
    let header: Vec<String> = t.columns.iter().map(|c| quote(&c.name)).collect();
    writeln!(out, "{}", header.join(","))?;
    for r in &t.rows {
        let cells: Vec<String> = r.iter().map(|v| quote(&cell_text(v))).collect();
        writeln!(out, "{}", cells.join(","))?;
    }
    Ok(())
}

/// A cell as a person reads it under its column.
fn shown(c: &Column, v: &Value) -> String {
    let d = usize::from(c.digits);
    match (v, c.show) {
        (Value::Null, _) => "-".into(),
        (Value::Bool(b), _) => if *b { "yes" } else { "no" }.into(),
        (Value::Text(s), _) => s.clone(),
        (Value::Int(i), Show::Percent) => format!("{:.d$}%", *i as f64 * 100.0),
        (Value::Int(i), Show::Signed) => format!("{i:+}"),
        (Value::Int(i), _) => i.to_string(),
        (Value::Float(f), Show::Plain) => format!("{f:.d$}"),
        (Value::Float(f), Show::Percent) => format!("{:.d$}%", f * 100.0),
        (Value::Float(f), Show::Gain) => format!("{:+.d$}%", (f - 1.0) * 100.0),
        (Value::Float(f), Show::Signed) => format!("{f:+.d$}"),
    }
}

fn head(c: &Column) -> String {
    if c.unit.is_empty() { c.header.clone() } else { format!("{} ({})", c.header, c.unit) }
}

/// One table, aligned: text left, numbers right, each column as wide as its widest cell.
pub(crate) fn aligned(out: &mut impl Write, t: &Table) -> Result<()> {
    let cells: Vec<Vec<String>> =
        t.rows.iter().map(|r| t.columns.iter().zip(r).map(|(c, v)| shown(c, v)).collect()).collect();
    let heads: Vec<String> = t.columns.iter().map(head).collect();
    let width: Vec<usize> = (0..t.columns.len())
        .map(|i| cells.iter().map(|r| r[i].chars().count()).chain([heads[i].chars().count()]).max().unwrap_or(0))
        .collect();
    let line = |out: &mut dyn Write, row: &[String]| -> std::io::Result<()> {
        let mut s = String::new();
        for (i, (c, cell)) in t.columns.iter().zip(row).enumerate() {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = width[i].saturating_sub(cell.chars().count());
            if c.kind == Kind::Text {
                s.push_str(cell);
                if i + 1 < row.len() {
                    s.push_str(&" ".repeat(pad));
                }
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            }
        }
        writeln!(out, "{}", s.trim_end())
    };
    line(out, &heads)?;
    let group = t.group.as_deref().and_then(|g| t.column(g));
    for (i, r) in cells.iter().enumerate() {
        if let Some(g) = group
            && i > 0
            && t.rows[i][g] != t.rows[i - 1][g]
        {
            writeln!(out)?;
        }
        line(out, r)?;
    }
    for n in &t.notes {
        writeln!(out, "{n}")?;
    }
    Ok(())
}

/// The whole report for a person: title, parameters, each table, the published figures beside
/// ours, the notes.
pub(crate) fn human(out: &mut impl Write, r: &Report) -> Result<()> {
    writeln!(out, "{}", r.title)?;
    if !r.parameters.is_empty() {
        let ps: Vec<String> = r.parameters.iter().map(|p| format!("{} {}", p.name, param_text(&p.value))).collect();
        writeln!(out, "parameters: {}", ps.join(", "))?;
    }
    if let Some(m) = &r.machine {
        writeln!(out, "machine: {m}")?;
    }
    for t in &r.tables {
        writeln!(out, "\n{}", t.title)?;
        aligned(out, t)?;
    }
    if !r.claims.is_empty() {
        writeln!(out, "\npublished beside ours")?;
        for c in &r.claims {
            let diff = c.difference.map_or(String::new(), |d| format!("  (difference {:+.1}%)", d * 100.0));
            writeln!(
                out,
                "- {}\n  published {} ({})\n  ours      {}{diff}",
                c.claim, c.published_text, c.source, c.ours_text
            )?;
            if !c.why.is_empty() {
                writeln!(out, "  why: {}", c.why)?;
            }
        }
    }
    if !r.notes.is_empty() {
        writeln!(out)?;
        for n in &r.notes {
            writeln!(out, "{n}")?;
        }
    }
    Ok(())
}

fn param_text(v: &Value) -> String {
    match v {
        Value::Null => "none".into(),
        Value::Float(f) => switchyard_sim::report::tick(*f),
        other => cell_text(other),
    }
}

/// A progress bar on stderr, drawn only when stderr is a terminal.
pub(crate) struct Bar(indicatif::ProgressBar);

impl Bar {
    pub(crate) fn new() -> Self {
        let bar = indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed}, about {eta} left)")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        // Redrawn every quarter second, so that the elapsed time moves during a long step.
        bar.enable_steady_tick(std::time::Duration::from_millis(250));
        Self(bar)
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

impl Progress for Bar {
    fn stage(&self, what: &str, total: u64) {
        self.0.reset();
        self.0.set_length(total);
        self.0.set_message(what.to_string());
    }
    fn advance(&self, n: u64) {
        self.0.inc(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_experiments::report::{ColumnSpec, ReportSpec, TableSpec};

    const COLS: &[ColumnSpec] = &[
        ColumnSpec::text("policy"),
        ColumnSpec::num("hit", 1).percent().header("hit ratio"),
        ColumnSpec::num("gain", 1).gain(),
        ColumnSpec::num("delay", 2).unit("s"),
    ];
    const T: TableSpec = TableSpec::new("t", "A table", COLS);
    const SPEC: ReportSpec = ReportSpec { name: "demo", title: "Demo", tables: &[&T] };

    fn report() -> Report {
        let mut r = Report::new(&SPEC);
        let mut t = Table::new(&T);
        t.push(vec!["lru".into(), 0.5.into(), 1.25.into(), 0.125.into()]);
        t.push(vec!["a, \"b\"".into(), Value::Null, 0.9.into(), 12.0.into()]);
        r.tables.push(t);
        r
    }

    #[test]
    fn people_see_aligned_shown_values() {
        let mut s = Vec::new();
        aligned(&mut s, &report().tables[0]).unwrap();
        let s = String::from_utf8(s).unwrap();
        assert_eq!(
            s,
            "policy  hit ratio    gain  delay (s)\nlru         50.0%  +25.0%       0.12\na, \"b\"          -  -10.0%      12.00\n"
        );
    }

    #[test]
    fn csv_quotes_and_keeps_full_values() {
        let mut s = Vec::new();
        csv(&mut s, &report().tables[0]).unwrap();
        assert_eq!(
            String::from_utf8(s).unwrap(),
            "policy,hit,gain,delay\nlru,0.5,1.25,0.125\n\"a, \"\"b\"\"\",,0.9,12\n"
        );
    }

    #[test]
    fn picking_a_table_teaches() {
        let mut r = report();
        assert!(pick(&r, None).is_ok());
        r.tables.push(Table { name: "u".into(), ..r.tables[0].clone() });
        let e = pick(&r, None).unwrap_err().to_string();
        assert!(e.contains("--table") && e.contains("t, u"), "{e}");
        assert!(pick(&r, Some("nope")).unwrap_err().to_string().contains("no table `nope`"));
    }
}
