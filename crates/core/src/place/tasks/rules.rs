//! Which task of an application a polling worker gets.
//!
//! Every rule but random offers never-assigned tasks first, in order (an application finishes
//! only when all its tasks do); they differ in what they hand out once none is left:
//!
//! - [`TaskRule::MiscoRt`] (Dou §3.4.3, Algorithm 2): a task whose every attempt is presumed
//!   failed; else a replica of the *slowest* task — the one whose fastest holder is expected to
//!   finish last, ε = min over holders of (w_holder − elapsed) — but only if it would finish after
//!   the deadline and the polling worker would finish it before (now + w_k < deadline); else
//!   nothing, so a worker may be turned away while tasks are incomplete.
//! - [`TaskRule::Random`] (§3.5): any incomplete task, at random, from the first poll on.
//! - [`TaskRule::Sequential`] (§3.5): tasks in order, and once all are out, on round the
//!   incomplete ones again ("until they successfully execute"; the cycling is the notes'
//!   reading).
//! - [`TaskRule::ModifiedHadoop`] (§3.5): a task whose newest attempt has run longer than the
//!   task's mean successful time, the longest-running first.
//! - [`TaskRule::Spark`] (Spark's `spark.speculation`, written from its configuration docs): once
//!   `quantile` of the phase's tasks are done, a task with a single attempt out for longer than
//!   `multiplier` × the median successful time (and `min_runtime`) gets one speculative copy.
//! - [`TaskRule::Late`] (Zaharia et al., OSDI 2008): among tasks with a single attempt out, those
//!   whose progress rate is in the slowest `slow_task` fraction are candidates, the one expected
//!   to finish last first; never on a worker among the slowest `slow_node` fraction, and never
//!   more than `cap` × the workers seen in speculative copies at once. Progress is what the
//!   worker reported ([`Board::progress`](super::Board::progress)); without reports, elapsed
//!   over the holder's expected time.
//!
//! - [`TaskRule::Boinc`] (BOINC's server, written from its documentation of reliable hosts and
//!   accelerated retries): when an application's deadline is endangered (its laxity is less than
//!   the expected time of what is left), only *reliable* workers — whose expected failures over
//!   one task, λ̂·τ, are at most `reliable` — get its tasks, unreliable ones being sent on to the
//!   next application (unless no reliable worker has been heard from lately); and a reliable worker gets a replica of a task whose only attempt out is
//!   held by an unreliable worker, the oldest first. Applications not in danger go to anyone.
//!
//! Hadoop, Spark, LATE and BOINC re-issue at once a task whose attempts are all presumed failed or lost
//! (as those systems resubmit tasks lost with a node or an executor); random and sequential need
//! no such step (they re-issue anyway).

use crate::Nanos;
use crate::WorkerId;
use crate::measure::secs;
use crate::place::score::splitmix64;

use super::board::{Board, State};
use super::{AppId, Phase, TaskRef};

/// A task rule and its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TaskRule {
    /// MiscoRT's Algorithm 2.
    MiscoRt,
    /// Any incomplete task, at random.
    Random,
    /// In order, cycling over incomplete tasks.
    Sequential,
    /// Re-issue a task past its mean time.
    ModifiedHadoop,
    /// Spark's speculation.
    Spark {
        /// Fraction of the phase's tasks done before any speculation (Spark: 0.75).
        quantile: f64,
        /// How many times the median a task must run to be speculated (Spark: 1.5).
        multiplier: f64,
        /// Seconds a task must run at least to be speculated (Spark: 0.1).
        min_runtime: f64,
    },
    /// BOINC's routing of urgent work to reliable hosts.
    Boinc {
        /// Expected failures over one task (λ̂·τ) at or below which a worker is reliable.
        reliable: f64,
    },
    /// Ko et al.'s worker-centric choice among never-assigned maps: the one whose files the
    /// polling worker's site holds, by a locality metric, drawn among the `top` best; then
    /// MiscoRT's re-issue of tasks given up. Applications without file lists, reduces and
    /// workers without a site get the first never-assigned task.
    WorkerCentric {
        /// How a task's locality is weighed.
        metric: super::locality::Metric,
        /// Draw among this many of the best (1: the best).
        top: u32,
    },
    /// LATE's speculation.
    Late {
        /// Fraction of running tasks, slowest by progress rate, that may be speculated (0.25).
        slow_task: f64,
        /// Fraction of workers, slowest first, never given a speculative copy (0.25).
        slow_node: f64,
        /// Speculative copies out at once, as a fraction of the workers seen (0.1).
        cap: f64,
    },
}

impl TaskRule {
    /// Spark's defaults.
    pub const SPARK: Self = Self::Spark { quantile: 0.75, multiplier: 1.5, min_runtime: 0.1 };
    /// BOINC's rule, reliable below one expected failure in twenty tasks.
    pub const BOINC: Self = Self::Boinc { reliable: 0.05 };
    /// LATE's defaults from its paper.
    pub const LATE: Self = Self::Late { slow_task: 0.25, slow_node: 0.25, cap: 0.1 };

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::MiscoRt => "miscort",
            Self::Random => "random",
            Self::Sequential => "sequential",
            Self::ModifiedHadoop => "hadoop",
            Self::Spark { .. } => "spark",
            Self::Late { .. } => "late",
            Self::Boinc { .. } => "boinc",
            Self::WorkerCentric { .. } => "worker-centric",
        }
    }
}

/// The task `worker` should get from `app`, if any.
pub(crate) fn pick(board: &mut Board, app: AppId, worker: WorkerId, now: Nanos) -> Option<TaskRef> {
    let phase = board.apps[app.0 as usize].phase();
    let at = |index: usize| TaskRef { app, phase, index: index as u32 };
    if let TaskRule::WorkerCentric { metric, top } = board.config.rule
        && let Some(i) = local(board, app, phase, worker, metric, top)
    {
        return Some(at(i));
    }
    // BOINC: an endangered application's tasks go to reliable workers only, never-assigned
    // ones included.
    let urgent = matches!(board.config.rule, TaskRule::Boinc { .. }) && endangered(board, app, now);
    if let TaskRule::Boinc { reliable } = board.config.rule
        && urgent
        && !is_reliable(board, worker, app, phase, reliable)
        && board.workers.iter().any(|(&w, s)| {
            // Someone reliable who cannot run this application does not count.
            board.can_run(w, app)
                && s.presumed_at.is_none()
                && secs(Nanos(now.0.saturating_sub(s.seen.0)))
                    <= board.config.presume_factor * board.task_tau(app, phase)
                && is_reliable(board, w, app, phase, reliable)
        })
    {
        // Turned away only when someone reliable has been heard from lately (within the time
        // after which an attempt is presumed failed): the work must not wait for a worker that
        // has gone, or for none at all.
        return None;
    }
    // Random draws from every incomplete task, as the thesis's does; the others offer the
    // never-assigned ones first.
    if board.config.rule != TaskRule::Random
        && let Some(i) = unassigned(board, app, phase)
    {
        return Some(at(i));
    }
    let index = match board.config.rule {
        TaskRule::MiscoRt => given_up(board, app, phase).or_else(|| replica(board, app, phase, worker, now)),
        TaskRule::Random => random(board, app, phase),
        TaskRule::Sequential => sequential(board, app, phase),
        TaskRule::ModifiedHadoop => given_up(board, app, phase).or_else(|| past_mean(board, app, phase, now)),
        TaskRule::Spark { quantile, multiplier, min_runtime } => {
            given_up(board, app, phase).or_else(|| spark(board, app, phase, now, quantile, multiplier, min_runtime))
        }
        TaskRule::WorkerCentric { .. } => given_up(board, app, phase),
        TaskRule::Boinc { reliable } => {
            given_up(board, app, phase).or_else(|| if urgent { rescue(board, app, phase, now, reliable) } else { None })
        }
        TaskRule::Late { slow_task, slow_node, cap } => {
            given_up(board, app, phase).or_else(|| late(board, app, phase, worker, now, slow_task, slow_node, cap))
        }
    };
    index.map(at)
}

/// Brings the rule's own state up to date with a hand-out it did not choose (a poll replayed
/// from a log): the sequential rule's cursor moves past the task, and the random rule's stream
/// on by one draw, as they would have had the rule chosen it. Call it before the hand-out.
pub(crate) fn replayed(board: &mut Board, task: TaskRef, worker: WorkerId) {
    let never_out =
        board.apps[task.app.0 as usize].tasks[phase_at(task.phase)][task.index as usize].attempts.is_empty();
    if matches!(board.config.rule, TaskRule::WorkerCentric { .. })
        && never_out
        && locality_applies(board, task.app, task.phase, worker)
    {
        // The locality choice draws once whenever it chooses.
        board.draws += 1;
        return;
    }
    let from_unassigned =
        board.config.rule != TaskRule::Random && unassigned(board, task.app, task.phase) == Some(task.index as usize);
    if from_unassigned {
        return;
    }
    match board.config.rule {
        TaskRule::Sequential => {
            let p = match task.phase {
                Phase::Map => 0,
                Phase::Reduce => 1,
            };
            board.apps[task.app.0 as usize].cursor[p] = task.index as usize + 1;
        }
        TaskRule::Random => board.draws += 1,
        _ => {}
    }
}

/// The tasks of the phase, with their number.
fn tasks(board: &Board, app: AppId, phase: Phase) -> impl Iterator<Item = (usize, &super::board::Task)> {
    let i = match phase {
        Phase::Map => 0,
        Phase::Reduce => 1,
    };
    board.apps[app.0 as usize].tasks[i].iter().enumerate()
}

/// The first task never handed out.
fn unassigned(board: &Board, app: AppId, phase: Phase) -> Option<usize> {
    let from = board.apps[app.0 as usize].fresh[phase_at(phase)];
    tasks(board, app, phase).skip(from).find(|(_, t)| !t.done && t.attempts.is_empty()).map(|(i, _)| i)
}

fn phase_at(phase: Phase) -> usize {
    match phase {
        Phase::Map => 0,
        Phase::Reduce => 1,
    }
}

/// The first incomplete task none of whose attempts is still running (all presumed failed or
/// lost): Algorithm 2's step 2.
fn given_up(board: &Board, app: AppId, phase: Phase) -> Option<usize> {
    tasks(board, app, phase)
        .find(|(_, t)| {
            !t.done && t.attempts.iter().all(|a| !matches!(board.attempts[a.0 as usize].state, State::Running))
        })
        .map(|(i, _)| i)
}

/// Seconds attempt `a` has run.
fn elapsed(board: &Board, a: super::AttemptId, now: Nanos) -> f64 {
    secs(Nanos(now.0.saturating_sub(board.attempts[a.0 as usize].started.0)))
}

/// Algorithm 2's step 3: a replica of the slowest task, if that saves the deadline.
fn replica(board: &Board, app: AppId, phase: Phase, worker: WorkerId, now: Nanos) -> Option<usize> {
    let slowest = tasks(board, app, phase)
        .filter(|(_, t)| !t.done)
        .filter_map(|(i, t)| {
            // ε: when the fastest holder still running it is expected to finish.
            let eps = t
                .attempts
                .iter()
                .filter(|a| matches!(board.attempts[a.0 as usize].state, State::Running))
                .map(|a| board.expected_time(board.attempts[a.0 as usize].worker, app, phase) - elapsed(board, *a, now))
                .reduce(f64::min)?;
            Some((i, eps))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))?;
    let deadline = secs(board.apps[app.0 as usize].spec.deadline);
    let now_s = secs(now);
    let mine = board.expected_time(worker, app, phase);
    (now_s + slowest.1 > deadline && now_s + mine < deadline).then_some(slowest.0)
}

fn random(board: &mut Board, app: AppId, phase: Phase) -> Option<usize> {
    let open: Vec<usize> = tasks(board, app, phase).filter(|(_, t)| !t.done).map(|(i, _)| i).collect();
    if open.is_empty() {
        return None;
    }
    board.draws += 1;
    let draw = splitmix64(board.config.seed ^ splitmix64(board.draws));
    Some(open[(draw % open.len() as u64) as usize])
}

fn sequential(board: &mut Board, app: AppId, phase: Phase) -> Option<usize> {
    let p = match phase {
        Phase::Map => 0,
        Phase::Reduce => 1,
    };
    let a = &mut board.apps[app.0 as usize];
    let n = a.tasks[p].len();
    let from = a.cursor[p];
    let i = (0..n).map(|step| (from + step) % n.max(1)).find(|&i| !a.tasks[p][i].done)?;
    a.cursor[p] = i + 1;
    Some(i)
}

/// The newest attempt of each incomplete task, with how long it has run.
fn newest(board: &Board, app: AppId, phase: Phase, now: Nanos) -> Vec<(usize, usize, f64)> {
    tasks(board, app, phase)
        .filter(|(_, t)| !t.done)
        .filter_map(|(i, t)| {
            let live = t.attempts.iter().filter(|a| board.attempts[a.0 as usize].live()).count();
            let last = t.attempts.last()?;
            Some((i, live, elapsed(board, *last, now)))
        })
        .collect()
}

fn longest(candidates: impl Iterator<Item = (usize, f64)>) -> Option<usize> {
    candidates.max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0))).map(|(i, _)| i)
}

fn past_mean(board: &Board, app: AppId, phase: Phase, now: Nanos) -> Option<usize> {
    let mean = board.task_tau(app, phase);
    longest(newest(board, app, phase, now).into_iter().filter(|c| c.2 > mean).map(|c| (c.0, c.2)))
}

fn spark(
    board: &Board,
    app: AppId,
    phase: Phase,
    now: Nanos,
    quantile: f64,
    multiplier: f64,
    min_runtime: f64,
) -> Option<usize> {
    let a = &board.apps[app.0 as usize];
    let p = match phase {
        Phase::Map => 0,
        Phase::Reduce => 1,
    };
    let n = a.tasks[p].len();
    if a.durations[p].is_empty() || (a.done[p] as f64) < quantile * n as f64 {
        return None;
    }
    let mut d = a.durations[p].clone();
    d.sort_by(f64::total_cmp);
    let median = d[d.len() / 2];
    let threshold = (multiplier * median).max(min_runtime);
    longest(newest(board, app, phase, now).into_iter().filter(|c| c.1 == 1 && c.2 > threshold).map(|c| (c.0, c.2)))
}

#[allow(clippy::too_many_arguments)]
fn late(
    board: &Board,
    app: AppId,
    phase: Phase,
    worker: WorkerId,
    now: Nanos,
    slow_task: f64,
    slow_node: f64,
    cap: f64,
) -> Option<usize> {
    // The cap: speculative copies out now, against the workers seen.
    let out = board
        .apps
        .iter()
        .flat_map(|a| a.tasks.iter().flatten())
        .filter(|t| !t.done && t.attempts.iter().filter(|a| board.attempts[a.0 as usize].live()).count() > 1)
        .count();
    if out as f64 >= (cap * board.workers.len() as f64).max(1.0) {
        return None;
    }
    // Never on a slow worker: its expected time among the slowest `slow_node` of those seen.
    let mut times: Vec<f64> = board.workers.keys().map(|&w| board.expected_time(w, app, phase)).collect();
    times.sort_by(f64::total_cmp);
    let cut = times.len() - ((slow_node * times.len() as f64).floor() as usize).min(times.len());
    let mine = board.expected_time(worker, app, phase);
    // Slower than every worker outside the slowest fraction (so no one is slow when all are
    // alike).
    if times.len() > 1 && mine > times[cut.saturating_sub(1)] {
        return None;
    }
    // Candidates: a single attempt running; progress rate and time left.
    let candidates: Vec<(usize, f64, f64)> = tasks(board, app, phase)
        .filter(|(_, t)| !t.done)
        .filter_map(|(i, t)| {
            let mut live = t.attempts.iter().filter(|a| board.attempts[a.0 as usize].live());
            let a = *live.next()?;
            if live.next().is_some() || !matches!(board.attempts[a.0 as usize].state, State::Running) {
                return None;
            }
            let ran = elapsed(board, a, now);
            if ran <= 0.0 {
                return None;
            }
            let holder = board.attempts[a.0 as usize].worker;
            let progress = board.attempts[a.0 as usize]
                .progress
                .unwrap_or_else(|| (ran / board.expected_time(holder, app, phase)).min(1.0));
            let rate = progress / ran;
            let left = if rate > 0.0 { (1.0 - progress) / rate } else { f64::INFINITY };
            Some((i, rate, left))
        })
        .collect();
    if candidates.is_empty() {
        return None;
    }
    let mut rates: Vec<f64> = candidates.iter().map(|c| c.1).collect();
    rates.sort_by(f64::total_cmp);
    let slow = rates[((slow_task * rates.len() as f64).ceil() as usize).clamp(1, rates.len()) - 1];
    longest(candidates.into_iter().filter(|c| c.1 <= slow).map(|c| (c.0, c.2)))
}

/// Whether the application's deadline is endangered: less slack than expected work left.
fn endangered(board: &Board, app: AppId, now: Nanos) -> bool {
    let left = board.remaining_time(app);
    crate::order::apps::laxity(board.apps[app.0 as usize].spec.deadline, now, left) < left
}

/// Whether `worker` is expected to fail at most `reliable` times over one of the phase's tasks.
fn is_reliable(board: &Board, worker: WorkerId, app: AppId, phase: Phase, reliable: f64) -> bool {
    let rate = board.workers.get(&worker).map_or(board.config.estimates.prior_rate, |w| w.estimate.rate());
    rate * board.tau(worker, app, phase) <= reliable
}

/// A task whose only attempt out is held by an unreliable worker, the oldest first: the one a
/// reliable worker should take over.
fn rescue(board: &Board, app: AppId, phase: Phase, now: Nanos, reliable: f64) -> Option<usize> {
    longest(tasks(board, app, phase).filter(|(_, t)| !t.done).filter_map(|(i, t)| {
        let mut live = t.attempts.iter().filter(|a| board.attempts[a.0 as usize].live());
        let a = *live.next()?;
        if live.next().is_some() {
            return None;
        }
        let holder = board.attempts[a.0 as usize].worker;
        (!is_reliable(board, holder, app, phase, reliable)).then(|| (i, elapsed(board, a, now)))
    }))
}

/// Whether the worker-centric choice applies: a map of an application with file lists, for a
/// worker that said its site.
fn locality_applies(board: &Board, app: AppId, phase: Phase, worker: WorkerId) -> bool {
    phase == Phase::Map
        && !board.apps[app.0 as usize].files.is_empty()
        && board.workers.get(&worker).is_some_and(|w| w.site.is_some())
}

/// Ko et al.'s choice (Middleware 2007 §3): among the never-assigned maps, by their locality
/// for the worker's site, drawn among the `top` best.
fn local(
    board: &mut Board,
    app: AppId,
    phase: Phase,
    worker: WorkerId,
    metric: super::locality::Metric,
    top: u32,
) -> Option<usize> {
    if !locality_applies(board, app, phase, worker) {
        return None;
    }
    let site = board.workers[&worker].site.expect("checked");
    let a = &board.apps[app.0 as usize];
    let candidates: Vec<usize> =
        (a.fresh[0]..a.tasks[0].len()).filter(|&i| !a.tasks[0][i].done && a.tasks[0][i].attempts.is_empty()).collect();
    if candidates.is_empty() {
        return None;
    }
    let files: Vec<&[u32]> = candidates.iter().map(|&i| a.files[i].as_slice()).collect();
    let empty = super::locality::SiteTable::new();
    let table = board.sites.get(&site).unwrap_or(&empty);
    let weights = super::locality::weights(metric, &files, table);
    board.draws += 1;
    let draw = splitmix64(board.config.seed ^ splitmix64(board.draws));
    super::locality::choose(&weights, top as usize, draw).map(|k| candidates[k])
}
