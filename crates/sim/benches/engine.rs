//! Speed of the event engine: a plain event loop (the "hold" model: a fixed population of pending
//! events, each handled one rescheduling itself a pseudo-random delay ahead; a million events per
//! iteration, including setting up the population) at 1,000 and 100,000 pending events, and the
//! M/M/c model. Reported as events per second.
//!
//! Run: `cargo bench -p switchyard-sim --bench engine`. The SimPy comparison on the same M/M/c
//! model is `bench/sim-vs-simpy.sh` (it needs Python, so it is a script, not a criterion peer).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use switchyard_core::place::score::splitmix64;
use switchyard_sim::models::mmc::{Mmc, MmcParams};
use switchyard_sim::{EventQueue, Model, Nanos};

/// Each event reschedules itself 1–1024 ns ahead, drawn from a counter-based hash.
struct Hold {
    draws: u64,
}

impl Model for Hold {
    type Event = u32;
    fn handle(&mut self, _now: Nanos, event: u32, queue: &mut EventQueue<u32>) {
        self.draws += 1;
        queue.schedule_in(Nanos(1 + splitmix64(self.draws) % 1024), event);
    }
}

fn hold(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine/hold");
    for pending in [1_000u32, 100_000] {
        let events = 1_000_000u64;
        g.throughput(Throughput::Elements(events));
        g.bench_function(format!("{pending} pending"), |b| {
            b.iter(|| {
                let mut q = EventQueue::new();
                for i in 0..pending {
                    q.schedule_at(Nanos(u64::from(i)), i).unwrap();
                }
                let mut m = Hold { draws: 0 };
                // Exactly `events` events: the queue never empties, since each event reschedules.
                for _ in 0..events {
                    let (now, e) = q.pop().expect("the hold model keeps its population");
                    m.handle(now, e, &mut q);
                }
                black_box(m.draws)
            })
        });
    }
    g.finish();
}

fn mmc(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine/mmc");
    let p = MmcParams { lambda: 3600.0, mu: 1000.0, servers: 4, customers: 200_000, seed: 1 };
    g.throughput(Throughput::Elements(2 * p.customers));
    g.bench_function("M/M/4 at 0.9", |b| b.iter(|| black_box(Mmc::simulate(&p).unwrap())));
    g.finish();
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10)
        .configure_from_args();
    hold(&mut c);
    mmc(&mut c);
    c.final_summary();
}
