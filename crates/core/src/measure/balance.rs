//! Balance of load over workers: max/mean, coefficient of variation and Jain's index.
//!
//! With weights, each worker's load is first divided by its weight share (`load_i · Σw / (n·w_i)`),
//! so a perfectly proportional placement scores as perfectly balanced.

/// Summary of how evenly load is spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Balance {
    /// Largest load over the mean (1 is perfect; the worst case is `n`).
    pub max_over_mean: f64,
    /// Population standard deviation over the mean (0 is perfect).
    pub cov: f64,
    /// Jain's fairness index `(Σx)² / (n·Σx²)` (Jain, Chiu & Hawe 1984): 1 is perfect, `1/n`
    /// means one worker has everything.
    pub jain: f64,
}

/// Balance of `loads`, optionally relative to `weights` (same length). Empty or all-zero loads
/// count as perfectly balanced.
pub fn balance(loads: &[f64], weights: Option<&[f64]>) -> Balance {
    let n = loads.len();
    let perfect = Balance { max_over_mean: 1.0, cov: 0.0, jain: 1.0 };
    if n == 0 {
        return perfect;
    }
    let x: Vec<f64> = match weights {
        Some(w) => {
            let mean_w = w.iter().sum::<f64>() / n as f64;
            loads.iter().zip(w).map(|(l, w)| l * mean_w / w).collect()
        }
        None => loads.to_vec(),
    };
    let sum: f64 = x.iter().sum();
    if sum <= 0.0 {
        return perfect;
    }
    let mean = sum / n as f64;
    let max = x.iter().copied().fold(f64::MIN, f64::max);
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
    let sq: f64 = x.iter().map(|v| v * v).sum();
    Balance { max_over_mean: max / mean, cov: var.sqrt() / mean, jain: sum * sum / (n as f64 * sq) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_load_is_perfect() {
        let b = balance(&[5.0; 4], None);
        assert_eq!(b, Balance { max_over_mean: 1.0, cov: 0.0, jain: 1.0 });
    }

    #[test]
    fn one_worker_with_everything() {
        let b = balance(&[8.0, 0.0, 0.0, 0.0], None);
        assert_eq!(b.max_over_mean, 4.0);
        assert_eq!(b.jain, 0.25);
        assert!((b.cov - 3f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn proportional_load_is_balanced_against_weights() {
        let b = balance(&[10.0, 20.0, 30.0], Some(&[1.0, 2.0, 3.0]));
        assert!((b.max_over_mean - 1.0).abs() < 1e-12 && b.cov < 1e-12);
    }
}
