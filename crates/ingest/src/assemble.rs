//! A connection's first bytes in conversation order: the growing buffer a DPI engine inspects
//! (Guo §2.4: the L7-filter's "assembling buffer").
//!
//! For TCP, each direction is reassembled in sequence order ([`crate::stream`]), and bytes are
//! appended as they come into order, from whichever direction, so the buffer reads as the
//! conversation did. UDP datagrams are appended as they come. At most
//! [`ConnConfig::max_bytes`] bytes are kept (12,000 upstream).
//!
//! The buffer only grows, so the buffer as it stood after an earlier packet is a prefix of the
//! buffer now: a caller that records the length after each packet can inspect any of those
//! buffers later without a copy. The parallel runtime relies on that.

use crate::conn::ConnConfig;
use crate::decode::Tcp;
use crate::stream::{Segment, Stream};

/// One connection's reassembly state and buffer.
#[derive(Clone, Debug, Default)]
pub struct Assembly {
    buffer: Vec<u8>,
    streams: [Stream; 2],
    dropped_segments: u64,
    /// Where each direction's first byte lies in the buffer (client's, server's), as `u32 + 1`
    /// with 0 for none yet: a capture that starts mid-connection, or shows one side, may open
    /// with either, and the inspector tries both.
    starts: [u32; 2],
}

impl Assembly {
    /// Takes in one packet of the connection (`from_client`: sent by the connection's client),
    /// and returns the buffer's length after it.
    pub fn push(&mut self, config: &ConnConfig, from_client: bool, tcp: Option<Tcp>, payload: &[u8]) -> usize {
        let before = self.buffer.len();
        let room = config.max_bytes.saturating_sub(before);
        match tcp {
            Some(tcp) => {
                let stream = &mut self.streams[usize::from(!from_client)];
                if stream.segment(tcp, payload, room, config.max_held, &mut self.buffer) == Segment::Dropped {
                    self.dropped_segments += 1;
                }
            }
            None => self.buffer.extend_from_slice(&payload[..payload.len().min(room)]),
        }
        let start = &mut self.starts[usize::from(!from_client)];
        if *start == 0 && self.buffer.len() > before {
            *start = before as u32 + 1;
        }
        self.buffer.len()
    }

    /// Where the client's and the server's first bytes lie in the buffer, if they have come.
    pub fn starts(&self) -> [Option<usize>; 2] {
        self.starts.map(|s| s.checked_sub(1).map(|s| s as usize))
    }

    /// The buffer: the connection's first bytes, in conversation order.
    pub fn buffer(&self) -> &[u8] {
        &self.buffer
    }

    /// TCP segments dropped because too many were held behind a gap.
    pub fn dropped_segments(&self) -> u64 {
        self.dropped_segments
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_datagrams_are_appended_up_to_the_byte_limit() {
        let config = ConnConfig { max_bytes: 5, ..ConnConfig::default() };
        let mut a = Assembly::default();
        assert_eq!(a.push(&config, true, None, b"abc"), 3);
        assert_eq!(a.push(&config, false, None, b"defg"), 5);
        assert_eq!(a.buffer(), b"abcde");
    }

    #[test]
    fn each_direction_is_reassembled_on_its_own() {
        let config = ConnConfig::default();
        let mut a = Assembly::default();
        let seg = |seq| Some(Tcp { seq, ..Tcp::default() });
        a.push(&config, true, seg(10), b"one ");
        a.push(&config, false, seg(500), b"two ");
        // The client's next segment arrives after a gap, then the gap fills.
        a.push(&config, true, seg(20), b"four ");
        assert_eq!(a.buffer(), b"one two ");
        a.push(&config, true, seg(14), b"three ");
        assert_eq!(a.buffer(), b"one two three four ");
    }

    #[test]
    fn each_direction_s_first_byte_is_found() {
        let config = ConnConfig::default();
        let mut a = Assembly::default();
        assert_eq!(a.starts(), [None, None]);
        a.push(&config, false, None, b"");
        assert_eq!(a.starts(), [None, None], "no bytes, no start");
        a.push(&config, false, None, b"220 ready\r\n");
        a.push(&config, true, None, b"USER x\r\n");
        a.push(&config, false, None, b"331\r\n");
        assert_eq!(a.starts(), [Some(11), Some(0)]);
    }
}
