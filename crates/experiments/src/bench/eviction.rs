//! `switchyard bench eviction`: the core cache's eviction policies (LRU, TinyLFU, S3-FIFO,
//! SIEVE; `switchyard_core::cache::evict`) beside moka at the same byte budget, on the same
//! request traces, in the same run: hit ratio, byte hit ratio and the cost of a lookup.
//!
//! Traces (deterministic from the seed): `objects` objects whose sizes are log-normal (median
//! 4 KiB, σ = 1.5, clipped to 64 B–1 MiB: a web mix of small and occasional large objects),
//! asked for by
//! - Zipf popularity, α ∈ {0.6, 0.8, 1.0, 1.2};
//! - Zipf (α = 1.0) with scans mixed in: a quarter of the requests are runs of 2,000 objects
//!   asked for once each, in order, never again (a backup or a crawler passing);
//! - Zipf (α = 1.0) whose popularity shifts: five phases, each moving the ranking a fifth of
//!   the objects along, so what was hot cools and what was lukewarm heats.
//!
//! Each cache holds 1 %, 10 % or 50 % of the trace's working set (the bytes of every object it
//! asks for). A request is a lookup; a miss inserts the object with its size as its weight.
//!
//! moka (`moka::sync::Cache` with a weigher, `max_capacity` the same bytes) applies its
//! admission and evictions in batches, later than the insert that caused them: left alone it
//! may hold more than its budget for a while and count hits it would not have. So after every
//! insert we call `run_pending_tasks()`, which applies them before the next request; its hit
//! ratio is then that of its policy (TinyLFU admission of a newcomer over its victims summed,
//! no window). The timed lookups below do not include those calls.
//!
//! Lookup cost: after a trace is replayed, the first `timed` requests of it are looked up
//! again (no inserts) and timed, ours (`Evictor::touch`: the hash index and the policy's
//! update for a hit) and moka's `get`, alternating seven times and the median kept; timed in
//! the measuring thread's CPU time, which waits for a core on a loaded machine do not move;
//! reported as a ratio to moka's in the same run, never as a bound. That times the policies
//! alone; a gateway hit goes through the core `Cache` (its one hash index, whose entry holds
//! the key's slot in the policy), so [`hot_lookup`] times that too, at 100 to 1,000,000 hot
//! keys, beside moka's `get`.
//!
//! Prefix purge: [`prefix_purge`] times one `Cache::invalidate_run` at 100,000 and 1,000,000
//! stored entries, beside a scan of a `Vec` of the keys (what any full scan costs at least)
//! and what a sorted side index would do instead (its purge, and its cost to every fill and
//! eviction).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal, Zipf};
use switchyard_core::cache::{Eviction, Evictor};

use crate::report::{ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec, Value};

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Requests per trace.
    pub requests: usize,
    /// Objects the Zipf popularity ranges over.
    pub objects: usize,
    /// Cache sizes, as fractions of the working set's bytes.
    pub fractions: Vec<f64>,
    /// Requests looked up again, timed, per run (0: no timing).
    pub timed: usize,
    /// Seeds the traces (and the policies' hashes).
    pub seed: u64,
    /// Hot-key counts at which the gateway's hit is timed beside moka's get (skipped when
    /// `timed` is 0).
    pub hot_keys: Vec<usize>,
    /// Stored entries at which one prefix purge is timed (skipped when `timed` is 0).
    pub purge_stored: Vec<usize>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            requests: 200_000,
            objects: 20_000,
            fractions: vec![0.01, 0.10, 0.50],
            timed: 50_000,
            seed: 1,
            hot_keys: vec![100, 10_000, 1_000_000],
            purge_stored: vec![100_000, 1_000_000],
        }
    }
}

/// A workload family.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Workload {
    /// Zipf popularity of exponent α.
    Zipf(f64),
    /// Zipf (α = 1.0) with one-time scans mixed in.
    ZipfScan,
    /// Zipf (α = 1.0) whose ranking shifts in phases.
    Shifting,
}

/// Zipf's exponent under the scans and the shifts.
const BASE_ALPHA: f64 = 1.0;
/// Objects per scan, and the share of requests that are scans.
const SCAN_RUN: usize = 2_000;
const SCAN_SHARE: f64 = 0.25;
/// Phases of the shifting trace.
const PHASES: usize = 5;

impl Workload {
    /// The workloads `bench eviction` runs.
    pub const ALL: [Self; 6] =
        [Self::Zipf(0.6), Self::Zipf(0.8), Self::Zipf(1.0), Self::Zipf(1.2), Self::ZipfScan, Self::Shifting];

    /// Its name in the report.
    pub fn name(self) -> String {
        match self {
            Self::Zipf(a) => format!("zipf {a:.1}"),
            Self::ZipfScan => format!("zipf {BASE_ALPHA:.1} + scan"),
            Self::Shifting => format!("zipf {BASE_ALPHA:.1} shifting"),
        }
    }

    /// Its family, over which the goal is judged.
    pub fn family(self) -> &'static str {
        match self {
            Self::Zipf(_) => "zipf",
            Self::ZipfScan => "zipf + scan",
            Self::Shifting => "shifting",
        }
    }
}

/// A trace: object ids asked for, and each object's size.
pub struct Trace {
    /// Object ids, in request order.
    pub requests: Vec<u32>,
    /// Sizes in bytes, by id.
    pub sizes: Vec<u32>,
    /// The bytes of every distinct object asked for.
    pub working_set: u64,
}

/// The trace of `w` under `s`, the same for the same seed.
pub fn trace(w: Workload, s: &Setup) -> Trace {
    let mut rng = ChaCha8Rng::seed_from_u64(s.seed);
    let alpha = match w {
        Workload::Zipf(a) => a,
        _ => BASE_ALPHA,
    };
    let n = s.objects.max(1);
    let zipf = Zipf::new(n as f64, alpha).expect("α > 0 and objects ≥ 1");
    let mut requests = Vec::with_capacity(s.requests);
    let mut next_scan = n as u32;
    let phase_len = s.requests.div_ceil(PHASES).max(1);
    while requests.len() < s.requests {
        let i = requests.len();
        let rank = zipf.sample(&mut rng) as usize - 1;
        match w {
            Workload::ZipfScan if rand::RngExt::random::<f64>(&mut rng) < SCAN_SHARE / SCAN_RUN as f64 => {
                // A run of objects asked for once each: a scan starts here.
                let run = SCAN_RUN.min(s.requests - i);
                requests.extend(next_scan..next_scan + run as u32);
                next_scan += run as u32;
            }
            Workload::Shifting => requests.push(((rank + (i / phase_len) * n / PHASES) % n) as u32),
            _ => requests.push(rank as u32),
        }
    }
    // ln 4096 = 12 ln 2: a median of 4 KiB.
    // Sizes drawn from their own stream, so every workload of one seed sizes object i alike.
    let mut srng = ChaCha8Rng::seed_from_u64(s.seed ^ 0x0051_57E5);
    let lognormal = LogNormal::new(12.0 * std::f64::consts::LN_2, 1.5).expect("a valid σ");
    let ids = next_scan as usize;
    let sizes: Vec<u32> = (0..ids).map(|_| lognormal.sample(&mut srng).clamp(64.0, (1 << 20) as f64) as u32).collect();
    let mut seen = vec![false; ids];
    let mut working_set = 0u64;
    for &r in &requests {
        if !std::mem::replace(&mut seen[r as usize], true) {
            working_set += u64::from(sizes[r as usize]);
        }
    }
    Trace { requests, sizes, working_set }
}

/// Who evicts: one of ours, or moka.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    /// A core policy.
    Ours(Eviction),
    /// moka's sync cache.
    Moka,
}

impl Contender {
    /// Ours, then moka.
    pub const ALL: [Self; 5] = [
        Self::Ours(Eviction::Lru),
        Self::Ours(Eviction::TinyLfu),
        Self::Ours(Eviction::S3Fifo),
        Self::Ours(Eviction::Sieve),
        Self::Moka,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ours(e) => e.name(),
            Self::Moka => "moka",
        }
    }
}

/// One contender's figures on one trace at one size.
#[derive(Clone, Copy, Debug)]
pub struct Outcome {
    /// Who.
    pub contender: Contender,
    /// Hits over requests, in percent.
    pub hit_ratio: f64,
    /// Bytes answered from the cache over bytes asked for, in percent.
    pub byte_hit_ratio: f64,
    /// The most bytes held at any point (sampled after every request).
    pub peak_bytes: u64,
    /// ns per lookup (median of the timed passes, in CPU time), if timed.
    pub ns_per_get: Option<f64>,
}

/// One trace at one size: every contender.
#[derive(Clone, Debug)]
pub struct Run {
    /// The workload.
    pub workload: Workload,
    /// The cache's share of the working set.
    pub fraction: f64,
    /// The byte budget.
    pub capacity: u64,
    /// Per contender, in [`Contender::ALL`]'s order.
    pub outcomes: Vec<Outcome>,
}

impl Run {
    /// The contender with the highest hit ratio.
    pub fn best(&self) -> &Outcome {
        self.outcomes.iter().max_by(|a, b| a.hit_ratio.total_cmp(&b.hit_ratio)).expect("contenders")
    }

    /// A contender's outcome.
    pub fn of(&self, c: Contender) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.contender == c)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn timed(rounds: usize, mut f: impl FnMut() -> usize) -> Option<f64> {
    if rounds == 0 {
        return None;
    }
    let t = super::thread_cpu();
    std::hint::black_box(f());
    Some((super::thread_cpu() - t) * 1e9 / rounds as f64)
}

fn replay_ours(kind: Eviction, t: &Trace, capacity: u64, seed: u64) -> (Evictor<u32>, Outcome) {
    let mut c = Evictor::new(kind, capacity, seed);
    let (mut hits, mut hit_bytes, mut bytes, mut peak) = (0u64, 0u64, 0u64, 0u64);
    for &k in &t.requests {
        let w = u64::from(t.sizes[k as usize]);
        bytes += w;
        if c.touch(&k) {
            hits += 1;
            hit_bytes += w;
        } else {
            c.insert(k, w);
        }
        peak = peak.max(c.weight());
    }
    let n = t.requests.len().max(1) as f64;
    let o = Outcome {
        contender: Contender::Ours(kind),
        hit_ratio: 100.0 * hits as f64 / n,
        byte_hit_ratio: 100.0 * hit_bytes as f64 / bytes.max(1) as f64,
        peak_bytes: peak,
        ns_per_get: None,
    };
    (c, o)
}

fn replay_moka(t: &Trace, capacity: u64) -> (moka::sync::Cache<u32, u32>, Outcome) {
    let c: moka::sync::Cache<u32, u32> =
        moka::sync::Cache::builder().max_capacity(capacity).weigher(|_, w: &u32| *w).build();
    let (mut hits, mut hit_bytes, mut bytes, mut peak) = (0u64, 0u64, 0u64, 0u64);
    for &k in &t.requests {
        let w = t.sizes[k as usize];
        bytes += u64::from(w);
        if c.get(&k).is_some() {
            hits += 1;
            hit_bytes += u64::from(w);
        } else {
            c.insert(k, w);
            // Apply the admission and evictions this insert caused before the next request.
            c.run_pending_tasks();
        }
        peak = peak.max(c.weighted_size());
    }
    let n = t.requests.len().max(1) as f64;
    let o = Outcome {
        contender: Contender::Moka,
        hit_ratio: 100.0 * hits as f64 / n,
        byte_hit_ratio: 100.0 * hit_bytes as f64 / bytes.max(1) as f64,
        peak_bytes: peak,
        ns_per_get: None,
    };
    (c, o)
}

/// Timed passes over the probe per contender, alternating; the median is kept.
const PASSES: usize = 7;

/// What a run of the bench measured.
#[derive(Clone, Debug)]
pub struct Results {
    /// Every workload at every size.
    pub runs: Vec<Run>,
    /// The gateway's hit beside moka's get, per hot-key count.
    pub hot: Vec<HotLookup>,
    /// One prefix purge, per stored-entry count.
    pub purges: Vec<PrefixPurge>,
}

/// Every workload at every size, every contender; then (when timing) the hot-key lookups and
/// the prefix purges. `progress` advances per trace and size, and per timed point.
pub fn run(s: &Setup, progress: &dyn Progress) -> Results {
    let runs = replay_all(s, progress);
    let timing = s.timed > 0;
    let (mut hot, mut purges) = (Vec::new(), Vec::new());
    if timing {
        progress.stage("hot-key lookups and prefix purges", (s.hot_keys.len() + s.purge_stored.len()) as u64);
        for &k in &s.hot_keys {
            hot.push(hot_lookup(k));
            progress.advance(1);
        }
        for &n in &s.purge_stored {
            purges.push(prefix_purge(n));
            progress.advance(1);
        }
    }
    Results { runs, hot, purges }
}

fn replay_all(s: &Setup, progress: &dyn Progress) -> Vec<Run> {
    let mut runs = Vec::new();
    progress.stage("traces × cache sizes", (Workload::ALL.len() * s.fractions.len()) as u64);
    for w in Workload::ALL {
        let t = trace(w, s);
        let probe = &t.requests[..s.timed.min(t.requests.len())];
        for &fraction in &s.fractions {
            let capacity = ((t.working_set as f64 * fraction) as u64).max(1);
            let mut ours: Vec<(Evictor<u32>, Outcome)> =
                Eviction::ALL.iter().map(|&e| replay_ours(e, &t, capacity, s.seed)).collect();
            let (moka, mut moka_outcome) = replay_moka(&t, capacity);
            let (mut theirs, mut mine): (Vec<f64>, Vec<Vec<f64>>) = (Vec::new(), vec![Vec::new(); ours.len()]);
            for _ in 0..if probe.is_empty() { 0 } else { PASSES } {
                for (i, (c, _)) in ours.iter_mut().enumerate() {
                    mine[i].extend(timed(probe.len(), || probe.iter().filter(|k| c.touch(k)).count()));
                }
                theirs.extend(timed(probe.len(), || probe.iter().filter(|&k| moka.get(k).is_some()).count()));
            }
            let mut outcomes: Vec<Outcome> = ours
                .into_iter()
                .zip(mine)
                .map(|((_, mut o), ns)| {
                    o.ns_per_get = (!ns.is_empty()).then(|| median(ns));
                    o
                })
                .collect();
            moka_outcome.ns_per_get = (!theirs.is_empty()).then(|| median(theirs));
            outcomes.push(moka_outcome);
            runs.push(Run { workload: w, fraction, capacity, outcomes });
            progress.advance(1);
        }
    }
    runs
}

/// The gateway's hit, at `keys` hot keys: ns per lookup of the core's `Cache` (the gateway's
/// way: under a lock, a clock reading, and `use_entry`, one lookup through the entries' one
/// index that reads the entry and counts its use in the eviction policy by its slot), the same
/// `use_entry` without the lock and the clock, and moka's `get`.
#[derive(Clone, Copy, Debug)]
pub struct HotLookup {
    /// Hot keys, every one held and looked up in turn.
    pub keys: usize,
    /// ns per hit: lock, clock and `Cache::use_entry`.
    pub hit_ns: f64,
    /// ns per `Cache::use_entry` alone.
    pub use_entry_ns: f64,
    /// ns per moka `get`.
    pub moka_ns: f64,
}

/// Lookups per timed round (at least one pass over the keys).
const HOT_LOOKUPS_PER_ROUND: usize = 400_000;

/// The hot-key lookups at `keys` keys: URL-like keys as the gateway holds them, the core's
/// cache bounded by the default policy (with room for them all, so every lookup is a hit) and
/// moka bounded the same way, with a TTL (it reads its clock on every `get`, as the gateway does
/// for freshness);
/// the median of [`PASSES`] alternating rounds, in the thread's CPU time.
pub fn hot_lookup(keys: usize) -> HotLookup {
    use switchyard_core::Nanos;
    use switchyard_core::cache::{AgeFrom, Alone, Cache, Lookup, Reading};
    let names: Vec<String> = (0..keys).map(|i| format!("/v1/sensors/{i}")).collect();
    let mut ours: Cache<String, (), Alone, u64> =
        Cache::new(Lookup::Piggyback, Nanos(u64::MAX / 4), AgeFrom::Load, Alone).bounded_by(
            u64::MAX,
            Eviction::DEFAULT,
            1,
        );
    for (i, k) in names.iter().enumerate() {
        ours.fill_weighted(k.clone(), None, Reading { value: i as u64, sensed_at: Nanos(1) }, Nanos(1), 1);
    }
    // Bounded as ours is, with room for every key: moka 0.12 turns on its frequency sketch (and
    // so counts every `get`, as our TinyLFU does) only in a cache with a `max_capacity`, once it
    // is half full. Built unbounded, as this table had it until issue 38's lookup was traced,
    // moka's get counted nothing and the comparison was not like for like.
    let moka: moka::sync::Cache<String, u64> = moka::sync::Cache::builder()
        .max_capacity(2 * keys as u64)
        .time_to_live(std::time::Duration::from_secs(3600))
        .build();
    for (i, k) in names.iter().enumerate() {
        moka.insert(k.clone(), i as u64);
    }
    moka.run_pending_tasks();
    assert_eq!(moka.entry_count(), keys as u64, "every key fits in moka, so that every lookup is a hit");
    let rounds = HOT_LOOKUPS_PER_ROUND.div_ceil(keys.max(1));
    let time = |f: &mut dyn FnMut(&String) -> u64| {
        let t = super::thread_cpu();
        let mut sum = 0u64;
        for _ in 0..rounds {
            for k in &names {
                sum = sum.wrapping_add(f(k));
            }
        }
        std::hint::black_box(sum);
        (super::thread_cpu() - t) * 1e9 / (rounds * names.len()).max(1) as f64
    };
    let locked = std::sync::Mutex::new(ours);
    let start = std::time::Instant::now();
    let mut hit = |k: &String| {
        let mut c = locked.lock().expect("not poisoned");
        std::hint::black_box(Nanos(start.elapsed().as_nanos() as u64));
        c.use_entry(k, |e| (e.reading.value, true)).unwrap_or(0)
    };
    let mut theirs = |k: &String| moka.get(k).unwrap_or(0);
    let (mut a, mut c) = (Vec::new(), Vec::new());
    // One round each unmeasured, so that neither pays for the first touch of its memory.
    time(&mut hit);
    time(&mut theirs);
    for _ in 0..PASSES {
        a.push(time(&mut hit));
        c.push(time(&mut theirs));
    }
    let mut ours = locked.into_inner().expect("not poisoned");
    let mut bare = |k: &String| ours.use_entry(k, |e| (e.reading.value, true)).unwrap_or(0);
    time(&mut bare);
    let b: Vec<f64> = (0..PASSES).map(|_| time(&mut bare)).collect();
    HotLookup { keys, hit_ns: median(a), use_entry_ns: median(b), moka_ns: median(c) }
}

/// One prefix purge at `stored` entries, and what a sorted side index would change.
#[derive(Clone, Copy, Debug)]
pub struct PrefixPurge {
    /// Entries stored before the purge.
    pub stored: usize,
    /// Entries the purge forgot (one section of [`PURGE_SECTIONS`]).
    pub purged: usize,
    /// ms per `Cache::invalidate_run` of the prefix (a scan of every stored key).
    pub purge_ms: f64,
    /// ms per scan of a `Vec` of the same keys for the prefix (the floor of any full scan).
    pub vec_scan_ms: f64,
    /// ms per purge of the prefix's range from a sorted index of the keys (`BTreeSet`).
    pub sorted_purge_ms: f64,
    /// ns a sorted index would add to every fill and eviction (an insert and a removal).
    pub sorted_upkeep_ns: f64,
}

/// Sections the purged keys are spread over (a purge forgets one, a hundredth of the keys).
pub const PURGE_SECTIONS: usize = 100;

/// Times one purge of a prefix at `stored` entries (keys `/s/<section>/<i>`, the sections
/// interleaved so the purged keys are spread through the hash index), median of [`PASSES`]
/// purges of different sections; beside a scan of a `Vec` of the keys (the peer: what any
/// full scan costs at least) and a purge of the same range from a `BTreeSet` of the keys, with
/// the ns that set adds to a fill and an eviction.
pub fn prefix_purge(stored: usize) -> PrefixPurge {
    use std::collections::BTreeSet;
    use switchyard_core::Nanos;
    use switchyard_core::cache::{AgeFrom, Alone, Cache, Lookup, Reading};
    let key = |i: usize| format!("/s/{}/{}", i % PURGE_SECTIONS, i / PURGE_SECTIONS);
    let keys: Vec<String> = (0..stored).map(key).collect();
    let mut cache: Cache<String, (), Alone, u64> =
        Cache::new(Lookup::Piggyback, Nanos(u64::MAX / 4), AgeFrom::Load, Alone).bounded_by(
            u64::MAX,
            Eviction::DEFAULT,
            1,
        );
    for (i, k) in keys.iter().enumerate() {
        cache.fill_weighted(k.clone(), None, Reading { value: i as u64, sensed_at: Nanos(1) }, Nanos(1), 1);
    }
    let mut sorted: BTreeSet<String> = keys.iter().cloned().collect();
    let (mut purge, mut scan, mut range, mut purged) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for section in 0..PASSES.min(PURGE_SECTIONS) {
        let prefix = format!("/s/{section}/");
        let t = super::thread_cpu();
        purged = cache.invalidate_run(&prefix, |k| k.starts_with(prefix.as_str()), Nanos(2));
        purge.push((super::thread_cpu() - t) * 1e3);
        let t = super::thread_cpu();
        std::hint::black_box(keys.iter().filter(|k| k.starts_with(prefix.as_str())).count());
        scan.push((super::thread_cpu() - t) * 1e3);
        let t = super::thread_cpu();
        let gone: Vec<String> =
            sorted.range(prefix.clone()..).take_while(|k| k.starts_with(prefix.as_str())).cloned().collect();
        for k in &gone {
            sorted.remove(k);
        }
        range.push((super::thread_cpu() - t) * 1e3);
    }
    // What the set costs a fill and an eviction: a removal and an insert of a key, on a set
    // of this size (keys of sections not purged above).
    let churn: Vec<&String> = keys.iter().skip(PURGE_SECTIONS - 1).step_by(PURGE_SECTIONS).take(10_000).collect();
    let t = super::thread_cpu();
    for k in &churn {
        sorted.remove(*k);
        sorted.insert((*k).clone());
    }
    let upkeep = (super::thread_cpu() - t) * 1e9 / churn.len().max(1) as f64;
    PrefixPurge {
        stored,
        purged,
        purge_ms: median(purge),
        vec_scan_ms: median(scan),
        sorted_purge_ms: median(range),
        sorted_upkeep_ns: upkeep,
    }
}

/// The goal (issue 38): the default's hit ratio within this many points of the best, on
/// each family.
pub const GOAL_POINTS: f64 = 1.0;

/// Hit ratios, a row per trace and size.
pub const HITS: TableSpec = TableSpec::new(
    "hit_ratio",
    "Hit ratio (%) by trace and cache size (share of the working set's bytes)",
    &[
        ColumnSpec::text("workload"),
        ColumnSpec::text("family"),
        ColumnSpec::num("cache_pct", 0).header("cache").unit("%").about("the cache's share of the working set's bytes"),
        ColumnSpec::int("capacity").unit("B").about("the byte budget, the same for every contender"),
        ColumnSpec::num("lru", 2).unit("%"),
        ColumnSpec::num("tinylfu", 2).unit("%"),
        ColumnSpec::num("s3fifo", 2).unit("%"),
        ColumnSpec::num("sieve", 2).unit("%"),
        ColumnSpec::num("moka", 2).unit("%").about("moka's sync cache, run_pending_tasks() after each insert"),
        ColumnSpec::text("best").about("the contender with the highest hit ratio"),
        ColumnSpec::num("default_minus_best", 2)
            .header("default − best")
            .unit("points")
            .signed()
            .about("the default policy's hit ratio less the best's"),
    ],
);

/// Byte hit ratios, a row per trace and size.
pub const BYTE_HITS: TableSpec = TableSpec::new(
    "byte_hit_ratio",
    "Byte hit ratio (%): bytes answered from the cache over bytes asked for",
    &[
        ColumnSpec::text("workload"),
        ColumnSpec::num("cache_pct", 0).header("cache").unit("%"),
        ColumnSpec::num("lru", 2).unit("%"),
        ColumnSpec::num("tinylfu", 2).unit("%"),
        ColumnSpec::num("s3fifo", 2).unit("%"),
        ColumnSpec::num("sieve", 2).unit("%"),
        ColumnSpec::num("moka", 2).unit("%"),
    ],
);

/// Lookup cost against moka's, a row per trace and size.
pub const LOOKUPS: TableSpec = TableSpec::new(
    "lookup_cost",
    "Lookup cost: ns per get, ours over moka's in the same run (lower is cheaper)",
    &[
        ColumnSpec::text("workload"),
        ColumnSpec::num("cache_pct", 0).header("cache").unit("%"),
        ColumnSpec::num("moka_ns", 1).header("moka").unit("ns/get"),
        ColumnSpec::num("lru", 2).header("lru/moka"),
        ColumnSpec::num("tinylfu", 2).header("tinylfu/moka"),
        ColumnSpec::num("s3fifo", 2).header("s3fifo/moka"),
        ColumnSpec::num("sieve", 2).header("sieve/moka"),
    ],
)
.optional();

/// The gateway's hit at a few hot-key counts, beside moka's get.
pub const HOT: TableSpec = TableSpec::new(
    "hot_lookups",
    "The gateway's hit (the core Cache's use_entry through its one index) at 100 to 1,000,000 hot keys, beside moka's get",
    &[
        ColumnSpec::int("keys").about("hot keys, each held and looked up in turn"),
        ColumnSpec::num("hit_ns", 1)
            .header("hit")
            .unit("ns")
            .about("a gateway hit: the cache's lock, a clock reading and Cache::use_entry (the entry read and its use counted by slot)"),
        ColumnSpec::num("use_entry_ns", 1).header("use_entry").unit("ns").about("Cache::use_entry alone"),
        ColumnSpec::num("moka_ns", 1).header("moka get").unit("ns").about("moka::sync::Cache::get, with a TTL"),
        ColumnSpec::num("vs_moka", 2).header("hit/moka").about("the gateway's hit over moka's get (goal: at most 1)"),
    ],
)
.optional();

/// One prefix purge per stored-entry count.
pub const PURGES: TableSpec = TableSpec::new(
    "prefix_purge",
    "One prefix purge (a hundredth of the keys) at 100,000 and 1,000,000 stored entries, beside a scan of a Vec of the keys and a sorted index",
    &[
        ColumnSpec::int("stored").about("entries stored before the purge"),
        ColumnSpec::int("purged").about("entries the purge forgot"),
        ColumnSpec::num("purge_ms", 2)
            .header("purge")
            .unit("ms")
            .about("Cache::invalidate_run: a scan of every stored key, then the purged forgotten"),
        ColumnSpec::num("vec_scan_ms", 2).header("Vec scan").unit("ms").about("the same prefix tested on a Vec of the keys"),
        ColumnSpec::num("vs_vec_scan", 2).header("purge/scan"),
        ColumnSpec::num("sorted_purge_ms", 3)
            .header("sorted index")
            .unit("ms")
            .about("the prefix's range found and removed in a BTreeSet of the keys"),
        ColumnSpec::num("sorted_upkeep_ns", 0)
            .header("sorted upkeep")
            .unit("ns")
            .about("what that set adds to every fill and eviction: a key copied and inserted, one removed"),
    ],
)
.optional();

/// The verdict per family.
pub const FAMILIES: TableSpec = TableSpec::new(
    "families",
    "Per family: the best contender, and the default's distance from the best at its worst",
    &[
        ColumnSpec::text("family"),
        ColumnSpec::text("best")
            .about("the contender with the highest mean hit ratio over the family's traces and sizes"),
        ColumnSpec::num("best_mean", 2).header("best mean").unit("%"),
        ColumnSpec::num("default_mean", 2).header("default mean").unit("%"),
        ColumnSpec::num("worst_gap", 2)
            .header("default − best, worst")
            .unit("points")
            .signed()
            .about("the default's hit ratio less the best's, at the family's worst trace and size"),
        ColumnSpec::text("worst_at").header("at"),
        ColumnSpec::flag("goal_met")
            .header("within 1 point")
            .about("the default within 1 point of the best everywhere in the family"),
        ColumnSpec::num("lookup_vs_moka", 2)
            .header("lookup/moka")
            .about("the default's ns per get over moka's, the family's median"),
    ],
);

/// What `bench eviction` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-eviction",
    title: "Eviction policies at a byte budget: hit ratio, byte hit ratio and lookup cost, beside moka",
    tables: &[&HITS, &BYTE_HITS, &LOOKUPS, &HOT, &PURGES, &FAMILIES],
};

fn cells(r: &Run, f: impl Fn(&Outcome) -> Option<f64>) -> Vec<Value> {
    Contender::ALL.iter().map(|&c| r.of(c).and_then(&f).into()).collect()
}

/// The default's verdict on one family.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The family.
    pub family: &'static str,
    /// The contender with the highest mean hit ratio over it.
    pub best: &'static str,
    /// That mean.
    pub best_mean: f64,
    /// The default's mean.
    pub default_mean: f64,
    /// The default's hit ratio less the best's, at its worst, and where.
    pub worst_gap: f64,
    /// Where the worst gap is.
    pub worst_at: String,
    /// The default's lookup cost over moka's, the median over the family.
    pub lookup_vs_moka: Option<f64>,
}

impl Verdict {
    /// Whether the default is within [`GOAL_POINTS`] of the best everywhere in the family.
    pub fn met(&self) -> bool {
        self.worst_gap >= -GOAL_POINTS
    }
}

/// The default's verdict per family, in the order families first appear.
pub fn verdicts(runs: &[Run], default: Eviction) -> Vec<Verdict> {
    let mut families: Vec<&'static str> = Vec::new();
    for r in runs {
        if !families.contains(&r.workload.family()) {
            families.push(r.workload.family());
        }
    }
    families
        .into_iter()
        .map(|family| {
            let rows: Vec<&Run> = runs.iter().filter(|r| r.workload.family() == family).collect();
            let mean = |c: Contender| {
                rows.iter().filter_map(|r| r.of(c)).map(|o| o.hit_ratio).sum::<f64>() / rows.len() as f64
            };
            let (best, best_mean) =
                Contender::ALL.iter().map(|&c| (c, mean(c))).max_by(|a, b| a.1.total_cmp(&b.1)).expect("contenders");
            let d = Contender::Ours(default);
            let (worst_gap, worst_at) = rows
                .iter()
                .map(|r| {
                    let gap = r.of(d).map_or(f64::NAN, |o| o.hit_ratio) - r.best().hit_ratio;
                    (
                        gap,
                        format!(
                            "{}, {:.0}% ({} best)",
                            r.workload.name(),
                            r.fraction * 100.0,
                            r.best().contender.name()
                        ),
                    )
                })
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .expect("rows");
            let ratios: Vec<f64> =
                rows.iter().filter_map(|r| Some(r.of(d)?.ns_per_get? / r.of(Contender::Moka)?.ns_per_get?)).collect();
            Verdict {
                family,
                best: best.name(),
                best_mean,
                default_mean: mean(d),
                worst_gap,
                worst_at,
                lookup_vs_moka: (!ratios.is_empty()).then(|| median(ratios)),
            }
        })
        .collect()
}

/// The report of `results` under `s`, judged for `default`.
pub fn report(s: &Setup, results: &Results, default: Eviction) -> Report {
    let runs = &results.runs[..];
    let mut r = Report::new(&SPEC);
    r.param("requests", s.requests, "requests per trace")
        .param("objects", s.objects, "objects the Zipf popularity ranges over")
        .param(
            "cache_pct",
            s.fractions.iter().map(|f| format!("{:.0}", f * 100.0)).collect::<Vec<_>>().join(","),
            "cache sizes, % of the working set's bytes",
        )
        .param("timed", s.timed, "requests looked up again and timed per run (0: none)")
        .param("seed", s.seed, "seeds the traces and the policies' hashes")
        .param(
            "hot_keys",
            s.hot_keys.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
            "hot-key counts at which a gateway hit is timed (none without timing)",
        )
        .param(
            "purge_stored",
            s.purge_stored.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
            "stored entries at which a prefix purge is timed (none without timing)",
        )
        .param("default", default.name(), "the gateway's default policy, judged against the best");
    r.machine = Some(crate::machine::describe());
    let verdicts = verdicts(runs, default);
    let mut hits = Table::new(&HITS);
    let mut bytes = Table::new(&BYTE_HITS);
    let mut lookups = Table::new(&LOOKUPS);
    for run in runs {
        let pct = run.fraction * 100.0;
        let mut row: Vec<Value> =
            vec![run.workload.name().into(), run.workload.family().into(), pct.into(), run.capacity.into()];
        row.extend(cells(run, |o| Some(o.hit_ratio)));
        row.push(run.best().contender.name().into());
        row.push(run.of(Contender::Ours(default)).map(|o| o.hit_ratio - run.best().hit_ratio).into());
        hits.push(row);
        let mut row: Vec<Value> = vec![run.workload.name().into(), pct.into()];
        row.extend(cells(run, |o| Some(o.byte_hit_ratio)));
        bytes.push(row);
        let moka = run.of(Contender::Moka).and_then(|o| o.ns_per_get);
        let mut row: Vec<Value> = vec![run.workload.name().into(), pct.into(), moka.into()];
        row.extend(
            Eviction::ALL.iter().map(|&e| run.of(Contender::Ours(e)).and_then(|o| Some(o.ns_per_get? / moka?)).into()),
        );
        lookups.push(row);
    }
    let mut families = Table::new(&FAMILIES);
    for v in &verdicts {
        families.push(vec![
            v.family.into(),
            v.best.into(),
            v.best_mean.into(),
            v.default_mean.into(),
            v.worst_gap.into(),
            v.worst_at.clone().into(),
            v.met().into(),
            v.lookup_vs_moka.into(),
        ]);
    }
    for v in &verdicts {
        families.note(format!(
            "{}: best {} ({:.2}% mean); the default ({}) {:.2}%, at worst {:+.2} points from the best ({}): {}",
            v.family,
            v.best,
            v.best_mean,
            default.name(),
            v.default_mean,
            v.worst_gap,
            v.worst_at,
            if v.met() { "within 1 point" } else { "MISSES the 1-point goal" }
        ));
    }
    let missed: Vec<&str> = verdicts.iter().filter(|v| !v.met()).map(|v| v.family).collect();
    families.note(if missed.is_empty() {
        format!("issue 38's goal (the default within {GOAL_POINTS} point of the best on each family): met")
    } else {
        format!(
            "issue 38's goal (the default within {GOAL_POINTS} point of the best on each family): NOT met on {}",
            missed.join(", ")
        )
    });
    hits.note("a request is a lookup; a miss inserts the object, weighing its size in bytes");
    hits.note("the goal is judged on this table (requests): the budget is in bytes, so a policy that keeps small popular objects answers more requests and fewer bytes; the byte hit ratio table shows that trade");
    for family in verdicts.iter().map(|v| v.family) {
        let rows: Vec<&Run> = runs.iter().filter(|r| r.workload.family() == family).collect();
        let mean = |c: Contender| {
            rows.iter().filter_map(|r| r.of(c)).map(|o| o.byte_hit_ratio).sum::<f64>() / rows.len() as f64
        };
        let (best, best_mean) =
            Contender::ALL.iter().map(|&c| (c, mean(c))).max_by(|a, b| a.1.total_cmp(&b.1)).expect("contenders");
        bytes.note(format!(
            "{family}: mean byte hit ratio, the default ({}) {:.2}%, moka {:.2}%, best {} {:.2}%",
            default.name(),
            mean(Contender::Ours(default)),
            mean(Contender::Moka),
            best.name(),
            best_mean
        ));
    }
    lookups.note("ours: Evictor::touch (hash index + the policy's hit update); moka: sync Cache::get of a u32; the first `timed` requests of the trace, looked up again after it was replayed, median of 7 passes, in the thread's CPU time");
    r.tables.push(hits);
    r.tables.push(bytes);
    if s.timed > 0 {
        r.tables.push(lookups);
        let mut hot = Table::new(&HOT);
        for h in &results.hot {
            hot.push(vec![
                h.keys.into(),
                h.hit_ns.into(),
                h.use_entry_ns.into(),
                h.moka_ns.into(),
                (h.hit_ns / h.moka_ns).into(),
            ]);
        }
        hot.note(format!(
            "keys /v1/sensors/<i>; ours a Cache bounded by the default policy ({}) with room for every key, as the gateway holds its responses; moka bounded the same way (so that its frequency sketch counts every get, as ours does) and with a TTL, as it reads its clock on every get like the gateway's hit; median of {PASSES} alternating rounds of at least {HOT_LOOKUPS_PER_ROUND} lookups, in the thread's CPU time",
            Eviction::DEFAULT
        ));
        r.tables.push(hot);
        let mut purges = Table::new(&PURGES);
        for p in &results.purges {
            purges.push(vec![
                p.stored.into(),
                p.purged.into(),
                p.purge_ms.into(),
                p.vec_scan_ms.into(),
                (p.purge_ms / p.vec_scan_ms).into(),
                p.sorted_purge_ms.into(),
                p.sorted_upkeep_ns.into(),
            ]);
        }
        purges.note(format!(
            "keys /s/<section>/<i> over {PURGE_SECTIONS} sections, interleaved; each purge forgets one section (median of {PASSES}, each a different section); the purge holds the gateway's cache lock for its whole time"
        ));
        r.tables.push(purges);
    }
    r.tables.push(families);
    r.note(format!(
        "objects' sizes: log-normal, median 4 KiB, σ 1.5, clipped to 64 B–1 MiB (seed {}); scans: {:.0}% of the requests in runs of {SCAN_RUN} objects asked for once; shifting: {PHASES} phases, the ranking moved by a fifth of the objects each",
        s.seed,
        SCAN_SHARE * 100.0
    ));
    r.note("moka applies admission and evictions in batches: run_pending_tasks() after each of its inserts (not timed) makes its hit ratio its policy's, not its batching's");
    r
}
