//! The machine's caches: a hierarchy per topology (which leaves share each cache, its size, line
//! and miss penalty) and a working-set model that says, for a unit served on a leaf, how many of
//! its lines each level misses and what those misses cost (issue 26).
//!
//! # The hierarchies
//!
//! A level's *miss penalty* is the extra time a line that misses this level costs, found one
//! level up (or in memory above the last level). A line missing L1 and L2 pays both penalties.
//!
//! | topology | level | size | line | shared by | miss penalty | source |
//! |---|---|---|---|---|---|---|
//! | `xeon-e5335` (2.0 GHz) | L1d | 32 KiB | 64 B | 1 core | 14 cycles = 7 ns | size: Intel Xeon 5300 series datasheet (doc. 315569), 32 KB L1 data per core; penalty: Guo ch. 8's Clovertown constant "L1 miss 14 cycles" (notes §4.4) |
//! | | L2 | 4 MiB | 64 B | 2 cores (a pair) | 240 cycles = 120 ns | size and sharing: same datasheet, "two 4 MB L2, each shared by two cores" (Guo §4.4); penalty: Guo ch. 8, "L2 miss 240 cycles" |
//! | `opteron-2350` (2.0 GHz) | L1d | 64 KiB | 64 B | 1 core | 7 ns | size: AMD Family 10h Software Optimization Guide (pub. 40546), 64 KB 2-way L1d; penalty **chosen**: the Xeon's L2-hit figure, no data sheet gives it |
//! | | L2 | 512 KiB | 64 B | 1 core | 23 ns | size: same guide and Guo §4.4 ("512 KB L2 per core"); penalty: the L3 latency of the Opteron 2350 measured by The Tech Report ("AMD's quad-core Opteron 2300 processors", p. 3: about 23 ns) |
//! | | L3 | 2 MiB | 64 B | 4 cores (a socket) | 120 ns | size: same guide and Guo §4.4 ("2 MB L3 shared by 4 cores"); penalty **chosen** equal to the Xeon's memory, so that the two machines differ only in the shape of their caches |
//! | `niagara2` (1.2 GHz) | L1d | 8 KiB | 16 B | 8 threads (a core) | 24 cycles = 20 ns | size, line: Sun, "UltraSPARC T2 Supplement to the UltraSPARC Architecture 2007" (8 KB 4-way L1d, 16 B lines, per core); penalty **chosen**: two dozen cycles for a crossbar round trip to an L2 bank, not in a data sheet |
//! | | L2 | 4 MiB | 64 B | 64 threads (all, via the crossbar) | 120 ns | size: same supplement and Sun's T5120/T5220 architecture white paper (4 MB, 8 banks, 16-way; Guo §4.4); penalty **chosen** as for the Xeon |
//! | `SxCxT`, `flat:N` | L1d | 32 KiB | 64 B | a leaf, or the leaves of a lowest-level node named `thread` (SMT siblings) | 7 ns | **chosen**: a generic machine shaped like the Xeon |
//! | | LLC | 1 MiB per leaf sharing it | 64 B | the leaves under one top-level node (all of them for a one-level tree) | 120 ns | **chosen** as above |
//!
//! A machine at hand is described by [`CacheHierarchy::from_sys`] from what Linux says of its
//! caches (`/sys/devices/system/cpu/cpu0/cache/index*/`: level, type, size, line, which CPUs
//! share it); Linux gives no latencies, so the caller supplies the miss penalties.
//!
//! Cache-to-cache transfers (a line dirty in another core's cache, snooped over the Xeon's FSB or
//! the Opteron's HyperTransport) are not modelled: a line in no cache on the leaf's path comes
//! from memory. The Niagara 2's eight L2 banks are one LRU, since lines interleave over banks and
//! bank conflicts are not what the published effects are about.
//!
//! # The working-set model
//!
//! Each unit carries a footprint: a key (its flow or stream) and a size in bytes. Each cache
//! instance keeps an LRU *of footprints, by bytes*: a footprint is resident or not as a whole (a
//! footprint larger than the cache keeps only the cache's size), and inserting one evicts the
//! least recently used footprints until the bytes fit. This is a stack-distance approximation
//! (Mattson et al. 1970: under LRU a reuse hits if and only if the bytes touched since the last use
//! fit in the cache) applied to whole footprints rather than lines. It is chosen because the
//! effects the dissertation measures are whether a flow's state survives on a core or a shared
//! cache between two of its units (Guo §2.2, §3.6, §3.10), not line-level conflicts; set
//! associativity, prefetching and memory-level parallelism are left out, and each access costs
//! O(log n) in the footprints held.
//!
//! Serving a unit: with `r_ℓ` the footprint's resident bytes at level ℓ in the cache the leaf uses
//! there, the bytes found at or below ℓ are `h_ℓ = max(r_1, …, r_ℓ)`; level ℓ misses
//! `⌈(F − h_ℓ) / line_ℓ⌉` lines, each charged ℓ's miss penalty. The footprint is then made most
//! recent in every level on the leaf's path, evicting others' footprints — so threads and cores
//! that share a cache evict each other. The model is deterministic: no randomness, ties broken by
//! access order.

use std::collections::BTreeMap;

use switchyard_core::Topology;

/// One level of a cache hierarchy.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheLevel {
    /// The level's name ("L1d", "L2", …).
    pub name: String,
    /// Capacity of one cache instance, in bytes.
    pub size: u64,
    /// Line size in bytes.
    pub line: u64,
    /// Consecutive leaves that share one instance (leaf `w` uses instance `w / shared_by`).
    pub shared_by: u32,
    /// Extra nanoseconds per line that misses this level.
    pub miss_ns: f64,
}

/// The caches of a machine, private levels first.
#[derive(Clone, Debug, PartialEq)]
pub struct CacheHierarchy {
    /// The levels, from the one nearest the core up to the last-level cache.
    pub levels: Vec<CacheLevel>,
}

fn level(name: &str, kib: u64, line: u64, shared_by: u32, miss_ns: f64) -> CacheLevel {
    CacheLevel { name: name.into(), size: kib * 1024, line, shared_by, miss_ns }
}

impl CacheHierarchy {
    /// The hierarchy of `topology` from the machines' data sheets (see the module documentation),
    /// or the generic one for an `SxCxT` or `flat:N` spec.
    pub fn data_sheet(topology: &Topology) -> Self {
        let shape = topology.name().split('@').next().unwrap_or("").trim();
        let levels = match shape {
            "xeon-e5335" => vec![level("L1d", 32, 64, 1, 7.0), level("L2", 4096, 64, 2, 120.0)],
            "opteron-2350" => {
                vec![level("L1d", 64, 64, 1, 7.0), level("L2", 512, 64, 1, 23.0), level("L3", 2048, 64, 4, 120.0)]
            }
            "niagara2" | "niagara-2" => vec![level("L1d", 8, 16, 8, 20.0), level("L2", 4096, 64, 64, 120.0)],
            _ => {
                let d = topology.depth();
                let smt = d >= 3 && topology.levels()[d - 1].name == "thread";
                let l1 = if smt { topology.span(d - 1) } else { 1 };
                let llc = if d >= 2 { topology.span(1) } else { topology.span(0) };
                vec![level("L1d", 32, 64, l1, 7.0), level("LLC", 1024 * u64::from(llc), 64, llc, 120.0)]
            }
        };
        Self { levels }
    }

    /// The data and unified caches Linux lists for one CPU, as levels in order, with these miss
    /// penalties (one per data level, nearest first). Instruction caches are left out. Fails,
    /// saying which entry, on a size or CPU list it cannot read, a CPU list that is not one
    /// consecutive range (the model shares a cache among consecutive leaves), or a penalty
    /// count that does not match.
    pub fn from_sys(caches: &[SysCache], miss_ns: &[f64]) -> Result<Self, String> {
        let mut data: Vec<&SysCache> = caches.iter().filter(|c| c.kind != "Instruction").collect();
        data.sort_by_key(|c| c.level);
        if data.len() != miss_ns.len() {
            return Err(format!(
                "{} data or unified cache levels but {} miss penalties: give one penalty per level",
                data.len(),
                miss_ns.len()
            ));
        }
        let levels = data
            .iter()
            .zip(miss_ns)
            .map(|(c, &miss_ns)| {
                let size = parse_sys_size(&c.size)
                    .ok_or_else(|| format!("L{} {}: size {:?} is not a size like 48K", c.level, c.kind, c.size))?;
                let shared_by = consecutive_cpus(&c.shared_cpu_list).ok_or_else(|| {
                    format!(
                        "L{} {}: shared_cpu_list {:?} is not one range of CPUs like 0-1 (the model shares a cache among consecutive cores)",
                        c.level, c.kind, c.shared_cpu_list
                    )
                })?;
                let name = if c.kind == "Data" { format!("L{}d", c.level) } else { format!("L{}", c.level) };
                Ok(CacheLevel { name, size, line: c.line, shared_by, miss_ns })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self { levels })
    }

    /// Checks that every level's sharing divides the leaves and sizes and lines are positive.
    pub fn validate(&self, leaves: u32) -> Result<(), String> {
        if self.levels.is_empty() {
            return Err("a cache hierarchy needs at least one level".into());
        }
        for l in &self.levels {
            if l.size == 0 || l.line == 0 || l.shared_by == 0 || !leaves.is_multiple_of(l.shared_by) {
                return Err(format!(
                    "cache level {}: size {} B, line {} B, shared by {} of {leaves} leaves; sizes and lines must be positive and the sharing must divide the leaves",
                    l.name, l.size, l.line, l.shared_by
                ));
            }
            if !(l.miss_ns.is_finite() && l.miss_ns >= 0.0) {
                return Err(format!(
                    "cache level {}: miss penalty {} ns must be a non-negative number",
                    l.name, l.miss_ns
                ));
            }
        }
        Ok(())
    }
}

/// One cache as Linux lists it under `/sys/devices/system/cpu/cpuN/cache/indexK/`, the files'
/// text as read (trimmed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysCache {
    /// `level`: 1, 2, 3.
    pub level: u32,
    /// `type`: Data, Instruction or Unified.
    pub kind: String,
    /// `size`: e.g. 48K, 2048K, 266240K.
    pub size: String,
    /// `coherency_line_size`, bytes.
    pub line: u64,
    /// `shared_cpu_list`: e.g. 0, 0-1.
    pub shared_cpu_list: String,
}

/// `48K`, `2048K`, `1M`, `512` (bytes).
fn parse_sys_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok().filter(|&n| n > 0)?.checked_mul(unit)
}

/// How many CPUs `0-1`, `4`, `2-3` names, if it is one range.
fn consecutive_cpus(list: &str) -> Option<u32> {
    let list = list.trim();
    let (a, b) = list.split_once('-').unwrap_or((list, list));
    let (a, b) = (a.parse::<u32>().ok()?, b.parse::<u32>().ok()?);
    (b >= a).then(|| b - a + 1)
}

/// One cache instance: an LRU of footprints by bytes.
#[derive(Clone, Debug)]
pub struct Lru {
    capacity: u64,
    used: u64,
    clock: u64,
    /// Key → (last use, resident bytes).
    by_key: BTreeMap<u64, (u64, u64)>,
    /// Last use → key, oldest first.
    by_age: BTreeMap<u64, u64>,
}

impl Lru {
    /// An empty cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Self { capacity, used: 0, clock: 0, by_key: BTreeMap::new(), by_age: BTreeMap::new() }
    }

    /// Bytes of `key`'s footprint resident now.
    pub fn resident(&self, key: u64) -> u64 {
        self.by_key.get(&key).map_or(0, |&(_, b)| b)
    }

    /// Drops `key`'s footprint, if held.
    pub fn remove(&mut self, key: u64) {
        if let Some((age, b)) = self.by_key.remove(&key) {
            self.by_age.remove(&age);
            self.used -= b;
        }
    }

    /// Bytes held, never above the capacity.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Makes `key` the most recent footprint with `bytes` bytes (at most the capacity), evicting
    /// the least recent others until it fits.
    pub fn touch(&mut self, key: u64, bytes: u64) {
        if let Some((age, b)) = self.by_key.remove(&key) {
            self.by_age.remove(&age);
            self.used -= b;
        }
        let bytes = bytes.min(self.capacity);
        while self.used + bytes > self.capacity {
            let Some((_, old)) = self.by_age.pop_first() else { break };
            let (_, b) = self.by_key.remove(&old).expect("both maps hold the same keys");
            self.used -= b;
        }
        self.clock += 1;
        self.by_key.insert(key, (self.clock, bytes));
        self.by_age.insert(self.clock, key);
        self.used += bytes;
    }
}

/// What one access cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Access {
    /// Lines missed at each level (up to four levels; unused ones are 0).
    pub misses: [u64; 4],
    /// Total miss time in nanoseconds.
    pub ns: f64,
}

/// The caches' state during a run: one [`Lru`] per cache instance of each level.
#[derive(Clone, Debug)]
pub struct Caches {
    hierarchy: CacheHierarchy,
    /// Per level, its instances.
    instances: Vec<Vec<Lru>>,
}

impl Caches {
    /// Cold caches for `leaves` leaves.
    ///
    /// # Panics
    ///
    /// If the hierarchy does not [validate](CacheHierarchy::validate) for `leaves`.
    pub fn new(hierarchy: CacheHierarchy, leaves: u32) -> Self {
        hierarchy.validate(leaves).expect("a validated hierarchy");
        let instances =
            hierarchy.levels.iter().map(|l| vec![Lru::new(l.size); (leaves / l.shared_by) as usize]).collect();
        Self { hierarchy, instances }
    }

    /// The hierarchy.
    pub fn hierarchy(&self) -> &CacheHierarchy {
        &self.hierarchy
    }

    /// The cache leaf `leaf` uses at level `level`.
    pub fn cache(&self, level: usize, leaf: u32) -> &Lru {
        &self.instances[level][(leaf / self.hierarchy.levels[level].shared_by) as usize]
    }

    /// Serves footprint `key` of `bytes` bytes on `leaf`: the misses it takes and their cost,
    /// after which it is the most recent footprint in every cache on the leaf's path.
    pub fn access(&mut self, leaf: u32, key: u64, bytes: u64) -> Access {
        let mut out = Access::default();
        let mut found = 0;
        for (d, l) in self.hierarchy.levels.iter().enumerate() {
            let cache = &mut self.instances[d][(leaf / l.shared_by) as usize];
            found = found.max(cache.resident(key));
            let lines = (bytes - found.min(bytes)).div_ceil(l.line);
            if d < out.misses.len() {
                out.misses[d] = lines;
            }
            out.ns += lines as f64 * l.miss_ns;
            cache.touch(key, bytes);
        }
        out
    }

    /// Writes footprint `key` of `bytes` bytes on `leaf`: costs as [`access`](Self::access) (a
    /// write allocates, fetching the lines it does not hold), then drops the footprint from every
    /// cache not on the leaf's path, as a write invalidates other copies (MESI). Without this a
    /// footprint written on one core and read on another would find a stale copy there warm.
    pub fn write(&mut self, leaf: u32, key: u64, bytes: u64) -> Access {
        let out = self.access(leaf, key, bytes);
        for (d, l) in self.hierarchy.levels.iter().enumerate() {
            let own = (leaf / l.shared_by) as usize;
            for (i, cache) in self.instances[d].iter_mut().enumerate() {
                if i != own {
                    cache.remove(key);
                }
            }
        }
        out
    }

    /// Time to hand `bytes` bytes written on leaf `from` to leaf `to`: each line at the penalty of
    /// the lowest level they share (the line is found there after missing the levels below), or
    /// memory's when they share none. Zero on the same leaf.
    pub fn transfer_ns(&self, from: u32, to: u32, bytes: u64) -> f64 {
        if from == to {
            return 0.0;
        }
        let mut ns = 0.0;
        for l in &self.hierarchy.levels {
            if from / l.shared_by == to / l.shared_by {
                return ns;
            }
            ns += bytes.div_ceil(l.line) as f64 * l.miss_ns;
        }
        ns
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn xeon() -> Caches {
        let t = Topology::parse("xeon-e5335").unwrap();
        Caches::new(CacheHierarchy::data_sheet(&t), t.leaves())
    }

    #[test]
    fn a_footprint_served_twice_on_one_core_is_warm() {
        let mut c = xeon();
        let cold = c.access(0, 1, 8192);
        assert_eq!(cold.misses[..2], [128, 128]);
        assert_eq!(cold.ns, 128.0 * 7.0 + 128.0 * 120.0);
        assert_eq!(c.access(0, 1, 8192), Access::default());
    }

    #[test]
    fn a_core_sharing_the_l2_finds_it_l1_cold_but_l2_warm() {
        let mut c = xeon();
        c.access(0, 1, 8192);
        let sibling = c.access(1, 1, 8192);
        assert_eq!(sibling.misses[..2], [128, 0]);
        let other_pair = c.access(2, 1, 8192);
        assert_eq!(other_pair.misses[..2], [128, 128], "cores 0 and 2 share no cache in this numbering");
    }

    #[test]
    fn enough_other_footprints_make_it_cold_again() {
        let mut c = xeon();
        c.access(0, 1, 8192);
        for k in 2..600 {
            c.access(0, k, 8192);
        }
        assert_eq!(c.access(0, 1, 8192).misses[..2], [128, 128]);
    }

    #[test]
    fn sibling_threads_evict_each_other_from_their_shared_l1() {
        let t = Topology::parse("niagara2").unwrap();
        let mut c = Caches::new(CacheHierarchy::data_sheet(&t), t.leaves());
        c.access(0, 1, 4096);
        assert_eq!(c.access(0, 1, 4096).ns, 0.0);
        c.access(5, 2, 8192); // another thread of core 0 fills the 8 KiB L1d
        let back = c.access(0, 1, 4096);
        assert_eq!(back.misses[..2], [256, 0], "L1d-cold, still in the shared L2");
        assert_eq!(c.access(8, 1, 4096).misses[..2], [256, 0], "core 1: own L1d, same L2");
    }

    #[test]
    fn a_write_invalidates_other_copies_but_not_the_shared_l2() {
        let mut c = xeon();
        c.access(4, 1, 8192);
        c.access(1, 1, 8192);
        c.write(0, 1, 8192);
        assert_eq!(c.access(4, 1, 8192).misses[..2], [128, 128], "core 4's copy was stale");
        c.write(0, 1, 8192);
        assert_eq!(c.access(1, 1, 8192).misses[..2], [128, 0], "core 1 shares core 0's L2");
    }

    #[test]
    fn transfers_cost_the_lowest_shared_level() {
        let c = xeon();
        assert_eq!(c.transfer_ns(0, 0, 6400), 0.0);
        assert_eq!(c.transfer_ns(0, 1, 6400), 100.0 * 7.0);
        assert_eq!(c.transfer_ns(0, 4, 6400), 100.0 * 127.0);
    }

    #[test]
    fn every_preset_and_generic_spec_validates() {
        for spec in ["xeon-e5335", "opteron-2350", "niagara2", "2x4x2", "4x2", "flat:6", "8", "xeon-e5335@10,3,2"] {
            let t = Topology::parse(spec).unwrap();
            CacheHierarchy::data_sheet(&t).validate(t.leaves()).unwrap_or_else(|e| panic!("{spec}: {e}"));
        }
        assert_eq!(CacheHierarchy::data_sheet(&Topology::parse("2x4x2").unwrap()).levels[0].shared_by, 2);
    }

    proptest! {
        #[test]
        fn capacity_is_never_exceeded(ops in proptest::collection::vec((0u32..8, 0u64..40, 1u64..3_000_000), 1..200)) {
            let mut c = xeon();
            for (leaf, key, bytes) in ops {
                c.access(leaf, key, bytes);
                for (d, l) in c.hierarchy().levels.clone().iter().enumerate() {
                    for w in 0..8 {
                        prop_assert!(c.cache(d, w).used() <= l.size);
                    }
                }
                // Just served: fully resident, up to the capacity, everywhere on its path.
                prop_assert_eq!(c.cache(0, leaf).resident(key), bytes.min(32 * 1024));
            }
        }

        #[test]
        fn a_repeat_never_costs_more_than_the_first(leaf in 0u32..8, other in 0u32..8, bytes in 1u64..100_000) {
            let mut c = xeon();
            let first = c.access(leaf, 7, bytes).ns;
            let second = c.access(other, 7, bytes).ns;
            prop_assert!(second <= first);
        }
    }
}
