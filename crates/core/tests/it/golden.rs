//! Golden vectors: fixed keys → fixed workers for every policy, so placements never change
//! silently between versions or platforms.
//!
//! `golden/place.txt` is the expected output. After an intended change, regenerate it with
//! `SWITCHYARD_BLESS=1 cargo test -p switchyard-core --test it golden` and review the diff.

use switchyard_core::place::score::{classic, classic_prep, fast, node_seed};
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowKey, LoadTracker, Policy, Topology, Unit, Weight, WorkerId};

fn keys() -> Vec<FlowKey> {
    let mut k: Vec<FlowKey> = (0..12).map(FlowKey::Number).collect();
    for s in [
        "tcp 10.0.0.1:40000 10.0.0.2:80",
        "tcp 10.0.0.2:80 10.0.0.1:40000",
        "udp [2001:db8::1]:53 [2001:db8::2]:5353",
        "17 192.0.2.1:123 192.0.2.2:123",
        "video/stream-7",
        "",
        "GET /index.html",
        "18446744073709551615",
    ] {
        k.push(FlowKey::parse(s));
    }
    k
}

/// Places 64 units cycling over the keys; every third unit, the oldest queued unit completes,
/// so load-aware and in-flight policies see load rise and fall.
fn run(policy: Policy, weighted: bool) -> String {
    let config = PlaceConfig { topology: Some(Topology::parse("xeon-e5335").unwrap()), ..PlaceConfig::default() };
    let workers: Vec<(WorkerId, Weight)> = (0..8u32)
        .map(|i| {
            let w = if weighted { f64::from(i % 4 + 1) } else { 1.0 };
            (WorkerId(i), Weight::new(WorkerId(i), w).unwrap())
        })
        .collect();
    let mut placer = place::build_weighted(policy, &config, &workers).unwrap();
    let keys = keys();
    let mut load = LoadTracker::new();
    let mut queued = std::collections::VecDeque::new();
    let mut out = Vec::new();
    for i in 0..64u64 {
        let key = &keys[(i as usize * 7) % keys.len()];
        let unit = Unit::new(key, 100 + i * 37 % 1400).with_seq(i / keys.len() as u64);
        let w = placer.place(&unit, &load.view());
        load.on_enqueue(w, &unit);
        queued.push_back((w, unit));
        if i % 3 == 2 {
            let (w, u) = queued.pop_front().unwrap();
            load.on_complete(w, &u);
        }
        out.push(w.0.to_string());
    }
    out.join(" ")
}

fn render() -> String {
    let mut s = String::from("# digests (FlowKey::id)\n");
    for k in keys() {
        s += &format!("digest {:?} = {:#018x}\n", k.to_string(), k.id().0);
    }
    s += "# scores of the first key on workers 0..4: fast, classic\n";
    let d = keys()[0].id().0;
    for w in 0..4u32 {
        s += &format!("score w{w} = {:#018x} {:#010x}\n", fast(d, node_seed(w)), classic(d, classic_prep(w)));
    }
    s += "# placements of 64 units on xeon-e5335 (8 workers)\n";
    for &p in Policy::ALL {
        s += &format!("{} = {}\n", p.name(), run(p, false));
    }
    s += "# with weights 1,2,3,4,1,2,3,4\n";
    for &p in Policy::ALL.iter().filter(|p| p.supports_weights()) {
        s += &format!("{} = {}\n", p.name(), run(p, true));
    }
    s
}

#[test]
fn placements_match_the_golden_file() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/golden/place.txt");
    let got = render();
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        std::fs::write(path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(path).expect("golden file missing: run with SWITCHYARD_BLESS=1 once");
    for (g, w) in got.lines().zip(want.lines()) {
        assert_eq!(g, w, "placement changed: if intended, bless and review the diff (see golden.rs)");
    }
    assert_eq!(got.lines().count(), want.lines().count(), "golden file has a different number of lines");
}
