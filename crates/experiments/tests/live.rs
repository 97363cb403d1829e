//! Live inspection of a real interface: a veth pair in a namespace of the test's own, fed by
//! tcpreplay with the shipped sample. Skipped with a message where namespaces, raw sockets or
//! tcpreplay are not available.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use switchyard_experiments::bench::live::{Veth, run_once};
use switchyard_ingest::ConnConfig;
use switchyard_ingest::live::RingConfig;
use switchyard_runtime::inspect::Inspector;
use switchyard_runtime::live::{LiveCounts, inspect_live};
use switchyard_runtime::tracegen::check_labels;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/labelled.pcap");
const LABELS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/labelled.csv");

fn veth() -> Option<Veth> {
    match Veth::new() {
        Ok(v) => Some(v),
        Err(why) => {
            eprintln!("SKIPPED: no live test bed here: {why:#}");
            None
        }
    }
}

#[test]
fn the_replayed_sample_is_named_as_from_the_file_by_one_worker_and_by_two() {
    let Some(veth) = veth() else { return };
    for workers in [1, 2] {
        let run = run_once(&veth, Path::new(SAMPLE), workers, Some(20_000), 1).unwrap();
        let s = &run.report.summary;
        assert_eq!(run.report.ring.drops, 0, "{workers} workers dropped frames at 20,000 pps");
        assert_eq!(s.packets, 3155, "{workers} workers: every TCP and UDP packet of the sample");
        assert_eq!(s.conns.len(), 500);
        let check = check_labels(&s.conns, std::fs::File::open(LABELS).unwrap()).unwrap();
        assert!(check.missed.is_empty(), "{workers} workers: {:?}", &check.missed[..check.missed.len().min(5)]);
    }
}

#[test]
fn an_interface_that_disappears_is_a_clear_error_not_a_hang() {
    let Some(veth) = veth() else { return };
    let stop = Arc::new(AtomicBool::new(false));
    let counts = LiveCounts::default();
    let inspector = Inspector::new();
    let outcome = std::thread::scope(|s| {
        let reading = s.spawn(|| {
            veth.inside(|| {
                inspect_live(Veth::CAPTURE, 1, RingConfig::default(), ConnConfig::default(), &inspector, &stop, &counts)
            })
        });
        while counts.rings.lock().unwrap().is_empty() && !reading.is_finished() {
            std::thread::sleep(Duration::from_millis(5));
        }
        veth.pull_the_plug().unwrap();
        // A run that did not notice would wait for ever: stop it after a while, and fail below.
        for _ in 0..100 {
            if reading.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let noticed = reading.is_finished();
        stop.store(true, Ordering::Relaxed);
        (noticed, reading.join().unwrap().unwrap())
    });
    let (noticed, result) = outcome;
    assert!(noticed, "the run went on after its interface was deleted");
    let e = result.expect_err("an interface deleted under a run is an error");
    assert!(e.to_string().contains("went away"), "{e}");
}
