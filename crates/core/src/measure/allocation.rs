//! How far what each channel got is from its weighted share (Iwashima §7.1.6).

/// The allocation error of `got` (what each channel carried: bytes, or bytes per second)
/// against the weighted ideal `opt_i = T · w_i / W`, `T` the total carried.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Allocation {
    /// `sqrt(mean((got_i − opt_i)²))`, in `got`'s unit (Iwashima Eq 7.1).
    pub rms: f64,
    /// `sqrt(mean(((got_i − opt_i)/opt_i)²))`, a fraction (Iwashima Eq 7.2).
    pub rms_perc: f64,
    /// The largest `|got_i/T − w_i/W|`: how far any channel's share is from its weight's, a
    /// fraction (0.01 is one percentage point).
    pub max_gap: f64,
}

/// The allocation error of `got` against `weights` (the same length; positive weights).
pub fn allocation(got: &[f64], weights: &[f64]) -> Allocation {
    let total: f64 = got.iter().sum();
    let w: f64 = weights.iter().sum();
    if got.is_empty() || total <= 0.0 || w <= 0.0 {
        return Allocation::default();
    }
    let n = got.len() as f64;
    let (mut sq, mut sq_perc, mut max_gap) = (0.0, 0.0, 0.0f64);
    for (g, wi) in got.iter().zip(weights) {
        let opt = total * wi / w;
        sq += (g - opt) * (g - opt);
        sq_perc += ((g - opt) / opt) * ((g - opt) / opt);
        max_gap = max_gap.max((g / total - wi / w).abs());
    }
    Allocation { rms: (sq / n).sqrt(), rms_perc: (sq_perc / n).sqrt(), max_gap }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_shares_have_no_error_and_equal_shares_have_the_theses_249_percent() {
        let w: Vec<f64> = (0..15).map(|i| libm::pow(0.8, f64::from(i))).collect();
        let exact: Vec<f64> = w.iter().map(|x| x * 1000.0).collect();
        let a = allocation(&exact, &w);
        assert!(a.rms < 1e-9 && a.rms_perc < 1e-12 && a.max_gap < 1e-12);
        // Every channel the same: the notes' 249% for pinning with m ≥ n = 15 (§3.6).
        let equal = allocation(&[1.0; 15], &w);
        assert!((equal.rms_perc * 100.0 - 248.7).abs() < 0.1, "{}", equal.rms_perc);
    }

    #[test]
    fn one_channel_off_by_a_known_amount() {
        // Weights 1:1, got 300 and 100: ideal 200 each.
        let a = allocation(&[300.0, 100.0], &[1.0, 1.0]);
        assert_eq!(a.rms, 100.0);
        assert_eq!(a.rms_perc, 0.5);
        assert_eq!(a.max_gap, 0.25);
    }
}
