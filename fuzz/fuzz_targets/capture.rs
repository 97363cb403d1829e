#![no_main]
//! Any bytes as a capture: both readers (streaming and in-memory) return packets, a clean error
//! or the end, never a panic; and when both read to a clean end, they read the same packets
//! and leave out the same ones.

use libfuzzer_sys::fuzz_target;
use switchyard_core::flow::FiveTuple;
use switchyard_ingest::{CaptureReader, Packets, SliceReader, Tcp};

/// What a reader returned of a packet: time, tuple, payload, TCP header, wire length.
type Packet = (u64, FiveTuple, Vec<u8>, Option<Tcp>, u32);

fn all(mut r: impl Packets) -> (Vec<Packet>, bool, String) {
    let mut out = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => out.push((p.time_ns, p.key, p.payload.to_vec(), p.tcp, p.wire_len)),
            Ok(None) => return (out, true, r.skipped().to_string()),
            Err(_) => return (out, false, String::new()),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let streamed = CaptureReader::new(data).ok().map(all);
    let sliced = SliceReader::new(data).ok().map(all);
    if let (Some((a, true, skipped_a)), Some((b, true, skipped_b))) = (&streamed, &sliced) {
        assert_eq!(a, b);
        assert_eq!(skipped_a, skipped_b, "the readers leave out the same packets for the same reasons");
    }
    if let Some((a, _, _)) = &sliced {
        assert!(a.len() <= data.len() / 16 + 1, "more packets than records could fit");
    }
});
