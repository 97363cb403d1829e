//! Generated captures of known protocols, read back and inspected: every connection is named as
//! its label says, and every packet is accounted for.

use switchyard_ingest::{CaptureReader, ConnConfig};
use switchyard_runtime::inspect::{Inspector, Ports, tls};
use switchyard_runtime::serial::{Verdict, inspect_serial};
use switchyard_runtime::tracegen::{TraceSpec, generate};

#[test]
fn every_generated_connection_is_classified_as_labelled() {
    for (seed, elephants) in [(1, 0.0), (2, 0.05)] {
        let spec = TraceSpec { connections: 400, seed, elephants, ..TraceSpec::default() };
        let mut pcap = Vec::new();
        let labels = generate(&spec, &mut pcap).unwrap();
        let summary =
            inspect_serial(CaptureReader::new(&pcap[..]).unwrap(), ConnConfig::default(), &Inspector::new()).unwrap();
        assert_eq!(summary.conns.len(), labels.len());
        let total: u64 = labels.iter().map(|l| l.packets).sum();
        assert_eq!(summary.packets, total, "every packet read");
        assert_eq!(summary.skipped.total(), 0);
        assert_eq!(summary.inspected + summary.skipped_classified + summary.marked, summary.packets);
        let mut by_client: Vec<_> = summary.conns.iter().map(|c| (c.key.src(), c)).collect();
        by_client.sort_by_key(|(k, _)| *k);
        for l in &labels {
            let (_, c) = by_client[by_client.binary_search_by_key(&l.client, |(k, _)| *k).unwrap()];
            assert_eq!(c.verdict.name(), l.protocol, "connection {} ({:?})", l.id, c.key);
            assert!(matches!(c.verdict, Verdict::Matched(_)));
            if l.protocol == "tls" {
                assert_eq!(c.server_name(), Some("example.org"));
            }
        }
    }
}

#[test]
fn the_same_spec_gives_the_same_bytes() {
    let spec = TraceSpec { connections: 50, ..TraceSpec::default() };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    generate(&spec, &mut a).unwrap();
    generate(&spec, &mut b).unwrap();
    assert_eq!(a, b);
}

/// The fuzzer's corpus for the TLS hello readers and the inspector (fuzz/corpus/tls_sni),
/// replayed on stable Rust in every test run.
#[test]
fn the_fuzz_corpus_is_handled() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/tls_sni");
    let inspector = Inspector::new();
    let mut scratch = inspector.scratch();
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        if let Some(name) = tls::server_name(&bytes) {
            assert!(name.bytes().all(|c| c.is_ascii_graphic()));
        }
        if let Some(hello) = tls::client_hello(&bytes) {
            assert_eq!(tls::ja4(&hello).len(), 36);
        }
        let _ = tls::server_hello(&bytes);
        let _ = tls::Seen::default().read(&bytes, [Some(0), Some(bytes.len() / 2)]);
        let _ = inspector.classify(&bytes);
        let ports = Ports { proto: 17, client: 5353, server: 1812 };
        let _ = inspector.classify_conn(&mut scratch, &bytes, [Some(0), Some(bytes.len() / 2)], ports);
        files += 1;
    }
    assert!(files > 50, "the corpus is in the repository: {files} files");
}

#[test]
fn labels_written_by_the_generator_check_against_the_verdicts_and_a_wrong_one_is_named() {
    use switchyard_runtime::tracegen::{check_labels, write_labels};
    let spec = TraceSpec { connections: 60, ..TraceSpec::default() };
    let mut pcap = Vec::new();
    let mut labels = generate(&spec, &mut pcap).unwrap();
    let summary =
        inspect_serial(CaptureReader::new(&pcap[..]).unwrap(), ConnConfig::default(), &Inspector::new()).unwrap();
    let mut csv = Vec::new();
    write_labels(&labels, &mut csv).unwrap();
    let check = check_labels(&summary.conns, &csv[..]).unwrap();
    assert_eq!((check.checked, check.missed.len()), (60, 0), "{:?}", check.missed);
    labels[3].protocol = "gopher";
    labels[7].client = "192.0.2.1:9".parse().unwrap();
    let mut csv = Vec::new();
    write_labels(&labels, &mut csv).unwrap();
    let check = check_labels(&summary.conns, &csv[..]).unwrap();
    assert_eq!(check.missed.len(), 2, "{:?}", check.missed);
    assert!(check.missed[0].contains("labelled gopher") || check.missed[1].contains("labelled gopher"));
    assert!(check.missed.iter().any(|m| m.contains("no such connection")));
    let e = check_labels(&summary.conns, &b"client\n10.0.0.1:1\n"[..]).unwrap_err();
    assert_eq!(e.to_string(), "row 2");
    assert!(std::error::Error::source(&e).is_some(), "the reader's reason comes with it");
}
