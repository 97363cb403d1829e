//! `reproduce dou-cacheflow` called as a library: the rows come back as data, with the
//! published figures beside them, they say what the thesis says, and they make a report.

mod common;

use switchyard_experiments::cacheflow::{self, RealSetup, SPEC, Setup};
use switchyard_experiments::report::Quiet;
use switchyard_sim::models::cacheflow::CacheflowParams;

#[test]
fn cooperation_hits_like_a_lone_cache_with_two_to_three_times_the_memory() {
    // The thesis's setup, shortened to 10 minutes.
    let setup =
        Setup { base: CacheflowParams { run_s: 600.0, warmup_s: 120.0, ..CacheflowParams::default() }, threads: 2 };
    let cases = cacheflow::simulated(&setup, &Quiet).unwrap();
    let names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    assert_eq!(names.len(), 6, "{names:?}");
    let rate = |name: &str| cases.iter().find(|c| c.name.starts_with(name)).unwrap().outcome.hit_rate();
    let (one, two, three) = (rate("alone, 1×"), rate("alone, 2×"), rate("alone, 3×"));
    let coop = rate("Cacheflow, 1×, L = 0");
    assert!(one < two && two < three);
    assert!(coop > two && coop < three, "Cacheflow {coop} not between 2× ({two}) and 3× ({three})");
    // Lone cases carry the model and the published figure; the sample run its published split.
    let lone = &cases[0];
    assert_eq!(lone.published, Some("35.4% (model)"));
    assert!((lone.model.unwrap() - 0.354).abs() < 0.01, "{:?}", lone.model);
    let sample = cases.iter().find(|c| c.name.contains("sample run")).unwrap();
    assert_eq!(sample.published, Some("≈72% (33+39)"));
    assert!(sample.outcome.delivered() < cases[3].outcome.delivered(), "stale views cost deliveries");
    // The same setup gives the same rows, whatever the threads.
    let again = cacheflow::simulated(&Setup { threads: 1, ..setup.clone() }, &Quiet).unwrap();
    assert!(cases.iter().zip(&again).all(|(a, b)| a.outcome == b.outcome));

    // The report: a row per case with its figures, the sample run's claims beside ours.
    let report = cacheflow::report(&setup, &cases, None);
    common::assert_report(&report, &SPEC);
    assert!(report.table("real").is_none());
    let t = report.table("simulated").unwrap();
    assert_eq!(t.rows.len(), 6);
    let coop_row = t.rows.iter().find(|r| r[0].as_str() == Some("Cacheflow, 1×, L = 0")).unwrap();
    assert_eq!(coop_row[t.column("hit_rate").unwrap()].as_f64(), Some(coop));
    assert_eq!(coop_row[t.column("model").unwrap()].as_f64(), None, "no model for cooperating caches");
    assert_eq!(t.rows[0][t.column("model").unwrap()].as_f64(), lone.model);
    let local = report.claims.iter().find(|c| c.claim.starts_with("local hits")).unwrap();
    assert_eq!(local.ours, Some(sample.per_request(sample.outcome.total.local_hits)));
    assert_eq!(local.published, Some(33.5));
    let between = report.claims.iter().find(|c| c.claim.contains("2–3×")).unwrap();
    assert!(between.ours_text.contains("between the simulator's"), "{}", between.ours_text);
    assert_eq!(report.claims.len(), 5);
}

#[test]
fn the_real_gateways_run_is_callable_and_cooperation_helps() {
    let real = RealSetup { seed: 3, object_kb: 1, requests: 40 };
    let cases = cacheflow::on_gateways(&real, &Quiet).unwrap();
    assert_eq!(cases.len(), 4);
    let lone = cases[0].outcome.hit_rate();
    let coop = cases[3].outcome.hit_rate();
    assert!(cases.iter().all(|c| c.outcome.asked > 0));
    assert!(coop > lone, "cooperating gateways {coop} against a lone one {lone}");
    // With the real cases, the report has their table too.
    let setup =
        Setup { base: CacheflowParams { run_s: 200.0, warmup_s: 50.0, ..CacheflowParams::default() }, threads: 2 };
    let simulated = cacheflow::simulated(&setup, &Quiet).unwrap();
    let report = cacheflow::report(&setup, &simulated, Some((&real, &cases)));
    common::assert_report(&report, &SPEC);
    let t = report.table("real").unwrap();
    assert_eq!(t.rows.len(), 4);
    assert_eq!(t.rows[3][t.column("hit_rate").unwrap()].as_f64(), Some(coop));
    let e = cacheflow::on_gateways(&RealSetup { requests: 0, ..real }, &Quiet).unwrap_err();
    assert!(e.to_string().contains("0 requests"), "{e}");
}
