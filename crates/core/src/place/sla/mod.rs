//! Meeting a latency SLA over several back-ends of different speed and price, at least cost
//! (Figurehead, Middleware 2007; notes 004b §1): latency CDFs kept online ([`cdf`]), the
//! paper's Base and OptWait plans and its replica choice for availability ([`split`]), and
//! the request-time router with the modern hedging and load-balancing peers ([`route`]), and
//! the rule for writes over the same back-ends, whose laggards reads avoid ([`mod@write`]).
//! The gateway's multi-origin mode and the simulator drive these; nothing here does I/O.

pub mod cdf;
pub mod route;
pub mod split;
pub mod write;

#[cfg(test)]
mod tests;

pub use cdf::{LatencyTracker, PercentileCdf};
pub use route::{Attempt, Ended, Plan, RouteKind, SlaRouter};
pub use split::{Backend, Chain, Infeasible, Sla, Split, base, evaluate, optwait, replicas_for_availability};
