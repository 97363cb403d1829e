//! What a placer may read about the present: queue lengths per worker and in-flight units per
//! flow.
//!
//! A [`LoadView`] is a borrowed snapshot the driver hands to every decision. It is indexed by
//! [`WorkerId`]: slot `i` holds worker `i`'s queue, and a worker past the end of the slice reads as
//! idle. [`LoadTracker`] is the bookkeeping most drivers want: count a unit in when it is queued,
//! out when it is done, and view the result.

use crate::flow::FlowId;
use crate::flow_map::FlowMap;
use crate::unit::Unit;
use crate::worker::WorkerId;

/// Which queue length a load-aware policy compares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueueMeasure {
    /// Units queued (Guo ch. 5: connection buffers per run-queue).
    #[default]
    Units,
    /// Bytes queued (Guo ch. 6: GOP bytes, since transcoding time is linear in GOP size).
    Bytes,
}

/// A read-only snapshot of load, borrowed from the driver for one decision.
#[derive(Clone, Copy, Debug)]
pub struct LoadView<'a> {
    units: &'a [u64],
    bytes: &'a [u64],
    in_flight: Option<&'a FlowMap<u32>>,
}

impl<'a> LoadView<'a> {
    /// Every worker idle, nothing in flight.
    pub const IDLE: LoadView<'static> = LoadView { units: &[], bytes: &[], in_flight: None };

    /// A view over per-worker queue lengths in units and in bytes (indexed by worker id).
    pub fn new(units: &'a [u64], bytes: &'a [u64]) -> Self {
        Self { units, bytes, in_flight: None }
    }

    /// The same view, also answering per-flow in-flight counts.
    pub fn with_in_flight(self, in_flight: &'a FlowMap<u32>) -> Self {
        Self { in_flight: Some(in_flight), ..self }
    }

    /// Units queued at `w`.
    #[inline]
    pub fn units(&self, w: WorkerId) -> u64 {
        self.units.get(w.0 as usize).copied().unwrap_or(0)
    }

    /// Bytes queued at `w`.
    #[inline]
    pub fn bytes(&self, w: WorkerId) -> u64 {
        self.bytes.get(w.0 as usize).copied().unwrap_or(0)
    }

    /// The queue length of `w` by `measure`.
    #[inline]
    pub fn queue(&self, w: WorkerId, measure: QueueMeasure) -> u64 {
        match measure {
            QueueMeasure::Units => self.units(w),
            QueueMeasure::Bytes => self.bytes(w),
        }
    }

    /// The per-worker slice for `measure`, indexed by worker id.
    #[inline]
    pub fn queues(&self, measure: QueueMeasure) -> &'a [u64] {
        match measure {
            QueueMeasure::Units => self.units,
            QueueMeasure::Bytes => self.bytes,
        }
    }

    /// Units of `flow` queued or in service anywhere (0 if the driver does not track flows).
    #[inline]
    pub fn in_flight(&self, flow: FlowId) -> u32 {
        self.in_flight.and_then(|m| m.get(flow).copied()).unwrap_or(0)
    }
}

/// Load bookkeeping for drivers and tests: units in, units out, and a [`LoadView`] of the result.
#[derive(Clone, Debug, Default)]
pub struct LoadTracker {
    units: Vec<u64>,
    bytes: Vec<u64>,
    in_flight: FlowMap<u32>,
}

impl LoadTracker {
    /// Nothing queued.
    pub fn new() -> Self {
        Self::default()
    }

    /// `unit` was queued at `w`.
    pub fn on_enqueue(&mut self, w: WorkerId, unit: &Unit) {
        let i = w.0 as usize;
        if i >= self.units.len() {
            self.units.resize(i + 1, 0);
            self.bytes.resize(i + 1, 0);
        }
        self.units[i] = self.units[i].saturating_add(1);
        self.bytes[i] = self.bytes[i].saturating_add(unit.size);
        let c = self.in_flight.get_or_insert_with(unit.flow, || 0);
        *c = c.saturating_add(1);
    }

    /// `unit`, queued earlier at `w`, is done. Counts never go below zero, so a driver that
    /// reports a completion twice skews load but cannot wrap it.
    pub fn on_complete(&mut self, w: WorkerId, unit: &Unit) {
        let i = w.0 as usize;
        if let Some(u) = self.units.get_mut(i) {
            *u = u.saturating_sub(1);
            self.bytes[i] = self.bytes[i].saturating_sub(unit.size);
        }
        if let Some(c) = self.in_flight.get_mut(unit.flow) {
            *c = c.saturating_sub(1);
            if *c == 0 {
                self.in_flight.remove(unit.flow);
            }
        }
    }

    /// Drops everything queued at `w` from the per-worker counts (a worker was removed and its
    /// queue will be re-placed unit by unit). Per-flow counts are the driver's to settle.
    pub fn clear_worker(&mut self, w: WorkerId) {
        let i = w.0 as usize;
        if i < self.units.len() {
            self.units[i] = 0;
            self.bytes[i] = 0;
        }
    }

    /// Units queued at `w`.
    pub fn units(&self, w: WorkerId) -> u64 {
        self.units.get(w.0 as usize).copied().unwrap_or(0)
    }

    /// Per-worker unit counts, indexed by worker id.
    pub fn units_by_worker(&self) -> &[u64] {
        &self.units
    }

    /// Per-worker byte counts, indexed by worker id.
    pub fn bytes_by_worker(&self) -> &[u64] {
        &self.bytes
    }

    /// Forgets everything.
    pub fn reset(&mut self) {
        self.units.clear();
        self.bytes.clear();
        self.in_flight.clear();
    }

    /// A view for the next decision.
    pub fn view(&self) -> LoadView<'_> {
        LoadView::new(&self.units, &self.bytes).with_in_flight(&self.in_flight)
    }
}

/// What a producer does when the queue a policy chose is full. The simulator's server model and
/// the runtime's pipeline take the same rule, so a scenario and a real run mean the same thing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFull {
    /// Wait until the queue has room (Guo's L7-filter: the preprocessing thread sleeps).
    #[default]
    Block,
    /// Drop the unit, and count it.
    Drop,
}
