/* The few calls of libx264 the transcoding kernel needs, so that Rust never mirrors
 * x264_param_t (hundreds of fields whose layout changes with X264_BUILD). Compiled by build.rs
 * with the `x264` feature only; its Rust side is src/x264.rs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <x264.h>

/* The instruction sets the encoder may use: all x264 finds but AVX-512. With AVX-512, libx264
 * 0.164 on an AMD EPYC (Zen 4) gave a GOP different bytes about once in 80 fresh encoders of
 * the same pictures in one thread (and never under valgrind, which lacks AVX-512): the output
 * depended on something other than the input, which breaks the kernel's promise of the same
 * bytes wherever a GOP runs. `bench transcode` passes the same mask to ffmpeg's libx264
 * (`-x264-params asm=N`), so both sides run the same code. */
uint32_t sy_x264_cpu(void) {
    x264_param_t p;
    x264_param_default(&p); /* which sets p.cpu to what x264 detects */
    return p.cpu & ~(uint32_t)X264_CPU_AVX512;
}

struct sy_x264 {
    x264_t *h;
    x264_picture_t pic;
    x264_picture_t out;
};

/* An encoder for width x height I420 pictures: one thread, `bitrate_kbps` average bit rate
 * (ABR), the preset and tune given (tune may be NULL), no B-frames, no scene-cut I-frames, an
 * IDR only at the first picture (each GOP gets its own encoder), Annex B output with the
 * parameter sets before the IDR. Returns NULL and a reason in `why` when x264 refuses. */
struct sy_x264 *sy_x264_open(int width, int height, int fps_num, int fps_den, const char *preset,
                             const char *tune, int bitrate_kbps, const char **why) {
    x264_param_t p;
    if (x264_param_default_preset(&p, preset, tune) < 0) {
        *why = "x264 does not know this preset or tune";
        return NULL;
    }
    p.i_log_level = X264_LOG_NONE;
    p.cpu = sy_x264_cpu();
    p.i_csp = X264_CSP_I420;
    p.i_width = width;
    p.i_height = height;
    p.i_fps_num = (uint32_t)fps_num;
    p.i_fps_den = (uint32_t)fps_den;
    p.i_timebase_num = (uint32_t)fps_den;
    p.i_timebase_den = (uint32_t)fps_num;
    /* Rate control from the frame rate, not from timestamps: the output depends on the
     * pictures alone. */
    p.b_vfr_input = 0;
    /* Threads inside the encoder would make the output depend on their timing; the pool's
     * workers are the parallelism. */
    p.i_threads = 1;
    p.i_lookahead_threads = 1;
    p.b_sliced_threads = 0;
    p.b_deterministic = 1;
    p.i_bframe = 0;
    p.i_keyint_max = X264_KEYINT_MAX_INFINITE;
    p.i_scenecut_threshold = 0;
    p.b_open_gop = 0;
    p.rc.i_rc_method = X264_RC_ABR;
    p.rc.i_bitrate = bitrate_kbps;
    p.b_annexb = 1;
    p.b_repeat_headers = 1;
    struct sy_x264 *e = calloc(1, sizeof *e);
    if (e == NULL) {
        *why = "out of memory";
        return NULL;
    }
    e->h = x264_encoder_open(&p);
    if (e->h == NULL) {
        free(e);
        *why = "x264_encoder_open refused the parameters";
        return NULL;
    }
    x264_picture_init(&e->pic);
    e->pic.img.i_csp = X264_CSP_I420;
    e->pic.img.i_plane = 3;
    return e;
}

/* Encodes one picture (planes and strides given), or with y == NULL drains a delayed one.
 * On success *out and *len give the NAL units of the picture that came out (none: *len 0),
 * valid until the next call. Returns x264's negative code on failure. */
int sy_x264_encode(struct sy_x264 *e, const uint8_t *y, const uint8_t *u, const uint8_t *v, int stride_y,
                   int stride_u, int stride_v, int64_t pts, const uint8_t **out, int *len) {
    x264_nal_t *nals = NULL;
    int n = 0;
    int size;
    if (y != NULL) {
        /* x264 reads the planes and does not write them; its struct is not const-correct. */
        e->pic.img.plane[0] = (uint8_t *)y;
        e->pic.img.plane[1] = (uint8_t *)u;
        e->pic.img.plane[2] = (uint8_t *)v;
        e->pic.img.i_stride[0] = stride_y;
        e->pic.img.i_stride[1] = stride_u;
        e->pic.img.i_stride[2] = stride_v;
        e->pic.i_pts = pts;
        e->pic.i_type = X264_TYPE_AUTO;
        size = x264_encoder_encode(e->h, &nals, &n, &e->pic, &e->out);
    } else {
        size = x264_encoder_encode(e->h, &nals, &n, NULL, &e->out);
    }
    if (size < 0) {
        return size;
    }
    /* The NAL units of one call lie back to back in one buffer (x264.h, x264_encoder_encode). */
    *out = size > 0 ? nals[0].p_payload : NULL;
    *len = size;
    return 0;
}

/* Pictures taken but not yet given back (the lookahead's). */
int sy_x264_delayed(struct sy_x264 *e) {
    return x264_encoder_delayed_frames(e->h);
}

void sy_x264_close(struct sy_x264 *e) {
    if (e != NULL) {
        x264_encoder_close(e->h);
        free(e);
    }
}
