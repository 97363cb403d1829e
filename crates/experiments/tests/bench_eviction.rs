//! `bench eviction` called as a library, briefly: every workload at every size, every
//! contender, and a report whose rows are the run's figures.

mod common;

use switchyard_core::cache::Eviction;
use switchyard_experiments::bench::eviction::{self, Contender, SPEC, Setup, Workload};
use switchyard_experiments::report::Quiet;

fn small() -> Setup {
    Setup {
        requests: 6_000,
        objects: 800,
        fractions: vec![0.01, 0.5],
        timed: 500,
        seed: 3,
        hot_keys: vec![50, 400],
        purge_stored: vec![3_000],
    }
}

#[test]
fn eviction_reports_every_contender_on_every_trace_and_size() {
    let s = small();
    let results = eviction::run(&s, &Quiet);
    let runs = &results.runs;
    assert_eq!(runs.len(), Workload::ALL.len() * 2);
    for r in runs {
        assert_eq!(r.outcomes.len(), Contender::ALL.len());
        for o in &r.outcomes {
            assert!((0.0..=100.0).contains(&o.hit_ratio) && (0.0..=100.0).contains(&o.byte_hit_ratio));
            assert!(o.ns_per_get.is_some_and(|ns| ns > 0.0));
            if let Contender::Ours(_) = o.contender {
                assert!(o.peak_bytes <= r.capacity, "{} held {} over {}", o.contender.name(), o.peak_bytes, r.capacity);
            }
        }
    }
    // A bigger cache hits more, for every contender, on every trace.
    for pair in runs.chunks(2) {
        for c in Contender::ALL {
            assert!(pair[1].of(c).unwrap().hit_ratio > pair[0].of(c).unwrap().hit_ratio, "{}", c.name());
        }
    }
    let report = eviction::report(&s, &results, Eviction::DEFAULT);
    common::assert_report(&report, &SPEC);
    let hits = report.table("hit_ratio").unwrap();
    assert_eq!(hits.rows.len(), runs.len());
    for (run, cell) in runs.iter().zip(hits.cells("sieve")) {
        assert_eq!(cell.as_f64(), Some(run.of(Contender::Ours(Eviction::Sieve)).unwrap().hit_ratio));
    }
    for (run, cell) in runs.iter().zip(hits.cells("best")) {
        assert_eq!(cell.as_str(), Some(run.best().contender.name()));
    }
    let families = report.table("families").unwrap();
    let names: Vec<&str> = families.cells("family").filter_map(|v| v.as_str()).collect();
    assert_eq!(names, ["zipf", "zipf + scan", "shifting"]);
    let verdicts = eviction::verdicts(runs, Eviction::DEFAULT);
    for (v, cell) in verdicts.iter().zip(families.cells("worst_gap")) {
        assert_eq!(cell.as_f64(), Some(v.worst_gap));
        assert!(v.worst_gap <= 0.0, "the default is never better than the best");
    }
    assert!(families.notes.iter().any(|n| n.starts_with("issue 38's goal")), "{:?}", families.notes);
    // The byte hit ratio beside the goal's: one line per family, the default's mean from the runs.
    let bytes = report.table("byte_hit_ratio").unwrap();
    let zipf: Vec<f64> = runs
        .iter()
        .filter(|r| r.workload.family() == "zipf")
        .map(|r| r.of(Contender::Ours(Eviction::DEFAULT)).unwrap().byte_hit_ratio)
        .collect();
    let want = format!(
        "zipf: mean byte hit ratio, the default ({}) {:.2}%",
        Eviction::DEFAULT.name(),
        zipf.iter().sum::<f64>() / zipf.len() as f64
    );
    assert!(bytes.notes.iter().any(|n| n.starts_with(&want)), "{want:?} not in {:?}", bytes.notes);
    assert_eq!(bytes.notes.iter().filter(|n| n.contains("mean byte hit ratio")).count(), 3);
    assert!(report.table("lookup_cost").is_some());
    // The gateway's hit at each hot-key count, and one prefix purge per stored count, each
    // row the measurement it came from.
    let hot = report.table("hot_lookups").unwrap();
    let keys: Vec<f64> = hot.cells("keys").filter_map(|v| v.as_f64()).collect();
    assert_eq!(keys, [50.0, 400.0]);
    for (h, cell) in results.hot.iter().zip(hot.cells("vs_moka")) {
        assert!(h.hit_ns > 0.0 && h.use_entry_ns > 0.0 && h.moka_ns > 0.0, "{h:?}");
        assert_eq!(cell.as_f64(), Some(h.hit_ns / h.moka_ns));
    }
    let purges = report.table("prefix_purge").unwrap();
    assert_eq!(purges.rows.len(), 1);
    let p = results.purges[0];
    assert_eq!((p.stored, p.purged), (3_000, 3_000 / eviction::PURGE_SECTIONS), "one section of the keys purged");
    assert_eq!(purges.cells("purged").next().and_then(|v| v.as_f64()), Some(30.0));
}

/// LRU keeps nothing of the Zipf load through a scan; the scan-resistant policies do, and a
/// trace is the same for the same seed.
#[test]
fn scans_hurt_lru_more_than_the_scan_resistant_policies_and_traces_are_seeded() {
    let s = Setup { requests: 40_000, objects: 2_000, fractions: vec![0.1], timed: 0, seed: 5, ..Setup::default() };
    let a = eviction::trace(Workload::ZipfScan, &s);
    let b = eviction::trace(Workload::ZipfScan, &s);
    assert_eq!((a.requests.clone(), a.sizes.clone()), (b.requests, b.sizes));
    let results = eviction::run(&s, &Quiet);
    assert!(results.hot.is_empty() && results.purges.is_empty(), "no timing, no hot lookups nor purges");
    let scan = results.runs.iter().find(|r| r.workload == Workload::ZipfScan).unwrap();
    let lru = scan.of(Contender::Ours(Eviction::Lru)).unwrap().hit_ratio;
    for e in [Eviction::TinyLfu, Eviction::S3Fifo] {
        let h = scan.of(Contender::Ours(e)).unwrap().hit_ratio;
        assert!(h > lru + 1.0, "{e}: {h:.2}% against LRU's {lru:.2}%");
    }
    let report = eviction::report(&s, &results, Eviction::DEFAULT);
    common::assert_report(&report, &SPEC);
    assert!(report.table("lookup_cost").is_none(), "no timing, no lookup table");
    assert!(report.table("hot_lookups").is_none() && report.table("prefix_purge").is_none());
}
