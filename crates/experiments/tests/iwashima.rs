//! `reproduce iwashima-m` called as a library, in one short run: a row per scheme and m as it
//! is measured, and the published claims beside ours. Needs root for the network namespaces;
//! says SKIPPED without them.

use switchyard_experiments::ExperimentError;
use switchyard_experiments::iwashima::{self, MuxScheme, Setup};

#[test]
fn a_short_run_gives_a_row_per_scheme_and_m_and_the_claims_beside_ours() {
    let setup = Setup { ms: vec![2], seconds: 1.0, eq75: false, schemes: vec![MuxScheme::Stripe, MuxScheme::Pin] };
    let mut seen = Vec::new();
    let (rows, claims) = match iwashima::run(&setup, |r| seen.push((r.scheme, r.m))) {
        Ok(out) => out,
        Err(ExperimentError::Unavailable(why)) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(seen, [("stripe", 2), ("pin", 2)], "each row reported as it was measured");
    assert_eq!(rows.len(), 2);
    for r in &rows {
        // Two connections against two competing flows: about half of 1,250 KB/s.
        assert!(r.ours_kbps > 200.0 && r.ours_kbps < 1300.0, "{r:?}");
        assert!((r.model_kbps - 625.0).abs() < 1.0, "{r:?}");
    }
    assert!(rows[1].reorder_ms < 1.0, "pinning reorders nothing: {:?}", rows[1]);
    assert_eq!(claims.len(), 2);
    assert!(claims[0].case == "striping, m = 2" && claims[0].published.contains("Figs 7-22..25"), "{claims:?}");
}
