#![no_main]
//! Any bytes as a connection buffer: the TLS hello readers, the JA4 fingerprint, the DNS
//! question reader, every signature's check and the protocol inspector return, never panic; a
//! name found is printable ASCII lying inside the input, and a fingerprint has JA4's shape.

use libfuzzer_sys::fuzz_target;
use switchyard_runtime::inspect::{Inspector, Ports, SIGNATURES, dns, tls};

fuzz_target!(|data: &[u8]| {
    if let Some(name) = tls::server_name(data) {
        assert!(name.bytes().all(|c| c.is_ascii_graphic()));
        assert!(name.len() <= data.len());
    }
    if let Some(hello) = tls::client_hello(data) {
        let ja4 = tls::ja4(&hello);
        assert_eq!(ja4.len(), 36, "{ja4}");
        assert!(ja4.is_ascii());
    }
    let _ = tls::server_hello(data);
    if let Some(q) = dns::question(data) {
        assert!(q.labels.iter().all(|l| !l.is_empty() && l.len() <= 63));
    }
    // Checks run only after their pattern matched; here on any bytes at all.
    for check in SIGNATURES.iter().flat_map(|s| s.check.into_iter().chain(s.check_tcp)) {
        let _ = check(data);
    }
    let mut seen = tls::Seen::default();
    let half = data.len() / 2;
    let _ = seen.read(data, [Some(0), Some(half)]);
    thread_local!(static INSPECTOR: Inspector = Inspector::new());
    INSPECTOR.with(|i| {
        let _ = i.classify(data);
        let mut scratch = i.scratch();
        for (proto, port) in [(17, 5353), (17, 1812), (17, 5683), (6, 1080), (6, 80), (17, 547), (6, 502)] {
            let ports = Ports { proto, client: port, server: port };
            let _ = i.classify_conn(&mut scratch, data, [Some(0), Some(half)], ports);
        }
    });
});
