//! Which workers may get an application's tasks: the program it runs, and the programs each
//! worker says it can run.
//!
//! A worker that cannot run a program fails every task of it at once, and a board that kept
//! offering it those tasks re-issued them for ever (issue 35: 12,662 attempts of one map in
//! 20 s). So an application may name its program, a worker may say what it runs, and a poll
//! offers a worker only the applications it can run. Drivers that say neither (the
//! simulator's workers run anything) see the board as before.

use std::collections::BTreeSet;

use crate::{Nanos, WorkerId};

use super::AppId;
use super::board::{Board, State};

impl Board {
    /// Says that application `app`'s tasks run `program`: only workers that say they can run
    /// it ([`Board::set_programs`]), or never said what they run, are offered them.
    pub fn require(&mut self, app: AppId, program: &str) {
        if let Some(a) = self.apps.get_mut(app.0 as usize) {
            a.program = Some(program.to_string());
        }
    }

    /// The program application `app` requires, if it named one.
    pub fn program_of(&self, app: AppId) -> Option<&str> {
        self.apps.get(app.0 as usize)?.program.as_deref()
    }

    /// Says which programs `worker` can run (its whole list: it replaces what it said before).
    pub fn set_programs(&mut self, worker: WorkerId, programs: impl IntoIterator<Item = String>) {
        self.worker(worker).programs = Some(programs.into_iter().collect());
    }

    /// The programs `worker` said it can run, if it said.
    pub fn programs(&self, worker: WorkerId) -> Option<&BTreeSet<String>> {
        self.workers.get(&worker)?.programs.as_ref()
    }

    /// Whether `worker` may be offered `app`'s tasks: the application names no program, or the
    /// worker never said what it runs, or it said it runs that program.
    pub fn can_run(&self, worker: WorkerId, app: AppId) -> bool {
        let Some(program) = self.apps.get(app.0 as usize).and_then(|a| a.program.as_deref()) else {
            return true;
        };
        match self.workers.get(&worker).and_then(|w| w.programs.as_ref()) {
            Some(can) => can.contains(program),
            None => true,
        }
    }

    /// How many live workers can run `app`'s tasks: workers that can run it, are not presumed
    /// failed, and either hold an attempt that is running or were heard from within `quiet`
    /// of `now`. Zero means the application waits until a worker that can run it polls.
    pub fn able_workers(&self, app: AppId, now: Nanos, quiet: Nanos) -> usize {
        self.workers
            .iter()
            .filter(|&(&id, w)| {
                let busy = w.holding.is_some_and(|a| matches!(self.attempts[a.0 as usize].state, State::Running));
                self.can_run(id, app) && w.presumed_at.is_none() && (busy || now.0.saturating_sub(w.seen.0) <= quiet.0)
            })
            .count()
    }
}
