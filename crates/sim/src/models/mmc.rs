//! The M/M/c queue: Poisson arrivals at rate λ, `c` servers with exponential service at rate μ
//! each, one FIFO line. It checks the engine against closed forms (the mean wait in line from
//! Erlang's C formula), and it is the model `benches/engine.rs` and `bench/sim-vs-simpy.sh` time
//! against SimPy.
//!
//! Time is integer nanoseconds. Rates are per second. Each exponential draw is rounded to the
//! nearest nanosecond, which biases means by under 1 ns; that is negligible at the rates used
//! (means of microseconds and up). Arrivals draw from stream 0 and services from stream 1, so a
//! change to one does not shift the other.

use std::collections::VecDeque;

use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};

use crate::{EventQueue, Model, Nanos, SimError, Streams, run};

/// What to simulate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MmcParams {
    /// Arrival rate λ, per second.
    pub lambda: f64,
    /// Service rate μ of one server, per second.
    pub mu: f64,
    /// Number of servers c.
    pub servers: u32,
    /// Customers to serve; the run ends when the last has left.
    pub customers: u64,
    /// Root seed.
    pub seed: u64,
}

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MmcOutcome {
    /// Customers served.
    pub served: u64,
    /// Mean time in line before service, in seconds.
    pub mean_wait: f64,
    /// Mean time in the system (line plus service), in seconds.
    pub mean_sojourn: f64,
    /// Events handled.
    pub events: u64,
    /// Virtual time at the end, in seconds.
    pub end: f64,
}

/// The M/M/c model's state.
pub struct Mmc {
    arrivals: ChaCha8Rng,
    services: ChaCha8Rng,
    inter: Exp<f64>,
    service: Exp<f64>,
    free: u32,
    line: VecDeque<Nanos>,
    to_arrive: u64,
    served: u64,
    wait_sum: u128,
    sojourn_sum: u128,
}

/// An M/M/c event.
#[derive(Clone, Copy, Debug)]
pub enum MmcEvent {
    /// A customer arrives.
    Arrival,
    /// A customer who arrived at the given time finishes service.
    Departure(Nanos),
}

const NS_PER_S: f64 = 1e9;

fn draw(d: &Exp<f64>, rng: &mut ChaCha8Rng) -> Nanos {
    Nanos((d.sample(rng) * NS_PER_S).round() as u64)
}

impl Mmc {
    /// Runs the model to completion.
    pub fn simulate(p: &MmcParams) -> Result<MmcOutcome, SimError> {
        let bad = |name, value: String, expected| Err(SimError::BadParameter { name, value, expected });
        if !(p.lambda.is_finite() && p.lambda > 0.0) {
            return bad("lambda", p.lambda.to_string(), "a positive arrival rate per second");
        }
        if !(p.mu.is_finite() && p.mu > 0.0) {
            return bad("mu", p.mu.to_string(), "a positive service rate per second");
        }
        if p.servers == 0 {
            return bad("servers", "0".into(), "at least one server");
        }
        let streams = Streams::new(p.seed);
        let mut model = Self {
            arrivals: streams.stream(0),
            services: streams.stream(1),
            inter: Exp::new(p.lambda).map_err(|_| SimError::BadParameter {
                name: "lambda",
                value: p.lambda.to_string(),
                expected: "a positive arrival rate per second",
            })?,
            service: Exp::new(p.mu).map_err(|_| SimError::BadParameter {
                name: "mu",
                value: p.mu.to_string(),
                expected: "a positive service rate per second",
            })?,
            free: p.servers,
            line: VecDeque::new(),
            to_arrive: p.customers,
            served: 0,
            wait_sum: 0,
            sojourn_sum: 0,
        };
        let mut queue = EventQueue::new();
        if p.customers > 0 {
            model.to_arrive -= 1;
            let first = draw(&model.inter, &mut model.arrivals);
            queue.schedule_at(first, MmcEvent::Arrival)?;
        }
        let stats = run(&mut model, &mut queue, Nanos(u64::MAX));
        let n = model.served.max(1) as f64;
        Ok(MmcOutcome {
            served: model.served,
            mean_wait: model.wait_sum as f64 / n / NS_PER_S,
            mean_sojourn: model.sojourn_sum as f64 / n / NS_PER_S,
            events: stats.events,
            end: stats.end.0 as f64 / NS_PER_S,
        })
    }

    fn start(&mut self, now: Nanos, arrived: Nanos, queue: &mut EventQueue<MmcEvent>) {
        self.free -= 1;
        self.wait_sum += u128::from(now.0 - arrived.0);
        let s = draw(&self.service, &mut self.services);
        queue.schedule_in(s, MmcEvent::Departure(arrived));
    }
}

impl Model for Mmc {
    type Event = MmcEvent;

    fn handle(&mut self, now: Nanos, event: MmcEvent, queue: &mut EventQueue<MmcEvent>) {
        match event {
            MmcEvent::Arrival => {
                if self.to_arrive > 0 {
                    self.to_arrive -= 1;
                    let next = draw(&self.inter, &mut self.arrivals);
                    queue.schedule_in(next, MmcEvent::Arrival);
                }
                if self.free > 0 {
                    self.start(now, now, queue);
                } else {
                    self.line.push_back(now);
                }
            }
            MmcEvent::Departure(arrived) => {
                self.served += 1;
                self.sojourn_sum += u128::from(now.0 - arrived.0);
                self.free += 1;
                if let Some(next) = self.line.pop_front() {
                    self.start(now, next, queue);
                }
            }
        }
    }
}

/// Mean wait in line of an M/M/c queue by Erlang's C formula:
/// `W_q = C(c, a) / (c·μ − λ)` with `a = λ/μ` and
/// `C(c, a) = (a^c/c! · c/(c−a)) / (Σ_{k<c} a^k/k! + a^c/c! · c/(c−a))`.
/// `None` when the queue is unstable (`λ ≥ c·μ`).
pub fn erlang_c_wait(lambda: f64, mu: f64, servers: u32) -> Option<f64> {
    let c = f64::from(servers);
    let a = lambda / mu;
    if a >= c {
        return None;
    }
    // Terms a^k/k! built by multiplication, so no powers or factorials overflow for large c.
    let (mut term, mut sum) = (1.0, 0.0);
    for k in 0..servers {
        sum += term;
        term *= a / f64::from(k + 1);
    }
    let tail = term * c / (c - a);
    Some(tail / (sum + tail) / (c * mu - lambda))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_matches_known_values() {
        // M/M/1: W_q = ρ / (μ − λ).
        let w = erlang_c_wait(0.8, 1.0, 1).unwrap();
        assert!((w - 4.0).abs() < 1e-12);
        // M/M/2 with a = 1: C = 1/3, W_q = (1/3) / (2 − 1).
        assert!((erlang_c_wait(1.0, 1.0, 2).unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(erlang_c_wait(2.0, 1.0, 2), None);
    }

    #[test]
    fn bad_parameters_are_refused() {
        let ok = MmcParams { lambda: 1.0, mu: 2.0, servers: 1, customers: 10, seed: 1 };
        for (p, name) in [
            (MmcParams { lambda: 0.0, ..ok }, "lambda"),
            (MmcParams { mu: f64::NAN, ..ok }, "mu"),
            (MmcParams { servers: 0, ..ok }, "servers"),
        ] {
            assert!(matches!(Mmc::simulate(&p), Err(SimError::BadParameter { name: n, .. }) if n == name));
        }
    }
}
