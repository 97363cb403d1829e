#![no_main]
//! Any bytes as a connection buffer: the TLS server-name reader and the protocol inspector
//! return, never panic, and a name found is printable ASCII lying inside the input.

use libfuzzer_sys::fuzz_target;
use switchyard_runtime::inspect::{Inspector, tls};

fuzz_target!(|data: &[u8]| {
    if let Some(name) = tls::server_name(data) {
        assert!(name.bytes().all(|c| c.is_ascii_graphic()));
        assert!(name.len() <= data.len());
    }
    thread_local!(static INSPECTOR: Inspector = Inspector::new());
    INSPECTOR.with(|i| {
        let _ = i.classify(data);
    });
});
