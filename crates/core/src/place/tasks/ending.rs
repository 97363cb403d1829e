//! How an application ends without finishing: a task that keeps failing the same way is given
//! up, or its submitter cancels it. Either way its attempts out are dropped (their results will
//! be refused), and no task of it is offered again.
//!
//! A reported failure (the worker's program failed) re-offers the task at once. A program
//! that cannot succeed — a command no worker allow-lists, an input it cannot read — would then
//! be retried for ever, each attempt failing in milliseconds (issue 35). So each task counts
//! its reported failures in a row that give the same reason (the driver keys the reason, e.g.
//! a hash of the worker's message); at [`BoardConfig::give_up_after`] of them the application
//! is given up. A failure with another reason starts the count again, so a flaky worker or a
//! passing fault does not end an application; crashes and presumed failures (no reason known)
//! neither count nor reset it.

use crate::measure::secs;
use crate::{Nanos, WorkerId};

#[cfg(doc)]
use super::BoardConfig;
use super::board::{Board, State};
use super::{AppId, AttemptId, Refusal, TaskRef};

/// How an application ended without finishing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `task` failed `failures` times in a row with the same reason.
    GaveUp {
        /// The task.
        task: TaskRef,
        /// Its failures in a row.
        failures: u32,
    },
    /// Its submitter cancelled it.
    Cancelled,
}

/// Why an application cannot be cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotCancelled {
    /// No such application.
    #[error("no application {0:?}")]
    Unknown(AppId),
    /// It finished.
    #[error("application {0:?} is done")]
    Done(AppId),
    /// It ended already.
    #[error("application {0:?} ended already: {1:?}")]
    Over(AppId, End),
}

impl Board {
    /// A worker says `attempt` failed (its program failed, or it is giving up), giving a
    /// reason keyed as `why`: the task is on offer again at once (`Ok(None)`), unless it has
    /// now failed [`BoardConfig::give_up_after`] times in a row with this reason, which gives
    /// its application up (`Ok(Some(End::GaveUp { .. }))`).
    pub fn failed(
        &mut self,
        worker: WorkerId,
        attempt: AttemptId,
        now: Nanos,
        why: u64,
    ) -> Result<Option<End>, Refusal> {
        let bound = self.config.give_up_after;
        self.fail(worker, attempt, now, why, |n| bound.is_some_and(|b| n >= b))
    }

    /// Replays a failure report whose outcome is known (from a log): the same as
    /// [`Board::failed`], but the application is given up exactly when `gave_up` says, so a
    /// bound changed between runs cannot make the replay differ from what was decided.
    pub fn replay_failed(
        &mut self,
        worker: WorkerId,
        attempt: AttemptId,
        now: Nanos,
        why: u64,
        gave_up: bool,
    ) -> Result<Option<End>, Refusal> {
        self.fail(worker, attempt, now, why, |_| gave_up)
    }

    fn fail(
        &mut self,
        worker: WorkerId,
        attempt: AttemptId,
        now: Nanos,
        why: u64,
        give_up: impl FnOnce(u32) -> bool,
    ) -> Result<Option<End>, Refusal> {
        let a = self.owned(worker, attempt)?;
        let task = a.task;
        if self.apps[task.app.0 as usize].ended.is_some() {
            return Err(Refusal::Over { attempt, app: task.app });
        }
        if !a.live() {
            return Err(Refusal::AlreadyReported(attempt));
        }
        let (started, state) = (a.started, a.state);
        self.release(worker, attempt);
        self.worker(worker).seen = now;
        self.running.remove(&attempt);
        self.attempts[attempt.0 as usize].state = State::Over;
        if let State::Running = state {
            self.worker(worker).estimate.on_attempt(secs(Nanos(now.0.saturating_sub(started.0))), true);
        }
        let record = &mut self.apps[task.app.0 as usize].tasks[task.phase.at()][task.index as usize];
        if record.done {
            // Another attempt finished it: this failure says nothing about the task.
            return Ok(None);
        }
        let failures = match record.streak {
            Some((key, n)) if key == why => n + 1,
            _ => 1,
        };
        record.streak = Some((why, failures));
        if give_up(failures) {
            let end = End::GaveUp { task, failures };
            self.end(task.app, now, end);
            return Ok(Some(end));
        }
        Ok(None)
    }

    /// Cancels application `app`: no task of it is offered again, and the results of its
    /// attempts out are refused ([`Refusal::Over`]).
    pub fn cancel(&mut self, app: AppId, now: Nanos) -> Result<(), NotCancelled> {
        let a = self.apps.get(app.0 as usize).ok_or(NotCancelled::Unknown(app))?;
        if a.done_at.is_some() {
            return Err(NotCancelled::Done(app));
        }
        if let Some((_, end)) = a.ended {
            return Err(NotCancelled::Over(app, end));
        }
        self.end(app, now, End::Cancelled);
        Ok(())
    }

    /// Ends `app` without finishing it: its attempts out are dropped (not counted against
    /// their workers: they did not fail).
    fn end(&mut self, app: AppId, now: Nanos, how: End) {
        let a = &mut self.apps[app.0 as usize];
        a.ended = Some((now, how));
        let out: Vec<AttemptId> = a.tasks.iter().flatten().flat_map(|t| t.attempts.iter().copied()).collect();
        for id in out {
            if self.attempts[id.0 as usize].live() {
                self.attempts[id.0 as usize].state = State::Over;
                self.running.remove(&id);
            }
        }
    }
}
