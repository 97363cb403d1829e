//! An exponentially weighted moving average of periodic samples: the throughput monitor of
//! Yates's throughput-based scheduling (Yates 2006 §4.2; notes 000 §3.3).
//!
//! `avg ← (1 − g)·avg + g·sample`, where `g` is the **gain on the new sample**. The thesis says
//! "α = 0.875" while also saying α was varied by factors of 2 from 1/2 to 1/128, which 0.875 is
//! not in (notes 000 §3.3, [ambiguous]). We read it as TCP's SRTT estimator: weight 0.875 on the
//! history, so `g = 1/8` ([`Ewma::YATES_GAIN`]). The literal reading, `g = 0.875`, is the same
//! type with a different gain, and every driver offers it as an option.

/// A moving average. The first sample seeds it, so a new monitor does not start from zero and
/// creep up (which would make a fresh worker look starved to a balancer).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ewma {
    gain: f64,
    value: Option<f64>,
}

impl Ewma {
    /// Gain 1/8 on the new sample: our reading of the thesis's "α = 0.875".
    pub const YATES_GAIN: f64 = 0.125;

    /// An empty average with gain `gain` on each new sample, clamped to (0, 1].
    pub fn new(gain: f64) -> Self {
        let gain = if gain.is_finite() && gain > 0.0 { gain.min(1.0) } else { Self::YATES_GAIN };
        Self { gain, value: None }
    }

    /// Adds a sample and returns the new average.
    pub fn push(&mut self, sample: f64) -> f64 {
        let next = match self.value {
            None => sample,
            Some(avg) => avg + self.gain * (sample - avg),
        };
        self.value = Some(next);
        next
    }

    /// The average, or `None` before the first sample.
    pub fn value(&self) -> Option<f64> {
        self.value
    }

    /// The gain on a new sample.
    pub fn gain(&self) -> f64 {
        self.gain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_seeds_then_history_weighs_seven_eighths() {
        let mut e = Ewma::new(Ewma::YATES_GAIN);
        assert_eq!(e.value(), None);
        assert_eq!(e.push(800.0), 800.0);
        assert_eq!(e.push(0.0), 700.0);
        let mut literal = Ewma::new(0.875);
        literal.push(800.0);
        assert_eq!(literal.push(0.0), 100.0);
    }

    #[test]
    fn a_bad_gain_falls_back_to_the_default() {
        assert_eq!(Ewma::new(f64::NAN).gain(), Ewma::YATES_GAIN);
        assert_eq!(Ewma::new(0.0).gain(), Ewma::YATES_GAIN);
        assert_eq!(Ewma::new(3.0).gain(), 1.0);
    }
}
