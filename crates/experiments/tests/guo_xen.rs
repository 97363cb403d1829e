//! `reproduce guo-xen-credit` called as a library, small: every workload and rule runs its
//! capacity search, and every claim of Guo §5.7 comes back beside ours.

mod common;

use switchyard_experiments::guo_xen::{self, SPEC, Setup};
use switchyard_sim::models::xen::{Rule, Workload};

#[test]
fn the_reproduction_runs_and_answers_every_claim() {
    let setup = Setup {
        workloads: vec![Workload::Banking, Workload::Ecommerce],
        runs: 2,
        scale: 0.15,
        step: 40,
        ..Setup::guo(1, 2)
    };
    let repro = guo_xen::run(&setup).unwrap();
    assert_eq!(repro.rows.len(), 6);
    for r in &repro.rows {
        assert_eq!(r.sessions.len(), 2, "one capacity per seed");
        assert!(r.capacity.sessions >= 40 && r.capacity.at.qos >= 0.95, "{r:?}");
        assert_eq!(r.sessions[0], r.capacity.sessions, "the first seed's search is the one kept");
        // Every rule is also run at the credit scheduler's capacity.
        let credit = repro.row(r.workload, Rule::Credit).unwrap();
        assert_eq!(r.at_credit_capacity.sessions, credit.capacity.sessions);
    }
    let published: Vec<&str> = repro.claims.iter().map(|c| c.published_text).collect();
    assert_eq!(published.len(), 6);
    assert_eq!(published[0], "+15%");
    for c in &repro.claims[..4] {
        assert!(c.ours.is_some_and(|o| o.is_finite() && o > 0.0), "{}", c.claim);
        assert!(!c.why.is_empty() && !c.why.contains("TBD"), "{}", c.claim);
    }
    assert!(repro.claims[4..].iter().all(|c| c.ours.is_none()), "the userspace schedulers and native are not modelled");
    let share = repro.vmm_share(Workload::Banking).unwrap();
    assert!(share > 0.0 && share < 1.0);
    // The report: a row per workload and rule with the run's figures, moves by cause, the L2
    // misses by function under credit, the claims; and its schema holds.
    let report = repro.report(&setup);
    common::assert_report(&report, &SPEC);
    let t = report.table("capacity").unwrap();
    assert_eq!(t.rows.len(), 6);
    let banking = t
        .rows
        .iter()
        .find(|r| r[0].as_str() == Some("Banking") && r[1].as_str() == Some(Rule::CacheAware.name()))
        .unwrap();
    assert_eq!(banking[t.column("gain").unwrap()].as_f64(), repro.gain(Workload::Banking, Rule::CacheAware));
    let row = repro.row(Workload::Banking, Rule::CacheAware).unwrap();
    assert_eq!(banking[t.column("sessions").unwrap()].as_f64(), Some(row.mean_sessions()));
    assert_eq!(banking[t.column("l2_per_answer").unwrap()].as_f64(), Some(row.at_credit_capacity.l2_per_answer()));
    let moves = report.table("moves").unwrap();
    assert_eq!(moves.rows.len(), 6);
    let l2 = report.table("l2_by_function").unwrap();
    assert_eq!(l2.rows.len(), 2);
    // Table 8.2's grouping covers every miss: a workload's shares sum to one.
    let sum: f64 = l2.rows[0][1..].iter().filter_map(|v| v.as_f64()).sum();
    assert!((sum - 1.0).abs() < 1e-9, "{sum}");
    let vmm = l2.rows[0][l2.column("grant_table").unwrap()].as_f64().unwrap()
        + l2.rows[0][l2.column("scheduler").unwrap()].as_f64().unwrap();
    assert!((vmm - repro.vmm_share(Workload::Banking).unwrap()).abs() < 1e-12);
    assert_eq!(report.claims.len(), repro.claims.len());
    // The same setup on one thread gives the same rows.
    let again = guo_xen::run(&Setup { threads: 1, ..setup }).unwrap();
    assert!(
        repro
            .rows
            .iter()
            .zip(&again.rows)
            .all(|(a, b)| a.sessions == b.sessions && a.at_credit_capacity == b.at_credit_capacity)
    );
}
