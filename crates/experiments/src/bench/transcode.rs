//! `bench transcode`: real H.264 GOPs placed by each policy on pinned workers (Guo ch. 6 on the
//! transcoding driver, `switchyard-transcode`), against one worker, and ffmpeg from Debian as the
//! program a user would run instead.
//!
//! The streams are made in the run from generated pictures (`transcode::make`), so every machine
//! transcodes the same input. Each case transcodes every stream whole; its pictures a second are
//! output pictures over the wall time from the first placement to the last write.
//!
//! ffmpeg runs the same streams two ways: one process per stream, all at once, each with one
//! thread (`-threads 1`), and one process for all the streams with its own threading. Debian's
//! ffmpeg encodes H.264 with libx264 and has no OpenH264 encoder, so with the default kernel
//! (OpenH264) its rows are not the same work. With `codec` x264 (the `x264` cargo feature) both
//! sides encode with the same libx264, the same preset, bit rate, GOP, frame rate, no B-frames,
//! no scene-cut I-frames and the same instruction sets, and the goal "the best policy ≥
//! ffmpeg's throughput on the same work" is judged under the table. The table names each row's
//! encoder either way.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use switchyard_core::place::{PlaceConfig, Policy, build};
use switchyard_transcode::annexb;
use switchyard_transcode::kernel::{Codec, Settings, X264_PRESET};
use switchyard_transcode::make::{Sample, sample_stream};
use switchyard_transcode::pool::{self, PoolConfig, Stream, Summary};

use super::transcode_predict::{self as predict, MachineRow, Measured, PredictError, Predicted};
use crate::report::{ColumnSpec, Progress, Report, ReportSpec, Table, TableSpec};

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Streams transcoded at once.
    pub streams: u64,
    /// Pictures per stream.
    pub frames: u32,
    /// Pictures per GOP.
    pub gop: u32,
    /// Picture size.
    pub size: (usize, usize),
    /// Output bit rate, bits a second.
    pub bitrate: u32,
    /// Divide the picture's sides by this.
    pub downscale: u32,
    /// Worker threads for the policies.
    pub workers: usize,
    /// GOPs a worker's queue holds.
    pub queue: usize,
    /// The policies run.
    pub policies: Vec<Policy>,
    /// Run ffmpeg beside (when it is installed).
    pub ffmpeg: bool,
    /// The kernel's encoder (x264 needs the `x264` feature; ffmpeg's rows then do the same work).
    pub codec: Codec,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            streams: 8,
            frames: 120,
            gop: 15,
            size: (320, 240),
            bitrate: 500_000,
            downscale: 1,
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            queue: 2,
            policies: vec![
                Policy::RoundRobin,
                Policy::Jsq,
                Policy::Hrw,
                Policy::Ahrw,
                Policy::CaAhrw,
                Policy::HCahrw,
                Policy::Bounded,
            ],
            ffmpeg: true,
            codec: Codec::OpenH264,
        }
    }
}

/// Why the bench stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranscodeBenchError {
    /// Making the sample streams failed.
    #[error("making sample stream {0}: {1}")]
    Sample(u64, String),
    /// A run failed.
    #[error("{case}: {source}")]
    Run {
        /// Which case.
        case: String,
        /// What stopped it.
        source: pool::PoolError,
    },
    /// The setup cannot run.
    #[error("{0}")]
    Setup(String),
    /// The simulator's prediction could not be made.
    #[error("predicting from the measured costs: {0}")]
    Predict(#[from] PredictError),
}

/// One case measured.
#[derive(Clone, Debug)]
pub struct Row {
    /// What ran.
    pub case: String,
    /// Ours only: the policy (round robin for one worker).
    pub policy: Option<Policy>,
    /// The encoder it used.
    pub encoder: &'static str,
    /// Workers (or processes).
    pub workers: usize,
    /// Pictures written.
    pub pictures: u64,
    /// Wall time, seconds.
    pub seconds: f64,
    /// Ours only: the pool's summary.
    pub summary: Option<Summary>,
}

impl Row {
    /// Pictures a second.
    pub fn rate(&self) -> f64 {
        self.pictures as f64 / self.seconds.max(1e-9)
    }
}

/// What a row of ours says it encoded with.
fn our_encoder(codec: Codec) -> &'static str {
    match codec {
        Codec::OpenH264 => "OpenH264 (ours, from source)",
        Codec::X264 => "libx264 veryfast (ours, Debian's library)",
    }
}

/// What ffmpeg's rows say they encoded with.
const FFMPEG_X264: &str = "libx264 veryfast (Debian's ffmpeg)";

/// The streams of `s`, cut into GOPs.
pub fn streams(s: &Setup) -> Result<Vec<(Stream, Vec<u8>)>, TranscodeBenchError> {
    (0..s.streams)
        .map(|seed| {
            let sample =
                Sample { width: s.size.0, height: s.size.1, frames: s.frames, gop: s.gop, seed, bitrate: 1_000_000 };
            let bytes = sample_stream(&sample).map_err(|e| TranscodeBenchError::Sample(seed, e.to_string()))?;
            let (gops, _) = annexb::gops(&bytes).map_err(|e| TranscodeBenchError::Sample(seed, e.to_string()))?;
            Ok((Stream { name: format!("sample-{seed}.h264"), gops }, bytes))
        })
        .collect()
}

/// What a bench run gives: the cases measured and the simulator's prediction from their costs.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Every case: one worker, each policy, ffmpeg's.
    pub rows: Vec<Row>,
    /// The prediction, when one worker and a policy ran.
    pub prediction: Option<Prediction>,
}

/// The simulator fed the costs measured in the run.
#[derive(Clone, Debug)]
pub struct Prediction {
    /// The costs and cache effect fed in.
    pub measured: Measured,
    /// The simulated one worker's makespan, seconds (the sum of the costs).
    pub one_seconds: f64,
    /// Each policy, in the run's order.
    pub policies: Vec<Predicted>,
    /// Guo's 8-core machines with these costs.
    pub machines: Vec<MachineRow>,
}

/// Runs every case of `s`, then the simulator on the costs they measured.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Outcome, TranscodeBenchError> {
    if s.workers == 0 || s.streams == 0 || s.policies.is_empty() {
        return Err(TranscodeBenchError::Setup("a run needs a worker, a stream and a policy".into()));
    }
    let made = streams(s)?;
    let streams: Vec<Stream> = made.iter().map(|(st, _)| st.clone()).collect();
    let gops: u64 = streams.iter().map(|st| st.gops.len() as u64).sum();
    if !s.codec.is_built() {
        return Err(TranscodeBenchError::Setup(format!(
            "the {} encoder is not built in: build with `--features x264` (it needs Debian's libx264-dev: \
             .ci/install-x264)",
            s.codec
        )));
    }
    let settings = Settings { bitrate: s.bitrate, fps: FPS, downscale: s.downscale, codec: s.codec };
    // The first GOPs a process transcodes pay for its start (the codec's tables, the pages of
    // its code, the allocator's first arenas); the one-worker case runs first and is every
    // ratio's denominator, so that start is paid here, untimed, on every core.
    progress.stage("warming up", 1);
    let mut warm = build(Policy::RoundRobin, &PlaceConfig::default(), &pool::worker_ids(s.workers))
        .map_err(|e| TranscodeBenchError::Setup(e.to_string()))?;
    let firsts: Vec<Stream> = streams
        .iter()
        .map(|st| Stream { name: st.name.clone(), gops: st.gops.iter().take(1).cloned().collect() })
        .collect();
    let mut sinks: Vec<Box<dyn std::io::Write + Send>> =
        firsts.iter().map(|_| Box::new(std::io::sink()) as Box<dyn std::io::Write + Send>).collect();
    let config = PoolConfig { workers: s.workers, queue: s.queue, pin: true, settings };
    pool::run(&firsts, warm.as_mut(), &config, &mut sinks, &mut |_| {})
        .map_err(|source| TranscodeBenchError::Run { case: "warming up".into(), source })?;
    progress.advance(1);
    let mut rows = Vec::new();
    let ours = |case: String, policy: Policy, workers: usize| -> Result<Row, TranscodeBenchError> {
        progress.stage(&case, gops);
        let mut placer = build(policy, &PlaceConfig::default(), &pool::worker_ids(workers))
            .map_err(|e| TranscodeBenchError::Setup(e.to_string()))?;
        let mut outputs: Vec<Box<dyn std::io::Write + Send>> =
            streams.iter().map(|_| Box::new(std::io::sink()) as Box<dyn std::io::Write + Send>).collect();
        let config = PoolConfig { workers, queue: s.queue, pin: true, settings };
        let summary = pool::run(&streams, placer.as_mut(), &config, &mut outputs, &mut |_| progress.advance(1))
            .map_err(|source| TranscodeBenchError::Run { case: case.clone(), source })?;
        Ok(Row {
            case,
            policy: Some(policy),
            encoder: our_encoder(s.codec),
            workers,
            pictures: summary.pictures_out,
            seconds: summary.elapsed.as_secs_f64(),
            summary: Some(summary),
        })
    };
    rows.push(ours("one worker".into(), Policy::RoundRobin, 1)?);
    for &p in &s.policies {
        rows.push(ours(p.to_string(), p, s.workers)?);
    }
    if s.ffmpeg && ffmpeg_present() {
        // A folder of this run's own: two runs in one process (the tests) must not share one.
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("switchyard-bench-transcode-{}-{run}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| TranscodeBenchError::Setup(format!("{}: {e}", dir.display())))?;
        let files: Vec<PathBuf> = made
            .iter()
            .map(|(st, bytes)| {
                let p = dir.join(&st.name);
                std::fs::write(&p, bytes).map(|()| p)
            })
            .collect::<Result<_, _>>()
            .map_err(|e| TranscodeBenchError::Setup(format!("writing the samples for ffmpeg: {e}")))?;
        let pictures = u64::from(s.frames) * s.streams;
        progress.stage("ffmpeg, a process per stream", 1);
        rows.push(ffmpeg_per_stream(s, &files, &dir, pictures)?);
        progress.advance(1);
        progress.stage("ffmpeg, one process", 1);
        rows.push(ffmpeg_one_process(s, &files, &dir, pictures)?);
        progress.advance(1);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let flows: Vec<_> = streams.iter().enumerate().map(|(i, st)| st.flow(i)).collect();
    progress.stage("the simulator, on the measured costs", 1);
    let prediction = prediction(s, &flows, &rows)?;
    progress.advance(1);
    Ok(Outcome { rows, prediction })
}

/// The simulator's prediction from the costs of `rows` (the one-worker run's, and the cache
/// effect from the others), for streams of `flows`.
pub fn prediction(
    s: &Setup,
    flows: &[switchyard_core::FlowId],
    rows: &[Row],
) -> Result<Option<Prediction>, TranscodeBenchError> {
    let ours: Vec<&Row> = rows.iter().filter(|r| r.summary.is_some()).collect();
    let Some(one) = ours.iter().find(|r| r.workers == 1) else { return Ok(None) };
    let many: Vec<&Row> = ours.iter().copied().filter(|r| r.workers > 1).collect();
    let summaries: Vec<&Summary> = many.iter().filter_map(|r| r.summary.as_ref()).collect();
    let one_summary = one.summary.as_ref().expect("ours have a summary");
    let Some(measured) = predict::measured(flows, one_summary, &summaries) else { return Ok(None) };
    if many.is_empty() {
        return Ok(None);
    }
    let one_sim = predict::simulate(&measured.gops, Policy::RoundRobin, 1, s.queue)?;
    let one_seconds = one_sim.makespan.0 as f64 / 1e9;
    let one_busy: f64 = one_summary.workers.iter().map(|w| w.busy.as_secs_f64()).sum();
    let mut sims = Vec::with_capacity(many.len());
    for r in &many {
        let policy = r.policy.expect("ours have a policy");
        sims.push(predict::simulate(&measured.gops, policy, r.workers as u32, s.queue)?);
    }
    let rr = many.iter().position(|r| r.policy == Some(Policy::RoundRobin));
    let policies = many
        .iter()
        .zip(&sims)
        .map(|(r, sim)| {
            let summary = r.summary.as_ref().expect("ours have a summary");
            let sim_seconds = sim.makespan.0 as f64 / 1e9;
            let busy: f64 = summary.workers.iter().map(|w| w.busy.as_secs_f64()).sum();
            Predicted {
                policy: r.policy.expect("ours have a policy"),
                measured_x_one: r.rate() / one.rate(),
                simulated_x_one: one_seconds / sim_seconds.max(1e-12),
                measured_x_rr: rr.map(|k| r.rate() / many[k].rate()),
                simulated_x_rr: rr.map(|k| sims[k].makespan.0 as f64 / (sim.makespan.0 as f64).max(1.0)),
                same_placement: predict::same_placement(flows, summary, sim),
                busy_over_one: busy / one_busy.max(1e-12),
                simulated_imbalance: sim.balance.max_over_mean,
                measured_imbalance: summary.imbalance(),
            }
        })
        .collect();
    let machines = predict::machines(&measured)?;
    Ok(Some(Prediction { measured, one_seconds, policies, machines }))
}

fn ffmpeg_present() -> bool {
    Command::new("ffmpeg").arg("-version").output().is_ok_and(|o| o.status.success())
}

/// The frame rate of the streams and of the kernel's rate control; ffmpeg is told it too (a raw
/// H.264 stream without timing, which ours are, is 25 pictures a second to ffmpeg otherwise).
const FPS: f32 = 30.0;

/// ffmpeg's options before each input: the frame rate the kernel assumes.
fn input_args() -> [String; 2] {
    ["-framerate".into(), FPS.to_string()]
}

/// The output options that match the kernel's: x264's preset, the bit rate (average, x264's
/// ABR, as the kernel's), an IDR every GOP and no other I-frame (the kernel starts an encoder
/// per GOP and turns scene cuts off), no B-frames (the kernel has none: OpenH264's baseline, and
/// x264 set so), the same size. With the x264 kernel, also its instruction sets (`asm`: x264's
/// flags less AVX-512, see `switchyard_transcode`'s `csrc/x264_shim.c`), so both run the same code.
fn x264_args(s: &Setup) -> Vec<String> {
    let mut v: Vec<String> = ["-c:v", "libx264", "-preset", X264_PRESET, "-bf", "0", "-sc_threshold", "0"]
        .iter()
        .map(|x| x.to_string())
        .collect();
    v.extend(["-b:v".into(), s.bitrate.to_string(), "-g".into(), s.gop.to_string()]);
    if let (Codec::X264, Some(flags)) = (s.codec, Codec::x264_asm_flags()) {
        v.extend(["-x264-params".into(), format!("asm={flags}")]);
    }
    if s.downscale > 1 {
        v.extend(["-vf".into(), format!("scale=iw/{0}:ih/{0}", s.downscale)]);
    }
    v
}

fn ffmpeg_per_stream(s: &Setup, files: &[PathBuf], dir: &Path, pictures: u64) -> Result<Row, TranscodeBenchError> {
    let t0 = Instant::now();
    let children: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            Command::new("ffmpeg")
                .args(["-v", "error", "-y", "-threads", "1"])
                .args(input_args())
                .arg("-i")
                .arg(f)
                .args(["-threads", "1"])
                .args(x264_args(s))
                .arg(dir.join(format!("out-{i}.h264")))
                .spawn()
        })
        .collect::<Result<_, _>>()
        .map_err(|e| TranscodeBenchError::Setup(format!("starting ffmpeg: {e}")))?;
    for mut c in children {
        let st = c.wait().map_err(|e| TranscodeBenchError::Setup(format!("ffmpeg: {e}")))?;
        if !st.success() {
            return Err(TranscodeBenchError::Setup(format!("ffmpeg (a process per stream) ended with {st}")));
        }
    }
    Ok(Row {
        case: "ffmpeg, a process per stream".into(),
        policy: None,
        encoder: FFMPEG_X264,
        workers: files.len(),
        pictures,
        seconds: t0.elapsed().as_secs_f64(),
        summary: None,
    })
}

fn ffmpeg_one_process(s: &Setup, files: &[PathBuf], dir: &Path, pictures: u64) -> Result<Row, TranscodeBenchError> {
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error", "-y"]);
    for f in files {
        cmd.args(input_args()).arg("-i").arg(f);
    }
    for i in 0..files.len() {
        cmd.args(["-map", &format!("{i}:v")]).args(x264_args(s)).arg(dir.join(format!("all-{i}.h264")));
    }
    let t0 = Instant::now();
    let st = cmd.status().map_err(|e| TranscodeBenchError::Setup(format!("starting ffmpeg: {e}")))?;
    if !st.success() {
        return Err(TranscodeBenchError::Setup(format!("ffmpeg (one process) ended with {st}")));
    }
    Ok(Row {
        case: "ffmpeg, one process".into(),
        policy: None,
        encoder: FFMPEG_X264,
        workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
        pictures,
        seconds: t0.elapsed().as_secs_f64(),
        summary: None,
    })
}

const COLUMNS: &[ColumnSpec] = &[
    ColumnSpec::text("case"),
    ColumnSpec::text("encoder"),
    ColumnSpec::int("workers"),
    ColumnSpec::num("pictures_per_s", 1).header("pictures/s"),
    ColumnSpec::num("x_one_worker", 2).header("×one worker"),
    ColumnSpec::num("imbalance", 3).header("busiest/mean"),
    ColumnSpec::num("stayed", 1).header("GOP stayed").percent(),
    ColumnSpec::num("reorder_p50_ms", 1).header("reorder p50").unit("ms"),
    ColumnSpec::num("reorder_p99_ms", 1).header("reorder p99").unit("ms"),
    ColumnSpec::num("seconds", 2).unit("s"),
];

/// The table.
pub const CASES: TableSpec = TableSpec::new("cases", "Transcoding the same streams, each way", COLUMNS);

/// The prediction table (left out when no policy ran beside one worker).
pub const PREDICTION: TableSpec = predict::PREDICTION.optional();

/// Guo's machines revisited (with the prediction).
pub const MACHINES: TableSpec = predict::MACHINES.optional();

/// The report's shape.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-transcode",
    title: "GOPs of real H.264 on pinned workers",
    tables: &[&CASES, &PREDICTION, &MACHINES],
};

/// Issue 41's goal on two cores: the best policy at least this many times one worker.
pub const GOAL_SPEEDUP: f64 = 1.7;

/// [`CASES`] where a run may leave it out: `reproduce gop-cache-aware` gives it with `--real`.
pub const CASES_IF_REAL: TableSpec = CASES.optional();

/// Adds a run's tables, claims and settings (named `real.…`) to `report`: `reproduce
/// gop-cache-aware --real`, the simulator's scenario beside the real GOPs.
pub fn absorb(report: &mut Report, s: &Setup, outcome: &Outcome) {
    let real = self::report(s, outcome);
    for p in &real.parameters {
        report.param(&format!("real.{}", p.name), p.value.clone(), &format!("the real run: {}", p.about));
    }
    report.machine = real.machine.clone();
    report.absorb(real);
}

/// The report of a run.
pub fn report(s: &Setup, outcome: &Outcome) -> Report {
    let rows = &outcome.rows[..];
    let mut r = Report::new(&SPEC);
    r.param("streams", s.streams, "streams transcoded at once")
        .param("frames", s.frames, "pictures per stream")
        .param("gop", s.gop, "pictures per GOP")
        .param("size", format!("{}x{}", s.size.0, s.size.1), "picture size")
        .param("bitrate", s.bitrate, "output bit rate, bits a second")
        .param("downscale", s.downscale, "sides divided by")
        .param("workers", s.workers, "worker threads for the policies")
        .param("queue", s.queue, "GOPs a worker's queue holds")
        .param("encoder", s.codec.name(), "the kernel's encoder (openh264, or x264 with the `x264` feature)");
    r.machine = Some(crate::machine::describe());
    let one = rows.iter().find(|r| r.workers == 1 && r.summary.is_some()).map(Row::rate);
    let mut t = Table::new(&CASES);
    for row in rows {
        let sum = row.summary.as_ref();
        t.push(vec![
            row.case.clone().into(),
            row.encoder.into(),
            (row.workers as u64).into(),
            row.rate().into(),
            one.map(|o| row.rate() / o).into(),
            sum.map(Summary::imbalance).into(),
            sum.map(|x| x.stayed).into(),
            sum.map(|x| x.reorder_wait(0.5).as_secs_f64() * 1e3).into(),
            sum.map(|x| x.reorder_wait(0.99).as_secs_f64() * 1e3).into(),
            row.seconds.into(),
        ]);
    }
    let best =
        rows.iter().filter(|r| r.summary.is_some() && r.workers > 1).max_by(|a, b| a.rate().total_cmp(&b.rate()));
    if let (Some(best), Some(one)) = (best, one) {
        let x = best.rate() / one;
        t.note(format!(
            "issue 41's goal on this machine, the best policy ≥ {GOAL_SPEEDUP}× one worker: {} at {x:.2}×, {}",
            best.case,
            if x >= GOAL_SPEEDUP { "met" } else { "NOT met" }
        ));
    }
    let peer = rows.iter().filter(|r| r.summary.is_none()).max_by(|a, b| a.rate().total_cmp(&b.rate()));
    if let Some(peer) = peer {
        match (s.codec, best) {
            (Codec::X264, Some(best)) => {
                let x = best.rate() / peer.rate();
                t.note(format!(
                    "issue 41's goal, the best policy ≥ ffmpeg's throughput on the same work (libx264 {X264_PRESET} on \
                     both sides, the same settings and instruction sets): {} at {:.1} pictures/s, {x:.2}× ffmpeg's best \
                     row ({}, {:.1}): {}",
                    best.case,
                    best.rate(),
                    peer.case,
                    peer.rate(),
                    if x >= 1.0 { "met" } else { "NOT met" }
                ));
                t.note(
                    "the work differs where it must: ours decodes with OpenH264 and starts an encoder per GOP (rate \
                     control restarts at each GOP, so a GOP's bytes do not depend on where it ran); ffmpeg decodes \
                     with its own H.264 decoder and runs one encoder per stream",
                );
            }
            _ => t.note(
                "ffmpeg's rows encode with libx264 (Debian's ffmpeg has no OpenH264 encoder): not the same work, so \
                 \"≥ ffmpeg's throughput\" is not judged here; `--encoder x264` (a build with the `x264` feature) \
                 makes it the same work",
            ),
        }
    } else if s.ffmpeg {
        t.note("ffmpeg was not run: it is not installed (.ci/install-ffmpeg or bench/install-peers.sh installs it)");
    }
    t.note(
        "GOP stayed: of a stream's GOPs after its first, the share placed on the worker its previous GOP went to; \
         reorder: how long a finished GOP waited for its stream's earlier GOPs",
    );
    r.tables.push(t);
    if let Some(p) = &outcome.prediction {
        let (cells, notes) = predict::prediction_rows(&p.policies);
        let mut t = Table::new(&PREDICTION);
        for row in cells {
            t.push(row);
        }
        let m = &p.measured;
        t.note(format!(
            "fed in: {} GOPs' decode+encode times from the one-worker run (simulated one worker: {:.3} s, their \
             sum); cache effect {}",
            m.gops.streams.iter().map(|s| s.1.len()).sum::<usize>(),
            p.one_seconds,
            if m.both_ways == 0 {
                "not measured (no GOP ran both on and away from its stream's previous worker): taken as 1".to_string()
            } else {
                format!(
                    "{:.3}: a GOP on another worker than its stream's previous one over the same GOP where it stayed \
                     (median of {} GOPs measured both ways)",
                    m.gops.moved, m.both_ways
                )
            }
        ));
        for n in notes {
            t.note(n);
        }
        r.tables.push(t);
        let (cells, claims) = predict::machine_rows(&p.machines, m.gops.moved);
        let mut t = Table::new(&MACHINES);
        for row in cells {
            t.push(row);
        }
        t.note(format!(
            "{} streams (Guo's), stream j transcoding measured stream j mod {}'s GOPs under a flow of its own; the \
             reproduction's queue (4) and decision cost (2 µs); `switchyard reproduce gop-cache-aware` has the fitted \
             costs these replace",
            predict::GUO_STREAMS,
            m.gops.streams.len()
        ));
        r.tables.push(t);
        r.claims.extend(claims);
    }
    r
}
