//! A data-intensive bag of tasks on a grid (Ko, Morales and Gupta, Middleware 2007; notes 004a
//! §7): sites, each with workers and one data server of limited capacity that fetches missing
//! files from one external file server, one batch at a time; one scheduler that hands tasks
//! out. Which task a worker gets is the core's (`place::tasks::locality`); this model carries
//! out requests, transfers, evictions and computation in virtual time.
//!
//! The model follows the paper's assumptions: a task names its files up front and issues one
//! batch request for the missing ones; a worker computes once its files are local, for
//! `files × unit_cost`; files are of equal size; transfers inside a site cost nothing. The data
//! server's eviction policy, which the paper leaves open, is LRU here (a file in use by a batch
//! being fetched or a task being computed at the site is not evicted until it is done: it is
//! touched when the task starts).
//!
//! Schedulers ([`Scheduler`]): the worker-centric metrics with greedy or top-n choice; delay
//! scheduling; storage affinity (Santos-Neto et al.) as the notes describe it — a free worker
//! gets the waiting task with the most of its input (in files, which are of equal size) at the
//! worker's site, and once
//! every task is out an idle worker gets a replica of the running task that started first (the
//! first copy to finish wins, the others are cancelled); and FIFO in a random order, with no
//! locality at all. The paper's storage affinity decided ahead of time, by scoring every task
//! against every site; here it decides on demand like the others, so what separates it from
//! them is its metric and its replication, not premature decisions.

use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use switchyard_core::cache::Lru;
use switchyard_core::place::score::splitmix64;
use switchyard_core::place::tasks::locality::{
    DelayScheduling, FileId, Metric, SiteTable, choose, most_affine, replica_of, weights,
};

use crate::{EventQueue, Model, Nanos, SimError, run, secs};

/// How tasks are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduler {
    /// Worker-centric: the polling worker's site's best tasks by `metric`, one of the `n` best
    /// drawn by weight.
    WorkerCentric {
        /// The weight.
        metric: Metric,
        /// How many of the best are drawn among (1: greedy).
        n: usize,
    },
    /// Delay scheduling: a site with no local task is refused this many times, then served.
    Delay(u32),
    /// Task-centric storage affinity, with replication once every task is out.
    StorageAffinity,
    /// The tasks in a random order, with no regard to locality.
    Fifo,
}

impl Scheduler {
    /// Its name in reports (the paper's for its variants).
    pub fn name(self) -> String {
        match self {
            Self::WorkerCentric { metric, n: 1 } => metric.name().to_string(),
            Self::WorkerCentric { metric, n } => format!("{}.{n}", metric.name()),
            Self::Delay(k) => format!("delay-{k}"),
            Self::StorageAffinity => "storage-affinity".into(),
            Self::Fifo => "fifo".into(),
        }
    }
}

/// A Coadd-like workload: tasks reading overlapping windows of a strip of files, handed to the
/// scheduler in a random order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    /// Tasks.
    pub tasks: u32,
    /// Files.
    pub files: u32,
    /// Fewest and most files a task reads (the paper's first 6,000 Coadd tasks: 36 to 101).
    pub per_task: (u32, u32),
}

impl Workload {
    /// The paper's simulated subset (6,000 tasks, 53,390 files, 36–101 files a task) scaled by
    /// `scale` in tasks and files.
    pub fn coadd(scale: f64) -> Self {
        Self {
            tasks: ((6000.0 * scale).round() as u32).max(1),
            files: ((53_390.0 * scale).round() as u32).max(101),
            per_task: (36, 101),
        }
    }

    /// Each task's files: a window of the strip starting near the task's place on it, so that
    /// neighbouring tasks share most of their files (as coadding overlapping sky regions does).
    pub fn generate(&self, seed: u64) -> Vec<Vec<FileId>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (lo, hi) = (self.per_task.0.max(1), self.per_task.1.max(self.per_task.0.max(1)));
        let stride = f64::from(self.files.saturating_sub(hi)) / f64::from(self.tasks.max(1));
        let mut tasks: Vec<Vec<FileId>> = (0..self.tasks)
            .map(|t| {
                let len = rng.random_range(lo..=hi).min(self.files.max(1));
                let start = ((f64::from(t) * stride) as u32).min(self.files.saturating_sub(len));
                (start..start + len).collect()
            })
            .collect();
        tasks.shuffle(&mut rng);
        tasks
    }
}

/// What to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct GridParams {
    /// Sites.
    pub sites: u32,
    /// Workers at each site.
    pub workers_per_site: u32,
    /// Files a site's data server holds.
    pub capacity: usize,
    /// Each site's bandwidth from the file server, files per second.
    pub files_per_s: f64,
    /// Seconds of computation per file of a task.
    pub unit_cost: f64,
    /// Each task's files.
    pub tasks: Vec<Vec<FileId>>,
    /// The scheduler.
    pub scheduler: Scheduler,
    /// Root seed (the top-n draws).
    pub seed: u64,
}

/// What happened.
#[derive(Clone, Debug, PartialEq)]
pub struct GridOutcome {
    /// Seconds until the last task finished.
    pub makespan: f64,
    /// Files fetched from the file server, in all.
    pub transfers: u64,
    /// Computation over the makespan, of the average worker.
    pub utilisation: f64,
    /// Seconds from a worker's request to the start of its computation (queueing at the data
    /// server and the transfer itself), per worker.
    pub wait: f64,
    /// Replicas started (storage affinity only).
    pub replicas: u64,
    /// Events handled.
    pub events: u64,
}

/// A grid event.
#[derive(Clone, Copy, Debug)]
pub enum GridEvent {
    /// A worker asks for a task.
    Request(u32),
    /// A site's data server finished its current batch.
    Fetched(u32),
    /// A worker finished computing (the run number guards against a cancelled replica's).
    Computed(u32, u64),
}

#[derive(Clone, Debug)]
struct Site {
    table: SiteTable,
    store: Lru<FileId>,
    /// Evicted since the site's last request, piggybacked on the next.
    evicted: Vec<FileId>,
    /// Batches waiting, by worker and its run (its task's missing files are worked out when the batch
    /// starts, so a file evicted meanwhile is fetched again).
    queue: std::collections::VecDeque<(u32, u64)>,
    /// The batch being fetched: its worker, the worker's run, and the files.
    fetching: Option<(u32, u64, Vec<FileId>)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct WorkerState {
    task: Option<u32>,
    run: u64,
    asked_at: Nanos,
    started: Nanos,
    compute: f64,
    wait: f64,
}

/// The model's state.
pub struct Grid {
    p: GridParams,
    sites: Vec<Site>,
    workers: Vec<WorkerState>,
    /// Tasks not yet handed out.
    waiting: Vec<u32>,
    /// Holders of each task (several with replicas), and whether it is done.
    holders: Vec<Vec<u32>>,
    done: Vec<bool>,
    left: usize,
    delay: DelayScheduling,
    draws: u64,
    transfers: u64,
    replicas: u64,
    end: Nanos,
}

impl Grid {
    /// Runs the job to its end.
    pub fn simulate(p: &GridParams) -> Result<GridOutcome, SimError> {
        let bad = |name, value: String, expected| Err(SimError::BadParameter { name, value, expected });
        if p.sites == 0 || p.workers_per_site == 0 {
            return bad("sites", format!("{} × {}", p.sites, p.workers_per_site), "at least one site and worker");
        }
        if !(p.files_per_s.is_finite() && p.files_per_s > 0.0) {
            return bad("files_per_s", p.files_per_s.to_string(), "a positive bandwidth");
        }
        if !(p.unit_cost.is_finite() && p.unit_cost >= 0.0) {
            return bad("unit_cost", p.unit_cost.to_string(), "seconds per file, 0 or more");
        }
        if p.capacity < p.tasks.iter().map(Vec::len).max().unwrap_or(0) {
            return bad("capacity", p.capacity.to_string(), "room for at least one task's files");
        }
        let n = p.sites * p.workers_per_site;
        let mut model = Self {
            p: p.clone(),
            sites: (0..p.sites)
                .map(|_| Site {
                    table: SiteTable::new(),
                    store: Lru::new(p.capacity, false),
                    evicted: Vec::new(),
                    queue: Default::default(),
                    fetching: None,
                })
                .collect(),
            workers: vec![WorkerState::default(); n as usize],
            waiting: (0..p.tasks.len() as u32).collect(),
            holders: vec![Vec::new(); p.tasks.len()],
            done: vec![false; p.tasks.len()],
            left: p.tasks.len(),
            delay: DelayScheduling::new(match p.scheduler {
                Scheduler::Delay(k) => k,
                _ => 0,
            }),
            draws: 0,
            transfers: 0,
            replicas: 0,
            end: Nanos::ZERO,
        };
        let mut queue = EventQueue::new();
        for w in 0..n {
            queue.schedule_at(Nanos::ZERO, GridEvent::Request(w))?;
        }
        let stats = run(&mut model, &mut queue, Nanos(u64::MAX));
        let span = secs_of(model.end).max(1e-9);
        let compute: f64 = model.workers.iter().map(|w| w.compute).sum();
        let wait: f64 = model.workers.iter().map(|w| w.wait).sum();
        Ok(GridOutcome {
            makespan: secs_of(model.end),
            transfers: model.transfers,
            utilisation: compute / (span * f64::from(n)),
            wait: wait / f64::from(n),
            replicas: model.replicas,
            events: stats.events,
        })
    }

    fn site_of(&self, worker: u32) -> u32 {
        worker / self.p.workers_per_site
    }

    /// The scheduler's choice for `worker`, removed from the waiting tasks; or a replica.
    fn pick(&mut self, worker: u32) -> Option<u32> {
        let site = self.site_of(worker);
        if self.waiting.is_empty() {
            return self.replica(worker);
        }
        let at = match self.p.scheduler {
            Scheduler::Fifo => Some(0),
            Scheduler::WorkerCentric { metric, n } => {
                let tasks: Vec<&[FileId]> = self.waiting.iter().map(|t| self.p.tasks[*t as usize].as_slice()).collect();
                let w = weights(metric, &tasks, &self.sites[site as usize].table);
                self.draws += 1;
                choose(&w, n, splitmix64(self.p.seed ^ splitmix64(self.draws)))
            }
            Scheduler::Delay(_) => {
                let tasks: Vec<&[FileId]> = self.waiting.iter().map(|t| self.p.tasks[*t as usize].as_slice()).collect();
                self.delay.choose(site, &tasks, &self.sites[site as usize].table)
            }
            Scheduler::StorageAffinity => {
                let tasks: Vec<&[FileId]> = self.waiting.iter().map(|t| self.p.tasks[*t as usize].as_slice()).collect();
                most_affine(&tasks, &self.sites[site as usize].table)
            }
        }?;
        Some(self.waiting.remove(at))
    }

    /// Storage affinity's replication: an idle worker gets a copy of the running task whose
    /// holders have run longest; other schedulers give nothing once every task is out.
    fn replica(&mut self, _worker: u32) -> Option<u32> {
        if self.p.scheduler != Scheduler::StorageAffinity {
            return None;
        }
        let running = (0..self.holders.len())
            .filter(|&t| !self.done[t] && self.holders[t].len() == 1)
            .map(|t| (t as u32, self.workers[self.holders[t][0] as usize].asked_at.0));
        let t = replica_of(running)?;
        self.replicas += 1;
        Some(t)
    }

    fn request(&mut self, worker: u32, now: Nanos, queue: &mut EventQueue<GridEvent>) {
        let site = self.site_of(worker) as usize;
        let mut evicted = std::mem::take(&mut self.sites[site].evicted);
        // A file evicted and fetched again since is held: not news for the table.
        evicted.retain(|f| !self.sites[site].store.contains(f));
        self.sites[site].table.evicted(&evicted);
        let Some(task) = self.pick(worker) else {
            if !self.waiting.is_empty() {
                // Delay scheduling refused it: ask again shortly.
                queue.schedule_in(secs(1.0), GridEvent::Request(worker));
            }
            return;
        };
        let files = self.p.tasks[task as usize].clone();
        self.sites[site].table.scheduled(&files);
        self.holders[task as usize].push(worker);
        let w = &mut self.workers[worker as usize];
        w.task = Some(task);
        w.run += 1;
        w.asked_at = now;
        self.sites[site].queue.push_back((worker, self.workers[worker as usize].run));
        self.serve(site, now, queue);
    }

    /// Starts the site's next batch, if it is free; an empty batch is served at once.
    fn serve(&mut self, site: usize, now: Nanos, queue: &mut EventQueue<GridEvent>) {
        while self.sites[site].fetching.is_none() {
            let Some((worker, run)) = self.sites[site].queue.pop_front() else { return };
            // A replica cancelled while it waited has nothing to fetch.
            let w = self.workers[worker as usize];
            let Some(task) = w.task.filter(|_| w.run == run) else { continue };
            // The files already here are used now, so that fetching the others cannot evict
            // them (the store holds at least one task's files).
            let store = &mut self.sites[site].store;
            let files = &self.p.tasks[task as usize];
            let missing: Vec<FileId> = files.iter().copied().filter(|f| !store.touch(f)).collect();
            if missing.is_empty() {
                self.start(worker, now, queue);
                continue;
            }
            queue.schedule_in(secs(missing.len() as f64 / self.p.files_per_s), GridEvent::Fetched(site as u32));
            self.sites[site].fetching = Some((worker, run, missing));
        }
    }

    fn start(&mut self, worker: u32, now: Nanos, queue: &mut EventQueue<GridEvent>) {
        let site = self.site_of(worker) as usize;
        let w = &mut self.workers[worker as usize];
        let Some(task) = w.task else { return };
        w.wait += secs_of(Nanos(now.0 - w.asked_at.0));
        w.started = now;
        let files = &self.p.tasks[task as usize];
        for f in files {
            for gone in self.sites[site].store.insert(*f) {
                self.sites[site].evicted.push(gone);
            }
        }
        let time = files.len() as f64 * self.p.unit_cost;
        queue.schedule_in(secs(time), GridEvent::Computed(worker, w.run));
    }
}

fn secs_of(n: Nanos) -> f64 {
    n.0 as f64 / 1e9
}

impl Model for Grid {
    type Event = GridEvent;

    fn handle(&mut self, now: Nanos, event: GridEvent, queue: &mut EventQueue<GridEvent>) {
        match event {
            GridEvent::Request(w) => self.request(w, now, queue),
            GridEvent::Fetched(site) => {
                let Some((worker, run, files)) = self.sites[site as usize].fetching.take() else { return };
                self.transfers += files.len() as u64;
                for f in &files {
                    for gone in self.sites[site as usize].store.insert(*f) {
                        self.sites[site as usize].evicted.push(gone);
                    }
                }
                // A replica cancelled while its files came: they stay in the store, unused.
                if self.workers[worker as usize].run == run {
                    self.start(worker, now, queue);
                }
                self.serve(site as usize, now, queue);
            }
            GridEvent::Computed(worker, run) => {
                let w = self.workers[worker as usize];
                if w.run != run {
                    return;
                }
                let Some(task) = w.task else { return };
                self.workers[worker as usize].compute += secs_of(Nanos(now.0 - w.started.0));
                self.workers[worker as usize].task = None;
                if !self.done[task as usize] {
                    self.done[task as usize] = true;
                    self.left -= 1;
                    self.end = now;
                    // The other replicas are cancelled: their workers ask again.
                    for other in std::mem::take(&mut self.holders[task as usize]) {
                        if other != worker && self.workers[other as usize].task == Some(task) {
                            let o = &mut self.workers[other as usize];
                            o.task = None;
                            o.run += 1;
                            queue.schedule_in(Nanos::ZERO, GridEvent::Request(other));
                        }
                    }
                }
                if self.left > 0 {
                    self.request(worker, now, queue);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(scheduler: Scheduler, capacity: usize) -> GridParams {
        GridParams {
            sites: 4,
            workers_per_site: 1,
            capacity,
            files_per_s: 0.2,
            unit_cost: 0.5,
            tasks: Workload::coadd(0.05).generate(1),
            scheduler,
            seed: 1,
        }
    }

    #[test]
    fn every_task_runs_and_locality_saves_transfers() {
        let fifo = Grid::simulate(&params(Scheduler::Fifo, 2000)).unwrap();
        let rest = Grid::simulate(&params(Scheduler::WorkerCentric { metric: Metric::Rest, n: 1 }, 2000)).unwrap();
        let total: u64 = Workload::coadd(0.05).generate(1).iter().map(|t| t.len() as u64).sum();
        assert!(fifo.transfers <= total && fifo.transfers > 0);
        // Rest picks tasks whose files are already there: far fewer transfers, shorter run.
        assert!(rest.transfers * 2 < fifo.transfers, "{rest:?} against {fifo:?}");
        assert!(rest.makespan < fifo.makespan);
        assert!(rest.utilisation > fifo.utilisation && rest.utilisation <= 1.0);
    }

    #[test]
    fn every_scheduler_finishes_and_runs_are_reproducible() {
        for s in [
            Scheduler::Fifo,
            Scheduler::WorkerCentric { metric: Metric::Overlap, n: 1 },
            Scheduler::WorkerCentric { metric: Metric::Combined { as_printed: false }, n: 2 },
            Scheduler::Delay(3),
            Scheduler::StorageAffinity,
        ] {
            let a = Grid::simulate(&params(s, 500)).unwrap();
            assert!(a.makespan > 0.0 && a.transfers > 0, "{s:?}");
            assert_eq!(a, Grid::simulate(&params(s, 500)).unwrap(), "{s:?}");
        }
        assert!(Grid::simulate(&params(Scheduler::StorageAffinity, 500)).unwrap().replicas > 0);
    }

    #[test]
    fn a_store_too_small_for_a_task_is_refused() {
        assert!(matches!(
            Grid::simulate(&params(Scheduler::Fifo, 50)),
            Err(SimError::BadParameter { name: "capacity", .. })
        ));
    }
}
