//! Receive-side steering: a new connection goes to a worker pinned to the core that receives its
//! packets, so the application's `recv()` finds the socket and the data the kernel's receive
//! processing just touched in that core's caches.
//!
//! **Source.** Guo ch. 3 (notes 002 §2.2, §5.2) puts the NIC's interrupt and softirq on one core
//! and the receiving application on the same core or a cache-sharing sibling, by `smp_affinity`
//! and `sched_setaffinity`: +10% iperf throughput on average, up to +37% above 4 KB messages.
//! Linux does the same today per flow with RFS (receive flow steering, which moves a flow's
//! receive processing to the core its reader last ran on); this policy goes the other way
//! round, as a server with pinned workers can: it reads the core the kernel processed the
//! connection's packets on (`SO_INCOMING_CPU`, given here as a number) and moves the
//! *connection* to the worker on that core.
//!
//! **Decision.** [`Steer::place`] picks, among the candidate workers, the one with the fewest
//! connections (lowest index on ties: the same rule as
//! [`Rebalancer::least_loaded`](super::rebalance::Rebalancer::least_loaded)):
//! - [`Steering::IncomingCpu`]: the workers pinned to the receiving core;
//! - [`Steering::OtherCpu`]: the pinned workers on any *other* core — deliberately wrong, the
//!   peer a measurement needs to show what steering saves;
//! - [`Steering::None`]: every worker.
//!
//! When the candidate set is empty — the receiving core is unknown (the kernel has not processed
//! a packet yet, or the OS cannot say), no worker is pinned there, or every pinned worker is on
//! it — every worker is a candidate, and [`Steered::on_incoming`] says whether the choice
//! happens to sit on the receiving core anyway.
//!
//! Cost: O(workers) per connection, no state beyond the pinning.

use crate::worker::WorkerId;

/// Which worker a connection goes to, relative to the core its packets are received on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Steering {
    /// Ignore the receiving core: the least-loaded worker.
    #[default]
    None,
    /// The least-loaded worker pinned to the receiving core (Guo ch. 3's same-core placement;
    /// RFS's goal).
    IncomingCpu,
    /// The least-loaded worker pinned to another core: the anti-steered peer for measurements.
    OtherCpu,
}

impl Steering {
    /// Every choice, in the order printed.
    pub const ALL: [Self; 3] = [Self::None, Self::IncomingCpu, Self::OtherCpu];

    /// The name a user types.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::IncomingCpu => "incoming-cpu",
            Self::OtherCpu => "other-cpu",
        }
    }
}

impl std::fmt::Display for Steering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A steering name that is none of [`Steering::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown steering {0:?}: use none, incoming-cpu or other-cpu")]
pub struct SteeringError(pub String);

impl std::str::FromStr for Steering {
    type Err = SteeringError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| SteeringError(s.to_owned()))
    }
}

/// Where [`Steer::place`] put a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a placement is a decision the driver must carry out"]
pub struct Steered {
    /// The worker.
    pub worker: WorkerId,
    /// Whether that worker is pinned to the connection's receiving core (false when the core is
    /// unknown or the worker is not pinned).
    pub on_incoming: bool,
}

/// The steering policy with the workers' pinning: worker `i` runs on `cores[i]`, or anywhere
/// when `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Steer {
    mode: Steering,
    cores: Vec<Option<u32>>,
}

impl Steer {
    /// A policy over these workers (at least one).
    ///
    /// # Panics
    ///
    /// If `cores` is empty: a server has at least one worker.
    pub fn new(mode: Steering, cores: Vec<Option<u32>>) -> Self {
        assert!(!cores.is_empty(), "steering needs at least one worker");
        Self { mode, cores }
    }

    /// The mode.
    pub fn mode(&self) -> Steering {
        self.mode
    }

    /// The core each worker is pinned to.
    pub fn cores(&self) -> &[Option<u32>] {
        &self.cores
    }

    /// Chooses the worker for a connection whose packets are received on `incoming_cpu`, given
    /// each worker's open connections (`conns[i]` for worker `i`; a missing entry counts 0).
    pub fn place(&self, incoming_cpu: Option<u32>, conns: &[usize]) -> Steered {
        let load = |i: usize| conns.get(i).copied().unwrap_or(0);
        let on = |i: usize| incoming_cpu.is_some() && self.cores[i] == incoming_cpu;
        let wanted = |i: usize| match self.mode {
            Steering::None => true,
            Steering::IncomingCpu => on(i),
            Steering::OtherCpu => incoming_cpu.is_some() && self.cores[i].is_some() && !on(i),
        };
        let best =
            |keep: &dyn Fn(usize) -> bool| (0..self.cores.len()).filter(|&i| keep(i)).min_by_key(|&i| (load(i), i));
        let i = best(&wanted).or_else(|| best(&|_| true)).expect("at least one worker");
        Steered { worker: WorkerId(i as u32), on_incoming: on(i) }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn two_cores() -> Steer {
        Steer::new(Steering::IncomingCpu, vec![Some(0), Some(1)])
    }

    #[test]
    fn goes_to_the_worker_on_the_receiving_core() {
        let s = two_cores();
        assert_eq!(s.place(Some(1), &[0, 0]), Steered { worker: WorkerId(1), on_incoming: true });
        assert_eq!(s.place(Some(0), &[5, 0]), Steered { worker: WorkerId(0), on_incoming: true });
    }

    #[test]
    fn picks_the_least_loaded_of_several_workers_on_the_core() {
        let s = Steer::new(Steering::IncomingCpu, vec![Some(0), Some(1), Some(0), Some(1)]);
        assert_eq!(s.place(Some(1), &[0, 3, 0, 2]).worker, WorkerId(3));
        assert_eq!(s.place(Some(1), &[0, 2, 0, 2]).worker, WorkerId(1), "lowest index on ties");
    }

    #[test]
    fn falls_back_to_the_least_loaded_worker_when_the_core_is_unknown_or_unstaffed() {
        let s = two_cores();
        assert_eq!(s.place(None, &[1, 0]), Steered { worker: WorkerId(1), on_incoming: false });
        assert_eq!(s.place(Some(7), &[0, 1]), Steered { worker: WorkerId(0), on_incoming: false });
        let unpinned = Steer::new(Steering::IncomingCpu, vec![None, None]);
        assert_eq!(unpinned.place(Some(0), &[2, 1]), Steered { worker: WorkerId(1), on_incoming: false });
    }

    #[test]
    fn other_cpu_avoids_the_receiving_core() {
        let s = Steer::new(Steering::OtherCpu, vec![Some(0), Some(1)]);
        assert_eq!(s.place(Some(0), &[0, 9]), Steered { worker: WorkerId(1), on_incoming: false });
        // Only one core staffed: nowhere else to go, and the result says so.
        let one = Steer::new(Steering::OtherCpu, vec![Some(0)]);
        assert_eq!(one.place(Some(0), &[0]), Steered { worker: WorkerId(0), on_incoming: true });
    }

    #[test]
    fn none_is_least_loaded() {
        let s = Steer::new(Steering::None, vec![Some(0), Some(1)]);
        assert_eq!(s.place(Some(0), &[1, 0]), Steered { worker: WorkerId(1), on_incoming: false });
        assert_eq!(s.place(Some(0), &[0, 0]), Steered { worker: WorkerId(0), on_incoming: true });
    }

    #[test]
    fn names_round_trip_and_a_bad_name_lists_the_good_ones() {
        for m in Steering::ALL {
            assert_eq!(m.name().parse::<Steering>(), Ok(m));
        }
        let e = "rfs".parse::<Steering>().unwrap_err().to_string();
        assert!(e.contains("\"rfs\"") && e.contains("incoming-cpu"), "{e}");
    }

    proptest! {
        /// Steered whenever it can be, anti-steered whenever it can be, always a real worker,
        /// and never busier than another candidate.
        #[test]
        fn steers_whenever_a_worker_is_pinned_to_the_core(
            cores in prop::collection::vec(prop::option::of(0u32..4), 1..8),
            conns in prop::collection::vec(0usize..5, 0..8),
            cpu in prop::option::of(0u32..5),
        ) {
            let load = |i: usize| conns.get(i).copied().unwrap_or(0);
            let staffed = cpu.is_some() && cores.contains(&cpu);
            let elsewhere = cpu.is_some() && cores.iter().any(|c| c.is_some() && *c != cpu);
            for mode in Steering::ALL {
                let s = Steer::new(mode, cores.clone());
                let got = s.place(cpu, &conns);
                let w = got.worker.0 as usize;
                prop_assert!(w < cores.len());
                prop_assert_eq!(got.on_incoming, cpu.is_some() && cores[w] == cpu);
                let candidate = |i: usize| match mode {
                    Steering::IncomingCpu if staffed => cores[i] == cpu,
                    Steering::OtherCpu if elsewhere => cores[i].is_some() && cores[i] != cpu,
                    _ => true,
                };
                prop_assert!(candidate(w));
                for i in (0..cores.len()).filter(|&i| candidate(i)) {
                    prop_assert!((load(w), w) <= (load(i), i), "{mode}: {w} chosen over {i}");
                }
                if mode == Steering::IncomingCpu {
                    prop_assert_eq!(got.on_incoming, staffed);
                }
                if mode == Steering::OtherCpu && elsewhere {
                    prop_assert!(!got.on_incoming);
                }
            }
        }
    }
}
