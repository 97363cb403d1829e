//! Simulation models, one file each.

pub mod mmc;
