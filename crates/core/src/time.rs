//! Time as the core sees it: an integer count of nanoseconds handed in by the driver.
//!
//! Integer time keeps event order total and exact; floating-point time drifts and breaks heap
//! order (style.md, "float time").

/// A point in time or a duration, in nanoseconds since the driver's epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero: the start of a run.
    pub const ZERO: Self = Self(0);

    /// `n` microseconds.
    pub const fn from_micros(n: u64) -> Self {
        Self(n * 1_000)
    }

    /// `n` milliseconds.
    pub const fn from_millis(n: u64) -> Self {
        Self(n * 1_000_000)
    }
}
