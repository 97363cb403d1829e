//! The base stations' access links into the field (Yates §5.3): each takes one query every
//! 1/capacity seconds, first come first served, and a query that would wait longer than the
//! longest wait is refused. The simulator and the field emulator both queue reads here.

use switchyard_core::Nanos;

/// Every base station's link.
#[derive(Clone, Debug)]
pub struct AccessLinks {
    /// When each link is next free.
    free: Vec<Nanos>,
    service: Nanos,
    max_wait: Nanos,
}

impl AccessLinks {
    /// `stations` links, each taking a query every `service`, refusing waits past `max_wait`.
    pub fn new(stations: usize, service: Nanos, max_wait: Nanos) -> Self {
        Self { free: vec![Nanos::ZERO; stations], service, max_wait }
    }

    /// A query for `station` arriving at `now`: how long it waits for its turn, or `Err` with
    /// that wait if it is longer than the longest allowed (the query is refused, and takes no
    /// turn).
    pub fn admit(&mut self, station: usize, now: Nanos) -> Result<Nanos, Nanos> {
        let start = self.free[station].max(now);
        let wait = Nanos(start.0 - now.0);
        if wait > self.max_wait {
            return Err(wait);
        }
        self.free[station] = Nanos(start.0 + self.service.0);
        Ok(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_take_turns_and_a_long_wait_is_refused_without_a_turn() {
        let mut l = AccessLinks::new(2, Nanos(10), Nanos(15));
        assert_eq!(l.admit(0, Nanos(0)), Ok(Nanos(0)));
        assert_eq!(l.admit(0, Nanos(0)), Ok(Nanos(10)));
        assert_eq!(l.admit(1, Nanos(0)), Ok(Nanos(0)), "links are separate");
        assert_eq!(l.admit(0, Nanos(0)), Err(Nanos(20)));
        assert_eq!(l.admit(0, Nanos(5)), Ok(Nanos(15)), "the refused query took no turn");
    }
}
