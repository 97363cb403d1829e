//! MapReduce applications with deadlines on unreliable workers that pull their tasks (Misco and
//! MiscoRT, Dou 2011 ch. 3; notes 003 §3.2–§4.2), driven by the core's task board
//! (`switchyard_core::place::tasks`): the board decides, this model only carries out polls,
//! task runs, failures and recoveries in virtual time.
//!
//! A worker that is up and idle polls; given a task it runs it for the task's time on that
//! worker and uploads the result; given nothing it sleeps `poll_every` and polls again. Workers
//! fail as one of the notes' two injectors says (they diverge sharply at high rates, §3.2):
//!
//! - [`Injector::Poisson`]: failures arrive at rate λ whether the worker is busy or idle; a
//!   task in progress is lost (restart from scratch), and the worker is down for an
//!   exponentially distributed time of mean `recovery`.
//! - [`Injector::PerTask`]: each run of a task fails with probability p at a uniformly drawn
//!   point of it, then the worker is down as above. This is the reading under which the
//!   thesis's Eq. 3.4 is exact, and of its experiments' "failure rate".
//!
//! A worker keeps running a task the board has given to another (Misco does not cancel), so a
//! replica's work is wasted in full when the other finishes first. Each worker draws from its own
//! random stream, so adding a worker does not change what the others draw.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use switchyard_core::WorkerId;
use switchyard_core::place::tasks::{AppId, AppSpec, AttemptId, Board, BoardConfig, Phase, Upload};

use crate::{EventQueue, Model, Nanos, SimError, Streams, run, secs};

/// How workers fail.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Injector {
    /// Failures at a rate per second, busy or idle; `rate` of each worker is λ.
    Poisson {
        /// Mean downtime after a failure, seconds.
        recovery: f64,
    },
    /// Each run of a task fails with a probability (each worker's `rate`), at a uniform point.
    PerTask {
        /// Mean downtime after a failure, seconds.
        recovery: f64,
    },
}

/// One worker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkerSpec {
    /// How many times the nominal task time a task takes on it (1 for the nominal worker).
    pub slowness: f64,
    /// Its failure rate: λ per second ([`Injector::Poisson`]) or a probability per run
    /// ([`Injector::PerTask`]).
    pub rate: f64,
}

/// One application.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppPlan {
    /// When it is submitted, seconds from the start.
    pub arrival: f64,
    /// Map tasks.
    pub maps: u32,
    /// Reduce tasks.
    pub reduces: u32,
    /// A map's time on a nominal worker that does not fail, seconds.
    pub map_time: f64,
    /// A reduce's time likewise, seconds.
    pub reduce_time: f64,
    /// Its deadline, seconds after its arrival.
    pub deadline: f64,
    /// Whether the submitter tells the board the task time (else the board learns it).
    pub estimate_given: bool,
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct JobsParams {
    /// The workers.
    pub workers: Vec<WorkerSpec>,
    /// How they fail.
    pub injector: Injector,
    /// The applications.
    pub apps: Vec<AppPlan>,
    /// Seconds an idle worker waits after a poll that got nothing.
    pub poll_every: f64,
    /// The board's rule, order and estimates.
    pub board: BoardConfig,
    /// Root seed.
    pub seed: u64,
    /// Seconds after which the run is cut off (applications still open count as misses).
    pub horizon: f64,
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub struct JobsOutcome {
    /// Per application: when it finished (seconds from the start), if it did, and its deadline
    /// (absolute, seconds).
    pub apps: Vec<(Option<f64>, f64)>,
    /// Applications that missed their deadline (or never finished).
    pub missed: usize,
    /// When the last application finished, seconds (the end-to-end time); the horizon if one
    /// never did.
    pub end_to_end: f64,
    /// Worker-seconds spent running tasks, in all.
    pub busy: f64,
    /// Of those, spent on runs whose result was not the one kept: lost to failures, or
    /// duplicates of a task already done.
    pub wasted: f64,
    /// Attempts handed out, and of those repeats (replicas or re-issues).
    pub attempts: u64,
    /// Repeats among the attempts.
    pub repeats: u64,
    /// Failures injected.
    pub failures: u64,
    /// Events handled.
    pub events: u64,
}

impl JobsOutcome {
    /// The share of applications that missed.
    pub fn miss_rate(&self) -> f64 {
        self.missed as f64 / self.apps.len().max(1) as f64
    }

    /// The share of busy time wasted.
    pub fn waste(&self) -> f64 {
        if self.busy > 0.0 { self.wasted / self.busy } else { 0.0 }
    }
}

/// A jobs event; the worker's epoch invalidates events of a life it no longer lives.
#[derive(Clone, Copy, Debug)]
pub enum JobsEvent {
    /// An application is submitted.
    Arrive(usize),
    /// A worker asks for work.
    Poll(u32, u64),
    /// A worker's task run ends (it uploads).
    Finish(u32, u64),
    /// A worker fails.
    Fail(u32, u64),
    /// A worker is back.
    Recover(u32),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Status {
    Idle,
    Busy { attempt: AttemptId, started: Nanos },
    Down,
}

struct Worker {
    spec: WorkerSpec,
    rng: ChaCha8Rng,
    status: Status,
    epoch: u64,
}

/// The model's state.
pub struct Jobs {
    params: JobsParams,
    board: Board,
    workers: Vec<Worker>,
    /// The board's id of each planned application, once submitted.
    ids: Vec<Option<AppId>>,
    recovery: Exp<f64>,
    busy: f64,
    wasted: f64,
    failures: u64,
    done: bool,
}

impl Jobs {
    /// Runs the model until every application is done or the horizon passes.
    pub fn simulate(p: &JobsParams) -> Result<JobsOutcome, SimError> {
        let bad = |name, value: String, expected| Err(SimError::BadParameter { name, value, expected });
        if p.workers.is_empty() {
            return bad("workers", "0".into(), "at least one worker");
        }
        if p.apps.is_empty() {
            return bad("apps", "0".into(), "at least one application");
        }
        let recovery_mean = match p.injector {
            Injector::Poisson { recovery } | Injector::PerTask { recovery } => recovery,
        };
        if !(recovery_mean.is_finite() && recovery_mean > 0.0) {
            return bad("recovery", recovery_mean.to_string(), "a positive mean downtime in seconds");
        }
        if !(p.poll_every.is_finite() && p.poll_every > 0.0) {
            return bad("poll_every", p.poll_every.to_string(), "a positive number of seconds");
        }
        for w in &p.workers {
            let ok = match p.injector {
                Injector::Poisson { .. } => w.rate.is_finite() && w.rate >= 0.0,
                Injector::PerTask { .. } => (0.0..1.0).contains(&w.rate),
            };
            if !(ok && w.slowness.is_finite() && w.slowness > 0.0) {
                return bad(
                    "worker",
                    format!("{w:?}"),
                    "slowness above 0, and a rate ≥ 0 (Poisson) or a probability in [0, 1) (per task)",
                );
            }
        }
        let streams = Streams::new(p.seed);
        let mut model = Self {
            params: p.clone(),
            board: Board::new(p.board),
            workers: p
                .workers
                .iter()
                .enumerate()
                .map(|(i, spec)| Worker { spec: *spec, rng: streams.stream(i as u64), status: Status::Idle, epoch: 0 })
                .collect(),
            ids: vec![None; p.apps.len()],
            recovery: Exp::new(1.0 / recovery_mean).expect("checked above"),
            busy: 0.0,
            wasted: 0.0,
            failures: 0,
            done: false,
        };
        let mut queue = EventQueue::new();
        for (i, a) in p.apps.iter().enumerate() {
            queue.schedule_at(secs(a.arrival.max(0.0)), JobsEvent::Arrive(i))?;
        }
        for i in 0..model.workers.len() {
            queue.schedule_at(Nanos::ZERO, JobsEvent::Poll(i as u32, 0))?;
            model.schedule_failure(i, &mut queue);
        }
        let stats = run(&mut model, &mut queue, secs(p.horizon));
        let status = model.board.status(stats.end);
        let apps: Vec<(Option<f64>, f64)> = status
            .iter()
            .map(|s| (s.done_at.map(|t| t.0 as f64 / 1e9), s.deadline.0 as f64 / 1e9))
            .chain(model.ids.iter().filter(|id| id.is_none()).map(|_| (None, 0.0)))
            .collect();
        let missed = apps.iter().filter(|(done, due)| done.is_none_or(|d| d > *due)).count();
        let end_to_end = if apps.iter().all(|a| a.0.is_some()) {
            apps.iter().filter_map(|a| a.0).fold(0.0, f64::max)
        } else {
            p.horizon
        };
        Ok(JobsOutcome {
            missed,
            end_to_end,
            busy: model.busy,
            wasted: model.wasted,
            attempts: status.iter().map(|s| s.attempts).sum(),
            repeats: status.iter().map(|s| s.repeats).sum(),
            failures: model.failures,
            events: stats.events,
            apps,
        })
    }

    /// Schedules worker `i`'s next Poisson failure, if that is the injector.
    fn schedule_failure(&mut self, i: usize, queue: &mut EventQueue<JobsEvent>) {
        let w = &mut self.workers[i];
        if let Injector::Poisson { .. } = self.params.injector
            && w.spec.rate > 0.0
        {
            let gap = Exp::new(w.spec.rate).expect("rate checked").sample(&mut w.rng);
            queue.schedule_in(secs(gap), JobsEvent::Fail(i as u32, w.epoch));
        }
    }

    fn task_time(&self, worker: usize, app: AppId, phase: Phase) -> f64 {
        let plan = self.plan(app);
        let nominal = match phase {
            Phase::Map => plan.map_time,
            Phase::Reduce => plan.reduce_time,
        };
        nominal * self.workers[worker].spec.slowness
    }

    fn plan(&self, app: AppId) -> &AppPlan {
        let i = self.ids.iter().position(|id| *id == Some(app)).expect("submitted");
        &self.params.apps[i]
    }

    fn poll(&mut self, i: usize, now: Nanos, queue: &mut EventQueue<JobsEvent>) {
        let worker = WorkerId(i as u32);
        match self.board.poll(worker, now) {
            Some(a) => {
                let time = self.task_time(i, a.task.app, a.task.phase);
                let w = &mut self.workers[i];
                w.status = Status::Busy { attempt: a.attempt, started: now };
                // Under the per-task injector the run's fate is drawn now: done, or failed at a
                // uniform point of it.
                if let Injector::PerTask { .. } = self.params.injector
                    && w.rng.random::<f64>() < w.spec.rate
                {
                    let at = w.rng.random::<f64>() * time;
                    queue.schedule_in(secs(at), JobsEvent::Fail(i as u32, w.epoch));
                } else {
                    queue.schedule_in(secs(time), JobsEvent::Finish(i as u32, w.epoch));
                }
            }
            None => {
                let w = &self.workers[i];
                queue.schedule_in(secs(self.params.poll_every), JobsEvent::Poll(i as u32, w.epoch));
            }
        }
    }
}

impl Model for Jobs {
    type Event = JobsEvent;

    fn handle(&mut self, now: Nanos, event: JobsEvent, queue: &mut EventQueue<JobsEvent>) {
        if self.done {
            return;
        }
        match event {
            JobsEvent::Arrive(k) => {
                let a = self.params.apps[k];
                let spec = AppSpec {
                    maps: a.maps,
                    reduces: a.reduces,
                    deadline: Nanos(now.0 + secs(a.deadline).0),
                    task_estimate: a.estimate_given.then_some(a.map_time),
                };
                self.ids[k] = Some(self.board.submit(spec, now));
            }
            JobsEvent::Poll(i, epoch) => {
                let w = &self.workers[i as usize];
                if w.epoch == epoch && w.status == Status::Idle {
                    self.poll(i as usize, now, queue);
                }
            }
            JobsEvent::Finish(i, epoch) => {
                let w = &mut self.workers[i as usize];
                let Status::Busy { attempt, started } = w.status else { return };
                if w.epoch != epoch {
                    return;
                }
                w.status = Status::Idle;
                let ran = (now.0 - started.0) as f64 / 1e9;
                self.busy += ran;
                match self.board.upload(WorkerId(i), attempt, now) {
                    Ok(Upload::Accepted { .. }) => {}
                    Ok(Upload::Duplicate) | Err(_) => self.wasted += ran,
                }
                if self.board.all_done() && self.ids.iter().all(Option::is_some) {
                    self.done = true;
                    return;
                }
                self.poll(i as usize, now, queue);
            }
            JobsEvent::Fail(i, epoch) => {
                let w = &mut self.workers[i as usize];
                if w.epoch != epoch || w.status == Status::Down {
                    return;
                }
                if let Status::Busy { started, .. } = w.status {
                    let ran = (now.0 - started.0) as f64 / 1e9;
                    self.busy += ran;
                    self.wasted += ran;
                }
                // A new life: whatever was scheduled for the old one is void.
                w.epoch += 1;
                w.status = Status::Down;
                self.failures += 1;
                let down = self.recovery.sample(&mut w.rng);
                queue.schedule_in(secs(down), JobsEvent::Recover(i));
            }
            JobsEvent::Recover(i) => {
                let w = &mut self.workers[i as usize];
                w.status = Status::Idle;
                self.schedule_failure(i as usize, queue);
                self.poll(i as usize, now, queue);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use switchyard_core::order::apps::AppOrder;
    use switchyard_core::place::tasks::TaskRule;

    use super::*;

    fn params(rate: f64, injector: Injector, rule: TaskRule, order: AppOrder) -> JobsParams {
        JobsParams {
            workers: (0..6).map(|_| WorkerSpec { slowness: 1.0, rate }).collect(),
            injector,
            apps: (0..4)
                .map(|k| AppPlan {
                    arrival: k as f64 * 5.0,
                    maps: 8,
                    reduces: 2,
                    map_time: 10.0,
                    reduce_time: 5.0,
                    deadline: 200.0,
                    estimate_given: true,
                })
                .collect(),
            poll_every: 1.0,
            board: BoardConfig { rule, order, ..Default::default() },
            seed: 3,
            horizon: 100_000.0,
        }
    }

    #[test]
    fn without_failures_every_rule_finishes_and_only_replicas_waste() {
        for rule in [TaskRule::MiscoRt, TaskRule::Random, TaskRule::Sequential, TaskRule::ModifiedHadoop] {
            let o =
                Jobs::simulate(&params(0.0, Injector::PerTask { recovery: 10.0 }, rule, AppOrder::default())).unwrap();
            assert_eq!(o.failures, 0);
            assert!(o.apps.iter().all(|a| a.0.is_some()), "{rule:?}: {o:?}");
            // 32 maps of 10 s and 8 reduces of 5 s on six workers: at least 60 s.
            assert!(o.end_to_end >= 360.0 / 6.0, "{rule:?}: {o:?}");
            // Work done once is 360 worker-seconds; the rest is duplicates.
            assert!((o.busy - o.wasted - 360.0).abs() < 1e-6, "{rule:?}: {o:?}");
            if rule == TaskRule::MiscoRt {
                assert_eq!(o.wasted, 0.0, "no failure, no deadline at risk: no replica");
            }
        }
    }

    #[test]
    fn failures_cost_time_and_the_run_is_reproducible() {
        let p = |rate| params(rate, Injector::PerTask { recovery: 10.0 }, TaskRule::MiscoRt, AppOrder::default());
        let calm = Jobs::simulate(&p(0.0)).unwrap();
        let rough = Jobs::simulate(&p(0.4)).unwrap();
        assert!(rough.failures > 0 && rough.wasted > 0.0);
        assert!(rough.end_to_end > calm.end_to_end);
        assert_eq!(Jobs::simulate(&p(0.4)).unwrap(), rough, "same seed, same run");
        let poisson =
            Jobs::simulate(&params(0.01, Injector::Poisson { recovery: 10.0 }, TaskRule::MiscoRt, AppOrder::Edf))
                .unwrap();
        assert!(poisson.failures > 0 && poisson.apps.iter().all(|a| a.0.is_some()));
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut p = params(0.0, Injector::PerTask { recovery: 10.0 }, TaskRule::MiscoRt, AppOrder::Fifo);
        p.workers[0].rate = 1.0;
        assert!(matches!(Jobs::simulate(&p), Err(SimError::BadParameter { name: "worker", .. })));
        p.workers.clear();
        assert!(matches!(Jobs::simulate(&p), Err(SimError::BadParameter { name: "workers", .. })));
    }
}
