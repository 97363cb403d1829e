#![no_main]
//! A placer driven by an arbitrary sequence of operations: no panic, and every unit lands on a
//! current member.

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowId, LoadTracker, Policy, Topology, Unit, Weight, WorkerId};

#[derive(Arbitrary, Debug)]
enum Op {
    Place { flow: u8, size: u16 },
    Complete(u8),
    Add(u8),
    Remove(u8),
    Reweight(u8, u8),
    Forget(u8),
}

#[derive(Arbitrary, Debug)]
struct Input {
    policy: u8,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    let policy = Policy::ALL[input.policy as usize % Policy::ALL.len()];
    let cfg = PlaceConfig { topology: Some(Topology::parse("2x2x4").unwrap()), maglev_table: 101, ..PlaceConfig::default() };
    let workers: Vec<WorkerId> = (0..4).map(WorkerId).collect();
    let mut p = place::build(policy, &cfg, &workers).unwrap();
    let mut load = LoadTracker::new();
    let mut queued: Vec<(WorkerId, Unit)> = Vec::new();
    for (seq, op) in input.ops.into_iter().enumerate() {
        match op {
            Op::Place { flow, size } => {
                let u = Unit::of_flow(FlowId(u64::from(flow)), u64::from(size)).with_seq(seq as u64);
                let w = p.place(&u, &load.view());
                assert!(p.members().contains(w));
                load.on_enqueue(w, &u);
                queued.push((w, u));
            }
            Op::Complete(i) if !queued.is_empty() => {
                let (w, u) = queued.swap_remove(i as usize % queued.len());
                load.on_complete(w, &u);
            }
            Op::Complete(_) => {}
            Op::Add(id) => {
                let _ = p.add_worker(WorkerId(u32::from(id % 20)), Weight::ONE);
            }
            Op::Remove(id) => {
                let _ = p.remove_worker(WorkerId(u32::from(id % 20)));
            }
            Op::Reweight(id, w) => {
                let id = WorkerId(u32::from(id % 20));
                if let Ok(w) = Weight::new(id, f64::from(w) / 16.0) {
                    let _ = p.set_weight(id, w);
                }
            }
            Op::Forget(flow) => p.forget_flow(FlowId(u64::from(flow))),
        }
    }
});
