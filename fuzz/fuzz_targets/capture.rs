#![no_main]
//! Any bytes as a capture: both readers (streaming and in-memory) return packets, a clean error
//! or the end, never a panic; and when both read to a clean end, they read the same packets
//! and leave out the same ones. Asked to leave every other connection, the in-memory reader's
//! glimpse before decoding keeps and leaves what the streaming reader's, after decoding, does.

use libfuzzer_sys::fuzz_target;
use switchyard_core::flow::FiveTuple;
use switchyard_core::FlowKey;
use switchyard_ingest::{CaptureReader, Glimpse, Packets, SliceReader, Tcp};

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

/// Packets kept (as above) or left (time only), skips, and a clean end.
fn every_other(mut r: impl Packets) -> (Vec<Result<Packet, u64>>, String, bool) {
    let out = std::cell::RefCell::new(Vec::new());
    let leave = |g: &Glimpse, time_ns: u64| {
        let leave = FlowKey::Tuple(g.undirected()).id().0 % 2 == 1;
        if leave {
            out.borrow_mut().push(Err(time_ns));
        }
        leave
    };
    let each = |p: switchyard_ingest::Packet<'_>| {
        out.borrow_mut().push(Ok((p.time_ns, p.key, p.payload.to_vec(), p.tcp, p.wire_len)));
        std::ops::ControlFlow::Continue(())
    };
    let clean = r.for_each_kept(leave, each).is_ok();
    let skipped = if clean { r.skipped().to_string() } else { String::new() };
    (out.into_inner(), skipped, clean)
}

fuzz_target!(|data: &[u8]| {
    if let (Ok(a), Ok(b)) = (CaptureReader::new(data), SliceReader::new(data)) {
        let (a, b) = (every_other(a), every_other(b));
        if a.2 && b.2 {
            assert_eq!(a, b, "glimpsing before decoding and after agree");
        }
    }
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
