//! The scenario reproductions (Guo ch. 4–7) called as a library, each reduced to a fraction of
//! its flows or GOPs: the rankings they reproduce hold, and the published claims come back
//! beside ours.

mod common;

use switchyard_experiments::report::{Quiet, Value};
use switchyard_experiments::scenarios::{self, Reproduction};
use switchyard_sim::scenario::Scenario;

/// Reproduction `name` with `from` replaced by `to` in its file (a shorter run).
fn reduced(name: &str, from: &str, to: &str) -> (Scenario, Reproduction) {
    let text = scenarios::text(name).unwrap_or_else(|| panic!("no reproduction {name}"));
    assert!(text.contains(from), "{name} no longer has `{from}`");
    let scenario = scenarios::parse(name, &text.replace(from, to)).unwrap();
    let run = scenarios::run(&scenario, 2, &Quiet).unwrap();
    assert_eq!(run.rows.len(), scenario.cases.len());
    assert_eq!(run.comparisons.len(), scenario.published.len(), "every published claim is answered");
    check_report(name, &scenario, &run);
    (scenario, run)
}

/// The report of a run: its spec and schema hold, a row per run carrying the run's figures, a
/// claim per published figure with ours, and a bar chart per plotted metric, the latency's on a
/// log axis.
fn check_report(name: &str, scenario: &Scenario, run: &Reproduction) {
    let spec = scenarios::spec(name).unwrap();
    let report = run.report(spec, scenario);
    common::assert_report(&report, spec);
    let t = report.table("runs").unwrap();
    assert_eq!(t.rows.len(), run.rows.len());
    let (policy, p99, swept) =
        (t.column("policy").unwrap(), t.column("latency_p99_us").unwrap(), t.column("swept").unwrap());
    for (row, summary) in t.rows.iter().zip(&run.rows) {
        assert_eq!(row[policy], Value::Text(summary.policy.clone()));
        assert_eq!(row[swept], Value::Text(summary.swept.clone()));
        assert_eq!(row[p99].as_f64(), Some(summary.latency_p99_us));
    }
    assert_eq!(report.claims.len(), run.comparisons.len());
    for (claim, c) in report.claims.iter().zip(&run.comparisons) {
        assert_eq!(claim.claim, c.published.claim);
        assert_eq!(claim.published, Some(c.published.value));
        assert_eq!(claim.ours, c.ours.clone().ok());
    }
    assert_eq!(report.charts.len(), scenarios::PLOTTED.len());
    let latency = report.charts.iter().find(|c| c.name == "latency_p99_us").unwrap();
    assert!(latency.log_y && !report.charts.iter().find(|c| c.name == "units_per_s").unwrap().log_y);
}

fn ours(run: &Reproduction, claim: &str) -> f64 {
    let found = run.comparisons.iter().find(|c| c.published.claim.contains(claim)).unwrap_or_else(|| panic!("{claim}"));
    *found.ours.as_ref().unwrap()
}

#[test]
fn dpi_affinity_ranking_holds() {
    let (_, run) = reduced("dpi-affinity", "flows = 40000", "flows = 4000");
    let gain = *run.comparisons[0].ours.as_ref().unwrap();
    let speedup = *run.comparisons[1].ours.as_ref().unwrap();
    assert!(gain > 1.1, "affinity over round robin: {gain}");
    assert!((5.0..7.5).contains(&speedup), "7-worker speedup: {speedup}");
}

/// PS-HRW holds each stream's share of workers close to φ / Σφ, closer than round robin, whose
/// moves cost small streams as much as large ones; and reallocating only on a 100% change in φ
/// leaves the shares further off than at β = 16%.
#[test]
fn ps_hrw_holds_shares_near_their_targets() {
    let (s, run) = reduced("ps-shares", "gops = 300", "gops = 60");
    let cov = |policy: &str, beta: &str| {
        let c = s.cases.iter().find(|c| c.params.policy.name() == policy && c.swept[0].1 == beta).unwrap();
        run.rows[c.index].flow_share_cov
    };
    let ps = cov("ps-hrw", "0.16");
    assert!(ps < 0.06, "PS-HRW share CoV {ps}");
    assert!(cov("round-robin", "0.16") > 3.0 * ps, "round robin {}", cov("round-robin", "0.16"));
    assert!(cov("ps-hrw", "1.0") > ps, "β = 100%: {}", cov("ps-hrw", "1.0"));
}

/// With short queues H-AHRW beats connection locality and plain HRW, and conn's crowding onto
/// the low-numbered threads unbalances the cores where H-AHRW does not. (H-AHRW over flat AHRW
/// does not reproduce; the scenario says why.)
#[test]
fn niagara_hierarchy_ranking_holds() {
    let (_, run) = reduced("niagara-hierarchy", "flows = 20000", "flows = 2000");
    assert!(ours(&run, "over connection locality (conn), run-queues of 4") > 1.5);
    assert!(ours(&run, "over plain HRW, run-queues of 4") > 1.5);
    assert!(ours(&run, "over plain HRW, run-queues of 16") > 1.2);
    let (conn, tree) =
        (ours(&run, "8 cores), affinity, run-queues of 4"), ours(&run, "8 cores), h-ahrw, run-queues of 4"));
    assert!(conn > 0.3 && tree < 0.1, "core spread: conn {conn}, h-ahrw {tree}");
}

/// With the true-minimum Q_min, H-CAHRW beats the mean of RR, SM, HRW, H-AHRW and CA-AHRW on
/// both machines, as the thesis reports; with ch. 6's non-zero reading the Xeon's fanout-2
/// levels fall back to hashing and it does not. Static maps never reorder a stream; round
/// robin does.
#[test]
fn tree_cache_aware_leads_under_the_true_minimum() {
    let (s, run) = reduced("gop-cache-aware", "gops = 300", "gops = 60");
    let c = &run.comparisons;
    let ours = |i: usize| *c[i].ours.as_ref().unwrap();
    assert!(c[1].published.claim.contains("Xeon, Q_min true") && ours(1) > 1.05, "Xeon, true min: {}", ours(1));
    assert!(c[3].published.claim.contains("Opteron, Q_min true") && ours(3) > 1.05, "Opteron: {}", ours(3));
    assert!(ours(0) < 1.0, "Xeon, non-zero min: {}", ours(0));
    let out_of_order = |policy: &str| {
        let c = s.cases.iter().find(|c| c.params.policy.name() == policy).unwrap();
        run.rows[c.index].out_of_order
    };
    assert_eq!(out_of_order("mod-n"), 0);
    assert_eq!(out_of_order("hrw"), 0);
    assert!(out_of_order("round-robin") > 0);
}

#[test]
fn every_reproduction_is_found_by_name_and_a_stranger_is_not() {
    for (name, _) in scenarios::REPRODUCTIONS {
        let s = scenarios::scenario(name).unwrap();
        assert!(!s.published.is_empty(), "{name} publishes nothing");
    }
    assert!(scenarios::scenario("nope").unwrap_err().to_string().contains("nope"));
}

/// With the data-sheet caches (issue 26), H-CAHRW takes far fewer L2 misses per GOP than round
/// robin on the Xeon, whose L2 is shared by a core pair, and fewer on the Opteron, whose L2 is
/// private (Guo §6.5: up to −42.9% and −22.9%).
#[test]
fn the_cache_model_counts_the_l2_misses_locality_saves() {
    let (_, run) = reduced("gop-cache-aware-cache", "gops = 300", "gops = 60");
    let xeon = ours(&run, "L2 misses per GOP, H-CAHRW over round robin, Xeon");
    let opteron = ours(&run, "L2 misses per GOP, H-CAHRW over round robin, Opteron");
    assert!(xeon < 0.8, "Xeon: {xeon}");
    assert!(opteron < 1.0, "Opteron: {opteron}");
}

/// On the Niagara 2 the L2 is shared by all 64 threads, so the data-sheet caches leave H-AHRW
/// and flat AHRW where they were without them, and conn's collapse on short queues stays.
#[test]
fn the_niagara_caches_do_not_separate_the_tree_from_flat_ahrw() {
    let (_, run) = reduced("niagara-hierarchy-cache", "flows = 20000", "flows = 2000");
    let tree = ours(&run, "over flat AHRW, run-queues of 16");
    assert!((0.9..1.1).contains(&tree), "H-AHRW over AHRW: {tree}");
    assert!(ours(&run, "over connection locality (conn), run-queues of 4") > 1.5);
}
