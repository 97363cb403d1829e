//! `switchyard reproduce iwashima-m`'s options; the run and its report are
//! `switchyard_experiments::iwashima`'s.

use anyhow::Result;
use switchyard_experiments::iwashima::{self, Setup};

/// The schemes `reproduce iwashima-m --schemes` can run.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MuxScheme {
    /// Striping, each frame on the least-queued connection (the thesis's).
    Stripe,
    /// Striping onto the connection expected to deliver first (beyond the source).
    Earliest,
    /// Pinning by weight, once (the thesis's).
    Pin,
    /// Pinning, re-pinned every second by measured connection rates.
    PinRates,
    /// Pinning, re-pinned every second by rates and by the service each channel got.
    PinService,
    /// Linux MPTCP, the kernel's peer: one MPTCP connection per channel, each with m subflows
    /// (m ≤ 9; larger m are left out with a note). The sending namespace gets m addresses, the
    /// first where connections start and the others path-manager `subflow` endpoints (set only
    /// in the reproduction's namespaces); the receiving side needs one address, since subflows
    /// already differ by source address. Where MPTCP is off or missing, the report says so and
    /// the other schemes run.
    Mptcp,
}

impl MuxScheme {
    fn of(self) -> iwashima::MuxScheme {
        match self {
            Self::Stripe => iwashima::MuxScheme::Stripe,
            Self::Earliest => iwashima::MuxScheme::Earliest,
            Self::Pin => iwashima::MuxScheme::Pin,
            Self::PinRates => iwashima::MuxScheme::PinRates,
            Self::PinService => iwashima::MuxScheme::PinService,
            Self::Mptcp => iwashima::MuxScheme::Mptcp,
        }
    }
}

/// `reproduce iwashima-m`'s options.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The connection counts to run.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 2, 5, 10, 14])]
    pub(crate) m: Vec<usize>,

    /// Seconds measured per run.
    #[arg(long, default_value_t = 10.0)]
    pub(crate) seconds: f64,

    /// Size each connection's send buffer by the thesis's Eq 7.5, max(5000, B·RTT/(m+2)),
    /// instead of leaving it to the kernel.
    #[arg(long)]
    pub(crate) eq75: bool,

    /// The schemes to run.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [MuxScheme::Stripe, MuxScheme::Earliest, MuxScheme::Pin, MuxScheme::PinRates, MuxScheme::PinService, MuxScheme::Mptcp])]
    pub(crate) schemes: Vec<MuxScheme>,

    #[command(flatten)]
    pub(crate) output: crate::print::Output,
}

pub(crate) fn run(a: &Args) -> Result<()> {
    let setup = Setup {
        ms: a.m.clone(),
        seconds: a.seconds,
        eq75: a.eq75,
        schemes: a.schemes.iter().map(|s| s.of()).collect(),
    };
    let runs = iwashima::run(&setup, &crate::print::Bar::new())?;
    a.output.emit(&iwashima::report(&setup, &runs))
}
