//! `switchyard bench mux`: the session's throughput, weight adherence and memory on loopback,
//! against m raw parallel TCP streams (the ceiling) measured in the same run.

use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::mux::{Case, Setup, run as bench};
use switchyard_mux::{MuxConfig, SendConfig};

/// The multiplexed session on loopback: m raw TCP streams (the ceiling), then the session's
/// schedulers carrying n backlogged channels with Iwashima's weights (1, 0.8, 0.8², …), and the
/// same channels as HTTP/2 streams of one connection (the h2 crate) and as QUIC streams of one
/// connection (quinn), all in one process and one run.
///
/// For each scheduler: aggregate throughput and its ratio to the raw ceiling; weight
/// adherence (the largest gap between a channel's share and its weight's, in percentage
/// points, and the RMS relative error, Iwashima Eq 7.2); the most bytes any channel's receiver
/// held for reordering; and the turns channels lost for want of data or credit.
///
/// Example:
///
///   switchyard bench mux --connections 5 --channels 15 --seconds 3
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct MuxBench {
    /// TCP connections (m).
    #[arg(long, default_value_t = 5)]
    connections: usize,

    /// Channels (n), weighted 1, 0.8, 0.8², …
    #[arg(long, default_value_t = 15)]
    channels: usize,

    /// Ratio between consecutive channels' weights.
    #[arg(long, default_value_t = 0.8)]
    ratio: f64,

    /// Seconds each case is measured for in all, split over the rounds (each part after a
    /// quarter second of warm-up).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,

    /// Rounds of every case in turn.
    #[arg(long, default_value_t = 3)]
    rounds: usize,

    /// Frames of credit for the whole session, shared among channels by weight.
    #[arg(long, default_value_t = switchyard_mux::RecvConfig::default().window)]
    window: u64,

    /// TCP_NOTSENT_LOWAT of each connection, in bytes.
    #[arg(long, default_value_t = MuxConfig::default().notsent_lowat)]
    lowat: u32,

    /// Seconds between re-pinnings by measured rates (pinning; 0: pin by weight only, as the
    /// thesis does).
    #[arg(long, default_value_t = MuxConfig::default().rebalance_every.as_secs_f64())]
    repin_every: f64,

    /// Frames queued per connection ahead of its socket.
    #[arg(long, default_value_t = MuxConfig::default().queue_frames)]
    queue_frames: usize,

    /// Largest payload of a data frame, in bytes.
    #[arg(long, default_value_t = SendConfig::default().max_frame)]
    frame: usize,

    /// Which cases to run besides raw TCP (comma-separated), for a shorter run or a profile
    /// of one carrier.
    #[arg(long, value_delimiter = ',', value_parser = case_parser(), default_value = "stripe,stripe-tls,earliest,pin,h2,quic")]
    cases: Vec<Case>,
}

/// `--cases`'s names, each with its description in `--help`.
fn case_parser() -> impl clap::builder::TypedValueParser<Value = Case> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(Case::ALL.map(|c| PossibleValue::new(c.key()).help(c.describe())))
        .map(|name| Case::ALL.into_iter().find(|c| c.key() == name).expect("one of the possible values"))
}

pub(crate) fn run(a: &MuxBench) -> Result<()> {
    let setup = Setup {
        connections: a.connections,
        channels: a.channels,
        ratio: a.ratio,
        seconds: a.seconds,
        rounds: a.rounds,
        window: a.window,
        lowat: a.lowat,
        repin_every: (a.repin_every > 0.0).then(|| Duration::from_secs_f64(a.repin_every)),
        queue_frames: a.queue_frames,
        frame: a.frame,
        cases: a.cases.clone(),
    };
    let mut out = std::io::stdout().lock();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    writeln!(
        out,
        "loopback, {cores} cores, sender and receiver in this process; {} connections, {} channels (weights {}^i); \
         {} rounds of every case in turn, {:.2} s each; ×raw is the median round's ratio to raw TCP in the same round\n",
        a.connections,
        a.channels,
        a.ratio,
        a.rounds.max(1),
        a.seconds / a.rounds.max(1) as f64
    )?;
    let r = bench(&setup)?;
    writeln!(
        out,
        "{:<22} {:>8} {:>6} {:>10} {:>9} {:>13} {:>9} {:>12} {:>8} {:>8}",
        "case", "MB/s", "×raw", "CPU ns/KB", "×raw CPU", "max gap (pp)", "RMS_perc", "max held KB", "idle", "blocked"
    )?;
    writeln!(
        out,
        "{:<22} {:>8.0} {:>6.2} {:>10.0} {:>9.2}",
        format!("raw TCP ×{}", a.connections),
        r.raw_rate / 1e6,
        1.0,
        r.raw_cost * 1e12,
        1.0
    )?;
    for c in &r.cases {
        let name = c.case.name();
        let line = format!(
            "{:<22} {:>8.0} {:>6.2} {:>10.0} {:>9.2} {:>13.2} {:>8.1}%",
            name,
            c.rate / 1e6,
            c.over_raw,
            c.cost * 1e12,
            c.cost_over_raw,
            c.max_gap * 100.0,
            c.rms_perc * 100.0
        );
        let (lo, hi) = c.rounds_range;
        match &c.session {
            Some(s) => {
                writeln!(
                    out,
                    "{line} {:>12.0} {:>8} {:>8}   (rounds {lo:.2}–{hi:.2})",
                    s.max_held as f64 / 1e3,
                    s.idle,
                    s.blocked
                )?;
            }
            None => writeln!(out, "{line} {:>30}   (rounds {lo:.2}–{hi:.2})", "")?,
        }
    }
    writeln!(out)?;
    if let Some((ratio, cost_ratio)) = r.best_scheduler() {
        writeln!(
            out,
            "throughput: best scheduler {ratio:.2}× the raw ceiling by rate, {cost_ratio:.2}× by CPU time per byte (goal ≥ 0.90)"
        )?;
        let gaps: Vec<String> =
            r.stripe_gaps().iter().map(|(case, gap)| format!("{} {:.2}", case.name(), gap * 100.0)).collect();
        writeln!(out, "weight adherence, largest gap in percentage points (goal ≤ 1): {}", gaps.join(", "))?;
    }
    for line in [
        "CPU ns/KB: the process's CPU time (user and kernel) per KB delivered; ×raw CPU is raw TCP's cost over the case's, each round against its own raw run",
        &format!(
            "pinning's assignment alone would give RMS_perc {:.1}% (Iwashima §3.6, equal connections); more is the connections' unequal rates or blocked turns",
            r.pin_model_rms * 100.0
        ),
        "idle / blocked: turns channels lost for want of bytes from the application / credit from the receiver",
        "HTTP/2: the same channels as streams of one connection (h2 crate, cleartext); it has no weights (RFC 9113 deprecated them), so its gap is what no scheduler gives",
        "QUIC: the same channels as unidirectional streams of one connection (quinn, TLS 1.3 with a self-signed certificate, UDP without GSO tuning); its streams share by round robin within a priority, no weights",
    ] {
        writeln!(out, "{line}")?;
    }
    Ok(())
}
