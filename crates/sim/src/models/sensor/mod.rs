//! Sensor fields behind a caching gateway: Yates (2006) ch. 5 in the simulator.
//!
//! [`field`] is the field (the 1,000-location lattice with independent or correlated changes,
//! or a trace such as the Intel lab's); [`run`] drives the core's cache (`switchyard_core::
//! cache`) with the thesis's query workload and access links, and measures hit ratio, cost,
//! delay and deviation; [`experiment`] runs several policies on one field and scores their
//! answers' quality Q_n against a pool of all of them.

pub mod run;

// The field and its links are models the gateway's field emulator uses too: they live in
// `switchyard-models`, below both, so that the gateway does not depend on the simulator.
pub use switchyard_models::{field, links as link};

pub use field::{ChangeModel, Field, FieldSpec, Stations, Trace, YATES_SIGMA};
pub use link::AccessLinks;
pub use run::{PolicyRun, SensorParams, simulate};

use switchyard_core::cache::Lookup;
use switchyard_core::measure::{Moments, Quality};

use crate::SimError;

/// Several policies run on the same field and queries, with their answers pooled for Q_n.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// One run per policy, in the order asked.
    pub runs: Vec<PolicyRun>,
    /// The pooled delays.
    pub delay: Moments,
    /// The pooled deviations.
    pub deviation: Moments,
}

impl Experiment {
    /// The mean Q_n of `run`'s answers, with delay weighted `a` (Yates Eq 5.2).
    pub fn quality(&self, run: &PolicyRun, a: f64) -> f64 {
        let q = Quality { a, delay: self.delay, deviation: self.deviation };
        q.mean_of(run.answers.iter().map(|&(d, v)| (f64::from(d), f64::from(v))))
    }
}

/// Runs each of `lookups` on `params` (on up to `threads` threads: runs are independent and
/// each is deterministic), then pools their answers.
pub fn experiment(params: &SensorParams, lookups: &[Lookup], threads: usize) -> Result<Experiment, SimError> {
    let mut runs: Vec<Option<Result<PolicyRun, SimError>>> = (0..lookups.len()).map(|_| None).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots = std::sync::Mutex::new(&mut runs);
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, lookups.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(lookup) = lookups.get(i) else { break };
                    let r = simulate(params, *lookup);
                    slots.lock().expect("no run panics holding the lock")[i] = Some(r);
                }
            });
        }
    });
    let runs: Vec<PolicyRun> = runs.into_iter().map(|r| r.expect("every policy ran")).collect::<Result<_, _>>()?;
    let (mut delay, mut deviation) = (Moments::default(), Moments::default());
    for r in &runs {
        for &(d, v) in &r.answers {
            delay.push(f64::from(d));
            deviation.push(f64::from(v));
        }
    }
    Ok(Experiment { runs, delay, deviation })
}
