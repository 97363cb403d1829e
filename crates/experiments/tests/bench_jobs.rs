//! `bench::jobs` briefly, without Celery: our rounds run, and the report holds each round, the
//! median and the goals read off it.

mod common;

use switchyard_experiments::bench::jobs;
use switchyard_experiments::report::{Quiet, Value};

#[test]
fn jobs_assigns_tasks_through_the_coordinator_and_times_its_polls() {
    let setup = jobs::Setup { seconds: 0.5, rounds: 2, workers: 2, celery: None };
    let r = jobs::run(&setup, &Quiet).unwrap();
    assert_eq!(r.ours.len(), 2);
    assert!(r.celery.is_empty());
    for round in &r.ours {
        // Every measured task went poll → result → kept; a second of a debug build does dozens.
        assert!(round.tasks > 10 && round.rate > 0.0, "{round:?}");
        assert!(round.p50_ms > 0.0 && round.p50_ms <= round.p99_ms, "{round:?}");
    }
    let median = jobs::median(&r.ours).unwrap();

    let report = r.report(&setup);
    common::assert_report(&report, &jobs::SPEC);
    let rounds = report.table("rounds").unwrap();
    assert_eq!(rounds.rows.len(), 2, "two rounds of ours, none of Celery's");
    assert!(rounds.cells("side").all(|s| s.as_str() == Some(jobs::OURS)));
    let tasks: Vec<Value> = rounds.cells("tasks").cloned().collect();
    assert_eq!(tasks, r.ours.iter().map(|x| Value::from(x.tasks)).collect::<Vec<_>>());
    let medians = report.table("medians").unwrap();
    assert_eq!(medians.rows.len(), 1);
    assert_eq!(medians.cells("rate").next().and_then(Value::as_f64), Some(median.rate));
    assert_eq!(medians.cells("vs_celery").next(), Some(&Value::Null), "no Celery, no ratio");
    let goals = report.table("goals").unwrap();
    let reached: Vec<&Value> = goals.cells("reached").collect();
    let (rate_ok, p99_ok) = median.goals();
    assert_eq!(reached, vec![&Value::Bool(rate_ok), &Value::Bool(p99_ok)]);
    assert!(report.notes.iter().any(|n| n.contains("celery: not run")), "{:?}", report.notes);

    let bad = jobs::Setup { workers: 0, ..setup };
    assert!(jobs::run(&bad, &Quiet).unwrap_err().to_string().contains("at least one worker"));
}
