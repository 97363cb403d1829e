//! The fuzzer's corpus for the sensor trace readers (fuzz/corpus/labdata), replayed on stable
//! Rust in every test run with the fuzz target's checks: each input reads as a readings file and
//! as a locations file to a result, never a panic; readings that come back are sorted, from listed
//! motes, with a light value, and every line is either a reading or counted as skipped.

use switchyard_ingest::labdata::{MoteLocation, read_locations, read_readings};

#[test]
fn the_fuzz_corpus_reads_without_panicking() {
    let motes: Vec<MoteLocation> = (1..=54).map(|mote| MoteLocation { mote, x: 0.0, y: 0.0 }).collect();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/labdata");
    let (mut files, mut read) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        if let Ok(trace) = read_readings(data.as_slice(), &motes) {
            let lines = data.split(|&b| b == b'\n').count() - usize::from(data.ends_with(b"\n"));
            assert_eq!(trace.readings.len() as u64 + trace.skipped.total(), lines as u64, "{}", path.display());
            assert!(trace.readings.is_sorted_by(|a, b| a.time_s <= b.time_s), "{}", path.display());
            assert!(trace.readings.iter().all(|r| (1..=54).contains(&r.mote) && r.light.is_some()));
            read += 1;
        }
        if let Ok(found) = read_locations(data.as_slice()) {
            assert!(!found.is_empty() && found.iter().all(|m| m.x.is_finite() && m.y.is_finite()));
        }
        files += 1;
    }
    assert!(files > 50 && read > 10, "the corpus is in the repository: {files} files, {read} with readings");
}
