//! Cost of one placement decision, for every policy at N = 8, 64, 256 and 1024 workers, with
//! peer crates measured in the same groups.
//!
//! Dimensions: policy × N. Inputs are deterministic: 1024 flows with splitmix64 digests, rotated
//! per iteration, and per-worker queue lengths 1–32 (so load-aware policies take their general
//! path). Topology-aware policies run on a uniform tree of N leaves (2x2x2, 4x4x4, 4x4x4x4,
//! 4x4x4x4x4). Peers hash the raw `u64` key themselves; our policies read the flow digest a
//! driver computes once per flow, so `hrw+digest` adds the digest of a numeric key per decision
//! to make that row like-for-like with the peers.
//!
//! Run: `cargo bench -p switchyard-core --bench place` (add `-- 'place/64/'` to filter). After the
//! criterion output comes a summary table (medians of the same samples) and the goals
//! as ratios measured in this run.

// A benchmark measures wall time; the core's ban on the clock (clippy.toml) is for policy code.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::BuildHasherDefault;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::Criterion;
use switchyard_core::place::{self, score::splitmix64};
use switchyard_core::{FlowId, FlowKey, LoadView, PlaceConfig, Policy, Topology, Unit, WorkerId};

type StdBuild = BuildHasherDefault<DefaultHasher>;

const SIZES: [u32; 4] = [8, 64, 256, 1024];
const FLOWS: usize = 1024;

/// Per-iteration times of every benchmark, by (N, name), for the summary.
static SAMPLES: Mutex<BTreeMap<(u32, String), Vec<f64>>> = Mutex::new(BTreeMap::new());

fn tree(n: u32) -> &'static str {
    match n {
        8 => "2x2x2",
        64 => "4x4x4",
        256 => "4x4x4x4",
        1024 => "4x4x4x4x4",
        _ => unreachable!("only the sizes above are benchmarked"),
    }
}

/// Benchmarks `f`, recording each sample's time per call for the summary.
fn bench(c: &mut Criterion, n: u32, name: &str, mut f: impl FnMut(usize) -> u32) {
    let mut group = c.benchmark_group(format!("place/{n}"));
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                black_box(f(i as usize % FLOWS));
            }
            let spent = start.elapsed();
            let per = spent.as_nanos() as f64 / iters as f64;
            SAMPLES.lock().unwrap().entry((n, name.to_string())).or_default().push(per);
            spent
        })
    });
    group.finish();
}

fn policies(c: &mut Criterion) {
    for n in SIZES {
        let units: Vec<Unit> = (0..FLOWS as u64).map(|i| Unit::of_flow(FlowId(splitmix64(i)), 1500)).collect();
        let q: Vec<u64> = (0..u64::from(n)).map(|i| 1 + splitmix64(i ^ 0xABCD) % 32).collect();
        let qb: Vec<u64> = q.iter().map(|v| v * 1500).collect();
        let view = LoadView::new(&q, &qb);
        let workers: Vec<WorkerId> = (0..n).map(WorkerId).collect();
        let config = PlaceConfig { topology: Some(Topology::parse(tree(n)).unwrap()), ..PlaceConfig::default() };
        for &policy in Policy::ALL {
            let mut placer = place::build(policy, &config, &workers).unwrap();
            bench(c, n, policy.name(), |i| placer.place(&units[i], &view).0);
        }
        let mut hrw = place::build(Policy::Hrw, &config, &workers).unwrap();
        bench(c, n, "hrw+digest", |i| hrw.place(&Unit::new(&FlowKey::Number(i as u64), 1500), &view).0);

        let keys: Vec<u64> = (0..FLOWS as u64).map(splitmix64).collect();
        let ids: Vec<u32> = (0..n).collect();
        let h = hrw_hash::HrwNodes::new(0..n);
        bench(c, n, "peer:hrw-hash", |i| *h.sorted(&keys[i]).next().unwrap());
        let mut r = rendezvous_hash::RendezvousNodes::<_, rendezvous_hash::DefaultNodeHasher>::default();
        for i in 0..n {
            r.insert(rendezvous_hash::IdNode::new(i));
        }
        bench(c, n, "peer:rendezvous_hash", |i| **r.calc_candidates(&keys[i]).next().unwrap());
        let mut hr = hash_rings::rendezvous::Ring::with_hasher(StdBuild::default());
        for id in &ids {
            hr.insert_node(id, 1);
        }
        bench(c, n, "peer:hash-rings/rendezvous", |i| *hr.get_node(&keys[i]));
        let mut ring = hash_rings::consistent::Ring::with_hasher(StdBuild::default());
        for id in &ids {
            ring.insert_node(id, 160);
        }
        bench(c, n, "peer:hash-rings/consistent", |i| *ring.get_node(&keys[i]));
        let mg = maglev_hash::MaglevTable::new(ids.clone());
        bench(c, n, "peer:maglev-hash", |i| *mg.get(&keys[i]).unwrap());
        bench(c, n, "peer:jump-consistent-hash", |i| jump_consistent_hash::hash(keys[i], n as usize));
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn summary() {
    let mut samples = SAMPLES.lock().unwrap();
    let mut med: BTreeMap<(u32, String), f64> = BTreeMap::new();
    for (k, v) in samples.iter_mut() {
        med.insert(k.clone(), median(v));
    }
    let names: Vec<String> = {
        let mut seen = Vec::new();
        for (_, name) in med.keys() {
            if !seen.contains(name) {
                seen.push(name.clone());
            }
        }
        let order = |s: &String| {
            Policy::ALL.iter().position(|p| p.name() == s).unwrap_or(if s.starts_with("peer:") { 200 } else { 100 })
        };
        seen.sort_by_key(|s| (order(s), s.clone()));
        seen
    };
    println!("\nns per decision (median of criterion's samples)\n");
    print!("| {:<28} |", "policy");
    for n in SIZES {
        print!(" {:>9} |", format!("N={n}"));
    }
    println!("\n|{:-<30}|{}", "", "-----------:|".repeat(SIZES.len()));
    for name in &names {
        print!("| {name:<28} |");
        for n in SIZES {
            match med.get(&(n, name.clone())) {
                Some(v) => print!(" {v:>9.1} |"),
                None => print!(" {:>9} |", "-"),
            }
        }
        println!();
    }
    let get = |n: u32, name: &str| med.get(&(n, name.to_string())).copied();
    let rendezvous_peers = ["peer:hrw-hash", "peer:rendezvous_hash", "peer:hash-rings/rendezvous"];
    if let (Some(hrw), Some(ahrw), Some(tree), Some(tree_adj)) =
        (get(64, "hrw"), get(64, "ahrw"), get(64, "h-hrw"), get(64, "h-ahrw"))
    {
        let fastest_peer =
            rendezvous_peers.iter().filter_map(|p| get(64, p).map(|v| (v, *p))).min_by(|a, b| a.0.total_cmp(&b.0));
        println!("\nGoals at N = 64, as ratios from this run:");
        if let Some((peer, name)) = fastest_peer {
            println!(
                "- hrw is {:.1}x faster than the fastest rendezvous crate ({name}, {peer:.0} ns); goal >= 3x",
                peer / hrw
            );
        }
        println!("- ahrw costs {:.2}x hrw; goal <= 1.5x", ahrw / hrw);
        println!("- h-hrw on 4x4x4 costs {:.2}x flat hrw; goal < 1x", tree / hrw);
        println!("- h-ahrw on 4x4x4 (with load adjustment) costs {:.2}x flat hrw", tree_adj / hrw);
    }
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(800))
        .sample_size(30)
        .configure_from_args();
    policies(&mut c);
    c.final_summary();
    summary();
}
