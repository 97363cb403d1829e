//! `reproduce guo-interrupt-affinity` called as a library, small: every size and placement
//! runs, and every claim of Guo §5.2 comes back beside ours.

mod common;

use switchyard_experiments::guo_irq::{self, SPEC, Setup};
use switchyard_sim::models::irq::Placement;

#[test]
fn the_reproduction_runs_and_answers_every_claim() {
    let setup = Setup { sizes: vec![256, 4096, 16384], seed: 1, scale: 0.05, threads: 2 };
    let repro = guo_irq::run(&setup).unwrap();
    assert_eq!(repro.rows.len(), 9);
    assert!(repro.rows.iter().all(|r| r.outcome.throughput > 0.0));
    let claims: Vec<&str> = repro.claims.iter().map(|c| c.published_text).collect();
    assert_eq!(claims, ["+10%", "+37%", "\"significantly reduced\" (no number)", "+20%", "+12%"]);
    for c in &repro.claims[..4] {
        assert!(c.ours.is_some_and(f64::is_finite), "{}", c.claim);
        assert!(!c.why.is_empty());
    }
    assert!(repro.claims[4].ours.is_none(), "the VM variant is not modelled");
    // Affinity keeps the message in the shared L2: fewer misses than round-robin.
    assert!(repro.claims[2].ours.unwrap() < 1.0);
    assert!(repro.gain(16384, Placement::Affinity).unwrap() > 1.0);
    // The same setup on one thread gives the same rows.
    let again = guo_irq::run(&Setup { threads: 1, ..setup.clone() }).unwrap();
    assert!(repro.rows.iter().zip(&again.rows).all(|(a, b)| a.outcome == b.outcome));
    // The report: a row per case with the run's figures, the claims, and its schema holds.
    let report = repro.report(&setup);
    common::assert_report(&report, &SPEC);
    let t = report.table("results").unwrap();
    assert_eq!(t.rows.len(), 9);
    let gain = t.column("gain").unwrap();
    let last = t
        .rows
        .iter()
        .find(|r| r[0].as_f64() == Some(16384.0) && r[1].as_str() == Some(Placement::Affinity.name()))
        .unwrap();
    assert_eq!(last[gain].as_f64(), repro.gain(16384, Placement::Affinity));
    assert_eq!(report.claims.len(), repro.claims.len());
}
