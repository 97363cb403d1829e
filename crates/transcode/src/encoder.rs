//! A single-layer H.264 encoder over OpenH264's C interface, quiet from the moment it exists.
//!
//! Why not the `openh264` crate's `Encoder`, which the decoder side uses: it sets OpenH264's log
//! level only after initialising the encoder, and initialising with frame skipping off in
//! bit-rate mode logs a warning to stderr ("bitrate can't be controlled ... without enabling skip
//! frame"), once per encoder. This driver makes an encoder per GOP, so that would be a line on
//! the user's terminal per GOP. Frame skipping must stay off, or pictures would go missing from
//! the output. OpenH264 takes the log level before initialisation
//! (`CWelsH264SVCEncoder::SetOption`), so this encoder sets it first. The warning's substance is
//! documented where the user looks instead (`transcode run --help`, `--bitrate`): the rate is a
//! target, and a GOP harder than it allows comes out larger rather than shorter.

use std::ffi::c_void;
use std::ptr::null_mut;

use openh264::OpenH264API;
use openh264::formats::YUVSource;
use openh264_sys2::{
    API, CAMERA_VIDEO_REAL_TIME, CONSTANT_ID, DEBLOCKING_IDC_0, ENCODER_OPTION_TRACE_LEVEL, ISVCEncoder,
    ISVCEncoderVtbl, RC_BITRATE_MODE, SEncParamExt, SFrameBSInfo, SM_SINGLE_SLICE, SSourcePicture, WELS_LOG_QUIET,
    videoFormatI420,
};

/// An OpenH264 encoder for pictures of one size, one thread, no frame skipping.
pub(crate) struct Encoder {
    api: OpenH264API,
    ptr: *mut ISVCEncoder,
    info: SFrameBSInfo,
}

// The encoder is used by one thread at a time; OpenH264 keeps no thread-local state for it.
unsafe impl Send for Encoder {}

/// An encoder said no: which call and what it returned.
#[derive(Debug)]
pub(crate) struct EncodeError(String);

impl EncodeError {
    fn openh264(call: &str, rc: i64) -> Self {
        Self(format!("OpenH264's {call} returned {rc}"))
    }

    pub(crate) fn x264(what: String) -> Self {
        Self(format!("libx264: {what}"))
    }
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Encoder {
    /// An encoder for `width` × `height` pictures at `bitrate` bits a second and `fps` pictures a
    /// second, with an IDR only at its first picture (`intra_period` 0) or every `intra_period`.
    pub(crate) fn new(width: i32, height: i32, bitrate: i32, fps: f32, intra_period: u32) -> Result<Self, EncodeError> {
        let api = OpenH264API::from_source();
        let mut ptr: *mut ISVCEncoder = null_mut();
        // SAFETY: WelsCreateSVCEncoder writes a valid encoder or returns non-zero.
        let rc = unsafe { api.WelsCreateSVCEncoder(&raw mut ptr) };
        if rc != 0 || ptr.is_null() {
            return Err(EncodeError::openh264("WelsCreateSVCEncoder", i64::from(rc)));
        }
        let mut enc = Self { api, ptr, info: SFrameBSInfo::default() };
        let mut quiet: i32 = WELS_LOG_QUIET;
        enc.call("SetOption(trace level)", |v, p| unsafe {
            v.SetOption.map_or(-1, |f| f(p, ENCODER_OPTION_TRACE_LEVEL, (&raw mut quiet).cast::<c_void>()))
        })?;
        let mut params = SEncParamExt::default();
        enc.call("GetDefaultParams", |v, p| unsafe { v.GetDefaultParams.map_or(-1, |f| f(p, &raw mut params)) })?;
        params.iUsageType = CAMERA_VIDEO_REAL_TIME;
        params.iPicWidth = width;
        params.iPicHeight = height;
        params.iTargetBitrate = bitrate;
        params.iMaxBitrate = bitrate;
        params.iRCMode = RC_BITRATE_MODE;
        params.fMaxFrameRate = fps;
        params.bEnableFrameSkip = false;
        params.iMultipleThreadIdc = 1;
        params.uiIntraPeriod = intra_period;
        params.eSpsPpsIdStrategy = CONSTANT_ID;
        params.iLoopFilterDisableIdc = DEBLOCKING_IDC_0;
        params.iSpatialLayerNum = 1;
        params.iTemporalLayerNum = 1;
        let layer = &mut params.sSpatialLayers[0];
        layer.iVideoWidth = width;
        layer.iVideoHeight = height;
        layer.fFrameRate = fps;
        layer.iSpatialBitrate = bitrate;
        layer.iMaxSpatialBitrate = bitrate;
        layer.sSliceArgument.uiSliceMode = SM_SINGLE_SLICE;
        layer.sSliceArgument.uiSliceNum = 1;
        enc.call("InitializeExt", |v, p| unsafe { v.InitializeExt.map_or(-1, |f| f(p, &raw const params)) })?;
        Ok(enc)
    }

    /// Encodes one picture (of the size given at creation) taken at `millis`, and appends its
    /// NAL units, with start codes, to `out`.
    pub(crate) fn encode(&mut self, yuv: &impl YUVSource, millis: i64, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let (w, h) = yuv.dimensions_i32();
        let (sy, su, sv) = yuv.strides_i32();
        let source = SSourcePicture {
            iColorFormat: videoFormatI420,
            iStride: [sy, su, sv, 0],
            // OpenH264 reads the planes and does not write them; its struct is not const-correct.
            pData: [yuv.y().as_ptr().cast_mut(), yuv.u().as_ptr().cast_mut(), yuv.v().as_ptr().cast_mut(), null_mut()],
            iPicWidth: w,
            iPicHeight: h,
            uiTimeStamp: millis,
            bPsnrY: false,
            bPsnrU: false,
            bPsnrV: false,
        };
        let info = &raw mut self.info;
        self.call("EncodeFrame", |v, p| unsafe { v.EncodeFrame.map_or(-1, |f| f(p, &raw const source, info)) })?;
        for l in 0..self.info.iLayerNum.max(0) as usize {
            let layer = &self.info.sLayerInfo[l];
            let mut offset = 0usize;
            for n in 0..layer.iNalCount.max(0) as usize {
                // SAFETY: OpenH264 gives iNalCount lengths and a buffer holding them back to
                // back, valid until the next EncodeFrame.
                let len = unsafe { *layer.pNalLengthInByte.add(n) } as usize;
                let nal = unsafe { std::slice::from_raw_parts(layer.pBsBuf.add(offset), len) };
                out.extend_from_slice(nal);
                offset += len;
            }
        }
        Ok(())
    }

    fn call(
        &mut self,
        what: &'static str,
        f: impl FnOnce(&ISVCEncoderVtbl, *mut ISVCEncoder) -> i32,
    ) -> Result<(), EncodeError> {
        // SAFETY: `ptr` points at OpenH264's object, whose first field is its vtable pointer.
        let vtbl = unsafe { &**self.ptr };
        match f(vtbl, self.ptr) {
            0 => Ok(()),
            rc => Err(EncodeError::openh264(what, i64::from(rc))),
        }
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        // SAFETY: the encoder was created by WelsCreateSVCEncoder and is not used after this.
        unsafe {
            let vtbl = &**self.ptr;
            if let Some(f) = vtbl.Uninitialize {
                f(self.ptr);
            }
            self.api.WelsDestroySVCEncoder(self.ptr);
        }
    }
}
