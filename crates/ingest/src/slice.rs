//! Reading a capture that is already in memory, without copying: each packet's payload is a slice
//! of the input. The streaming [`CaptureReader`](crate::CaptureReader) copies every byte twice
//! (into its buffer, then out as the payload); on a capture held in memory that was a third of
//! the producer's time.
//!
//! Legacy pcap records are walked here directly rather than through pcap-parser: a record is
//! four integers and the frame, and building pcap-parser's block enum and taking it apart again
//! was most of the cost of reading a packet (moving the wide structs through the stack stalled
//! on store forwarding). Reading the labelled sample, record and headers, took 72 ns a packet
//! through pcap-parser's blocks and takes 34 walked directly (best of 3,000 runs). The streaming
//! [`CaptureReader`](crate::CaptureReader) still reads through pcap-parser, and the tests and the
//! `capture` fuzz target hold the two readers to the same packets. pcapng, whose blocks carry
//! options and interfaces, stays with pcap-parser.

use std::ops::ControlFlow;

use pcap_parser::pcap::parse_pcap_header;
use pcap_parser::pcapng::{Block, parse_block_be, parse_block_le, parse_sectionheaderblock};
use pcap_parser::{PcapBlockOwned, PcapError};

use crate::decode::{Plain, Skip, decode};
use crate::glimpse::Glimpse;
use crate::read::{IngestError, Packet, SHB_MAGIC, SkipCounts, State, check_block_length, trouble};

/// Anything packets can be read from, one at a time.
pub trait Packets {
    /// The next TCP or UDP packet, `None` at the end.
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError>;

    /// Packets left out so far, by reason.
    fn skipped(&self) -> SkipCounts;

    /// Reads to the end, or until `each` breaks. `leave` is shown a [`Glimpse`] of each
    /// packet's connection and its capture time first, and says whether the caller leaves the
    /// packet; `each` is called with every packet not left. A reader that can glimpse a packet
    /// without decoding it (a legacy pcap in memory, for plain IPv4 frames) does not decode the
    /// packets left (a shard of the sharded runtime leaves most). Packets left out for damage
    /// are counted in [`Packets::skipped`] and shown to neither. Called again after `each`
    /// broke, it goes on from the next packet.
    ///
    /// The loops that run once a packet read this way rather than through
    /// [`Packets::next_packet`]: handed to an inlined closure, a packet's fields stay in
    /// registers, where returning a `Result<Option<Packet>>` wrote them to memory and read them
    /// back (reading and tracking the labelled sample took 36–40 ns a packet this way against
    /// 55–57 through `next_packet`, runs interleaved).
    fn for_each_kept(
        &mut self,
        mut leave: impl FnMut(&Glimpse, u64) -> bool,
        mut each: impl FnMut(Packet<'_>) -> ControlFlow<()>,
    ) -> Result<(), IngestError>
    where
        Self: Sized,
    {
        while let Some(p) = self.next_packet()? {
            if !leave(&Glimpse::of(&p.key), p.time_ns) && each(p).is_break() {
                break;
            }
        }
        Ok(())
    }
}

impl<P: Packets> Packets for &mut P {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        (**self).next_packet()
    }

    fn for_each_kept(
        &mut self,
        leave: impl FnMut(&Glimpse, u64) -> bool,
        each: impl FnMut(Packet<'_>) -> ControlFlow<()>,
    ) -> Result<(), IngestError> {
        (**self).for_each_kept(leave, each)
    }

    fn skipped(&self) -> SkipCounts {
        (**self).skipped()
    }
}

impl Packets for crate::CaptureReader<'_> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        Self::next_packet(self)
    }

    fn skipped(&self) -> SkipCounts {
        Self::skipped(self)
    }
}

#[derive(Clone, Copy, Debug)]
enum Format {
    /// Legacy pcap.
    Pcap(Legacy),
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

impl<'a> SliceReader<'a> {
    /// Starts reading `input`, which must begin with a pcap or pcapng header.
    pub fn new(input: &'a [u8]) -> Result<Self, IngestError> {
        if input.is_empty() {
            return Err(IngestError::Empty);
        }
        let state = State::default();
        let (rest, format) = if input.starts_with(&SHB_MAGIC) {
            // The section header is read with the blocks, so that later sections are too.
            let (_, shb) = parse_sectionheaderblock(input).map_err(|_| IngestError::NotACapture)?;
            (input, Format::PcapNg { big_endian: shb.big_endian() })
        } else {
            let (rest, header) = parse_pcap_header(input).map_err(|_| IngestError::NotACapture)?;
            let legacy = Legacy {
                // Kuznetzov's "modified" format is little-endian with 24-byte record headers.
                big_endian: header.is_bigendian() && !header.is_modified_format(),
                record_header: if header.is_modified_format() { 24 } else { 16 },
                linktype: header.network.0,
                nanos: header.is_nanosecond_precision(),
            };
            (rest, Format::Pcap(legacy))
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
        if let Format::Pcap(legacy) = self.format {
            return Ok(self.next_legacy(legacy));
        }
        while !self.rest.is_empty() {
            let parsed = match self.format {
                Format::Pcap(_) => unreachable!("legacy records are walked by next_legacy"),
                Format::PcapNg { .. } if self.rest.starts_with(&SHB_MAGIC) => {
                    parse_sectionheaderblock(self.rest).map(|(rest, shb)| {
                        self.format = Format::PcapNg { big_endian: shb.big_endian() };
                        (rest, PcapBlockOwned::NG(Block::SectionHeader(shb)))
                    })
                }
                Format::PcapNg { big_endian } => {
                    check_block_length(self.rest, big_endian, self.offset())?;
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
                return Ok(Some(Packet {
                    time_ns,
                    key: d.key,
                    wire_len,
                    ip_len: d.ip_len,
                    payload: d.payload,
                    tcp: d.tcp,
                }));
            }
        }
        Ok(None)
    }
}

impl<'a> SliceReader<'a> {
    /// The next TCP or UDP packet of a legacy pcap capture. A record cut short by the end of the
    /// input is counted as [`Skip::TruncatedRecord`] and ends the capture, as pcap-parser's
    /// `Incomplete` does in the streaming reader.
    #[inline]
    fn next_legacy(&mut self, f: Legacy) -> Option<Packet<'a>> {
        self.next_legacy_kept(f, |_, _| false)
    }

    /// [`Self::next_legacy`], glimpsing each plain frame before decoding it and passing over,
    /// undecoded, those `leave` says.
    #[inline]
    fn next_legacy_kept(&mut self, f: Legacy, mut leave: impl FnMut(&Glimpse, u64) -> bool) -> Option<Packet<'a>> {
        while !self.rest.is_empty() {
            let Some((header, after)) = self.rest.split_at_checked(f.record_header) else {
                self.truncated();
                return None;
            };
            let word = |at: usize| {
                let b = [header[at], header[at + 1], header[at + 2], header[at + 3]];
                if f.big_endian { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
            };
            let (secs, frac, caplen, wire_len) = (word(0), word(4), word(8), word(12));
            let Some((frame, rest)) = after.split_at_checked(caplen as usize) else {
                self.truncated();
                return None;
            };
            self.rest = rest;
            prefetch(rest);
            let frac_ns = if f.nanos { u64::from(frac) } else { u64::from(frac) * 1_000 };
            let time_ns = u64::from(secs) * 1_000_000_000 + frac_ns;
            // The common frame is glimpsed from its fields; any other is decoded in full first.
            let plain = if f.linktype == crate::decode::ETHERNET { Plain::of(frame) } else { None };
            let d = match plain {
                Some(plain) if leave(&plain.glimpse(), time_ns) => continue,
                Some(plain) => plain.decoded(),
                None => match decode(f.linktype, frame) {
                    Ok(d) if leave(&Glimpse::of(&d.key), time_ns) => continue,
                    Ok(d) => d,
                    Err(reason) => {
                        self.state.skipped.add(reason);
                        continue;
                    }
                },
            };
            return Some(Packet { time_ns, key: d.key, wire_len, ip_len: d.ip_len, payload: d.payload, tcp: d.tcp });
        }
        None
    }

    /// [`Packets::for_each_kept`], with packets that borrow the input rather than the reader,
    /// so that `each` may keep their payloads (the parallel pipeline's producer leaves them
    /// for the workers).
    #[inline]
    pub fn for_each_kept(
        &mut self,
        mut leave: impl FnMut(&Glimpse, u64) -> bool,
        mut each: impl FnMut(Packet<'a>) -> ControlFlow<()>,
    ) -> Result<(), IngestError> {
        if let Format::Pcap(legacy) = self.format {
            while let Some(p) = self.next_legacy_kept(legacy, &mut leave) {
                if each(p).is_break() {
                    break;
                }
            }
            return Ok(());
        }
        while let Some(p) = self.next_packet()? {
            if !leave(&Glimpse::of(&p.key), p.time_ns) && each(p).is_break() {
                break;
            }
        }
        Ok(())
    }

    fn truncated(&mut self) {
        self.state.skipped.add(Skip::TruncatedRecord);
        self.rest = &[];
    }
}

/// Asks the CPU to start loading the next record while this one is decoded and tracked: in a
/// capture larger than the caches each record header is a miss, and records are too uneven in
/// size for the hardware's stride prefetcher to guess.
#[inline]
fn prefetch(next: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for ahead in [0, 2048, 4096] {
        if let Some(at) = next.get(ahead..) {
            // SAFETY: a prefetch is a hint; it reads nothing and cannot fault.
            unsafe { std::arch::x86_64::_mm_prefetch(at.as_ptr().cast::<i8>(), std::arch::x86_64::_MM_HINT_T0) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = next;
}

/// What a legacy pcap file header says about its records.
#[derive(Clone, Copy, Debug)]
struct Legacy {
    big_endian: bool,
    /// 16 bytes, or 24 in the "modified" format.
    record_header: usize,
    linktype: i32,
    /// Timestamps' fractions are nanoseconds (magic 0xa1b23c4d), not microseconds.
    nanos: bool,
}

impl Packets for SliceReader<'_> {
    fn next_packet(&mut self) -> Result<Option<Packet<'_>>, IngestError> {
        SliceReader::next_packet(self)
    }

    fn for_each_kept(
        &mut self,
        leave: impl FnMut(&Glimpse, u64) -> bool,
        each: impl FnMut(Packet<'_>) -> ControlFlow<()>,
    ) -> Result<(), IngestError> {
        SliceReader::for_each_kept(self, leave, each)
    }

    fn skipped(&self) -> SkipCounts {
        self.state.skipped
    }
}
