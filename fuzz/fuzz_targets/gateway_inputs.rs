#![no_main]
//! What reaches the gateways from outside and is read by hand: a request's `Cache-Control`
//! header (the reader's own bound) and a cooperating gateway's framed answer. Any bytes read
//! without a panic; a framed answer that reads back frames again to the same bytes.

use libfuzzer_sys::fuzz_target;
use switchyard_gateway::coop::{frame, unframe};
use switchyard_gateway::origin::reader_bound;

fuzz_target!(|data: &[u8]| {
    if let Ok(value) = http::HeaderValue::from_bytes(data) {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::CACHE_CONTROL, value);
        let _ = reader_bound(&headers);
    }
    if let Some(items) = unframe(data) {
        // Rebuild with bodies of the stated lengths: the framing of those is the input again
        // wherever the input's bodies were those bytes.
        let mut at = 0;
        let mut rebuilt = Vec::new();
        for (key, len) in &items {
            at += 2 + key.len();
            rebuilt.push((key.clone(), bytes::Bytes::copy_from_slice(&data[at + 4..at + 4 + len])));
            at += 4 + len;
        }
        assert_eq!(frame(&rebuilt), data);
    }
});
