//! `reproduce dou-cacheflow` called as a library: the rows come back as data, with the
//! published figures beside them, and they say what the thesis says.

use switchyard_experiments::cacheflow::{self, RealSetup, Setup};
use switchyard_sim::models::cacheflow::CacheflowParams;

#[test]
fn cooperation_hits_like_a_lone_cache_with_two_to_three_times_the_memory() {
    // The thesis's setup, shortened to 10 minutes.
    let setup =
        Setup { base: CacheflowParams { run_s: 600.0, warmup_s: 120.0, ..CacheflowParams::default() }, threads: 2 };
    let cases = cacheflow::simulated(&setup).unwrap();
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
    let again = cacheflow::simulated(&Setup { threads: 1, ..setup }).unwrap();
    assert!(cases.iter().zip(&again).all(|(a, b)| a.outcome == b.outcome));
}

#[test]
fn the_real_gateways_run_is_callable_and_cooperation_helps() {
    let cases = cacheflow::on_gateways(&RealSetup { seed: 3, object_kb: 1, requests: 40 }).unwrap();
    assert_eq!(cases.len(), 4);
    let lone = cases[0].outcome.hit_rate();
    let coop = cases[3].outcome.hit_rate();
    assert!(cases.iter().all(|c| c.outcome.asked > 0));
    assert!(coop > lone, "cooperating gateways {coop} against a lone one {lone}");
}
