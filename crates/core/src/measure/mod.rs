//! The **measure** stage: numbers that say how well work was placed.
//!
//! Pure functions over counts the driver collected; no state, no I/O.

mod allocation;
mod balance;
mod departure;
mod disruption;
mod ewma;
mod failure;
mod fairness;
mod flows;
mod latency;
mod quality;

pub use allocation::{Allocation, allocation};
pub use balance::{Balance, balance};
pub use departure::{DepartureLine, Deviation};
pub use disruption::moved_fraction;
pub use ewma::Ewma;
pub use failure::{
    EstimateConfig, FailureModel, WorkerEstimate, exec_time, expected_failures, expected_task_time, secs,
};
pub use fairness::{Spread, median_of_rounds, quantile_sorted, quantisation_floor, rate_error, spread};
pub use flows::FlowOrder;
pub use latency::Latency;
pub use quality::{Moments, Quality, logistic};
