//! Cacheflow's model of one LRU cache's hit rate under an 80/20 workload (Dou 2011 §4.3.4,
//! Eqs 4.2–4.4; notes 003 §3.7).
//!
//! Of N equal-sized files a fraction p is popular; each request is a set of S files of which a
//! fraction q is popular; the cache holds T files. The model follows the expected popular and
//! unpopular files in the cache from one request to the next: a request hits in proportion to
//! what the cache holds of each class (Eq 4.2), adds its misses (Eq 4.3), and once full evicts
//! the overflow in proportion to each class's residents that were not just hit (Eq 4.4).

/// The model's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HitModel {
    /// N: files.
    pub files: f64,
    /// p: the popular fraction of files.
    pub popular_files: f64,
    /// S: files a request asks for.
    pub set_size: f64,
    /// q: the popular fraction of a request.
    pub popular_share: f64,
    /// T: the cache's size in files.
    pub cache: f64,
}

impl HitModel {
    /// Cacheflow's defaults (Dou Table 4.2): 5,000 files, 80/20, sets of 100, 600 files cached.
    pub const CACHEFLOW: Self =
        Self { files: 5000.0, popular_files: 0.2, set_size: 100.0, popular_share: 0.8, cache: 600.0 };

    /// The hit rate once the cache has filled and settled: E_n / S after `requests` steps from
    /// an empty cache (the thesis iterates to steady state; a few thousand steps reach it).
    pub fn hit_rate(&self, requests: usize) -> f64 {
        let Self { files: n, popular_files: p, set_size: s, popular_share: q, cache: t } = *self;
        let (mut tp, mut tu) = (0.0_f64, 0.0_f64);
        let mut e = 0.0;
        for _ in 0..requests {
            let ep = q * s / (p * n) * tp;
            let eu = (1.0 - q) * s / ((1.0 - p) * n) * tu;
            e = ep + eu;
            let (np, nu) = (s * q - ep + tp, s * (1.0 - q) - eu + tu);
            if tp + tu < t - (s - e) {
                (tp, tu) = (np, nu);
            } else {
                let overflow = tp + tu + (s - e) - t;
                let eligible = tp + tu - e;
                if eligible > 0.0 {
                    (tp, tu) = (np - (tp - ep) / eligible * overflow, nu - (tu - eu) / eligible * overflow);
                } else {
                    (tp, tu) = (np, nu);
                }
            }
        }
        e / s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's values at Cacheflow's defaults, as notes 003 §3.7 computed them.
    #[test]
    fn matches_the_computed_table() {
        for (cache, want) in [(200.0, 0.128), (600.0, 0.354), (1200.0, 0.591), (1800.0, 0.723), (3000.0, 0.861)] {
            let got = HitModel { cache, ..HitModel::CACHEFLOW }.hit_rate(5000);
            assert!((got - want).abs() < 0.002, "T = {cache}: {got:.4} against {want}");
        }
    }
}
