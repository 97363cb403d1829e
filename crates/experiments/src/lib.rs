//! Switchyard's **experiments**: the evidence, callable. Each reproduction of a published
//! result and each macro benchmark is a function from a typed setup to typed results: our
//! figures, the published ones beside them, and the peers' from the same run, so that a test,
//! a notebook or another program gets the rows as data, not as text to parse.
//!
//! # What lives here
//!
//! - [`claim`]: a published figure beside ours, as the reproductions of Guo's chapters report it.
//! - [`clp`]: yates-clp's measurements of the delivery server on real threads and sockets:
//!   fairness against threads, soft and hard throughput-based scheduling.
//! - [`figurehead`]: Figurehead's Base and OptWait (Middleware 2007) against today's hedging and
//!   load-balancing policies over back-ends of different speed and price, in the simulator.
//! - [`guo_irq`]: Guo ch. 3's interrupt affinity, iperf's receive throughput and L2 misses by
//!   message size on a Clovertown, in the simulator's irq model.
//! - [`guo_xen`]: Guo ch. 8's cache-aware VCPU migration in Xen's credit scheduler, SPECweb-like
//!   session capacity and the VMM's L2 misses, in the simulator's xen model.
//! - [`iwashima`]: Iwashima ch. 7, channels striped or pinned over m connections through an
//!   emulated bottleneck (real TCP in network namespaces; needs root).
//! - [`keys`]: the keys placement experiments place: the shipped sample, generators, captures
//!   and key files.
//! - [`ko`]: worker-centric scheduling of data-intensive bags of tasks against storage affinity
//!   (Ko et al., Middleware 2007) in the simulator's grid model.
//! - [`miscort`]: MiscoRT against EDF and other task schedulers (Dou 2011 ch. 3) on unreliable
//!   workers in the simulator's jobs model.
//! - [`miscort_real`]: the same workload on the real jobs coordinator over loopback, in
//!   compressed time, beside the simulator, with both rankings of the schedulers.
//! - [`placement`]: `switchyard place`'s measurement of a policy: balance, keys moved when a
//!   worker leaves or joins, and the cost of a decision.
//! - [`rgedf`]: G-EDF and RG-EDF against FIFO and EDF on the thesis's sensor node (Dou 2011
//!   ch. 2) in the simulator's flash model, charged for an 8051's scheduling and a modern core's.
//! - [`scenarios`]: the reproductions that are simulator scenarios (Guo ch. 4–7: DPI affinity,
//!   the Niagara hierarchy, cache-aware GOP placement, PS-HRW's shares), built in by name.
//! - [`cacheflow`]: Cacheflow's hit rates (Dou 2011 ch. 4) in the simulator and on real
//!   cooperating gateways.
//! - [`yates_cache`]: Yates's Tables 5.4–5.9, the seven lookup policies on the lattice and the
//!   lab trace, and §5.4's cost–quality trade-off.
//!
//! - [`bench`]: the macro benchmarks, each driver beside its peers in the same run (nginx, wrk,
//!   tokio, h2, quinn, moka, Celery), and the launchers of those peers.
//!
//! # What does not
//!
//! No argument parsing and no printing: the binary maps its arguments to a setup and prints
//! what comes back (tables, JSON, CSV, charts). No policy logic (the core's) and no driver
//! (sim, runtime, mux, gateway, jobs): experiments call them.

pub mod bench;
pub mod cacheflow;
pub mod catalogue;
pub mod claim;
pub mod clp;
pub mod figurehead;
pub mod guo_irq;
pub mod guo_xen;
pub mod iwashima;
pub mod keys;
pub mod ko;
pub mod machine;
pub mod miscort;
pub mod miscort_real;
pub mod placement;
pub mod report;
pub mod rgedf;
pub mod scenarios;
mod sweep;
pub mod yates_cache;

/// Why an experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// The simulator refused a run.
    #[error(transparent)]
    Sim(#[from] switchyard_sim::SimError),
    /// A scenario cannot be read or run.
    #[error(transparent)]
    Scenario(#[from] switchyard_sim::scenario::ScenarioError),
    /// A run on real components failed.
    #[error("{0}")]
    Real(String),
    /// An input (a trace, a choice of tables) cannot be used.
    #[error("{0}")]
    Input(String),
    /// A socket, a thread or a runtime failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A mux session failed.
    #[error(transparent)]
    Mux(#[from] switchyard_mux::MuxError),
    /// The link emulator failed.
    #[error(transparent)]
    Link(#[from] switchyard_linkem::LinkemError),
    /// What the experiment needs is not here (root, namespaces).
    #[error("{0}")]
    Unavailable(String),
    /// A step failed (a benchmark's, an input's); the message says which and why.
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}
