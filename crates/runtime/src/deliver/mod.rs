//! The delivery server (Yates 2006 ch. 2–4): many connections served from a few threads, with
//! fairness measured and soft and hard per-connection throughput guarantees.
//!
//! - [`request`]: the one-line protocol a client opens with.
//! - [`server`]: listeners, workers and the controller (sampling, rebalancing, admission).
//! - `worker`: one thread's loop — bulk round-robin, paced streams, Yates's quota.
//! - `kernel_pace`: streams paced by the kernel (TCP's `SO_MAX_PACING_RATE`) and the probe of
//!   what this kernel can pace ([`KernelPacing`]).
//! - [`load`]: the clients, real sockets that count what they receive per window.
//! - [`wire`]: the wire's view of the streams' departures, from a packet ring, beside the
//!   clients' view.
//!
//! Which worker a connection goes to, when one moves, how fast a stream goes and whether a
//! stream is admitted are all decided in `switchyard_core` (`place::rebalance`, `place::steer`,
//! `order`); this module carries the decisions out, and reads the facts they need from the
//! sockets (bytes, CPU time, the core each connection is received on).

mod kernel_pace;
pub mod load;
pub mod request;
pub mod server;
pub mod wire;
mod worker;

pub use kernel_pace::KernelPacing;
pub use load::{Ended, EndedEarly, Fate, Handshake, Load, LoadConfig, Transport, Windows};
pub use request::{Answer, Request};
pub use server::{ConnView, PacerDebts, Pacing, Sample, Server, ServerConfig, Totals};
pub use wire::{Wire, WireError, WireView};

/// Raises this process's soft limit on open descriptors to its hard limit: a server or a load
/// of thousands of connections needs a descriptor each (a default soft limit is 1,024).
pub fn raise_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}
