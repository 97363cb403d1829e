//! The hill climber that sizes TinyLFU's admission window, after Einziger, Eytan, Friedman
//! and Manes, "Adaptive Software Cache Management", Middleware 2018 (§3.2, hill climbing),
//! as Caffeine's wiki describes it ("Efficiency", adaptivity): each sample the window's share
//! of the capacity moves a step in the direction that raised the hit ratio over the last
//! sample, and turns back when the hit ratio fell; the step decays each sample, so that the
//! window settles, and starts over at full size when the hit ratio changes a lot (the
//! workload changed).
//!
//! Caffeine's constants are its `HILL_CLIMBER_*`: a step of 6.25 % of the capacity, a decay
//! of 0.98 per sample, a restart at a change of 5 points, a start at 1 % shrinking first,
//! samples of 10 × the entries. The decay, the restart and the first direction are kept; the
//! start, the step, the bound and the sample are this project's, from `switchyard bench
//! eviction` (200,000 requests, seeds 1–5): with Caffeine's the Zipf and shifting families
//! fell to 1.54 points below the best; see [`super::TinyLfu`] for the figures.

/// The window's share when the cache starts, in thousandths of the capacity.
pub(super) const START_MILLI: u64 = 50;
/// The most the window may take, in thousandths of the capacity.
pub(super) const MAX_MILLI: u64 = 100;
/// A full step, in thousandths of the capacity.
const STEP_MILLI: u64 = 25;
/// What a step keeps of itself from one sample to the next (Caffeine's 0.98).
const DECAY: f64 = 0.98;
/// A change of the hit ratio this large between samples restarts the step (Caffeine's 5
/// points).
const RESTART: f64 = 0.05;
/// Requests per sample, per entry held when the sample ended: long enough that a sample's hit
/// ratio moves with the window more than with chance (worst gaps over seeds 1–5: at 10 per
/// entry, Caffeine's, shifting −1.10; at 15, Zipf −1.60; at 20, within −0.90; at 30, −0.96).
const SAMPLE_PER_ENTRY: u64 = 20;
/// The shortest sample, in requests (a small cache's samples would be noise otherwise).
const SAMPLE_MIN: u64 = 1_000;

/// Counts hits and misses over samples and says, at the end of each, how far the window
/// should move. Time is the number of requests counted, so it is deterministic.
#[derive(Clone, Debug)]
pub(super) struct Climber {
    requests: u64,
    hits: u64,
    /// Requests the current sample takes.
    sample: u64,
    /// The last sample's hit ratio, in [0, 1]; `None` before the first sample ended.
    previous: Option<f64>,
    /// The next step, in bytes; its sign is its direction (more window, or less).
    step: f64,
}

impl Climber {
    /// A climber whose first step, for a cache of `capacity`, shrinks the window (Caffeine's
    /// first direction too: the window starts larger than most workloads want).
    pub(super) fn new(capacity: u64) -> Self {
        Self { requests: 0, hits: 0, sample: SAMPLE_MIN, previous: None, step: -full_step(capacity) }
    }

    /// Counts a request; at the end of a sample, how many bytes the window should move (more
    /// window if positive); 0 otherwise. `entries` (held now) sizes the next sample.
    /// `capacity` sizes a restarted step.
    pub(super) fn record(&mut self, hit: bool, entries: usize, capacity: u64) -> i64 {
        self.requests += 1;
        self.hits += u64::from(hit);
        if self.requests < self.sample {
            return 0;
        }
        let ratio = self.hits as f64 / self.requests as f64;
        self.sample = (SAMPLE_PER_ENTRY * entries as u64).max(SAMPLE_MIN);
        (self.requests, self.hits) = (0, 0);
        let Some(previous) = self.previous.replace(ratio) else {
            return 0;
        };
        let change = ratio - previous;
        let amount = if change >= 0.0 { self.step } else { -self.step };
        self.step = if change.abs() >= RESTART { full_step(capacity).copysign(amount) } else { amount * DECAY };
        amount as i64
    }
}

/// The window's share at the start, in bytes, of a cache of `capacity`.
pub(super) fn start_share(capacity: u64) -> u64 {
    share(capacity, START_MILLI)
}

/// The most the window may take, in bytes, of a cache of `capacity`.
pub(super) fn max_share(capacity: u64) -> u64 {
    share(capacity, MAX_MILLI)
}

fn share(capacity: u64, milli: u64) -> u64 {
    (u128::from(capacity) * u128::from(milli) / 1000) as u64
}

fn full_step(capacity: u64) -> f64 {
    capacity as f64 * STEP_MILLI as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds one sample of `hits` hits out of `n` requests; the move at its end.
    fn sample(c: &mut Climber, hits: u64, n: u64) -> i64 {
        (0..n).map(|i| c.record(i < hits, 1, 1_000_000)).sum()
    }

    /// The climber's rule (Middleware 2018, §3.2): keep the direction while the hit ratio
    /// rises, turn back when it falls, the step decaying; a large change restarts it.
    #[test]
    fn the_climber_keeps_going_while_hits_rise_and_turns_back_when_they_fall() {
        let mut c = Climber::new(1_000_000);
        assert_eq!(sample(&mut c, 500, 1_000), 0, "the first sample is only a reference");
        let first = sample(&mut c, 510, 1_000);
        assert_eq!(first, -25_000, "hits rose: the first step, shrinking the window");
        let second = sample(&mut c, 520, 1_000);
        assert_eq!(second, -24_500, "hits rose again: the same direction, the step decayed");
        let third = sample(&mut c, 505, 1_000);
        assert_eq!(third, 24_010, "hits fell: back the other way");
        let fourth = sample(&mut c, 600, 1_000);
        assert_eq!(fourth, 23_529, "hits rose: on in that direction");
        let fifth = sample(&mut c, 606, 1_000);
        assert_eq!(fifth, 25_000, "a change of 9.5 points restarted the step at full size");
    }
}
