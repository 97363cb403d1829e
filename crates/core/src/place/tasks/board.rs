//! The board: applications, their tasks, the attempts handed out, and what has been learned of
//! the workers, with the transitions a poll, an upload and a failure report make.

use std::collections::BTreeMap;

use crate::measure::{EstimateConfig, Ewma, FailureModel, WorkerEstimate, exec_time, secs};
use crate::order::apps::{AppKey, AppOrder, laxity, rank};
use crate::{Nanos, WorkerId};

use super::ending::End;
use super::locality::{FileId, SiteTable};
use super::rules::{self, TaskRule};

/// An application, numbered from 0 in order of submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AppId(pub u32);

/// An attempt: one hand-out of one task to one worker, numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId(pub u64);

/// The two phases of a MapReduce application; every map finishes before any reduce starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Map tasks, one per split of the input.
    Map,
    /// Reduce tasks, one per partition.
    Reduce,
}

impl Phase {
    pub(crate) fn at(self) -> usize {
        match self {
            Self::Map => 0,
            Self::Reduce => 1,
        }
    }
}

/// A task: its application, phase and number within the phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskRef {
    /// The application.
    pub app: AppId,
    /// Map or reduce.
    pub phase: Phase,
    /// Its number in the phase, from 0.
    pub index: u32,
}

/// An application as submitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppSpec {
    /// Map tasks (splits of the input); at least 1.
    pub maps: u32,
    /// Reduce tasks (partitions); 0 for a map-only application.
    pub reduces: u32,
    /// When it is due (absolute).
    pub deadline: Nanos,
    /// What the submitter expects one task to take on a worker that does not fail, in seconds,
    /// if known; used until tasks of the application have been seen to finish.
    pub task_estimate: Option<f64>,
}

/// The board's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoardConfig {
    /// How applications are ordered.
    pub order: AppOrder,
    /// How a task is chosen within one.
    pub rule: TaskRule,
    /// Offer the next application when the first has nothing for this worker (the notes'
    /// reading); `false` answers nothing, as Algorithm 1 is written.
    pub fall_through: bool,
    /// An attempt running longer than this many times its task's mean successful time is
    /// presumed failed (Dou §3.4.3 gives no number).
    pub presume_factor: f64,
    /// A task's time, in seconds, before any is known (no estimate given, none seen).
    pub default_task_time: f64,
    /// Which expectation of a task's time under failures (Eq. 3.4, or the exact exponential).
    pub model: FailureModel,
    /// The priors of the workers' estimates.
    pub estimates: EstimateConfig,
    /// Seed of the random rule's choices.
    pub seed: u64,
    /// A task whose attempts fail this many times in a row, each reporting the same reason,
    /// ends its application as given up ([`End::GaveUp`]): a program that cannot succeed is
    /// not retried for ever. `None`: never given up (every failure re-offers the task).
    pub give_up_after: Option<u32>,
}

impl Default for BoardConfig {
    fn default() -> Self {
        Self {
            order: AppOrder::default(),
            rule: TaskRule::MiscoRt,
            fall_through: true,
            presume_factor: 3.0,
            default_task_time: 60.0,
            model: FailureModel::Thesis,
            estimates: EstimateConfig::default(),
            seed: 1,
            // Hadoop's default attempts per task (mapreduce.map.maxattempts).
            give_up_after: Some(4),
        }
    }
}

/// A task handed to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The attempt, which the worker's upload names.
    pub attempt: AttemptId,
    /// The task.
    pub task: TaskRef,
    /// Whether another attempt of the task was already out (a replica, or a re-issue).
    pub repeat: bool,
}

/// What became of an upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upload {
    /// The task's result: kept. Whether that finished the phase, and the application.
    Accepted {
        /// Every task of the phase is done.
        phase_done: bool,
        /// Every task of the application is done.
        app_done: bool,
    },
    /// The task was already done by another attempt: this result is not counted.
    Duplicate,
}

/// Why an upload or a failure report is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No such attempt was handed out.
    #[error("attempt {0:?} was never handed out")]
    Unknown(AttemptId),
    /// The attempt's application is over (given up or cancelled): its result is not wanted.
    #[error("attempt {attempt:?}'s application {app:?} is over (given up or cancelled)")]
    Over {
        /// The attempt.
        attempt: AttemptId,
        /// Its application.
        app: AppId,
    },
    /// The attempt was handed to another worker.
    #[error("attempt {attempt:?} belongs to {holder}, not {worker}")]
    NotYours {
        /// The attempt.
        attempt: AttemptId,
        /// Who holds it.
        holder: WorkerId,
        /// Who sent it.
        worker: WorkerId,
    },
    /// The attempt already reported.
    #[error("attempt {0:?} already reported")]
    AlreadyReported(AttemptId),
}

/// An application's progress.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppStatus {
    /// The application.
    pub app: AppId,
    /// When it was submitted, and is due.
    pub arrival: Nanos,
    /// When it is due.
    pub deadline: Nanos,
    /// Maps done, of how many.
    pub maps: (u32, u32),
    /// Reduces done, of how many.
    pub reduces: (u32, u32),
    /// Attempts out now (running or presumed failed, not yet given up).
    pub running: u32,
    /// Attempts handed out in all.
    pub attempts: u64,
    /// Attempts handed out while another of the same task was out.
    pub repeats: u64,
    /// Results refused because the task was already done.
    pub duplicates: u64,
    /// When its last task was done.
    pub done_at: Option<Nanos>,
    /// Its laxity in seconds now (Eq. 3.9); `None` once done or over.
    pub laxity: Option<f64>,
    /// When and how it ended without finishing, if it did.
    pub ended: Option<(Nanos, End)>,
}

impl AppStatus {
    /// Whether it finished by its deadline (`None` while it runs and can still make it; an
    /// application given up or cancelled did not).
    pub fn met(&self, now: Nanos) -> Option<bool> {
        match self.done_at {
            Some(at) => Some(at <= self.deadline),
            None if now > self.deadline || self.ended.is_some() => Some(false),
            None => None,
        }
    }
}

/// A worker as the board sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkerStatus {
    /// The worker.
    pub worker: WorkerId,
    /// The attempt it holds (running or presumed failed), if any.
    pub holding: Option<AttemptId>,
    /// Presumed failed, and not heard from since.
    pub presumed: bool,
    /// Its estimated failure rate, per second.
    pub rate: f64,
    /// Its estimated recovery time, seconds.
    pub recovery: f64,
}

/// How an attempt stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Out, within its expected time.
    Running,
    /// Out, but presumed failed at this time.
    Presumed(Nanos),
    /// Its result was accepted.
    Done,
    /// Its task was finished by another attempt, or it was lost with its worker; an upload is
    /// still answered (a duplicate, or accepted if the task is still open).
    Over,
    /// It uploaded a result that was refused as a duplicate.
    Reported,
}

/// One hand-out.
#[derive(Clone, Debug)]
pub(crate) struct Attempt {
    pub(crate) task: TaskRef,
    pub(crate) worker: WorkerId,
    pub(crate) started: Nanos,
    pub(crate) state: State,
    /// The worker's last report of its progress, 0 to 1, if it makes any.
    pub(crate) progress: Option<f64>,
    /// When it was presumed failed, if it was (kept when it is later superseded).
    pub(crate) presumed: Option<Nanos>,
}

impl Attempt {
    pub(crate) fn live(&self) -> bool {
        matches!(self.state, State::Running | State::Presumed(_))
    }
}

/// One task's record.
#[derive(Clone, Debug, Default)]
pub(crate) struct Task {
    pub(crate) done: bool,
    /// Attempts handed out, oldest first.
    pub(crate) attempts: Vec<AttemptId>,
    /// The reason its last reported failure gave (as the driver keys it), and how many
    /// reported failures in a row gave it.
    pub(crate) streak: Option<(u64, u32)>,
}

#[derive(Clone, Debug)]
pub(crate) struct App {
    pub(crate) spec: AppSpec,
    pub(crate) arrival: Nanos,
    pub(crate) tasks: [Vec<Task>; 2],
    pub(crate) done: [u32; 2],
    /// Mean successful time of a task of each phase (τ_t^j), seconds.
    pub(crate) tau: [Ewma; 2],
    /// Successful times of each phase, seconds, for rules that want their distribution.
    pub(crate) durations: [Vec<f64>; 2],
    /// The sequential rule's place in each phase.
    pub(crate) cursor: [usize; 2],
    /// In each phase, no task before this one is unassigned (tasks are never unassigned
    /// again), so finding the first unassigned task is not a walk over every task.
    pub(crate) fresh: [usize; 2],
    pub(crate) attempts: u64,
    pub(crate) repeats: u64,
    pub(crate) duplicates: u64,
    pub(crate) done_at: Option<Nanos>,
    /// Each map task's input files, for worker-centric locality (empty: none known).
    pub(crate) files: Vec<Vec<FileId>>,
    /// The program a worker must be able to run to get its tasks (`None`: any worker).
    pub(crate) program: Option<String>,
    /// When and how it ended without finishing.
    pub(crate) ended: Option<(Nanos, End)>,
}

impl App {
    /// The phase whose tasks are on offer: reduce once every map is done.
    pub(crate) fn phase(&self) -> Phase {
        if (self.done[0] as usize) < self.tasks[0].len() { Phase::Map } else { Phase::Reduce }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Worker {
    pub(crate) estimate: WorkerEstimate,
    /// τ_i^j: its mean successful time per application and phase.
    pub(crate) tau: BTreeMap<(AppId, Phase), Ewma>,
    /// When it was last presumed failed and has not polled since.
    pub(crate) presumed_at: Option<Nanos>,
    /// The attempt it is working on, as far as the board knows.
    pub(crate) holding: Option<AttemptId>,
    /// When it was last heard from (a poll, an upload, a failure report).
    pub(crate) seen: Nanos,
    /// Its site, if it said.
    pub(crate) site: Option<u32>,
    /// The programs it says it can run (`None`: it never said, so any).
    pub(crate) programs: Option<std::collections::BTreeSet<String>>,
}

/// The coordinator's state: applications, tasks, attempts and workers.
#[derive(Clone, Debug)]
pub struct Board {
    pub(crate) config: BoardConfig,
    pub(crate) apps: Vec<App>,
    pub(crate) attempts: Vec<Attempt>,
    pub(crate) workers: BTreeMap<WorkerId, Worker>,
    /// How many random draws were made (the random rule's stream position).
    pub(crate) draws: u64,
    /// Attempts in the Running state, so that a poll's presumption looks at these only.
    pub(crate) running: std::collections::BTreeSet<AttemptId>,
    /// Each site's store as the board believes it (Ko et al.'s reference table).
    pub(crate) sites: BTreeMap<u32, SiteTable>,
}

impl Board {
    /// An empty board.
    pub fn new(config: BoardConfig) -> Self {
        // A factor or default that is not a positive number would presume everything at once,
        // or nothing ever (a dead worker's task stuck for good).
        let sane = |v: f64, fallback: f64| if v.is_finite() && v > 0.0 { v } else { fallback };
        let d = BoardConfig::default();
        let config = BoardConfig {
            presume_factor: sane(config.presume_factor, d.presume_factor),
            default_task_time: sane(config.default_task_time, d.default_task_time),
            // A bound of 0 would give up before anything failed.
            give_up_after: config.give_up_after.map(|n| n.max(1)),
            ..config
        };
        Self {
            config,
            apps: Vec::new(),
            attempts: Vec::new(),
            workers: BTreeMap::new(),
            draws: 0,
            running: std::collections::BTreeSet::new(),
            sites: BTreeMap::new(),
        }
    }

    /// The board's settings.
    pub fn config(&self) -> &BoardConfig {
        &self.config
    }

    /// Adds an application; its maps are on offer at once.
    pub fn submit(&mut self, spec: AppSpec, now: Nanos) -> AppId {
        let estimate = spec.task_estimate.filter(|e| e.is_finite() && *e > 0.0);
        let spec = AppSpec { maps: spec.maps.max(1), task_estimate: estimate, ..spec };
        let gain = self.config.estimates.gain;
        self.apps.push(App {
            spec,
            arrival: now,
            tasks: [vec![Task::default(); spec.maps as usize], vec![Task::default(); spec.reduces as usize]],
            done: [0, 0],
            tau: [Ewma::new(gain), Ewma::new(gain)],
            durations: [Vec::new(), Vec::new()],
            cursor: [0, 0],
            fresh: [0, 0],
            attempts: 0,
            repeats: 0,
            duplicates: 0,
            done_at: None,
            files: Vec::new(),
            program: None,
            ended: None,
        });
        AppId(self.apps.len() as u32 - 1)
    }

    /// Adds an application whose map tasks read the given files (one list per map), so that
    /// the worker-centric rule can prefer, for a worker, the maps whose files its site holds.
    /// Lists beyond the maps are ignored; missing ones are empty.
    pub fn submit_with_files(&mut self, spec: AppSpec, now: Nanos, mut files: Vec<Vec<FileId>>) -> AppId {
        let id = self.submit(spec, now);
        let maps = self.apps[id.0 as usize].tasks[0].len();
        files.resize(maps, Vec::new());
        self.apps[id.0 as usize].files = files;
        id
    }

    /// Says which site `worker` is at (Ko et al.: workers of a site share its data store).
    pub fn set_site(&mut self, worker: WorkerId, site: u32) {
        self.worker(worker).site = Some(site);
        self.sites.entry(site).or_default();
    }

    /// Files `site`'s store reports it has evicted (piggybacked on a poll).
    pub fn site_evicted(&mut self, site: u32, files: &[FileId]) {
        self.sites.entry(site).or_default().evicted(files);
    }

    /// What the board believes `site`'s store holds.
    pub fn site_table(&self, site: u32) -> Option<&SiteTable> {
        self.sites.get(&site)
    }

    /// A worker asks for work: a task, or `None` when no rule offers it one now.
    pub fn poll(&mut self, worker: WorkerId, now: Nanos) -> Option<Assignment> {
        self.heard_from(worker, now);
        self.presume(now);
        // Only what this worker can run: a task it cannot run would fail at once, again and
        // again (issue 35).
        let order: Vec<usize> =
            self.order(now).into_iter().filter(|&a| self.can_run(worker, AppId(a as u32))).collect();
        let candidates = if self.config.fall_through { order.len() } else { order.len().min(1) };
        for &app in &order[..candidates] {
            if let Some(task) = rules::pick(self, AppId(app as u32), worker, now) {
                return Some(self.hand_out(task, worker, now));
            }
        }
        None
    }

    /// Replays a poll whose answer is known (from a log): the same presumptions and losses as
    /// [`Board::poll`] at `now`, then `task` handed out without asking the rule. A coordinator
    /// restarted from its log rebuilds the board this way, so a rule changed between versions,
    /// or the random rule's stream, cannot make the replay differ from what the workers were
    /// told. The rule's own state (the sequential rule's cursor, the random rule's stream) is
    /// moved on as if it had chosen the task.
    pub fn replay_poll(&mut self, worker: WorkerId, now: Nanos, task: Option<TaskRef>) -> Option<Assignment> {
        self.heard_from(worker, now);
        self.presume(now);
        let task = task.filter(|t| self.valid(*t))?;
        rules::replayed(self, task, worker);
        Some(self.hand_out(task, worker, now))
    }

    /// What attempt `id` is: its task, its worker, and whether it is still out (running or
    /// presumed failed), so that a driver can serve its input and check an upload's size
    /// before taking it.
    pub fn attempt(&self, id: AttemptId) -> Option<(TaskRef, WorkerId, bool)> {
        self.attempts.get(id.0 as usize).map(|a| (a.task, a.worker, a.live()))
    }

    /// The application's settings as submitted.
    pub fn app_spec(&self, id: AppId) -> Option<AppSpec> {
        self.apps.get(id.0 as usize).map(|a| a.spec)
    }

    /// Every worker heard from: the attempt it holds as far as the board knows, whether it
    /// is presumed failed, and its estimated failure rate (per second) and recovery (seconds).
    pub fn workers(&self) -> Vec<WorkerStatus> {
        self.workers
            .iter()
            .map(|(&id, w)| WorkerStatus {
                worker: id,
                holding: w.holding.filter(|a| self.attempts[a.0 as usize].live()),
                presumed: w.presumed_at.is_some(),
                rate: w.estimate.rate(),
                recovery: w.estimate.recovery(),
            })
            .collect()
    }

    /// Whether a poll by `worker` at `now` answered with nothing would change more than when
    /// the worker was last heard from: it is new, holds an attempt (a restart shows, or an
    /// attempt ends), is presumed failed (it has recovered), or some running attempt is now far
    /// enough past its task's mean time to be presumed failed. A driver that logs polls may leave
    /// out the idle polls that are not news (a replay then has an older "last heard from", and
    /// nothing else differs), so that idle workers do not grow its log without end.
    pub fn idle_poll_is_news(&self, worker: WorkerId, now: Nanos) -> bool {
        let Some(w) = self.workers.get(&worker) else {
            return true;
        };
        w.holding.is_some()
            || w.presumed_at.is_some()
            || self.running.iter().any(|id| {
                let a = &self.attempts[id.0 as usize];
                secs(Nanos(now.0.saturating_sub(a.started.0)))
                    > self.config.presume_factor * self.task_tau(a.task.app, a.task.phase)
            })
    }

    /// Attempts running now (handed out, not reported, not presumed failed).
    pub fn running(&self) -> u32 {
        self.running.len() as u32
    }

    fn valid(&self, t: TaskRef) -> bool {
        self.apps.get(t.app.0 as usize).is_some_and(|a| (t.index as usize) < a.tasks[t.phase.at()].len())
    }

    /// A worker uploads the result of `attempt`.
    pub fn upload(&mut self, worker: WorkerId, attempt: AttemptId, now: Nanos) -> Result<Upload, Refusal> {
        let a = self.owned(worker, attempt)?;
        if matches!(a.state, State::Done | State::Reported) {
            return Err(Refusal::AlreadyReported(attempt));
        }
        // Refused before anything changes, so that a driver that logs only what the board
        // accepted replays the same board.
        if self.apps[a.task.app.0 as usize].ended.is_some() {
            return Err(Refusal::Over { attempt, app: a.task.app });
        }
        let (task, started, state) = (a.task, a.started, a.state);
        self.release(worker, attempt);
        self.running.remove(&attempt);
        self.worker(worker).seen = now;
        let elapsed = secs(Nanos(now.0.saturating_sub(started.0)));
        // It reported, so it was alive: a presumption of its failure is taken back, whether or
        // not its result is still wanted.
        if self.attempts[attempt.0 as usize].presumed.is_some() {
            let w = self.worker(worker);
            w.estimate.on_false_alarm();
            w.presumed_at = None;
        }
        let app = &mut self.apps[task.app.0 as usize];
        let phase = task.phase.at();
        if app.tasks[phase][task.index as usize].done {
            app.duplicates += 1;
            self.attempts[attempt.0 as usize].state = State::Reported;
            return Ok(Upload::Duplicate);
        }
        app.tasks[phase][task.index as usize].done = true;
        app.done[phase] += 1;
        app.tau[phase].push(elapsed);
        app.durations[phase].push(elapsed);
        let phase_done = app.done[phase] as usize == app.tasks[phase].len();
        let app_done = app.done[0] as usize == app.tasks[0].len() && app.done[1] as usize == app.tasks[1].len();
        if app_done {
            app.done_at = Some(now);
        }
        self.attempts[attempt.0 as usize].state = State::Done;
        let w = self.worker(worker);
        let gain = w.estimate.gain();
        w.tau.entry((task.app, task.phase)).or_insert_with(|| Ewma::new(gain)).push(elapsed);
        // Work counts once: a presumed attempt's time up to its presumption was counted then.
        let counted = match state {
            State::Presumed(at) => secs(Nanos(now.0.saturating_sub(at.0))),
            _ => elapsed,
        };
        w.estimate.on_attempt(counted, false);
        // Other attempts of the task will be refused when they report.
        for other in self.apps[task.app.0 as usize].tasks[phase][task.index as usize].attempts.clone() {
            if other != attempt && self.attempts[other.0 as usize].live() {
                self.attempts[other.0 as usize].state = State::Over;
                self.running.remove(&other);
            }
        }
        Ok(Upload::Accepted { phase_done, app_done })
    }

    /// A worker reports how far it is through `attempt` (0 to 1), for rules that use progress
    /// (LATE). Reports of attempts it does not hold are ignored.
    pub fn progress(&mut self, worker: WorkerId, attempt: AttemptId, fraction: f64) {
        if let Some(a) = self.attempts.get_mut(attempt.0 as usize)
            && a.worker == worker
            && a.live()
        {
            a.progress = Some(fraction.clamp(0.0, 1.0));
        }
    }

    /// Every application's progress, in order of submission.
    pub fn status(&self, now: Nanos) -> Vec<AppStatus> {
        (0..self.apps.len()).map(|i| self.app_status(AppId(i as u32), now)).collect()
    }

    /// One application's progress.
    pub fn app_status(&self, id: AppId, now: Nanos) -> AppStatus {
        let app = &self.apps[id.0 as usize];
        let running =
            app.tasks.iter().flatten().flat_map(|t| &t.attempts).filter(|a| self.attempts[a.0 as usize].live()).count()
                as u32;
        AppStatus {
            app: id,
            arrival: app.arrival,
            deadline: app.spec.deadline,
            maps: (app.done[0], app.tasks[0].len() as u32),
            reduces: (app.done[1], app.tasks[1].len() as u32),
            running,
            attempts: app.attempts,
            repeats: app.repeats,
            duplicates: app.duplicates,
            done_at: app.done_at,
            laxity: (app.done_at.is_none() && app.ended.is_none())
                .then(|| laxity(app.spec.deadline, now, self.remaining_time(id))),
            ended: app.ended,
        }
    }

    /// Whether every application is done.
    pub fn all_done(&self) -> bool {
        self.apps.iter().all(|a| a.done_at.is_some())
    }

    /// Whether every application is over: done, given up or cancelled.
    pub fn all_over(&self) -> bool {
        self.apps.iter().all(|a| a.done_at.is_some() || a.ended.is_some())
    }

    /// The failure rate (per second) and recovery time (seconds) estimated for `worker`, if it
    /// has polled.
    pub fn worker_estimate(&self, worker: WorkerId) -> Option<(f64, f64)> {
        self.workers.get(&worker).map(|w| (w.estimate.rate(), w.estimate.recovery()))
    }

    /// The expected seconds left of application `id` (Eq. 3.8 per phase, summed over the phases
    /// left, over the workers not presumed failed that can run it; the notes' reading of the
    /// barrier).
    pub fn remaining_time(&self, id: AppId) -> f64 {
        let app = &self.apps[id.0 as usize];
        let mut total = 0.0;
        for phase in [Phase::Map, Phase::Reduce] {
            let left = (app.tasks[phase.at()].len() as u32 - app.done[phase.at()]) as u64;
            if left == 0 {
                continue;
            }
            let w: Vec<f64> = self
                .workers
                .iter()
                .filter(|&(&k, w)| w.presumed_at.is_none() && self.can_run(k, id))
                .map(|(&k, _)| self.expected_time(k, id, phase))
                .collect();
            total += exec_time(&w, left);
        }
        total
    }

    /// τ_i^j: what a task of `app`'s `phase` takes on `worker` when nothing fails, in seconds:
    /// the worker's own mean, else the application's, else the submitter's estimate, else the
    /// board's default.
    pub(crate) fn tau(&self, worker: WorkerId, app: AppId, phase: Phase) -> f64 {
        let a = &self.apps[app.0 as usize];
        self.workers
            .get(&worker)
            .and_then(|w| w.tau.get(&(app, phase)))
            .and_then(Ewma::value)
            .or_else(|| a.tau[phase.at()].value())
            .or(a.spec.task_estimate)
            .unwrap_or(self.config.default_task_time)
    }

    /// The application's mean successful time of a task of `phase` (τ_t^j), or its estimate.
    pub(crate) fn task_tau(&self, app: AppId, phase: Phase) -> f64 {
        let a = &self.apps[app.0 as usize];
        a.tau[phase.at()].value().or(a.spec.task_estimate).unwrap_or(self.config.default_task_time)
    }

    /// w_i^j: the expected time of such a task on `worker`, failures included (Eq. 3.4).
    pub(crate) fn expected_time(&self, worker: WorkerId, app: AppId, phase: Phase) -> f64 {
        let tau = self.tau(worker, app, phase);
        match self.workers.get(&worker) {
            Some(w) => w.estimate.task_time(tau, self.config.model),
            None => WorkerEstimate::new(self.config.estimates).task_time(tau, self.config.model),
        }
    }

    /// Applications not yet done, in the order a worker should be offered them.
    fn order(&self, now: Nanos) -> Vec<usize> {
        let open: Vec<usize> =
            (0..self.apps.len()).filter(|&i| self.apps[i].done_at.is_none() && self.apps[i].ended.is_none()).collect();
        let keys: Vec<AppKey> = open
            .iter()
            .map(|&i| {
                let app = &self.apps[i];
                let lax = match self.config.order {
                    AppOrder::LeastLaxity { .. } => {
                        laxity(app.spec.deadline, now, self.remaining_time(AppId(i as u32)))
                    }
                    _ => 0.0,
                };
                AppKey { arrival: app.arrival, deadline: app.spec.deadline, laxity: lax }
            })
            .collect();
        rank(self.config.order, &keys).into_iter().map(|k| open[k]).collect()
    }

    /// A poll from `worker`: it is idle, so what it held is lost, and if it was presumed
    /// failed, it is back.
    fn heard_from(&mut self, worker: WorkerId, now: Nanos) {
        self.worker(worker).seen = now;
        let held = self.worker(worker).holding.take();
        if let Some(id) = held
            && let State::Running = self.attempts[id.0 as usize].state
        {
            // It restarted: the attempt died with it, unseen until now.
            let elapsed = secs(Nanos(now.0.saturating_sub(self.attempts[id.0 as usize].started.0)));
            self.attempts[id.0 as usize].state = State::Over;
            self.running.remove(&id);
            self.worker(worker).estimate.on_attempt(elapsed, true);
        } else if let Some(id) = held
            && self.attempts[id.0 as usize].live()
        {
            self.attempts[id.0 as usize].state = State::Over;
        }
        let w = self.worker(worker);
        if let Some(at) = w.presumed_at.take() {
            w.estimate.on_recovery(secs(Nanos(now.0.saturating_sub(at.0))));
        }
    }

    /// Presumes failed every running attempt far past its task's mean time (Dou §3.4.3 step 2).
    fn presume(&mut self, now: Nanos) {
        let running: Vec<AttemptId> = self.running.iter().copied().collect();
        for id in running {
            let a = &self.attempts[id.0 as usize];
            let limit = self.config.presume_factor * self.task_tau(a.task.app, a.task.phase);
            let elapsed = secs(Nanos(now.0.saturating_sub(a.started.0)));
            if elapsed > limit {
                let worker = a.worker;
                self.attempts[id.0 as usize].state = State::Presumed(now);
                self.attempts[id.0 as usize].presumed = Some(now);
                self.running.remove(&id);
                let w = self.worker(worker);
                w.estimate.on_attempt(elapsed, true);
                w.presumed_at = Some(now);
            }
        }
    }

    fn hand_out(&mut self, task: TaskRef, worker: WorkerId, now: Nanos) -> Assignment {
        let id = AttemptId(self.attempts.len() as u64);
        let app = &mut self.apps[task.app.0 as usize];
        let record = &mut app.tasks[task.phase.at()][task.index as usize];
        let repeat = !record.attempts.is_empty();
        record.attempts.push(id);
        let p = task.phase.at();
        while app.fresh[p] < app.tasks[p].len() && !app.tasks[p][app.fresh[p]].attempts.is_empty() {
            app.fresh[p] += 1;
        }
        app.attempts += 1;
        app.repeats += u64::from(repeat);
        self.attempts.push(Attempt {
            task,
            worker,
            started: now,
            state: State::Running,
            progress: None,
            presumed: None,
        });
        self.running.insert(id);
        self.worker(worker).holding = Some(id);
        // The site will fetch what it lacks of the map's files: its table says so at once.
        if let Some(site) = self.workers[&worker].site
            && task.phase == Phase::Map
            && let Some(files) = self.apps[task.app.0 as usize].files.get(task.index as usize)
            && !files.is_empty()
        {
            let files = files.clone();
            self.sites.entry(site).or_default().scheduled(&files);
        }
        Assignment { attempt: id, task, repeat }
    }

    pub(crate) fn owned(&self, worker: WorkerId, attempt: AttemptId) -> Result<&Attempt, Refusal> {
        let a = self.attempts.get(attempt.0 as usize).ok_or(Refusal::Unknown(attempt))?;
        if a.worker != worker {
            return Err(Refusal::NotYours { attempt, holder: a.worker, worker });
        }
        Ok(a)
    }

    pub(crate) fn release(&mut self, worker: WorkerId, attempt: AttemptId) {
        let w = self.worker(worker);
        if w.holding == Some(attempt) {
            w.holding = None;
        }
    }

    pub(crate) fn worker(&mut self, id: WorkerId) -> &mut Worker {
        let config = self.config.estimates;
        self.workers.entry(id).or_insert_with(|| Worker {
            estimate: WorkerEstimate::new(config),
            tau: BTreeMap::new(),
            presumed_at: None,
            holding: None,
            seen: Nanos(0),
            site: None,
            programs: None,
        })
    }
}
