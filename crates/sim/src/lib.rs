//! Switchyard's deterministic discrete-event simulator (the **sim** driver of DESIGN.md).
//!
//! # What lives here
//!
//! - [`EventQueue`]: virtual time in integer nanoseconds ([`Nanos`]) and a total order of events.
//! - [`Model`] and [`run`]: a model handles one event at a time and schedules more.
//! - [`Streams`]: seeded random streams, one per entity.
//! - [`models`]: the models:
//!   - the M/M/c queue ([`models::mmc`]), which checks the engine against closed forms;
//!   - processor scaling of a connection-level-parallel protocol stack on a shared-bus
//!     multiprocessor ([`models::clp`], Yates 2006 Fig. 2.4/2.5), checked against Mean Value
//!     Analysis;
//!   - the multicore network server ([`models::server`]): a producer places units on per-worker
//!     run-queues with any core policy, and workers pay a locality penalty when a flow moves;
//!   - the workloads: synthetic flows, DPI connection buffers and GOP streams
//!     ([`models::workload`]), and pcap or pcapng captures replayed ([`models::trace`], read
//!     through `switchyard-ingest`, the reader every driver shares);
//!   - sensor fields behind a cache ([`models::sensor`]) and Cacheflow's cooperating servers
//!     ([`models::cacheflow`]), whose field, access links and workload come from
//!     `switchyard-models`, which the gateway uses too.
//!
//! # Ordering guarantees
//!
//! Events run in order of time. Events at the same time run in the order they were scheduled
//! (first in, first out), because each carries a sequence number that breaks ties; nothing is
//! left to the heap's internal order. Time never goes backwards: scheduling before the current
//! time is refused with [`SimError::InThePast`]. A run is single-threaded. Parallelism goes across
//! the runs of a sweep, never inside one run, so the same model, seed and inputs give the same
//! events in the same order, byte for byte, on every machine.
//!
//! # What does not live here
//!
//! No policy logic: models call the core's policies (`switchyard_core::place` and the stages to
//! come) and carry out their decisions. No wall clock and no thread RNG: `clippy.toml` forbids
//! them, as in the core.
//!
//! # Example
//!
//! ```
//! use switchyard_sim::models::mmc::{Mmc, MmcParams};
//!
//! let params = MmcParams { lambda: 0.5, mu: 1.0, servers: 1, customers: 10_000, seed: 7 };
//! let out = Mmc::simulate(&params).unwrap();
//! assert_eq!(out.served, 10_000);
//! ```

mod engine;
pub mod models;
pub mod report;
pub mod scenario;
mod streams;
pub mod summary;

pub use engine::{EventQueue, Model, RunStats, SimError, run};
pub use streams::Streams;

/// `s` seconds as the engine's nanoseconds, rounded to the nearest.
pub(crate) fn secs(s: f64) -> Nanos {
    Nanos((s * 1e9).round() as u64)
}
pub use switchyard_core::Nanos;
