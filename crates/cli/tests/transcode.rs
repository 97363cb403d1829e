//! `switchyard transcode` as a user runs it: sample streams made, transcoded in parallel by
//! several policies, the outputs checked by an independent decoder (Debian's ffprobe and ffmpeg,
//! installed by `.ci/install-ffmpeg`; skipped with a message where they are not there), and the
//! errors bad input gets.

use std::path::Path;
use std::process::{Command, Output};

/// A fresh folder of this test's own, removed when it ends.
struct Scratch(std::path::PathBuf);
impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("switchyard-transcode-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn switchyard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard")).args(args).output().expect("the binary runs")
}

fn ok(o: &Output, what: &str) -> String {
    assert!(o.status.success(), "{what} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn make(dir: &Path, streams: u32, frames: u32, gop: u32) {
    let out = switchyard(&[
        "transcode",
        "make",
        "--out",
        dir.to_str().unwrap(),
        "--streams",
        &streams.to_string(),
        "--frames",
        &frames.to_string(),
        "--gop",
        &gop.to_string(),
        "--size",
        "96x64",
    ]);
    ok(&out, "transcode make");
}

fn inputs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Frames ffprobe decodes in `file`, or None when ffprobe is not installed.
fn ffprobe_frames(file: &Path) -> Option<(u64, String)> {
    let o = Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames,width,height", "-of", "csv=p=0"])
        .arg(file)
        .output()
        .ok()?;
    assert!(o.status.success(), "ffprobe refused {}: {}", file.display(), String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let frames = text.rsplit(',').next().unwrap().parse().unwrap_or_else(|_| panic!("ffprobe said {text:?}"));
    let errors =
        Command::new("ffmpeg").args(["-v", "error", "-i"]).arg(file).args(["-f", "null", "-"]).output().ok()?;
    Some((frames, format!("{text} {}", String::from_utf8_lossy(&errors.stderr).trim())))
}

#[test]
fn streams_transcoded_in_parallel_are_those_of_one_thread_and_decode_elsewhere() {
    let dir = Scratch::new("parallel");
    let samples = dir.path().join("in");
    make(&samples, 3, 20, 5);
    let files = inputs(&samples);
    assert_eq!(files.len(), 3);
    for policy in ["round-robin", "ca-ahrw", "h-cahrw"] {
        let out = dir.path().join(policy);
        let mut args = vec!["transcode", "run", "--out", out.to_str().unwrap(), "--policy", policy];
        args.extend(["--workers", "2", "--bitrate", "200k", "--downscale", "2", "--verify"]);
        args.extend(files.iter().map(String::as_str));
        let text = ok(&switchyard(&args), policy);
        assert!(text.contains("60 pictures in 12 GOPs"), "{policy}: {text}");
        assert!(text.contains("verified: every output is byte for byte"), "{policy}: {text}");
        assert!(text.contains("reorder wait: p50"), "{policy}: {text}");
        for f in &files {
            let name = Path::new(f).file_name().unwrap();
            match ffprobe_frames(&out.join(name)) {
                Some((frames, said)) => {
                    assert_eq!(frames, 20, "{policy}: ffprobe counted {said}");
                    assert!(said.starts_with("48,32,20"), "{policy}: halved to 48x32 and every frame clean: {said}");
                }
                None => eprintln!(
                    "skipped: ffprobe/ffmpeg not installed (.ci/install-ffmpeg); the outputs were checked only by OpenH264"
                ),
            }
        }
    }
}

#[test]
fn bad_inputs_are_refused_with_what_to_do() {
    let dir = Scratch::new("bad");
    let not_h264 = dir.path().join("clip.mp4");
    std::fs::write(&not_h264, b"\0\0\0\x18ftypisom\0\0\0\0").unwrap();
    let out = dir.path().join("out");
    let o = switchyard(&["transcode", "run", "--out", out.to_str().unwrap(), not_h264.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("clip.mp4") && err.contains("h264_mp4toannexb"), "{err}");

    let samples = dir.path().join("in");
    make(&samples, 1, 4, 2);
    let one = &inputs(&samples)[0];
    let o = switchyard(&["transcode", "run", "--out", samples.to_str().unwrap(), one]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("overwrite its input"), "{o:?}");
    let o = switchyard(&["transcode", "run", "--out", out.to_str().unwrap(), "--policy", "nope", one]);
    let err = String::from_utf8_lossy(&o.stderr);
    // One policy cannot be `all`, so the message does not offer it (it once did).
    assert!(err.contains("valid names") && !err.contains("`all`"), "{err}");
    let o = switchyard(&["transcode", "run", "--out", out.to_str().unwrap(), "--bitrate", "fast", one]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("500k"), "{o:?}");
}

/// `--encoder x264`: in a build with the `x264` feature
/// (`cargo test -p switchyard --features x264 --test transcode`), the parallel outputs are the
/// one-thread transcode and decode in ffmpeg with every frame; without it, a one-line refusal
/// that names the feature and the library, and no output.
#[test]
fn x264_is_refused_without_its_feature_and_checked_with_it() {
    let dir = Scratch::new("x264");
    let samples = dir.path().join("in");
    make(&samples, 2, 10, 5);
    let files = inputs(&samples);
    let out = dir.path().join("out");
    let mut args = vec!["transcode", "run", "--out", out.to_str().unwrap(), "--encoder", "x264", "--verify"];
    args.extend(["--workers", "2", "--bitrate", "200k"]);
    args.extend(files.iter().map(String::as_str));
    let o = switchyard(&args);
    if !cfg!(feature = "x264") {
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(
            err.contains("--encoder x264") && err.contains("--features x264") && err.contains("libx264-dev"),
            "{err}"
        );
        assert!(!out.exists(), "nothing written");
        return;
    }
    let text = ok(&o, "transcode run --encoder x264");
    assert!(text.contains("20 pictures in 4 GOPs") && text.contains(", x264)"), "{text}");
    assert!(text.contains("verified: every output is byte for byte"), "{text}");
    for f in &files {
        let name = Path::new(f).file_name().unwrap();
        match ffprobe_frames(&out.join(name)) {
            Some((frames, said)) => {
                assert_eq!(frames, 10, "ffprobe counted {said}");
                assert!(said.starts_with("96,64,10"), "every frame clean: {said}");
            }
            None => eprintln!("skipped: ffprobe/ffmpeg not installed (.ci/install-ffmpeg)"),
        }
    }
}

/// `bench transcode --policies all` takes every policy `switchyard place` has, as its `--help`
/// and a bad name's message say (the message offered `all` and the flag refused it).
#[test]
fn bench_transcode_takes_all_the_policies() {
    let o = switchyard(&["bench", "transcode", "--policies", "hrw,nope", "--no-ffmpeg"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--policies") && err.contains("or `all`"), "{err}");
    let o = switchyard(&[
        "bench",
        "transcode",
        "--policies",
        "all",
        "--no-ffmpeg",
        "--streams",
        "2",
        "--frames",
        "4",
        "--gop",
        "2",
        "--format",
        "json",
    ]);
    let text = ok(&o, "bench transcode --policies all");
    let report: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let cases = report.to_string();
    for p in switchyard_core::Policy::ALL {
        assert!(cases.contains(&format!("\"{}\"", p.name())), "{} missing from {text}", p.name());
    }
}
