//! An H.264 encoder over Debian's libx264, through the C shim `csrc/x264_shim.c` (the `x264`
//! feature): the encoder Debian's ffmpeg uses, so that `bench transcode --encoder x264` compares
//! the same work with ffmpeg's rows.
//!
//! Why a shim rather than bindings: `x264_param_t` has hundreds of fields whose layout changes
//! with the library's build number, and the kernel needs five settings; the shim sets them in C
//! against the installed header, and Rust sees four functions of plain types.

use std::ffi::{CStr, CString, c_char, c_int};
use std::ptr::{null, null_mut};

use openh264::formats::YUVSource;

use crate::encoder::EncodeError;
use crate::kernel::X264_PRESET;

/// The instruction sets (x264's `X264_CPU_*` flags) the kernel's encoders use: what x264
/// detects, less AVX-512, whose paths made a GOP's bytes depend on more than its pictures (see
/// `csrc/x264_shim.c`). Give ffmpeg the same (`-x264-params asm=N`) for the same work.
pub(crate) fn asm_flags() -> u32 {
    // SAFETY: no arguments; x264 only reads the CPU's identification.
    unsafe { sy_x264_cpu() }
}

#[repr(C)]
struct Shim {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn sy_x264_open(
        width: c_int,
        height: c_int,
        fps_num: c_int,
        fps_den: c_int,
        preset: *const c_char,
        tune: *const c_char,
        bitrate_kbps: c_int,
        why: *mut *const c_char,
    ) -> *mut Shim;
    fn sy_x264_encode(
        e: *mut Shim,
        y: *const u8,
        u: *const u8,
        v: *const u8,
        stride_y: c_int,
        stride_u: c_int,
        stride_v: c_int,
        pts: i64,
        out: *mut *const u8,
        len: *mut c_int,
    ) -> c_int;
    fn sy_x264_delayed(e: *mut Shim) -> c_int;
    fn sy_x264_cpu() -> u32;
    fn sy_x264_close(e: *mut Shim);
}

/// An x264 encoder for pictures of one size: one thread, average bit rate, no B-frames, an IDR
/// at the first picture only.
pub(crate) struct X264Encoder {
    ptr: *mut Shim,
}

// The encoder is used by one thread at a time; with one thread x264 keeps no thread-local state.
unsafe impl Send for X264Encoder {}

impl X264Encoder {
    /// An encoder for `width` × `height` pictures at `bitrate` bits a second and `fps` pictures a
    /// second.
    pub(crate) fn new(width: i32, height: i32, bitrate: u32, fps: f32) -> Result<Self, EncodeError> {
        let (num, den) = rational(fps);
        let preset = CString::new(X264_PRESET).expect("no NUL in the preset");
        let kbps = c_int::try_from((bitrate / 1000).max(1)).unwrap_or(c_int::MAX);
        let mut why: *const c_char = null();
        // SAFETY: the strings outlive the call; `why` is written only on failure, with a static
        // string.
        let ptr = unsafe { sy_x264_open(width, height, num, den, preset.as_ptr(), null(), kbps, &raw mut why) };
        if ptr.is_null() {
            let reason = if why.is_null() {
                "x264 refused".to_string()
            } else {
                // SAFETY: the shim sets `why` to a static NUL-terminated string.
                unsafe { CStr::from_ptr(why) }.to_string_lossy().into_owned()
            };
            return Err(EncodeError::x264(format!("opening a {width}x{height} encoder: {reason}")));
        }
        Ok(Self { ptr })
    }

    /// Gives x264 picture number `pts`, and appends the NAL units of whatever picture comes out
    /// (x264 looks ahead, so it may be an earlier one, or none yet) to `out`. Returns the
    /// pictures that came out (0 or 1).
    pub(crate) fn encode(&mut self, yuv: &impl YUVSource, pts: i64, out: &mut Vec<u8>) -> Result<u32, EncodeError> {
        let (sy, su, sv) = yuv.strides_i32();
        let (y, u, v) = (yuv.y().as_ptr(), yuv.u().as_ptr(), yuv.v().as_ptr());
        self.call(y, u, v, (sy, su, sv), pts, out)
    }

    /// Drains the pictures x264 still holds into `out`; returns how many came out.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) -> Result<u32, EncodeError> {
        let mut pictures = 0;
        // SAFETY: `ptr` is a live encoder.
        while unsafe { sy_x264_delayed(self.ptr) } > 0 {
            let got = self.call(null(), null(), null(), (0, 0, 0), 0, out)?;
            if got == 0 {
                // x264 holds pictures but gives none: it would loop forever, so say so.
                return Err(EncodeError::x264("draining the encoder: it holds pictures but gives none".into()));
            }
            pictures += got;
        }
        Ok(pictures)
    }

    fn call(
        &mut self,
        y: *const u8,
        u: *const u8,
        v: *const u8,
        (sy, su, sv): (i32, i32, i32),
        pts: i64,
        out: &mut Vec<u8>,
    ) -> Result<u32, EncodeError> {
        let mut bytes: *const u8 = null_mut();
        let mut len: c_int = 0;
        // SAFETY: the planes, when given, are the picture's and outlive the call (x264 copies
        // them into its own frames before returning); `bytes` and `len` are written by the shim.
        let rc = unsafe { sy_x264_encode(self.ptr, y, u, v, sy, su, sv, pts, &raw mut bytes, &raw mut len) };
        if rc < 0 {
            return Err(EncodeError::x264(format!("x264_encoder_encode returned {rc}")));
        }
        if len <= 0 || bytes.is_null() {
            return Ok(0);
        }
        // SAFETY: x264 gives `len` bytes of NAL units back to back, valid until the next call.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(bytes, len as usize) });
        Ok(1)
    }
}

impl Drop for X264Encoder {
    fn drop(&mut self) {
        // SAFETY: made by sy_x264_open and not used after this.
        unsafe { sy_x264_close(self.ptr) }
    }
}

/// `fps` as a fraction x264 takes: thousandths, reduced (30 → 30/1, 29.97 → 2997/100).
fn rational(fps: f32) -> (c_int, c_int) {
    let num = (f64::from(fps) * 1000.0).round().clamp(1.0, f64::from(c_int::MAX)) as c_int;
    let g = gcd(num, 1000);
    (num / g, 1000 / g)
}

fn gcd(a: c_int, b: c_int) -> c_int {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_rates_become_reduced_fractions() {
        assert_eq!(rational(30.0), (30, 1));
        assert_eq!(rational(29.97), (2997, 100));
        assert_eq!(rational(12.5), (25, 2));
    }
}
