//! Switchyard's **blocklog** driver (DESIGN.md): streams of records with deadlines, written to a
//! file or a block device in whole blocks, a record counting as written only once its block is
//! durable — the write coalescer of Dou's thesis (ch. 2; notes 003 §2.1, §7.1) on a real device.
//!
//! # What lives here
//!
//! - [`frame`]: the on-disk format — a block header with a checksum, records framed with
//!   stream, number and length — and its parser, which takes any bytes without panicking.
//! - [`device`]: a file or block device opened with `O_DIRECT` and `O_DSYNC` (each falling back
//!   where refused, and saying so), and a pacing that emulates a slow device (the thesis's SD
//!   card) where the kernel has no `dm-delay`.
//! - [`writer`]: [`Log`], the application's handle, and the one writer thread per device that
//!   owns the core's block scheduler: it offers each record, asks for the next block when the
//!   device is free, writes exactly that block and reports its records durable.
//! - [`read`]: reading a log back after a close or a crash: intact records in block order,
//!   torn and stale blocks named, the log named by its block 0, and a [`Verdict`]: clean, a
//!   torn tail (every acknowledged record there), damaged (records lost before the tail), or
//!   unnamed (block 0 not intact: whose blocks follow cannot be told).
//! - [`load`]: the reproduction's load profiles (3 streams, 40 ms, 64 bytes, 70 ms; bursty).
//!
//! # What does not
//!
//! No scheduling policy: which records make up a block, whether a stream's fuller group goes
//! first, how long a batch lingers, which records to drop — all of that is
//! `switchyard_core::order::blocks`, which this crate drives. No experiment either: `bench
//! blocklog` lives in `switchyard-experiments`.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use switchyard_blocklog::{Fate, Log, LogConfig};
//!
//! let log = Log::open("/tmp/example.log".as_ref(), LogConfig::default())?;
//! let receipt = log.append(0, b"temperature 21.5", Duration::from_millis(70))?;
//! match receipt.wait().fate {
//!     Fate::Durable { at } => println!("durable {at:?} after open"),
//!     other => println!("not written: {other:?}"),
//! }
//! let stats = log.close()?;
//! println!("write amplification {:.2}", stats.write_amplification());
//! # Ok::<(), switchyard_blocklog::LogError>(())
//! ```

pub mod device;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod load;
pub mod read;
pub mod writer;

pub use device::{DeviceInfo, Pacing};
pub use read::{ReadOptions, Recovery, Verdict, read_log, recover};
pub use writer::{Fate, Log, LogConfig, LogError, LogStats, Outcome, Receipt};
