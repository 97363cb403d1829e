//! The **place** stage: which worker a unit goes to.
//!
//! # Shape of every placer
//!
//! A [`Placer`] is a plain state machine. Its methods fall into three groups:
//!
//! - **getters** on `&self`: [`Placer::policy`], [`Placer::members`];
//! - **decisions**: [`Placer::place`] reads the unit and a [`LoadView`] and returns a
//!   [`WorkerId`]. It never fails (a placer always has at least one worker) and never carries the
//!   decision out: the driver queues the unit and updates its load;
//! - **commands**: membership changes ([`Placer::add_worker`], [`Placer::remove_worker`],
//!   [`Placer::set_weight`]) and [`Placer::forget_flow`] when a flow ends. A refused command
//!   leaves the placer as it was.
//!
//! Membership is kept sorted by worker id, and every structure a policy derives from it (node
//! hashes, rings, tables) is rebuilt from that sorted list, so a placer's decisions depend only
//! on its current members (and, for stateful policies, on the units it has placed), never on the
//! order in which the changes arrived. The one exception is `jump`, whose buckets are numbered:
//! a removed worker's slot is refilled by the last one, so its slot order keeps that history.
//!
//! # Policies
//!
//! One file per policy; [`Policy`] names them and [`build`] makes them. See each file's header
//! for the source, the errata chosen and the cost per decision.

mod adjust;
mod affinity;
mod ahrw;
mod bounded;
pub mod carp;
mod hierarchical;
mod hrw;
mod in_flight;
mod jsq;
mod jump;
mod maglev;
pub mod migrate;
mod mod_n;
mod p2c;
mod ps_hrw;
pub mod rebalance;
mod ring;
mod round_robin;
pub mod score;
pub mod sla;
pub mod steer;
pub mod tasks;
mod weighted;

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

pub use adjust::QminReading;
pub use hierarchical::ParentLoad;
pub use ps_hrw::PsDispatch;
pub use score::HashFn;

use crate::flow::FlowId;
use crate::load::{LoadView, QueueMeasure};
use crate::topology::Topology;
use crate::unit::Unit;
use crate::worker::{Members, Weight, WorkerId};

/// A placement policy with its state: see the [module documentation](self) for the call shape.
pub trait Placer: Send + fmt::Debug {
    /// Which policy this is.
    fn policy(&self) -> Policy;

    /// The current workers, in id order.
    fn members(&self) -> &Members;

    /// Chooses the worker for `unit`, reading the present through `load`.
    #[must_use = "a placement is a decision the driver must carry out"]
    fn place(&mut self, unit: &Unit, load: &LoadView<'_>) -> WorkerId;

    /// Adds a worker. Fails if it is already a member, if its weight is not 1 on a policy that
    /// ignores weights, or if it is not a leaf of the policy's topology.
    fn add_worker(&mut self, id: WorkerId, weight: Weight) -> Result<(), PlaceError>;

    /// Removes a worker. Fails if it is not a member or is the last one.
    fn remove_worker(&mut self, id: WorkerId) -> Result<(), PlaceError>;

    /// Changes a worker's weight. Fails if it is not a member, or the policy ignores weights.
    fn set_weight(&mut self, id: WorkerId, weight: Weight) -> Result<(), PlaceError>;

    /// The flow has ended: drop any state kept for it (sticky assignments, shares).
    fn forget_flow(&mut self, flow: FlowId);

    /// The flow's home node as this policy sees it: the worker a cache-aware policy measures
    /// distance from (Guo §6.2), and where a driver that restores order or charges for distance
    /// should do so, so that the two agree. For a static map (mod-N, HRW and its weighted forms,
    /// ring, jump, Maglev) it is the worker the map gives; for the tree policies, the plain
    /// descent of their tree (H-HRW); for every other policy, the flow's plain-HRW worker.
    fn home(&mut self, unit: &Unit) -> WorkerId;
}

/// Why a placer could not be built or changed.
#[derive(Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum PlaceError {
    /// A placer needs at least one worker. Give `--workers N` with N ≥ 1.
    #[error("no workers: a placer needs at least one")]
    NoWorkers,
    /// Weights must be finite and greater than zero.
    #[error("worker {worker} has weight {weight}; weights must be finite and greater than zero")]
    BadWeight {
        /// The worker.
        worker: WorkerId,
        /// The weight given.
        weight: f64,
    },
    /// The same worker was named twice.
    #[error("worker {0} is already a member")]
    DuplicateWorker(WorkerId),
    /// The worker is not a member.
    #[error("worker {0} is not a member")]
    UnknownWorker(WorkerId),
    /// Removing the last worker would leave units nowhere to go.
    #[error("worker {0} is the last one and cannot be removed")]
    LastWorker(WorkerId),
    /// Topology-aware policies place only on the topology's leaves.
    #[error("worker {worker} is not a leaf of topology {topology} (leaves are w0..w{last})", last = leaves.saturating_sub(1))]
    NotInTopology {
        /// The worker.
        worker: WorkerId,
        /// The topology's spec.
        topology: String,
        /// How many leaves it has.
        leaves: u32,
    },
    /// The policy gives every worker the same share; use a weighted policy.
    #[error("policy {policy} ignores weights; weighted policies are: {}", Policy::weighted_names())]
    WeightsUnsupported {
        /// The policy.
        policy: Policy,
    },
    /// No policy has this name. (Where a list of policies is taken, the front end adds `all`;
    /// a single policy cannot be `all`, so the core's message does not offer it.)
    #[error("unknown policy `{name}`; valid names: {}", Policy::names())]
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// A configuration value is out of range.
    #[error("bad {field} `{value}`: expected {expected}")]
    BadConfig {
        /// Which setting.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
}

macro_rules! policies {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, weighted: $w:literal; )*) => {
        /// The placement policies, by the names the CLI and configuration files use.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Policy {
            $( $(#[$doc])* $variant, )*
        }

        impl Policy {
            /// Every policy, in the order reports list them.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// The policy's name.
            pub fn name(self) -> &'static str {
                match self { $(Self::$variant => $name,)* }
            }

            /// Whether the policy honours worker weights.
            pub fn supports_weights(self) -> bool {
                match self { $(Self::$variant => $w,)* }
            }
        }
    };
}

policies! {
    /// Each unit to the next worker in turn (Guo ch. 6 baseline "RR").
    RoundRobin = "round-robin", weighted: false;
    /// Each unit to the worker with the shortest queue.
    Jsq = "jsq", weighted: false;
    /// `digest mod N`: what RSS-style static hashing does; remaps almost everything on change.
    ModN = "mod-n", weighted: false;
    /// A flow's first unit to the shortest queue, then the flow stays there (Guo ch. 4).
    Affinity = "affinity", weighted: false;
    /// Highest Random Weight with the fast 64-bit score (Guo §5.1.1, modern mixer).
    Hrw = "hrw", weighted: false;
    /// Highest Random Weight with the classic 31-bit LCG-XOR weight function (Guo §5.1.1).
    HrwClassic = "hrw-classic", weighted: false;
    /// Weighted HRW by the logarithmic method, score −w/ln(h).
    WeightedHrw = "weighted-hrw", weighted: true;
    /// Weighted HRW by CARP multipliers (Guo Theorem 7.1), for comparison.
    WeightedHrwCarp = "weighted-hrw-carp", weighted: true;
    /// Adjusted HRW: scores scaled by Q_min/Q_p (Guo Def. 5.1), true-minimum reading (ch. 5).
    Ahrw = "ahrw", weighted: false;
    /// Adjusted HRW with the non-zero-minimum reading of Q_min (Guo Eq. 6.1, ch. 6).
    AhrwNonzero = "ahrw-nonzero", weighted: false;
    /// Rendezvous applied level by level down the topology tree, no load adjustment (CRUSH-like).
    HHrw = "h-hrw", weighted: false;
    /// AHRW applied level by level down the topology tree (Guo §5.3, parent load per Eq. 6.7).
    HAhrw = "h-ahrw", weighted: false;
    /// Cache-aware AHRW: queues weighted by cost from the flow's home node (Guo §6.3).
    CaAhrw = "ca-ahrw", weighted: false;
    /// Hierarchical cache-aware AHRW (Guo §6.4).
    HCahrw = "h-cahrw", weighted: false;
    /// Proportional-share HRW: whole cores plus a residual share by CARP multipliers (Guo ch. 7).
    PsHrw = "ps-hrw", weighted: false;
    /// Consistent hashing on a ring with virtual nodes (Karger et al. 1997).
    Ring = "ring", weighted: true;
    /// Jump consistent hash (Lamping & Veach 2014).
    Jump = "jump", weighted: false;
    /// Maglev hashing with a prime lookup table (Eisenbud et al., NSDI 2016).
    Maglev = "maglev", weighted: true;
    /// Consistent hashing with bounded loads (Mirrokni, Thorup & Zadimoghaddam, SODA 2018).
    Bounded = "bounded", weighted: true;
    /// Power of two choices between a key's two highest rendezvous workers.
    P2cHrw = "p2c-hrw", weighted: false;
    /// A flow with units in flight stays; otherwise the least-loaded worker (DPDK distributor).
    InFlight = "in-flight", weighted: false;
}

impl Policy {
    /// All names, comma-separated, for error messages.
    pub fn names() -> String {
        Self::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
    }
    /// The names of the policies that honour weights, comma-separated.
    pub fn weighted_names() -> String {
        Self::ALL.iter().filter(|p| p.supports_weights()).map(|p| p.name()).collect::<Vec<_>>().join(", ")
    }

    /// Whether the policy reads the topology tree (and so places only on its leaves).
    pub fn uses_topology(self) -> bool {
        matches!(self, Self::HHrw | Self::HAhrw | Self::CaAhrw | Self::HCahrw | Self::PsHrw)
    }

    /// Whether the policy's choice is a function of the flow and the set of workers alone,
    /// not of their load, the order units arrive in or earlier placements: separate instances
    /// over the same workers then agree without talking to each other, which is what a
    /// runtime needs to share work out with no dispatcher (each worker deciding which flows
    /// are its own). Tested on many flows under different loads.
    pub fn by_flow_alone(self) -> bool {
        matches!(self, Self::ModN | Self::Hrw | Self::HrwClassic | Self::Jump | Self::Maglev)
    }

    /// The names of the policies that choose [`Policy::by_flow_alone`], comma-separated.
    pub fn by_flow_alone_names() -> String {
        Self::ALL.iter().filter(|p| p.by_flow_alone()).map(|p| p.name()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = PlaceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|p| p.name() == s)
            .ok_or_else(|| PlaceError::UnknownPolicy { name: s.to_string() })
    }
}

/// The knobs of every policy, with the source's defaults. Fields a policy does not read are
/// ignored by it.
#[derive(Clone, Debug)]
pub struct PlaceConfig {
    /// Which queue length load-aware policies compare.
    pub measure: QueueMeasure,
    /// The rendezvous score of the AHRW family, the hierarchical and cache-aware forms (and so
    /// PS-HRW's ranking), and p2c-hrw. Weighted HRW and PS-HRW's CARP step always use the fast
    /// score, since they need 52 well-mixed bits.
    pub hash: HashFn,
    /// Reading of Q_min for the hierarchical and cache-aware forms (`ahrw` and `ahrw-nonzero`
    /// fix their own).
    pub qmin: QminReading,
    /// Whether CA-AHRW's Q_min is taken over the cost-weighted queues (default) or the raw ones
    /// (Guo §6.3 leaves it open; erratum 5).
    pub ca_min_weighted: bool,
    /// Load of an inner tree node for the hierarchical forms (Guo Eq. 6.7 as corrected, or the
    /// plain sum of ch. 6.4.1's "naive" H-AHRW).
    pub parent_load: ParentLoad,
    /// Bounded-load slack ε: capacity ⌈(1+ε)·mean⌉. Default 0.25 (brpc's default).
    pub epsilon: f64,
    /// Ring points per unit weight. Default 160 (ketama's 40 × 4).
    pub vnodes: u32,
    /// Maglev table size, a prime at least the number of workers. Default 65537 (Maglev §5.3).
    pub maglev_table: u32,
    /// PS-HRW recomputation threshold β: relative change in a request's size. Default 0.16
    /// (Guo §7.3, Fig. 7.1).
    pub beta: f64,
    /// How PS-HRW spreads a flow's units over its share.
    pub ps_dispatch: PsDispatch,
    /// The machine, for topology-aware policies; a flat tree over the workers when absent.
    pub topology: Option<Topology>,
}

impl Default for PlaceConfig {
    fn default() -> Self {
        Self {
            measure: QueueMeasure::Units,
            hash: HashFn::Fast,
            qmin: QminReading::TrueMin,
            ca_min_weighted: true,
            parent_load: ParentLoad::AnyIdleIsZero,
            epsilon: 0.25,
            vnodes: 160,
            maglev_table: 65_537,
            beta: 0.16,
            ps_dispatch: PsDispatch::Set,
            topology: None,
        }
    }
}

impl PlaceConfig {
    fn check(&self) -> Result<(), PlaceError> {
        let bad = |field, value: String, expected| Err(PlaceError::BadConfig { field, value, expected });
        if !(self.epsilon.is_finite() && self.epsilon >= 0.0) {
            return bad("epsilon", self.epsilon.to_string(), "a finite number ≥ 0");
        }
        if !(1..=100_000).contains(&self.vnodes) {
            return bad("vnodes", self.vnodes.to_string(), "1 to 100000 points per unit weight");
        }
        if !maglev::is_prime(self.maglev_table) {
            return bad("maglev table size", self.maglev_table.to_string(), "a prime number (e.g. 65537)");
        }
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return bad("beta", self.beta.to_string(), "a finite fraction ≥ 0 (0.16 is 16%)");
        }
        Ok(())
    }
}

/// Builds `policy` over `workers`, each with weight 1.
pub fn build(policy: Policy, config: &PlaceConfig, workers: &[WorkerId]) -> Result<Box<dyn Placer>, PlaceError> {
    build_weighted(policy, config, &workers.iter().map(|&w| (w, Weight::ONE)).collect::<Vec<_>>())
}

/// Builds `policy` over weighted workers.
pub fn build_weighted(
    policy: Policy,
    config: &PlaceConfig,
    workers: &[(WorkerId, Weight)],
) -> Result<Box<dyn Placer>, PlaceError> {
    config.check()?;
    let members = Members::weighted(workers.iter().copied())?;
    let flat_leaves = members.as_slice().last().map_or(Some(1), |m| m.id.0.checked_add(1));
    let topology = || match &config.topology {
        Some(t) => Ok(t.clone()),
        None => flat_leaves.and_then(|n| Topology::flat(n).ok()).ok_or_else(|| PlaceError::BadConfig {
            field: "topology",
            value: "none".to_string(),
            expected: "a topology, or worker ids below 65536 for the flat tree used without one",
        }),
    };
    let hash = config.hash;
    let m = config.measure;
    Ok(match policy {
        Policy::RoundRobin => Dispatch::boxed(policy, members, round_robin::RoundRobin::default())?,
        Policy::Jsq => Dispatch::boxed(policy, members, jsq::Jsq { measure: m })?,
        Policy::ModN => Dispatch::boxed(policy, members, mod_n::ModN)?,
        Policy::Affinity => Dispatch::boxed(policy, members, affinity::Affinity::new(m))?,
        Policy::Hrw => Dispatch::boxed(policy, members, hrw::Hrw::new(HashFn::Fast))?,
        Policy::HrwClassic => Dispatch::boxed(policy, members, hrw::Hrw::new(HashFn::Classic))?,
        Policy::WeightedHrw => {
            Dispatch::boxed(policy, members, weighted::WeightedHrw::new(weighted::Method::Logarithmic))?
        }
        Policy::WeightedHrwCarp => {
            Dispatch::boxed(policy, members, weighted::WeightedHrw::new(weighted::Method::Carp))?
        }
        Policy::Ahrw => Dispatch::boxed(policy, members, ahrw::Ahrw::new(hash, QminReading::TrueMin, m))?,
        Policy::AhrwNonzero => Dispatch::boxed(policy, members, ahrw::Ahrw::new(hash, QminReading::NonZeroMin, m))?,
        Policy::HHrw => Dispatch::boxed(
            policy,
            members,
            hierarchical::Hierarchical::new(topology()?, hierarchical::Form::Plain, config),
        )?,
        Policy::HAhrw => Dispatch::boxed(
            policy,
            members,
            hierarchical::Hierarchical::new(topology()?, hierarchical::Form::Adjusted, config),
        )?,
        Policy::CaAhrw => Dispatch::boxed(policy, members, ahrw::CacheAware::new(topology()?, config))?,
        Policy::HCahrw => Dispatch::boxed(
            policy,
            members,
            hierarchical::Hierarchical::new(topology()?, hierarchical::Form::CacheAware, config),
        )?,
        Policy::PsHrw => Dispatch::boxed(policy, members, ps_hrw::PsHrw::new(topology()?, config))?,
        Policy::Ring => Dispatch::boxed(policy, members, ring::Ring::new(config.vnodes))?,
        Policy::Jump => Dispatch::boxed(policy, members, jump::Jump::default())?,
        Policy::Maglev => Dispatch::boxed(policy, members, maglev::Maglev::new(config.maglev_table))?,
        Policy::Bounded => Dispatch::boxed(policy, members, bounded::Bounded::new(config.vnodes, config.epsilon, m))?,
        Policy::P2cHrw => Dispatch::boxed(policy, members, p2c::P2c::new(hash, m))?,
        Policy::InFlight => Dispatch::boxed(policy, members, in_flight::InFlight::new(m))?,
    })
}

/// What a policy supplies; [`Dispatch`] does the membership bookkeeping around it.
trait Strategy: Send + fmt::Debug {
    /// Derives the policy's per-member state from the new member list. Must check everything
    /// before changing anything: an error leaves the strategy as it was.
    fn rebuild(&mut self, members: &Members) -> Result<(), PlaceError>;

    /// Chooses a member.
    fn place(&mut self, members: &Members, unit: &Unit, load: &LoadView<'_>) -> WorkerId;

    /// Drops per-flow state.
    fn forget_flow(&mut self, _flow: FlowId) {}

    /// The flow's home node, if the policy has its own notion of one (see [`Placer::home`]).
    fn home(&self, _members: &Members, _unit: &Unit) -> Option<WorkerId> {
        None
    }

    /// Whether placement ignores load and state, so that a flow's worker is its home.
    fn is_static(&self) -> bool {
        false
    }
}

#[derive(Debug)]
struct Dispatch<S> {
    policy: Policy,
    members: Members,
    strategy: S,
    /// Plain HRW over the members, for the home node of policies without their own.
    home: score::Rendezvous,
}

impl<S: Strategy + 'static> Dispatch<S> {
    fn boxed(policy: Policy, members: Members, mut strategy: S) -> Result<Box<dyn Placer>, PlaceError> {
        if !policy.supports_weights() && members.as_slice().iter().any(|m| m.weight != Weight::ONE) {
            return Err(PlaceError::WeightsUnsupported { policy });
        }
        strategy.rebuild(&members)?;
        let mut home = score::Rendezvous::new(HashFn::Fast);
        home.rebuild(members.as_slice().iter().map(|m| m.id.0));
        Ok(Box::new(Self { policy, members, strategy, home }))
    }

    fn change(&mut self, f: impl FnOnce(&mut Members) -> Result<(), PlaceError>) -> Result<(), PlaceError> {
        let mut next = self.members.clone();
        f(&mut next)?;
        self.strategy.rebuild(&next)?;
        self.home.rebuild(next.as_slice().iter().map(|m| m.id.0));
        self.members = next;
        Ok(())
    }
}

impl<S: Strategy + 'static> Placer for Dispatch<S> {
    fn policy(&self) -> Policy {
        self.policy
    }

    fn members(&self) -> &Members {
        &self.members
    }

    #[inline]
    fn place(&mut self, unit: &Unit, load: &LoadView<'_>) -> WorkerId {
        self.strategy.place(&self.members, unit, load)
    }

    fn home(&mut self, unit: &Unit) -> WorkerId {
        match self.strategy.home(&self.members, unit) {
            Some(w) => w,
            None if self.strategy.is_static() => self.strategy.place(&self.members, unit, &LoadView::IDLE),
            None => self.members.id(self.home.argmax(unit.flow.0)),
        }
    }

    fn add_worker(&mut self, id: WorkerId, weight: Weight) -> Result<(), PlaceError> {
        if !self.policy.supports_weights() && weight != Weight::ONE {
            return Err(PlaceError::WeightsUnsupported { policy: self.policy });
        }
        self.change(|m| m.add(id, weight))
    }

    fn remove_worker(&mut self, id: WorkerId) -> Result<(), PlaceError> {
        self.change(|m| m.remove(id))
    }

    fn set_weight(&mut self, id: WorkerId, weight: Weight) -> Result<(), PlaceError> {
        if !self.policy.supports_weights() {
            return Err(PlaceError::WeightsUnsupported { policy: self.policy });
        }
        self.change(|m| m.set_weight(id, weight))
    }

    fn forget_flow(&mut self, flow: FlowId) {
        self.strategy.forget_flow(flow);
    }
}

/// Index of the member with the shortest queue by `measure`; the first such in id order on ties.
fn shortest_queue(members: &Members, load: &LoadView<'_>, measure: QueueMeasure) -> usize {
    let q = load.queues(measure);
    let mut best = (u64::MAX, 0);
    for (i, m) in members.as_slice().iter().enumerate() {
        let len = q.get(m.id.0 as usize).copied().unwrap_or(0);
        if len < best.0 {
            best = (len, i);
        }
    }
    best.1
}
