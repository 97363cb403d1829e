//! `reproduce guo-xen-credit` called as a library, small: every workload and rule runs its
//! capacity search, and every claim of Guo §5.7 comes back beside ours.

use switchyard_experiments::guo_xen::{self, Setup};
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
