//! Telling a popularity shift from noise and from a scan, by the hit ratio alone: when it
//! stays well below where it was for several samples in a row, what was popular has cooled,
//! and TinyLFU's sketch should forget it sooner than its regular halving would.
//!
//! The idea is the restart rule of the hill climber of Einziger, Eytan, Friedman and Manes,
//! "Adaptive Software Cache Management" (Middleware 2018), as Caffeine implements it
//! (`BoundedLocalCache`, `HILL_CLIMBER_RESTART_THRESHOLD`): a large change of the hit ratio
//! between samples means the workload changed. The window climber itself is
//! [`super::climb`]; a climber of the sketch's aging lost on `switchyard bench eviction`'s
//! traces (seeds 1–3: 0.7–1.1 points of mean hit ratio below a fixed aging), so here the
//! signal alone halves the sketch. The thresholds below are this project's, from the same
//! bench.

/// A sample, in requests.
const SAMPLE: u64 = 1_500;
/// A fall of this many points of hit ratio below the reference is a fall.
const FALL_POINTS: u64 = 3;
/// Samples in a row that must fall before the sketch is halved. A scan (a run of one-time
/// keys) fills a sample or two with misses and is over; a shift lasts until the new popular
/// keys are admitted. In `bench eviction` (samples of 2,000), with 1 or 2 scans halved it
/// (Zipf + scan at 10 %: 1.7 and 1.0 points from the best, seeds 1–3); 3 and 4 were within
/// 0.4 point of each other on every family (seeds 1–5).
const FALLS: u64 = 4;

/// Counts hits and misses over samples of [`SAMPLE`] requests and says when the sketch
/// should halve. Time is the number of requests counted, so it is deterministic.
#[derive(Clone, Debug)]
pub(super) struct ShiftWatch {
    requests: u64,
    hits: u64,
    /// The hit ratio (in points) of the last sample before the fall began, if any sample ended.
    reference: Option<f64>,
    falls: u64,
    shifts: u64,
}

impl ShiftWatch {
    pub(super) fn new() -> Self {
        Self { requests: 0, hits: 0, reference: None, falls: 0, shifts: 0 }
    }

    /// Counts a request; true when it ends the [`FALLS`]th sample in a row whose hit ratio is
    /// [`FALL_POINTS`] below the reference: popularity shifted.
    pub(super) fn record(&mut self, hit: bool) -> bool {
        self.requests += 1;
        self.hits += u64::from(hit);
        if self.requests < SAMPLE {
            return false;
        }
        let points = 100.0 * self.hits as f64 / self.requests as f64;
        (self.requests, self.hits) = (0, 0);
        let fell = self.reference.is_some_and(|r| points + FALL_POINTS as f64 <= r);
        if !fell {
            self.falls = 0;
            self.reference = Some(points);
            return false;
        }
        self.falls += 1;
        if self.falls < FALLS {
            return false;
        }
        // The lower level is the new normal: a further fall is measured from it.
        self.falls = 0;
        self.reference = Some(points);
        self.shifts += 1;
        true
    }

    /// Shifts seen so far.
    pub(super) fn shifts(&self) -> u64 {
        self.shifts
    }
}
