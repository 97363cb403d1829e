//! Switchyard's real runtime (the **runtime** driver of DESIGN.md): the parallel L7-filter (Guo
//! §2.3–§2.4) on real packets, and the delivery server (Yates ch. 2–4) on real sockets.
//!
//! # What lives here
//!
//! - [`affinity`]: running the calling thread on one core, for baselines measured against
//!   pinned workers.
//! - [`app_fields`]: what flow records show of a DNS query or an HTTP request beside its protocol.
//! - [`deliver`]: the delivery server of Yates ch. 2–4 — connections sharded over worker threads,
//!   bulk and rate-promised streams, soft rebalancing, pacing and admission carried out for the
//!   core — and the clients that measure it.
//! - [`eve`]: flow records as JSON lines in the shape of Suricata's EVE `flow` and `tls` events.
//! - [`feed`]: a capture process feeding an inspector on the same host through shared-memory
//!   rings, a ring per worker, connections placed on them by a core policy (Linux).
//! - [`inspect`]: the worker kernel, protocol identification by one multi-pattern automaton over
//!   a connection's first bytes, from either direction, and what a TLS handshake shows (SNI,
//!   ALPN, the version negotiated, JA4).
//! - [`ipfix`]: IPFIX export (RFC 7011) of the connections over UDP, the application protocol in
//!   `applicationName`.
//! - [`live`]: inspection of a live interface, each worker on an `AF_PACKET` ring of its own
//!   (Linux).
//! - [`pipeline`]: the parallel pipeline, one producer placing connection buffers with a core
//!   policy on bounded queues of pinned worker threads.
//! - [`serial`]: the single-threaded reference pipeline, capture to per-connection verdicts.
//! - [`sharded`]: the design without a producer: every worker reads the capture and keeps the
//!   connections a core policy that places by the flow alone gives it.
//! - [`tracegen`]: labelled captures of known protocols, for checking classification and
//!   measuring placement on realistic traffic.
//!
//! Packets come from `switchyard-ingest` (captures, reassembly and connection buffers), and
//! where each buffer goes is decided by the core's placement policies.
//!
//! # What does not live here
//!
//! No placement logic: a policy added to the core is used here unchanged.

pub mod affinity;
pub mod app_fields;
pub mod deliver;
pub mod eve;
#[cfg(target_os = "linux")]
pub mod feed;
pub mod inspect;
pub mod ipfix;
#[cfg(target_os = "linux")]
pub mod live;
pub mod pipeline;
pub mod serial;
pub mod sharded;
pub mod tracegen;
