//! The wire format of a multiplexed session: frames on each of its TCP connections.
//!
//! Iwashima §6.2 (Figs 6‑3, 7‑2) frames each channel's packets with a 16-byte header of four
//! 32-bit fields (channel, sequence number, type, length) and leaves byte order, sequence-number
//! wrap and every control message but START/STOP unspecified (notes §2.6, §2.8). Ours:
//!
//! ```text
//!  0      1       2               6                              14              18
//!  +------+-------+---------------+-------------------------------+---------------+----------
//!  | type | flags | channel (u32) | sequence / argument (u64)     | length (u32)  | payload …
//!  +------+-------+---------------+-------------------------------+---------------+----------
//! ```
//!
//! All integers big-endian. The sequence number is 64 bits, so it does not wrap (a 32-bit count
//! of 1 kB frames wraps in about an hour at 10 Gb/s). Channel 0 is the session's own: only
//! [`Frame::Ping`] and [`Frame::OpenCredit`] use it, and no other frame may.
//!
//! | type | frame | `flags` | sequence field | payload |
//! |---|---|---|---|---|
//! | 0 | [`Frame::Data`] | 0 | the frame's number within its channel, from 0 | the bytes (at least one) |
//! | 1 | [`Frame::Open`] | bit 0: unordered | 0 | the weight, an `f64` |
//! | 2 | [`Frame::SetWeight`] | 0 | 0 | the weight, an `f64` |
//! | 3 | [`Frame::Close`] | 0 | data frames the channel carried in all | none |
//! | 4 | [`Frame::Credit`] | 0 | cumulative acknowledgement: every data frame below it has arrived; one more than a closed channel's frame count acknowledges its `Close` as well | the limit, a `u64`: the sender may send the channel's payload bytes below this offset (counted over its first sends; protocol version 4, frame numbers before) |
//! | 5 | [`Frame::Ping`] | bit 0: this is the reply | a nonce the reply echoes | none |
//! | 6 | [`Frame::Reset`] | 0 | 0 | why, in UTF-8 (at most [`MAX_REASON`] bytes) |
//! | 7 | [`Frame::OpenCredit`] | 0 | the limit: the receiver may open channels while it has opened fewer than this in all | none |
//!
//! The decoder is strict: an unknown type or flag, a length that does not fit the type, a weight
//! that is not a positive finite number or a payload longer than the receiver's limit is a
//! [`FrameError`], and the connection that sent it is not to be trusted further.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes before the payload.
pub const HEADER_LEN: usize = 18;

/// The largest payload a decoder accepts unless told otherwise (1 MiB).
pub const DEFAULT_MAX_PAYLOAD: u32 = 1 << 20;

/// The channel of session-level frames.
pub const SESSION_CHANNEL: u32 = 0;

const DATA: u8 = 0;
const OPEN: u8 = 1;
const SET_WEIGHT: u8 = 2;
const CLOSE: u8 = 3;
const CREDIT: u8 = 4;
const PING: u8 = 5;
const RESET: u8 = 6;
const OPEN_CREDIT: u8 = 7;

/// The longest reason a [`Frame::Reset`] carries, in bytes.
pub const MAX_REASON: u32 = 1024;

/// `Open`: the channel delivers frames as they arrive, not in sequence order.
const UNORDERED: u8 = 0x01;
/// `Ping`: a reply.
const PONG: u8 = 0x01;

/// One frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// Application bytes of one channel.
    Data {
        /// The channel.
        channel: u32,
        /// The frame's number within the channel, from 0.
        seq: u64,
        /// The bytes (never empty).
        payload: Bytes,
    },
    /// A new channel.
    Open {
        /// The channel.
        channel: u32,
        /// Its weight: its share of the session is `weight / Σ weights` (Iwashima §3.3).
        weight: f64,
        /// Whether the receiver restores sequence order.
        ordered: bool,
    },
    /// A channel's new weight.
    SetWeight {
        /// The channel.
        channel: u32,
        /// The new weight.
        weight: f64,
    },
    /// The sender will send no more on the channel.
    Close {
        /// The channel.
        channel: u32,
        /// Data frames the channel carried in all: the receiver has them all when it has
        /// frames `0..frames`.
        frames: u64,
    },
    /// The receiver's acknowledgement and window for one channel.
    Credit {
        /// The channel.
        channel: u32,
        /// Every data frame numbered below this has arrived; the sender may forget them. For a
        /// closed channel whose frames have all arrived, one more: the `Close` has arrived too.
        ack: u64,
        /// The sender may send data frames numbered below this.
        limit: u64,
    },
    /// The channel is abandoned, both ways: the sender of the reset discards what it had not
    /// delivered and takes no more, and the receiver's application sees an error carrying
    /// `reason` instead of an end (TCP's RST, with a sentence). Acknowledged as a close is,
    /// by a credit past the last frame.
    Reset {
        /// The channel.
        channel: u32,
        /// Why, for the people at the other end (`target not allowed: HOST:PORT`).
        reason: String,
    },
    /// The sender's leave to open channels (on channel 0): the receiver may open channels
    /// while it has opened fewer than `limit` in the session in all. Cumulative, so a copy or a
    /// late one changes nothing (the largest holds); the sender raises it as its application
    /// accepts the channels opened so far (see [`OpenWindow`](super::OpenWindow)).
    OpenCredit {
        /// Channels the receiver may have opened, in all.
        limit: u64,
    },
    /// A round-trip probe on one connection, or its reply.
    Ping {
        /// Echoed by the reply (the sender's clock, typically).
        nonce: u64,
        /// This is the reply.
        pong: bool,
    },
}

/// Why bytes are not a frame.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FrameError {
    /// The type byte names no frame.
    #[error(
        "unknown frame type {0} (known: 0 data, 1 open, 2 set-weight, 3 close, 4 credit, 5 ping, 6 reset, 7 open-credit)"
    )]
    UnknownType(u8),
    /// A flag bit the frame type does not define is set.
    #[error("{kind} frame with undefined flags {flags:#04x}")]
    UnknownFlags {
        /// The frame type.
        kind: &'static str,
        /// The flags byte.
        flags: u8,
    },
    /// The payload is longer than this receiver accepts.
    #[error("{kind} frame with a {len}-byte payload, over the limit of {max}")]
    TooLong {
        /// The frame type.
        kind: &'static str,
        /// The length field.
        len: u32,
        /// The receiver's limit.
        max: u32,
    },
    /// The length does not fit the frame type.
    #[error("{kind} frame with a {len}-byte payload; it takes {expected}")]
    Length {
        /// The frame type.
        kind: &'static str,
        /// The length field.
        len: u32,
        /// What the type takes.
        expected: &'static str,
    },
    /// A reset's reason that is not UTF-8.
    #[error("reset frame whose reason is not UTF-8")]
    Reason,
    /// A weight that is not a positive finite number.
    #[error("{kind} frame with weight {weight}; a weight is a positive finite number")]
    Weight {
        /// The frame type.
        kind: &'static str,
        /// The weight sent.
        weight: f64,
    },
    /// A field that must be zero is not.
    #[error("{kind} frame with {field} {value}; it must be 0")]
    NotZero {
        /// The frame type.
        kind: &'static str,
        /// Which field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// A session frame on a channel, or a channel frame on the session's channel 0.
    #[error(
        "{kind} frame on channel {channel}: ping and open-credit use channel 0 and every other frame a channel above 0"
    )]
    Channel {
        /// The frame type.
        kind: &'static str,
        /// The channel field.
        channel: u32,
    },
}

fn kind_name(kind: u8) -> &'static str {
    match kind {
        DATA => "data",
        OPEN => "open",
        SET_WEIGHT => "set-weight",
        CLOSE => "close",
        CREDIT => "credit",
        PING => "ping",
        RESET => "reset",
        OPEN_CREDIT => "open-credit",
        _ => "unknown",
    }
}

impl Frame {
    /// The channel the frame belongs to ([`SESSION_CHANNEL`] for a ping).
    pub fn channel(&self) -> u32 {
        match *self {
            Self::Data { channel, .. }
            | Self::Open { channel, .. }
            | Self::SetWeight { channel, .. }
            | Self::Close { channel, .. }
            | Self::Credit { channel, .. }
            | Self::Reset { channel, .. } => channel,
            Self::Ping { .. } | Self::OpenCredit { .. } => SESSION_CHANNEL,
        }
    }

    /// Bytes the frame takes on the wire.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Self::Data { payload, .. } => payload.len(),
                Self::Reset { reason, .. } => cut_reason(reason).len(),
                Self::Open { .. } | Self::SetWeight { .. } | Self::Credit { .. } => 8,
                Self::Close { .. } | Self::Ping { .. } | Self::OpenCredit { .. } => 0,
            }
    }

    /// Appends the frame to `dst`.
    ///
    /// # Panics
    ///
    /// If the frame could not be decoded: an empty or over-4-GiB data payload, or a weight that
    /// is not a positive finite number. Those are the caller's bugs, not the peer's. (A reset's
    /// reason longer than [`MAX_REASON`] is cut, at a character's edge.)
    pub fn encode(&self, dst: &mut BytesMut) {
        if let Some(payload) = self.encode_head(dst) {
            dst.put_slice(&payload);
        }
    }

    /// Appends the frame to `dst`, except a data frame's payload, which it returns to be sent
    /// after what it appended: a writer with vectored I/O sends the payload from where the
    /// application left it, without copying it. Panics as [`Frame::encode`] does.
    pub fn encode_head(&self, dst: &mut BytesMut) -> Option<Bytes> {
        let (kind, flags, seq, payload_len) = match self {
            Self::Data { seq, payload, .. } => {
                assert!(
                    !payload.is_empty() && payload.len() <= u32::MAX as usize,
                    "a data payload is 1 to 2³²−1 bytes"
                );
                (DATA, 0, *seq, payload.len() as u32)
            }
            Self::Open { weight, ordered, .. } => {
                assert!(valid_weight(*weight), "a weight is a positive finite number");
                (OPEN, if *ordered { 0 } else { UNORDERED }, 0, 8)
            }
            Self::SetWeight { weight, .. } => {
                assert!(valid_weight(*weight), "a weight is a positive finite number");
                (SET_WEIGHT, 0, 0, 8)
            }
            Self::Close { frames, .. } => (CLOSE, 0, *frames, 0),
            Self::Credit { ack, .. } => (CREDIT, 0, *ack, 8),
            Self::Reset { reason, .. } => (RESET, 0, 0, cut_reason(reason).len() as u32),
            Self::Ping { nonce, pong } => (PING, if *pong { PONG } else { 0 }, *nonce, 0),
            Self::OpenCredit { limit } => (OPEN_CREDIT, 0, *limit, 0),
        };
        dst.reserve(HEADER_LEN + 8);
        dst.put_u8(kind);
        dst.put_u8(flags);
        dst.put_u32(self.channel());
        dst.put_u64(seq);
        dst.put_u32(payload_len);
        match self {
            Self::Data { payload, .. } => return Some(payload.clone()),
            Self::Open { weight, .. } | Self::SetWeight { weight, .. } => dst.put_f64(*weight),
            Self::Credit { limit, .. } => dst.put_u64(*limit),
            Self::Reset { reason, .. } => dst.put_slice(cut_reason(reason).as_bytes()),
            Self::Close { .. } | Self::Ping { .. } | Self::OpenCredit { .. } => {}
        }
        None
    }

    /// Takes one frame off the front of `src`: `Ok(None)` if `src` does not yet hold a whole
    /// frame (nothing is taken), an error if its first bytes are not a frame (nothing is taken
    /// either; the stream cannot be resynchronised). Payloads longer than `max_payload` are
    /// refused before they are buffered.
    pub fn decode(src: &mut BytesMut, max_payload: u32) -> Result<Option<Self>, FrameError> {
        if src.len() < HEADER_LEN {
            return Ok(None);
        }
        let mut h = &src[..HEADER_LEN];
        let (kind, flags, channel, seq, len) = (h.get_u8(), h.get_u8(), h.get_u32(), h.get_u64(), h.get_u32());
        let name = kind_name(kind);
        check_header(kind, flags, channel, seq, len, max_payload)?;
        if src.len() < HEADER_LEN + len as usize {
            return Ok(None);
        }
        // The payload is checked before anything is taken, so that a refused frame stays whole.
        if matches!(kind, OPEN | SET_WEIGHT) {
            let weight = (&src[HEADER_LEN..HEADER_LEN + 8]).get_f64();
            if !valid_weight(weight) {
                return Err(FrameError::Weight { kind: name, weight });
            }
        }
        if kind == RESET && std::str::from_utf8(&src[HEADER_LEN..HEADER_LEN + len as usize]).is_err() {
            return Err(FrameError::Reason);
        }
        src.advance(HEADER_LEN);
        let mut payload = src.split_to(len as usize).freeze();
        let frame = match kind {
            DATA => Self::Data { channel, seq, payload },
            OPEN | SET_WEIGHT => {
                let weight = payload.get_f64();
                if kind == OPEN {
                    Self::Open { channel, weight, ordered: flags & UNORDERED == 0 }
                } else {
                    Self::SetWeight { channel, weight }
                }
            }
            CLOSE => Self::Close { channel, frames: seq },
            CREDIT => Self::Credit { channel, ack: seq, limit: payload.get_u64() },
            PING => Self::Ping { nonce: seq, pong: flags & PONG != 0 },
            OPEN_CREDIT => Self::OpenCredit { limit: seq },
            RESET => Self::Reset { channel, reason: String::from_utf8_lossy(&payload).into_owned() },
            _ => unreachable!("check_header refused it"),
        };
        Ok(Some(frame))
    }
}

/// Everything that can be said of a frame from its header alone, so that a bad frame is refused
/// before its payload is waited for.
fn check_header(kind: u8, flags: u8, channel: u32, seq: u64, len: u32, max_payload: u32) -> Result<(), FrameError> {
    let name = kind_name(kind);
    let (allowed_flags, expected) = match kind {
        DATA => (0, "1 or more bytes"),
        OPEN => (UNORDERED, "8 bytes"),
        SET_WEIGHT | CREDIT => (0, "8 bytes"),
        CLOSE | OPEN_CREDIT => (0, "none"),
        PING => (PONG, "none"),
        RESET => (0, "at most 1024 bytes"),
        _ => return Err(FrameError::UnknownType(kind)),
    };
    if flags & !allowed_flags != 0 {
        return Err(FrameError::UnknownFlags { kind: name, flags });
    }
    if matches!(kind, PING | OPEN_CREDIT) != (channel == SESSION_CHANNEL) {
        return Err(FrameError::Channel { kind: name, channel });
    }
    let fits = match kind {
        DATA => len > 0,
        OPEN | SET_WEIGHT | CREDIT => len == 8,
        RESET => len <= MAX_REASON,
        _ => len == 0,
    };
    if kind == DATA && len > max_payload {
        return Err(FrameError::TooLong { kind: name, len, max: max_payload });
    }
    if !fits {
        return Err(FrameError::Length { kind: name, len, expected });
    }
    if matches!(kind, OPEN | SET_WEIGHT | RESET) && seq != 0 {
        return Err(FrameError::NotZero { kind: name, field: "sequence field", value: seq });
    }
    Ok(())
}

/// A reason as sent: at most [`MAX_REASON`] bytes, cut at a character's edge.
fn cut_reason(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_REASON as usize);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

fn valid_weight(w: f64) -> bool {
    w.is_finite() && w > 0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frames() -> impl Strategy<Value = Frame> {
        let channel = 1u32..;
        let weight = (1e-9f64..1e9).prop_filter("positive", |w| *w > 0.0);
        prop_oneof![
            (channel.clone(), any::<u64>(), proptest::collection::vec(any::<u8>(), 1..300))
                .prop_map(|(channel, seq, p)| Frame::Data { channel, seq, payload: p.into() }),
            (channel.clone(), weight.clone(), any::<bool>()).prop_map(|(channel, weight, ordered)| Frame::Open {
                channel,
                weight,
                ordered
            }),
            (channel.clone(), weight).prop_map(|(channel, weight)| Frame::SetWeight { channel, weight }),
            (channel.clone(), any::<u64>()).prop_map(|(channel, frames)| Frame::Close { channel, frames }),
            (channel, any::<u64>(), any::<u64>()).prop_map(|(channel, ack, limit)| Frame::Credit {
                channel,
                ack,
                limit
            }),
            (any::<u64>(), any::<bool>()).prop_map(|(nonce, pong)| Frame::Ping { nonce, pong }),
            (1u32.., "[a-zé :0-9.]{0,200}").prop_map(|(channel, reason)| Frame::Reset { channel, reason }),
            any::<u64>().prop_map(|limit| Frame::OpenCredit { limit }),
        ]
    }

    proptest! {
        /// The head and the payload [`Frame::encode_head`] leaves out are, together, the frame.
        #[test]
        fn the_head_and_the_payload_left_out_are_the_frame(f in frames()) {
            let (mut whole, mut head) = (BytesMut::new(), BytesMut::new());
            f.encode(&mut whole);
            let payload = f.encode_head(&mut head);
            prop_assert_eq!(payload.is_some(), matches!(f, Frame::Data { .. }));
            head.extend_from_slice(&payload.unwrap_or_default());
            prop_assert_eq!(head, whole);
        }

        /// A run of frames, cut anywhere into pieces, decodes to the same run.
        #[test]
        fn frames_survive_any_cutting(fs in proptest::collection::vec(frames(), 1..12), cuts in proptest::collection::vec(any::<u16>(), 0..8)) {
            let mut wire = BytesMut::new();
            for f in &fs {
                f.encode(&mut wire);
            }
            let total: usize = fs.iter().map(Frame::encoded_len).sum();
            prop_assert_eq!(wire.len(), total);
            let mut points: Vec<usize> = cuts.iter().map(|c| *c as usize % (wire.len() + 1)).collect();
            points.sort_unstable();
            points.push(wire.len());
            let (mut buf, mut out, mut at) = (BytesMut::new(), Vec::new(), 0);
            for p in points {
                buf.extend_from_slice(&wire[at..p]);
                at = p;
                while let Some(f) = Frame::decode(&mut buf, DEFAULT_MAX_PAYLOAD).unwrap() {
                    out.push(f);
                }
            }
            prop_assert!(buf.is_empty());
            prop_assert_eq!(out, fs);
        }
    }

    fn header(kind: u8, flags: u8, channel: u32, seq: u64, len: u32) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_u8(kind);
        b.put_u8(flags);
        b.put_u32(channel);
        b.put_u64(seq);
        b.put_u32(len);
        b
    }

    #[test]
    fn bad_headers_are_refused_before_their_payload_arrives() {
        let cases = [
            (header(9, 0, 1, 0, 0), FrameError::UnknownType(9)),
            (header(DATA, 1, 1, 0, 4), FrameError::UnknownFlags { kind: "data", flags: 1 }),
            (
                header(DATA, 0, 1, 0, 2_000_000),
                FrameError::TooLong { kind: "data", len: 2_000_000, max: DEFAULT_MAX_PAYLOAD },
            ),
            (header(DATA, 0, 1, 0, 0), FrameError::Length { kind: "data", len: 0, expected: "1 or more bytes" }),
            (header(CREDIT, 0, 1, 0, 4), FrameError::Length { kind: "credit", len: 4, expected: "8 bytes" }),
            (header(PING, 0, 3, 0, 0), FrameError::Channel { kind: "ping", channel: 3 }),
            (header(CLOSE, 0, 0, 0, 0), FrameError::Channel { kind: "close", channel: 0 }),
            (header(OPEN, 0, 1, 5, 8), FrameError::NotZero { kind: "open", field: "sequence field", value: 5 }),
            (
                header(RESET, 0, 1, 0, 2000),
                FrameError::Length { kind: "reset", len: 2000, expected: "at most 1024 bytes" },
            ),
            (header(RESET, 0, 0, 0, 0), FrameError::Channel { kind: "reset", channel: 0 }),
            (header(OPEN_CREDIT, 0, 2, 9, 0), FrameError::Channel { kind: "open-credit", channel: 2 }),
            (header(OPEN_CREDIT, 0, 0, 9, 8), FrameError::Length { kind: "open-credit", len: 8, expected: "none" }),
            (header(OPEN_CREDIT, 1, 0, 9, 0), FrameError::UnknownFlags { kind: "open-credit", flags: 1 }),
        ];
        for (mut bytes, want) in cases {
            let before = bytes.len();
            assert_eq!(Frame::decode(&mut bytes, DEFAULT_MAX_PAYLOAD), Err(want));
            assert_eq!(bytes.len(), before, "nothing is taken from a bad frame");
        }
    }

    #[test]
    fn weights_must_be_positive_and_finite() {
        for w in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut b = header(SET_WEIGHT, 0, 2, 0, 8);
            b.put_f64(w);
            match Frame::decode(&mut b, DEFAULT_MAX_PAYLOAD) {
                Err(FrameError::Weight { kind: "set-weight", .. }) => {}
                other => panic!("weight {w}: {other:?}"),
            }
            assert_eq!(b.len(), HEADER_LEN + 8, "nothing is taken from a refused frame");
        }
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let mut b = BytesMut::new();
        Frame::Credit { channel: 0x0102_0304, ack: 7, limit: 0x1122 }.encode(&mut b);
        let want: [u8; 26] = [4, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0x11, 0x22];
        assert_eq!(&b[..], &want[..]);
        let mut b = BytesMut::new();
        Frame::Open { channel: 3, weight: 0.5, ordered: false }.encode(&mut b);
        assert_eq!(&b[..2], &[OPEN, UNORDERED]);
        assert_eq!(&b[HEADER_LEN..], &0.5f64.to_be_bytes());
        let mut b = BytesMut::new();
        Frame::OpenCredit { limit: 0x0102 }.encode(&mut b);
        let want: [u8; 18] = [7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0];
        assert_eq!(&b[..], &want[..]);
    }

    #[test]
    fn a_reset_carries_its_reason_cut_to_the_limit_and_refuses_bytes_that_are_not_text() {
        let long = "é".repeat(600);
        let mut b = BytesMut::new();
        Frame::Reset { channel: 5, reason: long.clone() }.encode(&mut b);
        assert_eq!(b.len(), HEADER_LEN + 1024);
        match Frame::decode(&mut b, DEFAULT_MAX_PAYLOAD) {
            Ok(Some(Frame::Reset { channel: 5, reason })) => assert_eq!(reason, long[..1024]),
            other => panic!("{other:?}"),
        }
        let mut b = header(RESET, 0, 5, 0, 2);
        b.put_slice(&[0xff, 0xfe]);
        assert_eq!(Frame::decode(&mut b, DEFAULT_MAX_PAYLOAD), Err(FrameError::Reason));
        assert_eq!(b.len(), HEADER_LEN + 2, "nothing is taken from a refused frame");
    }

    #[test]
    fn a_partial_frame_waits_for_the_rest() {
        let mut wire = BytesMut::new();
        Frame::Data { channel: 1, seq: 0, payload: Bytes::from_static(b"hello") }.encode(&mut wire);
        let mut part = BytesMut::from(&wire[..HEADER_LEN + 2]);
        assert_eq!(Frame::decode(&mut part, 64), Ok(None));
        assert_eq!(part.len(), HEADER_LEN + 2);
    }
}
