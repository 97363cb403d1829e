//! H.264 elementary streams in the byte-stream format (ITU-T H.264 Annex B): NAL units found
//! by their start codes, and a stream cut into closed GOPs at its IDR pictures.
//!
//! A GOP is the unit the place stage places (Guo §6.2: a stream is the flow, a GOP its unit,
//! the GOP's bytes its cost). Only an IDR picture starts one: after an IDR no picture refers to
//! anything before it (H.264 §8.2.1), so a GOP decodes alone. A stream whose keyframes are
//! non-IDR I pictures (open GOPs) is one GOP from IDR to IDR, never cut at those.
//!
//! Each GOP carries the sequence and picture parameter sets (SPS, PPS) in force at its IDR:
//! encoders that send them once, at the stream's start, would otherwise leave every GOP after
//! the first undecodable on a worker of its own.

use thiserror::Error;

/// The NAL unit types this module reads (H.264 Table 7-1).
pub mod nal_type {
    /// A slice of a non-IDR picture.
    pub const SLICE: u8 = 1;
    /// A slice of an IDR picture.
    pub const IDR: u8 = 5;
    /// Supplemental enhancement information.
    pub const SEI: u8 = 6;
    /// Sequence parameter set.
    pub const SPS: u8 = 7;
    /// Picture parameter set.
    pub const PPS: u8 = 8;
    /// Access unit delimiter.
    pub const AUD: u8 = 9;
}

/// Why a byte stream could not be cut into GOPs.
#[derive(Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamError {
    /// No start code anywhere: not an Annex B stream (an MP4 or MKV file holds its NAL units
    /// length-prefixed instead).
    #[error(
        "no H.264 start code (00 00 01) in {0} bytes: not an Annex B elementary stream; from an MP4 or MKV \
         file, extract one with `ffmpeg -i IN -c:v copy -bsf:v h264_mp4toannexb -f h264 OUT.h264`"
    )]
    NoStartCode(usize),
    /// Slices but no IDR picture: nothing to start a closed GOP at.
    #[error("no IDR picture in the stream ({0} NAL units): a closed GOP can only start at one")]
    NoIdr(usize),
    /// An IDR before any SPS or PPS: the GOP could not be decoded alone.
    #[error("the IDR picture at byte {0} comes before any SPS and PPS: the stream cannot be decoded from there")]
    NoParameterSets(usize),
}

/// One NAL unit: its bytes with their start code, where they began in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nal<'a> {
    /// The unit with its leading start code (3 or 4 bytes).
    pub bytes: &'a [u8],
    /// Its offset in the stream.
    pub at: usize,
    /// Length of the start code in front.
    pub prefix: usize,
}

impl Nal<'_> {
    /// The unit's type (H.264 §7.3.1), or 0 for an empty unit.
    pub fn kind(&self) -> u8 {
        self.bytes.get(self.prefix).map_or(0, |b| b & 0x1f)
    }

    /// Whether this is a slice that begins a picture: `first_mb_in_slice` is 0, which Exp-Golomb
    /// codes as a single 1 bit (§7.3.3), the first bit after the one-byte NAL header.
    pub fn starts_picture(&self) -> bool {
        matches!(self.kind(), nal_type::SLICE | nal_type::IDR)
            && self.bytes.get(self.prefix + 1).is_some_and(|b| b & 0x80 != 0)
    }
}

/// The NAL units of an Annex B byte stream, in order. Bytes before the first start code are
/// skipped (§B.2 allows leading zeros); trailing zeros stay on the unit they follow, which
/// decoders accept (§B.2's `trailing_zero_8bits`).
pub fn nal_units(stream: &[u8]) -> impl Iterator<Item = Nal<'_>> {
    let mut next = find_start(stream, 0);
    std::iter::from_fn(move || {
        let (at, prefix) = next?;
        next = find_start(stream, at + prefix);
        let end = next.map_or(stream.len(), |(n, _)| n);
        Some(Nal { bytes: &stream[at..end], at, prefix })
    })
}

/// The next start code at or after `from`: its offset, and 4 when a zero byte precedes
/// `00 00 01` (the four-byte form), else 3.
fn find_start(stream: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while i + 3 <= stream.len() {
        // Step on the third byte: a start code's `01` must follow two zeros.
        match stream[i + 2] {
            1 if stream[i] == 0 && stream[i + 1] == 0 => {
                return Some(if i > from && stream[i - 1] == 0 { (i - 1, 4) } else { (i, 3) });
            }
            0 => i += 1,
            _ => i += 3,
        }
    }
    None
}

/// One closed GOP of a stream: the bytes to decode it alone (parameter sets first), and how
/// many pictures it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gop {
    /// Its place in the stream, from 0.
    pub index: u64,
    /// SPS and PPS in force, then the GOP's own NAL units from its IDR on.
    pub bytes: Vec<u8>,
    /// Pictures in it (slices that start a picture).
    pub pictures: u32,
}

/// Cuts `stream` into closed GOPs at its IDR pictures. Anything before the first IDR (pictures
/// that refer to a keyframe not in the file) is left out and counted in the second value.
pub fn gops(stream: &[u8]) -> Result<(Vec<Gop>, u32), StreamError> {
    let mut units = 0usize;
    let mut sps: Vec<&[u8]> = Vec::new();
    let mut pps: Vec<&[u8]> = Vec::new();
    let mut out: Vec<Gop> = Vec::new();
    // Parameter sets and SEI seen since the last picture: they belong to the next picture.
    let mut pending: Vec<Nal<'_>> = Vec::new();
    let mut current: Option<Gop> = None;
    let mut skipped = 0u32;
    for nal in nal_units(stream) {
        units += 1;
        match nal.kind() {
            nal_type::SPS => {
                replace_by_id(&mut sps, nal.bytes);
                pending.push(nal);
            }
            nal_type::PPS => {
                replace_by_id(&mut pps, nal.bytes);
                pending.push(nal);
            }
            nal_type::IDR if nal.starts_picture() => {
                if sps.is_empty() || pps.is_empty() {
                    return Err(StreamError::NoParameterSets(nal.at));
                }
                out.extend(current.take());
                let mut bytes = Vec::new();
                // The sets in force first; the pending ones follow, so a set sent right here
                // is the one the decoder keeps.
                for set in sps.iter().chain(&pps) {
                    if !pending.iter().any(|p| p.bytes == *set) {
                        bytes.extend_from_slice(set);
                    }
                }
                for p in pending.drain(..) {
                    bytes.extend_from_slice(p.bytes);
                }
                bytes.extend_from_slice(nal.bytes);
                current = Some(Gop { index: out.len() as u64, bytes, pictures: 1 });
            }
            _ => match current.as_mut() {
                Some(gop) => {
                    for p in pending.drain(..) {
                        gop.bytes.extend_from_slice(p.bytes);
                    }
                    if nal.starts_picture() {
                        gop.pictures += 1;
                    }
                    gop.bytes.extend_from_slice(nal.bytes);
                }
                None => {
                    pending.retain(|p| matches!(p.kind(), nal_type::SPS | nal_type::PPS));
                    if nal.starts_picture() {
                        skipped += 1;
                    }
                    if matches!(nal.kind(), nal_type::SEI | nal_type::AUD) {
                        pending.push(nal);
                    }
                }
            },
        }
    }
    if units == 0 {
        return Err(StreamError::NoStartCode(stream.len()));
    }
    if let Some(mut gop) = current {
        for p in pending.drain(..) {
            gop.bytes.extend_from_slice(p.bytes);
        }
        out.push(gop);
    }
    if out.is_empty() {
        return Err(StreamError::NoIdr(units));
    }
    Ok((out, skipped))
}

/// Keeps one parameter set per id: a set whose id was seen replaces the old one. The id is the
/// first Exp-Golomb field after the fixed header bytes; rather than parse it, sets are told
/// apart by their bytes up to and including the first byte that can hold it, which is exact
/// for the single-set streams encoders write and conservative (keeps both) otherwise.
fn replace_by_id<'a>(sets: &mut Vec<&'a [u8]>, new: &'a [u8]) {
    if let Some(old) = sets.iter_mut().find(|s| s.len() >= 4 && new.len() >= 4 && s[..4] == new[..4]) {
        *old = new;
    } else {
        sets.push(new);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nal(kind: u8, first_mb_zero: bool, body: &[u8]) -> Vec<u8> {
        let mut v = vec![0, 0, 0, 1, 0x60 | kind, if first_mb_zero { 0x88 } else { 0x08 }];
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn start_codes_of_both_lengths_are_found_and_leading_bytes_skipped() {
        let s = [9, 9, 0, 0, 1, 0x67, 5, 0, 0, 0, 1, 0x68, 6, 0, 0, 1, 0x65, 0x88];
        let units: Vec<_> = nal_units(&s).map(|n| (n.at, n.prefix, n.kind())).collect();
        assert_eq!(units, [(2, 3, 7), (7, 4, 8), (13, 3, 5)]);
        assert!(nal_units(&[0, 0, 0, 0]).next().is_none());
    }

    #[test]
    fn a_stream_is_cut_at_each_idr_with_its_parameter_sets_in_every_gop() {
        let sps = nal(nal_type::SPS, false, &[1]);
        let pps = nal(nal_type::PPS, false, &[2]);
        let mut s = [sps.clone(), pps.clone()].concat();
        for _ in 0..3 {
            s.extend(nal(nal_type::IDR, true, &[3]));
            s.extend(nal(nal_type::SLICE, true, &[4]));
            s.extend(nal(nal_type::SLICE, false, &[5])); // a second slice of the same picture
            s.extend(nal(nal_type::SLICE, true, &[6]));
        }
        let (gops, skipped) = gops(&s).unwrap();
        assert_eq!(skipped, 0);
        assert_eq!(gops.len(), 3);
        for (i, g) in gops.iter().enumerate() {
            assert_eq!(g.index, i as u64);
            assert_eq!(g.pictures, 3);
            assert!(g.bytes.starts_with(&[sps.clone(), pps.clone()].concat()), "GOP {i} lacks its sets");
        }
        // Nothing lost or doubled: the GOPs hold the stream's bytes plus the sets repeated.
        let total: usize = gops.iter().map(|g| g.bytes.len()).sum();
        assert_eq!(total, s.len() + 2 * (sps.len() + pps.len()));
    }

    #[test]
    fn pictures_before_the_first_idr_are_counted_and_left_out() {
        let mut s = nal(nal_type::SPS, false, &[1]);
        s.extend(nal(nal_type::PPS, false, &[2]));
        s.extend(nal(nal_type::SLICE, true, &[7]));
        s.extend(nal(nal_type::IDR, true, &[3]));
        let (gops, skipped) = gops(&s).unwrap();
        assert_eq!((gops.len(), skipped), (1, 1));
    }

    #[test]
    fn bad_streams_are_refused_with_what_to_do() {
        let mp4ish = b"\0\0\0\x18ftypisom".to_vec();
        let e = gops(&mp4ish).unwrap_err();
        assert_eq!(e, StreamError::NoStartCode(12));
        assert!(e.to_string().contains("h264_mp4toannexb"), "{e}");
        let no_idr = [nal(nal_type::SPS, false, &[1]), nal(nal_type::SLICE, true, &[1])].concat();
        assert_eq!(gops(&no_idr).unwrap_err(), StreamError::NoIdr(2));
        assert_eq!(gops(&nal(nal_type::IDR, true, &[1])).unwrap_err(), StreamError::NoParameterSets(0));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_cut_or_refused_never_a_panic(bytes in proptest::collection::vec(
            proptest::prop_oneof![proptest::strategy::Just(0u8), proptest::strategy::Just(1u8), proptest::num::u8::ANY], 0..400)) {
            if let Ok((gops, _)) = gops(&bytes) {
                for g in &gops {
                    proptest::prop_assert!(g.pictures >= 1);
                }
            }
            // Every byte after the first start code is in exactly one unit.
            let units: Vec<_> = nal_units(&bytes).collect();
            if let Some(first) = units.first() {
                let covered: usize = units.iter().map(|u| u.bytes.len()).sum();
                proptest::prop_assert_eq!(covered, bytes.len() - first.at);
            }
        }
    }
}
