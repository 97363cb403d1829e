//! Latency distributions as Figurehead keeps them (notes 004b §1(c), "CDF representation"):
//! 100 points, one per percentile, looked up conservatively (the percentile rounded down,
//! never interpolated, so the QoS measured meets or exceeds the QoS computed); kept online
//! from recent attempts, including those cut short by a hedge's first answer; and an
//! HdrHistogram of the answers beside them.

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;

/// A latency CDF as 100 points: `points[k]` is the latency within which `k + 1` % of requests
/// finished.
#[derive(Clone, Debug, PartialEq)]
pub struct PercentileCdf {
    points: Vec<Duration>,
}

impl PercentileCdf {
    /// From latencies observed (nearest-rank percentiles); `None` if there are none.
    pub fn from_samples(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let n = s.len();
        // Nearest rank: the smallest sample with at least p % of samples at or below it.
        let points = (1..=100).map(|p| s[(p * n).div_ceil(100).clamp(1, n) - 1]).collect();
        Some(Self { points })
    }

    /// From a quantile function `q(p)`, `p` in (0, 1] (a model's inverse CDF).
    pub fn from_quantiles(q: impl Fn(f64) -> Duration) -> Self {
        let mut points: Vec<Duration> = (1..=100).map(|p| q(f64::from(p) / 100.0)).collect();
        // A quantile function is non-decreasing; make sure rounding kept it so.
        for i in 1..points.len() {
            points[i] = points[i].max(points[i - 1]);
        }
        Self { points }
    }

    /// `CDF(l)`: the fraction of requests done within `l`, as whole percentiles rounded down
    /// (the largest `p` whose point is at most `l`, over 100).
    pub fn at(&self, l: Duration) -> f64 {
        self.points.partition_point(|p| *p <= l) as f64 / 100.0
    }

    /// `CDF⁻¹(p)`: the latency within which `percent` % of requests finished (`percent` in
    /// 1..=100; 0 is no wait).
    pub fn latency(&self, percent: u8) -> Duration {
        match percent {
            0 => Duration::ZERO,
            p => self.points[usize::from(p.min(100)) - 1],
        }
    }
}

/// Latencies of one back-end kept online: the last `2 × window` attempts, answered or cut
/// short, from which the 100-point CDF is estimated (Kaplan–Meier, below); an HdrHistogram
/// (microseconds, 3 significant digits) of the answered ones, for reporting; and a
/// peak-sensitive EWMA of latency, Finagle's and Linkerd's load metric for power-of-two
/// choices.
#[derive(Clone, Debug)]
pub struct LatencyTracker {
    recent: VecDeque<(Duration, bool)>,
    answered: Histogram<u64>,
    window: u64,
    ewma_us: f64,
    decay: f64,
}

/// The longest latency a tracker holds; longer ones (and cancelled attempts) count as this.
pub const LATENCY_MAX: Duration = Duration::from_secs(60);

impl LatencyTracker {
    /// A tracker holding the last `2 × window` attempts (at least 2); `decay` is the weight a
    /// new sample gets in the EWMA (0 to 1).
    pub fn new(window: u64, decay: f64) -> Self {
        let answered = Histogram::new_with_bounds(1, LATENCY_MAX.as_micros() as u64, 3).expect("valid bounds");
        Self { recent: VecDeque::new(), answered, window: window.max(1), ewma_us: 0.0, decay: decay.clamp(0.0, 1.0) }
    }

    fn push(&mut self, latency: Duration, answered: bool) {
        if self.recent.len() as u64 >= 2 * self.window {
            self.recent.pop_front();
        }
        self.recent.push_back((latency.min(LATENCY_MAX), answered));
    }

    /// A latency observed.
    pub fn record(&mut self, latency: Duration) {
        self.push(latency, true);
        let us = (latency.min(LATENCY_MAX).as_micros() as u64).max(1);
        self.answered.saturating_record(us);
        if self.answered.len() >= 2 * self.window {
            self.answered.reset();
        }
        // Peak EWMA: a slow sample takes over at once, a fast one is averaged in.
        let x = us as f64;
        self.ewma_us = if x > self.ewma_us { x } else { self.ewma_us + self.decay * (x - self.ewma_us) };
    }

    /// An attempt cancelled (or failed) `after` it was sent: its latency is known only to be
    /// more than `after`. Left out, or counted as `after`, such attempts would make a
    /// back-end whose slow answers are always cut short look fast; the Kaplan–Meier estimate
    /// in [`LatencyTracker::cdf`] counts them for what they are.
    pub fn censored(&mut self, after: Duration) {
        self.push(after, false);
    }

    /// Attempts held.
    pub fn len(&self) -> u64 {
        self.recent.len() as u64
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    /// The peak EWMA of latency.
    pub fn ewma(&self) -> Duration {
        Duration::from_micros(self.ewma_us as u64)
    }

    /// The 100-point CDF of the attempts held, by the Kaplan–Meier product-limit estimate
    /// (Kaplan & Meier 1958), which reads an attempt cut short at `t` as "longer than `t`".
    /// With nothing cut short it is the empirical CDF (nearest rank). Percentiles the
    /// estimate never reaches (every slower attempt was cut short) are [`LATENCY_MAX`]: what
    /// is not known is taken as slow. `None` while empty.
    pub fn cdf(&self) -> Option<PercentileCdf> {
        if self.recent.is_empty() {
            return None;
        }
        let mut obs: Vec<(Duration, bool)> = self.recent.iter().copied().collect();
        // At equal times, answers before cut-offs (the usual convention).
        obs.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut at_risk = obs.len() as f64;
        let mut survival = 1.0;
        let mut steps: Vec<(Duration, f64)> = Vec::new();
        let mut i = 0;
        while i < obs.len() {
            let t = obs[i].0;
            let (mut answered, mut cut) = (0.0, 0.0);
            while i < obs.len() && obs[i].0 == t {
                if obs[i].1 {
                    answered += 1.0
                } else {
                    cut += 1.0
                }
                i += 1;
            }
            if answered > 0.0 {
                survival *= 1.0 - answered / at_risk;
                steps.push((t, 1.0 - survival));
            }
            at_risk -= answered + cut;
        }
        Some(PercentileCdf::from_quantiles(|p| {
            steps.iter().find(|(_, f)| *f >= p - 1e-9).map_or(LATENCY_MAX, |(t, _)| *t)
        }))
    }

    /// The latency at quantile `q` (0 to 1) of [`LatencyTracker::cdf`].
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        self.cdf().map(|c| c.latency((q * 100.0).ceil().clamp(1.0, 100.0) as u8))
    }

    /// The latency at quantile `q` of the answered attempts alone, from the HdrHistogram
    /// (what the answers took; not an estimate of the back-end's distribution when attempts
    /// are cut short).
    pub fn answered_quantile(&self, q: f64) -> Option<Duration> {
        (!self.answered.is_empty()).then(|| Duration::from_micros(self.answered.value_at_quantile(q)))
    }
}
