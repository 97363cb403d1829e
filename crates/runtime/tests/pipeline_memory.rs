//! The pipeline's memory follows the packets its connections have, not `--packets`: a large
//! per-connection limit reserves nothing for packets that never come. (Its own test binary: it
//! counts every allocation of the process.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{Policy, WorkerId};
use switchyard_ingest::{ConnConfig, SliceReader};
use switchyard_runtime::inspect::Inspector;
use switchyard_runtime::pipeline::{PipelineConfig, run};
use switchyard_runtime::serial::inspect_serial;
use switchyard_runtime::tracegen::{TraceSpec, generate};

/// The system allocator, keeping the bytes held now and the most held since the last reset.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes held at once during `f`, above what was held when it began.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = HELD.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed) - base)
}

#[test]
fn a_huge_packet_limit_costs_no_more_memory_than_the_packets_need() {
    let mut pcap = Vec::new();
    // 200 connections of at most 40 or so packets each.
    generate(&TraceSpec { connections: 200, seed: 5, ..TraceSpec::default() }, &mut pcap).unwrap();
    let inspector = Inspector::new();
    let run_with = |max_packets: u32| {
        let conn = ConnConfig { max_packets, ..ConnConfig::default() };
        let mut placer = place::build(Policy::Hrw, &PlaceConfig::default(), &[WorkerId(0), WorkerId(1)]).unwrap();
        let config = PipelineConfig { conn, pin: false, ..PipelineConfig::default() };
        run(SliceReader::new(&pcap).unwrap(), placer.as_mut(), &config, &inspector).unwrap()
    };
    // 1,000 is more than any connection has: the same buffers are made as with 30,000, which
    // reserved 30,000 slots of 32 bytes per connection (190 MB here; `--packets 100000` on
    // 10,000 connections, 32 GB) before a packet was in them.
    let (small, small_peak) = peak_during(|| run_with(1_000));
    let (huge, huge_peak) = peak_during(|| run_with(30_000));
    assert_eq!(
        small.summary.inspected + small.summary.skipped_classified,
        huge.summary.inspected + huge.summary.skipped_classified
    );
    assert_eq!(huge.summary.marked, 0, "no connection reaches the limit");
    assert!(
        huge_peak < small_peak + small_peak / 2 + (1 << 20),
        "peak {huge_peak} bytes with --packets 30000 against {small_peak} with 1000"
    );
    // And every slot a connection's packets use holds the packet the serial pipeline saw.
    let conn = ConnConfig { max_packets: 30_000, ..ConnConfig::default() };
    let serial = inspect_serial(SliceReader::new(&pcap).unwrap(), conn, &inspector).unwrap();
    let rows = |s: &switchyard_runtime::serial::Summary| {
        s.conns.iter().map(|c| (c.id, c.key, c.verdict, c.matched_at, c.packets)).collect::<Vec<_>>()
    };
    assert_eq!(rows(&huge.summary), rows(&serial));
}
