//! Sample H.264 streams made from generated pictures, for the tests, the bench and
//! `transcode make`: no clip is fetched from anywhere.
//!
//! Each stream is a moving scene (a gradient that drifts, a few blocks crossing it, and noise)
//! drawn from its seed, encoded with an IDR every `gop` pictures. The scene changes from picture
//! to picture so that inter prediction has work to do, and the seed varies the motion and the
//! detail, so the streams' GOPs differ in size and cost as real ones do.

use openh264::formats::YUVBuffer;

use crate::encoder::Encoder;

/// Why a sample could not be made.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SampleError(String);

/// What to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Picture width (even, at least 16).
    pub width: usize,
    /// Picture height (even, at least 16).
    pub height: usize,
    /// Pictures in the stream.
    pub frames: u32,
    /// Pictures from one IDR to the next.
    pub gop: u32,
    /// Picks the scene.
    pub seed: u64,
    /// Bit rate of the sample, bits a second at 30 pictures a second.
    pub bitrate: u32,
}

/// Encodes the sample's pictures into an Annex B stream.
pub fn sample_stream(s: &Sample) -> Result<Vec<u8>, SampleError> {
    if s.width < 16 || s.height < 16 || s.width % 2 == 1 || s.height % 2 == 1 || s.gop == 0 {
        return Err(SampleError(
            "a sample needs an even size of at least 16x16 and a GOP of at least one picture".into(),
        ));
    }
    let bitrate = i32::try_from(s.bitrate).unwrap_or(i32::MAX);
    let mut enc = Encoder::new(s.width as i32, s.height as i32, bitrate, 30.0, s.gop)
        .map_err(|e| SampleError(format!("encoding a sample: {e}")))?;
    let mut out = Vec::new();
    let mut rng = s.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let detail = 1 + (s.seed % 4) as usize;
    let speed = 1 + (s.seed / 4 % 3) as usize;
    let mut plane = vec![0u8; s.width * s.height * 3 / 2];
    for f in 0..s.frames as usize {
        draw(&mut plane, s.width, s.height, f, detail, speed, &mut rng);
        let yuv = YUVBuffer::from_vec(plane.clone(), s.width, s.height);
        enc.encode(&yuv, f as i64 * 1000 / 30, &mut out)
            .map_err(|e| SampleError(format!("sample picture {f}: {e}")))?;
    }
    Ok(out)
}

fn draw(plane: &mut [u8], w: usize, h: usize, f: usize, detail: usize, speed: usize, rng: &mut u64) {
    let (luma, chroma) = plane.split_at_mut(w * h);
    for y in 0..h {
        for x in 0..w {
            let base = (x * detail + y + f * speed) as u8;
            let block = ((x + f * speed * 2) / 16 + y / 16).is_multiple_of(5);
            luma[y * w + x] = if block { base.wrapping_add(96) } else { base } ^ (next(rng) as u8 & 7);
        }
    }
    for (i, c) in chroma.iter_mut().enumerate() {
        *c = 128u8.wrapping_add(((i + f * speed) % 64) as u8 / 2);
    }
}

/// xorshift64: cheap, and the same on every machine.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annexb;

    #[test]
    fn a_sample_has_an_idr_every_gop_pictures() {
        let s = Sample { width: 64, height: 48, frames: 10, gop: 4, seed: 1, bitrate: 300_000 };
        let (gops, skipped) = annexb::gops(&sample_stream(&s).unwrap()).unwrap();
        assert_eq!(skipped, 0);
        let pictures: Vec<u32> = gops.iter().map(|g| g.pictures).collect();
        assert_eq!(pictures, [4, 4, 2]);
    }

    #[test]
    fn seeds_make_different_streams_and_a_seed_the_same_one() {
        let s = Sample { width: 32, height: 32, frames: 3, gop: 3, seed: 1, bitrate: 300_000 };
        let a = sample_stream(&s).unwrap();
        assert_eq!(a, sample_stream(&s).unwrap());
        assert_ne!(a, sample_stream(&Sample { seed: 6, ..s }).unwrap());
        assert!(sample_stream(&Sample { width: 15, ..s }).is_err());
    }
}
