//! `switchyard bench mux`'s options; the run and its report are
//! `switchyard_experiments::bench::mux`'s.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use switchyard_experiments::bench::mux::{Case, Setup, run as bench};
use switchyard_mux::MuxConfig;

/// The multiplexed session on loopback: m raw TCP streams (the ceiling), then the session's
/// schedulers carrying n backlogged channels with Iwashima's weights (1, 0.8, 0.8², …), and the
/// same channels as HTTP/2 streams of one connection (the h2 crate) and as QUIC streams of one
/// connection (quinn), all in one process and one run; and Linux MPTCP, the kernel's peer.
///
/// MPTCP: one kernel MPTCP connection per channel (one connection carrying every channel
/// would need our framing over it), each with as many subflows as --connections (at most 9:
/// the kernel joins at most 8 to the first). Its subflows need several addresses, and the path
/// manager's endpoints (`ip mptcp endpoint`, `ip mptcp limits`) are a whole namespace's
/// settings, so the case runs in a namespace the bench makes and deletes (never the machine's
/// own): its loopback with m client addresses, sockets made by a thread inside it and driven
/// by the same runtime, beside raw TCP ×m in that namespace, which its ×raw is taken against.
/// It needs root and MPTCP (sysctl net.mptcp.enabled = 1); where either is missing, the
/// report says why in one line and the other cases run.
///
/// The tunnel (--cases tunnel): each channel a TCP connection into a forward of its own with the
/// channel's weight, carried by both ends of `switchyard tunnel` in this process to a TCP sink;
/// its ×raw is the whole tunnel's (two more sockets a byte) against raw TCP. `--channels 1
/// --cases tunnel` is one large transfer.
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

    /// Bytes of credit for the whole session (payload held or unread by the receiver), shared
    /// among channels by weight. Counted in bytes since protocol version 4, so a larger
    /// --frame does not raise the memory this bounds.
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

    /// Largest payload of a data frame, in bytes (the session's default, 16 KiB; 65536 with
    /// --lowat 65536 measures the larger frames that cost less CPU a byte but hold the weights
    /// less well: see `tunnel connect --help`).
    #[arg(long, default_value_t = MuxConfig::default().send.max_frame)]
    frame: usize,

    /// Which cases to run besides raw TCP (comma-separated), for a shorter run or a profile
    /// of one carrier.
    #[arg(long, value_delimiter = ',', value_parser = case_parser(), default_value = "stripe,stripe-tls,stripe-tls-task,earliest,pin,h2,quic,mptcp,tunnel")]
    cases: Vec<Case>,

    #[command(flatten)]
    output: crate::print::Output,
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
    let report = bench(&setup, &crate::print::Bar::new())?.report(&setup);
    a.output.emit(&report)
}
