//! `switchyard bench jobs`: the jobs coordinator's task assignments per second and poll
//! latency, beside Celery with Redis on the same trivial tasks.

use std::io::Write;

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::jobs::{GOAL_P99_MS, GOAL_RATE, Round, Setup, find_celery, median, run as bench};

/// Task assignments per second through the jobs coordinator (a poll answered with a task, an
/// empty result uploaded and kept, every decision committed to SQLite), with the p50 and p99
/// of its polls; beside Celery (Redis as broker and result backend) running the same trivial
/// tasks, in alternating rounds on the same machine.
///
/// The goal (issue 19): at least 5,000 assignments a second and a p99 poll of at most 10 ms.
/// Celery and redis-server come from `bench/install-peers.sh`; without them Celery's rows are
/// left out and the command says so.
///
/// Example:
///
///   switchyard bench jobs --seconds 5 --workers 8
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct JobsBench {
    /// Seconds measured per round and side.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Rounds, alternating the sides.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Polling workers (ours); Celery's pool concurrency, with twice as many tasks in flight.
    #[arg(long, default_value_t = 8)]
    workers: usize,
}

fn line(out: &mut impl Write, name: &str, r: &Round) -> std::io::Result<()> {
    writeln!(out, "{name:<28} {:>12.0} {:>10.2} {:>10.2} {:>10}", r.rate, r.p50_ms, r.p99_ms, r.tasks)
}

pub(crate) fn run(a: &JobsBench) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let root = std::env::current_dir()?;
    let celery = find_celery(&root);
    let setup = Setup { seconds: a.seconds, rounds: a.rounds, workers: a.workers, celery: celery.clone() };
    writeln!(
        out,
        "loopback, {} cores shared by the coordinator and its clients; {} rounds of {} s per side, {} workers\n",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        a.rounds,
        a.seconds,
        a.workers
    )?;
    writeln!(out, "{:<28} {:>12} {:>10} {:>10} {:>10}", "round", "tasks/s", "p50 ms", "p99 ms", "tasks")?;
    let mut failed = None;
    let r = bench(&setup, &mut |name, r| {
        if let Err(e) = line(&mut out, name, r) {
            failed.get_or_insert(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    writeln!(out)?;
    let ours = median(&r.ours).expect("at least one round");
    line(&mut out, "median: switchyard jobs", &ours)?;
    match median(&r.celery) {
        Some(c) => {
            line(&mut out, "median: celery (redis)", &c)?;
            writeln!(out, "\nours / celery: {:.2}× the tasks a second", ours.rate / c.rate)?;
        }
        None => writeln!(
            out,
            "\ncelery: not run (no target/peers/venv with celery, or no redis-server): bench/install-peers.sh installs them"
        )?,
    }
    writeln!(out, "(celery's latency is a task's, from send to result; ours is a poll's: poll → task handed out)")?;
    let said = |ok: bool| if ok { "reached" } else { "NOT reached" };
    let (rate_ok, p99_ok) = ours.goals();
    writeln!(
        out,
        "goal ≥ {GOAL_RATE:.0} assignments/s: {} ({:.0}); goal p99 poll ≤ {GOAL_P99_MS} ms: {} ({:.2} ms)",
        said(rate_ok),
        ours.rate,
        said(p99_ok),
        ours.p99_ms
    )?;
    Ok(())
}
