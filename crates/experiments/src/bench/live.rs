//! Live inspection on a test bed: a veth pair in a network namespace made for the run, a capture
//! replayed into one end by tcpreplay (Debian's, from `bench/install-peers.sh`), and
//! `inspect_live` reading the other. [`clean_rates`] finds, for 1 and 2 workers, the highest
//! replay rate at which the rings dropped nothing (`switchyard bench inspect --live`).
//!
//! Needs root (namespaces, raw sockets), `ip` and `tcpreplay`: [`Veth::new`] says plainly what
//! is missing, so that tests and benchmarks can skip with a visible message.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use switchyard_ingest::ConnConfig;
use switchyard_ingest::live::RingConfig;
use switchyard_runtime::inspect::Inspector;
use switchyard_runtime::live::{LiveCounts, LiveReport, inspect_live};

use super::peers::found;
use crate::report::{Progress, Report, Table, Value};

/// A network namespace holding a veth pair: frames sent into [`Veth::SEND`] arrive on
/// [`Veth::CAPTURE`]. Deleted, with the pair, when dropped.
#[derive(Debug)]
pub struct Veth {
    ns: String,
}

impl Veth {
    /// The end tcpreplay sends into.
    pub const SEND: &'static str = "sy-send";
    /// The end that is inspected.
    pub const CAPTURE: &'static str = "sy-cap";

    /// Makes the namespace and the pair, or says why it cannot.
    pub fn new() -> Result<Self> {
        if !nix::unistd::geteuid().is_root() {
            bail!("not root: network namespaces and raw sockets need it");
        }
        if found("ip").is_none() {
            bail!("no `ip` (iproute2)");
        }
        if found("tcpreplay").is_none() {
            bail!("no tcpreplay: bench/install-peers.sh installs it");
        }
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let ns = format!("sylive{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        ip(&["netns", "add", &ns])?;
        let veth = Self { ns };
        let n = veth.ns.as_str();
        ip(&["-n", n, "link", "add", Self::SEND, "type", "veth", "peer", "name", Self::CAPTURE])?;
        for dev in [Self::SEND, Self::CAPTURE] {
            // No IPv6 on the pair: its router and neighbour messages would be frames of our own.
            let _ = Command::new("ip")
                .args(["netns", "exec", n, "sysctl", "-qw", &format!("net.ipv6.conf.{dev}.disable_ipv6=1")])
                .status();
            ip(&["-n", n, "link", "set", dev, "up"])?;
        }
        Ok(veth)
    }

    /// The namespace's name.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// Runs `f` on a new thread inside the namespace (where its sockets are made).
    pub fn inside<T: Send>(&self, f: impl FnOnce() -> T + Send) -> Result<T> {
        let file = std::fs::File::open(format!("/run/netns/{}", self.ns)).context("opening the namespace")?;
        std::thread::scope(|s| {
            s.spawn(move || -> Result<T> {
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).context("entering the namespace")?;
                Ok(f())
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the thread inside the namespace panicked"))?
        })
    }

    /// Replays `capture` into [`Veth::SEND`], `loops` times, at `pps` packets per second (as fast
    /// as tcpreplay can with `None`); returns the rate tcpreplay reports it reached.
    pub fn replay(&self, capture: &Path, pps: Option<u64>, loops: u32) -> Result<f64> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns, "tcpreplay", "-q", "-i", Self::SEND, "--loop", &loops.to_string()]);
        match pps {
            Some(pps) => cmd.arg(format!("--pps={pps}")),
            None => cmd.arg("--topspeed"),
        };
        let out = cmd.arg(capture).output().context("running tcpreplay")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            bail!("tcpreplay failed: {}", text.trim());
        }
        Ok(reported_pps(&text).unwrap_or(f64::NAN))
    }

    /// Deletes [`Veth::CAPTURE`]: an interface that disappears under a live run.
    pub fn pull_the_plug(&self) -> Result<()> {
        ip(&["-n", &self.ns, "link", "del", Self::SEND])
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// The rate in tcpreplay's "Rated: … Bps, … Mbps, 12345.67 pps" line.
fn reported_pps(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.trim_start().starts_with("Rated:"))?;
    let field = line.split(',').find(|f| f.trim_end().ends_with("pps"))?;
    field.trim().trim_end_matches("pps").trim().parse().ok()
}

/// One live run over a replay.
#[derive(Clone, Debug)]
pub struct LiveRun {
    /// What the run found.
    pub report: LiveReport,
    /// The rate tcpreplay reports it sent at.
    pub sent_pps: f64,
}

/// Inspects [`Veth::CAPTURE`] on `workers` while `capture` is replayed `loops` times at `pps`.
pub fn run_once(veth: &Veth, capture: &Path, workers: usize, pps: Option<u64>, loops: u32) -> Result<LiveRun> {
    let stop = Arc::new(AtomicBool::new(false));
    let counts = LiveCounts::default();
    let inspector = Inspector::new();
    let ring = RingConfig::default();
    let (report, sent) = std::thread::scope(|s| -> Result<(LiveReport, f64)> {
        let reading = s.spawn(|| {
            veth.inside(|| {
                inspect_live(Veth::CAPTURE, workers, ring, ConnConfig::default(), &inspector, &stop, &counts)
            })
        });
        // The rings are open before the first frame is sent.
        while counts.rings.lock().map(|r| r.len()).unwrap_or(0) < workers && !reading.is_finished() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let sent = veth.replay(capture, pps, loops);
        // The last block is handed over within its timeout.
        std::thread::sleep(Duration::from_millis(u64::from(ring.block_timeout_ms) * 5 + 100));
        stop.store(true, Ordering::Relaxed);
        let report = reading.join().map_err(|_| anyhow::anyhow!("the live run panicked"))???;
        Ok((report, sent?))
    })?;
    Ok(LiveRun { report, sent_pps: sent })
}

/// The highest rate that dropped nothing (`None`: tcpreplay's top speed), and its run.
pub type CleanRun = (Option<u64>, LiveRun);

/// Replay rates [`clean_rates`] tries by default, packets per second, then as fast as tcpreplay
/// goes (`None`).
pub const RATES: [Option<u64>; 8] =
    [Some(25_000), Some(50_000), Some(100_000), Some(200_000), Some(400_000), Some(800_000), Some(1_600_000), None];

/// The live benchmark's test bed: a veth pair made for it, and the capture it replays.
#[derive(Debug)]
pub struct Bench {
    /// The pair.
    pub veth: Veth,
    /// The capture replayed.
    pub capture: std::path::PathBuf,
    /// Its TCP and UDP packets, which each loop of a replay sends.
    pub packets: u64,
}

/// The TCP and UDP packets of `capture`, which each loop of a replay sends.
fn packets_in(capture: &Path) -> Result<u64> {
    let bytes = std::fs::read(capture).with_context(|| format!("cannot read `{}`", capture.display()))?;
    let mut reader = switchyard_ingest::SliceReader::new(&bytes)?;
    let mut packets = 0u64;
    while reader.next_packet()?.is_some() {
        packets += 1;
    }
    Ok(packets)
}

impl Bench {
    /// Reads `capture` (for its packet count) and makes the pair; says why where it cannot.
    pub fn new(capture: &Path) -> Result<Self> {
        let packets = packets_in(capture)?;
        Ok(Self { veth: Veth::new()?, capture: capture.to_path_buf(), packets })
    }

    /// [`clean_rates`] on this test bed.
    pub fn clean_rates(
        &self,
        workers: &[usize],
        rates: &[Option<u64>],
        on_run: &mut dyn FnMut(usize, Option<u64>, &LiveRun),
    ) -> Result<Vec<(usize, Option<CleanRun>)>> {
        clean_rates(&self.veth, &self.capture, self.packets, workers, rates, on_run)
    }
}

/// `switchyard bench inspect --live` as a report: `capture` replayed at each of [`RATES`] with
/// 1 and 2 workers, every run and the highest clean rate of each, advancing `progress` per
/// run. A test bed that cannot be made (not root, no tcpreplay) is a note, not an error; a
/// capture that cannot be read is an error.
pub fn report(capture: &Path, progress: &dyn Progress) -> Result<Report> {
    use super::inspect::{LIVE_CLEAN, LIVE_RUNS, SPEC};
    const WORKERS: [usize; 2] = [1, 2];
    let packets = packets_in(capture)?;
    let mut r = Report::new(&SPEC);
    r.param("live", true, "inspect a veth pair fed by tcpreplay")
        .param("sample", capture.display().to_string(), "the capture replayed")
        .param("packets", packets, "its TCP and UDP packets, sent by each loop");
    r.machine = Some(crate::machine::describe());
    let veth = match Veth::new() {
        Ok(v) => v,
        Err(why) => {
            r.note(format!("no live test bed here, so nothing ran: {why:#}"));
            return Ok(r);
        }
    };
    r.note(format!(
        "replaying {} ({packets} packets) into {} in namespace {}, looped for about 1 s at each rate",
        capture.display(),
        Veth::CAPTURE,
        veth.namespace()
    ));
    progress.stage("bench inspect --live: runs (at most)", (WORKERS.len() * RATES.len()) as u64);
    let mut runs = Table::new(&LIVE_RUNS);
    let results = clean_rates(&veth, capture, packets, &WORKERS, &RATES, &mut |w, rate, run| {
        runs.push(vec![
            w.into(),
            rate.into(),
            run.sent_pps.into(),
            run.report.summary.packets.into(),
            run.report.ring.packets.into(),
            run.report.ring.drops.into(),
        ]);
        progress.advance(1);
    })?;
    let mut clean = Table::new(&LIVE_CLEAN);
    for (workers, best) in results {
        let (rate, sent): (Value, Value) = match best {
            Some((rate, run)) => (rate.map_or("top".to_string(), |r| r.to_string()).into(), run.sent_pps.into()),
            None => ("none".into(), Value::Null),
        };
        clean.push(vec![workers.into(), rate, sent]);
    }
    r.tables.extend([runs, clean]);
    Ok(r)
}

/// Loops of a capture of `packets` that make about a second at `rate` (200 at full speed).
pub fn loops_for(packets: u64, rate: Option<u64>) -> u32 {
    rate.map_or(200, |r| r.div_ceil(packets.max(1)).max(1) as u32)
}

/// For each worker count, the highest of `rates` (tried in order, up to the first that drops)
/// at which a replay of `capture` (`packets` TCP and UDP packets, looped for about a second
/// each) lost no frame, with the run at that rate; `None` where even the first dropped.
pub fn clean_rates(
    veth: &Veth,
    capture: &Path,
    packets: u64,
    workers: &[usize],
    rates: &[Option<u64>],
    on_run: &mut dyn FnMut(usize, Option<u64>, &LiveRun),
) -> Result<Vec<(usize, Option<CleanRun>)>> {
    let mut out = Vec::new();
    for &w in workers {
        let mut best = None;
        for &rate in rates {
            let run = run_once(veth, capture, w, rate, loops_for(packets, rate))?;
            on_run(w, rate, &run);
            if run.report.ring.drops > 0 {
                break;
            }
            best = Some((rate, run));
        }
        out.push((w, best));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcpreplay_s_rate_is_read() {
        let text = "Actual: 3155 packets (1134575 bytes) sent in 0.15 seconds\nRated: 7563833.3 Bps, 60.51 Mbps, 21033.33 pps\n";
        assert_eq!(reported_pps(text), Some(21033.33));
        assert_eq!(reported_pps("nothing"), None);
    }
}
