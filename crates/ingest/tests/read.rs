//! Captures written by another crate (pcap-file) read back through ours: both formats, both
//! clock resolutions, skipped packets counted by reason, and damaged input refused or cut cleanly.

use std::borrow::Cow;
use std::time::Duration;

use etherparse::PacketBuilder;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
use switchyard_ingest::{CaptureReader, IngestError, Packets, Skip, SliceReader};

fn tcp(port: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ethernet2([1; 6], [2; 6])
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(port, 443, 7, 1000)
        .write(&mut out, payload)
        .unwrap();
    out
}

fn arp_like() -> Vec<u8> {
    let mut f = vec![0xff; 12];
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0; 28]);
    f
}

/// A legacy pcap of three TCP packets and one ARP frame, 1.5 µs apart, at the given resolution.
fn legacy(nanos: bool) -> Vec<u8> {
    let header = PcapHeader {
        ts_resolution: if nanos { pcap_file::TsResolution::NanoSecond } else { pcap_file::TsResolution::MicroSecond },
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    let frames = [tcp(1000, b"hello"), arp_like(), tcp(1001, b""), tcp(1000, b"world!")];
    for (i, f) in frames.iter().enumerate() {
        let t = Duration::from_nanos(1_700_000_000_000_000_000 + i as u64 * 2_000);
        w.write_packet(&PcapPacket::new(t, f.len() as u32, f)).unwrap();
    }
    w.into_writer()
}

fn read_all(bytes: &[u8]) -> (Vec<(u64, u16, Vec<u8>)>, switchyard_ingest::SkipCounts) {
    let mut r = CaptureReader::new(bytes).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push((p.time_ns, p.key.src().port(), p.payload.to_vec()));
    }
    (out, r.skipped())
}

#[test]
fn legacy_pcap_in_both_resolutions() {
    for nanos in [false, true] {
        let (packets, skipped) = read_all(&legacy(nanos));
        let ports: Vec<u16> = packets.iter().map(|p| p.1).collect();
        assert_eq!(ports, [1000, 1001, 1000]);
        assert_eq!(packets[0].2, b"hello");
        assert_eq!(packets[2].2, b"world!");
        assert_eq!(packets[0].0, 1_700_000_000_000_000_000);
        assert_eq!(packets[2].0 - packets[0].0, 6_000, "nanos: {nanos}");
        assert_eq!((skipped.get(Skip::NotIp), skipped.total()), (1, 1));
    }
}

/// A pcapng capture of three TCP packets on an interface with a nanosecond clock.
fn pcapng() -> Vec<u8> {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    // pcap-file 2.0 writes every timestamp in nanoseconds, so the interface must say so.
    let options = vec![InterfaceDescriptionOption::IfTsResol(9)];
    w.write_pcapng_block(InterfaceDescriptionBlock { linktype: DataLink::ETHERNET, snaplen: 0, options }).unwrap();
    for (i, port) in [5u16, 6, 5].into_iter().enumerate() {
        let data = tcp(port, b"x");
        w.write_pcapng_block(EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_micros(10 + i as u64),
            original_len: data.len() as u32,
            data: Cow::Owned(data),
            options: vec![],
        })
        .unwrap();
    }
    w.into_inner()
}

#[test]
fn pcapng_with_an_interface_clock() {
    let (packets, skipped) = read_all(&pcapng());
    assert_eq!(packets.iter().map(|p| p.1).collect::<Vec<_>>(), [5, 6, 5]);
    assert_eq!(packets[1].0 - packets[0].0, 1_000);
    assert_eq!(skipped.total(), 0);
}

#[test]
fn a_cut_capture_keeps_what_came_before_and_says_so() {
    let bytes = legacy(false);
    let cut = &bytes[..bytes.len() - 3];
    let (packets, skipped) = read_all(cut);
    assert_eq!(packets.len(), 2);
    assert_eq!(skipped.get(Skip::TruncatedRecord), 1);
}

#[test]
fn not_a_capture_is_an_error_that_says_so() {
    let e = CaptureReader::new(&b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"[..]).unwrap_err();
    assert!(matches!(e, IngestError::NotACapture), "{e}");
    assert!(e.to_string().contains("not a pcap or pcapng"));
    assert!(matches!(CaptureReader::new(&b""[..]).unwrap_err(), IngestError::Empty));
}

#[test]
fn every_prefix_and_every_flipped_byte_reads_without_panicking() {
    let bytes = legacy(true);
    for cut in 0..bytes.len() {
        if let Ok(mut r) = CaptureReader::new(&bytes[..cut]) {
            while let Ok(Some(_)) = r.next_packet() {}
        }
    }
    for i in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[i] ^= 0xa5;
        if let Ok(mut r) = CaptureReader::new(&damaged[..]) {
            while let Ok(Some(_)) = r.next_packet() {}
        }
    }
}

/// The fuzzer's corpus for the capture reader (fuzz/corpus/capture) and the inputs it found
/// crashes with (fuzz/regressions/capture), replayed on stable Rust in every test run: each
/// input reads to a packet list, a clean error or the end, in both readers; where both read to
/// a clean end, they return the same packets and leave out the same ones.
#[test]
fn the_fuzz_corpus_reads_without_panicking() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz");
    let mut files = 0;
    for dir in ["corpus/capture", "regressions/capture"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            if let (Ok((a, sa, None)), Ok((b, sb, None))) = (streamed(&bytes), sliced(&bytes)) {
                assert_eq!((a, sa), (b, sb), "{}", path.display());
            }
            files += 1;
        }
    }
    assert!(files > 50, "the corpus is in the repository: {files} files");
}

/// The decoder's fuzz corpus (fuzz/corpus/decode: frames from the sample and what the fuzzer
/// grew from them), replayed on stable Rust: the direct reading of plain frames and etherparse's
/// full slicing agree on every one.
#[test]
fn the_decode_corpus_reads_as_etherparse_does() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/decode");
    let (mut files, mut plain) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let frame = std::fs::read(entry.unwrap().path()).unwrap();
        let d = switchyard_ingest::decode(1, &frame);
        assert_eq!(d, switchyard_ingest::decode_thorough(1, &frame), "{frame:02x?}");
        files += 1;
        plain += usize::from(d.is_ok());
    }
    assert!(files > 50 && plain > 10, "the corpus is in the repository: {files} files, {plain} decoded");
}

/// Everything a reader makes of its input: packets (time, key, length, payload, TCP), skips,
/// and the error it ended with, if any.
fn everything(mut r: impl Packets) -> (Vec<String>, String, Option<String>) {
    let mut out = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => out.push(format!("{} {:?} {} {:?} {:?}", p.time_ns, p.key, p.wire_len, p.payload, p.tcp)),
            Ok(None) => return (out, r.skipped().to_string(), None),
            Err(e) => return (out, r.skipped().to_string(), Some(e.to_string())),
        }
    }
}

/// What the streaming reader makes of `bytes`.
fn streamed(bytes: &[u8]) -> Result<(Vec<String>, String, Option<String>), String> {
    CaptureReader::new(bytes).map(everything).map_err(|e| e.to_string())
}

/// The same from the in-memory reader.
fn sliced(bytes: &[u8]) -> Result<(Vec<String>, String, Option<String>), String> {
    SliceReader::new(bytes).map(everything).map_err(|e| e.to_string())
}

/// The in-memory reader reads exactly what the streaming one does: every packet, every skip,
/// on whole, cut and damaged captures of both formats and on the fuzz corpus. (Errors may be
/// worded differently, so only their presence is compared.)
#[test]
fn the_in_memory_reader_agrees_with_the_streaming_one() {
    let same = |bytes: &[u8], what: &str| {
        let (a, b) = (streamed(bytes), sliced(bytes));
        match (a, b) {
            (Ok((pa, sa, ea)), Ok((pb, sb, eb))) => {
                if ea.is_none() && eb.is_none() {
                    assert_eq!((pa, sa), (pb, sb), "{what}");
                } else {
                    let n = pa.len().min(pb.len());
                    assert_eq!(pa[..n], pb[..n], "{what}: packets before the damage");
                }
            }
            (Err(_), Err(_)) => {}
            (a, b) => {
                // A header that one reader rejects may give the other an empty, clean read.
                let empty = |r: &Result<(Vec<String>, String, Option<String>), String>| {
                    r.as_ref().map_or(true, |(p, _, _)| p.is_empty())
                };
                assert!(empty(&a) && empty(&b), "{what}: {a:?} vs {b:?}");
            }
        }
    };
    for nanos in [false, true] {
        let bytes = legacy(nanos);
        same(&bytes, "legacy");
        for cut in 0..bytes.len() {
            same(&bytes[..cut], &format!("legacy cut at {cut}"));
        }
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/capture");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        same(&std::fs::read(&path).unwrap(), &path.display().to_string());
    }
    let sample = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/sample.pcap")).unwrap();
    same(&sample, "sample.pcap");
    assert_eq!(sliced(&sample).unwrap().0.len(), 2503);
}

/// A pipe that hands over at most `step` bytes a read, as a pipe or a shared-memory ring may.
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, dst: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(dst.len()).min(self.bytes.len());
        dst[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// A capture that arrives a few bytes a read is read as it is whole: the format is judged on
/// the whole header, not on what the first read brought (a writer publishing the header field
/// by field once made a feed's worker give up on its ring at the magic number).
#[test]
fn a_capture_arriving_a_few_bytes_a_read_is_read_as_whole() {
    let sample = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/sample.pcap")).unwrap();
    for (what, bytes) in
        [("legacy", legacy(false)), ("legacy ns", legacy(true)), ("pcapng", pcapng()), ("sample", sample)]
    {
        let whole = streamed(&bytes).unwrap();
        assert!(!whole.0.is_empty(), "{what}");
        for step in [1, 3, 4, 7, 25, 4096] {
            let trickled =
                CaptureReader::new(Trickle { bytes: &bytes, step }).map(everything).map_err(|e| e.to_string());
            assert_eq!(trickled, Ok(whole.clone()), "{what}, {step} bytes a read");
        }
    }
}

/// Everything a reader makes of its input when asked to leave every other connection (by the
/// parity of its flow id, from the glimpse): kept packets in full, left ones as their times,
/// skips, and whether it ended in an error; and how often it asked.
fn glimpsed(mut r: impl Packets) -> (Vec<String>, String, bool, usize) {
    let (out, asked) = (std::cell::RefCell::new(Vec::new()), std::cell::Cell::new(0));
    let leave = |g: &switchyard_ingest::Glimpse, time_ns: u64| {
        asked.set(asked.get() + 1);
        let leave = switchyard_core::FlowKey::Tuple(g.undirected()).id().0 % 2 == 1;
        if leave {
            out.borrow_mut().push(format!("left {time_ns}"));
        }
        leave
    };
    let each = |p: switchyard_ingest::Packet<'_>| {
        out.borrow_mut().push(format!("{} {:?} {} {:?} {:?}", p.time_ns, p.key, p.wire_len, p.payload, p.tcp));
        std::ops::ControlFlow::Continue(())
    };
    let failed = r.for_each_kept(leave, each).is_err();
    (out.into_inner(), r.skipped().to_string(), failed, asked.get())
}

/// The in-memory reader's glimpse (read from a plain frame's fields, before decoding) leaves
/// and keeps what a glimpse of the decoded packet does (the streaming reader's, which decodes
/// first), asking once a packet, on whole and cut captures, the sample and the fuzz corpus.
#[test]
fn glimpsing_before_decoding_keeps_and_leaves_what_decoding_first_does() {
    let same = |bytes: &[u8], what: &str| {
        let (Ok(a), Ok(b)) = (CaptureReader::new(bytes).map(glimpsed), SliceReader::new(bytes).map(glimpsed)) else {
            return;
        };
        if !a.2 && !b.2 {
            assert_eq!(a, b, "{what}");
            assert_eq!(b.3, b.0.len(), "{what}: asked once a packet");
            assert_eq!(a.3, a.0.len(), "{what}: asked once a packet");
        }
    };
    let bytes = legacy(true);
    for cut in 0..=bytes.len() {
        same(&bytes[..cut], &format!("legacy cut at {cut}"));
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/capture");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        same(&std::fs::read(&path).unwrap(), &path.display().to_string());
    }
    for name in ["sample.pcap", "labelled.pcap", "conversations.pcap"] {
        let bytes = std::fs::read(format!("{}/../../data/traces/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        same(&bytes, name);
        let (out, _, _, _) = glimpsed(SliceReader::new(&bytes).unwrap());
        let left = out.iter().filter(|l| l.starts_with("left")).count();
        assert!(left > out.len() / 5 && left < out.len() * 4 / 5, "{name}: {left} of {} left", out.len());
    }
}
