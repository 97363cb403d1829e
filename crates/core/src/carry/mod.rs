//! The **carry** stage: how a unit's bytes travel and arrive.
//!
//! - [`frame`]: the wire format of a session multiplexed over several connections.
//! - [`Wfq`]: which channel sends next, in proportion to weights (Iwashima §6.3).
//! - [`pin`]: which connection each channel is pinned to (Iwashima §6.4), kept up to date.
//! - [`choose`]: which connection a striped frame goes on.
//! - [`ReorderBuffer`]: units finish in any order and leave in sequence order.
//! - [`OpenWindow`]: how many channels the peer may have opening at once, and the leave to open
//!   more as the application accepts them (open credit).
//!
//! - [`Budget`]: a session-wide byte budget for what channels hold, shared by the dynamic
//!   threshold of Choudhury and Hahne: who may read from its socket, and how much.
//! - [`Sender`] and [`Receiver`]: a session's two halves as state machines: channels framed
//!   under credit, frames kept until acknowledged and sent again when a connection dies; frames
//!   back into bytes through bounded reorder buffers.
//!
//! The mux driver carries their decisions out over sockets; nothing here does I/O.

mod budget;
pub mod choose;
#[cfg(test)]
mod end_tests;
mod exact_sum;
pub mod frame;
mod open;
pub mod pin;
mod recv;
mod reorder;
mod send;
#[cfg(test)]
mod session_tests;
mod wfq;

pub use budget::{Budget, LEAST_GRANT};
pub use frame::{Frame, FrameError};
pub use open::{OpenError, OpenWindow};
pub use recv::{ChannelEnd, Cut, Receiver, RecvConfig, RecvError, RecvStats};
pub use reorder::ReorderBuffer;
pub use send::{ChannelStats, Scheme, SendConfig, SendError, Sender};
pub use wfq::Wfq;
