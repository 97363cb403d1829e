//! Reading a capture that is already in memory, without copying: each packet's payload is a slice
//! of the input. The streaming [`CaptureReader`](crate::CaptureReader) copies every byte twice
//! (into its buffer, then out as the payload); on a capture held in memory that was a third of
//! the producer's time.

use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified, parse_pcap_header};
use pcap_parser::pcapng::{Block, parse_block_be, parse_block_le, parse_sectionheaderblock};
use pcap_parser::{PcapBlockOwned, PcapError};

use crate::decode::Skip;
use crate::read::{IngestError, Packet, SkipCounts, State, trouble};

/// Anything packets can be read from, one at a time.
pub trait Packets {
    /// The next TCP or UDP packet, `None` at the end.
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError>;

    /// Packets left out so far, by reason.
    fn skipped(&self) -> SkipCounts;
}

impl Packets for crate::CaptureReader<'_> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        Self::next_packet(self)
    }

    fn skipped(&self) -> SkipCounts {
        Self::skipped(self)
    }
}

/// A legacy-pcap record parser of pcap-parser's.
type FrameParser =
    for<'b> fn(&'b [u8]) -> pcap_parser::nom::IResult<&'b [u8], pcap_parser::LegacyPcapBlock<'b>, PcapError<&'b [u8]>>;

#[derive(Clone, Copy, Debug)]
enum Format {
    /// Legacy pcap, with its record parser (little- or big-endian, or Kuznetzov's "modified"
    /// format with 24-byte record headers).
    Pcap {
        parse: FrameParser,
    },
    PcapNg {
        big_endian: bool,
    },
}

/// Reads packets from a whole capture in memory (pcap or pcapng), in capture order.
#[derive(Debug)]
pub struct SliceReader<'a> {
    input: &'a [u8],
    rest: &'a [u8],
    format: Format,
    state: State,
}

const SHB_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

impl<'a> SliceReader<'a> {
    /// Starts reading `input`, which must begin with a pcap or pcapng header.
    pub fn new(input: &'a [u8]) -> Result<Self, IngestError> {
        if input.is_empty() {
            return Err(IngestError::Empty);
        }
        let mut state = State::default();
        let (rest, format) = if input.starts_with(&SHB_MAGIC) {
            // The section header is read with the blocks, so that later sections are too.
            let (_, shb) = parse_sectionheaderblock(input).map_err(|_| IngestError::NotACapture)?;
            (input, Format::PcapNg { big_endian: shb.big_endian() })
        } else {
            let (rest, header) = parse_pcap_header(input).map_err(|_| IngestError::NotACapture)?;
            let parse: FrameParser = match (header.is_modified_format(), header.is_bigendian()) {
                (true, _) => parse_pcap_frame_modified,
                (false, true) => parse_pcap_frame_be,
                (false, false) => parse_pcap_frame,
            };
            let _ = state.packet(PcapBlockOwned::LegacyHeader(header));
            (rest, Format::Pcap { parse })
        };
        Ok(Self { input, rest, format, state })
    }

    fn offset(&self) -> usize {
        self.input.len() - self.rest.len()
    }

    /// Bytes of the input read so far (for progress reports).
    pub fn position(&self) -> usize {
        self.offset()
    }

    /// The next TCP or UDP packet, borrowing its payload from the input.
    pub fn next_packet(&mut self) -> Result<Option<Packet<'a>>, IngestError> {
        while !self.rest.is_empty() {
            let parsed = match self.format {
                Format::Pcap { parse } => parse(self.rest).map(|(rest, b)| (rest, PcapBlockOwned::Legacy(b))),
                Format::PcapNg { .. } if self.rest.starts_with(&SHB_MAGIC) => {
                    parse_sectionheaderblock(self.rest).map(|(rest, shb)| {
                        self.format = Format::PcapNg { big_endian: shb.big_endian() };
                        (rest, PcapBlockOwned::NG(Block::SectionHeader(shb)))
                    })
                }
                Format::PcapNg { big_endian } => {
                    let r = if big_endian { parse_block_be(self.rest) } else { parse_block_le(self.rest) };
                    r.map(|(rest, b)| (rest, PcapBlockOwned::NG(b)))
                }
            };
            let (rest, block) = match parsed {
                Ok(ok) => ok,
                Err(pcap_parser::nom::Err::Incomplete(_)) => {
                    // The capture stops inside a record, as when tcpdump is killed mid-write.
                    self.state.skipped.add(Skip::TruncatedRecord);
                    self.rest = &[];
                    break;
                }
                Err(pcap_parser::nom::Err::Error(e) | pcap_parser::nom::Err::Failure(e)) => {
                    let e: PcapError<&[u8]> = e;
                    return Err(trouble(self.offset(), e));
                }
            };
            self.rest = rest;
            if let Some((time_ns, wire_len, d)) = self.state.packet(block) {
                return Ok(Some(Packet { time_ns, key: d.key, wire_len, payload: d.payload, tcp: d.tcp }));
            }
        }
        Ok(None)
    }
}

impl Packets for SliceReader<'_> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        SliceReader::next_packet(self)
    }

    fn skipped(&self) -> SkipCounts {
        self.state.skipped
    }
}
