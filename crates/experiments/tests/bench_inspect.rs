//! `bench inspect` called as a library, briefly: every policy on both generated traces beside
//! the simulator, and a report whose rows are the run's figures; `--peer ndpi` reports what it
//! compared, or that ndpiReader is missing.

mod common;

use switchyard_core::Policy;
use switchyard_experiments::bench::{inspect, ndpi};
use switchyard_experiments::report::Quiet;
use switchyard_runtime::inspect::Engine;

#[test]
fn inspect_runs_every_policy_on_both_generated_traces_beside_the_simulator() {
    let setup = inspect::Setup {
        connections: 150,
        elephants: 0.05,
        workers: 2,
        repeat: 1,
        queue: 256,
        batch: 8,
        engine: Engine::Combined,
        sample: None,
    };
    let runs = inspect::run(&setup, &Quiet).unwrap();
    assert_eq!(runs.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["uniform", "skewed"]);
    for t in &runs {
        assert!(t.packets > 150 && t.rounds >= 1, "{t:?}");
        assert!(t.serial_pps > 0.0 && t.producer_ns > 0.0 && t.ceiling >= 1.0, "{t:?}");
        let policies: Vec<Policy> = t.policies.iter().map(|p| p.policy).collect();
        assert_eq!(policies, inspect::POLICIES);
        for p in &t.policies {
            assert!(p.packets_per_s > 0.0 && p.over_serial > 0.0 && p.sim_own > 0.0, "{p:?}");
            assert!((0.0..=1.0).contains(&p.blocked), "{p:?}");
        }
        let mod_n = &t.policies[0];
        assert!((mod_n.over_static - 1.0).abs() < 1e-9, "static hash over itself is 1: {mod_n:?}");
    }

    let report = inspect::report(&setup, "combined", &runs, Some("sample: left out"));
    common::assert_report(&report, &inspect::SPEC);
    assert_eq!(report.table("traces").unwrap().rows.len(), 2);
    let policies = report.table("policies").unwrap();
    assert_eq!(policies.rows.len(), 2 * inspect::POLICIES.len());
    let over: Vec<Option<f64>> = policies.cells("over_serial").map(|v| v.as_f64()).collect();
    let want: Vec<Option<f64>> = runs.iter().flat_map(|t| t.policies.iter().map(|p| Some(p.over_serial))).collect();
    assert_eq!(over, want);
    assert_eq!(report.table("sharded").unwrap().rows.len(), 2 * inspect::SHARDED.len());
    // The goals: speed-up and CPU on each trace, the producer's on the first (no sample), and
    // the skewed trace's.
    let notes = report.notes.join("\n");
    assert_eq!(notes.matches("(issue 21's goal with --kernel sequential ≥ 1.7×)").count(), 2, "{notes}");
    assert!(notes.contains("producer alone on the uniform trace") && notes.contains("skewed trace: AHRW"), "{notes}");
    assert!(notes.contains("sample: left out"), "{notes}");
}

#[test]
fn the_ndpi_comparison_reports_its_captures_or_that_ndpi_reader_is_missing() {
    let sample = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/labelled.pcap"));
    let suite = ndpi::suite(50, sample, &[], 1, &Quiet).unwrap();
    let report = suite.report(50, 1);
    common::assert_report(&report, &inspect::SPEC);
    match &suite.reader {
        None => {
            assert!(report.tables.is_empty());
            assert!(report.notes.iter().any(|n| n.contains("ndpiReader is not installed")), "{:?}", report.notes);
        }
        Some(_) => {
            let caps = report.table("ndpi_captures").unwrap();
            assert_eq!(caps.rows.len(), suite.runs.len());
            let ratio = caps.cells("ours_over_ndpi").next().unwrap().as_f64();
            assert_eq!(ratio, Some(suite.runs[0].ours_pps / suite.runs[0].ndpi_pps));
        }
    }
}
