//! `bench mux`: the multiplexed session on loopback against m raw parallel TCP streams (the
//! ceiling), and the same channels as HTTP/2 streams of one connection (the h2 crate) and as
//! QUIC streams of one connection (quinn), all in one process and one run; and the kernel's
//! peer, Linux MPTCP, one connection per channel with m subflows each.
//!
//! MPTCP needs several addresses for its subflows, and its path manager's endpoints are
//! configuration of a whole namespace: that case runs in a namespace the bench makes (its
//! loopback, m client addresses as `subflow` endpoints), with its sockets made by a thread that
//! entered it and driven by the same runtime, beside raw TCP ×m in that namespace, the ceiling its
//! ratio is taken against. Where MPTCP or namespaces are not available, the case is left out
//! with a note saying why, and the others run.
//!
//! For each carrier: aggregate throughput and its ratio to the raw ceiling, and CPU time per
//! byte beside raw TCP's; weight adherence (the largest gap between a channel's share and its
//! weight's, in percentage points, and the RMS relative error, Iwashima Eq. 7.2); for the
//! session, the most bytes any channel's receiver held for reordering and the turns channels
//! lost for want of data or credit.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use switchyard_core::carry::pin;
use switchyard_core::measure::{allocation, median_of_rounds};
use switchyard_linkem::mptcp::{self, Loopback};
use switchyard_mux::{
    ConnChoice, Listener, MuxConfig, RecvConfig, Scheme, SelfSigned, SendConfig, Session, SessionReport,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::process_cpu;
use crate::ExperimentError;
use crate::report::{self as rep, ColumnSpec, Progress, ReportSpec, TableSpec, Value};

/// What to benchmark.
#[derive(Clone, Debug)]
pub struct Setup {
    /// TCP connections (m).
    pub connections: usize,
    /// Channels (n), weighted 1, r, r², …
    pub channels: usize,
    /// Ratio r between consecutive channels' weights.
    pub ratio: f64,
    /// Seconds each case is measured for in all, split over the rounds (each part after a
    /// quarter second of warm-up).
    pub seconds: f64,
    /// Rounds of every case in turn.
    pub rounds: usize,
    /// Bytes of credit for the whole session, shared among channels by weight.
    pub window: u64,
    /// TCP_NOTSENT_LOWAT of each connection, in bytes.
    pub lowat: u32,
    /// Time between re-pinnings by measured rates (pinning); `None`: by weight only, as the
    /// thesis does.
    pub repin_every: Option<Duration>,
    /// Frames queued per connection ahead of its socket.
    pub queue_frames: usize,
    /// Largest payload of a data frame, in bytes.
    pub frame: usize,
    /// The cases besides raw TCP, in the order run.
    pub cases: Vec<Case>,
}

impl Default for Setup {
    fn default() -> Self {
        let mux = MuxConfig::default();
        Self {
            connections: 5,
            channels: 15,
            ratio: 0.8,
            seconds: 3.0,
            rounds: 3,
            window: RecvConfig::default().window,
            lowat: mux.notsent_lowat,
            repin_every: Some(mux.rebalance_every),
            queue_frames: mux.queue_frames,
            frame: mux.send.max_frame,
            cases: Case::ALL.to_vec(),
        }
    }
}

/// A case of the bench besides raw TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// The session, striping, each frame on the least-queued connection.
    Stripe,
    /// The same over TLS (rustls, TLS 1.3).
    StripeTls,
    /// The same, each connection's records sealed and opened on a task of its own.
    StripeTlsTask,
    /// The session, striping, each frame on the connection expected to deliver it first.
    Earliest,
    /// The session, each channel pinned to one connection.
    Pin,
    /// HTTP/2 streams of one connection (h2).
    H2,
    /// QUIC streams of one connection (quinn).
    Quic,
    /// Linux MPTCP, a connection per channel, each with m subflows, in a namespace of its own.
    Mptcp,
    /// The tunnel (`switchyard_mux::tunnel`, both ends in this process): a TCP connection per
    /// channel through a forward of its own with the channel's weight, over the session striping
    /// by least-queued, to a sink on loopback.
    Tunnel,
}

impl Case {
    /// Every case, in the order the bench runs them.
    pub const ALL: [Self; 9] = [
        Self::Stripe,
        Self::StripeTls,
        Self::StripeTlsTask,
        Self::Earliest,
        Self::Pin,
        Self::H2,
        Self::Quic,
        Self::Mptcp,
        Self::Tunnel,
    ];

    /// The case's key, as a command line names it.
    pub fn key(self) -> &'static str {
        match self {
            Self::Stripe => "stripe",
            Self::StripeTls => "stripe-tls",
            Self::StripeTlsTask => "stripe-tls-task",
            Self::Earliest => "earliest",
            Self::Pin => "pin",
            Self::H2 => "h2",
            Self::Quic => "quic",
            Self::Mptcp => "mptcp",
            Self::Tunnel => "tunnel",
        }
    }

    /// What the case carries the channels over, in a sentence.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Stripe => "The session, striping, each frame on the least-queued connection",
            Self::StripeTls => "The same over TLS (rustls, TLS 1.3, AES-128-GCM on this machine)",
            Self::StripeTlsTask => {
                "The same over TLS, each connection's records sealed and opened on a task of its own instead of the session driver's (MuxConfig::tls_task)"
            }
            Self::Earliest => "The session, striping, each frame on the connection expected to deliver it first",
            Self::Pin => "The session, each channel pinned to one connection",
            Self::H2 => "HTTP/2 streams of one connection (h2)",
            Self::Quic => "QUIC streams of one connection (quinn)",
            Self::Mptcp => {
                "Linux MPTCP, one connection per channel with --connections subflows each (at most 9), in a namespace the bench makes (root), against raw TCP in that namespace"
            }
            Self::Tunnel => {
                "The tunnel's forwarders: a TCP connection per channel into a forward with the channel's weight, over the session (striping, least queued) to a TCP sink; --channels 1 is one large transfer"
            }
        }
    }

    /// The case's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stripe => "stripe (least queued)",
            Self::StripeTls => "stripe, TLS",
            Self::StripeTlsTask => "stripe, TLS on conn tasks",
            Self::Earliest => "stripe (earliest)",
            Self::Pin => "pin",
            Self::H2 => "HTTP/2 (h2), 1 conn",
            Self::Quic => "QUIC (quinn), 1 conn",
            Self::Mptcp => "MPTCP (kernel), 1 conn/channel",
            Self::Tunnel => "tunnel, TCP in and out",
        }
    }

    fn carrier(self) -> Carrier {
        match self {
            Self::Stripe => Carrier::Session(Scheme::Stripe(ConnChoice::LeastQueued), Wire::Plain),
            Self::StripeTls => Carrier::Session(Scheme::Stripe(ConnChoice::LeastQueued), Wire::Tls),
            Self::StripeTlsTask => Carrier::Session(Scheme::Stripe(ConnChoice::LeastQueued), Wire::TlsTask),
            Self::Earliest => {
                Carrier::Session(Scheme::Stripe(ConnChoice::EarliestDelivery { slack: 0.1 }), Wire::Plain)
            }
            Self::Pin => Carrier::Session(Scheme::Pin { hysteresis: 0.01 }, Wire::Plain),
            Self::H2 => Carrier::H2,
            Self::Quic => Carrier::Quic,
            Self::Mptcp => Carrier::Mptcp,
            Self::Tunnel => Carrier::Tunnel,
        }
    }
}

/// What the bench measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// Each round's measured time per case.
    pub measure: Duration,
    /// Raw TCP over m connections: mean bytes per second over the rounds.
    pub raw_rate: f64,
    /// Raw TCP's CPU seconds per byte (median round).
    pub raw_cost: f64,
    /// By case, in the order of the setup.
    pub cases: Vec<CaseRow>,
    /// The RMS_perc that pinning's assignment alone gives on equal connections (Iwashima §3.6).
    pub pin_model_rms: f64,
    /// Raw TCP over m connections in MPTCP's namespace, when MPTCP ran.
    pub ns_raw: Option<NsRaw>,
    /// Cases left out, each with why (MPTCP where the machine cannot run it).
    pub skipped: Vec<(Case, String)>,
}

/// Raw TCP ×m in the namespace MPTCP runs in: MPTCP's ceiling.
#[derive(Clone, Copy, Debug)]
pub struct NsRaw {
    /// Bytes per second over every round.
    pub rate: f64,
    /// CPU seconds per byte (median round).
    pub cost: f64,
    /// Its rate over raw TCP's on the machine's loopback in the same round (median round).
    pub over_raw: f64,
    /// Subflows that carried bytes, per MPTCP connection (mean over the rounds; `ss -tni`).
    pub subflows: f64,
}

impl Report {
    /// The throughput goal as measured: the best of our session's cases by its rate
    /// over raw TCP's, and the best by CPU time per byte (raw TCP's over the case's), each the
    /// median round's; `None` when no session case ran.
    pub fn best_scheduler(&self) -> Option<(f64, f64)> {
        let ours = || self.cases.iter().filter(|c| c.session.is_some());
        let rate = ours().map(|c| c.over_raw).reduce(f64::max)?;
        Some((rate, ours().map(|c| c.cost_over_raw).fold(0.0, f64::max)))
    }

    /// The weight-adherence goal as measured: each striping case of the session with its
    /// largest gap between a channel's share and its weight's, as a fraction. Pinning is left
    /// out: it holds shares by assignment, not by scheduling each frame.
    pub fn stripe_gaps(&self) -> Vec<(Case, f64)> {
        self.cases.iter().filter(|c| c.session.is_some() && c.case != Case::Pin).map(|c| (c.case, c.max_gap)).collect()
    }
}

/// One case's figures over the rounds.
#[derive(Clone, Debug)]
pub struct CaseRow {
    /// The case.
    pub case: Case,
    /// Bytes per second over every round.
    pub rate: f64,
    /// Its rate over raw TCP's in the same round (median round).
    pub over_raw: f64,
    /// The lowest and highest round's ratio to raw TCP.
    pub rounds_range: (f64, f64),
    /// CPU seconds per byte (median round).
    pub cost: f64,
    /// Raw TCP's CPU per byte over the case's, each round against its own raw run (median).
    pub cost_over_raw: f64,
    /// The largest gap between a channel's share and its weight's, as a fraction.
    pub max_gap: f64,
    /// Iwashima's RMS relative error of the shares (Eq. 7.2).
    pub rms_perc: f64,
    /// The session's own counters; `None` for the peers.
    pub session: Option<SessionStats>,
}

impl Report {
    /// MPTCP's row, when it ran.
    pub fn mptcp(&self) -> Option<&CaseRow> {
        self.cases.iter().find(|c| c.case == Case::Mptcp)
    }
}

/// What the session's schedulers report.
#[derive(Clone, Copy, Debug, Default)]
pub struct SessionStats {
    /// The most bytes a channel's receiver held for reordering.
    pub max_held: u64,
    /// Turns channels lost for want of bytes from the application.
    pub idle: u64,
    /// Turns channels lost for want of credit from the receiver.
    pub blocked: u64,
}

const CHUNK: usize = 256 << 10;

/// Runs the bench on a runtime of its own, advancing `progress` per case run (raw TCP and
/// each case, every round).
pub fn run(s: &Setup, progress: &dyn Progress) -> Result<Report, ExperimentError> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    Ok(runtime.block_on(bench(s, progress))?)
}

/// Whether a session's connections are plain TCP or TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wire {
    Plain,
    Tls,
    /// TLS, sealed and opened on each connection's own task.
    TlsTask,
}

/// What carries the channels in a case: our session with a scheduler, or a peer.
enum Carrier {
    Session(Scheme, Wire),
    H2,
    Quic,
    Mptcp,
    Tunnel,
}

async fn bench(a: &Setup, progress: &dyn Progress) -> Result<Report> {
    let weights: Vec<f64> = (0..a.channels).map(|i| a.ratio.powi(i as i32)).collect();
    let warm = Duration::from_millis(250);
    let rounds = a.rounds.max(1);
    let measure = Duration::from_secs_f64(a.seconds / rounds as f64);
    // By case: bytes per channel summed over the rounds, and each round's ratios to raw (of
    // rates, and of CPU time per byte).
    // MPTCP's namespace, made once; where it cannot be, the case is left out and said why.
    let mut cases = a.cases.clone();
    let mut skipped = Vec::new();
    let net = if cases.contains(&Case::Mptcp) {
        match Loopback::new(a.connections) {
            Ok(net) => Some(net),
            Err(e) => {
                cases.retain(|c| *c != Case::Mptcp);
                skipped.push((Case::Mptcp, e.to_string()));
                None
            }
        }
    } else {
        None
    };
    let n = cases.len();
    let mut bytes = vec![vec![0.0; weights.len()]; n];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut cost_ratios: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut costs: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut stats: Vec<Option<SessionStats>> = vec![None; n];
    let mut raw_rates = Vec::new();
    let mut raw_costs = Vec::new();
    let (mut ns_bytes, mut ns_costs, mut ns_ratios, mut ns_subflows) = (0.0, Vec::new(), Vec::new(), Vec::new());
    // A shared VM's speed drifts by a fifth within a minute: in rounds, every case meets it in
    // every mood, and each ratio is taken against raw TCP measured moments before.
    progress.stage("bench mux: cases run", (rounds * (n + 1 + usize::from(net.is_some()))) as u64);
    for _ in 0..rounds {
        let (raw, raw_cpu) = raw_streams(a.connections, warm, measure).await?;
        progress.advance(1);
        let raw_cost = raw_cpu / (raw * measure.as_secs_f64());
        raw_rates.push(raw);
        raw_costs.push(raw_cost);
        for (k, case) in cases.iter().enumerate() {
            // The ceiling this case's ratios are taken against.
            let (mut base_rate, mut base_cost) = (raw, raw_cost);
            let (got, cpu) = match case.carrier() {
                Carrier::Session(scheme, wire) => {
                    let r = session_case(a, scheme, wire, &weights, warm, measure).await?;
                    let acc = stats[k].get_or_insert_with(SessionStats::default);
                    acc.max_held = acc.max_held.max(r.max_held);
                    acc.idle += r.idle;
                    acc.blocked += r.blocked;
                    (r.bytes, r.cpu)
                }
                Carrier::H2 => h2_case(&weights, warm, measure).await?,
                Carrier::Quic => quic_case(&weights, warm, measure).await?,
                Carrier::Tunnel => tunnel_case(a, &weights, warm, measure).await?,
                Carrier::Mptcp => {
                    let net = net.as_ref().context("MPTCP's namespace")?;
                    let (got, cpu, _) = ns_streams(net, false, a.connections, warm, measure).await?;
                    progress.advance(1);
                    let total: f64 = got.iter().sum();
                    (base_rate, base_cost) = (total / measure.as_secs_f64(), cpu / total.max(1.0));
                    ns_bytes += total;
                    ns_costs.push(base_cost);
                    ns_ratios.push(base_rate / raw);
                    let (got, cpu, carrying) = ns_streams(net, true, weights.len(), warm, measure).await?;
                    ns_subflows.push(carrying as f64 / weights.len() as f64);
                    (got, cpu)
                }
            };
            for (sum, b) in bytes[k].iter_mut().zip(&got) {
                *sum += b;
            }
            let total: f64 = got.iter().sum();
            ratios[k].push(total / measure.as_secs_f64() / base_rate);
            let cost = cpu / total.max(1.0);
            costs[k].push(cost);
            cost_ratios[k].push(base_cost / cost);
            progress.advance(1);
        }
    }
    let total_time = measure.as_secs_f64() * rounds as f64;
    let rows = cases
        .iter()
        .enumerate()
        .map(|(k, case)| {
            let error = allocation(&bytes[k], &weights);
            CaseRow {
                case: *case,
                rate: bytes[k].iter().sum::<f64>() / total_time,
                over_raw: median_of_rounds(ratios[k].clone()),
                rounds_range: (
                    ratios[k].iter().copied().fold(f64::MAX, f64::min),
                    ratios[k].iter().copied().fold(0.0, f64::max),
                ),
                cost: median_of_rounds(costs[k].clone()),
                cost_over_raw: median_of_rounds(cost_ratios[k].clone()),
                max_gap: error.max_gap,
                rms_perc: error.rms_perc,
                session: stats[k],
            }
        })
        .collect();
    let ch: Vec<(u32, f64)> = weights.iter().enumerate().map(|(i, w)| (i as u32, *w)).collect();
    let conns: Vec<(usize, f64)> = (0..a.connections).map(|c| (c, 1.0)).collect();
    Ok(Report {
        measure,
        raw_rate: raw_rates.iter().sum::<f64>() / raw_rates.len() as f64,
        raw_cost: median_of_rounds(raw_costs),
        cases: rows,
        pin_model_rms: pin::model_error(&pin::lpt(&ch, &conns), &ch, &conns),
        ns_raw: net.is_some().then(|| NsRaw {
            rate: ns_bytes / total_time,
            cost: median_of_rounds(ns_costs),
            over_raw: median_of_rounds(ns_ratios),
            subflows: ns_subflows.iter().sum::<f64>() / ns_subflows.len().max(1) as f64,
        }),
        skipped,
    })
}

/// The report's one table: raw TCP, then each case.
pub const CASES: TableSpec = TableSpec::new(
    "cases",
    "Throughput, CPU per byte and weight adherence by case, against raw TCP in the same rounds",
    &[
        ColumnSpec::text("case"),
        ColumnSpec::num("rate", 0).header("rate").unit("MB/s").about("bytes delivered per second over every round"),
        ColumnSpec::num("over_raw", 2).header("×raw").about("rate over raw TCP's in the same round (median round)"),
        ColumnSpec::num("cpu", 0)
            .header("CPU")
            .unit("ns/KB")
            .about("the process's CPU time (user and kernel) per KB delivered (median round)"),
        ColumnSpec::num("cpu_over_raw", 2)
            .header("×raw CPU")
            .about("raw TCP's CPU per byte over the case's, each round against its own raw run (median)"),
        ColumnSpec::num("max_gap", 2)
            .header("max gap")
            .unit("pp")
            .about("the largest gap between a channel's share and its weight's, percentage points"),
        ColumnSpec::num("rms_perc", 1)
            .percent()
            .header("RMS_perc")
            .about("Iwashima's RMS relative error of the shares (Eq. 7.2)"),
        ColumnSpec::num("max_held", 0)
            .header("max held")
            .unit("KB")
            .about("the most bytes a channel's receiver held for reordering (the session only)"),
        ColumnSpec::int("idle").about("turns channels lost for want of bytes from the application (the session only)"),
        ColumnSpec::int("blocked").about("turns channels lost for want of credit from the receiver (the session only)"),
        ColumnSpec::num("rounds_low", 2).header("rounds low").about("the lowest round's ratio to raw TCP"),
        ColumnSpec::num("rounds_high", 2).header("rounds high").about("the highest round's ratio to raw TCP"),
    ],
);

/// What `bench mux` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "bench-mux",
    title: "The multiplexed session on loopback against m raw TCP streams, HTTP/2 (h2), QUIC (quinn) and Linux MPTCP, in one process and one run",
    tables: &[&CASES],
};

impl Report {
    /// The bench as a report: a row for raw TCP and one per case, the goals as measured and
    /// what each column means here.
    pub fn report(&self, s: &Setup) -> rep::Report {
        let mut r = rep::Report::new(&SPEC);
        let rounds = s.rounds.max(1);
        r.param("connections", s.connections, "TCP connections (m)")
            .param("channels", s.channels, "channels (n), weighted 1, r, r², …")
            .param("ratio", s.ratio, "ratio r between consecutive channels' weights")
            .param("seconds", s.seconds, "seconds each case is measured in all, split over the rounds")
            .param("rounds", rounds, "rounds of every case in turn")
            .param("window", s.window, "bytes of credit for the whole session")
            .param("lowat", s.lowat, "TCP_NOTSENT_LOWAT of each connection, bytes")
            .param(
                "repin_every",
                s.repin_every.map(|d| d.as_secs_f64()),
                "seconds between re-pinnings by measured rates (none: by weight only)",
            )
            .param("queue_frames", s.queue_frames, "frames queued per connection ahead of its socket")
            .param("frame", s.frame, "largest payload of a data frame, bytes");
        r.machine = Some(crate::machine::describe());
        let mut t = rep::Table::new(&CASES);
        // A raw TCP row: rate, its ratio, cost and its ratio; no weights, no session counters.
        let raw_row = |name: String, rate: f64, over: f64, cost: f64, cost_over: f64| {
            let mut row: Vec<Value> =
                vec![name.into(), (rate / 1e6).into(), over.into(), (cost * 1e12).into(), cost_over.into()];
            row.resize(CASES.columns.len(), Value::Null);
            row
        };
        t.push(raw_row(format!("raw TCP ×{}", s.connections), self.raw_rate, 1.0, self.raw_cost, 1.0));
        for c in &self.cases {
            if let (Case::Mptcp, Some(ns)) = (c.case, &self.ns_raw) {
                t.push(raw_row(
                    format!("raw TCP ×{}, MPTCP's namespace", s.connections),
                    ns.rate,
                    ns.over_raw,
                    ns.cost,
                    self.raw_cost / ns.cost,
                ));
            }
            let (held, idle, blocked) = match &c.session {
                Some(st) => ((st.max_held as f64 / 1e3).into(), st.idle.into(), st.blocked.into()),
                None => (Value::Null, Value::Null, Value::Null),
            };
            t.push(vec![
                c.case.name().into(),
                (c.rate / 1e6).into(),
                c.over_raw.into(),
                (c.cost * 1e12).into(),
                c.cost_over_raw.into(),
                (c.max_gap * 100.0).into(),
                c.rms_perc.into(),
                held,
                idle,
                blocked,
                c.rounds_range.0.into(),
                c.rounds_range.1.into(),
            ]);
        }
        t.note(format!(
            "loopback, sender and receiver in this process; {rounds} rounds of every case in turn, {:.2} s each; ×raw is the median round's ratio to raw TCP in the same round",
            self.measure.as_secs_f64()
        ));
        if let Some((ratio, cost_ratio)) = self.best_scheduler() {
            t.note(format!(
                "throughput: best scheduler {ratio:.2}× the raw ceiling by rate, {cost_ratio:.2}× by CPU time per byte (goal ≥ 0.90)"
            ));
            let gaps: Vec<String> =
                self.stripe_gaps().iter().map(|(case, gap)| format!("{} {:.2}", case.name(), gap * 100.0)).collect();
            t.note(format!("weight adherence, largest gap in percentage points (goal ≤ 1): {}", gaps.join(", ")));
        }
        if let (Some(mp), Some(ns)) = (self.mptcp(), &self.ns_raw) {
            t.note(format!(
                "MPTCP: {} kernel MPTCP connections, one per channel, {:.1} subflows carrying bytes each (of {}; ss -tni); ×raw against raw TCP ×{} in its namespace, the row above it",
                s.channels, ns.subflows, s.connections, s.connections
            ));
            t.note(self.mptcp_verdict(mp));
        }
        for (case, why) in &self.skipped {
            t.note(format!("{} not run: {why}", case.name()));
        }
        r.tables.push(t);
        r.note("CPU: the process's CPU time (user and kernel) per KB delivered; ×raw CPU is raw TCP's cost over the case's, each round against its own raw run")
            .note(format!(
                "pinning's assignment alone would give RMS_perc {:.1}% (Iwashima §3.6, equal connections); more is the connections' unequal rates or blocked turns",
                self.pin_model_rms * 100.0
            ))
            .note("idle / blocked: turns channels lost for want of bytes from the application / credit from the receiver")
            .note("HTTP/2: the same channels as streams of one connection (h2 crate, cleartext); it has no weights (RFC 9113 deprecated them), so its gap is what no scheduler gives")
            .note("QUIC: the same channels as unidirectional streams of one connection (quinn, TLS 1.3 with a self-signed certificate, UDP without GSO tuning); its streams share by round robin within a priority, no weights")
            .note("MPTCP: Linux's, one MPTCP connection per channel (a connection carrying every channel would need our framing over it), each with as many subflows as --connections from the namespace's m client addresses (path-manager `subflow` endpoints, set only in a namespace the bench makes); the kernel has no weights between connections, so its gap is what it gives without them, and its subflows' congestion control is uncoupled");
        r
    }

    /// Where the kernel's MPTCP does better than our session and where the weighted channels
    /// do, from this run's figures.
    fn mptcp_verdict(&self, mp: &CaseRow) -> String {
        let ours = || self.cases.iter().filter(|c| c.session.is_some());
        let Some(rate) = ours().map(|c| c.over_raw).reduce(f64::max) else {
            return format!(
                "MPTCP: {:.2}× its raw TCP by rate, {:.2}× by CPU per byte, largest gap {:.1} points (no session case ran to compare)",
                mp.over_raw,
                mp.cost_over_raw,
                mp.max_gap * 100.0
            );
        };
        let cost = ours().map(|c| c.cost_over_raw).fold(0.0, f64::max);
        let gap = ours().filter(|c| c.case != Case::Pin).map(|c| c.max_gap).reduce(f64::min);
        let side = |better: bool| if better { "MPTCP" } else { "the session" };
        format!(
            "MPTCP against the session: rate {:.2}× raw against {rate:.2}× (better: {}); CPU per byte {:.2}× raw's against {cost:.2}× (better: {}); weights: largest gap {:.1} points against striping's {} (better: {})",
            mp.over_raw,
            side(mp.over_raw > rate),
            mp.cost_over_raw,
            side(mp.cost_over_raw > cost),
            mp.max_gap * 100.0,
            gap.map_or("—".to_string(), |g| format!("{:.1}", g * 100.0)),
            gap.map_or("—", |g| side(mp.max_gap < g)),
        )
    }
}

/// Bytes per second that `m` plain TCP streams carry from a writer to a reader that discards.
async fn raw_streams(m: usize, warm: Duration, measure: Duration) -> Result<(f64, f64)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sink = {
        let received = Arc::clone(&received);
        tokio::spawn(async move {
            let mut readers = Vec::new();
            for _ in 0..m {
                let (mut s, _) = listener.accept().await?;
                let received = Arc::clone(&received);
                readers.push(tokio::spawn(async move {
                    let mut buf = vec![0u8; CHUNK];
                    while let Ok(n) = s.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        received.fetch_add(n as u64, Ordering::Relaxed);
                    }
                }));
            }
            for r in readers {
                let _ = r.await;
            }
            anyhow::Ok(())
        })
    };
    let mut writers = Vec::new();
    for _ in 0..m {
        let mut s = TcpStream::connect(addr).await?;
        let stop = Arc::clone(&stop);
        writers.push(tokio::spawn(async move {
            let chunk = vec![7u8; CHUNK];
            while !stop.load(Ordering::Relaxed) {
                if s.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        }));
    }
    tokio::time::sleep(warm).await;
    let (t0, b0) = (Instant::now(), received.load(Ordering::Relaxed));
    let cpu = cpu_over(measure).await;
    let rate = (received.load(Ordering::Relaxed) - b0) as f64 / t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let _ = w.await;
    }
    let _ = sink.await;
    Ok((rate, cpu))
}

struct SessionRun {
    /// Bytes each channel delivered in the measured window.
    bytes: Vec<f64>,
    max_held: u64,
    idle: u64,
    blocked: u64,
    /// CPU seconds the process spent in the measured window.
    cpu: f64,
}

/// The session's settings for a case, from the bench's.
fn session_config(a: &Setup, scheme: Scheme) -> MuxConfig {
    MuxConfig {
        key: b"switchyard bench mux, loopback only".to_vec(),
        connections: a.connections,
        send: SendConfig { scheme, max_frame: a.frame, ..SendConfig::default() },
        recv: RecvConfig { window: a.window, ..Default::default() },
        notsent_lowat: a.lowat,
        queue_frames: a.queue_frames,
        rebalance_every: a.repin_every.unwrap_or(Duration::MAX),
        ..MuxConfig::default()
    }
}

/// The tunnel carrying one TCP connection per channel: the far end serving the session, a
/// forward per channel at the near end with the channel's weight, each to a sink of its own,
/// and a writer per connection that keeps its socket full. What each sink received, and the
/// process's CPU time (the writers, both ends of the tunnel and the sinks).
async fn tunnel_case(a: &Setup, weights: &[f64], warm: Duration, measure: Duration) -> Result<(Vec<f64>, f64)> {
    use switchyard_mux::tunnel::{self, Forward};
    let config = session_config(a, Scheme::Stripe(ConnChoice::LeastQueued));
    let log: tunnel::Log = Arc::new(|_| {});
    let mut listener = Listener::bind(SocketAddr::from(([127, 0, 0, 1], 0)), config.clone()).await?;
    let addr = listener.local_addr();
    let mut tasks = Vec::new();
    {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            if let Some(session) = listener.accept().await {
                tunnel::serve(session, Vec::new(), log).await;
            }
        }));
    }
    let session = Session::connect(addr, config).await?;
    let counters: Arc<Vec<AtomicU64>> = Arc::new(weights.iter().map(|_| AtomicU64::new(0)).collect());
    for (i, w) in weights.iter().enumerate() {
        let sink = TcpListener::bind("127.0.0.1:0").await?;
        let target = sink.local_addr()?.to_string();
        let counters = Arc::clone(&counters);
        tasks.push(tokio::spawn(async move {
            let Ok((mut s, _)) = sink.accept().await else { return };
            let mut buf = vec![0u8; CHUNK];
            while let Ok(n @ 1..) = s.read(&mut buf).await {
                counters[i].fetch_add(n as u64, Ordering::Relaxed);
            }
        }));
        let forward = Forward { local: SocketAddr::from(([127, 0, 0, 1], 0)), target, weight: *w };
        let near = tunnel::bind(&forward)?;
        let local = near.local_addr()?;
        let (session, log) = (session.clone(), log.clone());
        tasks.push(tokio::spawn(async move {
            let _ = tunnel::forward_on(near, session, forward, log).await;
        }));
        let mut s = TcpStream::connect(local).await?;
        tasks.push(tokio::spawn(async move {
            let chunk = vec![7u8; CHUNK];
            while s.write_all(&chunk).await.is_ok() {}
        }));
    }
    let (got, cpu) = window(&counters, warm, measure).await;
    // The writers' and sinks' sockets go with their tasks: each connection through the
    // tunnel is reset or ends, and its forwarder with it.
    for t in &tasks {
        t.abort();
    }
    Ok((got, cpu))
}

async fn session_case(
    a: &Setup,
    scheme: Scheme,
    wire: Wire,
    weights: &[f64],
    warm: Duration,
    measure: Duration,
) -> Result<SessionRun> {
    let config = session_config(a, scheme);
    let (server_config, client_config) = match wire {
        Wire::Plain => (config.clone(), config),
        Wire::Tls | Wire::TlsTask => {
            let (server, client) = self_signed_tls()?;
            let config = MuxConfig { tls_task: wire == Wire::TlsTask, ..config };
            (MuxConfig { tls: Some(server), ..config.clone() }, MuxConfig { tls: Some(client), ..config })
        }
    };
    let mut listener = Listener::bind(SocketAddr::from(([127, 0, 0, 1], 0)), server_config).await?;
    let addr = listener.local_addr();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let Some(session) = listener.accept().await else { return };
        let _ = tx.send(session.clone());
        while let Some(mut ch) = session.accept().await {
            tokio::spawn(async move { while let Ok(Some(_)) = ch.recv().await {} });
        }
    });
    let session = Session::connect(addr, client_config).await?;
    let mut channels = Vec::new();
    for w in weights {
        channels.push(Arc::new(session.open(*w, true).await?));
    }
    let receiver = rx.await.context("the session reached the server")?;
    // Two writers per channel, so that every channel always has bytes waiting.
    let chunk = Bytes::from(vec![7u8; CHUNK]);
    let mut writers = Vec::new();
    for ch in &channels {
        for _ in 0..2 {
            let (ch, chunk) = (Arc::clone(ch), chunk.clone());
            writers.push(tokio::spawn(async move { while ch.send(chunk.clone()).await.is_ok() {} }));
        }
    }
    tokio::time::sleep(warm).await;
    let before = receiver.report().await?;
    let sent_before = session.report().await?;
    let cpu = cpu_over(measure).await;
    let after = receiver.report().await?;
    let sent_after = session.report().await?;
    for w in &writers {
        w.abort();
    }
    server.abort();
    let delivered =
        |r: &SessionReport, id: u32| r.channels.iter().find(|c| c.id == id).map_or(0, |c| c.received.delivered_bytes);
    let turns = |r: &SessionReport| -> (u64, u64) {
        r.channels.iter().fold((0, 0), |(i, b), c| (i + c.sent.idle_turns, b + c.sent.blocked_turns))
    };
    let bytes = channels.iter().map(|c| (delivered(&after, c.id()) - delivered(&before, c.id())) as f64).collect();
    let max_held = after.channels.iter().map(|c| c.received.max_held_bytes).max().unwrap_or(0);
    let (i0, b0) = turns(&sent_before);
    let (i1, b1) = turns(&sent_after);
    Ok(SessionRun { bytes, max_held, idle: i1 - i0, blocked: b1 - b0, cpu })
}

/// A server's and a client's TLS settings for a fresh self-signed certificate for localhost.
fn self_signed_tls() -> Result<(switchyard_mux::Tls, switchyard_mux::Tls)> {
    Ok(SelfSigned::generate(&["localhost".into()])?.pair("localhost")?)
}

/// The peer: the same channels as HTTP/2 streams over one TCP connection (cleartext h2), each a
/// POST whose body never ends. Returns the bytes each stream delivered in the measured window.
async fn h2_case(weights: &[f64], warm: Duration, measure: Duration) -> Result<(Vec<f64>, f64)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let counters: Arc<Vec<AtomicU64>> = Arc::new(weights.iter().map(|_| AtomicU64::new(0)).collect());
    let c = Arc::clone(&counters);
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await?;
        let mut conn = h2::server::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(16 << 20)
            .handshake::<_, Bytes>(tcp)
            .await?;
        while let Some(Ok((req, _respond))) = conn.accept().await {
            let i: usize = req.uri().path().trim_start_matches('/').parse().unwrap_or(0);
            let c = Arc::clone(&c);
            let mut body = req.into_body();
            tokio::spawn(async move {
                while let Some(Ok(data)) = body.data().await {
                    c[i].fetch_add(data.len() as u64, Ordering::Relaxed);
                    let _ = body.flow_control().release_capacity(data.len());
                }
            });
        }
        anyhow::Ok(())
    });
    let tcp = TcpStream::connect(addr).await?;
    let (client, connection) = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(16 << 20)
        .handshake::<_, Bytes>(tcp)
        .await?;
    tokio::spawn(connection);
    let chunk = Bytes::from(vec![7u8; CHUNK]);
    let mut writers = Vec::new();
    for i in 0..weights.len() {
        let mut client = client.clone().ready().await?;
        let request = http::Request::post(format!("http://bench/{i}")).body(())?;
        let (_response, mut stream) = client.send_request(request, false)?;
        let chunk = chunk.clone();
        writers.push(tokio::spawn(async move {
            loop {
                stream.reserve_capacity(chunk.len());
                let Some(Ok(n)) = std::future::poll_fn(|cx| stream.poll_capacity(cx)).await else { return };
                if n == 0 || stream.send_data(chunk.slice(..n.min(chunk.len())), false).is_err() {
                    return;
                }
            }
        }));
    }
    let delivered = window(&counters, warm, measure).await;
    for w in writers {
        w.abort();
    }
    server.abort();
    Ok(delivered)
}

/// The QUIC peer: the same channels as unidirectional streams of one QUIC connection (quinn),
/// each opened with its channel number as its first byte. Windows as large as the HTTP/2
/// peer's. Returns the bytes each stream delivered in the measured window.
async fn quic_case(weights: &[f64], warm: Duration, measure: Duration) -> Result<(Vec<f64>, f64)> {
    use quinn::VarInt;
    let certified = SelfSigned::generate(&["localhost".into()])?;
    let (cert, key) = (certified.cert.clone(), certified.key());
    let transport = || {
        let mut t = quinn::TransportConfig::default();
        t.stream_receive_window(VarInt::from_u32(1 << 20))
            .receive_window(VarInt::from_u32(16 << 20))
            .send_window(16 << 20)
            .max_concurrent_uni_streams(VarInt::from_u32(weights.len() as u32 + 1));
        Arc::new(t)
    };
    let mut server_config = quinn::ServerConfig::with_single_cert(vec![cert.clone()], key)?;
    server_config.transport_config(transport());
    let server = quinn::Endpoint::server(server_config, SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let addr = server.local_addr()?;
    let counters: Arc<Vec<AtomicU64>> = Arc::new(weights.iter().map(|_| AtomicU64::new(0)).collect());
    let c = Arc::clone(&counters);
    let accept = server.clone();
    let sink = tokio::spawn(async move {
        let Some(incoming) = accept.accept().await else { return anyhow::Ok(()) };
        let conn = incoming.await?;
        while let Ok(mut stream) = conn.accept_uni().await {
            let c = Arc::clone(&c);
            tokio::spawn(async move {
                let mut index = [0u8; 1];
                if stream.read_exact(&mut index).await.is_err() {
                    return;
                }
                let Some(counter) = c.get(usize::from(index[0])) else { return };
                while let Ok(Some(chunk)) = stream.read_chunk(CHUNK, false).await {
                    counter.fetch_add(chunk.bytes.len() as u64, Ordering::Relaxed);
                }
            });
        }
        anyhow::Ok(())
    });
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert)?;
    let mut client_config = quinn::ClientConfig::with_root_certificates(Arc::new(roots))?;
    client_config.transport_config(transport());
    let mut client = quinn::Endpoint::client(SocketAddr::from(([127, 0, 0, 1], 0)))?;
    client.set_default_client_config(client_config);
    let conn = client.connect(addr, "localhost")?.await.context("connecting over QUIC")?;
    let chunk = Bytes::from(vec![7u8; CHUNK]);
    let mut writers = Vec::new();
    for i in 0..weights.len() {
        let mut stream = conn.open_uni().await?;
        stream.write_all(&[i as u8]).await?;
        let chunk = chunk.clone();
        writers.push(tokio::spawn(async move { while stream.write_chunk(chunk.clone()).await.is_ok() {} }));
    }
    let delivered = window(&counters, warm, measure).await;
    for w in writers {
        w.abort();
    }
    conn.close(VarInt::from_u32(0), b"done");
    client.close(VarInt::from_u32(0), b"done");
    server.close(VarInt::from_u32(0), b"done");
    sink.abort();
    Ok(delivered)
}

/// `k` streams in MPTCP's namespace, MPTCP or plain TCP, each from a writer to a reader that
/// discards, opened with its index as its first byte. Returns the bytes each delivered in the
/// measured window, the CPU time meanwhile, and the MPTCP subflows that carried bytes (from
/// `ss`, read before the streams end; 0 for plain TCP).
///
/// The sockets are made by a thread inside the namespace (a socket belongs to the namespace it
/// was made in, whatever thread drives it later) and driven by this runtime. Plain TCP spreads
/// its streams over the client addresses as MPTCP's subflows are spread; MPTCP starts every
/// connection from the first address and the kernel joins a subflow from each other one.
async fn ns_streams(
    net: &Loopback,
    use_mptcp: bool,
    k: usize,
    warm: Duration,
    measure: Duration,
) -> Result<(Vec<f64>, f64, usize)> {
    let made = net.ns.spawn(move || -> std::io::Result<_> {
        let listener = mptcp::listener(SocketAddr::from(([10, 77, 1, 1], 0)), use_mptcp)?;
        let sockets = (0..k).map(|_| mptcp::stream_socket(use_mptcp)).collect::<std::io::Result<Vec<_>>>()?;
        Ok((listener, sockets))
    });
    let (listener, sockets) =
        made.join().map_err(|_| anyhow::anyhow!("the thread making MPTCP's sockets panicked"))???;
    let listener = TcpListener::from_std(listener)?;
    let addr = listener.local_addr()?;
    let counters: Arc<Vec<AtomicU64>> = Arc::new((0..k).map(|_| AtomicU64::new(0)).collect());
    let c = Arc::clone(&counters);
    let sink = tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let c = Arc::clone(&c);
            tokio::spawn(async move {
                let mut index = [0u8; 1];
                if s.read_exact(&mut index).await.is_err() {
                    return;
                }
                let Some(counter) = c.get(usize::from(index[0])) else { return };
                let mut buf = vec![0u8; CHUNK];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                }
            });
        }
    });
    let chunk = Bytes::from(vec![7u8; CHUNK]);
    let mut writers = Vec::new();
    for (i, socket) in sockets.into_iter().enumerate() {
        let socket = tokio::net::TcpSocket::from_std_stream(socket);
        let from = if use_mptcp { net.clients[0] } else { net.clients[i % net.clients.len()] };
        socket.bind(SocketAddr::from((from, 0)))?;
        let mut s = socket.connect(addr).await.with_context(|| format!("connecting from {from} to {addr}"))?;
        s.write_all(&[i as u8]).await?;
        let chunk = chunk.clone();
        writers.push(tokio::spawn(async move { while s.write_all(&chunk).await.is_ok() {} }));
    }
    let (delivered, cpu) = window(&counters, warm, measure).await;
    let carrying = if use_mptcp {
        let ns = &net.ns;
        let clients = &net.clients;
        mptcp::subflows(ns)?
            .iter()
            .filter(|f| {
                f.mptcp && f.bytes_acked > 0 && clients.iter().any(|a| f.local.ip() == std::net::IpAddr::V4(*a))
            })
            .count()
    } else {
        0
    };
    for w in writers {
        w.abort();
    }
    sink.abort();
    Ok((delivered, cpu, carrying))
}

/// What each counter gained over `measure`, after `warm`, and the CPU time the process spent
/// meanwhile.
async fn window(counters: &[AtomicU64], warm: Duration, measure: Duration) -> (Vec<f64>, f64) {
    tokio::time::sleep(warm).await;
    let before: Vec<u64> = counters.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let cpu = cpu_over(measure).await;
    (counters.iter().zip(before).map(|(c, b)| (c.load(Ordering::Relaxed) - b) as f64).collect(), cpu)
}

/// Waits `measure` and returns the CPU seconds the whole process (sender, receiver and the
/// kernel's work on their behalf) spent meanwhile. Every case keeps both cores busy, so its
/// CPU time per byte is its cost, and a ratio of costs is steadier than a ratio of rates on a
/// VM whose neighbours take time from it.
async fn cpu_over(measure: Duration) -> f64 {
    let before = process_cpu();
    tokio::time::sleep(measure).await;
    process_cpu() - before
}
