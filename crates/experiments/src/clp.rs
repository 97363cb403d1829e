//! `reproduce yates-clp` (Yates 2006 ch. 2–4): on real threads and sockets, bulk connections on
//! a number of worker threads, measured from the send side as the thesis did, with soft
//! throughput-based scheduling off or on, and rate-promised streams measured by their clients,
//! window by window; and the processor-scaling curves in the simulator (`models::clp`). [`run`]
//! runs the parts as the thesis's figures are laid out; [`Reproduction::report`] gives a table
//! per part with [`published`] beside them.
//!
//! The thesis ran an in-memory device at memory speed on a 12-processor SGI Challenge. Here the
//! device is loopback and the clients share the machine's cores with the server, so absolute
//! rates differ; what should carry over is the shape.

use std::time::{Duration, Instant};

use switchyard_core::measure::{Spread, balance, spread};
use switchyard_core::order::{PaceConfig, QuotaConfig};
use switchyard_core::place::rebalance::{Direction, RebalanceConfig};
use switchyard_runtime::deliver::load::{Departures, Ended, EndedEarly, Fate, Opened, Summary};
use switchyard_runtime::deliver::{
    Handshake, KernelPacing, Load, LoadConfig, Pacing, Request, Server, ServerConfig, Transport, Windows,
};

use switchyard_sim::models::clp::{ScalingRow, Setup as ClpSetup, Workload, scaling};

use crate::ExperimentError;
use crate::report::{Chart, ColumnSpec, LineStyle, Progress, Report, ReportSpec, Table, TableSpec, Value};

/// What one run of bulk connections measured, from the send side as the thesis did.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Worker threads.
    pub threads: usize,
    /// The connections' rates summed (bits/s).
    pub aggregate_bps: f64,
    /// The thesis's percentile view of the threads' rates.
    pub per_thread: Spread,
    /// The same of the connections' rates.
    pub per_conn: Spread,
    /// Jain's index of the connections' rates.
    pub conn_jain: f64,
    /// The threads' CPU time, spread.
    pub cpu: Spread,
    /// Connections the rebalancer moved.
    pub moves: u64,
    /// Connections the server did not accept.
    pub not_accepted: usize,
}

fn server(workers: usize, pacing: Pacing, rebalance: Option<RebalanceConfig>) -> Result<Server, ExperimentError> {
    // One packet per connection per turn, the unit of the thesis's fairness and scheduling runs.
    let cfg = ServerConfig { workers, pacing, rebalance, burst: 1, ..Default::default() };
    Server::start(cfg).map_err(|e| ExperimentError::Real(format!("cannot start the delivery server on loopback: {e}")))
}

/// Clients, and how many of them the server did not accept.
fn clients(
    server: &Server,
    transport: Transport,
    conns: usize,
    request: Request,
) -> Result<(Load, usize), ExperimentError> {
    let l = Load::start(LoadConfig {
        server: server.local_addr(),
        transport,
        conns,
        handshake: Handshake::Switchyard(request),
        threads: 1,
        recv_buffer: Some(1 << 20),
        upload: None,
        pin: false,
        promised: None,
    })?;
    let bad = l.opened().into_iter().filter(|o| !matches!(o, Opened::Accepted(_))).count();
    Ok((l, bad))
}

/// Bulk connections on `threads` workers: the send side's view, as the thesis measured it. A
/// server that failed, or connections that ended (or were no longer served) before the
/// measurement did, make it an error: the row would be wrong, not slow.
pub fn bulk_case(
    threads: usize,
    transport: Transport,
    conns: usize,
    secs: f64,
    warmup: f64,
    soft: Option<Direction>,
) -> Result<Measured, ExperimentError> {
    let srv = server(
        threads,
        Pacing::Fine(PaceConfig::default()),
        soft.map(|direction| RebalanceConfig { direction, ..Default::default() }),
    )?;
    let measured = bulk_on(&srv, transport, conns, secs, warmup);
    srv.stop();
    measured
}

/// [`bulk_case`] on a server already started (and stopped by the caller).
pub fn bulk_on(
    srv: &Server,
    transport: Transport,
    conns: usize,
    secs: f64,
    warmup: f64,
) -> Result<Measured, ExperimentError> {
    let threads = srv.config().workers;
    let (load, not_accepted) = clients(srv, transport, conns, Request::Bulk)?;
    std::thread::sleep(Duration::from_secs_f64(warmup));
    let before = srv.connections();
    let seen = srv.history().len();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after = srv.connections();
    let elapsed = t0.elapsed().as_secs_f64();
    let history = srv.history();
    let moves = srv.totals().moves;
    // A connection that ended mid-window would drop out of the per-connection figures, and a
    // server that failed would serve nothing more: either makes the row wrong, not slow. Over
    // UDP only an ICMP error in answer to a keepalive tells the clients, so they ask now.
    load.probe();
    let fates = load.fates();
    let failure = srv.failure();
    drop(load);
    let started = fates.iter().filter(|f| **f != Fate::NotStarted).count();
    ended_or_failed("bulk", &fates, failure)?;
    // Every connection started must be in the row: one the server no longer serves would
    // silently drop out of it.
    if after.len() < started {
        return Err(ExperimentError::Real(format!(
            "{} of {started} bulk connections were no longer served at the end of the measurement",
            started - after.len()
        )));
    }
    let per_conn: Vec<f64> = after
        .iter()
        .map(|a| (a.bytes - before.iter().find(|b| b.id == a.id).map_or(0, |b| b.bytes)) as f64 * 8.0 / elapsed)
        .collect();
    let samples = &history[seen.min(history.len())..];
    let span: f64 = samples.iter().map(|s| s.secs).sum::<f64>().max(1e-9);
    let per_thread: Vec<f64> =
        (0..threads).map(|i| samples.iter().map(|s| s.bytes[i]).sum::<u64>() as f64 * 8.0 / span).collect();
    let cpu: Vec<f64> = (0..threads).map(|i| samples.iter().map(|s| s.cpu_ns[i]).sum::<u64>() as f64).collect();
    Ok(Measured {
        threads,
        aggregate_bps: per_conn.iter().sum(),
        per_thread: spread(&per_thread),
        per_conn: spread(&per_conn),
        conn_jain: balance(&per_conn, None).jain,
        cpu: spread(&cpu),
        moves,
        not_accepted,
    })
}

/// What one hard case measured: the clients' windows and the streams' departure lines, with
/// the pacing the server actually ran (read back from it, not the one asked for, so that a row
/// cannot claim a pacer it did not have).
#[derive(Clone, Debug)]
pub struct Streams {
    /// How the server paced the streams.
    pub pacing: Pacing,
    /// Bytes per packet the server sent (the unit of lead and lag).
    pub packet: usize,
    /// What the clients received, window by window, summed up.
    pub summary: Summary,
    /// The windows themselves.
    pub windows: Windows,
    /// Each stream's lead over and lag behind its departure line `rate × (t − start)`, as the
    /// clients saw its bytes arrive, over the whole stream (`None` if nothing arrived).
    pub departures: Option<Departures>,
    /// Connections the server did not accept.
    pub not_accepted: usize,
}

/// Streams at `bits` on every connection over `transport`, measured by the clients in 100 ms
/// windows after a second's warm-up. A server that failed, or streams that ended before the
/// measurement did, make it an error (a kernel-paced stream the kernel would not pace is closed
/// by the server, so it is one too).
pub fn hard_case(
    threads: usize,
    transport: Transport,
    conns: usize,
    bits: u64,
    pacing: Pacing,
    secs: f64,
) -> Result<Streams, ExperimentError> {
    let srv = server(threads, pacing, None)?;
    let measured = streams_on(&srv, transport, conns, bits, secs);
    srv.stop();
    measured
}

/// [`hard_case`]'s measurement on a server already started (and stopped by the caller).
pub fn streams_on(
    srv: &Server,
    transport: Transport,
    conns: usize,
    bits: u64,
    secs: f64,
) -> Result<Streams, ExperimentError> {
    let (load, not_accepted) = clients(srv, transport, conns, Request::Stream { bits_per_sec: bits })?;
    let windows = (secs * 10.0).ceil() as usize;
    let w = load.measure(Duration::from_secs(1), Duration::from_millis(100), windows, |_, _| {});
    let fates = load.fates();
    let lines = load.departures();
    drop(load);
    ended_or_failed("stream", &fates, srv.failure())?;
    Ok(Streams {
        pacing: srv.config().pacing,
        packet: srv.config().packet,
        summary: w.summary(0, Some(bits as f64 / 8.0), &fates),
        departures: Departures::of(&lines, &fates),
        windows: w,
        not_accepted,
    })
}

/// The error for a run in which the server failed or connections (of `what` kind) ended
/// before the measurement did: its figures would be wrong, not slow.
fn ended_or_failed(what: &str, fates: &[Fate], failure: Option<String>) -> Result<(), ExperimentError> {
    if let Some(why) = failure {
        return Err(ExperimentError::Real(format!("the delivery server failed during the {what} case: {why}")));
    }
    let ended = EndedEarly::of(fates);
    if ended.total() > 0 {
        let started = fates.iter().filter(|f| **f != Fate::NotStarted).count();
        let error = fates.iter().find_map(|f| if let Fate::Ended(e @ Ended::Error(_)) = f { Some(e) } else { None });
        return Err(ExperimentError::Real(format!(
            "{} of {started} {what} connections ended during the measurement: {ended}{}",
            ended.total(),
            error.map_or_else(String::new, |e| format!(" (the first error: {e})"))
        )));
    }
    Ok(())
}

/// `e`, saying which case of the reproduction it came from.
fn in_case(e: ExperimentError, case: &str) -> ExperimentError {
    match e {
        ExperimentError::Real(why) => ExperimentError::Real(format!("{case}: {why}")),
        other => other,
    }
}

/// The parts of the reproduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// Per-thread and per-connection fairness against threads, UDP and TCP bulk (Ch. 3).
    Fairness,
    /// Soft throughput-based scheduling, off and on (Ch. 4).
    Soft,
    /// Hard throughput-based scheduling: 4 Mb/s on every connection (Ch. 4), over UDP as the
    /// thesis ran it and over TCP, each paced by the user-space pacers and by the kernel.
    Hard,
    /// Processor scaling, 1 to 20 processors, in the simulator (Ch. 2).
    Scaling,
}

impl Part {
    /// Every part, in the order run.
    pub const ALL: [Self; 4] = [Self::Fairness, Self::Soft, Self::Hard, Self::Scaling];
}

/// The rate every stream of the hard part is promised (the thesis's 4 Mb/s).
pub const HARD_BITS: u64 = 4_000_000;

/// The pacers of the hard part, each run over both transports: the two in user space, then
/// the kernel's (TCP's own pacing under `SO_MAX_PACING_RATE`).
pub fn hard_pacers() -> [Pacing; 3] {
    [Pacing::Fine(PaceConfig::default()), Pacing::Quota(QuotaConfig::default()), Pacing::Kernel]
}

/// `fine`, `quota` or `kernel`, as `deliver serve --pacing` names them.
pub fn pacing_name(p: Pacing) -> &'static str {
    match p {
        Pacing::Fine(_) => "fine",
        Pacing::Quota(_) => "quota",
        Pacing::Kernel => "kernel",
    }
}

/// Why the kernel cannot pace streams over `transport` here, given what it `offers` (probed as
/// `deliver serve --pacing kernel` probes it); `None` when it can. Short: it is a table cell.
pub fn kernel_cannot(transport: Transport, offers: &KernelPacing) -> Option<&'static str> {
    match (transport, offers.fq) {
        (Transport::Tcp, _) if offers.tcp => None,
        (Transport::Tcp, _) => Some("this kernel refused SO_MAX_PACING_RATE"),
        // The server refuses kernel-paced UDP streams whatever the qdisc: it does not set up fq.
        (Transport::Udp, Some(true)) => Some("UDP needs the fq qdisc, which the server does not set up"),
        (Transport::Udp, Some(false)) => Some("UDP needs the fq qdisc: this kernel lacks it"),
        (Transport::Udp, None) => Some("UDP needs the fq qdisc: not probed (needs root)"),
    }
}

/// The processor counts of the scaling part (the thesis's Figs. 2.4–2.5 go to 20).
pub const PROCESSORS: [u32; 7] = [1, 2, 4, 8, 12, 16, 20];

/// The thesis's figures, in its words (notes 000 §5.2), for printing beside ours.
pub mod published {
    /// Ch. 3, UDP bulk.
    pub const FAIRNESS_UDP: &str = "per-thread max/min ≈ 10× at 96 threads; fairest at threads = processors (12)";
    /// Ch. 3, TCP bulk.
    pub const FAIRNESS_TCP: &str =
        "per-thread max/min ≈ 3× at 96 threads and 5× at 384; fairest at threads = processors (12)";
    /// The same as points (threads, per-thread max/min), for charts: UDP, then TCP.
    pub const FAIRNESS_POINTS: [&[(f64, f64)]; 2] = [&[(96.0, 10.0)], &[(96.0, 3.0), (384.0, 5.0)]];
    /// Ch. 4, soft scheduling.
    pub const SOFT: &str =
        "at 12 threads (unwired) the max−min gap falls from 40% to negligible; effective up to 48 threads unwired";
    /// Ch. 4, hard scheduling.
    pub const HARD: &str =
        "the guarantee holds with 12 or 24 threads and becomes hard to sustain at 48 (UDP, quota mode, 10 ms pauses)";
    /// The same per thread count, for the row it belongs beside (UDP paced by quota).
    pub const HARD_AT: [(usize, &str); 3] = [(12, "holds"), (24, "holds"), (48, "hard to sustain")];
    /// Ch. 2, processor scaling.
    pub const SCALING: &str = "speedup 14–17 at 20 processors in all four; UDP send fastest, TCP receive slowest";
    /// The same as the range at 20 processors.
    pub const SCALING_AT_20: (f64, f64) = (14.0, 17.0);
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The parts, run in the order of [`Part::ALL`].
    pub parts: Vec<Part>,
    /// Thread counts for the fairness part (the thesis: 12 to 384); this machine's core count is
    /// added.
    pub threads: Vec<usize>,
    /// Thread counts for the hard part (the thesis: 12, 24 and 48); this machine's core count
    /// is added.
    pub hard_threads: Vec<usize>,
    /// Connections (the thesis: 384, and 3,072); at least 1.
    pub conns: usize,
    /// Seconds measured per case, after the warm-up (the thesis: 45); at least 0.5.
    pub seconds: f64,
    /// What the kernel can pace, for the hard part's kernel-paced rows; `None` asks the kernel
    /// ([`KernelPacing::probe`]). A kernel that cannot pace a transport gets a row that says so
    /// instead of a measurement.
    pub kernel: Option<KernelPacing>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            parts: Part::ALL.to_vec(),
            threads: vec![12, 24, 48, 96, 192, 384],
            hard_threads: vec![12, 24, 48],
            conns: 384,
            seconds: 3.0,
            kernel: None,
        }
    }
}

/// One row of the reproduction.
#[derive(Clone, Debug)]
pub enum Row {
    /// Bulk connections on a number of threads.
    Fairness {
        /// UDP or TCP.
        transport: Transport,
        /// What the send side measured.
        measured: Measured,
    },
    /// UDP bulk with soft scheduling `off`, `equalise` or `as-written`.
    Soft {
        /// Which rule.
        rule: &'static str,
        /// What the send side measured.
        measured: Measured,
    },
    /// Streams at [`HARD_BITS`] over one transport, paced by one of [`hard_pacers`].
    Hard {
        /// Worker threads.
        threads: usize,
        /// UDP or TCP.
        transport: Transport,
        /// What came of it.
        outcome: Hard,
    },
    /// One workload's simulated speedups at [`PROCESSORS`].
    Scaling {
        /// The workload.
        workload: Workload,
        /// Its speedup at each processor count.
        rows: Vec<ScalingRow>,
    },
}

/// What came of one hard case.
#[derive(Clone, Debug)]
pub enum Hard {
    /// Run and measured.
    Measured(Box<Streams>),
    /// Not run: the kernel cannot pace this transport here.
    KernelCannot(&'static str),
}

impl Hard {
    /// The pacing the server ran; for a case not run, the kernel's, which it would have.
    pub fn pacing(&self) -> Pacing {
        match self {
            Self::Measured(s) => s.pacing,
            Self::KernelCannot(_) => Pacing::Kernel,
        }
    }
}

/// Everything the reproduction measured.
#[derive(Clone, Debug)]
pub struct Reproduction {
    /// This machine's cores.
    pub cores: usize,
    /// The fairness part's thread counts, the core count among them.
    pub threads: Vec<usize>,
    /// Every row, in the order run.
    pub rows: Vec<Row>,
    /// The windows of 12 threads paced by quota over UDP, the thesis's case, for a chart.
    pub hard_windows: Option<Windows>,
    /// What the kernel could pace, if the hard part ran.
    pub kernel: Option<KernelPacing>,
}

impl Reproduction {
    /// (threads, per-thread max/min) of the fairness rows over `transport`.
    pub fn fairness_points(&self, transport: Transport) -> Vec<(f64, f64)> {
        self.rows
            .iter()
            .filter_map(|r| match r {
                Row::Fairness { transport: t, measured } if *t == transport => {
                    Some((measured.threads as f64, measured.per_thread.max_over_min()))
                }
                _ => None,
            })
            .collect()
    }
}

/// Runs the parts `s` names, advancing `progress` by a stage per part (per transport for
/// fairness) and a step per row.
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Reproduction, ExperimentError> {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let mut threads = s.threads.clone();
    if !threads.contains(&cores) {
        threads.push(cores);
    }
    threads.sort_unstable();
    threads.dedup();
    let (conns, secs) = (s.conns.max(1), s.seconds.max(0.5));
    let mut report =
        Reproduction { cores, threads: threads.clone(), rows: Vec::new(), hard_windows: None, kernel: None };
    let emit = |report: &mut Reproduction, row: Row| {
        progress.advance(1);
        report.rows.push(row);
    };
    if s.parts.contains(&Part::Fairness) {
        for transport in [Transport::Udp, Transport::Tcp] {
            progress.stage(&format!("fairness, {}", transport_name(transport)), threads.len() as u64);
            for &t in &threads {
                let measured = bulk_case(t, transport, conns, secs, 1.0, None)
                    .map_err(|e| in_case(e, &format!("the {transport:?} fairness case on {t} threads")))?;
                emit(&mut report, Row::Fairness { transport, measured });
            }
        }
    }
    if s.parts.contains(&Part::Soft) {
        let soft_threads: Vec<usize> = [cores, 12, 48, 96].into_iter().filter(|t| *t <= conns).collect();
        progress.stage("soft scheduling", 3 * soft_threads.len() as u64);
        for t in soft_threads {
            for (rule, soft) in
                [("off", None), ("equalise", Some(Direction::Equalise)), ("as-written", Some(Direction::AsWritten))]
            {
                // The balancer moves one connection per 200 ms: give it time to act first.
                let warmup = if soft.is_some() { 4.0 } else { 1.0 };
                let measured = bulk_case(t, Transport::Udp, conns, secs, warmup, soft)
                    .map_err(|e| in_case(e, &format!("the soft case on {t} threads, rule {rule}")))?;
                emit(&mut report, Row::Soft { rule, measured });
            }
        }
    }
    if s.parts.contains(&Part::Hard) {
        let kernel = s.kernel.clone().unwrap_or_else(KernelPacing::probe);
        let mut hard_threads = s.hard_threads.clone();
        hard_threads.push(cores);
        hard_threads.sort_unstable();
        hard_threads.dedup();
        let cases = 2 * hard_pacers().len() * hard_threads.len();
        progress.stage("hard scheduling", cases as u64);
        for t in hard_threads {
            for transport in [Transport::Udp, Transport::Tcp] {
                for pacing in hard_pacers() {
                    // Where the kernel cannot pace, the row says so rather than measure streams
                    // the server would refuse, or fall back to a user-space pacer under the
                    // kernel's name.
                    let cannot = (pacing == Pacing::Kernel).then(|| kernel_cannot(transport, &kernel)).flatten();
                    let outcome = match cannot {
                        Some(why) => Hard::KernelCannot(why),
                        None => {
                            let mut m = hard_case(t, transport, conns, HARD_BITS, pacing, secs).map_err(|e| {
                                in_case(
                                    e,
                                    &format!(
                                        "the hard case on {t} threads, {} paced {}",
                                        transport_name(transport),
                                        pacing_name(pacing)
                                    ),
                                )
                            })?;
                            if t == 12 && transport == Transport::Udp && matches!(m.pacing, Pacing::Quota(_)) {
                                report.hard_windows = Some(std::mem::replace(&mut m.windows, Windows::new(Vec::new())));
                            }
                            Hard::Measured(Box::new(m))
                        }
                    };
                    emit(&mut report, Row::Hard { threads: t, transport, outcome });
                }
            }
        }
        report.kernel = Some(kernel);
    }
    if s.parts.contains(&Part::Scaling) {
        progress.stage("processor scaling (simulated)", Workload::ALL.len() as u64);
        for workload in Workload::ALL {
            let rows = scaling(workload.cost(), &PROCESSORS, &ClpSetup::default())?;
            emit(&mut report, Row::Scaling { workload, rows });
        }
    }
    Ok(report)
}

/// `UDP` or `TCP`, as the thesis writes them.
pub fn transport_name(t: Transport) -> &'static str {
    match t {
        Transport::Udp => "UDP",
        Transport::Tcp => "TCP",
    }
}

/// Fairness against threads: a row per transport and thread count.
pub const FAIRNESS: TableSpec = TableSpec::new(
    "fairness",
    "Fairness against threads, bulk, send side (Ch. 3, Figs. 3.1–3.8)",
    &[
        ColumnSpec::text("transport"),
        ColumnSpec::int("threads").about("worker threads"),
        ColumnSpec::num("aggregate", 0).unit("Mb/s").about("the connections' rates summed"),
        ColumnSpec::num("thread_max_min", 2).header("thread max/min").about("the threads' rates, max over min"),
        ColumnSpec::num("published", 1)
            .header("thesis")
            .about("the thesis's per-thread max/min at this thread count, where it gives one"),
        ColumnSpec::num("conn_max_min", 2).header("conn max/min").about("the connections' rates, max over min"),
        ColumnSpec::num("conn_jain", 4).header("conn Jain").about("Jain's index of the connections' rates"),
        ColumnSpec::num("cpu_max_min", 2).header("CPU max/min").about("the threads' CPU time, max over min"),
        ColumnSpec::int("not_accepted").header("refused").about("connections the server did not accept"),
    ],
)
.optional();

/// Soft scheduling: a row per thread count and rule.
pub const SOFT: TableSpec = TableSpec::new(
    "soft",
    "Soft throughput-based scheduling, UDP bulk (Ch. 4, Figs. 4.1–4.8)",
    &[
        ColumnSpec::int("threads").about("worker threads"),
        ColumnSpec::text("soft").about("the rebalancing rule: off, equalise or as-written"),
        ColumnSpec::num("aggregate", 0).unit("Mb/s").about("the connections' rates summed"),
        ColumnSpec::num("conn_gap", 1)
            .percent()
            .header("conn (max−min)/mean")
            .about("the fastest connection's rate less the slowest's, over the mean"),
        ColumnSpec::num("conn_jain", 4).header("conn Jain").about("Jain's index of the connections' rates"),
        ColumnSpec::int("moves").about("connections the rebalancer moved"),
        ColumnSpec::int("not_accepted").header("refused").about("connections the server did not accept"),
    ],
)
.optional();

/// Hard scheduling: a row per thread count, transport and pacing.
pub const HARD: TableSpec = TableSpec::new(
    "hard",
    "Hard throughput-based scheduling, streams at 4 Mb/s over UDP and TCP, paced in user space or by the kernel, received by the clients (Ch. 4, Figs. 4.17–4.24)",
    &[
        ColumnSpec::int("threads").about("worker threads"),
        ColumnSpec::text("transport").about("UDP, as the thesis ran it, or TCP"),
        ColumnSpec::text("pacing").about(
            "what the server ran: fine (per-stream credit), quota (Yates's packets per pause) or kernel (TCP's own pacing under SO_MAX_PACING_RATE)",
        ),
        ColumnSpec::int("admitted").about("connections counted (every one that started)"),
        ColumnSpec::num("aggregate", 1).unit("Mb/s").about("what the clients received, summed"),
        ColumnSpec::num("jain", 4).header("Jain").about("Jain's index of the connections' mean rates"),
        ColumnSpec::num("worst_conn", 2)
            .percent()
            .header("worst conn over run")
            .about("the worst connection's mean rate against 4 Mb/s"),
        ColumnSpec::num("window_p99", 1)
            .percent()
            .header("100 ms windows p99")
            .about("the 99th percentile of every connection's every 100 ms window against 4 Mb/s"),
        ColumnSpec::num("lag_p99", 2)
            .header("lag p99")
            .unit("packets")
            .about("over streams, the 99th percentile of a stream's largest lag behind its line rate × (t − start), in 4 KB packets, as its client saw bytes arrive"),
        ColumnSpec::num("lead_p99", 2)
            .header("lead p99")
            .unit("packets")
            .about("the same of a stream's largest lead over its line"),
        ColumnSpec::text("published")
            .header("thesis")
            .about("the thesis's verdict at this thread count, beside the case it ran (UDP, quota)"),
        ColumnSpec::int("not_accepted").header("refused").about("connections the server did not accept"),
        ColumnSpec::text("not_run")
            .header("not run")
            .about("why the kernel could not pace this case here; such a row has no figures"),
    ],
)
.optional();

/// The hard part's 12 threads paced by quota, the thesis's case, window by window.
pub const HARD_WINDOWS: TableSpec = TableSpec::new(
    "hard_windows",
    "4 Mb/s UDP streams on 12 threads paced by Yates's quota, 100 ms windows",
    &[
        ColumnSpec::num("seconds", 1).unit("s").about("the window's end, from the first window's start"),
        ColumnSpec::num("slowest", 2).unit("Mb/s").about("the connection slowest over the run"),
        ColumnSpec::num("median", 2).unit("Mb/s").about("the median connection over the run"),
        ColumnSpec::num("fastest", 2).unit("Mb/s").about("the connection fastest over the run"),
        ColumnSpec::num("target", 2).unit("Mb/s").about("the promised rate"),
    ],
)
.optional();

/// Processor scaling: a row per workload and processor count.
pub const SCALING: TableSpec = TableSpec::new(
    "scaling",
    "Processor scaling in the simulator: PPC, one connection per processor (Ch. 2, Figs. 2.4–2.5; model crates/sim/src/models/clp.rs)",
    &[
        ColumnSpec::text("workload"),
        ColumnSpec::int("processors"),
        ColumnSpec::num("speedup", 2).about("throughput over that of one processor"),
        ColumnSpec::num("throughput", 1).unit("Mb/s").about("aggregate throughput"),
    ],
)
.optional();

/// What `reproduce yates-clp` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "yates-clp",
    title: "Yates ch. 2–4: fairness against threads, soft and hard throughput-based scheduling (real sockets), processor scaling (simulated)",
    tables: &[&FAIRNESS, &SOFT, &HARD, &HARD_WINDOWS, &SCALING],
};

/// The thesis's verdict on the hard guarantee at `threads`, where it gives one.
fn published_hard(threads: usize) -> Option<&'static str> {
    published::HARD_AT.iter().find(|p| p.0 == threads).map(|p| p.1)
}

/// The thesis's per-thread max/min at `threads` over `t`, where it gives one.
fn published_fairness(t: Transport, threads: usize) -> Option<f64> {
    let i = usize::from(t == Transport::Tcp);
    published::FAIRNESS_POINTS[i].iter().find(|p| p.0 == threads as f64).map(|p| p.1)
}

impl Reproduction {
    /// The run as a report: a table per part that ran, the thesis's figures beside ours (as
    /// columns, claims and notes) and the charts.
    pub fn report(&self, s: &Setup) -> Report {
        let (conns, secs) = (s.conns.max(1), s.seconds.max(0.5));
        let mut r = Report::new(&SPEC);
        r.param("conns", conns, "connections over loopback")
            .param("seconds", secs, "seconds measured per case, after the warm-up")
            .param("cores", self.cores, "this machine's cores");
        r.machine = Some(format!("{} cores", self.cores));
        r.note(format!(
            "The thesis: 12 × 100 MHz processors, an in-memory device, 45 s runs; here the device is loopback and the clients share the {} cores with the server, so absolute rates differ: the shape is what should carry over.",
            self.cores
        ));
        let mut fairness = Table::new(&FAIRNESS).grouped_by("transport");
        let mut soft = Table::new(&SOFT).grouped_by("threads");
        let mut hard = Table::new(&HARD).grouped_by("threads");
        let mut scaling_t = Table::new(&SCALING).grouped_by("workload");
        for row in &self.rows {
            match row {
                Row::Fairness { transport, measured: m } => fairness.push(vec![
                    transport_name(*transport).into(),
                    m.threads.into(),
                    (m.aggregate_bps / 1e6).into(),
                    m.per_thread.max_over_min().into(),
                    published_fairness(*transport, m.threads).into(),
                    m.per_conn.max_over_min().into(),
                    m.conn_jain.into(),
                    m.cpu.max_over_min().into(),
                    m.not_accepted.into(),
                ]),
                Row::Soft { rule, measured: m } => soft.push(vec![
                    m.threads.into(),
                    (*rule).into(),
                    (m.aggregate_bps / 1e6).into(),
                    (m.per_conn.max - m.per_conn.min).into(),
                    m.conn_jain.into(),
                    m.moves.into(),
                    m.not_accepted.into(),
                ]),
                Row::Hard { threads, transport, outcome } => {
                    let pacing = outcome.pacing();
                    let thesis = (*transport == Transport::Udp && matches!(pacing, Pacing::Quota(_)))
                        .then(|| published_hard(*threads))
                        .flatten();
                    let mut row: Vec<Value> =
                        vec![(*threads).into(), transport_name(*transport).into(), pacing_name(pacing).into()];
                    match outcome {
                        Hard::Measured(m) => {
                            let (h, packet) = (&m.summary, m.packet as f64);
                            row.extend([
                                h.conns.into(),
                                (h.aggregate_bps / 1e6).into(),
                                h.jain.into(),
                                h.run_error.into(),
                                h.window_error.map(|[_, p99, _]| p99).into(),
                                m.departures.map(|d| d.lag[1] / packet).into(),
                                m.departures.map(|d| d.lead[1] / packet).into(),
                                thesis.into(),
                                m.not_accepted.into(),
                                Value::Null,
                            ]);
                        }
                        Hard::KernelCannot(why) => {
                            row.extend(std::iter::repeat_n(Value::Null, 7));
                            row.extend([thesis.into(), Value::Null, (*why).into()]);
                        }
                    }
                    hard.push(row);
                }
                Row::Scaling { workload, rows } => {
                    for p in rows {
                        scaling_t.push(vec![
                            workload.name().into(),
                            p.processors.into(),
                            p.speedup.into(),
                            p.throughput_mbps.into(),
                        ]);
                    }
                }
            }
        }
        if !fairness.rows.is_empty() {
            for t in [Transport::Udp, Transport::Tcp] {
                let points = self.fairness_points(t);
                let at =
                    |n: f64| points.iter().find(|p| p.0 == n).map_or("not run".to_string(), |p| format!("{:.2}×", p.1));
                let fairest = points.iter().min_by(|x, y| x.1.total_cmp(&y.1)).map_or(0.0, |p| p.0);
                let said = if t == Transport::Udp { published::FAIRNESS_UDP } else { published::FAIRNESS_TCP };
                fairness.note(format!("{} published: {said}", transport_name(t)));
                fairness.note(format!(
                    "{} ours:      {} at 96 threads, {} at 384; fairest at {fairest} threads (this machine has {} cores)",
                    transport_name(t),
                    at(96.0),
                    at(384.0),
                    self.cores
                ));
                for &(threads, thesis) in published::FAIRNESS_POINTS[usize::from(t == Transport::Tcp)] {
                    let ours = points.iter().find(|p| p.0 == threads).map(|p| p.1);
                    r.claims.push(crate::report::Claim {
                        claim: format!("per-thread max/min, {} bulk, {threads} threads", transport_name(t)),
                        source: "Yates ch. 3, Figs. 3.1–3.8".into(),
                        published: Some(thesis),
                        published_text: format!("≈{thesis}×"),
                        ours,
                        ours_text: ours.map_or_else(|| format!("not run (add {threads} to --clp-threads)"), |o| format!("{o:.2}×")),
                        difference: ours.map(|o| o / thesis - 1.0),
                        why: "the clients share this machine's cores with the server, and loopback is not the thesis's device; the shape, fairest at threads = processors, is what should carry over".into(),
                    });
                }
            }
            r.charts.push(
                Chart::new(
                    "fairness",
                    "Per-thread throughput max/min against threads",
                    FAIRNESS.name,
                    "threads",
                    &["thread_max_min", "published"],
                )
                .by("transport")
                .styled("published", LineStyle::Published)
                .labels("threads", "per-thread max/min"),
            );
            r.tables.push(fairness);
        }
        if !soft.rows.is_empty() {
            soft.note(format!("published: {}", published::SOFT));
            soft.note("`as-written` moves from the best-served thread to the worst, as the thesis's text says; `equalise` the other way (the default)");
            r.tables.push(soft);
        }
        if !hard.rows.is_empty() {
            hard.note(format!("{conns} streams at 4 Mb/s: {:.3} Gb/s in all", conns as f64 * HARD_BITS as f64 / 1e9));
            hard.note(format!("published: {}; the TCP rows are ours alone", published::HARD));
            if let Some(k) = &self.kernel {
                hard.note(format!("the kernel here: {k}"));
            }
            hard.note(
                "a 100 ms window holds a whole number of sends, so part of its error is quantisation, not lateness; lag and lead, in packets, are not",
            );
            hard.note("Linux sends a TCP connection's first ten segments unpaced, so kernel-paced streams start about ten packets ahead of their line");
            self.hard_claims(&mut r);
            r.tables.push(hard);
        }
        if let Some(w) = &self.hard_windows
            && let Some(t) = windows_table(w)
        {
            r.charts.push(
                Chart::new(
                    "hard-12-threads",
                    "4 Mb/s UDP streams, 12 threads, Yates's quota",
                    HARD_WINDOWS.name,
                    "seconds",
                    &["slowest", "median", "fastest", "target"],
                )
                .styled("target", LineStyle::Model)
                .labels("seconds", "Mb/s per window"),
            );
            r.tables.push(t);
        }
        if !scaling_t.rows.is_empty() {
            let (lo, hi) = published::SCALING_AT_20;
            for row in &self.rows {
                if let Row::Scaling { workload, rows } = row
                    && let Some(at_20) = rows.iter().find(|p| p.processors == 20)
                {
                    r.claims.push(crate::report::Claim {
                        claim: format!("speedup at 20 processors, {}", workload.name()),
                        source: "Yates ch. 2, Figs. 2.4–2.5".into(),
                        published: None,
                        published_text: format!("{lo}–{hi}"),
                        ours: Some(at_20.speedup),
                        ours_text: format!("{:.2}", at_20.speedup),
                        difference: None,
                        why: "one shared bus costs only the receive side speedup; the rest of the thesis's loss (coherence, cache conflicts, IRIX) is not in the model".into(),
                    });
                }
            }
            scaling_t.note(format!("published: {}", published::SCALING));
            scaling_t.note(format!(
                "A {}-core machine cannot show scaling past {}: that is why this part is simulated.",
                self.cores, self.cores
            ));
            r.charts.push(
                Chart::new(
                    "scaling",
                    "Speedup against processors (simulated; thesis: 14–17 at 20)",
                    SCALING.name,
                    "processors",
                    &["speedup"],
                )
                .by("workload")
                .labels("processors", "speedup"),
            );
            r.tables.push(scaling_t);
        }
        r
    }
}

impl Reproduction {
    /// A claim per thread count the thesis gives a verdict at, ours from the row it ran (UDP,
    /// quota): the thesis words it, so ours is the figures a reader judges it by.
    fn hard_claims(&self, r: &mut Report) {
        for &(threads, verdict) in &published::HARD_AT {
            let ours = self.rows.iter().find_map(|row| match row {
                Row::Hard { threads: t, transport: Transport::Udp, outcome: Hard::Measured(m) }
                    if *t == threads && matches!(m.pacing, Pacing::Quota(_)) =>
                {
                    Some(m)
                }
                _ => None,
            });
            let ours_text = ours.map_or_else(
                || format!("not run (add {threads} to --clp-hard-threads)"),
                |m| {
                    let lag = m.departures.map_or_else(|| "no".into(), |d| format!("{:.1}", d.lag[1] / m.packet as f64));
                    format!(
                        "worst connection {:.2}% off over the run, p99 of 100 ms windows {:.1}% off, {lag} packets' lag (p99)",
                        m.summary.run_error.unwrap_or(f64::NAN) * 100.0,
                        m.summary.window_error.map_or(f64::NAN, |w| w[1] * 100.0),
                    )
                },
            );
            r.claims.push(crate::report::Claim {
                claim: format!("4 Mb/s on every stream, UDP paced by quota, {threads} threads"),
                source: "Yates ch. 4, Figs. 4.17–4.24".into(),
                published: None,
                published_text: verdict.into(),
                ours: ours.and_then(|m| m.summary.run_error),
                ours_text,
                difference: None,
                why: "the clients share this machine's cores with the server and loopback is not the thesis's device: threads beyond the cores wait for them".into(),
            });
        }
    }
}

/// The slowest, median and fastest connection (by mean rate) window by window, with the
/// target; `None` when nothing was received.
fn windows_table(w: &Windows) -> Option<Table> {
    let rates = w.mean_rates(0);
    if rates.is_empty() || w.bytes.is_empty() {
        return None;
    }
    let mut order: Vec<usize> = (0..rates.len()).collect();
    order.sort_by(|a, b| rates[*a].total_cmp(&rates[*b]));
    let picks = [order[0], order[order.len() / 2], order[order.len() - 1]];
    let mut t = Table::new(&HARD_WINDOWS);
    for (k, (start, len)) in w.times.iter().enumerate() {
        let mbps = |c: usize| w.bytes[k][c] as f64 * 8.0 / len.max(1e-9) / 1e6;
        t.push(vec![
            (start + len).into(),
            mbps(picks[0]).into(),
            mbps(picks[1]).into(),
            mbps(picks[2]).into(),
            (HARD_BITS as f64 / 1e6).into(),
        ]);
    }
    Some(t)
}
