//! `switchyard bench inspect --live`: the mapping to `switchyard_experiments::bench::live`,
//! which runs the test bed and makes the report.

use std::path::Path;

use anyhow::Result;
use switchyard_experiments::bench::live;

pub(crate) fn run(sample: &Path, output: &crate::print::Output) -> Result<()> {
    let report = live::report(sample, &crate::print::Bar::new())?;
    output.emit(&report)
}
