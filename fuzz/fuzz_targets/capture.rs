#![no_main]
//! Any bytes as a capture: both readers (streaming and in-memory) return packets, a clean error
//! or the end, never a panic; and when both read to a clean end, they read the same packets.

use libfuzzer_sys::fuzz_target;
use switchyard_ingest::{CaptureReader, Packets, SliceReader};

fn all(mut r: impl Packets) -> (Vec<(u64, usize)>, bool) {
    let mut out = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => out.push((p.time_ns, p.payload.len())),
            Ok(None) => return (out, true),
            Err(_) => return (out, false),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let streamed = CaptureReader::new(data).ok().map(all);
    let sliced = SliceReader::new(data).ok().map(all);
    if let (Some((a, true)), Some((b, true))) = (&streamed, &sliced) {
        assert_eq!(a, b);
    }
    if let Some((a, _)) = &sliced {
        assert!(a.len() <= data.len() / 16 + 1, "more packets than records could fit");
    }
});
