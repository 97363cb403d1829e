//! `switchyard transcode`: H.264 streams transcoded GOP by GOP on pinned workers, each GOP placed
//! by a core policy.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use switchyard_core::{PlaceConfig, Policy};
use switchyard_transcode::annexb;
use switchyard_transcode::kernel::{Codec, Settings};
use switchyard_transcode::make::{Sample, sample_stream};
use switchyard_transcode::pool::{self, PoolConfig, Stream, Summary};

use switchyard_experiments::report::Progress;

/// Transcode H.264 streams in parallel, GOP by GOP (Guo ch. 6, on real video).
///
/// Each input is cut into closed GOPs at its IDR pictures; each GOP is a unit the place stage
/// places (the stream is its flow), on one of `--workers` threads pinned to cores, which
/// decodes it and encodes it again with OpenH264, or libx264 in a build with the `x264` feature
/// (a fresh single-threaded encoder per GOP, so the output does not depend on where a GOP ran).
/// Each stream's GOPs are written back in order.
///
/// Start with `switchyard transcode make --out samples` for streams to try, then
/// `switchyard transcode run samples/*.h264 --out out --policy ca-ahrw`.
#[derive(Args)]
pub(crate) struct TranscodeArgs {
    #[command(subcommand)]
    command: TranscodeCommand,
}

#[derive(Subcommand)]
enum TranscodeCommand {
    Run(RunArgs),
    Make(MakeArgs),
}

/// Transcode Annex B H.264 files (`.h264`, `.264`).
///
/// From an MP4 or MKV file, take its video out first:
/// `ffmpeg -i IN.mp4 -c:v copy -bsf:v h264_mp4toannexb -f h264 IN.h264`.
/// Prints, at the end: pictures a second, each worker's GOPs and busy time, the balance (the
/// busiest worker over the mean), how long GOPs waited for their stream's earlier GOPs
/// (reorder wait, p50 and p99), and how often a stream's GOP went where its last one did.
#[derive(Args)]
struct RunArgs {
    /// The streams, one output each.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Folder for the outputs, named as the inputs (made if missing; never an input's own folder).
    #[arg(long)]
    out: PathBuf,
    /// Placement policy (any of `switchyard place`'s): e.g. round-robin, jsq, hrw, ahrw, ca-ahrw, h-cahrw.
    #[arg(long, default_value = "ca-ahrw")]
    policy: Policy,
    /// Worker threads, each pinned to a core (worker w on core w mod cores).
    #[arg(long, default_value_t = default_workers())]
    workers: usize,
    /// GOPs a worker's queue holds; a full queue makes the placer wait.
    #[arg(long, default_value_t = 2)]
    queue: usize,
    /// Output bit rate, bits a second (suffixes k and M).
    #[arg(long, default_value = "500k", value_parser = bits)]
    bitrate: u32,
    /// Frame rate the rate control assumes.
    #[arg(long, default_value_t = 30.0)]
    fps: f32,
    /// Divide width and height by this (2 halves the picture).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    downscale: u32,
    /// Also transcode every stream on one thread and check that the outputs are the same bytes.
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    encoder: EncoderArg,
}

/// The encoder choice, shared with `bench transcode`.
#[derive(Args, Debug)]
pub(crate) struct EncoderArg {
    /// The H.264 encoder. openh264: built from source by cargo, always there. x264: Debian's
    /// libx264, the encoder of Debian's ffmpeg (preset veryfast, average bit rate, one thread per
    /// GOP, no B-frames, no scene-cut I-frames, no AVX-512: its paths made a GOP's bytes vary
    /// from run to run); only in a build with the `x264` feature
    /// (`cargo build --release -p switchyard --features x264`, after `.ci/install-x264` or
    /// `apt-get install libx264-dev`).
    #[arg(long = "encoder", value_enum, default_value_t = Encoder::Openh264)]
    encoder: Encoder,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Encoder {
    Openh264,
    X264,
}

impl EncoderArg {
    fn encoder_name(&self) -> &'static str {
        match self.encoder {
            Encoder::Openh264 => "openh264",
            Encoder::X264 => "x264",
        }
    }

    /// The kernel's codec, or a one-line refusal naming the feature when this build lacks it.
    pub(crate) fn codec(&self) -> Result<Codec> {
        let codec = match self.encoder {
            Encoder::Openh264 => Codec::OpenH264,
            Encoder::X264 => Codec::X264,
        };
        if !codec.is_built() {
            bail!(
                "--encoder {codec}: this switchyard was built without the `{codec}` feature; rebuild with \
                 `cargo build --release -p switchyard --features x264` (it needs Debian's libx264-dev: \
                 .ci/install-x264), or use --encoder openh264"
            );
        }
        Ok(codec)
    }
}

/// Make sample streams from generated pictures (a drifting, noisy scene per seed).
#[derive(Args)]
struct MakeArgs {
    /// Folder for the streams (`sample-N.h264`).
    #[arg(long)]
    out: PathBuf,
    /// How many streams.
    #[arg(long, default_value_t = 8)]
    streams: u64,
    /// Pictures per stream.
    #[arg(long, default_value_t = 120)]
    frames: u32,
    /// Pictures from one IDR to the next (a GOP).
    #[arg(long, default_value_t = 30)]
    gop: u32,
    /// Picture size, WIDTHxHEIGHT (even numbers).
    #[arg(long, default_value = "320x240", value_parser = size)]
    size: (usize, usize),
    /// Bit rate of the samples.
    #[arg(long, default_value = "1M", value_parser = bits)]
    bitrate: u32,
}

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

fn bits(s: &str) -> Result<u32, String> {
    let (num, mult) = match s.strip_suffix(['k', 'K']) {
        Some(n) => (n, 1_000.0),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1_000_000.0),
            None => (s, 1.0),
        },
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a bit rate: write e.g. 500k, 2M or 300000"))?;
    let v = v * mult;
    if !(10_000.0..=100_000_000.0).contains(&v) {
        return Err(format!("{s} is outside 10k to 100M bits a second"));
    }
    Ok(v as u32)
}

fn size(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("`{s}` is not a size: write WIDTHxHEIGHT with even numbers of at least 16, e.g. 320x240");
    let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (w, h): (usize, usize) = (w.parse().map_err(|_| bad())?, h.parse().map_err(|_| bad())?);
    if w < 16 || h < 16 || w % 2 == 1 || h % 2 == 1 || w > 3840 || h > 2160 {
        return Err(bad());
    }
    Ok((w, h))
}

pub(crate) fn run(args: &TranscodeArgs) -> Result<()> {
    match &args.command {
        TranscodeCommand::Run(a) => run_streams(a),
        TranscodeCommand::Make(a) => make(a),
    }
}

fn make(a: &MakeArgs) -> Result<()> {
    std::fs::create_dir_all(&a.out).with_context(|| format!("making {}", a.out.display()))?;
    for seed in 0..a.streams {
        let s = Sample { width: a.size.0, height: a.size.1, frames: a.frames, gop: a.gop, seed, bitrate: a.bitrate };
        let bytes = sample_stream(&s).map_err(|e| anyhow::anyhow!("encoding sample {seed}: {e}"))?;
        let path = a.out.join(format!("sample-{seed}.h264"));
        std::fs::write(&path, &bytes).with_context(|| format!("writing {}", path.display()))?;
        println!("{}: {} pictures, an IDR every {}, {} bytes", path.display(), a.frames, a.gop, bytes.len());
    }
    Ok(())
}

fn run_streams(a: &RunArgs) -> Result<()> {
    let codec = a.encoder.codec()?;
    let mut streams = Vec::with_capacity(a.inputs.len());
    let mut paths = Vec::with_capacity(a.inputs.len());
    for input in &a.inputs {
        let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
        let (gops, skipped) = annexb::gops(&bytes).with_context(|| format!("{}", input.display()))?;
        if skipped > 0 {
            eprintln!(
                "{}: {skipped} pictures before the first IDR refer to one not in the file; left out",
                input.display()
            );
        }
        let name = input.file_name().map_or_else(|| input.display().to_string(), |n| n.to_string_lossy().into_owned());
        let out = a.out.join(&name);
        if paths.contains(&out) {
            bail!("two inputs are named {name}: their outputs would be the same file in {}", a.out.display());
        }
        if same_file(&out, input) {
            bail!(
                "--out {} is {}'s own folder: the output would overwrite its input",
                a.out.display(),
                input.display()
            );
        }
        paths.push(out);
        streams.push(Stream { name, gops });
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("making {}", a.out.display()))?;
    let mut outputs: Vec<Box<dyn Write + Send>> = Vec::with_capacity(paths.len());
    for p in &paths {
        let f = File::create(p).with_context(|| format!("creating {}", p.display()))?;
        outputs.push(Box::new(BufWriter::new(f)));
    }
    let settings = Settings { bitrate: a.bitrate, fps: a.fps, downscale: a.downscale, codec };
    let config = PoolConfig { workers: a.workers, queue: a.queue, pin: true, settings };
    let mut placer = switchyard_core::place::build(a.policy, &PlaceConfig::default(), &pool::worker_ids(a.workers))?;
    let total: u64 = streams.iter().map(|s| s.gops.len() as u64).sum();
    let bar = crate::print::Bar::new();
    bar.stage(&format!("{} streams, {} GOPs, {} on {} workers", streams.len(), total, a.policy, a.workers), total);
    let summary = pool::run(&streams, placer.as_mut(), &config, &mut outputs, &mut |_| bar.advance(1))?;
    drop(outputs);
    drop(bar);
    print_summary(a, &summary);
    if a.verify {
        for (s, p) in streams.iter().zip(&paths) {
            let want = pool::sequential(s, &settings)?;
            let got = std::fs::read(p).with_context(|| format!("reading {} back", p.display()))?;
            if got != want {
                bail!("{}: the parallel output differs from one thread's transcode", p.display());
            }
        }
        println!("verified: every output is byte for byte the transcode of its stream on one thread");
    }
    Ok(())
}

fn same_file(out: &Path, input: &Path) -> bool {
    match (out.parent().and_then(|p| p.canonicalize().ok()), input.parent().and_then(|p| p.canonicalize().ok())) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

fn print_summary(a: &RunArgs, s: &Summary) {
    println!(
        "{} pictures in {} GOPs in {:.2} s: {:.1} pictures a second ({} on {} workers, {}), {} bytes out",
        s.pictures_out,
        s.gops,
        s.elapsed.as_secs_f64(),
        s.pictures_per_second(),
        a.policy,
        a.workers,
        a.encoder.encoder_name(),
        s.bytes_out
    );
    for (w, ws) in s.workers.iter().enumerate() {
        println!("  worker {w}: {} GOPs, {} bytes in, busy {:.2} s", ws.gops, ws.bytes, ws.busy.as_secs_f64());
    }
    println!(
        "balance (busiest over mean busy): {:.3}; a stream's GOP went where its last one did {:.1}% of the time",
        s.imbalance(),
        100.0 * s.stayed
    );
    println!(
        "reorder wait: p50 {:.1} ms, p99 {:.1} ms",
        s.reorder_wait(0.5).as_secs_f64() * 1e3,
        s.reorder_wait(0.99).as_secs_f64() * 1e3
    );
    if s.pictures_in != s.pictures_out {
        println!("note: {} pictures decoded, {} encoded", s.pictures_in, s.pictures_out);
    }
}
