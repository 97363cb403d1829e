//! Latency distribution: an HDR histogram of nanosecond latencies (3 significant digits, so
//! percentiles are within 0.1%), with the percentiles reports use.

use hdrhistogram::Histogram;

/// Recorded latencies, in nanoseconds.
#[derive(Clone, Debug)]
pub struct Latency {
    hist: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty record (1 ns to about an hour; longer values are clamped to the top).
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("static bounds are valid");
        Self { hist }
    }

    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
    }

    /// How many were recorded.
    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// The latency at quantile `q` (0.5 for the median), in nanoseconds; 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.hist.is_empty() { 0 } else { self.hist.value_at_quantile(q) }
    }

    /// Mean latency in nanoseconds; 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.hist.is_empty() { 0.0 } else { self.hist.mean() }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn percentiles_are_within_a_tenth_of_a_percent() {
        let mut l = super::Latency::new();
        for v in 1..=100_000u64 {
            l.record(v * 1000);
        }
        let p99 = l.quantile(0.99) as f64;
        assert!((p99 / 99_000_000.0 - 1.0).abs() < 0.001, "{p99}");
        assert_eq!(l.count(), 100_000);
    }
}
