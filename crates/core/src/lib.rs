//! Switchyard's sans-IO core: the model of work and resources, and the policies that decide where
//! work goes.
//!
//! # What lives here
//!
//! - The model: [`FlowKey`] and its platform-independent digest [`FlowId`], the [`Unit`] of work,
//!   worker identities and weights ([`WorkerId`], [`Weight`]), the machine's [`Topology`] tree and
//!   the core-to-core communication costs derived from it, and the [`LoadView`] through which a
//!   policy reads the present.
//! - The **place** stage ([`place`]): the [`Placer`] trait, one file per policy, and the factory
//!   ([`place::build`]) that turns a [`Policy`] name and a [`PlaceConfig`] into a placer.
//! - The **order** stage ([`order`]): hard throughput guarantees for streams — fine-grained
//!   pacing, Yates's packets-per-pause quota, and admission control — and the order of deadline
//!   applications (least laxity, EDF, FIFO).
//! - Pull-based jobs on unreliable workers ([`place::tasks`]): the task board that answers a
//!   worker's poll (MiscoRT's Algorithm 2, the thesis's baselines, Spark's and LATE's
//!   speculation), on MiscoRT's failure model ([`measure::expected_task_time`]).
//! - Soft throughput-based rebalancing of connections over workers
//!   ([`place::rebalance::Rebalancer`]), in the place stage beside the placers.
//! - The **measure** stage ([`measure`]): balance, disruption, order, latency, answer quality.
//! - The **carry** stage ([`carry`]): weighted channels over several connections (the frame
//!   format, weighted fair queueing, striping and pinning, a session's sender and receiver with
//!   credits and resending) and the reorder buffer.
//! - The **cache** stage ([`cache`]): a freshness-bounded cache with Yates's seven lookup
//!   policies, request coalescing, approximate answers from neighbours, and the sensor field's
//!   cost model; the quality of its answers (Q_n) is measured in [`measure::Quality`].
//!
//! # What does not
//!
//! No threads, sockets, files or wall clock: time is an argument ([`Nanos`]) and load is read
//! through a [`LoadView`] the driver fills. Drivers (the simulator, the runtime, the services and
//! the `switchyard` binary) turn the world into units and load views, call a placer, and carry out
//! its decision. They contain no policy logic, so a policy added here is at once available to all
//! of them. `clippy.toml` in this crate forbids the wall clock and hash-ordered collections.
//!
//! # Example
//!
//! ```
//! use switchyard_core::{place, FlowKey, LoadTracker, PlaceConfig, Policy, Unit, WorkerId};
//!
//! let workers: Vec<WorkerId> = (0..8).map(WorkerId).collect();
//! let mut placer = place::build(Policy::Ahrw, &PlaceConfig::default(), &workers)?;
//! let mut load = LoadTracker::new();
//! let flow = FlowKey::parse("tcp 10.0.0.1:40000 10.0.0.2:80");
//! let unit = Unit::new(&flow, 1500);
//! let worker = placer.place(&unit, &load.view());
//! load.on_enqueue(worker, &unit);
//! assert!(worker.0 < 8);
//! # Ok::<(), switchyard_core::PlaceError>(())
//! ```

pub mod cache;
pub mod carry;
pub mod flow;
mod flow_map;
pub mod load;
pub mod measure;
pub mod order;
pub mod place;
pub mod time;
pub mod topology;
pub mod unit;
pub mod worker;

pub use flow::{FlowId, FlowKey};
pub use flow_map::FlowMap;
pub use load::{LoadTracker, LoadView, OnFull, QueueMeasure};
pub use place::{PlaceConfig, PlaceError, Placer, Policy};
pub use time::Nanos;
pub use topology::{Topology, TopologyError};
pub use unit::Unit;
pub use worker::{Weight, WorkerId};
