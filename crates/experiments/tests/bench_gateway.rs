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
        h2load: None,
        streams: 10,
    };
    let r = gateway::run(&setup, &Quiet).unwrap();
    assert_eq!(r.servers.len(), 1, "without nginx and Varnish, only ours");
    assert!(r.protocols.is_empty(), "without h2load, no rows over TLS and HTTP/2");
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
    assert_eq!(report.table("protocols").unwrap().rows.len(), 0, "no rows over TLS without h2load");
    let lookups = report.table("lookups").unwrap();
    let ns: Vec<f64> = lookups.cells("lookup").filter_map(Value::as_f64).collect();
    assert_eq!(ns, vec![r.lookups.0, r.lookups.1]);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("nginx, varnishd, wrk, h2load not found") && n.contains("no Varnish row")),
        "{:?}",
        report.notes
    );
    assert!(report.parameters.iter().any(|p| p.name == "herd" && p.value == Value::Int(40)));

    let none = gateway::Setup { keys: 0, ..setup };
    assert!(matches!(gateway::run(&none, &Quiet), Err(ExperimentError::Input(_))));
}

/// With h2load (Debian's nghttp2-client) and without nginx: ours over TLS 1.3 with HTTP/1.1
/// and HTTP/2, and over h2c, each with a rate, a p99 and the protocol h2load negotiated.
#[test]
fn with_h2load_ours_over_tls_and_h2c() {
    let Some(h2load) = switchyard_experiments::bench::peers::found("h2load") else {
        eprintln!("SKIPPED: h2load is not installed (bench/install-peers.sh installs nghttp2-client)");
        return;
    };
    let setup = gateway::Setup {
        seconds: 1.0,
        rounds: 1,
        connections: 4,
        herd: 4,
        keys: 10,
        nginx: None,
        varnishd: None,
        wrk: None,
        h2load: Some(h2load),
        streams: 4,
    };
    let r = gateway::run(&setup, &Quiet).unwrap();
    let protocols: Vec<&str> = r.protocols.iter().map(|p| p.protocol.as_str()).collect();
    assert_eq!(protocols, ["HTTP/1.1 over TLSv1.3", "HTTP/2 over TLSv1.3", "HTTP/2 cleartext (h2c)"]);
    for row in &r.protocols {
        assert!(row.hits.0 > 0.0 && row.hits.1 > 0.0, "{row:?}");
    }
    assert!(r.protocols[0].cipher.starts_with("TLS_"), "{:?}", r.protocols[0]);
    let report = r.report(&setup);
    common::assert_report(&report, &gateway::SPEC);
    let table = report.table("protocols").unwrap();
    assert_eq!(table.rows.len(), 3);
    assert!(table.cells("vs_nginx").all(|v| *v == Value::Null), "no nginx, no ratio");
}
