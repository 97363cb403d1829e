//! A gateway hit's memory traffic, for a cache simulator: `keys` URL-like keys held in the
//! core's `Cache` bounded by the default policy (room for all, so every lookup hits), then
//! `passes` passes of `Cache::use_entry` over them, in fill order or shuffled (arguments:
//! keys, passes, `in-order` or `shuffled`, and a policy other than the default).
//!
//! Run it under callgrind, collecting only the lookups, and divide the misses by the lookups:
//!
//! ```text
//! cargo build --release -p switchyard-core --example hit_lines
//! valgrind --tool=callgrind --cache-sim=yes --LL=4194304,16,64 --collect-atstart=no \
//!     --toggle-collect='hit_lines::lookups*' target/release/examples/hit_lines 125000 1 shuffled
//! callgrind_annotate --show=Ir,D1mr,DLmr --sort=D1mr --inclusive=no callgrind.out.<pid>
//! ```
//!
//! `switchyard bench eviction`'s hot-key table times the same lookups (in fill order).
//!
//! What it found (issue 38, 125,000 keys against a simulated 4 MiB last level: a million keys
//! against the machine's 32 MiB, scaled): a shuffled hit under the default policy (TinyLFU)
//! takes 352 instructions and misses the first-level cache 11.4 times: the index's control
//! bytes, its bucket, the stored key's bytes (≈ 3), the policy's node (≈ 0.75) and list
//! neighbours (≈ 0.25), the probe's own key (≈ 2, this driver's: a request's key is fresh)
//! and TinyLFU's four sketch counters (4.0, of which 0.7 miss the last level too). Under LRU the
//! same hit takes 248 instructions and 7.4 misses: the sketch is the difference, and
//! its four counters are four lines because its rows are hashed apart; one line per key
//! (Caffeine's blocked sketch) would change which keys' counts collide, so the policy's
//! estimates and admissions.

use switchyard_core::Nanos;
use switchyard_core::cache::{AgeFrom, Alone, Cache, Eviction, Lookup, Reading};

type Hot = Cache<String, (), Alone, u64>;

/// The timed part, kept out of line so that callgrind can collect it alone.
#[inline(never)]
fn lookups(cache: &mut Hot, order: &[&String]) -> u64 {
    let mut sum = 0u64;
    for k in order {
        sum = sum.wrapping_add(cache.use_entry(k, |e| (e.reading.value, true)).unwrap_or(0));
    }
    sum
}

/// The thread's time on a CPU so far, in ns (the first field of its schedstat): waits for a
/// core on a loaded machine do not count.
fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux's schedstat");
    s.split_whitespace().next().and_then(|n| n.parse().ok()).expect("a count of ns")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let keys: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let passes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let shuffled = args.next().is_some_and(|a| a == "shuffled");
    let eviction: Eviction = args.next().map_or(Ok(Eviction::DEFAULT), |a| a.parse()).unwrap_or_else(|e| {
        eprintln!("hit_lines: {e}");
        std::process::exit(2)
    });
    let names: Vec<String> = (0..keys).map(|i| format!("/v1/sensors/{i}")).collect();
    let mut cache: Hot =
        Cache::new(Lookup::Piggyback, Nanos(u64::MAX / 4), AgeFrom::Load, Alone).bounded_by(u64::MAX, eviction, 1);
    for (i, k) in names.iter().enumerate() {
        cache.fill_weighted(k.clone(), None, Reading { value: i as u64, sensed_at: Nanos(1) }, Nanos(1), 1);
    }
    let mut order: Vec<&String> = names.iter().collect();
    if shuffled {
        // Fisher–Yates with a fixed LCG: the same order every run, no dependency.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for i in (1..order.len()).rev() {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            order.swap(i, ((x >> 33) % (i as u64 + 1)) as usize);
        }
    }
    // One pass uncollected: every key moved to where hits keep it (TinyLFU's protected).
    let mut sum = 0u64;
    for k in &order {
        sum = sum.wrapping_add(cache.use_entry(k, |e| (e.reading.value, true)).unwrap_or(0));
    }
    let t = cpu_ns();
    for _ in 0..passes {
        sum = sum.wrapping_add(lookups(&mut cache, &order));
    }
    let ns = (cpu_ns() - t) as f64 / (passes * keys).max(1) as f64;
    println!(
        "{keys} keys, {eviction}, {passes} passes, {}: {ns:.1} ns per hit (the thread's CPU time), checksum {sum}",
        if shuffled { "shuffled" } else { "in order" }
    );
}
