#![no_main]
//! Any bytes as an Intel lab trace's readings file and as its mote locations file: both readers
//! return a result, never a panic; readings that come back are sorted, from listed motes, with a
//! light value, and every line is either a reading or counted as skipped.

use libfuzzer_sys::fuzz_target;
use switchyard_ingest::labdata::{MoteLocation, read_locations, read_readings};

fuzz_target!(|data: &[u8]| {
    let motes: Vec<MoteLocation> = (1..=54).map(|mote| MoteLocation { mote, x: 0.0, y: 0.0 }).collect();
    if let Ok(trace) = read_readings(data, &motes) {
        let lines = data.split(|&b| b == b'\n').count() - usize::from(data.ends_with(b"\n"));
        assert_eq!(trace.readings.len() as u64 + trace.skipped.total(), lines as u64);
        assert!(trace.readings.is_sorted_by(|a, b| a.time_s <= b.time_s));
        assert!(trace.readings.iter().all(|r| (1..=54).contains(&r.mote) && r.light.is_some()));
        let _ = trace.skipped.to_string();
    }
    match read_locations(data) {
        Ok(found) => {
            assert!(!found.is_empty());
            assert!(found.iter().all(|m| m.x.is_finite() && m.y.is_finite()));
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
