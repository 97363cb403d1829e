//! A userspace link emulator for Switchyard's tests and reproductions: two network namespaces
//! joined by TUN devices, with rate, propagation delay, random loss and a RED or drop-tail queue
//! in each direction, so real TCP runs across a real bottleneck on one machine.
//!
//! # What lives here
//!
//! - [`link`]: one direction of a link as a state machine with time passed in (testable alone).
//! - [`Dumbbell`]: the namespaces, the TUN devices and the forwarder thread.
//! - [`impair`]: single connections silenced, slowed or reset on top of the link.
//! - [`mptcp`]: Linux MPTCP's sockets and path-manager endpoints inside a namespace made for
//!   them (never the machine's own), and the subflows `ss` shows: the kernel's peer of the
//!   weighted channels.
//!
//! # What does not
//!
//! Nothing of Switchyard's policies: this stands in for the network (Emulab and Dummynet in
//! Iwashima's testbed), and the code under test runs in the namespaces as it would anywhere.

mod dumbbell;
pub mod impair;
pub mod link;
pub mod mptcp;

pub use dumbbell::{Dumbbell, LinkemError, Namespace};
pub use impair::{Impairment, Impairments};
pub use link::{LinkConfig, Queue};
