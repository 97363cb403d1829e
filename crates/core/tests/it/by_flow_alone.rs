//! Policies that say they choose by the flow alone do: instances built apart over the same
//! workers place every flow alike whatever load each sees and whatever came before.

use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{FlowId, LoadView, Policy, Unit, WorkerId};

#[test]
fn instances_built_apart_agree_under_any_load() {
    let ids: Vec<WorkerId> = (0..5).map(WorkerId).collect();
    let flows: Vec<FlowId> = (0..2_000u64).map(|i| FlowId(i.wrapping_mul(0x9e37_79b9_7f4a_7c15))).collect();
    let quiet = [0u64; 5];
    let busy = [900u64, 3, 0, 7_000, 12];
    let mut checked = 0;
    for &policy in Policy::ALL.iter().filter(|p| p.by_flow_alone()) {
        let mut a = place::build(policy, &PlaceConfig::default(), &ids).unwrap();
        let mut b = place::build(policy, &PlaceConfig::default(), &ids).unwrap();
        // b places in reverse order, under another load, after placing every flow once.
        for f in flows.iter().rev() {
            let _ = b.place(&Unit::of_flow(*f, 100), &LoadView::new(&busy, &busy));
        }
        for f in &flows {
            let here = a.place(&Unit::of_flow(*f, 100), &LoadView::new(&quiet, &quiet));
            let there = b.place(&Unit::of_flow(*f, 100), &LoadView::new(&busy, &busy));
            assert_eq!(here, there, "{policy} placed flow {f:?} apart");
        }
        checked += 1;
    }
    assert!(checked >= 2, "mod-n and hrw at least");
    assert!(Policy::Hrw.by_flow_alone() && !Policy::Affinity.by_flow_alone() && !Policy::Ahrw.by_flow_alone());
}
