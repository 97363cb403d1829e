//! The parallel run: each GOP placed by a core policy on a pinned worker, and each stream's
//! GOPs written back in order.
//!
//! One thread places, one per worker transcodes, and the calling thread puts GOPs back in order
//! and writes them. GOPs arrive interleaved across the streams (GOP 0 of every stream, then GOP
//! 1, ...), as live streams would, so a policy sees many flows at once and must choose between
//! keeping a stream on one worker (Guo §6.2: its reference data stays warm) and evening the load.
//!
//! # Bounds
//!
//! A worker's queue holds `queue` GOPs; a full queue holds the placer back (backpressure, never
//! a drop). GOPs that finished out of order wait in their stream's reorder buffer: at most the
//! GOPs in flight, `workers × (queue + 1)`, so memory is bounded by that many GOPs in and out.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use switchyard_core::{FlowId, LoadView, Placer, Unit, WorkerId};
use thiserror::Error;

use crate::annexb::Gop;
use crate::kernel::{self, KernelError, Settings};

/// One input stream, cut into GOPs.
#[derive(Clone, Debug)]
pub struct Stream {
    /// What to call it in messages (its file name).
    pub name: String,
    /// Its closed GOPs, in order.
    pub gops: Vec<Gop>,
}

impl Stream {
    /// The flow the place stage sees for the stream with index `i`: a digest of its name and
    /// index, so that two streams never share a flow even when named alike.
    pub fn flow(&self, i: usize) -> FlowId {
        // FNV-1a over the name, then a splitmix64 finish: stable across builds and machines.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.name.bytes().chain((i as u64).to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        FlowId(h ^ (h >> 31))
    }
}

/// How to run.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Worker threads.
    pub workers: usize,
    /// GOPs a worker's queue holds before the placer waits.
    pub queue: usize,
    /// Pin worker `w` to core `w mod cores`.
    pub pin: bool,
    /// What each GOP becomes.
    pub settings: Settings,
}

/// Why a run stopped.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PoolError {
    /// A GOP could not be transcoded; the run stops there.
    #[error("stream {stream}: {source}")]
    Kernel {
        /// The stream's name.
        stream: String,
        /// What the kernel said.
        source: KernelError,
    },
    /// Writing a stream's output failed.
    #[error("writing the output of stream {stream}: {source}")]
    Write {
        /// The stream's name.
        stream: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A run needs streams, workers and room in the queues.
    #[error("nothing to run: {0}")]
    Empty(&'static str),
    /// The run ended with GOPs neither written nor failed: a worker or the placer stopped
    /// short. Never a partial output reported as whole.
    #[error("{written} of {total} GOPs written: the run stopped short")]
    Short {
        /// GOPs written.
        written: u64,
        /// GOPs in the run.
        total: u64,
    },
    /// One output per stream.
    #[error("{outputs} outputs for {streams} streams: give one output per stream")]
    Outputs {
        /// Outputs given.
        outputs: usize,
        /// Streams given.
        streams: usize,
    },
}

/// How far a run has got, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// GOPs written.
    pub gops_done: u64,
    /// GOPs in the run.
    pub gops: u64,
    /// Pictures written.
    pub pictures: u64,
}

/// What one worker did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerStats {
    /// GOPs it transcoded.
    pub gops: u64,
    /// Input bytes of those GOPs.
    pub bytes: u64,
    /// Time spent transcoding.
    pub busy: Duration,
}

/// One GOP as it ran: where, and how long it took (what the simulator is fed to predict a
/// run from this one's costs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GopRun {
    /// The stream's index in the run.
    pub stream: usize,
    /// The GOP's index in its stream.
    pub seq: u64,
    /// The worker that transcoded it.
    pub worker: usize,
    /// Its input bytes.
    pub bytes: u64,
    /// Decode and encode time on that worker.
    pub busy: Duration,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Pictures decoded.
    pub pictures_in: u64,
    /// Pictures encoded and written.
    pub pictures_out: u64,
    /// GOPs transcoded.
    pub gops: u64,
    /// Output bytes written.
    pub bytes_out: u64,
    /// From the first placement to the last write.
    pub elapsed: Duration,
    /// Per worker, by id.
    pub workers: Vec<WorkerStats>,
    /// How long each GOP waited in its stream's reorder buffer for the GOPs before it, every GOP
    /// of every stream, sorted.
    pub reorder_waits: Vec<Duration>,
    /// Of the GOPs after a stream's first, the fraction placed on the worker its previous GOP
    /// went to (where that GOP's decoder state and the stream's data are warm).
    pub stayed: f64,
    /// Every GOP transcoded, sorted by stream and index.
    pub gop_runs: Vec<GopRun>,
}

impl Summary {
    /// Pictures written a second.
    pub fn pictures_per_second(&self) -> f64 {
        self.pictures_out as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The busiest worker's busy time over the mean: 1.0 is perfect balance.
    pub fn imbalance(&self) -> f64 {
        let busy: Vec<f64> = self.workers.iter().map(|w| w.busy.as_secs_f64()).collect();
        let mean = busy.iter().sum::<f64>() / busy.len().max(1) as f64;
        if mean == 0.0 { 1.0 } else { busy.iter().copied().fold(0.0, f64::max) / mean }
    }

    /// The reorder wait at quantile `q` (0 to 1), nearest rank.
    pub fn reorder_wait(&self, q: f64) -> Duration {
        let n = self.reorder_waits.len();
        if n == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n);
        self.reorder_waits[rank - 1]
    }
}

struct Job {
    stream: usize,
    seq: u64,
    worker: usize,
    bytes: Vec<u8>,
}

struct Done {
    stream: usize,
    seq: u64,
    worker: usize,
    input: u64,
    busy: Duration,
    result: Result<kernel::Transcoded, KernelError>,
    at: Instant,
}

/// Transcodes every stream, each GOP where `placer` puts it, and writes stream `i`'s GOPs in
/// order to `outputs[i]`. `progress` is called after each GOP written.
pub fn run(
    streams: &[Stream],
    placer: &mut dyn Placer,
    config: &PoolConfig,
    outputs: &mut [Box<dyn Write + Send>],
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, PoolError> {
    if streams.is_empty() {
        return Err(PoolError::Empty("no streams"));
    }
    if config.workers == 0 || config.queue == 0 {
        return Err(PoolError::Empty("a run needs at least one worker with a queue of at least one GOP"));
    }
    if outputs.len() != streams.len() {
        return Err(PoolError::Outputs { outputs: outputs.len(), streams: streams.len() });
    }
    let total: u64 = streams.iter().map(|s| s.gops.len() as u64).sum();
    let done_units: Vec<AtomicU64> = (0..config.workers).map(|_| AtomicU64::new(0)).collect();
    let done_bytes: Vec<AtomicU64> = (0..config.workers).map(|_| AtomicU64::new(0)).collect();
    let abort = AtomicBool::new(false);
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let start = Instant::now();

    std::thread::scope(|scope| {
        let mut queues = Vec::with_capacity(config.workers);
        for w in 0..config.workers {
            let (tx, rx) = mpsc::sync_channel::<Job>(config.queue);
            queues.push(tx);
            let done_tx = done_tx.clone();
            let (units, bytes) = (&done_units[w], &done_bytes[w]);
            let core = (config.pin && !cores.is_empty()).then(|| cores[w % cores.len()]);
            let settings = config.settings;
            let abort = &abort;
            scope.spawn(move || {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                for job in rx {
                    if abort.load(Ordering::Relaxed) {
                        continue;
                    }
                    let t0 = Instant::now();
                    let result = kernel::transcode(&job.bytes, job.seq, &settings);
                    let busy = t0.elapsed();
                    units.fetch_add(1, Ordering::Release);
                    bytes.fetch_add(job.bytes.len() as u64, Ordering::Release);
                    let done = Done {
                        stream: job.stream,
                        seq: job.seq,
                        worker: job.worker,
                        input: job.bytes.len() as u64,
                        busy,
                        result,
                        at: Instant::now(),
                    };
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);

        // The placer's thread. Each worker's queue length is what was sent to it less what it
        // finished, read through the core's load view.
        let placements = scope.spawn(|| {
            let mut sent_units = vec![0u64; config.workers];
            let mut sent_bytes = vec![0u64; config.workers];
            let mut queue_units = vec![0u64; config.workers];
            let mut queue_bytes = vec![0u64; config.workers];
            let mut last: Vec<Option<usize>> = vec![None; streams.len()];
            let (mut stayed, mut followed) = (0u64, 0u64);
            let longest = streams.iter().map(|s| s.gops.len()).max().unwrap_or(0);
            'all: for round in 0..longest {
                for (i, s) in streams.iter().enumerate() {
                    let Some(gop) = s.gops.get(round) else { continue };
                    if abort.load(Ordering::Relaxed) {
                        break 'all;
                    }
                    for w in 0..config.workers {
                        queue_units[w] = sent_units[w] - done_units[w].load(Ordering::Acquire);
                        queue_bytes[w] = sent_bytes[w] - done_bytes[w].load(Ordering::Acquire);
                    }
                    let unit = Unit::of_flow(s.flow(i), gop.bytes.len() as u64).with_seq(gop.index);
                    let w = placer.place(&unit, &LoadView::new(&queue_units, &queue_bytes)).0 as usize;
                    let w = w.min(config.workers - 1);
                    if let Some(prev) = last[i] {
                        followed += 1;
                        stayed += u64::from(prev == w);
                    }
                    last[i] = Some(w);
                    sent_units[w] += 1;
                    sent_bytes[w] += gop.bytes.len() as u64;
                    let job = Job { stream: i, seq: gop.index, worker: w, bytes: gop.bytes.clone() };
                    if queues[w].send(job).is_err() {
                        break 'all;
                    }
                    if round + 1 == s.gops.len() {
                        placer.forget_flow(s.flow(i));
                    }
                }
            }
            drop(queues);
            if followed == 0 { 1.0 } else { stayed as f64 / followed as f64 }
        });

        // This thread: GOPs back in order, per stream.
        let mut waiting: Vec<BTreeMap<u64, Done>> = (0..streams.len()).map(|_| BTreeMap::new()).collect();
        let mut next = vec![0u64; streams.len()];
        let mut workers = vec![WorkerStats::default(); config.workers];
        let mut summary = Summary {
            pictures_in: 0,
            pictures_out: 0,
            gops: 0,
            bytes_out: 0,
            elapsed: Duration::ZERO,
            workers: Vec::new(),
            reorder_waits: Vec::with_capacity(total as usize),
            stayed: 0.0,
            gop_runs: Vec::with_capacity(total as usize),
        };
        let mut failure = None;
        for done in done_rx {
            let ws = &mut workers[done.worker];
            ws.gops += 1;
            ws.bytes += done.input;
            ws.busy += done.busy;
            summary.gop_runs.push(GopRun {
                stream: done.stream,
                seq: done.seq,
                worker: done.worker,
                bytes: done.input,
                busy: done.busy,
            });
            if failure.is_some() {
                continue;
            }
            let s = done.stream;
            // GOP indexes in a stream count from 0 without gaps (annexb::gops), so `next`
            // walks them.
            waiting[s].insert(done.seq, done);
            while let Some(ready) = waiting[s].remove(&next[s]) {
                next[s] += 1;
                let now = Instant::now();
                let t = match ready.result {
                    Ok(t) => t,
                    Err(source) => {
                        failure = Some(PoolError::Kernel { stream: streams[s].name.clone(), source });
                        abort.store(true, Ordering::Relaxed);
                        break;
                    }
                };
                if let Err(source) = outputs[s].write_all(&t.bytes) {
                    failure = Some(PoolError::Write { stream: streams[s].name.clone(), source });
                    abort.store(true, Ordering::Relaxed);
                    break;
                }
                summary.reorder_waits.push(now.saturating_duration_since(ready.at));
                summary.pictures_in += u64::from(t.pictures_in);
                summary.pictures_out += u64::from(t.pictures_out);
                summary.bytes_out += t.bytes.len() as u64;
                summary.gops += 1;
                progress(Progress { gops_done: summary.gops, gops: total, pictures: summary.pictures_out });
            }
        }
        let stayed = placements.join().unwrap_or(0.0);
        if let Some(e) = failure {
            return Err(e);
        }
        if summary.gops != total {
            return Err(PoolError::Short { written: summary.gops, total });
        }
        for (s, out) in outputs.iter_mut().enumerate() {
            out.flush().map_err(|source| PoolError::Write { stream: streams[s].name.clone(), source })?;
        }
        summary.elapsed = start.elapsed();
        summary.workers = workers;
        summary.stayed = stayed;
        summary.reorder_waits.sort_unstable();
        summary.gop_runs.sort_unstable_by_key(|g| (g.stream, g.seq));
        Ok(summary)
    })
}

/// The reference the parallel run must equal: every stream's GOPs transcoded one after
/// another on this thread.
pub fn sequential(stream: &Stream, settings: &Settings) -> Result<Vec<u8>, PoolError> {
    let mut out = Vec::new();
    for gop in &stream.gops {
        let t = kernel::transcode(&gop.bytes, gop.index, settings)
            .map_err(|source| PoolError::Kernel { stream: stream.name.clone(), source })?;
        out.extend_from_slice(&t.bytes);
    }
    Ok(out)
}

/// The worker ids `0..n`, for building a placer over this pool.
pub fn worker_ids(n: usize) -> Vec<WorkerId> {
    (0..n as u32).map(WorkerId).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annexb;
    use crate::make::{Sample, sample_stream};
    use std::sync::{Arc, Mutex};
    use switchyard_core::place::{PlaceConfig, Policy, build};

    /// An output the test can read after the run.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn streams(n: u64) -> Vec<Stream> {
        (0..n)
            .map(|seed| {
                let s = Sample { width: 64, height: 48, frames: 12, gop: 3, seed, bitrate: 300_000 };
                Stream { name: format!("s{seed}.h264"), gops: annexb::gops(&sample_stream(&s).unwrap()).unwrap().0 }
            })
            .collect()
    }

    fn run_with(policy: Policy, streams: &[Stream], workers: usize, queue: usize) -> (Summary, Vec<Vec<u8>>) {
        let mut placer = build(policy, &PlaceConfig::default(), &worker_ids(workers)).unwrap();
        let shared: Vec<Shared> = streams.iter().map(|_| Shared::default()).collect();
        let mut outputs: Vec<Box<dyn Write + Send>> =
            shared.iter().map(|s| Box::new(s.clone()) as Box<dyn Write + Send>).collect();
        let config = PoolConfig { workers, queue, pin: true, settings: Settings::default() };
        let mut calls = 0;
        let summary = run(streams, placer.as_mut(), &config, &mut outputs, &mut |_| calls += 1).unwrap();
        assert_eq!(calls as u64, summary.gops, "a progress call per GOP written");
        (summary, shared.iter().map(|s| s.0.lock().unwrap().clone()).collect())
    }

    #[test]
    fn every_policy_gives_the_bytes_of_one_thread() {
        let streams = streams(4);
        let reference: Vec<Vec<u8>> = streams.iter().map(|s| sequential(s, &Settings::default()).unwrap()).collect();
        for policy in [Policy::RoundRobin, Policy::Jsq, Policy::Hrw, Policy::Ahrw] {
            let (summary, outputs) = run_with(policy, &streams, 3, 1);
            assert_eq!(summary.gops, 16, "{policy}");
            assert_eq!(summary.pictures_in, 48, "{policy}");
            assert_eq!(summary.pictures_out, 48, "{policy}");
            for (i, (got, want)) in outputs.iter().zip(&reference).enumerate() {
                assert!(got == want, "{policy}: stream {i} differs from the one-thread transcode");
            }
            assert_eq!(summary.workers.iter().map(|w| w.gops).sum::<u64>(), 16);
            // Each GOP once, in stream order, its time counted in its worker's busy time.
            let keys: Vec<(usize, u64)> = summary.gop_runs.iter().map(|g| (g.stream, g.seq)).collect();
            let want: Vec<(usize, u64)> = (0..4).flat_map(|s| (0..4).map(move |k| (s, k))).collect();
            assert_eq!(keys, want, "{policy}");
            for (w, stats) in summary.workers.iter().enumerate() {
                let mine = summary.gop_runs.iter().filter(|g| g.worker == w);
                assert_eq!(mine.clone().map(|g| g.busy).sum::<Duration>(), stats.busy, "{policy}: worker {w}");
                assert_eq!(mine.map(|g| g.bytes).sum::<u64>(), stats.bytes, "{policy}: worker {w}");
            }
            assert_eq!(summary.reorder_waits.len(), 16);
        }
    }

    #[test]
    fn hashing_keeps_a_stream_on_its_worker_and_round_robin_does_not() {
        let streams = streams(4);
        let (hrw, _) = run_with(Policy::Hrw, &streams, 2, 2);
        assert_eq!(hrw.stayed, 1.0, "HRW places a flow on one worker");
        let (rr, _) = run_with(Policy::RoundRobin, &streams, 2, 2);
        // Four streams dealt round robin over two workers: each stream's next GOP goes where
        // its last did (4 apart is 0 mod 2), so three workers show the difference.
        let (rr3, _) = run_with(Policy::RoundRobin, &streams, 3, 2);
        assert!(rr3.stayed < 0.5, "round robin over 3 workers moved streams: stayed {}", rr3.stayed);
        assert!(rr.gops == 16 && rr3.gops == 16);
    }

    #[test]
    fn a_failing_gop_stops_the_run_naming_its_stream() {
        let mut streams = streams(2);
        // A GOP too small to halve twice: the kernel refuses it.
        streams[1].name = "broken.h264".into();
        let mut placer = build(Policy::RoundRobin, &PlaceConfig::default(), &worker_ids(2)).unwrap();
        let mut outputs: Vec<Box<dyn Write + Send>> = vec![Box::new(Shared::default()), Box::new(Shared::default())];
        let settings = Settings { downscale: 4, ..Settings::default() };
        let config = PoolConfig { workers: 2, queue: 1, pin: false, settings };
        let e = run(&streams, placer.as_mut(), &config, &mut outputs, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("too small"), "{e}");
    }

    #[test]
    fn bad_runs_are_refused() {
        let streams = streams(1);
        let mut placer = build(Policy::RoundRobin, &PlaceConfig::default(), &worker_ids(1)).unwrap();
        let config = PoolConfig { workers: 1, queue: 1, pin: false, settings: Settings::default() };
        let e = run(&streams, placer.as_mut(), &config, &mut [], &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("one output per stream"), "{e}");
        let none = PoolConfig { workers: 0, ..config };
        let mut outputs: Vec<Box<dyn Write + Send>> = vec![Box::new(Shared::default())];
        assert!(run(&streams, placer.as_mut(), &none, &mut outputs, &mut |_| {}).is_err());
    }
}
