//! Streaming pcap and pcapng reading (the format is detected from the first bytes).

use std::fmt;
use std::io::Read;

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError, create_reader};
use switchyard_core::flow::FiveTuple;
use thiserror::Error;

use crate::decode::{Decoded, Skip, Tcp, decode};

/// The reader's starting buffer; it grows up to [`MAX_BUFFER`] for larger records.
const BUFFER: usize = 1 << 16;
/// The largest record the reader accepts (pcapng allows up to 4 GiB; real snap lengths are far
/// below this).
const MAX_BUFFER: usize = 1 << 26;

/// Why a capture could not be read further.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum IngestError {
    /// The input does not start like a pcap or pcapng file.
    #[error("not a pcap or pcapng capture (the first bytes match neither format)")]
    NotACapture,
    /// The input is empty.
    #[error("empty input: a capture needs at least a file header")]
    Empty,
    /// Reading failed.
    #[error("read error after {offset} bytes")]
    Read {
        /// Bytes consumed before the failure.
        offset: usize,
    },
    /// A record is damaged beyond skipping (its length fields cannot be trusted).
    #[error("damaged capture at byte {offset}: {what}")]
    Damaged {
        /// Bytes consumed before the damaged record.
        offset: usize,
        /// What the parser found.
        what: String,
    },
    /// A live interface could not be opened or read.
    #[error("live capture on `{interface}`: {what}")]
    Live {
        /// The interface.
        interface: String,
        /// What failed, and why.
        what: String,
    },
}

/// A packet of the capture.
#[derive(Clone, Copy, Debug)]
pub struct Packet<'a> {
    /// Capture time, nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// Its 5-tuple as on the wire (source first; see [`FiveTuple::undirected`] for connections).
    pub key: FiveTuple,
    /// Length on the wire.
    pub wire_len: u32,
    /// The IP datagram's length as its header gives it ([`Decoded::ip_len`]).
    pub ip_len: u32,
    /// The TCP or UDP payload as captured.
    pub payload: &'a [u8],
    /// TCP's sequence number and flags (`None` for UDP).
    pub tcp: Option<Tcp>,
}

/// A frame of the capture as captured (see [`CaptureReader::next_frame`]).
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// The capture's link type for it (1 is Ethernet; tcpdump.org's LINKTYPE_ values).
    pub linktype: i32,
    /// Capture time, nanoseconds since the Unix epoch.
    pub time_ns: u64,
    /// Length on the wire.
    pub wire_len: u32,
    /// The bytes captured (perhaps fewer than `wire_len`).
    pub data: &'a [u8],
}

/// Packets left out, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkipCounts([u64; Skip::ALL.len()]);

impl SkipCounts {
    /// Packets left out for `reason`.
    pub fn get(&self, reason: Skip) -> u64 {
        self.0[Skip::ALL.iter().position(|&r| r == reason).expect("every reason is in ALL")]
    }

    /// Packets left out for any reason.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: &Self) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    pub(crate) fn add(&mut self, reason: Skip) {
        self.0[Skip::ALL.iter().position(|&r| r == reason).expect("every reason is in ALL")] += 1;
    }
}

impl fmt::Display for SkipCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.total() == 0 {
            return f.write_str("none");
        }
        let parts: Vec<String> =
            Skip::ALL.iter().filter(|&&r| self.get(r) > 0).map(|&r| format!("{} {r}", self.get(r))).collect();
        f.write_str(&parts.join(", "))
    }
}

/// One pcapng interface: its link type and clock.
#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: i32,
    /// Timestamp units per second.
    resolution: u64,
    /// Seconds added to every timestamp.
    offset: i64,
}

/// Reads packets from a pcap or pcapng stream, one at a time, in capture order.
pub struct CaptureReader<'r> {
    inner: Box<dyn PcapReaderIterator + Send + 'r>,
    state: State,
    packets: u64,
    done: bool,
}

/// What the reader learns from the headers, kept apart from the parser so that a block borrowed
/// from the parser can update it.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Legacy pcap: link type and whether the fractions are nanoseconds.
    legacy: Option<(i32, bool)>,
    /// pcapng: the current section's byte order (big-endian), once its header is read.
    section_big_endian: Option<bool>,
    interfaces: Vec<Interface>,
    last_time: u64,
    payload: Vec<u8>,
    /// The last frame [`CaptureReader::next_frame`] returned.
    frame: Vec<u8>,
    pub(crate) skipped: SkipCounts,
}

impl fmt::Debug for CaptureReader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader").field("packets", &self.packets).field("skipped", &self.state.skipped).finish()
    }
}

impl<'r> CaptureReader<'r> {
    /// Starts reading `input`, which must begin with a pcap or pcapng header.
    pub fn new(mut input: impl Read + Send + 'r) -> Result<Self, IngestError> {
        let head = read_header(&mut input)?;
        let inner = create_reader(BUFFER, std::io::Cursor::new(head).chain(input)).map_err(|e| match e {
            PcapError::Eof => IngestError::Empty,
            PcapError::ReadError => IngestError::Read { offset: 0 },
            _ => IngestError::NotACapture,
        })?;
        Ok(Self { inner, state: State::default(), packets: 0, done: false })
    }

    /// Packets left out so far, by reason.
    pub fn skipped(&self) -> SkipCounts {
        self.state.skipped
    }

    /// Packets returned so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Bytes of the input consumed so far (for progress).
    pub fn consumed(&self) -> usize {
        self.inner.consumed()
    }

    /// The next TCP or UDP packet, `None` at the end of the capture. Other packets are counted
    /// in [`CaptureReader::skipped`] and passed over.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        let Some((time_ns, key, wire_len, ip_len, tcp)) = self.advance(State::take)? else { return Ok(None) };
        Ok(Some(Packet { time_ns, key, wire_len, ip_len, payload: &self.state.payload, tcp }))
    }

    /// The next captured frame, not decoded: for passing a capture on (to a file, or to
    /// another process) rather than reading it. Frames of any protocol are returned; only
    /// blocks that are not frames at all (headers, statistics) are passed over. `None` at the
    /// end of the capture.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, IngestError> {
        let Some((linktype, time_ns, wire_len)) = self.advance(State::take_frame)? else { return Ok(None) };
        Ok(Some(Frame { linktype, time_ns, wire_len, data: &self.state.frame }))
    }

    /// Reads blocks until `take` makes something of one (counted in [`packets`](Self::packets)),
    /// or the capture ends.
    fn advance<T>(
        &mut self,
        mut take: impl FnMut(&mut State, PcapBlockOwned<'_>) -> Option<T>,
    ) -> Result<Option<T>, IngestError> {
        while !self.done {
            let offset = self.inner.consumed();
            if let Some(big_endian) = self.state.section_big_endian
                && let Err(e) = check_block_length(self.inner.data(), big_endian, offset)
            {
                return Err(e);
            }
            let (len, found) = match self.inner.next() {
                Ok((len, block)) => (len, take(&mut self.state, block)),
                Err(PcapError::Eof) => {
                    self.done = true;
                    break;
                }
                Err(PcapError::Incomplete(_)) => {
                    self.inner.refill().map_err(|e| trouble(offset, e))?;
                    continue;
                }
                Err(PcapError::BufferTooSmall) => {
                    let size = (self.inner.position().max(BUFFER) * 2).min(MAX_BUFFER);
                    if !self.inner.grow(size) {
                        return Err(IngestError::Damaged {
                            offset,
                            what: format!("a record longer than {MAX_BUFFER} bytes"),
                        });
                    }
                    self.inner.refill().map_err(|e| trouble(offset, e))?;
                    continue;
                }
                Err(PcapError::UnexpectedEof) => {
                    // The capture stops inside a record, as when tcpdump is killed mid-write.
                    self.state.skipped.add(Skip::TruncatedRecord);
                    self.done = true;
                    break;
                }
                Err(e) => return Err(trouble(offset, e)),
            };
            self.inner.consume(len);
            if found.is_some() {
                self.packets += 1;
                return Ok(found);
            }
        }
        Ok(None)
    }
}

/// The largest pcapng section header taken whole before reading on (its options included).
const MAX_SECTION_HEADER: usize = 1 << 20;

/// Reads the capture's header whole: a legacy header's 24 bytes, or a pcapng section header
/// block to its stated length (or as much as the input holds, if it ends first).
///
/// pcap-parser judges the format from its first read alone, and a pipe or a shared-memory ring
/// may return part of a header: a writer that writes the header field by field (pcap-file
/// does) published the magic number alone, the format was "not a capture", and a feed's
/// worker gave up on its ring. Reading the header whole first makes the judgement the same
/// whatever sizes the reads come in.
fn read_header(input: &mut impl Read) -> Result<Vec<u8>, IngestError> {
    let mut head = Vec::with_capacity(64);
    let mut fill = |head: &mut Vec<u8>, to: usize| -> Result<(), IngestError> {
        while head.len() < to {
            let mut buf = [0u8; 4096];
            let want = (to - head.len()).min(buf.len());
            match input.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Err(IngestError::Read { offset: head.len() }),
            }
        }
        Ok(())
    };
    // Type, length and byte-order magic of a section header; all of a legacy header's magic.
    fill(&mut head, 12)?;
    let len = match head.get(..12) {
        Some(h) if h[..4] == SHB_MAGIC => {
            let le = h[8..12] == [0x4d, 0x3c, 0x2b, 0x1a];
            let l = [h[4], h[5], h[6], h[7]];
            let l = if le { u32::from_le_bytes(l) } else { u32::from_be_bytes(l) } as usize;
            l.clamp(28, MAX_SECTION_HEADER)
        }
        _ => 24,
    };
    fill(&mut head, len)?;
    Ok(head)
}

/// The first bytes of a pcapng section header block (its type, the same in either byte order).
pub(crate) const SHB_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// Refuses a pcapng block whose length field is below the 12 bytes of its own frame (type and
/// the two lengths). pcap-parser 0.17 subtracts 12 from the field without checking it for some
/// block types, which overflows (a panic where overflow is checked, as in tests and fuzzing).
/// Section headers, which may change the byte order, check their own length.
pub(crate) fn check_block_length(data: &[u8], big_endian: bool, offset: usize) -> Result<(), IngestError> {
    let Some(&[a, b, c, d]) = data.get(4..8) else { return Ok(()) };
    let len = if big_endian { u32::from_be_bytes([a, b, c, d]) } else { u32::from_le_bytes([a, b, c, d]) };
    if len < 12 && !data.starts_with(&SHB_MAGIC) {
        return Err(IngestError::Damaged {
            offset,
            what: format!("a pcapng block {len} bytes long, shorter than its 12-byte frame"),
        });
    }
    Ok(())
}

pub(crate) fn trouble(offset: usize, e: PcapError<&[u8]>) -> IngestError {
    match e {
        PcapError::ReadError => IngestError::Read { offset },
        PcapError::UnexpectedEof | PcapError::Incomplete(_) => {
            IngestError::Damaged { offset, what: "the input ends inside a record".into() }
        }
        other => IngestError::Damaged { offset, what: format!("{other:?}").chars().take(120).collect() },
    }
}

impl State {
    /// Takes in a block: headers update the reader's state; a packet is decoded, its payload
    /// copied into `self.payload`, and returned as (time, key, wire length, IP length, TCP), or
    /// counted as skipped.
    fn take(&mut self, block: PcapBlockOwned<'_>) -> Option<(u64, FiveTuple, u32, u32, Option<Tcp>)> {
        let (time, wire_len, d) = self.packet(block)?;
        self.payload.clear();
        self.payload.extend_from_slice(d.payload);
        Some((time, d.key, wire_len, d.ip_len, d.tcp))
    }

    /// Takes in a block: headers update the reader's state; a frame is copied into
    /// `self.frame` and returned as (link type, time, wire length).
    fn take_frame(&mut self, block: PcapBlockOwned<'_>) -> Option<(i32, u64, u32)> {
        let (linktype, time, wire_len, data) = self.frame(block)?;
        self.frame.clear();
        self.frame.extend_from_slice(data);
        Some((linktype, time, wire_len))
    }

    /// Takes in a block: headers update the reader's state; a packet is decoded in place and
    /// returned as (time, wire length, decoded), or counted as skipped.
    pub(crate) fn packet<'b>(&mut self, block: PcapBlockOwned<'b>) -> Option<(u64, u32, Decoded<'b>)> {
        let (linktype, time, wire_len, data) = self.frame(block)?;
        match decode(linktype, data) {
            Ok(d) => Some((time, wire_len, d)),
            Err(reason) => {
                self.skipped.add(reason);
                None
            }
        }
    }

    /// Takes in a block: headers update the reader's state; a frame is returned as (link type,
    /// time, wire length, bytes as captured).
    fn frame<'b>(&mut self, block: PcapBlockOwned<'b>) -> Option<(i32, u64, u32, &'b [u8])> {
        let (linktype, time, wire_len, data) = match block {
            PcapBlockOwned::LegacyHeader(h) => {
                self.legacy = Some((h.network.0, h.is_nanosecond_precision()));
                return None;
            }
            PcapBlockOwned::Legacy(b) => {
                let (linktype, nanos) = self.legacy?;
                let frac = if nanos { u64::from(b.ts_usec) } else { u64::from(b.ts_usec) * 1_000 };
                (linktype, Some(u64::from(b.ts_sec) * 1_000_000_000 + frac), b.origlen, b.data)
            }
            PcapBlockOwned::NG(Block::SectionHeader(shb)) => {
                // A new section numbers its interfaces afresh.
                self.interfaces.clear();
                self.section_big_endian = Some(shb.big_endian());
                return None;
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                self.interfaces.push(Interface {
                    linktype: idb.linktype.0,
                    resolution: idb.ts_resolution().unwrap_or(1_000_000),
                    offset: idb.ts_offset(),
                });
                return None;
            }
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let Some(i) = self.interfaces.get(epb.if_id as usize).copied() else {
                    self.skipped.add(Skip::Malformed);
                    return None;
                };
                let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                let ns = u128::from(ticks) * 1_000_000_000 / u128::from(i.resolution.max(1));
                let ns = (ns as i128 + i128::from(i.offset) * 1_000_000_000).clamp(0, i128::from(u64::MAX)) as u64;
                let data = &epb.data[..(epb.caplen as usize).min(epb.data.len())];
                (i.linktype, Some(ns), epb.origlen, data)
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                // No timestamp: it is taken to follow the previous packet at once.
                let Some(i) = self.interfaces.first().copied() else {
                    self.skipped.add(Skip::Malformed);
                    return None;
                };
                (i.linktype, None, spb.origlen, spb.data)
            }
            PcapBlockOwned::NG(_) => return None,
        };
        let time = time.unwrap_or(self.last_time);
        self.last_time = time;
        Some((linktype, time, wire_len, data))
    }
}
