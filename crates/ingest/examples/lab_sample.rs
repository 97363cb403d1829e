//! Writes `data/labdata/`, the synthetic stand-in for the Intel Berkeley Research Lab trace that
//! the tests and the sensor-field experiments read: `mote_locs.txt` and `data.txt.gz` from
//! `labdata::synthetic(1, 15.0)`, then reads them back and prints their sizes and light statistics.
//!
//! Run: `cargo run -p switchyard-ingest --example lab_sample [OUT_DIR] [HOURS]`
//! (the tests expect the defaults: change them there too).

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::PathBuf;

use flate2::Compression;
use flate2::write::GzEncoder;
use switchyard_ingest::labdata::{open_locations, open_readings, synthetic};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().unwrap_or_else(|| "data/labdata".into()));
    let hours: f64 = args.next().map_or(Ok(15.0), |s| s.parse())?;
    fs::create_dir_all(&dir)?;

    let (motes, readings) = synthetic(1, hours);
    let mut locations = String::new();
    for m in &motes {
        writeln!(locations, "{} {} {}", m.mote, m.x, m.y)?;
    }
    fs::write(dir.join("mote_locs.txt"), locations)?;
    let mut gz = GzEncoder::new(Vec::new(), Compression::best());
    gz.write_all(readings.as_bytes())?;
    let gz = gz.finish()?;
    fs::write(dir.join("data.txt.gz"), &gz)?;

    let motes = open_locations(&dir.join("mote_locs.txt"))?;
    let trace = open_readings(&dir.join("data.txt.gz"), &motes)?;
    let light: Vec<f64> = trace.readings.iter().filter_map(|r| r.light).collect();
    let (mean, sd) = mean_sd(&light);
    let per_mote: Vec<f64> = motes
        .iter()
        .map(|m| {
            let l: Vec<f64> = trace.readings.iter().filter(|r| r.mote == m.mote).filter_map(|r| r.light).collect();
            mean_sd(&l).1
        })
        .collect();
    println!(
        "{hours} h: {} lines, {} bytes ({} gzipped); {} readings of {} motes; {}",
        readings.lines().count(),
        readings.len(),
        gz.len(),
        trace.readings.len(),
        motes.len(),
        trace.skipped
    );
    println!(
        "light: mean {mean:.1} Lux, std dev {sd:.1} Lux over all readings, {:.1} Lux over time per mote (mean)",
        mean_sd(&per_mote).0
    );
    Ok(())
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    (mean, (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt())
}
