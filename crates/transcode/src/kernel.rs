//! The transcoding kernel: one closed GOP decoded and encoded again, alone.
//!
//! Each GOP gets a fresh decoder and a fresh single-threaded encoder, so rate control restarts
//! at every GOP and the output of a GOP depends on nothing but its input and the settings: the
//! same bytes whichever worker ran it and in whatever order (the check the tests and
//! `transcode --verify` make). This is Guo's unit of work (§6.2): the GOP is independent, so the
//! place stage may send a stream's GOPs anywhere, and what it gains by keeping them together is
//! the warm caches, not correctness.

use openh264::OpenH264API;
use openh264::decoder::{Decoder, DecoderConfig};
use openh264::formats::{YUVBuffer, YUVSource};
use openh264::nal_units;
use thiserror::Error;

use crate::encoder::Encoder;
#[cfg(feature = "x264")]
use crate::x264::X264Encoder;

/// Which H.264 encoder makes the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Codec {
    /// OpenH264, built from source by cargo: always there.
    #[default]
    OpenH264,
    /// Debian's libx264 (the encoder Debian's ffmpeg uses), with the `x264` cargo feature only:
    /// preset [`X264_PRESET`], average bit rate, one thread, no B-frames, no scene-cut I-frames.
    X264,
}

/// The x264 preset of [`Codec::X264`], which `bench transcode` gives ffmpeg too: fast enough for
/// twenty streams on two cores.
pub const X264_PRESET: &str = "veryfast";

impl Codec {
    /// Whether this build has the encoder (x264 needs the `x264` feature).
    pub const fn is_built(self) -> bool {
        match self {
            Self::OpenH264 => true,
            Self::X264 => cfg!(feature = "x264"),
        }
    }

    /// The x264 instruction-set flags the kernel's encoders use (`-x264-params asm=N` gives
    /// ffmpeg the same), or None where this build has no x264.
    pub fn x264_asm_flags() -> Option<u32> {
        #[cfg(feature = "x264")]
        return Some(crate::x264::asm_flags());
        #[cfg(not(feature = "x264"))]
        None
    }

    /// Its name on the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Self::OpenH264 => "openh264",
            Self::X264 => "x264",
        }
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Codec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "openh264" => Ok(Self::OpenH264),
            "x264" => Ok(Self::X264),
            _ => Err(format!("`{s}` is not an encoder: write openh264 or x264")),
        }
    }
}

/// What to make of each GOP.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    /// Target bit rate of the output, bits a second.
    pub bitrate: u32,
    /// Frame rate, for rate control's time base.
    pub fps: f32,
    /// Divide width and height by this (1 keeps the size; 2 halves it).
    pub downscale: u32,
    /// The encoder.
    pub codec: Codec,
}

impl Default for Settings {
    fn default() -> Self {
        Self { bitrate: 500_000, fps: 30.0, downscale: 1, codec: Codec::OpenH264 }
    }
}

/// Why a GOP could not be transcoded.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The decoder refused the GOP's bytes.
    #[error("the decoder refused GOP {gop}: {reason}")]
    Decode {
        /// The GOP's index in its stream.
        gop: u64,
        /// OpenH264's reason.
        reason: String,
    },
    /// The encoder refused a picture.
    #[error("the encoder refused picture {picture} of GOP {gop}: {reason}")]
    Encode {
        /// The GOP's index in its stream.
        gop: u64,
        /// The picture's index in the GOP.
        picture: u32,
        /// OpenH264's reason.
        reason: String,
    },
    /// The settings ask for an encoder this build does not have.
    #[error(
        "the {0} encoder is not built in: build with `--features x264` (it needs Debian's libx264-dev: \
         .ci/install-x264), or use --encoder openh264"
    )]
    NotBuilt(Codec),
    /// Downscaling would leave no picture (or an odd one the encoder cannot take).
    #[error("a {width}x{height} picture divided by {by} is too small to encode (under 16x16)")]
    TooSmall {
        /// Width in.
        width: usize,
        /// Height in.
        height: usize,
        /// The divisor.
        by: u32,
    },
}

/// A GOP transcoded: the output's bytes and how many pictures went in and out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transcoded {
    /// The output GOP, an Annex B stream of its own (parameter sets, then an IDR).
    pub bytes: Vec<u8>,
    /// Pictures the decoder gave.
    pub pictures_in: u32,
    /// Pictures the encoder took.
    pub pictures_out: u32,
}

/// Decodes `gop` (an Annex B stream starting with its parameter sets and an IDR) and encodes
/// every picture again with `settings`. `index` names the GOP in errors.
pub fn transcode(gop: &[u8], index: u64, settings: &Settings) -> Result<Transcoded, KernelError> {
    if !settings.codec.is_built() {
        return Err(KernelError::NotBuilt(settings.codec));
    }
    let decode_err = |e: openh264::Error| KernelError::Decode { gop: index, reason: e.to_string() };
    let mut decoder = Decoder::with_api_config(OpenH264API::from_source(), DecoderConfig::new()).map_err(decode_err)?;
    let mut again = Reencoder { index, settings, encoder: None, out: Transcoded::default() };
    again.out.bytes.reserve(gop.len());
    for packet in nal_units(gop) {
        if let Some(yuv) = decoder.decode(packet).map_err(decode_err)? {
            again.take(&yuv)?;
        }
    }
    for yuv in decoder.flush_remaining().map_err(decode_err)? {
        again.take(&yuv)?;
    }
    again.finish()?;
    Ok(again.out)
}

/// The encoding half of a GOP's transcode: its encoder is made at the first picture, when the
/// size is known.
struct Reencoder<'a> {
    index: u64,
    settings: &'a Settings,
    encoder: Option<AnyEncoder>,
    out: Transcoded,
}

/// The encoder the settings chose.
enum AnyEncoder {
    // Boxed: OpenH264's encoder carries its 7 KB bitstream info inline, x264's is a pointer.
    OpenH264(Box<Encoder>),
    #[cfg(feature = "x264")]
    X264(X264Encoder),
}

impl AnyEncoder {
    /// Encodes picture number `picture`; returns the pictures that came out (x264 looks ahead,
    /// so a picture may come out at a later call, or at [`Self::finish`]).
    fn encode(
        &mut self,
        yuv: &impl YUVSource,
        picture: u32,
        fps: f32,
        out: &mut Vec<u8>,
    ) -> Result<u32, crate::encoder::EncodeError> {
        match self {
            Self::OpenH264(e) => {
                let millis = (f64::from(picture) * 1000.0 / f64::from(fps)) as i64;
                e.encode(yuv, millis, out).map(|()| 1)
            }
            #[cfg(feature = "x264")]
            Self::X264(e) => e.encode(yuv, i64::from(picture), out),
        }
    }

    /// The pictures still held, written out.
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<u32, crate::encoder::EncodeError> {
        match self {
            // OpenH264 gives each picture back at once: it holds none.
            Self::OpenH264(_) => {
                let _ = out;
                Ok(0)
            }
            #[cfg(feature = "x264")]
            Self::X264(e) => e.finish(out),
        }
    }
}

impl Reencoder<'_> {
    /// Encodes one decoded picture, downscaled first if the settings say so.
    fn take(&mut self, yuv: &impl YUVSource) -> Result<(), KernelError> {
        let picture = self.out.pictures_in;
        self.out.pictures_in += 1;
        let (w, h) = yuv.dimensions();
        let by = self.settings.downscale.max(1) as usize;
        let (ow, oh) = if by == 1 { (w, h) } else { ((w / by) & !1, (h / by) & !1) };
        if ow < 16 || oh < 16 {
            return Err(KernelError::TooSmall { width: w, height: h, by: self.settings.downscale });
        }
        let (index, settings) = (self.index, self.settings);
        let failed =
            |e: crate::encoder::EncodeError| KernelError::Encode { gop: index, picture, reason: e.to_string() };
        let enc = match self.encoder.as_mut() {
            Some(e) => e,
            None => self.encoder.insert(new_encoder(ow, oh, settings).map_err(failed)?),
        };
        let came_out = if by == 1 {
            enc.encode(yuv, picture, settings.fps, &mut self.out.bytes)
        } else {
            enc.encode(&downscaled(yuv, by, ow, oh), picture, settings.fps, &mut self.out.bytes)
        }
        .map_err(failed)?;
        self.out.pictures_out += came_out;
        Ok(())
    }

    /// Writes out what the encoder still holds, after the last picture.
    fn finish(&mut self) -> Result<(), KernelError> {
        let Some(enc) = self.encoder.as_mut() else { return Ok(()) };
        let picture = self.out.pictures_in;
        let index = self.index;
        let came_out = enc.finish(&mut self.out.bytes).map_err(|e| KernelError::Encode {
            gop: index,
            picture,
            reason: e.to_string(),
        })?;
        self.out.pictures_out += came_out;
        Ok(())
    }
}

/// A single-threaded encoder: threads inside the encoder would make its output depend on their
/// timing, and the pool's workers are the parallelism. Frame skipping is off so that every
/// picture in is a picture out; an IDR comes only at the start (each GOP has its own encoder).
fn new_encoder(w: usize, h: usize, settings: &Settings) -> Result<AnyEncoder, crate::encoder::EncodeError> {
    match settings.codec {
        Codec::OpenH264 => {
            let bitrate = i32::try_from(settings.bitrate).unwrap_or(i32::MAX);
            Encoder::new(w as i32, h as i32, bitrate, settings.fps, 0).map(|e| AnyEncoder::OpenH264(Box::new(e)))
        }
        #[cfg(feature = "x264")]
        Codec::X264 => X264Encoder::new(w as i32, h as i32, settings.bitrate, settings.fps).map(AnyEncoder::X264),
        // `transcode` refuses it before any picture; this is a second line.
        #[cfg(not(feature = "x264"))]
        Codec::X264 => Err(crate::encoder::EncodeError::x264("not built in (the `x264` feature)".into())),
    }
}

/// Box filter: each output sample the mean of a `by` × `by` block of the input, per plane.
fn downscaled(yuv: &impl YUVSource, by: usize, ow: usize, oh: usize) -> YUVBuffer {
    let (sy, su, sv) = yuv.strides();
    let mut planes = Vec::with_capacity(ow * oh * 3 / 2);
    box_plane(yuv.y(), sy, ow, oh, by, &mut planes);
    box_plane(yuv.u(), su, ow / 2, oh / 2, by, &mut planes);
    box_plane(yuv.v(), sv, ow / 2, oh / 2, by, &mut planes);
    YUVBuffer::from_vec(planes, ow, oh)
}

fn box_plane(src: &[u8], stride: usize, ow: usize, oh: usize, by: usize, out: &mut Vec<u8>) {
    let area = (by * by) as u32;
    for y in 0..oh {
        for x in 0..ow {
            let mut sum = 0u32;
            for dy in 0..by {
                let row = (y * by + dy) * stride + x * by;
                sum += src[row..row + by].iter().map(|&b| u32::from(b)).sum::<u32>();
            }
            out.push(((sum + area / 2) / area) as u8);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annexb;
    use crate::make::{Sample, sample_stream};

    fn stream() -> Vec<u8> {
        sample_stream(&Sample { width: 96, height: 64, frames: 12, gop: 4, seed: 7, bitrate: 400_000 }).unwrap()
    }

    #[test]
    fn a_gop_comes_out_with_every_picture_and_decodes_alone() {
        let (gops, _) = annexb::gops(&stream()).unwrap();
        assert_eq!(gops.len(), 3);
        for g in &gops {
            let t = transcode(&g.bytes, g.index, &Settings { bitrate: 200_000, ..Settings::default() }).unwrap();
            assert_eq!((t.pictures_in, t.pictures_out), (4, 4), "GOP {}", g.index);
            let (out, skipped) = annexb::gops(&t.bytes).unwrap();
            assert_eq!((out.len(), skipped, out[0].pictures), (1, 0, 4), "the output GOP is one closed GOP");
            let again = transcode(&t.bytes, 0, &Settings::default()).unwrap();
            assert_eq!(again.pictures_in, 4, "our output decodes again");
        }
    }

    #[test]
    fn the_same_gop_gives_the_same_bytes_every_time() {
        let (gops, _) = annexb::gops(&stream()).unwrap();
        let s = Settings::default();
        let a = transcode(&gops[1].bytes, 1, &s).unwrap();
        let _other = transcode(&gops[2].bytes, 2, &s).unwrap();
        let b = transcode(&gops[1].bytes, 1, &s).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn downscaling_halves_the_picture() {
        let (gops, _) = annexb::gops(&stream()).unwrap();
        let t = transcode(&gops[0].bytes, 0, &Settings { downscale: 2, ..Settings::default() }).unwrap();
        assert_eq!(t.pictures_out, 4);
        let mut d = Decoder::new().unwrap();
        let mut dims = None;
        for p in nal_units(&t.bytes) {
            if let Some(y) = d.decode(p).unwrap() {
                dims = Some(y.dimensions());
            }
        }
        assert_eq!(dims, Some((48, 32)));
        let e = transcode(&gops[0].bytes, 0, &Settings { downscale: 8, ..Settings::default() }).unwrap_err();
        assert!(e.to_string().contains("too small"), "{e}");
    }

    #[cfg(not(feature = "x264"))]
    #[test]
    fn x264_without_its_feature_is_refused_naming_the_feature() {
        let (gops, _) = annexb::gops(&stream()).unwrap();
        let e = transcode(&gops[0].bytes, 0, &Settings { codec: Codec::X264, ..Settings::default() }).unwrap_err();
        assert!(matches!(e, KernelError::NotBuilt(Codec::X264)), "{e}");
        let said = e.to_string();
        assert!(said.contains("--features x264") && said.contains("libx264-dev"), "{said}");
        assert!(!Codec::X264.is_built() && Codec::OpenH264.is_built());
    }

    /// x264's GOPs: every picture out (its lookahead drained), one closed GOP that OpenH264
    /// decodes, the same bytes every time, and x264's own signature in them.
    #[cfg(feature = "x264")]
    #[test]
    fn an_x264_gop_comes_out_whole_closed_and_the_same_every_time() {
        let (gops, _) = annexb::gops(&stream()).unwrap();
        let s = Settings { codec: Codec::X264, bitrate: 200_000, ..Settings::default() };
        for g in &gops {
            let t = transcode(&g.bytes, g.index, &s).unwrap();
            assert_eq!((t.pictures_in, t.pictures_out), (4, 4), "GOP {}", g.index);
            let (out, skipped) = annexb::gops(&t.bytes).unwrap();
            assert_eq!((out.len(), skipped, out[0].pictures), (1, 0, 4), "GOP {}: one closed GOP", g.index);
            let again = transcode(&t.bytes, 0, &Settings::default()).unwrap();
            assert_eq!(again.pictures_in, 4, "OpenH264 decodes x264's GOP {}", g.index);
            assert!(t.bytes.windows(11).any(|w| w == b"x264 - core"), "x264 wrote GOP {}", g.index);
            assert_eq!(transcode(&g.bytes, g.index, &s).unwrap(), t, "GOP {} again", g.index);
        }
        let halved = transcode(&gops[0].bytes, 0, &Settings { downscale: 2, ..s }).unwrap();
        let mut d = Decoder::new().unwrap();
        let mut dims = None;
        for p in nal_units(&halved.bytes) {
            if let Some(y) = d.decode(p).unwrap() {
                dims = Some(y.dimensions());
            }
        }
        assert_eq!(dims, Some((48, 32)));
    }

    /// Many fresh encoders of the same GOPs in one thread, as a worker runs them: the same bytes
    /// every time. With x264's AVX-512 paths (on an AMD EPYC) about one in 80 came out different.
    #[cfg(feature = "x264")]
    #[test]
    fn x264_gives_the_same_bytes_in_every_fresh_encoder() {
        let s = Sample { width: 96, height: 64, frames: 20, gop: 5, seed: 0, bitrate: 600_000 };
        let (gops, _) = annexb::gops(&sample_stream(&s).unwrap()).unwrap();
        let settings = Settings { codec: Codec::X264, bitrate: 200_000, ..Settings::default() };
        let first: Vec<Transcoded> = gops.iter().map(|g| transcode(&g.bytes, g.index, &settings).unwrap()).collect();
        let mut differ = Vec::new();
        for round in 0..20 {
            for (g, want) in gops.iter().zip(&first) {
                if &transcode(&g.bytes, g.index, &settings).unwrap() != want {
                    differ.push((round, g.index));
                }
            }
        }
        assert!(differ.is_empty(), "(round, GOP) that came out different: {differ:?}");
        assert_eq!(Codec::x264_asm_flags().map(|f| f & (1 << 16)), Some(0), "no AVX-512");
    }

    #[test]
    fn bytes_that_are_not_h264_are_an_error_not_a_panic() {
        let junk = [0u8, 0, 0, 1, 0x65, 0xff, 0xff, 0x12, 0, 0, 1, 0x41, 0x9a];
        // The decoder may conceal or refuse; either way no panic, and nothing claimed decoded
        // that it did not give.
        if let Ok(t) = transcode(&junk, 0, &Settings::default()) {
            assert_eq!(t.pictures_in, t.pictures_out);
        }
    }
}
