//! The coordinator's state and its transitions: the core's task board, what each application
//! runs, which name each worker has, and the store they are kept in.
//!
//! Every change runs inside one store transaction ([`Store::change`]): entries appended by
//! another coordinator since this one last looked are applied first, then the board decides,
//! then the decision is appended. The board is never told something the log does not say, and
//! when a commit fails the state is rebuilt from the log rather than trusted.

use std::collections::HashMap;
use std::time::Duration;

use switchyard_core::place::tasks::{
    AppId, AppSpec, AttemptId, Board, BoardConfig, End, NotCancelled, Phase, Refusal, TaskRef, Upload,
};
use switchyard_core::{Nanos, WorkerId};

use crate::programs::{self, Program, ProgramError};
use crate::store::{Blob, Event, Kind, Reader, Store, StoreError};
use crate::wire::{AppView, Grant, PartsError, Poll, Submitted, WorkerView, decode_parts};

/// Why a request is refused; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// The request is malformed (400).
    #[error("{0}")]
    Bad(String),
    /// The application's program or input is wrong (400).
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// A result body whose framing is wrong (400).
    #[error(transparent)]
    Parts(#[from] PartsError),
    /// No such application (404).
    #[error("no application {0}")]
    NoApp(u32),
    /// The application has not finished (409).
    #[error("application {app} is not done: {maps} maps and {reduces} reduces to go")]
    NotDone {
        /// The application.
        app: u32,
        /// Maps left.
        maps: u32,
        /// Reduces left.
        reduces: u32,
    },
    /// The board refused an upload or report: not this worker's, never handed out, or
    /// reported already (409).
    #[error("{0}")]
    Refused(#[from] Refusal),
    /// The task was done by another attempt first; this result is not counted (409).
    #[error("attempt {0} was not needed: another attempt of its task finished first, and its result is the one kept")]
    Duplicate(u64),
    /// A worker that has never polled (409).
    #[error("no worker is called {0:?}: a worker polls before it reports")]
    NoWorker(String),
    /// A worker polling again too soon after a poll that got nothing (429).
    #[error("worker {worker:?} polled again {early_ms} ms too early: an idle worker waits {wait_ms} ms between polls")]
    TooOften {
        /// The worker.
        worker: String,
        /// How much too early.
        early_ms: u64,
        /// The wait between empty polls.
        wait_ms: u64,
    },
    /// The application was given up or cancelled, so what was asked of it is not there
    /// (409).
    #[error("application {app} {how}")]
    Over {
        /// The application.
        app: u32,
        /// What became of it, and what that means for the request.
        how: String,
    },
    /// A cancel of an application that is done or over already (409).
    #[error("{0}")]
    NotCancelled(String),
    /// The database failed (500).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What each application runs, beside its board entry.
#[derive(Clone, Debug)]
pub struct AppMeta {
    /// Its name.
    pub name: String,
    /// Its program's name.
    pub program: String,
    /// The program's argument.
    pub arg: String,
    /// When it was submitted, ns since the Unix epoch.
    pub submitted: u64,
    /// Each split's id (a hash of its bytes).
    pub splits: Vec<u32>,
    /// What its workers said when the task that gave it up failed, if it was given up.
    pub failure: Option<String>,
}

/// A submission, as read from the request.
#[derive(Clone, Debug)]
pub struct Submission {
    /// A name for people.
    pub name: String,
    /// The program.
    pub program: String,
    /// Its argument.
    pub arg: String,
    /// Reduce partitions (0: map-only).
    pub reduces: u32,
    /// Seconds from now to its deadline.
    pub deadline: f64,
    /// Bytes per split of the input.
    pub split: usize,
    /// What one task should take, seconds, if the submitter knows.
    pub estimate: Option<f64>,
}

/// The most reduce partitions an application may ask for.
pub const MAX_REDUCES: u32 = 10_000;
/// The most map tasks an input may split into.
pub const MAX_MAPS: usize = 1_000_000;
/// The largest task estimate a submission may give by default, seconds
/// ([`Coordinator::with_max_estimate`]): a worker that dies holding a task is presumed failed
/// only after `presume_factor` × the estimate, until tasks of the application are seen to
/// finish (then their mean time is used).
pub const MAX_ESTIMATE: f64 = 3600.0;
/// A worker heard from within this long, or holding an attempt that is running, is live:
/// an application no live worker can run says so in its status (it waits; it is not refused,
/// since workers may be started after the submission).
pub const LIVE: Duration = Duration::from_secs(30);
/// An idle worker's empty polls that change nothing but when it was last heard from are logged
/// at most once in this long ([`Board::idle_poll_is_news`]): without it, every idle worker
/// added about ten rows a second to the log, for ever. Well under [`LIVE`], so that a
/// coordinator that replays the log (restarted, or sharing the database) still sees every
/// polling worker as live.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// The most program names a worker's poll may list.
pub const MAX_PROGRAMS: usize = 1000;

/// How a failure's reason is keyed for the board's count of failures in a row: its text.
fn reason_key(why: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(why.as_bytes())
}

/// The part of the state the log rebuilds.
struct State {
    board: Board,
    apps: Vec<AppMeta>,
    workers: HashMap<String, WorkerId>,
    /// Sites by name, and each worker's.
    sites: HashMap<String, u32>,
    site_of: HashMap<WorkerId, u32>,
}

impl State {
    fn new(config: BoardConfig) -> Self {
        Self {
            board: Board::new(config),
            apps: Vec::new(),
            workers: HashMap::new(),
            sites: HashMap::new(),
            site_of: HashMap::new(),
        }
    }

    fn apply(&mut self, e: &Event) {
        match e {
            Event::Submit { at, name, program, arg, maps, reduces, deadline, estimate, splits, .. } => {
                let spec =
                    AppSpec { maps: *maps, reduces: *reduces, deadline: Nanos(*deadline), task_estimate: *estimate };
                // Each map reads one file, its split: what a site's store may hold.
                let id = self.board.submit_with_files(spec, Nanos(*at), splits.iter().map(|f| vec![*f]).collect());
                // Only workers that say they run the program get its tasks.
                self.board.require(id, program);
                self.apps.push(AppMeta {
                    name: name.clone(),
                    program: program.clone(),
                    arg: arg.clone(),
                    submitted: *at,
                    splits: splits.clone(),
                    failure: None,
                });
            }
            Event::Site { worker, site, name } => {
                self.sites.insert(name.clone(), *site);
                self.site_of.insert(WorkerId(*worker), *site);
                self.board.set_site(WorkerId(*worker), *site);
            }
            Event::Evicted { site, files } => self.board.site_evicted(*site, files),
            Event::Worker { id, name } => {
                self.workers.insert(name.clone(), WorkerId(*id));
            }
            Event::Poll { worker, at, task } => {
                let task = task.map(|(app, phase, index)| TaskRef {
                    app: AppId(app),
                    phase: if phase == 0 { Phase::Map } else { Phase::Reduce },
                    index,
                });
                self.board.replay_poll(WorkerId(*worker), Nanos(*at), task);
            }
            Event::Upload { worker, attempt, at } => {
                let _ = self.board.upload(WorkerId(*worker), AttemptId(*attempt), Nanos(*at));
            }
            Event::Failed { worker, attempt, at, why, gave_up } => {
                let key = reason_key(why);
                let r = self.board.replay_failed(WorkerId(*worker), AttemptId(*attempt), Nanos(*at), key, *gave_up);
                if let Ok(Some(End::GaveUp { task, .. })) = r {
                    self.apps[task.app.0 as usize].failure = Some(why.clone());
                }
            }
            Event::Programs { worker, programs } => {
                self.board.set_programs(WorkerId(*worker), programs.iter().cloned());
            }
            Event::Cancel { app, at } => {
                let _ = self.board.cancel(AppId(*app), Nanos(*at));
            }
        }
    }

    fn apply_all(&mut self, news: Vec<Event>) {
        for e in &news {
            self.apply(e);
        }
    }

    fn worker(&self, name: &str) -> Result<WorkerId, JobsError> {
        self.workers.get(name).copied().ok_or_else(|| JobsError::NoWorker(name.to_string()))
    }
}

/// The coordinator: state, store and the idle workers' poll clock.
pub struct Coordinator {
    store: Store,
    state: State,
    config: BoardConfig,
    /// The wait between an idle worker's polls, ns.
    idle_poll: u64,
    /// When each worker last polled and got nothing.
    last_empty: HashMap<WorkerId, u64>,
    /// When each worker's last poll was logged.
    last_logged: HashMap<WorkerId, u64>,
    /// The largest task estimate a submission may give, seconds.
    max_estimate: f64,
}

/// What an upload did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// Every task of the phase is now done.
    pub phase_done: bool,
    /// Every task of the application is now done.
    pub app_done: bool,
}

impl Coordinator {
    /// Opens the coordinator on `store`, rebuilding its state from the log.
    pub fn open(mut store: Store, config: BoardConfig, idle_poll: Duration) -> Result<Self, JobsError> {
        let mut state = State::new(config);
        state.apply_all(store.replay()?);
        Ok(Self {
            store,
            state,
            config,
            idle_poll: idle_poll.as_nanos() as u64,
            last_empty: HashMap::new(),
            last_logged: HashMap::new(),
            max_estimate: MAX_ESTIMATE,
        })
    }

    /// Refuses submissions whose task estimate is above `secs` ([`MAX_ESTIMATE`] unless
    /// told).
    pub fn with_max_estimate(mut self, secs: f64) -> Self {
        self.max_estimate = secs;
        self
    }

    /// The board (read-only), for status and tests.
    pub fn board(&self) -> &Board {
        &self.state.board
    }

    /// The store, for reading blobs.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Applies what other coordinators on the same database have logged since this one last
    /// looked, so that a read answers with the database's state.
    pub fn refresh(&mut self) -> Result<(), JobsError> {
        let news = self.store.catch_up()?;
        self.state.apply_all(news);
        Ok(())
    }

    /// After a failed commit the in-memory state may hold a change the log does not: rebuild.
    fn rebuild(&mut self, e: StoreError) -> JobsError {
        let mut state = State::new(self.config);
        if let Ok(events) = self.store.replay() {
            state.apply_all(events);
            self.state = state;
        }
        JobsError::Store(e)
    }

    /// Adds an application: checks it, splits its input, and logs it with its splits.
    pub fn submit(&mut self, s: Submission, input: &[u8], now: u64) -> Result<Submitted, JobsError> {
        let program = Program::parse(&s.program, &s.arg)?;
        program.check_shape(s.reduces)?;
        if s.reduces > MAX_REDUCES {
            return Err(JobsError::Bad(format!("{} reduces: at most {MAX_REDUCES}", s.reduces)));
        }
        if !(s.deadline.is_finite() && s.deadline > 0.0) {
            return Err(JobsError::Bad(format!("deadline {} s: give a positive number of seconds", s.deadline)));
        }
        if let Some(e) = s.estimate
            && !(e.is_finite() && e > 0.0)
        {
            return Err(JobsError::Bad(format!("task estimate {e} s: give a positive number of seconds")));
        }
        if let Some(e) = s.estimate
            && e > self.max_estimate
        {
            // Until a task of the application finishes, a worker that dies holding one is
            // presumed failed only after presume_factor × the estimate: 1e9 s is never.
            return Err(JobsError::Bad(format!(
                "task estimate {e} s: at most {} s (the coordinator's --max-estimate), since a worker that dies \
                 holding a task is noticed only after {} × the estimate until tasks are seen to finish",
                self.max_estimate, self.config.presume_factor
            )));
        }
        if s.split == 0 {
            return Err(JobsError::Bad("split size 0: give a positive number of bytes".into()));
        }
        if s.name.len() > 200 || s.name.contains(['\n', '\t']) {
            return Err(JobsError::Bad("name: at most 200 bytes, no tabs or newlines".into()));
        }
        program.check_input(input)?;
        let splits = programs::split(input, s.split);
        if splits.len() > MAX_MAPS {
            return Err(JobsError::Bad(format!(
                "{} splits of {} bytes: at most {MAX_MAPS}; give a larger --split",
                splits.len(),
                s.split
            )));
        }
        let maps = splits.len() as u32;
        let split_ids: Vec<u32> = splits.iter().map(|d| xxhash_rust::xxh3::xxh3_64(d) as u32).collect();
        let deadline = now.saturating_add((s.deadline * 1e9) as u64);
        let state = &mut self.state;
        let r = self.store.change(|news| {
            state.apply_all(news);
            let app = state.apps.len() as u32;
            let e = Event::Submit {
                app,
                at: now,
                name: s.name.clone(),
                program: program.name(),
                arg: s.arg.clone(),
                maps,
                reduces: s.reduces,
                deadline,
                estimate: s.estimate,
                splits: split_ids.clone(),
            };
            state.apply(&e);
            let blobs = splits
                .iter()
                .enumerate()
                .map(|(i, d)| Blob { app, kind: Kind::Split, index: i as u32, part: 0, data: d.to_vec() })
                .collect();
            Ok::<_, JobsError>((Submitted { app, maps, reduces: s.reduces, waiting: None }, vec![e], blobs))
        });
        match r {
            Ok(Ok(mut r)) => {
                r.waiting = self.waiting(r.app, now);
                Ok(r)
            }
            Ok(Err(e)) => Err(e),
            Err(e) => Err(self.rebuild(e)),
        }
    }

    /// Why application `app` cannot go ahead now, if no live worker can run it.
    fn waiting(&self, app: u32, now: u64) -> Option<String> {
        let board = &self.state.board;
        if board.able_workers(AppId(app), Nanos(now), Nanos(LIVE.as_nanos() as u64)) > 0 {
            return None;
        }
        let program = &self.state.apps[app as usize].program;
        let secs = LIVE.as_secs();
        Some(match program.strip_prefix("exec:") {
            Some(name) => format!(
                "no live worker can run {program}: none heard from in the last {secs} s allow-lists {name:?} \
                 (a worker runs it when started with --allow {name}=COMMAND); it waits for one"
            ),
            None => format!(
                "no live worker can run {program}: no worker that runs it was heard from in the last {secs} s \
                 (start one: switchyard jobs worker); it waits for one"
            ),
        })
    }

    /// A worker's poll: a task, or `None`.
    pub fn poll(&mut self, name: &str, now: u64) -> Result<Option<Grant>, JobsError> {
        self.poll_at(name, None, &[], now)
    }

    /// A worker's poll as it came ([`Poll`]): its site, its site's evictions, and the
    /// programs it runs (without a list: the built-in ones, [`programs::BUILT_IN`]).
    pub fn poll_from(&mut self, p: &Poll, now: u64) -> Result<Option<Grant>, JobsError> {
        self.poll_with(&p.worker, p.site.as_deref(), &p.evicted, p.programs.as_deref(), now)
    }

    /// A worker's poll that says its site and what the site's store evicted since its last
    /// poll (Ko et al.'s piggybacked evictions): a task, or `None`.
    pub fn poll_at(
        &mut self,
        name: &str,
        site: Option<&str>,
        evicted: &[u32],
        now: u64,
    ) -> Result<Option<Grant>, JobsError> {
        self.poll_with(name, site, evicted, None, now)
    }

    fn poll_with(
        &mut self,
        name: &str,
        site: Option<&str>,
        evicted: &[u32],
        programs: Option<&[String]>,
        now: u64,
    ) -> Result<Option<Grant>, JobsError> {
        if let Some(list) = programs {
            if list.len() > MAX_PROGRAMS {
                return Err(JobsError::Bad(format!("{} programs in one poll: at most {MAX_PROGRAMS}", list.len())));
            }
            if let Some(bad) = list.iter().find(|p| p.is_empty() || p.len() > 200) {
                return Err(JobsError::Bad(format!("program {bad:?} in a poll: a program's name is 1 to 200 bytes")));
            }
        }
        // A worker that does not say runs the built-in programs (as every worker does).
        let runs: std::collections::BTreeSet<String> = match programs {
            Some(list) => list.iter().cloned().collect(),
            None => programs::BUILT_IN.iter().map(|p| p.to_string()).collect(),
        };
        if let Some(site) = site
            && (site.is_empty() || site.len() > 200)
        {
            return Err(JobsError::Bad("a site's name is 1 to 200 bytes".into()));
        }
        if evicted.len() > 100_000 {
            return Err(JobsError::Bad(format!("{} evictions in one poll: at most 100,000", evicted.len())));
        }
        if name.is_empty() || name.len() > 200 {
            return Err(JobsError::Bad("a worker's name is 1 to 200 bytes".into()));
        }
        if let Some(&id) = self.state.workers.get(name)
            && let Some(&last) = self.last_empty.get(&id)
            && now < last + self.idle_poll
        {
            return Err(JobsError::TooOften {
                worker: name.to_string(),
                early_ms: (last + self.idle_poll - now).div_ceil(1_000_000),
                wait_ms: self.idle_poll / 1_000_000,
            });
        }
        let state = &mut self.state;
        let last_logged = &self.last_logged;
        let r = self.store.change(|news| {
            state.apply_all(news);
            let mut events = Vec::new();
            let id = match state.workers.get(name) {
                Some(&id) => id,
                None => {
                    let e = Event::Worker { id: state.workers.len() as u32, name: name.to_string() };
                    state.apply(&e);
                    events.push(e);
                    state.workers[name]
                }
            };
            if state.board.programs(id) != Some(&runs) {
                let e = Event::Programs { worker: id.0, programs: runs.iter().cloned().collect() };
                state.apply(&e);
                events.push(e);
            }
            if let Some(site) = site {
                let number = state.sites.get(site).copied().unwrap_or(state.sites.len() as u32);
                if state.site_of.get(&id) != Some(&number) {
                    let e = Event::Site { worker: id.0, site: number, name: site.to_string() };
                    state.apply(&e);
                    events.push(e);
                }
                if !evicted.is_empty() {
                    let e = Event::Evicted { site: number, files: evicted.to_vec() };
                    state.apply(&e);
                    events.push(e);
                }
            }
            let worth_logging = !events.is_empty()
                || state.board.idle_poll_is_news(id, Nanos(now))
                || last_logged.get(&id).is_none_or(|&at| now >= at + HEARTBEAT.as_nanos() as u64);
            let got = state.board.poll(id, Nanos(now));
            let logged = worth_logging || got.is_some();
            if logged {
                events.push(Event::Poll {
                    worker: id.0,
                    at: now,
                    task: got.map(|a| (a.task.app.0, u8::from(a.task.phase == Phase::Reduce), a.task.index)),
                });
            }
            Ok::<_, JobsError>(((id, got, logged), events, Vec::new()))
        });
        let (id, got, logged) = match r {
            Ok(r) => r?,
            Err(e) => return Err(self.rebuild(e)),
        };
        if logged {
            self.last_logged.insert(id, now);
        }
        if got.is_none() {
            self.last_empty.insert(id, now);
        } else {
            self.last_empty.remove(&id);
        }
        Ok(got.map(|a| {
            let meta = &self.state.apps[a.task.app.0 as usize];
            let spec = self.state.board.app_spec(a.task.app).expect("handed out");
            Grant {
                attempt: a.attempt.0,
                app: a.task.app.0,
                phase: if a.task.phase == Phase::Map { "map".into() } else { "reduce".into() },
                index: a.task.index,
                program: meta.program.clone(),
                arg: meta.arg.clone(),
                reduces: spec.reduces,
                input_id: (a.task.phase == Phase::Map)
                    .then(|| meta.splits.get(a.task.index as usize).copied())
                    .flatten(),
            }
        }))
    }

    /// The attempt `attempt`, checked to be `name`'s.
    fn held(&self, name: &str, attempt: u64) -> Result<(WorkerId, TaskRef, bool), JobsError> {
        let id = self.state.worker(name)?;
        let (task, holder, live) =
            self.state.board.attempt(AttemptId(attempt)).ok_or(Refusal::Unknown(AttemptId(attempt)))?;
        if holder != id {
            return Err(Refusal::NotYours { attempt: AttemptId(attempt), holder, worker: id }.into());
        }
        Ok((id, task, live))
    }

    /// What an attempt's input is made of: its split, or its partition of every map's output.
    pub fn input_of(&self, name: &str, attempt: u64) -> Result<InputPlan, JobsError> {
        let (_, task, live) = self.held(name, attempt)?;
        if let Some(how) = self.over(task.app.0) {
            return Err(JobsError::Over { app: task.app.0, how: format!("{how}: attempt {attempt} is not needed") });
        }
        // Its task was done by another attempt (or it was given up): running it would be
        // wasted, and its result refused.
        if !live {
            return Err(JobsError::Duplicate(attempt));
        }
        Ok(match task.phase {
            Phase::Map => InputPlan::Split { app: task.app.0, map: task.index },
            Phase::Reduce => InputPlan::Partition { app: task.app.0, part: task.index },
        })
    }

    /// A worker's result for `attempt`: kept if it is the first for its task.
    pub fn result(&mut self, name: &str, attempt: u64, body: &[u8], now: u64) -> Result<Accepted, JobsError> {
        // The attempt may have been handed out by another coordinator of the same database.
        self.refresh()?;
        let (id, task, _) = self.held(name, attempt)?;
        let spec = self.state.board.app_spec(task.app).expect("an attempt's application exists");
        let parts = match task.phase {
            Phase::Map => spec.reduces.max(1) as usize,
            Phase::Reduce => 1,
        };
        let parts = decode_parts(body, parts)?;
        let state = &mut self.state;
        let r = self.store.change(|news| {
            state.apply_all(news);
            let up = state.board.upload(id, AttemptId(attempt), Nanos(now))?;
            let event = Event::Upload { worker: id.0, attempt, at: now };
            match up {
                Upload::Duplicate => Ok::<_, JobsError>((Err(JobsError::Duplicate(attempt)), vec![event], Vec::new())),
                Upload::Accepted { phase_done, app_done } => {
                    let app = task.app.0;
                    let blobs = match task.phase {
                        Phase::Map => parts
                            .iter()
                            .enumerate()
                            .map(|(p, d)| Blob {
                                app,
                                kind: Kind::MapOut,
                                index: task.index,
                                part: p as u32,
                                data: d.to_vec(),
                            })
                            .collect(),
                        Phase::Reduce => {
                            vec![Blob {
                                app,
                                kind: Kind::ReduceOut,
                                index: task.index,
                                part: 0,
                                data: parts[0].to_vec(),
                            }]
                        }
                    };
                    Ok((Ok(Accepted { phase_done, app_done }), vec![event], blobs))
                }
            }
        });
        match r {
            Ok(r) => r?,
            Err(e) => Err(self.rebuild(e)),
        }
    }

    /// A worker says `attempt` failed, saying why. A task that fails the same way (the same
    /// text) `give_up_after` times in a row gives its application up: the board's decision,
    /// logged with the failure.
    pub fn failed(&mut self, name: &str, attempt: u64, why: &str, now: u64) -> Result<(), JobsError> {
        self.refresh()?;
        let (id, _, _) = self.held(name, attempt)?;
        let why: String = why.chars().take(1000).collect();
        let state = &mut self.state;
        let r = self.store.change(|news| {
            state.apply_all(news);
            let end = state.board.failed(id, AttemptId(attempt), Nanos(now), reason_key(&why))?;
            if let Some(End::GaveUp { task, .. }) = end {
                state.apps[task.app.0 as usize].failure = Some(why.clone());
            }
            let e = Event::Failed { worker: id.0, attempt, at: now, why, gave_up: end.is_some() };
            Ok::<_, JobsError>(((), vec![e], Vec::new()))
        });
        match r {
            Ok(r) => r,
            Err(e) => Err(self.rebuild(e)),
        }
    }

    /// Cancels application `app`: nothing more of it is handed out, and the results of its
    /// attempts out are refused.
    pub fn cancel(&mut self, app: u32, now: u64) -> Result<AppView, JobsError> {
        let state = &mut self.state;
        let r = self.store.change(|news| {
            state.apply_all(news);
            state.board.cancel(AppId(app), Nanos(now)).map_err(|e| match e {
                NotCancelled::Unknown(_) => JobsError::NoApp(app),
                NotCancelled::Done(_) => JobsError::NotCancelled(format!(
                    "application {app} is done: nothing to cancel (its output is kept: switchyard jobs output {app})"
                )),
                NotCancelled::Over(_, End::Cancelled) => {
                    JobsError::NotCancelled(format!("application {app} was already cancelled"))
                }
                NotCancelled::Over(_, End::GaveUp { .. }) => {
                    JobsError::NotCancelled(format!("application {app} has already failed: nothing to cancel"))
                }
            })?;
            Ok::<_, JobsError>(((), vec![Event::Cancel { app, at: now }], Vec::new()))
        });
        match r {
            Ok(r) => r?,
            Err(e) => return Err(self.rebuild(e)),
        }
        self.view(app, now)
    }

    /// What became of application `app`, if it was given up or cancelled.
    fn over(&self, app: u32) -> Option<String> {
        let st = self.state.board.app_status(AppId(app), Nanos(0));
        match st.ended? {
            (_, End::Cancelled) => Some("was cancelled".into()),
            (_, End::GaveUp { task, failures }) => Some(format!("failed: {}", self.gave_up(app, task, failures))),
        }
    }

    /// Why application `app` was given up, in words.
    fn gave_up(&self, app: u32, task: TaskRef, failures: u32) -> String {
        let phase = if task.phase == Phase::Map { "map" } else { "reduce" };
        let why = self.state.apps[app as usize].failure.as_deref().unwrap_or("(no reason given)");
        format!("{phase} {} failed {failures} times in a row, each time: {why}", task.index)
    }

    /// Every application as a submitter sees it.
    pub fn views(&self, now: u64) -> Vec<AppView> {
        (0..self.state.apps.len() as u32).map(|a| self.view(a, now).expect("exists")).collect()
    }

    /// One application as a submitter sees it.
    pub fn view(&self, app: u32, now: u64) -> Result<AppView, JobsError> {
        let meta = self.state.apps.get(app as usize).ok_or(JobsError::NoApp(app))?;
        let st = self.state.board.app_status(AppId(app), Nanos(now));
        let secs = |ns: i128| ns as f64 / 1e9;
        Ok(AppView {
            app,
            name: meta.name.clone(),
            program: meta.program.clone(),
            maps: st.maps,
            reduces: st.reduces,
            running: st.running,
            attempts: st.attempts,
            repeats: st.repeats,
            duplicates: st.duplicates,
            to_deadline: secs(i128::from(st.deadline.0) - i128::from(now)),
            laxity: st.laxity,
            took: st.done_at.map(|d| secs(i128::from(d.0) - i128::from(meta.submitted))),
            verdict: match (st.ended, st.met(Nanos(now))) {
                (Some((_, End::GaveUp { .. })), _) => "failed".into(),
                (Some((_, End::Cancelled)), _) => "cancelled".into(),
                (None, None) => "running".into(),
                (None, Some(true)) => "met".into(),
                (None, Some(false)) => "missed".into(),
            },
            why: match st.ended {
                Some((_, End::GaveUp { task, failures })) => Some(self.gave_up(app, task, failures)),
                Some((_, End::Cancelled)) => None,
                None if st.done_at.is_none() => self.waiting(app, now),
                None => None,
            },
        })
    }

    /// Every worker heard from, by name.
    pub fn worker_views(&self) -> Vec<WorkerView> {
        let mut names: Vec<(&String, &WorkerId)> = self.state.workers.iter().collect();
        names.sort();
        let by_id: HashMap<WorkerId, _> = self.state.board.workers().into_iter().map(|w| (w.worker, w)).collect();
        names
            .into_iter()
            .filter_map(|(name, id)| {
                let w = by_id.get(id)?;
                Some(WorkerView {
                    name: name.clone(),
                    holding: w.holding.map(|a| a.0),
                    presumed: w.presumed,
                    rate: w.rate,
                    recovery: w.recovery,
                })
            })
            .collect()
    }

    /// Where a done application's output is.
    pub fn output_of(&self, app: u32) -> Result<OutputPlan, JobsError> {
        let spec = self.state.board.app_spec(AppId(app)).ok_or(JobsError::NoApp(app))?;
        if let Some(how) = self.over(app) {
            return Err(JobsError::Over { app, how: format!("{how}: it has no output") });
        }
        let st = self.state.board.app_status(AppId(app), Nanos(0));
        if st.done_at.is_none() {
            return Err(JobsError::NotDone { app, maps: st.maps.1 - st.maps.0, reduces: st.reduces.1 - st.reduces.0 });
        }
        Ok(if spec.reduces == 0 { OutputPlan::Maps { app } } else { OutputPlan::Reduces { app } })
    }

    /// Every application is done.
    pub fn all_done(&self) -> bool {
        self.state.board.all_done()
    }
}

/// Where an attempt's input is.
#[derive(Clone, Copy, Debug)]
pub enum InputPlan {
    /// A split.
    Split {
        /// The application.
        app: u32,
        /// The map.
        map: u32,
    },
    /// A partition of every map's output.
    Partition {
        /// The application.
        app: u32,
        /// The partition.
        part: u32,
    },
}

impl InputPlan {
    /// Reads it.
    pub fn read(self, store: &mut Reader) -> Result<Vec<u8>, StoreError> {
        match self {
            Self::Split { app, map } => Ok(store.blob(app, Kind::Split, map, 0)?.unwrap_or_default()),
            Self::Partition { app, part } => Ok(store.blobs(app, Kind::MapOut, part)?.concat()),
        }
    }
}

/// Where a done application's output is.
#[derive(Clone, Copy, Debug)]
pub enum OutputPlan {
    /// A map-only application: its maps' outputs in order.
    Maps {
        /// The application.
        app: u32,
    },
    /// Its reduces' outputs, merged by key.
    Reduces {
        /// The application.
        app: u32,
    },
}

impl OutputPlan {
    /// Reads it.
    pub fn read(self, store: &mut Reader) -> Result<Vec<u8>, StoreError> {
        match self {
            Self::Maps { app } => Ok(store.blobs(app, Kind::MapOut, 0)?.concat()),
            Self::Reduces { app } => {
                let parts = store.blobs(app, Kind::ReduceOut, 0)?;
                Ok(programs::merge(&parts, false))
            }
        }
    }
}
