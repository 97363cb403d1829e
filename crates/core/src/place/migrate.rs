//! Where a running context (a VCPU, a thread) should move when a scheduler decides to move it:
//! Xen's credit scheduler's own choice and Guo's cache-aware rule (Guo 2010, ch. 8.3, Table 8.3;
//! notes 002 §3.10).
//!
//! These are decisions only: the caller says which cores are idle now and carries the move out.
//! The simulator's Xen model (`switchyard_sim::models::xen`) is the caller today.
//!
//! # The credit scheduler's choice (`csched_cpu_pick`)
//!
//! Guo §8.3 describes it: a VCPU "may be migrated to a neighbouring PCPU with the most idling
//! neighbours in its grouping", ties going to distinct sockets first, then distinct cores. The
//! groupings are the ones the scheduler knows: on the dissertation's Clovertown, Xen 3.3 knows
//! sockets (and hyperthread siblings, which that CPU lacks), **not** the pairs of cores sharing an
//! L2. [`credit_pick`] takes those groupings as depths of the topology tree. Starting from the
//! current core, counted as idle, it visits every idle core in order after it (wrapping) and
//! moves to a core whose group, at the coarsest known grouping where the two differ, holds more
//! idle cores. So a VCPU drifts towards the emptiest socket, whatever cache it leaves behind.
//!
//! # The cache-aware rule (Table 8.3)
//!
//! "Find the PCPU in the same cache domain; move the current VCPU to the new PCPU" — applied only
//! where the original scheduler would have moved the VCPU, and falling back to the original
//! choice when no core in the cache domain is idle (Guo §8.3, notes §3.10). [`cache_aware`]
//! is that rule; [`cache_sibling`] the lookup it rests on.
//!
//! # Where each rule looks first ([`Rule`], [`Move`])
//!
//! A scheduler moves a context for one of four reasons ([`Move`]). Table 8.3 names two of them,
//! the context displaced by a woken one (the tickle) and the tick's check; [`Rule::CacheAware`]
//! sends those to the cache domain first. Read more widely ("migrate only when the original
//! would have, to the same cache domain"), every move does: [`Rule::CacheAwareSteals`] also has
//! a woken context that waits taken by an idle core of its cache domain first, and a core out of
//! work steal from its cache domain's queues first. Which idle core wins a race among several,
//! and the queues themselves, are the scheduler's (the caller's).

use crate::topology::Topology;

/// How contexts move: the credit scheduler, or Table 8.3 in its two readings (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// Xen 3.3's credit scheduler.
    Credit,
    /// Table 8.3: a displaced or tick-migrated context goes to an idle core of its cache domain
    /// first.
    CacheAware,
    /// Table 8.3, and every steal (of a woken context that waits, by a core out of work) looks to
    /// the cache domain first.
    CacheAwareSteals,
}

impl Rule {
    /// All three, in the order printed.
    pub const ALL: [Self; 3] = [Self::Credit, Self::CacheAware, Self::CacheAwareSteals];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Credit => "credit (Xen 3.3)",
            Self::CacheAware => "cache-aware (Table 8.3)",
            Self::CacheAwareSteals => "cache-aware, steals too",
        }
    }

    /// Whether a move for reason `why` first looks for an idle core in the source's cache domain.
    pub fn looks_to_cache_domain(self, why: Move) -> bool {
        match (self, why) {
            (Self::Credit, _) => false,
            (_, Move::Displace | Move::Tick) => true,
            (Self::CacheAware, Move::Wake | Move::Idle) => false,
            (Self::CacheAwareSteals, Move::Wake | Move::Idle) => true,
        }
    }

    /// Where the context running on `from` goes at a tick (`from`: it stays): the credit
    /// scheduler's [`credit_pick`] over `groupings`, turned to the cache domain at depth
    /// `cache_depth` by [`cache_aware`] where the rule says so.
    pub fn at_tick(
        self,
        topology: &Topology,
        from: u32,
        idle: &[bool],
        groupings: &[usize],
        cache_depth: usize,
    ) -> u32 {
        let original = credit_pick(topology, from, idle, groupings);
        if self.looks_to_cache_domain(Move::Tick) {
            cache_aware(topology, from, original, idle, cache_depth)
        } else {
            original
        }
    }

    /// The order in which core `thief`, out of work, visits the others' queues: after itself
    /// in core order (Xen's `csched_load_balance`), its cache domain first where the rule says so.
    pub fn steal_order(self, topology: &Topology, thief: u32, cache_depth: usize) -> Vec<u32> {
        let n = topology.leaves();
        let mut order: Vec<u32> = (1..n).map(|step| (thief + step) % n).collect();
        if self.looks_to_cache_domain(Move::Idle) {
            // Stable: the cache domain first, each part still in core order.
            order.sort_by_key(|&o| !share(topology, cache_depth, thief, o));
        }
        order
    }
}

/// Why a context moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Move {
    /// Woken, found its core busy and was taken by an idle one.
    Wake,
    /// Displaced by a woken context that outranked it (the tickle), and taken by an idle core.
    Displace,
    /// Moved by the tick's check.
    Tick,
    /// Stolen from another queue by a core out of work.
    Idle,
}

impl Move {
    /// All four.
    pub const ALL: [Self; 4] = [Self::Wake, Self::Displace, Self::Tick, Self::Idle];

    /// A short name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Wake => "woken, taken by an idler",
            Self::Displace => "displaced by a tickle",
            Self::Tick => "tick's check",
            Self::Idle => "stolen by an idle PCPU",
        }
    }
}

/// Whether leaves `a` and `b` sit under one node at depth `depth` (0 is the root).
fn share(topology: &Topology, depth: usize, a: u32, b: u32) -> bool {
    let span = topology.span(depth);
    a / span == b / span
}

/// Idle leaves under the node at depth `depth` above `leaf`.
fn idle_in_group(topology: &Topology, depth: usize, leaf: u32, idle: &[bool]) -> usize {
    let span = topology.span(depth);
    let first = leaf / span * span;
    (first..first + span).filter(|&l| idle[l as usize]).count()
}

/// Xen's credit scheduler's choice for a context running on `from` (see the module docs).
/// `groupings` are the depths of the topology the scheduler knows as groups, coarsest first
/// (for the Clovertown as Xen 3.3 sees it, `[1]`: sockets). Returns `from` when it stays.
///
/// # Panics
///
/// If `idle` is shorter than the topology's leaves, or a grouping is deeper than the tree.
pub fn credit_pick(topology: &Topology, from: u32, idle: &[bool], groupings: &[usize]) -> u32 {
    let n = topology.leaves();
    assert!(idle.len() >= n as usize, "one idle flag per leaf");
    // Xen counts the core the VCPU is leaving as idle.
    let mut idle = idle[..n as usize].to_vec();
    idle[from as usize] = true;
    let mut pick = from;
    for step in 1..n {
        let next = (from + step) % n;
        if !idle[next as usize] {
            continue;
        }
        // The coarsest grouping the scheduler knows at which the two differ decides.
        let Some(&depth) = groupings.iter().find(|&&d| !share(topology, d, pick, next)) else { continue };
        let here = idle_in_group(topology, depth, pick, &idle);
        let there = idle_in_group(topology, depth, next, &idle);
        if there > here {
            pick = next;
        }
    }
    pick
}

/// The first idle leaf other than `from` that shares with it the node at depth `cache_depth` (its
/// cache domain: for the Clovertown's L2 pairs, depth 2), in order after `from`.
pub fn cache_sibling(topology: &Topology, from: u32, idle: &[bool], cache_depth: usize) -> Option<u32> {
    let n = topology.leaves();
    (1..n).map(|s| (from + s) % n).find(|&l| idle[l as usize] && share(topology, cache_depth, from, l))
}

/// Guo's Table 8.3: where the original scheduler would move a context from `from` to `original`
/// (`original == from`: it stays), move it to an idle core of `from`'s cache domain instead, if
/// there is one.
pub fn cache_aware(topology: &Topology, from: u32, original: u32, idle: &[bool], cache_depth: usize) -> u32 {
    if original == from {
        return from;
    }
    cache_sibling(topology, from, idle, cache_depth).unwrap_or(original)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn xeon() -> Topology {
        Topology::parse("xeon-e5335").unwrap()
    }

    fn idle(cores: &[u32]) -> Vec<bool> {
        (0..8).map(|c| cores.contains(&c)).collect()
    }

    #[test]
    fn the_credit_scheduler_moves_towards_the_emptier_socket_and_ignores_the_l2_pairs() {
        let t = xeon();
        // Socket 0 (cores 0-3) has core 1 idle besides 0; socket 1 has three idle cores.
        assert_eq!(credit_pick(&t, 0, &idle(&[1, 5, 6, 7]), &[1]), 5);
        // Equal idleness: it stays, even though core 1 shares its L2 and is idle.
        assert_eq!(credit_pick(&t, 0, &idle(&[1, 5]), &[1]), 0);
        // Nothing idle: it stays.
        assert_eq!(credit_pick(&t, 3, &idle(&[]), &[1]), 3);
    }

    #[test]
    fn the_cache_aware_rule_moves_only_where_the_credit_scheduler_would() {
        let t = xeon();
        let free = idle(&[1, 5, 6, 7]);
        let original = credit_pick(&t, 0, &free, &[1]);
        assert_eq!(cache_aware(&t, 0, original, &free, 2), 1, "core 1 shares core 0's L2");
        assert_eq!(cache_aware(&t, 0, 0, &free, 2), 0, "no move where the original stays");
        let sibling_busy = idle(&[5, 6, 7]);
        assert_eq!(cache_aware(&t, 0, 5, &sibling_busy, 2), 5, "the original choice as fallback");
    }

    #[test]
    fn each_rule_looks_to_the_cache_domain_where_it_says() {
        let t = xeon();
        for why in Move::ALL {
            assert!(!Rule::Credit.looks_to_cache_domain(why));
            assert!(Rule::CacheAwareSteals.looks_to_cache_domain(why));
        }
        let table = Move::ALL.map(|why| Rule::CacheAware.looks_to_cache_domain(why));
        assert_eq!(table, [false, true, true, false], "Table 8.3 names the tickle and the tick");
        assert_eq!(Rule::Credit.steal_order(&t, 3, 2), [4, 5, 6, 7, 0, 1, 2]);
        assert_eq!(Rule::CacheAware.steal_order(&t, 3, 2), [4, 5, 6, 7, 0, 1, 2]);
        assert_eq!(Rule::CacheAwareSteals.steal_order(&t, 3, 2), [2, 4, 5, 6, 7, 0, 1]);
        let free = idle(&[1, 5, 6, 7]);
        assert_eq!(Rule::Credit.at_tick(&t, 0, &free, &[1], 2), 5);
        assert_eq!(Rule::CacheAware.at_tick(&t, 0, &free, &[1], 2), 1);
    }

    proptest! {
        #[test]
        fn every_choice_is_the_source_or_an_idle_core(from in 0u32..8, mask in 0u8..=255, original in 0u32..8) {
            let t = xeon();
            let free: Vec<bool> = (0..8).map(|c| mask >> c & 1 == 1).collect();
            let pick = credit_pick(&t, from, &free, &[1]);
            prop_assert!(pick == from || free[pick as usize]);
            if pick != from {
                // It only moves to a socket with more idle cores than its own (its own counted idle).
                let mut counted = free.clone();
                counted[from as usize] = true;
                let here = idle_in_group(&t, 1, from, &counted);
                let there = idle_in_group(&t, 1, pick, &counted);
                prop_assert!(there > here, "{from} -> {pick} with {free:?}");
            }
            let original = if free[original as usize] { original } else { from };
            let aware = cache_aware(&t, from, original, &free, 2);
            prop_assert!(aware == original || (free[aware as usize] && aware / 2 == from / 2));
            prop_assert_eq!(aware == from, original == from);
        }
    }
}
