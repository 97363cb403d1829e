//! Which application a polling worker serves first: MiscoRT's least laxity (Dou 2011 §3.4.2,
//! Algorithm 1; notes 003 §3.3), and its baselines, earliest deadline first and first come
//! first served.
//!
//! Laxity is L_j = deadline_j − now − exec_time_j (Eq. 3.9), where exec_time_j is the
//! failure-aware estimate of what is left of the application (Eq. 3.8, computed by the
//! caller: see `place::tasks`). The deadline here is absolute (the thesis's is an interval from
//! the application's ready time; the driver adds them).
//!
//! # Errata and choices
//!
//! - The thesis says both "smallest laxity first" and that applications estimated to miss
//!   (negative laxity) "should not be scheduled ahead of applications which have positive
//!   laxities". They contradict each other for negative laxities. The default follows the
//!   second sentence, as the notes read it: the key is (L < 0, L, arrival), so non-negative
//!   laxities come first, smallest first, then the negative ones, also ascending.
//!   [`AppOrder::LeastLaxity`]`{ negative_last: false }` is the literal smallest-first.
//! - Ties (and equal deadlines under EDF) go to the earlier arrival, then the lower index.

use std::cmp::Ordering;

use crate::Nanos;

/// How applications are ordered for a polling worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppOrder {
    /// Least laxity first (MiscoRT).
    LeastLaxity {
        /// Applications already expected to miss go after every one that can still make it.
        negative_last: bool,
    },
    /// Earliest deadline first.
    Edf,
    /// First come, first served.
    Fifo,
}

impl Default for AppOrder {
    fn default() -> Self {
        Self::LeastLaxity { negative_last: true }
    }
}

impl AppOrder {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::LeastLaxity { negative_last: true } => "llf",
            Self::LeastLaxity { negative_last: false } => "llf-literal",
            Self::Edf => "edf",
            Self::Fifo => "fifo",
        }
    }
}

/// What the order reads of an application.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppKey {
    /// When it arrived.
    pub arrival: Nanos,
    /// When it is due.
    pub deadline: Nanos,
    /// Its laxity in seconds (Eq. 3.9); −∞ where no worker is expected to finish it.
    pub laxity: f64,
}

/// Laxity in seconds: `deadline − now − exec_time` (Dou Eq. 3.9), `exec_time` in seconds.
pub fn laxity(deadline: Nanos, now: Nanos, exec_time: f64) -> f64 {
    (deadline.0 as f64 - now.0 as f64) / 1e9 - exec_time
}

/// The indices of `apps` in the order a worker should be offered them.
pub fn rank(order: AppOrder, apps: &[AppKey]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..apps.len()).collect();
    let by_arrival = |a: &AppKey, b: &AppKey| a.arrival.cmp(&b.arrival);
    idx.sort_by(|&i, &j| {
        let (a, b) = (&apps[i], &apps[j]);
        let primary = match order {
            AppOrder::LeastLaxity { negative_last } => {
                let late = |k: &AppKey| negative_last && k.laxity < 0.0;
                late(a).cmp(&late(b)).then(a.laxity.total_cmp(&b.laxity))
            }
            AppOrder::Edf => a.deadline.cmp(&b.deadline),
            AppOrder::Fifo => Ordering::Equal,
        };
        primary.then(by_arrival(a, b)).then(i.cmp(&j))
    });
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(arrival: u64, deadline: u64, laxity: f64) -> AppKey {
        AppKey { arrival: Nanos(arrival), deadline: Nanos(deadline), laxity }
    }

    #[test]
    fn laxity_is_what_is_left_after_the_expected_work() {
        assert!((laxity(Nanos(100_000_000_000), Nanos(40_000_000_000), 25.0) - 35.0).abs() < 1e-9);
        assert!(laxity(Nanos(10), Nanos(10), 1.0) < 0.0);
    }

    #[test]
    fn each_order_ranks_as_its_rule_says() {
        let apps = [key(0, 300, 50.0), key(1, 200, -5.0), key(2, 100, 10.0), key(3, 400, -20.0)];
        assert_eq!(rank(AppOrder::LeastLaxity { negative_last: true }, &apps), [2, 0, 3, 1]);
        assert_eq!(rank(AppOrder::LeastLaxity { negative_last: false }, &apps), [3, 1, 2, 0]);
        assert_eq!(rank(AppOrder::Edf, &apps), [2, 1, 0, 3]);
        assert_eq!(rank(AppOrder::Fifo, &apps), [0, 1, 2, 3]);
    }

    #[test]
    fn ties_go_to_the_earlier_arrival() {
        let apps = [key(5, 100, 1.0), key(2, 100, 1.0), key(2, 100, 1.0)];
        for order in [AppOrder::default(), AppOrder::Edf, AppOrder::Fifo] {
            assert_eq!(rank(order, &apps), [1, 2, 0], "{order:?}");
        }
    }
}
