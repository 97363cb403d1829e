//! MiscoRT's reproduction called as a library, cut short: a few points, one run each.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use switchyard_experiments::miscort::{self, EDF, MISCORT, Regime, SCHEDULERS, SPEC, Setup};
use switchyard_experiments::report::{Progress, Quiet};

/// Counts the steps it is told of.
#[derive(Default)]
struct Count(AtomicU64, AtomicU64);

impl Progress for Count {
    fn stage(&self, _: &str, total: u64) {
        self.0.store(total, Ordering::Relaxed);
    }
    fn advance(&self, n: u64) {
        self.1.fetch_add(n, Ordering::Relaxed);
    }
}

#[test]
fn the_reproduction_gives_a_row_per_point_and_scheduler_and_claims_beside_the_thesis() {
    let setup = Setup {
        regimes: vec![Regime::All(0.0), Regime::All(0.5), Regime::Half(0.1), Regime::LogNormal(4)],
        runs: 1,
        ..Setup::thesis(2)
    };
    let count = Count::default();
    let rows = miscort::run(&setup, &count).unwrap();
    assert_eq!(rows.len(), 4 * SCHEDULERS.len());
    let (total, done) = (count.0.into_inner(), count.1.into_inner());
    assert_eq!((total, done), (rows.len() as u64, rows.len() as u64), "progress counted every run");
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

    // The report: a row per regime and scheduler in its family's table, with the run's figures;
    // the deadlines family was not run, so its table is empty and not drawn.
    let report = miscort::report(&setup, &rows);
    common::assert_report(&report, &SPEC);
    let lens: Vec<usize> =
        ["all", "half", "lognormal", "deadlines"].iter().map(|t| report.table(t).unwrap().rows.len()).collect();
    let n = SCHEDULERS.len();
    assert_eq!(lens, [2 * n, n, n, 0]);
    let all = report.table("all").unwrap();
    let edf = all.rows.iter().find(|r| r[0].as_f64() == Some(0.0) && r[1].as_str() == Some(EDF.name)).unwrap();
    assert_eq!(edf[all.column("waste").unwrap()].as_f64(), Some(e.waste));
    assert_eq!(edf[all.column("end_to_end").unwrap()].as_f64(), Some(e.end_to_end));
    assert_eq!(report.table("lognormal").unwrap().rows[0][0].as_f64(), Some(4.0));
    // Misses, end-to-end time and waste for `all` and `half`; none for the others.
    assert_eq!(report.charts.len(), 6);
    assert_eq!(report.claims.len(), claims.len());

    let none = Setup { runs: 0, ..setup };
    assert!(miscort::run(&none, &Quiet).is_err());
}
