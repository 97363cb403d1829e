//! Switchyard's transcoding driver (Guo ch. 6 on real video): H.264 streams cut into closed
//! GOPs, each GOP placed by a core policy on a pinned worker thread that decodes and encodes it
//! again, and each stream's GOPs put back in order.
//!
//! # What lives here
//!
//! - [`annexb`]: NAL units of an Annex B byte stream, and the stream cut into closed GOPs.
//! - [`kernel`]: one GOP transcoded alone, with a fresh decoder and single-threaded encoder
//!   (OpenH264, built from source by cargo; or, with the `x264` feature, Debian's libx264
//!   through the C shim in `csrc/`), so its output does not depend on where it ran.
//! - [`make`]: sample streams encoded from generated pictures.
//! - [`pool`]: the parallel run: GOPs placed on bounded queues of pinned workers, a reorder
//!   buffer per stream, and what was measured (pictures a second, balance, reorder delay, how
//!   often a stream's GOPs stayed on one worker).
//!
//! # What does not live here
//!
//! No placement logic: which worker a GOP goes to is the core's decision
//! (`switchyard_core::place`), carried out here unchanged. No command line: the binary parses
//! arguments and prints.

pub mod annexb;
mod encoder;
pub mod kernel;
pub mod make;
pub mod pool;
#[cfg(feature = "x264")]
mod x264;
