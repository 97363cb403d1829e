//! The macro benchmarks: each runs one of Switchyard's drivers beside its peers in the same
//! process or script, in alternating rounds, and returns the figures of every side, so that a
//! ratio is always taken between runs that met the machine in the same mood.
//!
//! - [`inspect`]: the DPI pipeline against its single thread and the simulator's prediction.
//! - [`ndpi`]: the inspector's verdicts and single-thread speed beside nDPI's ndpiReader.
//! - [`live`]: live inspection of a veth pair fed by tcpreplay, and the highest rate at which
//!   nothing is dropped.
//! - [`mux`]: the multiplexed session against raw TCP, HTTP/2 (h2) and QUIC (quinn).
//! - [`gateway`]: the caching gateway against nginx's `proxy_cache`, and the core's cache against
//!   moka.
//! - [`deliver`]: the delivery server against a tokio server and nginx's `limit_rate`;
//!   [`deliver_memory`], the memory and CPU each spends per stream.
//! - [`figurehead`]: the gateway over four origins of different speed and price, every routing
//!   policy for SLA attainment and price per read, beside the simulator's prediction.
//! - [`jobs`]: the jobs coordinator's task assignments per second and poll latency against
//!   Celery with Redis.
//! - [`blocklog`]: the write coalescer on a paced file, every block policy at several loads,
//!   for deadline misses and write amplification.
//! - [`shm`]: the shared-memory ring against a Unix socket pair, throughput and each side's CPU
//!   per byte.
//! - [`steer`]: the delivery server's sink with receive-side steering against none and the
//!   wrong core, on loopback and a veth pair, beside the interrupt-affinity model of this
//!   machine.
//! - [`transcode`]: real H.264 GOPs placed by each policy on pinned workers, against one worker
//!   and Debian's ffmpeg.
//!
//! The peers that only benchmarks need live here ([`peers`]: finding and launching nginx and
//! wrk); none of the drivers depends on them.

pub mod blocklog;
pub mod deliver;
pub mod deliver_memory;
pub mod eviction;
pub mod figurehead;
pub mod gateway;
pub mod inspect;
pub mod jobs;
#[cfg(target_os = "linux")]
pub mod live;
pub mod memory;
pub mod mux;
pub mod ndpi;
pub mod peers;
pub mod shm;
#[cfg(target_os = "linux")]
pub mod steer;
pub mod transcode;
pub mod transcode_predict;

use std::time::Duration;

/// The median of `v` (the upper one of an even count); `v` must not be empty.
fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// CPU seconds this process has used so far (every thread, user and kernel).
fn process_cpu() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// CPU seconds the calling thread has used so far (user and kernel). Unlike the wall clock, it
/// does not count the time the thread waited for a core, which on a shared machine (load 6 to
/// 15 on 2 cores) was most of a timed loop's and moved in-process ratios 50-fold between runs.
fn thread_cpu() -> f64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(0.0, |t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
}

/// Cores this machine offers.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
