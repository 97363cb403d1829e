//! One direction of a TCP connection, put back in sequence order.
//!
//! Segments may arrive out of order, twice, or overlapping; the stream delivers each byte once,
//! in order, as soon as every byte before it has arrived. Sequence numbers are taken relative to
//! the first byte (after the SYN, or the first data segment seen when the capture starts
//! mid-connection), with 32-bit wrap-around, so a stream may cross 2^32. A segment that lies
//! more than 2^31 bytes behind is taken as old and dropped (RFC 1982 serial-number order).

use std::collections::BTreeMap;

use crate::decode::Tcp;

/// What became of a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    /// Some of its bytes were new and in order: this many were delivered (with any held segments
    /// they released).
    Delivered(usize),
    /// It is ahead of a gap and is held until the gap fills.
    Held,
    /// Every byte had been seen before (a retransmission), or it carried none.
    Nothing,
    /// It was ahead of a gap and the stream already holds as many segments as it may.
    Dropped,
}

/// One direction's reassembly state.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    /// Sequence number of byte 0, once known.
    base: Option<u32>,
    /// Bytes delivered so far (the offset of the next byte wanted).
    next: u64,
    /// Segments ahead of a gap, by offset.
    held: BTreeMap<u64, Vec<u8>>,
}

impl Stream {
    /// Bytes delivered so far.
    pub fn delivered(&self) -> u64 {
        self.next
    }

    /// Segments held ahead of a gap.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Takes in a segment, appending newly in-order bytes to `out`, at most `room` of them (the
    /// rest of the stream is then not wanted). At most `max_held` segments wait behind a gap.
    pub fn segment(&mut self, tcp: Tcp, payload: &[u8], room: usize, max_held: usize, out: &mut Vec<u8>) -> Segment {
        let start = if tcp.syn { tcp.seq.wrapping_add(1) } else { tcp.seq };
        let base = *self.base.get_or_insert(start);
        let rel = start.wrapping_sub(base);
        if payload.is_empty() {
            return Segment::Nothing;
        }
        if rel >= 1 << 31 {
            // Behind the base: data from before the capture or the SYN; the part at or after the
            // base, if any, is taken.
            let behind = (u32::MAX - rel) as usize + 1;
            if behind >= payload.len() {
                return Segment::Nothing;
            }
            return self.place(0, &payload[behind..], room, max_held, out);
        }
        // Offsets grow past 2^32 as the stream wraps: place the segment near `next`.
        let wraps = self.next >> 32;
        let mut offset = (wraps << 32) | u64::from(rel);
        if offset + (1 << 31) < self.next {
            offset += 1 << 32;
        }
        self.place(offset, payload, room, max_held, out)
    }

    fn place(&mut self, offset: u64, payload: &[u8], room: usize, max_held: usize, out: &mut Vec<u8>) -> Segment {
        let end = offset + payload.len() as u64;
        if end <= self.next {
            return Segment::Nothing;
        }
        if offset > self.next {
            if self.held.len() >= max_held && !self.held.contains_key(&offset) {
                return Segment::Dropped;
            }
            let slot = self.held.entry(offset).or_default();
            if payload.len() > slot.len() {
                slot.clear();
                slot.extend_from_slice(payload);
            }
            return Segment::Held;
        }
        let before = out.len();
        let fresh = &payload[(self.next - offset) as usize..];
        self.deliver(fresh, room, out);
        while let Some((&at, _)) = self.held.first_key_value() {
            if at > self.next {
                break;
            }
            let (at, seg) = self.held.pop_first().expect("just seen");
            let end = at + seg.len() as u64;
            if end > self.next {
                let fresh = &seg[(self.next - at) as usize..];
                let room = room.saturating_sub(out.len() - before);
                self.deliver(fresh, room, out);
            }
        }
        Segment::Delivered(out.len() - before)
    }

    fn deliver(&mut self, bytes: &[u8], room: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(&bytes[..bytes.len().min(room)]);
        // Bytes beyond the room still count as seen, so a retransmission of them is not new.
        self.next += bytes.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn seg(seq: u32) -> Tcp {
        Tcp { seq, ..Tcp::default() }
    }

    #[test]
    fn out_of_order_retransmitted_and_overlapping_segments_come_out_once_in_order() {
        let mut s = Stream::default();
        let mut out = Vec::new();
        let syn = Tcp { seq: 999, syn: true, ..Tcp::default() };
        assert_eq!(s.segment(syn, b"", 100, 8, &mut out), Segment::Nothing);
        assert_eq!(s.segment(seg(1005), b"world", 100, 8, &mut out), Segment::Held);
        assert_eq!(s.segment(seg(1000), b"hello", 100, 8, &mut out), Segment::Delivered(10));
        assert_eq!(s.segment(seg(1000), b"hello", 100, 8, &mut out), Segment::Nothing);
        assert_eq!(s.segment(seg(1008), b"ld!!", 100, 8, &mut out), Segment::Delivered(2));
        assert_eq!(out, b"helloworld!!");
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut s = Stream::default();
        let mut out = Vec::new();
        s.segment(seg(u32::MAX - 2), b"abc", 100, 8, &mut out);
        s.segment(seg(0), b"def", 100, 8, &mut out);
        assert_eq!(out, b"abcdef");
    }

    #[test]
    fn room_caps_what_is_kept_but_not_what_is_seen() {
        let mut s = Stream::default();
        let mut out = Vec::new();
        s.segment(seg(0), b"abcdef", 4, 8, &mut out);
        assert_eq!(out, b"abcd");
        assert_eq!(s.segment(seg(4), b"ef", 4, 8, &mut out), Segment::Nothing);
    }

    #[test]
    fn held_segments_are_bounded() {
        let mut s = Stream::default();
        let mut out = Vec::new();
        s.segment(seg(0), b"a", 100, 2, &mut out);
        assert_eq!(s.segment(seg(10), b"x", 100, 2, &mut out), Segment::Held);
        assert_eq!(s.segment(seg(20), b"y", 100, 2, &mut out), Segment::Held);
        assert_eq!(s.segment(seg(30), b"z", 100, 2, &mut out), Segment::Dropped);
        assert_eq!(s.held(), 2);
    }

    proptest! {
        /// Cut a message into segments, shuffle them, repeat some and send some as overlapping
        /// larger pieces: the stream delivers exactly the message, whatever the starting sequence.
        #[test]
        fn any_arrival_order_gives_the_message(
            message in proptest::collection::vec(any::<u8>(), 1..400),
            cuts in proptest::collection::vec(1usize..60, 1..40),
            isn in any::<u32>(),
            order in any::<u64>(),
            repeats in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let mut pieces = Vec::new();
            let mut at = 0;
            for c in cuts.iter().cycle() {
                if at >= message.len() { break; }
                let end = (at + c).min(message.len());
                pieces.push((at, end));
                at = end;
            }
            for r in &repeats {
                let (a, _) = pieces[r.index(pieces.len())];
                let b = (a + 70).min(message.len());
                pieces.push((a, b));
            }
            // A deterministic shuffle driven by `order`, keeping the first piece first so the
            // stream's base is the message's first byte (as after a SYN).
            let mut rest = pieces.split_off(1);
            let mut x = order | 1;
            for i in (1..rest.len()).rev() {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                rest.swap(i, (x % (i as u64 + 1)) as usize);
            }
            pieces.extend(rest);
            let mut s = Stream::default();
            let mut out = Vec::new();
            for (a, b) in pieces {
                s.segment(seg(isn.wrapping_add(a as u32)), &message[a..b], usize::MAX, 1_000, &mut out);
            }
            prop_assert_eq!(out, message);
        }
    }
}
