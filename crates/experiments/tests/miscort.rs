//! MiscoRT's reproduction called as a library, cut short: a few points, one run each.

use switchyard_experiments::miscort::{self, EDF, MISCORT, Regime, SCHEDULERS, Setup};

#[test]
fn the_reproduction_gives_a_row_per_point_and_scheduler_and_claims_beside_the_thesis() {
    let setup = Setup {
        regimes: vec![Regime::All(0.0), Regime::All(0.5), Regime::Half(0.1), Regime::LogNormal(4)],
        runs: 1,
        ..Setup::thesis(2)
    };
    let done = std::sync::atomic::AtomicUsize::new(0);
    let rows = miscort::run(&setup, &|n| {
        done.fetch_max(n, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(rows.len(), 4 * SCHEDULERS.len());
    assert_eq!(done.into_inner(), rows.len(), "progress counted every run");
    let at = |regime, name: &str| rows.iter().find(|r| r.regime == regime && r.scheduler == name).unwrap();
    // Without failures MiscoRT neither misses nor repeats anything; EDF's sequential task
    // scheduler hands out duplicates as soon as every task is out, and wastes most of its time.
    let (m, e) = (at(Regime::All(0.0), MISCORT.name), at(Regime::All(0.0), EDF.name));
    assert_eq!((m.miss_rate, m.waste, m.repeats, m.failures), (0.0, 0.0, 0.0, 0.0));
    assert!(e.waste > 0.4 && e.end_to_end > m.end_to_end, "{e:?} against {m:?}");
    // Failures cost: time, waste and repeats, for every scheduler.
    for s in SCHEDULERS {
        let (calm, rough) = (at(Regime::All(0.0), s.name), at(Regime::All(0.5), s.name));
        assert!(rough.failures > 0.0 && rough.end_to_end > calm.end_to_end, "{rough:?}");
    }
    let claims = miscort::claims(&rows);
    let figures: Vec<&str> = claims.iter().map(|c| c.figure).collect();
    assert!(figures.contains(&"Fig. 3.9") && figures.contains(&"Fig. 3.13"), "{figures:?}");
    assert!(claims.iter().all(|c| !c.ours.is_empty() && !c.published.is_empty()));

    let none = Setup { runs: 0, ..setup };
    assert!(miscort::run(&none, &|_| {}).is_err());
}
