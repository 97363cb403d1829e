//! Switchyard's **models**: the parts of the world that the simulator drives in virtual time and
//! a real driver also needs, so that neither depends on the other.
//!
//! # What lives here
//!
//! - [`field`]: a sensor field (Yates ch. 5): locations, base stations, neighbourhoods, and
//!   how the true values change; the simulator reads it at virtual times, the gateway's field
//!   emulator at real ones.
//! - [`links`]: the base stations' access links, which both queue reads on.
//! - [`cacheflow`]: Cacheflow's workload (Dou ch. 4): sets of objects and which a client asks
//!   for next, for the simulator's run and the cooperating gateways' load.
//!
//! # What does not
//!
//! No event engine, no clock, no sockets: time is passed in, randomness is a seeded generator
//! passed in. Policies live in `switchyard-core`; the simulator's models that only it runs
//! (the multicore server, Cacheflow's servers in virtual time) live in `switchyard-sim`.

pub mod cacheflow;
pub mod field;
pub mod links;

pub use field::{ChangeModel, Field, FieldSpec, Stations, Trace, YATES_SIGMA};
pub use links::AccessLinks;
