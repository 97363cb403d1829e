//! CARP multipliers: scale factors `x_i` that make `argmax_i x_i·h_i`, with the `h_i` independent
//! and uniform on (0, 1), pick worker `i` with a given probability `p_i`.
//!
//! Guo Theorem 7.1, after Ross's hash routing for heterogeneous caches (the CARP draft). With the
//! targets sorted so that `p_1 ≤ … ≤ p_N`:
//!
//! ```text
//! x_1 = (N·p_1)^(1/N)
//! x_n = [ (N−n+1)(p_n − p_(n−1)) / Π_(i<n) x_i  +  x_(n−1)^(N−n+1) ]^(1/(N−n+1)),   n = 2..N
//! ```
//!
//! Zero targets are left out of the recursion (their `x` is 0, so they never win); the printed
//! proof's typos (002_guo.md §3.9) do not affect the recursion. The multipliers are global: change
//! one target and every `x` changes, moving keys between workers whose targets did not change.
//! That is why `weighted-hrw` uses the logarithmic method and this is a compatibility option.
//! Powers use `libm` so results are the same on every platform.

/// The multipliers for targets `p` (any non-negative numbers with a positive sum; normalised
/// here), in the same order as `p`. Returns all zeros if no target is positive.
pub fn multipliers(p: &[f64]) -> Vec<f64> {
    let total: f64 = p.iter().filter(|v| **v > 0.0).sum();
    let mut x = vec![0.0; p.len()];
    if !(total > 0.0 && total.is_finite()) {
        return x;
    }
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| p[i] > 0.0).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let n = order.len();
    let mut prod = 1.0; // Π of the x already computed
    let mut prev_p = 0.0;
    let mut prev_x = 0.0;
    for (k, &i) in order.iter().enumerate() {
        let pi = p[i] / total;
        let m = (n - k) as f64; // N − n + 1 with n = k + 1
        let xi = if k == 0 {
            libm::pow(m * pi, 1.0 / m)
        } else {
            libm::pow(m * (pi - prev_p) / prod + libm::pow(prev_x, m), 1.0 / m)
        };
        x[i] = xi;
        prod *= xi;
        prev_p = pi;
        prev_x = xi;
    }
    x
}

#[cfg(test)]
mod tests {
    use super::multipliers;

    #[test]
    fn matches_the_values_checked_in_the_notes() {
        // 002_guo.md §3.9: p = [0.1, 0.2, 0.3, 0.4] → x = [0.7953, 0.9584, 1.0867, 1.2074].
        let x = multipliers(&[0.1, 0.2, 0.3, 0.4]);
        for (got, want) in x.iter().zip([0.7953, 0.9584, 1.0867, 1.2074]) {
            assert!((got - want).abs() < 5e-4, "{x:?}");
        }
        assert!((x.iter().product::<f64>() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn equal_targets_give_equal_multipliers() {
        let x = multipliers(&[2.0; 5]);
        assert!(x.iter().all(|v| (v - 1.0).abs() < 1e-12), "{x:?}");
    }

    #[test]
    fn zero_targets_never_win() {
        let x = multipliers(&[0.0, 1.0, 3.0, 0.0]);
        assert_eq!((x[0], x[3]), (0.0, 0.0));
        assert!(x[1] > 0.0 && x[2] > x[1]);
    }
}
