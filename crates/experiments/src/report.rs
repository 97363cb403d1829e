//! The one result type of the evidence: a [`Report`] is named tables (typed columns with units,
//! rows of values), the published claims beside ours, the parameters the run used, notes that
//! say why, and the charts to draw from the tables.
//!
//! Every reproduction and benchmark returns one; the binary has one printer for all of them
//! (aligned tables, JSON, CSV, SVG charts), and the Python package hands each table out as a
//! DataFrame: `pandas.DataFrame(t["rows"], columns=[c["name"] for c in t["columns"]])`, no
//! reshaping.
//!
//! What a report may hold is declared before it runs: each reproduction and benchmark has a
//! [`ReportSpec`] of static [`TableSpec`]s, from which [`schema`] writes a JSON Schema (draft
//! 2020-12) that the report's JSON is checked against in the tests, and which `switchyard
//! schema` prints without running anything.

use serde::{Deserialize, Serialize};
use serde_json::{Value as Json, json};

/// A cell: a number, text, a flag, or nothing (not measured, not applicable).
///
/// Serialised untagged, so a row is a plain JSON array (`[ "hrw", 0.97, 12 ]`). A float that is
/// not finite is stored as [`Value::Null`]: JSON has no NaN.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// Not measured or not applicable.
    Null,
    /// A flag.
    Bool(bool),
    /// A count.
    Int(i64),
    /// A measure.
    Float(f64),
    /// A name or words.
    Text(String),
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        if v.is_finite() { Self::Float(v) } else { Self::Null }
    }
}
impl From<f32> for Value {
    fn from(v: f32) -> Self {
        f64::from(v).into()
    }
}
macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self {
                // Counts beyond i64 do not occur in a report; saturate rather than wrap.
                Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
    )*};
}
from_int!(i32, i64, u32, u64, usize, u16, u8);
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Self::Text(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Self::Text(v)
    }
}
impl<T: Into<Self>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

impl Value {
    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Int(i) => Some(*i as f64),
            Self::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The value as text, if it is text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Text(s) => Some(s),
            _ => None,
        }
    }
}

/// What a column holds (its JSON type; every column may also hold null).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Names and words.
    Text,
    /// Counts.
    Integer,
    /// Measures.
    Number,
    /// Flags.
    Boolean,
}

/// How a person reads a number column (JSON and CSV always carry the value itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Show {
    /// The value, to `digits` places.
    #[default]
    Plain,
    /// A fraction shown as a percentage (0.25 → `25.0%`).
    Percent,
    /// A ratio shown as a signed gain (1.25 → `+25.0%`).
    Gain,
    /// The value with its sign (`+0.12`).
    Signed,
}

/// A column declared before the run: name (the key in JSON and the CSV header), the header a
/// person reads, the unit, the type, and how many places to show.
#[derive(Clone, Copy, Debug)]
pub struct ColumnSpec {
    /// Machine name: `snake_case`, stable across releases.
    pub name: &'static str,
    /// What a person reads over the column (defaults to the name).
    pub header: &'static str,
    /// The unit (`s`, `MB/s`, `ns`), or "" for a pure number.
    pub unit: &'static str,
    /// The type.
    pub kind: Kind,
    /// How a person reads it.
    pub show: Show,
    /// Decimal places a person sees.
    pub digits: u8,
    /// What it measures, for the schema and `--help` of a report.
    pub about: &'static str,
}

impl ColumnSpec {
    const fn new(name: &'static str, kind: Kind, digits: u8) -> Self {
        Self { name, header: name, unit: "", kind, show: Show::Plain, digits, about: "" }
    }
    /// A text column.
    pub const fn text(name: &'static str) -> Self {
        Self::new(name, Kind::Text, 0)
    }
    /// A count.
    pub const fn int(name: &'static str) -> Self {
        Self::new(name, Kind::Integer, 0)
    }
    /// A measure shown to `digits` places.
    pub const fn num(name: &'static str, digits: u8) -> Self {
        Self::new(name, Kind::Number, digits)
    }
    /// A flag.
    pub const fn flag(name: &'static str) -> Self {
        Self::new(name, Kind::Boolean, 0)
    }
    /// With the header a person reads.
    pub const fn header(mut self, header: &'static str) -> Self {
        self.header = header;
        self
    }
    /// With a unit.
    pub const fn unit(mut self, unit: &'static str) -> Self {
        self.unit = unit;
        self
    }
    /// Shown as a percentage of a fraction.
    pub const fn percent(mut self) -> Self {
        self.show = Show::Percent;
        self
    }
    /// Shown as a signed gain of a ratio.
    pub const fn gain(mut self) -> Self {
        self.show = Show::Gain;
        self
    }
    /// Shown with its sign.
    pub const fn signed(mut self) -> Self {
        self.show = Show::Signed;
        self
    }
    /// With what it measures.
    pub const fn about(mut self, about: &'static str) -> Self {
        self.about = about;
        self
    }
}

/// A table declared before the run.
#[derive(Clone, Copy, Debug)]
pub struct TableSpec {
    /// Machine name (the CSV file's stem, `--table NAME`).
    pub name: &'static str,
    /// What a person reads over it.
    pub title: &'static str,
    /// Its columns; empty for a table whose columns depend on the run (then `open`).
    pub columns: &'static [ColumnSpec],
    /// Whether the columns are decided by the run (e.g. one per scheme asked for).
    pub open: bool,
    /// Whether a run may leave it out (it depends on an option, or a peer that may be missing).
    pub optional: bool,
}

impl TableSpec {
    /// A table that every run gives, with fixed columns.
    pub const fn new(name: &'static str, title: &'static str, columns: &'static [ColumnSpec]) -> Self {
        Self { name, title, columns, open: false, optional: false }
    }
    /// Given only by some runs.
    pub const fn optional(mut self) -> Self {
        self.optional = true;
        self
    }
    /// Columns decided by the run.
    pub const fn open(mut self) -> Self {
        self.open = true;
        self
    }
}

/// What one reproduction or benchmark may report.
#[derive(Clone, Copy, Debug)]
pub struct ReportSpec {
    /// The command's name (`dou-rgedf`, `bench-mux`).
    pub name: &'static str,
    /// One line on what it reproduces or measures.
    pub title: &'static str,
    /// The tables it may give.
    pub tables: &'static [&'static TableSpec],
}

/// A column of a [`Table`], as serialised.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Column {
    /// Machine name.
    pub name: String,
    /// What a person reads over it.
    pub header: String,
    /// The unit, or "".
    #[serde(default)]
    pub unit: String,
    /// The type.
    pub kind: Kind,
    /// How a person reads it.
    #[serde(default)]
    pub show: Show,
    /// Decimal places a person sees.
    #[serde(default)]
    pub digits: u8,
    /// What it measures.
    #[serde(default)]
    pub about: String,
}

impl From<&ColumnSpec> for Column {
    fn from(c: &ColumnSpec) -> Self {
        Self {
            name: c.name.into(),
            header: c.header.into(),
            unit: c.unit.into(),
            kind: c.kind,
            show: c.show,
            digits: c.digits,
            about: c.about.into(),
        }
    }
}

/// A named table of typed rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Machine name.
    pub name: String,
    /// What a person reads over it.
    pub title: String,
    /// The columns, in order.
    pub columns: Vec<Column>,
    /// The rows, each as long as `columns`.
    pub rows: Vec<Vec<Value>>,
    /// Lines a person reads under the table (a goal, what a column means here).
    #[serde(default)]
    pub notes: Vec<String>,
    /// A column whose change of value starts a new group of rows: a person sees a blank line
    /// between groups (the data is the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl Table {
    /// An empty table of a declared shape.
    pub fn new(spec: &TableSpec) -> Self {
        Self {
            name: spec.name.into(),
            title: spec.title.into(),
            columns: spec.columns.iter().map(Column::from).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
            group: None,
        }
    }

    /// Rows are grouped by `column` for a person (a blank line where its value changes).
    pub fn grouped_by(mut self, column: &str) -> Self {
        self.group = Some(column.into());
        self
    }

    /// An empty table of an open spec, with the columns this run decided.
    pub fn with_columns(spec: &TableSpec, columns: Vec<Column>) -> Self {
        debug_assert!(spec.open, "table `{}` is declared with fixed columns", spec.name);
        Self { columns, ..Self::new(spec) }
    }

    /// Adds a row.
    ///
    /// # Panics
    /// If the row's length is not the number of columns: that is a mistake in the code that
    /// builds the table, not in any input.
    pub fn push(&mut self, row: Vec<Value>) {
        assert_eq!(row.len(), self.columns.len(), "a row of table `{}` has the wrong number of cells", self.name);
        self.rows.push(row);
    }

    /// Adds a note under the table.
    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// The index of column `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The cells of column `name`, top to bottom.
    pub fn cells<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Value> + 'a {
        let i = self.column(name);
        self.rows.iter().filter_map(move |r| i.map(|i| &r[i]))
    }
}

/// A parameter the run used, so that a report states how it was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Parameter {
    /// Its name (the option's, where one sets it).
    pub name: String,
    /// Its value.
    pub value: Value,
    /// What it is.
    #[serde(default)]
    pub about: String,
}

/// A published figure beside ours.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// What is claimed.
    pub claim: String,
    /// Where (paper, section, figure).
    pub source: String,
    /// The published figure, where the source gives a number.
    pub published: Option<f64>,
    /// The published figure as the source words it.
    pub published_text: String,
    /// Ours, where we model it.
    pub ours: Option<f64>,
    /// Ours as a person reads it.
    pub ours_text: String,
    /// Ours over published, minus one, when both are numbers.
    pub difference: Option<f64>,
    /// Why ours differs.
    pub why: String,
}

impl From<&crate::claim::Claim> for Claim {
    fn from(c: &crate::claim::Claim) -> Self {
        Self {
            claim: c.claim.into(),
            source: c.source.into(),
            published: c.published,
            published_text: c.published_text.into(),
            ours: c.ours,
            ours_text: c.ours_text(),
            difference: c.difference().filter(|d| d.is_finite()),
            why: c.why.into(),
        }
    }
}

/// How a chart's line is drawn: what it is tells the reader how to read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LineStyle {
    /// A measure: a line through marked points.
    #[default]
    Measured,
    /// A model: dashed.
    Model,
    /// Published figures: crosses, no line.
    Published,
}

/// One y column of a chart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// The column drawn.
    pub column: String,
    /// How.
    #[serde(default)]
    pub style: LineStyle,
}

/// A chart to draw from one table: x against one or more y columns, one line per y column, or
/// per distinct value of `series` when that is given. When x is a text column the chart is a
/// bar per row instead (labelled by its `series` and x values, coloured by `series`; `log_y`
/// makes the values' axis logarithmic).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Chart {
    /// The file stem of its SVG.
    pub name: String,
    /// Its title.
    pub title: String,
    /// The table it draws.
    pub table: String,
    /// The x column.
    pub x: String,
    /// The y columns.
    pub y: Vec<Line>,
    /// A text column: one line per distinct value of it (for each y column).
    #[serde(default)]
    pub series: Option<String>,
    /// The x axis's label (with its unit).
    pub x_label: String,
    /// The y axis's label (with its unit).
    pub y_label: String,
    /// Logarithmic x axis.
    #[serde(default)]
    pub log_x: bool,
    /// Logarithmic y axis (for quantities that span decades, like tail latencies).
    #[serde(default)]
    pub log_y: bool,
}

impl Chart {
    /// A chart of `table`'s `y` columns (measured) against `x`.
    pub fn new(name: &str, title: &str, table: &str, x: &str, y: &[&str]) -> Self {
        Self {
            name: name.into(),
            title: title.into(),
            table: table.into(),
            x: x.into(),
            y: y.iter().map(|c| Line { column: (*c).into(), style: LineStyle::Measured }).collect(),
            series: None,
            x_label: x.into(),
            y_label: y.join(", "),
            log_x: false,
            log_y: false,
        }
    }
    /// One line per distinct value of text column `column`.
    pub fn by(mut self, column: &str) -> Self {
        self.series = Some(column.into());
        self
    }
    /// With axis labels.
    pub fn labels(mut self, x: &str, y: &str) -> Self {
        self.x_label = x.into();
        self.y_label = y.into();
        self
    }
    /// With logarithmic axes.
    pub fn log(mut self, x: bool, y: bool) -> Self {
        self.log_x = x;
        self.log_y = y;
        self
    }
    /// Draws y column `column` as `style` (e.g. the published figures as crosses).
    pub fn styled(mut self, column: &str, style: LineStyle) -> Self {
        for l in &mut self.y {
            if l.column == column {
                l.style = style;
            }
        }
        self
    }
}

/// The result of one reproduction or benchmark.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The command's name (its [`ReportSpec`]'s).
    pub name: String,
    /// What it reproduces or measures.
    pub title: String,
    /// What the run used.
    pub parameters: Vec<Parameter>,
    /// The machine it ran on (CPU model, cores, L3), where timing matters.
    #[serde(default)]
    pub machine: Option<String>,
    /// The tables.
    pub tables: Vec<Table>,
    /// Published figures beside ours.
    #[serde(default)]
    pub claims: Vec<Claim>,
    /// Why the figures are what they are.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Charts to draw from the tables.
    #[serde(default)]
    pub charts: Vec<Chart>,
}

impl Report {
    /// An empty report of `spec`'s command.
    pub fn new(spec: &ReportSpec) -> Self {
        Self {
            name: spec.name.into(),
            title: spec.title.into(),
            parameters: Vec::new(),
            machine: None,
            tables: Vec::new(),
            claims: Vec::new(),
            notes: Vec::new(),
            charts: Vec::new(),
        }
    }

    /// Records a parameter.
    pub fn param(&mut self, name: &str, value: impl Into<Value>, about: &str) -> &mut Self {
        self.parameters.push(Parameter { name: name.into(), value: value.into(), about: about.into() });
        self
    }

    /// Adds a note.
    pub fn note(&mut self, text: impl Into<String>) -> &mut Self {
        self.notes.push(text.into());
        self
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// Appends `other`'s tables, claims, notes and charts (for a command that runs parts).
    pub fn absorb(&mut self, other: Self) {
        self.tables.extend(other.tables);
        self.claims.extend(other.claims);
        self.notes.extend(other.notes);
        self.charts.extend(other.charts);
    }
}

/// Reports progress on long work. The experiments call it; the binary draws it (a bar on stderr,
/// nothing when stderr is not a terminal); tests pass [`Quiet`].
pub trait Progress: Send + Sync {
    /// A new stage of `total` steps.
    fn stage(&self, what: &str, total: u64);
    /// `n` more steps of the stage done.
    fn advance(&self, n: u64);
}

/// Progress that nobody watches.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn stage(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
}

fn column_type(kind: Kind) -> Json {
    let t = match kind {
        Kind::Text => "string",
        Kind::Integer => "integer",
        Kind::Number => "number",
        Kind::Boolean => "boolean",
    };
    json!({ "type": [t, "null"] })
}

fn table_schema(t: &TableSpec) -> Json {
    let n = t.columns.len();
    let (columns, rows) = if t.open {
        (
            json!({ "type": "array", "items": { "$ref": "#/$defs/column" } }),
            json!({ "type": "array", "items": { "type": "array", "items": { "$ref": "#/$defs/value" } } }),
        )
    } else {
        let cols: Vec<Json> = t
            .columns
            .iter()
            .map(|c| {
                json!({
                    "allOf": [{ "$ref": "#/$defs/column" }],
                    "properties": { "name": { "const": c.name }, "kind": { "const": c.kind }, "unit": { "const": c.unit } },
                    "description": c.about,
                })
            })
            .collect();
        let cells: Vec<Json> = t.columns.iter().map(|c| column_type(c.kind)).collect();
        (
            json!({ "type": "array", "prefixItems": cols, "minItems": n, "maxItems": n }),
            json!({ "type": "array", "items": { "type": "array", "prefixItems": cells, "minItems": n, "maxItems": n } }),
        )
    };
    json!({
        "type": "object",
        "description": t.title,
        "required": ["name", "title", "columns", "rows"],
        "properties": {
            "name": { "const": t.name },
            "title": { "type": "string" },
            "columns": columns,
            "rows": rows,
            "notes": { "type": "array", "items": { "type": "string" } },
            "group": { "type": "string" },
        },
    })
}

/// The JSON Schema (draft 2020-12) of `spec`'s reports.
pub fn schema(spec: &ReportSpec) -> Json {
    let tables: Vec<Json> = spec.tables.iter().map(|t| table_schema(t)).collect();
    let required: Vec<Json> = spec
        .tables
        .iter()
        .filter(|t| !t.optional)
        .map(|t| json!({ "contains": { "type": "object", "properties": { "name": { "const": t.name } }, "required": ["name"] } }))
        .collect();
    let string_array = json!({ "type": "array", "items": { "type": "string" } });
    // A report whose every table is optional (a command with modes) requires none; JSON Schema
    // forbids an empty `allOf`.
    let mut tables = json!({ "type": "array", "items": { "anyOf": tables } });
    if !required.is_empty() {
        tables["allOf"] = Json::Array(required);
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("https://switchyard.invalid/schema/{}.json", spec.name),
        "title": format!("switchyard {}: {}", spec.name, spec.title),
        "description": "A report: named tables of typed rows (a table maps to a DataFrame: rows with the columns' names), the parameters of the run, published figures beside ours, notes and charts.",
        "type": "object",
        "required": ["name", "title", "parameters", "tables"],
        "properties": {
            "name": { "const": spec.name },
            "title": { "type": "string" },
            "machine": { "type": ["string", "null"] },
            "parameters": { "type": "array", "items": {
                "type": "object", "required": ["name", "value"],
                "properties": { "name": { "type": "string" }, "value": { "$ref": "#/$defs/value" }, "about": { "type": "string" } },
            } },
            "tables": tables,
            "claims": { "type": "array", "items": {
                "type": "object",
                "required": ["claim", "source", "published", "published_text", "ours", "ours_text", "difference", "why"],
                "properties": {
                    "claim": { "type": "string" }, "source": { "type": "string" },
                    "published": { "type": ["number", "null"] }, "published_text": { "type": "string" },
                    "ours": { "type": ["number", "null"] }, "ours_text": { "type": "string" },
                    "difference": { "type": ["number", "null"] }, "why": { "type": "string" },
                },
            } },
            "notes": string_array,
            "charts": { "type": "array", "items": {
                "type": "object", "required": ["name", "title", "table", "x", "y", "x_label", "y_label"],
                "properties": {
                    "name": { "type": "string" }, "title": { "type": "string" }, "table": { "type": "string" },
                    "x": { "type": "string" },
                    "y": { "type": "array", "items": { "type": "object", "required": ["column"], "properties": {
                        "column": { "type": "string" }, "style": { "enum": ["measured", "model", "published"] } } } },
                    "series": { "type": ["string", "null"] },
                    "x_label": { "type": "string" }, "y_label": { "type": "string" },
                    "log_x": { "type": "boolean" }, "log_y": { "type": "boolean" },
                },
            } },
        },
        "$defs": {
            "value": { "type": ["number", "string", "boolean", "null"] },
            "column": {
                "type": "object", "required": ["name", "header", "kind"],
                "properties": {
                    "name": { "type": "string" }, "header": { "type": "string" }, "unit": { "type": "string" },
                    "kind": { "enum": ["text", "integer", "number", "boolean"] },
                    "show": { "enum": ["plain", "percent", "gain", "signed"] },
                    "digits": { "type": "integer", "minimum": 0 }, "about": { "type": "string" },
                },
            },
        },
    })
}

/// Checks that `report` is what `spec` declares, beyond what the schema can say: every table
/// is declared, every declared-fixed table has exactly its columns, each chart names a table
/// and its columns. Returns the first mismatch.
pub fn conforms(report: &Report, spec: &ReportSpec) -> Result<(), String> {
    if report.name != spec.name {
        return Err(format!("report `{}` checked against spec `{}`", report.name, spec.name));
    }
    for t in &report.tables {
        let Some(s) = spec.tables.iter().find(|s| s.name == t.name) else {
            return Err(format!("table `{}` is not declared in {}'s spec", t.name, spec.name));
        };
        if !s.open {
            let want: Vec<&str> = s.columns.iter().map(|c| c.name).collect();
            let got: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
            if want != got {
                return Err(format!("table `{}` has columns {got:?}, declared {want:?}", t.name));
            }
        }
        for (i, row) in t.rows.iter().enumerate() {
            for (c, v) in t.columns.iter().zip(row) {
                let ok = matches!(
                    (c.kind, v),
                    (_, Value::Null)
                        | (Kind::Text, Value::Text(_))
                        | (Kind::Integer, Value::Int(_))
                        | (Kind::Number, Value::Float(_) | Value::Int(_))
                        | (Kind::Boolean, Value::Bool(_))
                );
                if !ok {
                    return Err(format!("table `{}` row {i} column `{}` ({:?}) holds {v:?}", t.name, c.name, c.kind));
                }
            }
        }
    }
    for s in spec.tables.iter().filter(|s| !s.optional) {
        if report.table(s.name).is_none() {
            return Err(format!("table `{}` is missing", s.name));
        }
    }
    for ch in &report.charts {
        let Some(t) = report.table(&ch.table) else {
            return Err(format!("chart `{}` draws table `{}`, which the report does not have", ch.name, ch.table));
        };
        for col in std::iter::once(&ch.x).chain(ch.y.iter().map(|l| &l.column)).chain(ch.series.iter()) {
            if t.column(col).is_none() {
                return Err(format!(
                    "chart `{}` names column `{col}`, which table `{}` does not have",
                    ch.name, t.name
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: &[ColumnSpec] = &[
        ColumnSpec::text("policy"),
        ColumnSpec::num("hit_ratio", 3).percent(),
        ColumnSpec::int("runs"),
        ColumnSpec::flag("met"),
    ];
    const T: TableSpec = TableSpec::new("results", "Results", COLS);
    const SPEC: ReportSpec = ReportSpec { name: "demo", title: "a demo", tables: &[&T] };

    fn demo() -> Report {
        let mut r = Report::new(&SPEC);
        r.param("seed", 1u64, "the root seed");
        let mut t = Table::new(&T);
        t.push(vec!["lru".into(), 0.5.into(), 3u64.into(), true.into()]);
        t.push(vec!["hrw".into(), f64::NAN.into(), 4u64.into(), Value::Null]);
        t.push(vec!["x".into(), 3.0.into(), 0u64.into(), false.into()]);
        r.tables.push(t);
        r.charts.push(Chart::new("hits", "Hits", "results", "runs", &["hit_ratio"]));
        r
    }

    #[test]
    fn a_report_round_trips_through_json_and_conforms() {
        let r = demo();
        conforms(&r, &SPEC).unwrap();
        let text = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        // 3.0 stays a float and 3 an integer through JSON.
        assert_eq!(back.tables[0].rows[2][1], Value::Float(3.0));
        assert_eq!(back.tables[0].rows[0][2], Value::Int(3));
    }

    #[test]
    fn a_mismatch_is_named() {
        let mut r = demo();
        r.tables[0].rows[0][2] = Value::Text("three".into());
        assert!(conforms(&r, &SPEC).unwrap_err().contains("column `runs`"));
        let mut r = demo();
        r.charts[0].x = "nope".into();
        assert!(conforms(&r, &SPEC).unwrap_err().contains("`nope`"));
        let mut r = demo();
        r.tables.clear();
        r.charts.clear();
        assert!(conforms(&r, &SPEC).unwrap_err().contains("missing"));
    }

    #[test]
    #[should_panic(expected = "wrong number of cells")]
    fn a_short_row_is_a_bug() {
        Table::new(&T).push(vec!["only".into()]);
    }
}
