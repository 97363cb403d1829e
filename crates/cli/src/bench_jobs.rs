//! `switchyard bench jobs`'s options; the run and its report are
//! `switchyard_experiments::bench::jobs`'s.

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::jobs::{Setup, find_celery, run as bench};

/// Task assignments per second through the jobs coordinator (a poll answered with a task, an
/// empty result uploaded and kept, every decision committed to SQLite), with the p50 and p99
/// of its polls; beside Celery (Redis as broker and result backend) running the same trivial
/// tasks, in alternating rounds on the same machine.
///
/// The goal (issue 19): at least 5,000 assignments a second and a p99 poll of at most 10 ms.
/// Celery and redis-server come from `bench/install-peers.sh`; without them Celery's rows are
/// left out and the report says so in a note.
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

    #[command(flatten)]
    output: crate::print::Output,
}

pub(crate) fn run(a: &JobsBench) -> Result<()> {
    let root = std::env::current_dir()?;
    let setup = Setup { seconds: a.seconds, rounds: a.rounds, workers: a.workers, celery: find_celery(&root) };
    let report = bench(&setup, &crate::print::Bar::new())?.report(&setup);
    a.output.emit(&report)
}
