//! Switchyard's caching gateway (the **gateway** driver of DESIGN.md), and the sensor-field
//! emulator it runs against.
//!
//! # What lives here
//!
//! - [`gateway`]: an HTTP server (axum) answering `GET /v1/readings/{location}?max_age=S` from
//!   the core's freshness-bounded cache (`switchyard_core::cache`) with any of Yates's seven
//!   lookup policies, reading the field on a miss. Reads are coalesced exactly: one upstream
//!   read per key at a time, whose waiters survive the cancellation of whoever asked first,
//!   because the read runs in a task of its own. A failed or late read is answered with a
//!   clear status, or with the stale value marked as such. `/metrics` in Prometheus text.
//! - [`origin`]: the same gateway in front of any HTTP origin, as a shared HTTP cache: RFC
//!   9111's rules (`switchyard_core::cache::http`) carried out, coalesced exactly, with
//!   revalidation, variants, stale-while-revalidate and stale-if-error; what it does not
//!   store it carries through as a stream (`inflight`), so a body's size is not its cost.
//! - [`origins`]: several origins of different speed and price behind it, each read sent as
//!   the core's SLA router says (`switchyard_core::place::sla`: Figurehead's Base and OptWait,
//!   hedging, P2C), the first answer kept and the rest cancelled, the price counted; writes
//!   sent to every origin under the core's write rule (`writes`), laggards sent them again
//!   and kept out of reads of what they lack.
//! - [`coop`]: one of Cacheflow's cooperating gateways.
//! - [`listener`]: the serving layer all of these share: the accept loop, TLS to clients
//!   ([`tls`]: rustls, certificate files read again on demand), HTTP/1.1 (half-closed clients
//!   answered) and HTTP/2 (ALPN, or h2c by prior knowledge), and a stop that drains what is in
//!   flight within a bound.
//! - [`access_log`]: a line for each request, nginx's `combined` format (with the cache's result,
//!   the origin asked and the times after it) or JSON lines, written by a thread of its own
//!   from a bounded queue, reopened on demand (SIGHUP).
//! - [`config`]: `gateway serve`'s settings from a TOML file and flags, checked with errors
//!   that name the file's line and the key, and which of them a reload may change.
//! - [`field`]: `switchyard field serve`: the sensor field model (`switchyard-models`) served in real time
//!   over HTTP, with the model's link queues, delays and costs.
//!
//! # What does not
//!
//! No policy logic: which answer a query gets is the core's decision; this crate carries it
//! out over HTTP and keeps the clocks.

pub mod access_log;
pub mod config;
pub mod coop;
pub mod field;
pub mod gateway;
mod http;
mod inflight;
pub mod listener;
pub mod memory;
mod metrics;
pub mod origin;
pub mod origins;
pub mod purge;
pub mod tls;
mod writes;
