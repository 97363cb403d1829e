//! The **cache** stage: can a query be answered without doing the work?
//!
//! - [`Cache`]: a freshness-bounded cache as a state machine, with the seven lookup policies
//!   of Yates (2006) ch. 5 ([`Lookup`]): the precise ones, request coalescing (piggybacked
//!   queries), and approximate answers from neighbouring locations. A reader may tighten the
//!   freshness bound per query (OPC UA's maxAge, TeenyLIME's freshness).
//! - [`http`]: HTTP caching semantics (RFC 9111) for the gateway in front of an HTTP origin:
//!   what may be stored, freshness, age, variants, validation.
//! - [`neighbours`]: which locations may stand in for one another (pluggable; the thesis
//!   leaves it open).
//! - [`FieldCost`]: what reading a sensor field costs and how long it takes (Eqs 5.5, 5.6).
//! - Bounded memory: [`Cache::bounded_by`] weighs each entry (in bytes, for the HTTP gateway)
//!   and evicts as one of the policies of [`evict`] says (LRU, TinyLFU, S3-FIFO, SIEVE) to
//!   stay within a bound.
//! - Cooperative caching (Cacheflow, Dou 2011 ch. 4): [`Lru`] with de-duplicating eviction,
//!   [`cacheflow`]'s split of a multi-object request between a server and its neighbours, and
//!   the [`HitModel`] of one cache's hit rate; [`updates`] keeps a server's stream of changes
//!   to a neighbour whole across refusals, restarts and outages.
//!
//! The quality of answers (Yates's Q_n) is measured in [`crate::measure::Quality`]. The
//! simulator's sensor fields and the gateway drive this code; nothing here does I/O.

pub mod cacheflow;
mod cost;
pub mod evict;
mod hit_model;
pub mod http;
mod lru;
pub mod neighbours;
mod policy;
mod state;
#[cfg(test)]
mod tests;
pub mod updates;

pub use cost::FieldCost;
pub use evict::{Eviction, Evictor, Slot, UnknownEviction};
pub use hit_model::HitModel;
pub use lru::Lru;
pub use neighbours::{Alone, Neighbourhood, Neighbours, Point, Rule};
pub use policy::{AgeFrom, Freshness, Lookup, UnknownLookup};
pub use state::{Answer, Cache, CacheStats, Entry, ReadId, Reading};
