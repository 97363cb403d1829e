//! `switchyard reproduce yates-cache`'s options; the run and its report are
//! `switchyard_experiments::yates_cache`'s.

use anyhow::Result;
use switchyard_core::cache::{AgeFrom, Rule};
use switchyard_experiments::yates_cache::{self, Setup};
use switchyard_sim::models::sensor::Stations;

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
    let setup = Setup {
        tables: a.tables.clone(),
        scale: a.scale,
        seed: a.seed,
        threads: crate::reproduce::threads(a.threads),
        age_from: a.age_from,
        stations: match a.stations {
            StationsArg::Quadrants => Stations::Quadrants,
            StationsArg::Corners => Stations::Corners,
        },
        neighbourhood: a.lab.neighbourhood,
        lattice_neighbourhood: match a.lattice_neighbourhood.as_str() {
            "faces" => None,
            other => {
                Some(other.parse::<Rule>().map_err(|e| anyhow::anyhow!("--lattice-neighbourhood: {e}, or `faces`"))?)
            }
        },
        keep_approximations: a.keep_approximations,
    };
    // The trace is read only when a chosen table runs on it.
    let trace = if yates_cache::chosen(&setup.tables)?.iter().any(|t| !t.lattice) {
        Some(yates_cache::lab_trace(&a.lab.lab_data, &a.lab.lab_locs)?)
    } else {
        None
    };
    let bar = crate::print::Bar::new();
    let runs = yates_cache::run(&setup, trace.as_ref().map(|t| &t.0), &bar)?;
    drop(bar);
    a.output.emit(&yates_cache::report(&setup, &runs, trace.as_ref().map(|t| t.1.as_str())))
}
