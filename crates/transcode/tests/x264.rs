//! The x264 kernel (the `x264` feature: `cargo test -p switchyard-transcode --features x264`)
//! held to the checks of the OpenH264 one: streams transcoded in parallel by several policies
//! are byte for byte the one-thread GOP-by-GOP transcode, have every picture, and decode
//! cleanly in an independent decoder (Debian's ffprobe and ffmpeg; skipped with a message where
//! they are not installed).
#![cfg(feature = "x264")]

use std::path::Path;
use std::process::Command;

use switchyard_core::place::{PlaceConfig, Policy, build};
use switchyard_transcode::annexb;
use switchyard_transcode::kernel::{Codec, Settings};
use switchyard_transcode::make::{Sample, sample_stream};
use switchyard_transcode::pool::{self, PoolConfig, Stream};

mod common;

/// Pictures ffprobe counts, and what `ffmpeg -v error` says decoding the file (empty: clean);
/// None where they are not installed.
fn independent(file: &Path) -> Option<(u64, String)> {
    let o = Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames", "-of", "default=nokey=1:noprint_wrappers=1"])
        .arg(file)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let frames = text.parse().unwrap_or_else(|_| panic!("ffprobe said {text:?} of {}", file.display()));
    let d = Command::new("ffmpeg").args(["-v", "error", "-i"]).arg(file).args(["-f", "null", "-"]).output().ok()?;
    Some((frames, String::from_utf8_lossy(&d.stderr).trim().to_string()))
}

#[test]
fn x264_streams_in_parallel_are_those_of_one_thread_and_decode_elsewhere() {
    let streams: Vec<Stream> = (0..3)
        .map(|seed| {
            let s = Sample { width: 96, height: 64, frames: 20, gop: 5, seed, bitrate: 600_000 };
            let (gops, _) = annexb::gops(&sample_stream(&s).unwrap()).unwrap();
            Stream { name: format!("sample-{seed}.h264"), gops }
        })
        .collect();
    let settings = Settings { codec: Codec::X264, bitrate: 200_000, ..Settings::default() };
    let reference: Vec<Vec<u8>> = streams.iter().map(|s| pool::sequential(s, &settings).unwrap()).collect();
    for want in &reference {
        let (gops, skipped) = annexb::gops(want).unwrap();
        assert_eq!((gops.len(), skipped), (4, 0), "an IDR per GOP and no other");
    }
    for policy in [Policy::RoundRobin, Policy::CaAhrw, Policy::HCahrw] {
        let mut placer = build(policy, &PlaceConfig::default(), &pool::worker_ids(2)).unwrap();
        let (shared, mut outputs) = common::outputs(streams.len());
        let config = PoolConfig { workers: 2, queue: 2, pin: true, settings };
        let summary = pool::run(&streams, placer.as_mut(), &config, &mut outputs, &mut |_| {}).unwrap();
        assert_eq!((summary.pictures_in, summary.pictures_out), (60, 60), "{policy}");
        for ((out, want), st) in shared.iter().zip(&reference).zip(&streams) {
            let got = out.0.lock().unwrap().clone();
            assert!(&got == want, "{policy}: {} differs from the one-thread transcode", st.name);
            let file =
                std::env::temp_dir().join(format!("switchyard-x264-{}-{policy}-{}", std::process::id(), st.name));
            std::fs::write(&file, &got).unwrap();
            let said = independent(&file);
            let _ = std::fs::remove_file(&file);
            match said {
                Some((frames, errors)) => {
                    assert_eq!(frames, 20, "{policy}: ffprobe's count of {}", st.name);
                    assert!(errors.is_empty(), "{policy}: ffmpeg decoding {}: {errors}", st.name);
                }
                None => {
                    eprintln!("skipped: ffprobe/ffmpeg not installed (.ci/install-ffmpeg); checked by OpenH264 only")
                }
            }
        }
    }
}
