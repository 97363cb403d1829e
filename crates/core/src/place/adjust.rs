//! The load adjustment shared by the AHRW family (Guo Def. 5.1, Eq. 6.1, Eq. 6.5):
//! `h(c, p) = r_p · g(c, p)` with `r_p = Q_min / Q_p`, and `r_p = 1` when `Q_p = 0`.
//!
//! Erratum 1 (002_guo.md §8): ch. 5 takes `Q_min` as the true minimum, ch. 6 as the non-zero
//! minimum. They differ when a worker is idle. Under the true minimum every busy worker gets
//! `r = 0`, so the unit goes to the idle worker with the highest score ("idle first"); under the
//! non-zero minimum, idle workers and the least-loaded busy one all get `r = 1` and compete on
//! their raw scores. Both are offered.
//!
//! Ranking: `r_p · g` is ranked as `g / Q̃_p` with `Q̃_p = Q_min` for idle workers (the common
//! factor `Q_min` is dropped), compared by cross-multiplication. Flat AHRW does this in exact
//! integer arithmetic (ahrw.rs); the tree and cache-aware forms, whose weighted queues are
//! fractional, use [`pick`] in `f64`.

use super::score::argmax_where;

/// Which minimum `Q_min` is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QminReading {
    /// The minimum over all candidates, 0 if one is idle (Guo ch. 5, Def. 5.1).
    #[default]
    TrueMin,
    /// The minimum over candidates with a non-empty queue (Guo ch. 6, Eq. 6.1).
    NonZeroMin,
}

/// `Q_min` of `queues` under `reading`; `None` when no candidate is busy (then `r = 1` for all
/// and the choice is plain HRW).
pub(crate) fn q_min(queues: impl Iterator<Item = f64>, reading: QminReading) -> Option<f64> {
    let mut min_all = f64::INFINITY;
    let mut min_busy = f64::INFINITY;
    for q in queues {
        min_all = min_all.min(q);
        if q > 0.0 {
            min_busy = min_busy.min(q);
        }
    }
    if min_busy == f64::INFINITY {
        return None;
    }
    Some(match reading {
        QminReading::TrueMin => min_all,
        QminReading::NonZeroMin => min_busy,
    })
}

/// The adjusted score `r · g` of one candidate, up to the common factor `Q_min` (see the
/// module documentation); `q_min` as from [`q_min`].
#[inline(always)]
pub(crate) fn adjusted(g: f64, q: f64, q_min: Option<f64>) -> f64 {
    match q_min {
        None => g,
        Some(m) if m <= 0.0 => {
            if q <= 0.0 {
                g
            } else {
                0.0
            }
        }
        Some(m) => g * (m / if q <= 0.0 { m } else { q }),
    }
}

/// Index of the largest adjusted score among `(g, Q)` candidates, first on ties.
///
/// With `q_min` from [`q_min`]: `None` ranks by `g` alone; `Some(0)` (true minimum with an idle
/// candidate) ranks idle candidates by `g` and gives busy ones 0; otherwise candidates are ranked
/// by `g / Q̃` (`Q̃ = Q_min` for idle ones), compared by cross-multiplication so no division is
/// needed. For the few candidates of a tree level this costs a handful of multiplies.
#[inline]
pub(crate) fn pick(candidates: impl Iterator<Item = (f64, f64)>, q_min: Option<f64>) -> usize {
    let mut idx = 0;
    match q_min {
        None => {
            let mut best = f64::NEG_INFINITY;
            for (i, (g, _)) in candidates.enumerate() {
                if g > best {
                    best = g;
                    idx = i;
                }
            }
        }
        Some(m) if m <= 0.0 => {
            let mut best = f64::NEG_INFINITY;
            for (i, (g, q)) in candidates.enumerate() {
                let h = if q <= 0.0 { g } else { 0.0 };
                if h > best {
                    best = h;
                    idx = i;
                }
            }
        }
        Some(m) => {
            let (mut gb, mut qb) = (f64::NEG_INFINITY, 1.0);
            for (i, (g, q)) in candidates.enumerate() {
                let q = if q <= 0.0 { m } else { q };
                if g * qb > gb * q {
                    (gb, qb, idx) = (g, q, i);
                }
            }
        }
    }
    idx
}

/// The AHRW choice over integer scores `score(i)` and queues `q[i]`, in exact arithmetic: the
/// index of the largest `g / Q̃` (see the module documentation), the first on ties.
///
/// One pass scores every candidate and keeps the best `(g_b, Q̃_b)` (a second is needed only
/// when a worker is idle). A candidate is compared exactly (`g · Q̃_b > g_b · Q̃` in `u128`) only when a
/// floating-point estimate of the same comparison, loosened by far more than its rounding error,
/// says it might win; so the exact work, and the unpredictable branch, happen about once per new
/// best (O(log N) times for random scores) instead of once per candidate.
#[inline(always)]
pub(crate) fn select_exact<I>(items: I, reading: QminReading) -> usize
where
    I: Iterator<Item = (u64, u64)> + Clone,
{
    // Fast path: with no idle worker, Q̃ = Q and Q_min is a common factor, so one pass ranks
    // `g / Q` without knowing it. A zero met on the way sends the decision to the general path.
    let (best, idle) = best_ratio(items.clone());
    if !idle {
        return best;
    }
    if reading == QminReading::TrueMin {
        return argmax_where(items.map(|(g, q)| (g, q == 0))); // idle first
    }
    match items.clone().fold(u64::MAX, |m, (_, q)| if q == 0 { m } else { m.min(q) }) {
        u64::MAX => argmax_where(items.map(|(g, _)| (g, true))), // all idle: plain HRW
        min_busy => best_ratio(items.map(|(g, q)| (g, if q == 0 { min_busy } else { q }))).0,
    }
}

/// Index of the largest `g / q` among `(g, q)` pairs (exact, first on ties), and whether some `q`
/// was 0 (in which case the index means nothing). Scores `g` are below 2^53.
#[inline(always)]
fn best_ratio(mut items: impl Iterator<Item = (u64, u64)>) -> (usize, bool) {
    let Some((mut gb, mut qb)) = items.next() else { return (0, false) };
    let mut idle = qb == 0;
    let mut idx = 0;
    // The estimate `g · Q̃_b ≥ g_b · Q̃` is loosened by a factor far above its rounding error, so
    // it never drops a winner. A queue of 2^63 or more converts as negative, which only lets the
    // candidate through to the exact comparison.
    let slack = 1.0 - 1e-9;
    let (mut qbf, mut limit) = (qb as f64, gb as f64 * slack);
    for (i, (g, q)) in items.enumerate() {
        idle |= q == 0;
        if (g as i64 as f64) * qbf >= limit * (q as i64 as f64)
            && u128::from(g) * u128::from(qb) > u128::from(gb) * u128::from(q)
        {
            (gb, qb, idx) = (g, q, i + 1);
            (qbf, limit) = (qb as f64, gb as f64 * slack);
        }
    }
    (idx, idle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_differ_only_when_a_worker_is_idle() {
        let q = [0.0, 4.0, 2.0];
        assert_eq!(q_min(q.iter().copied(), QminReading::TrueMin), Some(0.0));
        assert_eq!(q_min(q.iter().copied(), QminReading::NonZeroMin), Some(2.0));
        let busy = [3.0, 4.0, 2.0];
        assert_eq!(q_min(busy.iter().copied(), QminReading::TrueMin), Some(2.0));
        assert_eq!(q_min([0.0, 0.0].into_iter(), QminReading::TrueMin), None);
    }

    #[test]
    fn true_min_sends_work_to_an_idle_worker() {
        // The busy worker has the higher score but an idle one exists.
        let c = [(0.9, 5.0), (0.1, 0.0), (0.2, 0.0)];
        assert_eq!(pick(c.iter().copied(), Some(0.0)), 2);
    }

    #[test]
    fn nonzero_min_lets_a_lightly_loaded_worker_compete() {
        // r = [1, 1, 0.5]: worker 0 (q = Q_min) competes with idle worker 1 on raw score.
        let c = [(0.9, 2.0), (0.5, 0.0), (0.95, 4.0)];
        assert_eq!(pick(c.iter().copied(), Some(2.0)), 0);
    }
}
