//! The **carry** stage: how a unit's bytes travel and arrive. Today: the reorder buffer that
//! restores a flow's order after its units were served in parallel. Weighted channels over
//! several connections, credit flow control and framing come with the mux driver.

mod reorder;

pub use reorder::ReorderBuffer;
