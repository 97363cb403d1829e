#![no_main]
//! Any bytes as a matched connection's buffer, split anywhere between its two ends: the fields
//! flow records show (`switchyard_runtime::app_fields`: a DNS query's name and type, an HTTP
//! request's method, target and host, a response's status) are read or refused, never a panic;
//! what is read is printable and lies inside the input. Seeded from `corpus/tls_sni` (buffers).

use libfuzzer_sys::fuzz_target;
use switchyard_runtime::app_fields::{self, AppFields};
use switchyard_runtime::inspect::{Found, Protocol};

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |&b| usize::from(b)) % (data.len() + 1);
    for name in ["dns", "mdns", "llmnr", "http"] {
        let protocol = Protocol::by_name(name).expect("shipped");
        for from_client in [true, false] {
            for tcp in [false, true] {
                let found = Found { protocol, from_client };
                match app_fields::read(found, data, [Some(0), Some(split)], tcp).as_deref() {
                    Some(AppFields::Dns { rrname, .. }) => assert!(rrname.len() <= data.len()),
                    Some(AppFields::Http { method, url, hostname, .. }) => {
                        for s in [method, url].into_iter().chain(hostname) {
                            assert!(s.len() <= data.len() && s.bytes().all(|c| c == b' ' || c.is_ascii_graphic()));
                        }
                    }
                    None => {}
                }
            }
        }
    }
});
