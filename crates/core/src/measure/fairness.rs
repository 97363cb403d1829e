//! Fairness of throughput across connections or threads, as Yates reports it and as a modern
//! reader expects it (Yates 2006 §3.2–§3.3; notes 000 §3.2, §5.1), and how far a paced stream is
//! from its promised rate.
//!
//! The thesis never uses Jain's index: it plots percentiles of per-connection and per-thread
//! throughput, each divided by the mean — the maximum, 75th, 50th, 25th and **4th** percentile
//! and the minimum (its threads A–F). [`Spread`] is that view; Jain's index and max/min come from
//! [`crate::measure::balance`] and [`Spread::max_over_min`].

/// The thesis's percentile view of a set of throughputs, each divided by their mean (so 1 is the
/// mean; a perfectly fair set is all ones).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// Thread A: the largest.
    pub max: f64,
    /// Thread B: 75th percentile.
    pub p75: f64,
    /// Thread C: the median.
    pub p50: f64,
    /// Thread D: 25th percentile.
    pub p25: f64,
    /// Thread E: 4th percentile.
    pub p4: f64,
    /// Thread F: the smallest.
    pub min: f64,
}

impl Spread {
    /// Largest over smallest: the thesis's "max/min" (infinite if something got nothing while
    /// something else got data).
    pub fn max_over_min(&self) -> f64 {
        if self.min > 0.0 {
            self.max / self.min
        } else if self.max > 0.0 {
            f64::INFINITY
        } else {
            1.0
        }
    }
}

/// The percentile view of `xs`. Percentiles are nearest-rank (the smallest value with at least
/// q of the set at or below it), so each is a value some connection or thread really had, as the
/// thesis's labelled threads are. An empty or all-zero set is perfectly fair.
pub fn spread(xs: &[f64]) -> Spread {
    let mean = if xs.is_empty() { 0.0 } else { xs.iter().sum::<f64>() / xs.len() as f64 };
    if mean <= 0.0 || !mean.is_finite() {
        return Spread { max: 1.0, p75: 1.0, p50: 1.0, p25: 1.0, p4: 1.0, min: 1.0 };
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = |q: f64| quantile_sorted(&sorted, q) / mean;
    Spread { max: at(1.0), p75: at(0.75), p50: at(0.5), p25: at(0.25), p4: at(0.04), min: at(0.0) }
}

/// The nearest-rank `q` quantile of an ascending slice (`q` in [0, 1]; 0 is the minimum). `NaN`
/// for an empty slice.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let n = sorted.len();
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

/// The middle of `values` (the upper of the two middle ones for an even count), 0 for none: the
/// benchmarks' summary of their rounds, each ratio taken within a round.
pub fn median_of_rounds(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// How far one window's delivery was from its promise: `(got − promised) / promised`, so −0.1
/// is 10% short and 0 exact. `promised` is the target rate times the window; a window with
/// nothing promised scores 0.
pub fn rate_error(got_bytes: f64, promised_bytes: f64) -> f64 {
    if promised_bytes > 0.0 { (got_bytes - promised_bytes) / promised_bytes } else { 0.0 }
}

/// The smallest error a pacer sending `chunk` bytes at a time can promise over a window of
/// `window_bytes`: a window holds a whole number of chunks, so it can be off by one of them.
/// Reports print it beside the measured error, so a reader can tell quantisation from lateness.
pub fn quantisation_floor(chunk_bytes: f64, window_bytes: f64) -> f64 {
    if window_bytes > 0.0 { chunk_bytes / window_bytes } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_rounds_is_the_middle_one_or_the_upper_middle() {
        assert_eq!(median_of_rounds(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_of_rounds(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(median_of_rounds(Vec::new()), 0.0);
    }

    #[test]
    fn spread_names_the_thesis_threads() {
        // 1..=100: mean 50.5; the 4th percentile is 4 and the 75th is 75 by nearest rank.
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = spread(&xs);
        assert_eq!(s.max, 100.0 / 50.5);
        assert_eq!(s.p75, 75.0 / 50.5);
        assert_eq!(s.p50, 50.0 / 50.5);
        assert_eq!(s.p25, 25.0 / 50.5);
        assert_eq!(s.p4, 4.0 / 50.5);
        assert_eq!(s.min, 1.0 / 50.5);
        assert_eq!(s.max_over_min(), 100.0);
    }

    #[test]
    fn equal_shares_are_all_ones_and_starvation_is_infinite() {
        let s = spread(&[3.0; 7]);
        assert_eq!((s.max, s.p4, s.min), (1.0, 1.0, 1.0));
        assert_eq!(spread(&[0.0, 2.0]).max_over_min(), f64::INFINITY);
        assert_eq!(spread(&[]).max_over_min(), 1.0);
    }

    #[test]
    fn errors_are_relative_to_the_promise() {
        assert_eq!(rate_error(90.0, 100.0), -0.1);
        assert_eq!(rate_error(5.0, 0.0), 0.0);
        assert_eq!(quantisation_floor(4096.0, 50_000.0), 4096.0 / 50_000.0);
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0], 0.99), 3.0);
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0], 0.5), 2.0);
    }
}
