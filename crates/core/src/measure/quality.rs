//! Yates's quality of an answer to a sensor query, Q_n (Yates 2006 §5.3, Eqs 5.2–5.4; notes
//! 000 §3.7).
//!
//! `Q_n = A·σ(z(S_d)) + (1 − A)·σ(z(D_v))`, where S_d is the answer's delay, D_v its deviation
//! from the true value when it left, z a z-score and σ the logistic function (the thesis's
//! "softmax normalisation"). Q_n lies in (0, 1); smaller is better; 0.5 is an answer at both
//! means. A weighs delay against deviation.
//!
//! Two choices the thesis leaves open, made here (and stated in every report):
//! - **Whose mean and deviation.** Pooled over every answer of every policy compared in one
//!   experiment. Per policy, every policy would average about 0.5 and nothing could be compared.
//! - **Which Q_n a policy gets.** The mean of its answers' Q_n, not Q_n at its mean delay and
//!   deviation.

/// Running mean and variance (Welford), for pooling answers.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Moments {
    /// Adds a sample.
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Adds another pool's samples.
    pub fn merge(&mut self, other: &Self) {
        if other.n == 0 {
            return;
        }
        let n = self.n + other.n;
        let d = other.mean - self.mean;
        self.mean += d * other.n as f64 / n as f64;
        self.m2 += other.m2 + d * d * self.n as f64 * other.n as f64 / n as f64;
        self.n = n;
    }

    /// Samples.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The mean (0 with no samples).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// The population standard deviation (0 with fewer than two samples).
    pub fn std_dev(&self) -> f64 {
        if self.n < 2 { 0.0 } else { (self.m2 / self.n as f64).sqrt() }
    }

    /// `x`'s z-score; 0 if every sample was the same.
    pub fn z(&self, x: f64) -> f64 {
        let s = self.std_dev();
        if s > 0.0 { (x - self.mean) / s } else { 0.0 }
    }
}

/// The logistic function, Yates's Table 5.1.
pub fn logistic(z: f64) -> f64 {
    1.0 / (1.0 + libm::exp(-z))
}

/// Q_n for answers pooled in `delay` and `deviation`, with delay weighted `a` (0 to 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quality {
    /// A: the weight of delay against deviation.
    pub a: f64,
    /// The pooled delays (seconds).
    pub delay: Moments,
    /// The pooled deviations (value units).
    pub deviation: Moments,
}

impl Quality {
    /// Eq 5.2 for one answer.
    pub fn of(&self, delay: f64, deviation: f64) -> f64 {
        self.a * logistic(self.delay.z(delay)) + (1.0 - self.a) * logistic(self.deviation.z(deviation))
    }

    /// The mean Q_n of a policy's answers, given as (delay, deviation) pairs.
    pub fn mean_of(&self, answers: impl IntoIterator<Item = (f64, f64)>) -> f64 {
        let mut m = Moments::default();
        for (d, v) in answers {
            m.push(self.of(d, v));
        }
        m.mean()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logistic_matches_yates_table_5_1() {
        let table = [(-6.0, 0.0025), (-3.0, 0.0474), (-1.0, 0.2689), (0.0, 0.5), (2.0, 0.8808), (5.0, 0.9933)];
        for (z, want) in table {
            assert!((logistic(z) - want).abs() < 5e-5, "σ({z}) = {} against {want}", logistic(z));
        }
    }

    #[test]
    fn moments_merge_as_if_pushed_together() {
        let xs = [1.0, 4.0, 4.5, 9.0, -2.0, 3.25];
        let mut all = Moments::default();
        xs.iter().for_each(|x| all.push(*x));
        let (mut a, mut b) = (Moments::default(), Moments::default());
        xs[..2].iter().for_each(|x| a.push(*x));
        xs[2..].iter().for_each(|x| b.push(*x));
        a.merge(&b);
        assert_eq!(a.count(), 6);
        assert!((a.mean() - all.mean()).abs() < 1e-12);
        assert!((a.std_dev() - all.std_dev()).abs() < 1e-12);
        assert!((all.std_dev() - 3.3616).abs() < 1e-4, "population σ: {}", all.std_dev());
    }

    #[test]
    fn quality_is_half_at_the_means_and_weighs_delay_by_a() {
        let mut delay = Moments::default();
        let mut deviation = Moments::default();
        for (d, v) in [(0.0, 10.0), (2.0, 30.0)] {
            delay.push(d);
            deviation.push(v);
        }
        let q = Quality { a: 0.9, delay, deviation };
        assert!((q.of(1.0, 20.0) - 0.5).abs() < 1e-12);
        // A slow but exact answer is bad when delay matters, good when deviation does.
        let slow_exact = q.of(2.0, 10.0);
        let q01 = Quality { a: 0.1, ..q };
        assert!(slow_exact > 0.5 && q01.of(2.0, 10.0) < 0.5);
        assert!((slow_exact - (0.9 * logistic(1.0) + 0.1 * logistic(-1.0))).abs() < 1e-12);
        assert!((q.mean_of([(0.0, 10.0), (2.0, 30.0)]) - 0.5).abs() < 1e-12);
    }
}
