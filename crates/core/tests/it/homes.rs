//! A flow's home node (`Placer::home`): where a static map puts it, the plain tree descent for
//! the tree policies, plain HRW for the rest; always a member, and never moved by load.

use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{LoadView, Policy, Topology, Unit, WorkerId};

#[test]
fn every_policy_has_a_home_of_its_own_kind() {
    let config = PlaceConfig { topology: Some(Topology::parse("opteron-2350").unwrap()), ..PlaceConfig::default() };
    let workers: Vec<WorkerId> = (0..8).map(WorkerId).collect();
    let build = |p: Policy| place::build(p, &config, &workers).unwrap();
    let (mut hrw, mut h_hrw) = (build(Policy::Hrw), build(Policy::HHrw));
    let mut tree_differs = 0;
    for flow in 0..400u64 {
        let unit = Unit::of_flow(switchyard_core::FlowId(flow.wrapping_mul(0x9e37_79b9_7f4a_7c15)), 100);
        let plain = hrw.place(&unit, &LoadView::IDLE);
        let tree = h_hrw.place(&unit, &LoadView::IDLE);
        tree_differs += usize::from(plain != tree);
        for &policy in Policy::ALL {
            let mut p = build(policy);
            let home = p.home(&unit);
            assert!(home.0 < 8, "{policy}");
            let expected = match policy {
                Policy::HHrw | Policy::HAhrw | Policy::HCahrw => tree,
                Policy::ModN | Policy::Ring | Policy::Jump | Policy::Maglev | Policy::HrwClassic => {
                    p.place(&unit, &LoadView::IDLE)
                }
                _ => plain,
            };
            assert_eq!(home, expected, "{policy}, flow {flow}");
        }
    }
    assert!(tree_differs > 200, "the tree's home is a different hash: {tree_differs} of 400 differ");
}
