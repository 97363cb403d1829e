#![no_main]
//! Any bytes as a capture: the reader returns packets, a clean error or the end, never a panic,
//! and never more packets than the input could hold.

use libfuzzer_sys::fuzz_target;
use switchyard_ingest::CaptureReader;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::new(data) else { return };
    let mut n = 0usize;
    while let Ok(Some(p)) = reader.next_packet() {
        assert!(p.payload.len() <= data.len());
        n += 1;
        assert!(n <= data.len() / 16 + 1, "more packets than records could fit");
    }
});
