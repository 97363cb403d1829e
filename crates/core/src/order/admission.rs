//! Admission control for rate-guaranteed streams: the future work of Yates 2006 §4.4 ("utilisation
//! monitoring could let a server refuse new streams"; notes 000 §3.4), in the spirit of
//! SCHED_DEADLINE's admission test.
//!
//! A new stream asks for a rate. It is placed on the worker with the most room — the lowest
//! promised rate over capacity — among those **keeping their promises**, and refused with a
//! [`Refusal`] that says why when none can take it. Two tests, both options:
//! - **Room**: with a capacity set, a worker may promise at most `headroom × capacity`. Capacity
//!   is bytes per second per worker, measured by the driver (a bulk run) or given by the user.
//! - **Keeping up**: each worker reports the worst lateness its pacer saw over the last interval
//!   ([`crate::order::Pacer::take_max_late`]). A worker later than `max_late` is already breaking
//!   promises, and takes nothing new until a report says it has caught up. This test needs no
//!   capacity figure, so it works on a machine nobody measured.

use std::fmt;

use crate::time::Nanos;
use crate::worker::WorkerId;

/// Admission settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionConfig {
    /// Bytes per second one worker can send, if known.
    pub capacity: Option<f64>,
    /// The fraction of capacity that may be promised (0.9).
    pub headroom: f64,
    /// A worker later than this is behind (5 ms: 5% of a 100 ms window).
    pub max_late: Nanos,
    /// The fastest stream one may ask for, bytes per second (1 Gb/s). Without a capacity set
    /// nothing else bounds a request, and one stream asking for more than a thread can send
    /// would hold that thread in its send loop.
    pub max_stream: f64,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self { capacity: None, headroom: 0.9, max_late: Nanos::from_millis(5), max_stream: 125e6 }
    }
}

/// Why a stream was refused.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Refusal {
    /// No worker has room: the one with the most would go past its limit.
    NoRoom {
        /// The worker with the most room.
        worker: WorkerId,
        /// What it has promised, bytes per second.
        promised: f64,
        /// What it may promise, bytes per second.
        limit: f64,
        /// What the stream asked for, bytes per second.
        asked: f64,
    },
    /// Every worker is behind on the promises it has made.
    Behind {
        /// The least-late worker.
        worker: WorkerId,
        /// How late it was.
        late: Nanos,
        /// The allowed lateness.
        max_late: Nanos,
    },
    /// The rate asked for is above the per-stream limit.
    TooFast {
        /// What was asked, bytes per second.
        asked: f64,
        /// The limit, bytes per second.
        limit: f64,
    },
    /// The rate asked for is not a positive number.
    BadRate {
        /// What was asked.
        asked: f64,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mbit = |b: f64| b * 8.0 / 1e6;
        match *self {
            Self::NoRoom { worker, promised, limit, asked } => write!(
                f,
                "no room: the least-loaded worker ({worker}) has promised {:.1} of its {:.1} Mb/s, and {:.1} Mb/s more would break those promises",
                mbit(promised),
                mbit(limit),
                mbit(asked)
            ),
            Self::Behind { worker, late, max_late } => write!(
                f,
                "overloaded: every worker is behind on the streams it has (the least late, {worker}, by {:.1} ms; allowed {:.1} ms)",
                late.0 as f64 / 1e6,
                max_late.0 as f64 / 1e6
            ),
            Self::TooFast { asked, limit } => {
                write!(
                    f,
                    "too fast: {:.1} Mb/s asked, and one stream may have at most {:.1} Mb/s",
                    mbit(asked),
                    mbit(limit)
                )
            }
            Self::BadRate { asked } => write!(f, "bad rate: {asked} bytes per second is not a positive number"),
        }
    }
}

/// The admission controller over workers `0..n`.
pub struct Admission {
    cfg: AdmissionConfig,
    promised: Vec<f64>,
    late: Vec<Nanos>,
    refused: u64,
}

impl Admission {
    /// A controller for `workers` workers (at least one), all with nothing promised.
    pub fn new(workers: usize, cfg: AdmissionConfig) -> Self {
        let n = workers.max(1);
        Self { cfg, promised: vec![0.0; n], late: vec![Nanos::ZERO; n], refused: 0 }
    }

    /// The settings.
    pub fn config(&self) -> &AdmissionConfig {
        &self.cfg
    }

    /// Sets the per-worker capacity (a driver's measurement), or clears it.
    pub fn set_capacity(&mut self, capacity: Option<f64>) {
        self.cfg.capacity = capacity.filter(|c| c.is_finite() && *c > 0.0);
    }

    fn limit(&self) -> f64 {
        self.cfg.capacity.map_or(f64::INFINITY, |c| c * self.cfg.headroom.clamp(0.0, 1.0))
    }

    /// Places a stream of `rate` bytes per second, recording the promise, or says why not.
    pub fn admit(&mut self, rate: f64) -> Result<WorkerId, Refusal> {
        if !(rate.is_finite() && rate > 0.0) {
            self.refused += 1;
            return Err(Refusal::BadRate { asked: rate });
        }
        if rate > self.cfg.max_stream {
            self.refused += 1;
            return Err(Refusal::TooFast { asked: rate, limit: self.cfg.max_stream });
        }
        let limit = self.limit();
        let keeping = |i: usize| self.late[i] <= self.cfg.max_late;
        let most_room = (0..self.promised.len())
            .filter(|&i| keeping(i))
            .min_by(|&a, &b| self.promised[a].total_cmp(&self.promised[b]));
        let Some(w) = most_room else {
            self.refused += 1;
            let i = (0..self.late.len()).min_by_key(|&i| self.late[i]).expect("at least one worker");
            return Err(Refusal::Behind {
                worker: WorkerId(i as u32),
                late: self.late[i],
                max_late: self.cfg.max_late,
            });
        };
        if self.promised[w] + rate > limit {
            self.refused += 1;
            return Err(Refusal::NoRoom { worker: WorkerId(w as u32), promised: self.promised[w], limit, asked: rate });
        }
        self.promised[w] += rate;
        Ok(WorkerId(w as u32))
    }

    /// A stream of `rate` on `worker` ended (or moved away).
    pub fn release(&mut self, worker: WorkerId, rate: f64) {
        if let Some(p) = self.promised.get_mut(worker.0 as usize) {
            *p = (*p - rate).max(0.0);
        }
    }

    /// Records a promise made elsewhere: a stream of `rate` moved onto `worker`. Unlike
    /// [`Admission::admit`] it cannot refuse: the stream is already running.
    pub fn hold(&mut self, worker: WorkerId, rate: f64) {
        if let Some(p) = self.promised.get_mut(worker.0 as usize) {
            *p += rate.max(0.0);
        }
    }

    /// A worker's worst lateness over the last interval.
    pub fn report_late(&mut self, worker: WorkerId, late: Nanos) {
        if let Some(l) = self.late.get_mut(worker.0 as usize) {
            *l = late;
        }
    }

    /// What `worker` has promised, bytes per second.
    pub fn promised(&self, worker: WorkerId) -> f64 {
        self.promised.get(worker.0 as usize).copied().unwrap_or(0.0)
    }

    /// Streams refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_capacity(workers: usize, capacity: f64) -> Admission {
        Admission::new(workers, AdmissionConfig { capacity: Some(capacity), headroom: 1.0, ..Default::default() })
    }

    #[test]
    fn fills_the_emptiest_worker_then_refuses_with_the_numbers() {
        let mut a = with_capacity(2, 1_000.0);
        assert_eq!(a.admit(600.0), Ok(WorkerId(0)));
        assert_eq!(a.admit(300.0), Ok(WorkerId(1)));
        assert_eq!(a.admit(700.0), Ok(WorkerId(1)));
        let no = a.admit(500.0).unwrap_err();
        assert_eq!(no, Refusal::NoRoom { worker: WorkerId(0), promised: 600.0, limit: 1_000.0, asked: 500.0 });
        assert!(no.to_string().starts_with("no room"), "{no}");
        a.release(WorkerId(0), 600.0);
        assert_eq!(a.admit(500.0), Ok(WorkerId(0)));
        assert_eq!(a.refused(), 1);
    }

    #[test]
    fn a_late_worker_takes_nothing_until_it_catches_up() {
        let mut a = Admission::new(2, AdmissionConfig::default());
        a.report_late(WorkerId(0), Nanos::from_millis(20));
        assert_eq!(a.admit(1.0), Ok(WorkerId(1)));
        assert_eq!(a.admit(1.0), Ok(WorkerId(1)));
        a.report_late(WorkerId(1), Nanos::from_millis(9));
        let behind = a.admit(1.0).unwrap_err();
        assert_eq!(
            behind,
            Refusal::Behind { worker: WorkerId(1), late: Nanos::from_millis(9), max_late: Nanos::from_millis(5) }
        );
        a.report_late(WorkerId(0), Nanos::from_millis(1));
        assert_eq!(a.admit(1.0), Ok(WorkerId(0)));
    }

    #[test]
    fn bad_rates_and_headroom() {
        let mut a = Admission::new(1, AdmissionConfig { capacity: Some(100.0), ..Default::default() });
        assert!(matches!(a.admit(0.0), Err(Refusal::BadRate { .. })));
        assert!(matches!(a.admit(f64::INFINITY), Err(Refusal::BadRate { .. })));
        assert_eq!(a.admit(90.0), Ok(WorkerId(0)));
        assert!(matches!(a.admit(1.0), Err(Refusal::NoRoom { .. })), "headroom 0.9 of 100");
        let mut b = Admission::new(1, AdmissionConfig::default());
        let fast = b.admit(1.25e12).unwrap_err();
        assert!(matches!(fast, Refusal::TooFast { .. }) && fast.to_string().starts_with("too fast"), "{fast}");
    }
}
