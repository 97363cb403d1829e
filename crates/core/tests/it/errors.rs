//! Bad input gets a typed error that says what is wrong, never a panic.

use switchyard_core::place::{self, PlaceConfig, PlaceError};
use switchyard_core::{Policy, Topology, Weight, WorkerId};

fn ids(n: u32) -> Vec<WorkerId> {
    (0..n).map(WorkerId).collect()
}

#[test]
fn zero_workers() {
    for &p in Policy::ALL {
        let e = place::build(p, &PlaceConfig::default(), &[]).unwrap_err();
        assert_eq!(e, PlaceError::NoWorkers);
    }
}

#[test]
fn weights_must_be_positive_and_finite() {
    for w in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let e = Weight::new(WorkerId(3), w).unwrap_err();
        assert!(matches!(e, PlaceError::BadWeight { worker: WorkerId(3), .. }));
        assert!(e.to_string().contains("finite and greater than zero"), "{e}");
    }
}

#[test]
fn unknown_policy_lists_the_valid_names() {
    let e = "hwr".parse::<Policy>().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("unknown policy `hwr`") && msg.contains("hrw, hrw-classic"), "{msg}");
}

#[test]
fn malformed_topology_is_refused() {
    for spec in ["", "2x", "x2", "2x-1", "abc", "2x2@", "flat:", "99999x99999"] {
        let e = Topology::parse(spec).unwrap_err();
        assert!(e.to_string().contains("Valid forms"), "{spec}: {e}");
    }
}

#[test]
fn membership_errors() {
    let mut p = place::build(Policy::Hrw, &PlaceConfig::default(), &ids(2)).unwrap();
    assert_eq!(p.add_worker(WorkerId(1), Weight::ONE), Err(PlaceError::DuplicateWorker(WorkerId(1))));
    assert_eq!(p.remove_worker(WorkerId(9)), Err(PlaceError::UnknownWorker(WorkerId(9))));
    p.remove_worker(WorkerId(0)).unwrap();
    assert_eq!(p.remove_worker(WorkerId(1)), Err(PlaceError::LastWorker(WorkerId(1))));
    let two = Weight::new(WorkerId(1), 2.0).unwrap();
    assert_eq!(p.set_weight(WorkerId(1), two), Err(PlaceError::WeightsUnsupported { policy: Policy::Hrw }));
    let dup = place::build(Policy::Hrw, &PlaceConfig::default(), &[WorkerId(1), WorkerId(1)]);
    assert_eq!(dup.unwrap_err(), PlaceError::DuplicateWorker(WorkerId(1)));
}

#[test]
fn a_refused_change_leaves_the_placer_as_it_was() {
    let config = PlaceConfig { topology: Some(Topology::parse("2x2").unwrap()), ..PlaceConfig::default() };
    let mut p = place::build(Policy::HAhrw, &config, &ids(4)).unwrap();
    let e = p.add_worker(WorkerId(4), Weight::ONE).unwrap_err();
    assert!(matches!(e, PlaceError::NotInTopology { worker: WorkerId(4), leaves: 4, .. }), "{e}");
    assert_eq!(p.members().len(), 4);
}

#[test]
fn bad_configuration_values() {
    let cases: [(PlaceConfig, &str); 5] = [
        (PlaceConfig { maglev_table: 65_536, ..PlaceConfig::default() }, "maglev table size"),
        (PlaceConfig { epsilon: -0.1, ..PlaceConfig::default() }, "epsilon"),
        (PlaceConfig { epsilon: f64::NAN, ..PlaceConfig::default() }, "epsilon"),
        (PlaceConfig { vnodes: 0, ..PlaceConfig::default() }, "vnodes"),
        (PlaceConfig { beta: f64::INFINITY, ..PlaceConfig::default() }, "beta"),
    ];
    for (config, field) in cases {
        let e = place::build(Policy::Maglev, &config, &ids(3)).unwrap_err();
        assert!(matches!(e, PlaceError::BadConfig { field: f, .. } if f == field), "{e}");
    }
    let small = PlaceConfig { maglev_table: 3, ..PlaceConfig::default() };
    let e = place::build(Policy::Maglev, &small, &ids(5)).unwrap_err();
    assert!(e.to_string().contains("at least as large as the number of workers"), "{e}");
}
