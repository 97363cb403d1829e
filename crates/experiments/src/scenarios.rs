//! The reproductions that are simulator scenarios (Guo's dissertation, ch. 4–7): their files,
//! built in, and a run of one as rows and comparisons with the published figures.
//!
//! Each scenario file says what it reproduces: its `[[published]]` claims name the figure, the
//! source and why ours may differ (see `switchyard_sim::scenario`).

use switchyard_sim::scenario::{Comparison, Scenario};
use switchyard_sim::summary::RunSummary;

use crate::ExperimentError;

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

/// Runs `scenario` on `threads` threads (the result is the same whatever their number), calling
/// `done` after each run.
pub fn run(scenario: &Scenario, threads: usize, done: &(dyn Fn() + Sync)) -> Result<Reproduction, ExperimentError> {
    let outcomes = scenario.run(threads, done)?;
    let rows = scenario.cases.iter().zip(&outcomes).map(|(c, o)| RunSummary::new(c, o)).collect();
    Ok(Reproduction { rows, comparisons: scenario.compare(&outcomes) })
}
