//! How long work takes on workers that fail: MiscoRT's failure model (Dou 2011 §3.4.1; notes
//! 003 §3.2), and the online estimates of its parameters that the thesis leaves open.
//!
//! A worker fails as a Poisson process of rate λ, transiently: all progress on its task is lost,
//! and it is back after a downtime of mean μ. A task that takes τ on it when nothing fails then
//! takes `w` in expectation ([`expected_task_time`], Eq. 3.4); T tasks spread over several such
//! workers take [`exec_time`] (Eqs. 3.7–3.8).
//!
//! # Errata and choices (notes 003 §3.2, §7.4)
//!
//! - Eq. 3.4 treats a failure as striking with probability τλ, halfway through the task. That is
//!   a first-order approximation, meaningless for τλ ≥ 1 (it returns infinity here) and well
//!   above the exact exponential expectation for τλ ≳ 0.3 (1.5 × τ against 1.30 × τ at
//!   τλ = 0.5). It is exact for the other reading of "failure rate", a per-execution probability
//!   p = τλ with a uniform failure point, which matches the thesis's experiments. The default
//!   follows the thesis ([`FailureModel::Thesis`]); [`FailureModel::Exponential`] gives the exact
//!   Poisson expectation `(e^{λτ} − 1)(1/λ + μ)`.
//! - Eq. 3.7's ceilings can give more shares than tasks (Σρ > T): the estimate is conservative,
//!   as the thesis's own example shows (ρ = 6, 3, 2 for T = 10). Kept as written.
//! - How λ and μ are estimated is not said. [`WorkerEstimate`] counts presumed failures over the
//!   time the worker was seen working, with a prior worth `prior_exposure` of work at
//!   `prior_rate` (so a new worker is neither trusted blindly nor condemned by one failure), and
//!   keeps an EWMA of the time from a presumed failure to the worker's next poll as μ.

use crate::Nanos;
use crate::measure::Ewma;

/// Which expectation of a task's time under failures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailureModel {
    /// Dou Eq. 3.4: failure with probability τλ per run, halfway through; exact for a
    /// per-execution failure probability with a uniform failure point.
    #[default]
    Thesis,
    /// The exact expectation for Poisson failures with restart: (e^{λτ} − 1)(1/λ + μ).
    Exponential,
}

/// The expected number of failures before a task of `tau` seconds succeeds on a worker failing
/// at `lambda` per second (Dou Eq. 3.1): τλ / (1 − τλ); infinite for τλ ≥ 1.
pub fn expected_failures(tau: f64, lambda: f64) -> f64 {
    let p = tau * lambda;
    if p >= 1.0 { f64::INFINITY } else { p / (1.0 - p) }
}

/// The expected time, in seconds, a task of `tau` seconds takes on a worker that fails at
/// `lambda` per second and recovers in `mu` seconds on average (Dou Eq. 3.4 under
/// [`FailureModel::Thesis`]: τ + (τ/2 + μ) · τλ/(1 − τλ)). Infinite where the task is not
/// expected to finish.
pub fn expected_task_time(tau: f64, lambda: f64, mu: f64, model: FailureModel) -> f64 {
    let (tau, lambda, mu) = (tau.max(0.0), lambda.max(0.0), mu.max(0.0));
    if lambda == 0.0 {
        return tau;
    }
    match model {
        FailureModel::Thesis => tau + (tau / 2.0 + mu) * expected_failures(tau, lambda),
        FailureModel::Exponential => libm::expm1(lambda * tau) * (1.0 / lambda + mu),
    }
}

/// The expected time for `tasks` tasks on workers whose expected task times are `w` (Dou
/// Eqs. 3.7–3.8): each worker takes ρ_i = ⌈(1/w_i) / Σ_k (1/w_k) · T⌉ tasks, and the work ends
/// with the slowest, max_i ρ_i · w_i. Workers with an infinite `w` get no share. Zero for no
/// tasks; infinite with no worker able to finish one.
pub fn exec_time(w: &[f64], tasks: u64) -> f64 {
    if tasks == 0 {
        return 0.0;
    }
    let speed: f64 = w.iter().filter(|w| w.is_finite() && **w > 0.0).map(|w| 1.0 / w).sum();
    if w.contains(&0.0) {
        // A worker that takes no time finishes everything at once.
        return 0.0;
    }
    if speed == 0.0 {
        return f64::INFINITY;
    }
    w.iter()
        .filter(|w| w.is_finite() && **w > 0.0)
        .map(|w| {
            let share = ((1.0 / w) / speed * tasks as f64).ceil();
            share * w
        })
        .fold(0.0, f64::max)
}

/// The priors of a worker's estimates, and how fast they follow new samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimateConfig {
    /// Failures per second assumed of a worker not yet seen failing.
    pub prior_rate: f64,
    /// How many seconds of work that prior is worth: the larger, the more failures it takes to
    /// move the estimate.
    pub prior_exposure: f64,
    /// Recovery time assumed before one is seen, in seconds.
    pub prior_recovery: f64,
    /// The EWMA's gain on a new recovery time or task time.
    pub gain: f64,
}

impl Default for EstimateConfig {
    fn default() -> Self {
        // One failure an hour, worth ten minutes of work: a worker that fails twice in its first
        // few minutes is at once distrusted, one that fails once in an hour is not.
        Self { prior_rate: 1.0 / 3600.0, prior_exposure: 600.0, prior_recovery: 30.0, gain: 0.25 }
    }
}

/// What a coordinator has learned of one worker: its failure rate λ, its recovery time μ.
#[derive(Clone, Debug)]
pub struct WorkerEstimate {
    config: EstimateConfig,
    failures: u64,
    /// Seconds the worker was seen working (completed attempts, and attempts up to their
    /// presumed failure).
    exposure: f64,
    recovery: Ewma,
}

impl WorkerEstimate {
    /// A worker not seen yet: the priors.
    pub fn new(config: EstimateConfig) -> Self {
        Self { config, failures: 0, exposure: 0.0, recovery: Ewma::new(config.gain) }
    }

    /// An attempt ended: it worked `secs` and either finished or was presumed failed.
    pub fn on_attempt(&mut self, secs: f64, failed: bool) {
        self.exposure += secs.max(0.0);
        self.failures += u64::from(failed);
    }

    /// An attempt presumed failed reported after all: that failure is taken back.
    pub fn on_false_alarm(&mut self) {
        self.failures = self.failures.saturating_sub(1);
    }

    /// The EWMA gain its averages use.
    pub fn gain(&self) -> f64 {
        self.config.gain
    }

    /// The worker came back `secs` after it was presumed failed.
    pub fn on_recovery(&mut self, secs: f64) {
        self.recovery.push(secs.max(0.0));
    }

    /// λ: failures per second, (failures + prior) / (exposure + prior exposure).
    pub fn rate(&self) -> f64 {
        let c = self.config;
        (self.failures as f64 + c.prior_rate * c.prior_exposure) / (self.exposure + c.prior_exposure).max(1e-9)
    }

    /// μ: mean seconds from a presumed failure to the worker's return.
    pub fn recovery(&self) -> f64 {
        self.recovery.value().unwrap_or(self.config.prior_recovery)
    }

    /// Failures seen.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// The expected time of a task of `tau` seconds on this worker (Eq. 3.4 or its alternative).
    pub fn task_time(&self, tau: f64, model: FailureModel) -> f64 {
        expected_task_time(tau, self.rate(), self.recovery(), model)
    }
}

/// Seconds in `n`.
pub fn secs(n: Nanos) -> f64 {
    n.0 as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_theses_worked_examples() {
        // Notes 003 §3.2: τ = 10 s, λ = 0.02/s, μ = 5 s.
        assert!((expected_failures(10.0, 0.02) - 0.25).abs() < 1e-12);
        assert!((expected_task_time(10.0, 0.02, 5.0, FailureModel::Thesis) - 12.5).abs() < 1e-12);
        // Eqs. 3.7–3.8: w = 10, 20, 40 s and T = 10: ρ = 6, 3, 2, so max(60, 60, 80) = 80 s.
        assert!((exec_time(&[10.0, 20.0, 40.0], 10) - 80.0).abs() < 1e-9);
    }

    #[test]
    fn the_exact_exponential_ratios_of_the_notes_table() {
        // w/τ with μ = 0 at τλ = 0.1, 0.5, 0.9: 1.052, 1.297, 1.622 (exact) against 1.056, 1.5,
        // 5.5 (Eq. 3.4).
        for (p, exact, thesis) in [(0.1, 1.052, 1.056), (0.5, 1.297, 1.5), (0.9, 1.622, 5.5)] {
            let e = expected_task_time(1.0, p, 0.0, FailureModel::Exponential);
            let t = expected_task_time(1.0, p, 0.0, FailureModel::Thesis);
            assert!((e - exact).abs() < 1e-3, "{p}: {e}");
            assert!((t - thesis).abs() < 1e-3, "{p}: {t}");
        }
    }

    #[test]
    fn edges_say_never_or_at_once() {
        assert_eq!(expected_task_time(10.0, 0.1, 1.0, FailureModel::Thesis), f64::INFINITY);
        assert_eq!(expected_task_time(10.0, 0.0, 99.0, FailureModel::Thesis), 10.0);
        assert_eq!(exec_time(&[], 3), f64::INFINITY);
        assert_eq!(exec_time(&[f64::INFINITY, f64::INFINITY], 3), f64::INFINITY);
        assert_eq!(exec_time(&[5.0], 0), 0.0);
        // An infinitely slow worker takes no share; the others do the work.
        assert!((exec_time(&[10.0, f64::INFINITY], 4) - 40.0).abs() < 1e-9);
    }

    #[test]
    fn estimates_start_at_the_priors_and_follow_what_is_seen() {
        let c = EstimateConfig::default();
        let mut w = WorkerEstimate::new(c);
        assert!((w.rate() - c.prior_rate).abs() < 1e-15);
        assert_eq!(w.recovery(), c.prior_recovery);
        // Two failures in two minutes of work: (2 + 1/6) / 720 s.
        w.on_attempt(60.0, true);
        w.on_attempt(60.0, true);
        assert!((w.rate() - (2.0 + 600.0 / 3600.0) / 720.0).abs() < 1e-12);
        w.on_recovery(10.0);
        assert_eq!(w.recovery(), 10.0);
        assert!(w.task_time(10.0, FailureModel::Thesis) > 10.0);
    }

    proptest! {
        /// Failures only ever cost time: w ≥ τ, growing with λ and μ; and Eq. 3.4 is never below
        /// the exact exponential expectation where both are finite.
        #[test]
        fn failures_cost_time(tau in 0.01f64..100.0, lambda in 0.0f64..0.5, mu in 0.0f64..100.0, more in 0.0f64..0.5) {
            let thesis = expected_task_time(tau, lambda, mu, FailureModel::Thesis);
            let exact = expected_task_time(tau, lambda, mu, FailureModel::Exponential);
            prop_assert!(thesis >= tau && exact >= tau - 1e-9);
            prop_assert!(expected_task_time(tau, lambda + more, mu, FailureModel::Thesis) >= thesis);
            prop_assert!(expected_task_time(tau, lambda, mu + more, FailureModel::Exponential) >= exact);
            if thesis.is_finite() {
                prop_assert!(thesis >= exact - 1e-9 * exact.max(1.0), "{thesis} < {exact}");
            }
        }

        /// Eq. 3.8 is at least the ideal split of the work (T over the summed speeds) and at
        /// most one task more than that on the slowest worker.
        #[test]
        fn exec_time_is_bounded(w in proptest::collection::vec(0.1f64..100.0, 1..12), tasks in 1u64..500) {
            let e = exec_time(&w, tasks);
            let speed: f64 = w.iter().map(|w| 1.0 / w).sum();
            let ideal = tasks as f64 / speed;
            prop_assert!(e >= ideal - 1e-9 * ideal);
            prop_assert!(e <= ideal + w.iter().copied().fold(0.0, f64::max) + 1e-9 * ideal);
            // More tasks never take less time.
            prop_assert!(exec_time(&w, tasks + 1) >= e - 1e-9);
        }
    }
}
