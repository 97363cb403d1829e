//! Telling a popularity shift from noise and from a scan: when the hit ratio stays well below
//! where it has been for several samples in a row, and the misses are of keys asked for again,
//! what was popular has cooled and something else heated, and TinyLFU should forget what its
//! sketch and its protected segment hold of the old ranking.
//!
//! The idea is the restart rule of the hill climber of Einziger, Eytan, Friedman and Manes,
//! "Adaptive Software Cache Management" (Middleware 2018), as Caffeine implements it
//! (`BoundedLocalCache`, `HILL_CLIMBER_RESTART_THRESHOLD`): a large change of the hit ratio
//! between samples means the workload changed. The climber itself (moving the admission
//! window, or the sketch's aging, a step per sample towards a higher hit ratio) lost on
//! `switchyard bench eviction`'s traces: its samples are short enough to follow a shift only
//! if they are noisy, and it wandered (the window climber, seed 1: up to 7.9 points below the
//! best on Zipf, 2.3 points of mean hit ratio below no window; the aging climber, seeds 1–3:
//! 0.7–1.1 points of mean hit ratio below a fixed aging; a window opened at a detected shift
//! and closed a point a sample, 10 % or 20 % of the capacity: 1–5 points below no window on
//! every family). What is kept is the signal, made this project's in two ways, from the same
//! bench (seeds 1–5):
//! - the fall is measured from a moving average of the samples that did not fall, not from the
//!   last one: a single lucky sample made the next four look like a fall on stationary Zipf
//!   traces (at 10 %, seeds 4 and 5: 2–4.7 points lost to a wrong forgetting);
//! - a falling sample counts only if at least [`AGAIN_PCT`] % of its misses are of keys that
//!   missed lately ([`super::recent::RecentMisses`]): the new popular keys of a shift miss
//!   again and again until they are admitted, a scan's keys miss once. Without it the scans of
//!   the Zipf + scan trace were taken for shifts 3–5 times a trace.
//!
//! The thresholds below are this project's, from the same bench.

/// A sample, in requests.
const SAMPLE: u64 = 1_500;
/// A fall of this many points of hit ratio below the reference is a fall.
const FALL_POINTS: f64 = 3.0;
/// Samples in a row that must fall before a shift is declared. A scan (a run of one-time
/// keys) fills a sample or two with misses and is over; a shift lasts until the new popular
/// keys are admitted. In `bench eviction` (samples of 2,000), with 1 or 2 scans halved it
/// (Zipf + scan at 10 %: 1.7 and 1.0 points from the best, seeds 1–3); 3 and 4 were within
/// 0.4 point of each other on every family (seeds 1–5). With the forgetting of
/// [`super::TinyLfu`], 2 and 3 cost up to 6 points on Zipf (wrong forgettings).
const FALLS: u64 = 4;
/// The share of a falling sample's misses, in percent, that must be of keys that missed lately
/// for the fall to count (10, 15 and 20 in `bench eviction`, seeds 1–5: the shifting trace's
/// mean gain +1.1, +1.1 and +1.2 points; at 10 and 5 a Zipf trace was taken for a shift).
const AGAIN_PCT: u64 = 20;
/// The weight of a sample that did not fall in the reference's moving average.
const REFERENCE_WEIGHT: f64 = 0.25;

/// Counts hits and misses over samples of [`SAMPLE`] requests and says when popularity
/// shifted. Time is the number of requests counted, so it is deterministic.
#[derive(Clone, Debug)]
pub(super) struct ShiftWatch {
    requests: u64,
    hits: u64,
    /// Misses of keys that missed lately, this sample.
    again: u64,
    /// The moving average of the hit ratio (in points) of the samples that did not fall, if
    /// any sample ended.
    reference: Option<f64>,
    falls: u64,
    shifts: u64,
}

impl ShiftWatch {
    pub(super) fn new() -> Self {
        Self { requests: 0, hits: 0, again: 0, reference: None, falls: 0, shifts: 0 }
    }

    /// Counts a request, a hit or a miss (`again`: of a key that missed lately); true when it
    /// ends the [`FALLS`]th sample in a row whose hit ratio is [`FALL_POINTS`] below the
    /// reference with [`AGAIN_PCT`] % of its misses again: popularity shifted.
    pub(super) fn record(&mut self, hit: bool, again: bool) -> bool {
        self.requests += 1;
        self.hits += u64::from(hit);
        self.again += u64::from(again && !hit);
        if self.requests < SAMPLE {
            return false;
        }
        let points = 100.0 * self.hits as f64 / self.requests as f64;
        let misses = self.requests - self.hits;
        let again = self.again;
        (self.requests, self.hits, self.again) = (0, 0, 0);
        let fell = self.reference.is_some_and(|r| points + FALL_POINTS <= r);
        if !fell {
            self.falls = 0;
            self.reference = Some(self.reference.map_or(points, |r| r + REFERENCE_WEIGHT * (points - r)));
            return false;
        }
        if again * 100 < AGAIN_PCT * misses {
            // Misses of keys not asked for lately: a scan passing. Neither a fall nor the
            // level to measure falls from.
            self.falls = 0;
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
