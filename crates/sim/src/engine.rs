//! The event queue and the run loop.
//!
//! A binary heap keyed by `(time, sequence number)`: the sequence number makes the order total,
//! and makes same-time events run first in, first out (as NeXosim's epochs and SimPy's event ids
//! do). Cost: O(log n) per schedule and per pop.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use thiserror::Error;

use crate::Nanos;

/// Why the engine refused a request.
#[derive(Debug, Error, PartialEq)]
#[non_exhaustive]
pub enum SimError {
    /// An event was scheduled before the current time. That is a bug in the model: time in a run
    /// only moves forward. The run cannot go on.
    #[error("event scheduled at {at} ns, before the current time {now} ns")]
    InThePast {
        /// When the event was asked for.
        at: u64,
        /// The current time.
        now: u64,
    },
    /// The placement policy could not be built for the scenario (its message says why).
    #[error("placement: {0}")]
    Place(#[from] switchyard_core::PlaceError),
    /// A model's parameters are out of range; the message says which and what is accepted.
    #[error("bad model parameter {name} = {value}: {expected}")]
    BadParameter {
        /// The parameter.
        name: &'static str,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
}

struct Entry<E> {
    at: Nanos,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed, so the max-heap pops the earliest `(time, seq)` first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Pending events in virtual time.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
    now: Nanos,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self { heap: BinaryHeap::new(), seq: 0, now: Nanos::ZERO }
    }
}

impl<E> EventQueue<E> {
    /// An empty queue at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current time: that of the event last popped.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Schedules `event` at time `at`, which must not be before [`EventQueue::now`].
    pub fn schedule_at(&mut self, at: Nanos, event: E) -> Result<(), SimError> {
        if at < self.now {
            return Err(SimError::InThePast { at: at.0, now: self.now.0 });
        }
        self.heap.push(Entry { at, seq: self.seq, event });
        self.seq += 1;
        Ok(())
    }

    /// Schedules `event` after `delay`. Saturates at the end of time rather than wrapping.
    pub fn schedule_in(&mut self, delay: Nanos, event: E) {
        let at = Nanos(self.now.0.saturating_add(delay.0));
        self.heap.push(Entry { at, seq: self.seq, event });
        self.seq += 1;
    }

    /// Removes the next event and advances the clock to it.
    pub fn pop(&mut self) -> Option<(Nanos, E)> {
        let e = self.heap.pop()?;
        self.now = e.at;
        Some((e.at, e.event))
    }

    /// When the next event is due, if any.
    pub fn next_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| e.at)
    }

    /// Events pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// A simulation model: it handles one event at a time, and schedules more on the queue it is
/// given.
pub trait Model {
    /// What the model's events are.
    type Event;

    /// Handles `event`, due at `now` (equal to `queue.now()`).
    fn handle(&mut self, now: Nanos, event: Self::Event, queue: &mut EventQueue<Self::Event>);
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Events handled.
    pub events: u64,
    /// Time of the last event handled.
    pub end: Nanos,
}

/// Runs `model` until no event is left or the next one is after `until`. Events due at `until`
/// itself are handled; later ones are left on the queue.
pub fn run<M: Model>(model: &mut M, queue: &mut EventQueue<M::Event>, until: Nanos) -> RunStats {
    let mut stats = RunStats { events: 0, end: queue.now() };
    while queue.next_time().is_some_and(|t| t <= until) {
        let Some((now, event)) = queue.pop() else { break };
        model.handle(now, event, queue);
        stats.events += 1;
        stats.end = now;
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_time_events_run_first_in_first_out() {
        let mut q = EventQueue::new();
        for i in 0..100 {
            q.schedule_at(Nanos(5), i).unwrap();
        }
        q.schedule_at(Nanos(1), -1).unwrap();
        let order: Vec<i32> = std::iter::from_fn(|| q.pop().map(|(_, e)| e)).collect();
        assert_eq!(order[0], -1);
        assert_eq!(&order[1..], &(0..100).collect::<Vec<_>>()[..]);
    }

    #[test]
    fn scheduling_in_the_past_is_refused() {
        let mut q = EventQueue::new();
        q.schedule_at(Nanos(10), ()).unwrap();
        q.pop();
        assert_eq!(q.schedule_at(Nanos(9), ()), Err(SimError::InThePast { at: 9, now: 10 }));
        assert!(q.schedule_at(Nanos(10), ()).is_ok());
    }

    struct Ticker {
        seen: Vec<u64>,
    }

    impl Model for Ticker {
        type Event = u64;
        fn handle(&mut self, now: Nanos, event: u64, queue: &mut EventQueue<u64>) {
            self.seen.push(now.0);
            if event > 0 {
                queue.schedule_in(Nanos(10), event - 1);
            }
        }
    }

    #[test]
    fn run_stops_at_the_horizon_and_leaves_the_rest() {
        let mut q = EventQueue::new();
        q.schedule_at(Nanos(0), 5).unwrap();
        let mut m = Ticker { seen: Vec::new() };
        let s = run(&mut m, &mut q, Nanos(30));
        assert_eq!(m.seen, [0, 10, 20, 30]);
        assert_eq!(s, RunStats { events: 4, end: Nanos(30) });
        assert_eq!(q.next_time(), Some(Nanos(40)));
    }
}
