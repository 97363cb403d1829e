//! Switchyard's **jobs** driver (DESIGN.md): a coordinator and workers for MapReduce
//! applications with deadlines on workers that fail — Misco's pull-based design with
//! MiscoRT's failure-aware scheduling (Dou 2011), its state in an embedded database.
//!
//! # What lives here
//!
//! - [`server`] and [`coordinator`]: the coordinator over HTTP. Workers poll and get a task or
//!   nothing; submitters create applications and read status and output.
//! - [`store`]: the SQLite log and data the coordinator is rebuilt from after a restart.
//! - [`worker`]: the polling worker, with the simulator's failure injectors, and [`site`]: a
//!   site's store of splits, shared by the site's workers (worker-centric locality).
//! - [`programs`]: the built-in map and reduce programs and allow-listed commands; nothing
//!   received is evaluated.
//! - [`client`] and [`wire`]: the submitter's calls and the routes' bodies.
//!
//! # What does not
//!
//! No scheduling policy: which application and which task a poll gets (only one the worker
//! says it can run), when an attempt is presumed failed, whether a replica is worth it, when
//! a task that keeps failing gives its application up — all of that is the core's task board
//! (`switchyard_core::place::tasks`), which this crate drives and logs.

pub mod client;
pub mod coordinator;
#[doc(hidden)]
pub mod fuzzing;
pub mod programs;
pub mod server;
pub mod site;
pub mod store;
pub mod wire;
pub mod worker;

pub use coordinator::{Coordinator, JobsError, Submission};
pub use server::{Limits, Shared};
pub use store::{Store, Sync};
pub use worker::{Allowed, Failures, WorkerConfig, WorkerReport};
