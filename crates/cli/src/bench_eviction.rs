//! `switchyard bench eviction`'s options; the runs and their report are
//! `switchyard_experiments::bench::eviction`'s.

use anyhow::Result;
use clap::Args;
use switchyard_core::cache::Eviction;
use switchyard_experiments::bench::eviction::{self, Setup};

/// The core cache's eviction policies (lru, tinylfu, s3fifo, sieve) beside moka's sync cache at
/// the same byte budget, on the same traces, in the same run.
///
/// Traces: Zipf popularity (α 0.6, 0.8, 1.0, 1.2), Zipf 1.0 with one-time scans making a
/// quarter of the requests, and Zipf 1.0 whose ranking shifts in five phases; object sizes
/// log-normal (median 4 KiB, σ 1.5, 64 B–1 MiB), all from --seed. Caches of 1%, 10% and 50% of
/// the working set's bytes. Per trace and size: hit ratio and byte hit ratio of each, the lookup
/// cost (ns per get) of each over moka's, the gateway's hit (the core cache's use_entry) beside
/// moka's get at --hot-keys keys, one prefix purge at --purge-stored entries, and per family the best and how far the gateway's
/// default policy is from it (issue 38's goal: within 1 point on each family).
///
/// moka applies admission and evictions in batches: the bench calls its run_pending_tasks()
/// after each insert (untimed), so its hit ratio is its policy's.
///
/// Examples:
///
///   switchyard bench eviction
///   switchyard bench eviction --requests 1000000 --objects 100000
///   switchyard bench eviction --format json --out eviction/
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct EvictionBench {
    /// Requests per trace.
    #[arg(long, default_value_t = 200_000)]
    requests: usize,
    /// Objects the popularity ranges over.
    #[arg(long, default_value_t = 20_000)]
    objects: usize,
    /// Cache sizes as percentages of the working set's bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1.0, 10.0, 50.0])]
    cache_pct: Vec<f64>,
    /// Requests looked up again and timed per run (0: no lookup cost).
    #[arg(long, default_value_t = 50_000)]
    timed: usize,
    /// Seeds the traces and the policies' hashes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hot-key counts at which a gateway hit (the core cache's lock, clock and use_entry) is
    /// timed beside moka's get, comma-separated (skipped with --timed 0).
    #[arg(long, value_delimiter = ',', default_values_t = vec![100, 10_000, 1_000_000])]
    hot_keys: Vec<usize>,
    /// Stored-entry counts at which one prefix purge is timed, beside a scan of a Vec of the
    /// keys and a sorted index, comma-separated (skipped with --timed 0).
    #[arg(long, value_delimiter = ',', default_values_t = vec![100_000, 1_000_000])]
    purge_stored: Vec<usize>,
    /// The policy judged against the best (by default the gateway's default).
    #[arg(long, default_value_t = Eviction::DEFAULT)]
    judge: Eviction,
    #[command(flatten)]
    output: crate::print::Output,
}

pub(crate) fn run(a: &EvictionBench) -> Result<()> {
    if a.requests == 0 || a.objects == 0 {
        anyhow::bail!("--requests {} --objects {}: both must be at least 1", a.requests, a.objects);
    }
    if let Some(p) = a.cache_pct.iter().find(|p| !(p.is_finite() && **p > 0.0 && **p <= 100.0)) {
        anyhow::bail!("--cache-pct {p}: a cache size is a percentage of the working set, above 0 and at most 100");
    }
    if a.hot_keys.contains(&0) {
        anyhow::bail!("--hot-keys 0: a hot-key count is the keys held and looked up, at least 1");
    }
    if a.purge_stored.contains(&0) {
        anyhow::bail!("--purge-stored 0: a stored-entry count is the entries a purge runs over, at least 1");
    }
    let setup = Setup {
        requests: a.requests,
        objects: a.objects,
        fractions: a.cache_pct.iter().map(|p| p / 100.0).collect(),
        timed: a.timed.min(a.requests),
        seed: a.seed,
        hot_keys: a.hot_keys.clone(),
        purge_stored: a.purge_stored.clone(),
    };
    let results = eviction::run(&setup, &crate::print::Bar::new());
    a.output.emit(&eviction::report(&setup, &results, a.judge))
}
