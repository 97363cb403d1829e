//! Simulation models, one file each.

pub mod cache;
pub mod cacheflow;
pub mod clp;
pub mod figurehead;
pub mod flash;
pub mod grid;
pub mod irq;
pub mod jobs;
pub mod mmc;
pub mod sensor;
pub mod server;
pub mod trace;
pub mod workload;
pub mod xen;
