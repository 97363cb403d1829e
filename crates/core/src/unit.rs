//! The unit of work: what arrives and has to be put somewhere.
//!
//! A unit is a packet or connection buffer, a video GOP, a message on a channel, a request. It
//! carries its flow's digest rather than the key itself, so it is `Copy` and cheap to pass around
//! hot paths; the driver keeps the key if it needs it.

use crate::flow::{FlowId, FlowKey};
use crate::time::Nanos;

/// One unit of work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Unit {
    /// The flow the unit belongs to (its key's digest).
    pub flow: FlowId,
    /// Size in bytes (a connection buffer's length, a GOP's bytes).
    pub size: u64,
    /// Estimated service cost, in nanoseconds of work, where the driver knows it.
    pub cost: Option<Nanos>,
    /// Traffic class (0 when the driver has none).
    pub class: u16,
    /// Share weight of the unit's class or flow (1.0 when the driver has none).
    pub weight: f64,
    /// When the unit must be done, if it has a deadline.
    pub deadline: Option<Nanos>,
    /// Sequence number within the flow, from 0.
    pub seq: u64,
}

impl Unit {
    /// A unit of `size` bytes of the flow `key`, with no cost estimate, class 0, weight 1, no
    /// deadline and sequence number 0.
    pub fn new(key: &FlowKey, size: u64) -> Self {
        Self::of_flow(key.id(), size)
    }

    /// A unit of a flow whose digest is already known.
    pub fn of_flow(flow: FlowId, size: u64) -> Self {
        Self { flow, size, cost: None, class: 0, weight: 1.0, deadline: None, seq: 0 }
    }

    /// The same unit with sequence number `seq`.
    pub fn with_seq(self, seq: u64) -> Self {
        Self { seq, ..self }
    }
}
