//! `switchyard bench inspect --peer ndpi`: the mapping to
//! `switchyard_experiments::bench::ndpi`, whose suite makes the report.

use std::path::{Path, PathBuf};

use anyhow::Result;
use switchyard_experiments::bench::ndpi;

pub(crate) fn run(
    connections: u32,
    sample: &Path,
    extra: &[PathBuf],
    rounds: usize,
    output: &crate::print::Output,
) -> Result<()> {
    let suite = ndpi::suite(connections, sample, extra, rounds, &crate::print::Bar::new())?;
    output.emit(&suite.report(connections, rounds))
}
