//! The `gateway_inputs` fuzz corpus (fuzz/corpus/gateway_inputs), replayed on stable: every
//! input reads as a Cache-Control value and as a framed answer without a panic, and an answer
//! that reads frames back to the same bytes.

use switchyard_gateway::coop::{frame, unframe};
use switchyard_gateway::origin::reader_bound;

#[test]
fn the_fuzz_corpus_reads_without_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/gateway_inputs");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("the corpus is in the tree") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        if let Ok(value) = axum::http::HeaderValue::from_bytes(&data) {
            let mut headers = axum::http::HeaderMap::new();
            headers.insert(axum::http::header::CACHE_CONTROL, value);
            let _ = reader_bound(&headers);
        }
        if let Some(items) = unframe(&data) {
            let mut at = 0;
            let mut rebuilt = Vec::new();
            for (key, len) in &items {
                at += 2 + key.len();
                rebuilt.push((key.clone(), axum::body::Bytes::copy_from_slice(&data[at + 4..at + 4 + len])));
                at += 4 + len;
            }
            assert_eq!(frame(&rebuilt), data);
        }
        n += 1;
    }
    assert!(n >= 2, "{n} inputs");
}
