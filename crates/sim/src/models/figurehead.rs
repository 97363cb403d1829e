//! Several back-ends holding the same content, of different speed and price, behind a
//! front-end that must meet a latency SLA at least cost (Figurehead, notes 004b §1), as an
//! event model: requests arrive as a Poisson process; the core's [`SlaRouter`] says which
//! back-ends each goes to and when; each back-end serves `servers` attempts at a time, in
//! order of arrival, each taking a service time drawn from its latency model. A request ends
//! with its first answer; attempts not yet due are never sent; with `cancel`, the others are
//! dropped from their queues or stopped (the paper lets them run, and pays for them either way).

use std::collections::VecDeque;
use std::time::Duration;

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal, Pareto};
use switchyard_core::place::sla::{Ended, PercentileCdf, SlaRouter};

use crate::Nanos;
use crate::engine::{EventQueue, Model, SimError, run};

/// How long a back-end takes to serve one attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LatencyModel {
    /// Log-normal.
    LogNormal {
        /// Its median.
        median: Duration,
        /// Its shape: σ of the log.
        sigma: f64,
    },
    /// A log-normal body, and now and then a Pareto tail.
    Tailed {
        /// The body's median.
        median: Duration,
        /// The body's σ of the log.
        sigma: f64,
        /// How often an answer comes from the tail.
        p: f64,
        /// Where the tail starts.
        from: Duration,
        /// The tail's shape (heavy for α ≤ 2).
        alpha: f64,
    },
}

impl LatencyModel {
    fn check(&self) -> Result<(), SimError> {
        let bad = |name, value: f64, expected| Err(SimError::BadParameter { name, value: value.to_string(), expected });
        match *self {
            Self::LogNormal { sigma, .. } | Self::Tailed { sigma, .. } if !(sigma > 0.0 && sigma.is_finite()) => {
                bad("sigma", sigma, "a positive number")
            }
            Self::Tailed { p, .. } if !(0.0..=1.0).contains(&p) => bad("p", p, "a probability"),
            Self::Tailed { alpha, .. } if !(alpha > 0.0 && alpha.is_finite()) => {
                bad("alpha", alpha, "a positive number")
            }
            _ => Ok(()),
        }
    }

    /// One service time.
    pub fn sample(&self, rng: &mut impl Rng) -> Duration {
        let lognormal = |median: Duration, sigma: f64, rng: &mut _| {
            let d = LogNormal::new(libm::log(median.as_secs_f64().max(1e-9)), sigma).expect("checked");
            Duration::from_secs_f64(d.sample(rng))
        };
        let d = match *self {
            Self::LogNormal { median, sigma } => lognormal(median, sigma, rng),
            Self::Tailed { median, sigma, p, from, alpha } => {
                if rng.random::<f64>() < p {
                    let d = Pareto::new(from.as_secs_f64().max(1e-9), alpha).expect("checked");
                    Duration::from_secs_f64(d.sample(rng))
                } else {
                    lognormal(median, sigma, rng)
                }
            }
        };
        d.min(Duration::from_secs(60))
    }

    /// Its CDF as 100 percentile points, from `n` draws (the paper's "oracle CDFs": the
    /// distribution without queueing).
    pub fn cdf(&self, n: usize, seed: u64) -> PercentileCdf {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let samples: Vec<Duration> = (0..n.max(100)).map(|_| self.sample(&mut rng)).collect();
        PercentileCdf::from_samples(&samples).expect("at least 100 draws")
    }
}

/// One back-end.
#[derive(Clone, Debug, PartialEq)]
pub struct BackendSpec {
    /// Its name, for reports.
    pub name: String,
    /// Price per attempt sent.
    pub price: f64,
    /// Service time.
    pub latency: LatencyModel,
    /// Attempts served at once.
    pub servers: usize,
}

/// One run's set-up.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The back-ends.
    pub backends: Vec<BackendSpec>,
    /// Requests per second.
    pub rate: f64,
    /// Requests in the run.
    pub requests: u64,
    /// Whether a request's other attempts are cancelled at its first answer.
    pub cancel: bool,
    /// Plan from the latency models' CDFs (`true`) or from latencies observed (re-planned
    /// every `replan_every` requests).
    pub oracle: bool,
    /// Requests between re-plans when learning.
    pub replan_every: u64,
    /// Random seed.
    pub seed: u64,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Fraction of requests answered within the SLA's latency.
    pub attained: f64,
    /// Mean price paid per request (every attempt sent is paid).
    pub cost: f64,
    /// Latency quantiles of requests: median and 99th percentile.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Attempts sent per request.
    pub attempts: f64,
    /// Share of attempts each back-end received.
    pub share: Vec<f64>,
    /// Busy time of each back-end's servers over the run, as a fraction of their capacity.
    pub utilisation: Vec<f64>,
    /// Back-end time spent on attempts whose request had already been answered, per request.
    pub wasted: Duration,
}

#[derive(Clone, Copy, Debug)]
enum Event {
    Arrive,
    Send { req: usize, k: usize },
    Done { backend: usize, slot: usize, epoch: u64 },
}

struct Attempt {
    req: usize,
    backend: usize,
    sent: Nanos,
    service: Duration,
    /// Set while in service: (slot, generation).
    serving: Option<(usize, u64)>,
    finished: bool,
}

struct Backend {
    queue: VecDeque<usize>,
    slots: Vec<Option<(usize, u64, Nanos)>>,
    busy: Duration,
}

struct Request {
    arrived: Nanos,
    plan: Vec<switchyard_core::place::sla::Attempt>,
    attempts: Vec<usize>,
    answered: Option<Nanos>,
}

struct Sim<'a> {
    setup: &'a Setup,
    router: SlaRouter,
    rng: ChaCha8Rng,
    backends: Vec<Backend>,
    requests: Vec<Request>,
    attempts: Vec<Attempt>,
    epoch: u64,
    cost: f64,
    wasted: Duration,
}

impl Sim<'_> {
    fn start(&mut self, b: usize, a: usize, now: Nanos, queue: &mut EventQueue<Event>) {
        let slot = self.backends[b].slots.iter().position(Option::is_none);
        match slot {
            Some(slot) => {
                self.epoch += 1;
                self.backends[b].slots[slot] = Some((a, self.epoch, now));
                self.attempts[a].serving = Some((slot, self.epoch));
                let end = Nanos(now.0 + self.attempts[a].service.as_nanos() as u64);
                queue.schedule_at(end, Event::Done { backend: b, slot, epoch: self.epoch }).expect("in the future");
            }
            None => self.backends[b].queue.push_back(a),
        }
    }

    /// Frees `slot` of `b` at `now` and starts the next attempt waiting there.
    fn free(&mut self, b: usize, slot: usize, now: Nanos, queue: &mut EventQueue<Event>) {
        if let Some((_, _, since)) = self.backends[b].slots[slot].take() {
            self.backends[b].busy += Duration::from_nanos(now.0 - since.0);
        }
        while let Some(next) = self.backends[b].queue.pop_front() {
            if !self.attempts[next].finished {
                self.start(b, next, now, queue);
                break;
            }
        }
    }
}

impl Model for Sim<'_> {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, queue: &mut EventQueue<Event>) {
        match event {
            Event::Arrive => {
                let req = self.requests.len();
                let plan = self.router.route(self.rng.random(), self.rng.random());
                for (k, a) in plan.iter().enumerate() {
                    queue.schedule_at(Nanos(now.0 + a.at.as_nanos() as u64), Event::Send { req, k }).expect("future");
                }
                self.requests.push(Request { arrived: now, plan, attempts: Vec::new(), answered: None });
                if (req as u64 + 1) < self.setup.requests {
                    let gap = -libm::log(self.rng.random::<f64>().max(1e-12)) / self.setup.rate;
                    queue.schedule_in(Nanos((gap * 1e9) as u64), Event::Arrive);
                }
                if !self.setup.oracle && (req as u64 + 1).is_multiple_of(self.setup.replan_every.max(1)) {
                    self.router.replan();
                }
            }
            Event::Send { req, k } => {
                if self.requests[req].answered.is_some() {
                    return;
                }
                let b = self.requests[req].plan[k].backend;
                let service = self.setup.backends[b].latency.sample(&mut self.rng);
                let a = self.attempts.len();
                self.attempts.push(Attempt { req, backend: b, sent: now, service, serving: None, finished: false });
                self.requests[req].attempts.push(a);
                self.cost += self.setup.backends[b].price;
                self.router.sent(b);
                self.start(b, a, now, queue);
            }
            Event::Done { backend, slot, epoch } => {
                let Some((a, g, since)) = self.backends[backend].slots[slot] else { return };
                if g != epoch {
                    return;
                }
                self.attempts[a].finished = true;
                let latency = Duration::from_nanos(now.0 - self.attempts[a].sent.0);
                self.router.ended(backend, Ended::Answered(latency));
                let req = self.attempts[a].req;
                if self.requests[req].answered.is_none() {
                    self.requests[req].answered = Some(now);
                    if self.setup.cancel {
                        for other in self.requests[req].attempts.clone() {
                            if other == a || self.attempts[other].finished {
                                continue;
                            }
                            self.attempts[other].finished = true;
                            let ob = self.attempts[other].backend;
                            self.router
                                .ended(ob, Ended::Abandoned(Duration::from_nanos(now.0 - self.attempts[other].sent.0)));
                            if let Some((s, _)) = self.attempts[other].serving {
                                if let Some((_, _, since)) = self.backends[ob].slots[s] {
                                    self.wasted += Duration::from_nanos(now.0 - since.0);
                                }
                                self.free(ob, s, now, queue);
                            }
                        }
                    }
                } else {
                    self.wasted += Duration::from_nanos(now.0 - since.0);
                }
                self.free(backend, slot, now, queue);
            }
        }
    }
}

/// Runs `setup` with `router` (made for the same back-ends, in the same order) and returns
/// what it measured against the router's SLA.
pub fn simulate(setup: &Setup, router: SlaRouter) -> Result<Outcome, SimError> {
    let within = router.sla().within;
    simulate_against(setup, router, within)
}

/// [`simulate`], counting attainment against `within` rather than the latency the router
/// plans for (a router may aim below the SLA to leave room).
pub fn simulate_against(setup: &Setup, mut router: SlaRouter, within: Duration) -> Result<Outcome, SimError> {
    for b in &setup.backends {
        b.latency.check()?;
        if b.servers == 0 {
            return Err(SimError::BadParameter { name: "servers", value: "0".into(), expected: "at least 1" });
        }
    }
    if !(setup.rate > 0.0 && setup.rate.is_finite()) {
        return Err(SimError::BadParameter {
            name: "rate",
            value: setup.rate.to_string(),
            expected: "a positive number",
        });
    }
    if setup.oracle {
        let cdfs =
            setup.backends.iter().enumerate().map(|(i, b)| b.latency.cdf(20_000, setup.seed ^ i as u64)).collect();
        router = router.with_oracle(cdfs);
    } else {
        // The monitoring module's first probes: a few answers from each back-end, unloaded.
        let mut rng = ChaCha8Rng::seed_from_u64(setup.seed ^ 0x9e37);
        for (i, b) in setup.backends.iter().enumerate() {
            for _ in 0..100 {
                router.observed(i, Ended::Answered(b.latency.sample(&mut rng)));
            }
        }
        router.replan();
    }
    let mut sim = Sim {
        setup,
        router,
        rng: ChaCha8Rng::seed_from_u64(setup.seed),
        backends: setup
            .backends
            .iter()
            .map(|b| Backend { queue: VecDeque::new(), slots: vec![None; b.servers], busy: Duration::ZERO })
            .collect(),
        requests: Vec::with_capacity(setup.requests as usize),
        attempts: Vec::new(),
        epoch: 0,
        cost: 0.0,
        wasted: Duration::ZERO,
    };
    let mut queue = EventQueue::new();
    queue.schedule_in(Nanos(0), Event::Arrive);
    let stats = run(&mut sim, &mut queue, Nanos(u64::MAX));
    let n = sim.requests.len().max(1) as f64;
    let mut lat: Vec<Duration> = sim
        .requests
        .iter()
        .map(|r| r.answered.map_or(Duration::MAX, |t| Duration::from_nanos(t.0 - r.arrived.0)))
        .collect();
    lat.sort_unstable();
    let q = |p: f64| lat[((p * lat.len() as f64).ceil() as usize).clamp(1, lat.len()) - 1];
    let attained = lat.iter().filter(|l| **l <= within).count() as f64 / n;
    let mut share = vec![0.0; setup.backends.len()];
    for a in &sim.attempts {
        share[a.backend] += 1.0;
    }
    let sent = sim.attempts.len().max(1) as f64;
    let span = Duration::from_nanos(stats.end.0.max(1));
    Ok(Outcome {
        attained,
        cost: sim.cost / n,
        p50: q(0.5),
        p99: q(0.99),
        attempts: sim.attempts.len() as f64 / n,
        share: share.iter().map(|s| s / sent).collect(),
        utilisation: sim
            .backends
            .iter()
            .zip(&setup.backends)
            .map(|(b, s)| b.busy.as_secs_f64() / (span.as_secs_f64() * s.servers as f64))
            .collect(),
        wasted: sim.wasted / sim.requests.len().max(1) as u32,
    })
}
