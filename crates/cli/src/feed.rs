//! `switchyard feed`: sends a capture to an inspector on this host through shared-memory rings
//! (`switchyard_runtime::feed`).

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use switchyard_core::Policy;
use switchyard_runtime::feed::{self, FeedStats};

/// Send a capture to an inspector on this host through shared-memory rings (Linux).
///
/// Start the inspector first (`switchyard inspect --feed PATH`); it says how many rings it
/// wants, one per worker. The feeder makes them (sealed memfd rings, XenSocket's design: see
/// `switchyard bench shm`), hands them over the socket at PATH, and writes every frame of the
/// capture to the ring its connection is placed on by a core policy that places by the flow
/// alone (both directions of a connection on one ring). A full ring makes the feeder wait, so
/// nothing is lost; the inspector's verdicts are those it gives the file.
///
/// The capture may be a file or `-`, standard input, so a capture tool can feed an inspector
/// as it captures.
///
/// Examples:
///
///   switchyard inspect --feed /tmp/dpi.sock --workers 2 &
///   switchyard feed data/traces/labelled.pcap --to /tmp/dpi.sock
///
///   tcpdump -i eth0 -w - | switchyard feed - --to /tmp/dpi.sock
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct FeedArgs {
    /// The capture (pcap or pcapng); `-` reads standard input.
    capture: PathBuf,
    /// The inspector's socket: the PATH of its `--feed PATH`.
    #[arg(long, value_name = "PATH")]
    to: PathBuf,
    /// How connections are shared between the rings: a policy that places by the flow alone
    /// (mod-n, hrw, hrw-classic, jump, maglev).
    #[arg(long, default_value = "hrw")]
    policy: String,
}

pub(crate) fn run(a: &FeedArgs) -> Result<()> {
    let policy: Policy = a.policy.parse()?;
    let input: Box<dyn Read + Send> = if a.capture.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        let file = File::open(&a.capture).with_context(|| format!("opening {}", a.capture.display()))?;
        Box::new(BufReader::with_capacity(1 << 20, file))
    };
    let rings = feed::connect(&a.to)?;
    let n = rings.len();
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("a valid template"));
    // A live feed may bring few frames a second: the clock goes on between reports.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar.set_message(format!("waiting for frames; {n} ring{} to the inspector", plural(n)));
    let show = |s: &FeedStats| {
        bar.set_message(format!("{} frames, {:.1} MB fed to {n} ring{}", s.frames, s.bytes as f64 / 1e6, plural(n)));
        bar.tick();
    };
    let stats = feed::feed(input, rings, policy, &mut |s| show(s))
        .with_context(|| format!("feeding {} to {}", a.capture.display(), a.to.display()))?;
    bar.finish_and_clear();
    let mut out = std::io::stdout().lock();
    let shares: Vec<String> = stats.per_ring.iter().map(u64::to_string).collect();
    writeln!(
        out,
        "fed {} frames ({:.1} MB) to {n} ring{} by {}: {} each; {} not TCP or UDP (ring 0)",
        stats.frames,
        stats.bytes as f64 / 1e6,
        plural(n),
        policy.name(),
        shares.join(" / "),
        stats.undecoded
    )?;
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
