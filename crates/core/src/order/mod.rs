//! The **order** stage: when a resource serves the work it holds.
//!
//! Here so far: hard throughput guarantees for streams (Yates 2006 §4.4; notes 000 §3.4), the
//! order in which deadline applications are served (Dou 2011 §3.4.2), and which records go into
//! a storage device's next block (Dou 2011 ch. 2).
//!
//! - [`Pacer`]: fine-grained per-connection pacing. Each stream earns credit at its promised
//!   rate and is due when it has earned one grain's worth; the driver sends what is owed. The
//!   default for a delivery server.
//! - [`Quota`]: the thesis's own mechanism, a worker sending a computed number of packets between
//!   pauses of k × 10 ms, with the count corrected from the measured rate.
//! - [`Admission`]: the thesis's future work. A new stream is placed on the worker with the most
//!   room and refused, with a reason, when no worker can keep the promises it has already made
//!   and the new one too.
//!
//! - [`blocks`]: deadline-aware block writes (Dou 2011 ch. 2): FIFO, EDF, G-EDF and
//!   RG-EDF, and the modern peers' linger, group commit and mq-deadline, choosing which records
//!   of which streams make up the next block a device writes.
//!
//! - [`apps`]: least laxity first (MiscoRT), earliest deadline first and FIFO over
//!   applications with deadlines, for the task board of `place::tasks`.
//!
//! All are sans-IO: time is handed in, and the driver does the sending and sleeping.

mod admission;
pub mod apps;
pub mod blocks;
mod pace;
mod quota;

pub use admission::{Admission, AdmissionConfig, Refusal};
pub use blocks::{BlockConfig, BlockPolicy, BlockScheduler};
pub use pace::{Debts, Due, PaceConfig, Pacer};
pub use quota::{Quota, QuotaConfig, Round};
