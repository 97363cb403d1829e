//! One run of a sensor field behind a caching gateway, for one lookup policy (Yates §5.3).
//!
//! Queries arrive by polling (one location after another, every τ/|N|) plus a Poisson stream
//! to random locations. The core's [`Cache`] says what to do with each. A read goes to the
//! location's nearest base station, waits its turn on the access link (which takes one query
//! every 1/capacity seconds), travels q·r to the sensor, which samples its value then, and q·r
//! back. Choices the thesis leaves open (notes 000 §7.3), made here:
//! - a query whose wait for the link would pass the maximum is dropped (nobody can yet be
//!   waiting on the read it would have started); the report counts drops, and hit ratio, cost,
//!   delay and quality are per answered query;
//! - the link's capacity spaces queries out; a query's delay is its wait plus the field's
//!   round trip (the time on the link is inside q·r);
//! - a query answered by a read it waited on costs nothing (no message was sent for it) and
//!   is not a hit;
//! - deviation is against the true value at the queried location when the answer leaves.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use switchyard_core::Nanos;
use switchyard_core::cache::{AgeFrom, Answer, Cache, FieldCost, Lookup, Neighbours, ReadId, Reading};

use super::field::{Field, FieldSpec};
use super::link::AccessLinks;
use crate::{EventQueue, Model, SimError, Streams, secs};

/// A run's parameters.
#[derive(Clone, Debug)]
pub struct SensorParams {
    /// The field.
    pub field: FieldSpec,
    /// Yates's T, seconds.
    pub ttl_s: f64,
    /// Where an entry's age counts from.
    pub age_from: AgeFrom,
    /// Cache approximate answers too (see `Cache::keep_approximations`).
    pub keep_approximations: bool,
    /// Poisson queries a second (λ).
    pub lambda: f64,
    /// The polling period τ, seconds: every location is polled once per τ.
    pub poll_s: f64,
    /// Queries a second each base station's access link takes.
    pub link_capacity: f64,
    /// The longest a query may wait for the link, seconds.
    pub max_wait_s: f64,
    /// Seconds simulated before measuring.
    pub warmup_s: f64,
    /// Seconds of query arrivals measured.
    pub measure_s: f64,
    /// The root seed. Every policy run with one seed sees the same field and the same queries.
    pub seed: u64,
}

/// What one policy's run measured, over the queries that arrived after the warm-up.
#[derive(Clone, Debug, Default)]
pub struct PolicyRun {
    /// The policy.
    pub lookup: Option<Lookup>,
    /// Queries that arrived.
    pub queries: u64,
    /// Answered from the location's own entry.
    pub hits: u64,
    /// Answered from neighbours' entries.
    pub approx_hits: u64,
    /// Answered by a read another query started.
    pub coalesced: u64,
    /// Reads of the field.
    pub reads: u64,
    /// Dropped: the link's queue was past its longest wait.
    pub dropped: u64,
    /// Cost of every read, summed.
    pub cost: f64,
    /// Each answer's delay (s) and deviation, in arrival order.
    pub answers: Vec<(f32, f32)>,
    /// Seconds measured.
    pub measured_s: f64,
    /// What a read costs on average over the field's locations: All misses's cost per query,
    /// the unit the thesis's costs are best compared in (its p depends on where base stations
    /// stand, which it does not say).
    pub miss_cost: f64,
}

impl PolicyRun {
    /// Queries answered (not dropped).
    pub fn answered(&self) -> u64 {
        self.queries - self.dropped
    }

    /// Hits and approximate hits over queries answered: the thesis's hit ratio. (Over all
    /// queries, a policy that drops more would look better.)
    pub fn hit_ratio(&self) -> f64 {
        (self.hits + self.approx_hits) as f64 / self.answered().max(1) as f64
    }

    /// Mean cost per query answered (hits cost 0).
    pub fn cost_per_query(&self) -> f64 {
        self.cost / self.answered().max(1) as f64
    }

    /// Mean delay of the answers, seconds.
    pub fn mean_delay(&self) -> f64 {
        self.answers.iter().map(|a| f64::from(a.0)).sum::<f64>() / self.answers.len().max(1) as f64
    }

    /// Mean deviation of the answers.
    pub fn mean_deviation(&self) -> f64 {
        self.answers.iter().map(|a| f64::from(a.1)).sum::<f64>() / self.answers.len().max(1) as f64
    }

    /// Reads of the field a second.
    pub fn read_rate(&self) -> f64 {
        self.reads as f64 / self.measured_s.max(f64::MIN_POSITIVE)
    }
}

enum Event {
    Change,
    Poll,
    Arrival,
    /// A read reaches its sensor.
    Sample {
        location: u32,
        read: Option<ReadId>,
        asked_at: Nanos,
    },
    /// A read's reply reaches the gateway.
    Reply {
        location: u32,
        read: Option<ReadId>,
        asked_at: Nanos,
        reading: Reading,
    },
}

struct Gateway {
    field: Field,
    cost: FieldCost,
    cache: Cache<u32, Nanos, Neighbours>,
    /// Each base station's link: when it is next free.
    links: AccessLinks,
    poll_every: Nanos,
    next_poll: u32,
    arrivals: Exp<f64>,
    queries_rng: ChaCha8Rng,
    field_rng: ChaCha8Rng,
    draws_rng: ChaCha8Rng,
    measure_from: Nanos,
    measure_to: Nanos,
    out: PolicyRun,
}

impl Gateway {
    fn measured(&self, asked_at: Nanos) -> bool {
        asked_at >= self.measure_from && asked_at < self.measure_to
    }

    fn answer(&mut self, now: Nanos, asked: u32, asked_at: Nanos, value: f64) {
        if self.measured(asked_at) {
            let delay = (now.0 - asked_at.0) as f64 / 1e9;
            let deviation = (value - self.field.values()[asked as usize]).abs();
            self.out.answers.push((delay as f32, deviation as f32));
        }
    }

    fn query(&mut self, now: Nanos, location: u32, queue: &mut EventQueue<Event>) {
        let measured = self.measured(now);
        if measured {
            self.out.queries += 1;
        }
        let rng = &mut self.draws_rng;
        match self.cache.query(&location, now, None, &mut |n| rng.random_range(0..n)) {
            Answer::Hit(e) => {
                self.out.hits += u64::from(measured);
                self.answer(now, location, now, e.reading.value);
            }
            Answer::Approx { value, .. } => {
                self.out.approx_hits += u64::from(measured);
                self.answer(now, location, now, value);
            }
            Answer::Wait { on, read } => {
                self.out.coalesced += u64::from(measured);
                if self.cache.wait(&on, read, location, now).is_err() {
                    unreachable!("the cache named a read under way");
                }
            }
            // The asker is answered by the read it started (at its reply), never queued.
            Answer::Read { read } => {
                let station = self.cost.station(location);
                let Ok(wait) = self.links.admit(station, now) else {
                    self.out.dropped += u64::from(measured);
                    // The read never starts: take it off the reads under way (nobody can have
                    // queued behind it yet).
                    self.cache.fail(&location, read);
                    return;
                };
                if measured {
                    self.out.reads += 1;
                    self.out.cost += self.cost.read_cost(location);
                }
                let travel = secs(self.cost.one_way_delay_s(location));
                queue.schedule_in(Nanos(wait.0 + travel.0), Event::Sample { location, read, asked_at: now });
            }
        }
    }
}

impl Model for Gateway {
    type Event = Event;

    fn handle(&mut self, now: Nanos, event: Event, queue: &mut EventQueue<Event>) {
        match event {
            Event::Change => {
                self.field.change(&mut self.field_rng);
                let next = secs(self.field.next_change_s()).max(now);
                queue.schedule_at(next, Event::Change).expect("not in the past");
            }
            Event::Poll | Event::Arrival if now >= self.measure_to => {}
            Event::Poll => {
                let l = self.next_poll;
                self.next_poll = (l + 1) % self.field.values().len() as u32;
                self.query(now, l, queue);
                queue.schedule_in(self.poll_every, Event::Poll);
            }
            Event::Arrival => {
                let l = self.queries_rng.random_range(0..self.field.values().len() as u32);
                self.query(now, l, queue);
                let gap = self.arrivals.sample(&mut self.queries_rng);
                queue.schedule_in(secs(gap), Event::Arrival);
            }
            Event::Sample { location, read, asked_at } => {
                let reading = Reading { value: self.field.values()[location as usize], sensed_at: now };
                let travel = secs(self.cost.one_way_delay_s(location));
                queue.schedule_in(travel, Event::Reply { location, read, asked_at, reading });
            }
            Event::Reply { location, read, asked_at, reading } => {
                self.answer(now, location, asked_at, reading.value);
                for (waiter_at, asked) in self.cache.fill(location, read, reading, now) {
                    self.answer(now, asked, waiter_at, reading.value);
                }
            }
        }
    }
}

fn positive(name: &'static str, v: f64) -> Result<(), SimError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(SimError::BadParameter { name, value: v.to_string(), expected: "a positive number" })
    }
}

/// Runs `lookup` on the field `params` describes.
pub fn simulate(params: &SensorParams, lookup: Lookup) -> Result<PolicyRun, SimError> {
    for (name, v) in [
        ("lambda", params.lambda),
        ("poll_s", params.poll_s),
        ("link_capacity", params.link_capacity),
        ("measure_s", params.measure_s),
    ] {
        positive(name, v)?;
    }
    for (name, v) in [("ttl_s", params.ttl_s), ("max_wait_s", params.max_wait_s), ("warmup_s", params.warmup_s)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(SimError::BadParameter { name, value: v.to_string(), expected: "zero or more seconds" });
        }
    }
    let streams = Streams::new(params.seed);
    let mut field_rng = streams.stream(1);
    let field = Field::new(&params.field, &mut field_rng).map_err(|e| SimError::BadParameter {
        name: "field",
        value: e,
        expected: "a field that can run",
    })?;
    let cost = FieldCost::new(field.points(), field.stations()).ok_or(SimError::BadParameter {
        name: "field",
        value: "a location on a base station".into(),
        expected: "every location some distance from its base station",
    })?;
    let mut cache = Cache::new(lookup, secs(params.ttl_s), params.age_from, field.neighbours().clone())
        .keep_approximations(params.keep_approximations);
    if lookup == Lookup::AllHits {
        for (l, v) in field.values().iter().enumerate() {
            cache.preload(l as u32, Reading { value: *v, sensed_at: Nanos::ZERO }, Nanos::ZERO);
        }
    }
    let n = field.values().len();
    let mut model = Gateway {
        links: AccessLinks::new(field.stations().len(), secs(1.0 / params.link_capacity), secs(params.max_wait_s)),
        poll_every: secs(params.poll_s / n as f64),
        next_poll: 0,
        arrivals: Exp::new(params.lambda).expect("checked positive"),
        queries_rng: streams.stream(2),
        field_rng,
        draws_rng: streams.stream(3),
        measure_from: secs(params.warmup_s),
        measure_to: secs(params.warmup_s + params.measure_s),
        out: PolicyRun {
            lookup: Some(lookup),
            measured_s: params.measure_s,
            miss_cost: cost.mean_read_cost(),
            ..PolicyRun::default()
        },
        field,
        cost,
        cache,
    };
    let mut queue = EventQueue::new();
    queue.schedule_at(secs(model.field.next_change_s()), Event::Change)?;
    queue.schedule_at(Nanos::ZERO, Event::Poll)?;
    queue.schedule_at(Nanos::ZERO, Event::Arrival)?;
    // Arrivals stop at the end of the measured window; the answers to them come within the
    // longest wait and round trip after it.
    let end = params.warmup_s + params.measure_s + params.max_wait_s + 3.0;
    crate::run(&mut model, &mut queue, secs(end));
    Ok(model.out)
}
