//! `bench::gateway` briefly, without nginx, Varnish and wrk: ours alone, both herds coalesced into one
//! origin read, the lookups timed, and the report says which peers were missing.

mod common;

use switchyard_experiments::ExperimentError;
use switchyard_experiments::bench::gateway;
use switchyard_experiments::report::{Quiet, Value};

#[test]
fn gateway_coalesces_both_herds_into_one_origin_read_and_times_lookups() {
    let setup = gateway::Setup {
        seconds: 1.0,
        rounds: 1,
        connections: 4,
        herd: 40,
        keys: 200,
        nginx: None,
        varnishd: None,
        wrk: None,
    };
    let r = gateway::run(&setup, &Quiet).unwrap();
    assert_eq!(r.servers.len(), 1, "without nginx and Varnish, only ours");
    let ours = &r.servers[0];
    assert!(ours.hits.is_none(), "without wrk, no hit rates");
    assert_eq!(ours.cold_herd, (1.0, 0), "40 asks for a new key: one origin read, all answered");
    assert_eq!(ours.expired_herd, (1.0, 0), "40 asks at expiry: one origin read, all answered");
    assert!(r.lookups.0 > 0.0 && r.lookups.1 > 0.0, "{r:?}");

    // The report: ours alone with no hit rate, the herds' reads, both lookups, and the missing
    // peers named in a note.
    let report = r.report(&setup);
    common::assert_report(&report, &gateway::SPEC);
    assert!(report.machine.as_deref().is_some_and(|m| m.contains("cores")), "{:?}", report.machine);
    let servers = report.table("servers").unwrap();
    assert_eq!(servers.rows.len(), 1);
    assert_eq!(servers.cells("hits_per_s").next(), Some(&Value::Null));
    assert_eq!(servers.cells("vs_best_peer").next(), Some(&Value::Null));
    assert_eq!(servers.cells("cold_herd_reads").next().and_then(Value::as_f64), Some(1.0));
    assert_eq!(servers.cells("expired_herd_not_200").next(), Some(&Value::Int(0)));
    let lookups = report.table("lookups").unwrap();
    let ns: Vec<f64> = lookups.cells("lookup").filter_map(Value::as_f64).collect();
    assert_eq!(ns, vec![r.lookups.0, r.lookups.1]);
    assert!(
        report.notes.iter().any(|n| n.contains("nginx, varnishd, wrk not found") && n.contains("no Varnish row")),
        "{:?}",
        report.notes
    );
    assert!(report.parameters.iter().any(|p| p.name == "herd" && p.value == Value::Int(40)));

    let none = gateway::Setup { keys: 0, ..setup };
    assert!(matches!(gateway::run(&none, &Quiet), Err(ExperimentError::Input(_))));
}
