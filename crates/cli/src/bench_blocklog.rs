//! `switchyard bench blocklog`'s options; the run and its report are
//! `switchyard_experiments::bench::blocklog`'s.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use switchyard_blocklog::Pacing;
use switchyard_experiments::bench::blocklog::{Setup, run as bench};

use crate::blocklog::{parse_duration, policy};

/// The write coalescer (`switchyard blocklog`) on a file paced like the thesis's SD card (9-13
/// ms a block, 60-140 ms more on the first write into each 256-block sector; emulated by the
/// writer, since this kernel has no dm-delay): FIFO, EDF, G-EDF, RG-EDF and Kafka-style linger
/// at each load, one run after another on the same file with the same drawn device timings.
///
/// Per run: records on time per second, the share of records that missed (late, refused or
/// dropped), write amplification (bytes written over payload bytes made durable) and the
/// longest append-to-durable time. At the end, the heaviest load at which FIFO misses more
/// than half while G-EDF or RG-EDF misses none with write amplification below 1.5 (issue 22's
/// goal), or that there is none.
///
/// Beside each run, the simulator's prediction for it (`sim:`): its sensor node with the same
/// streams, framed record sizes, blocks, scheduler settings and paced device timings, and a
/// present-day core's scheduling cost. The real disk's own time under the pacing is not in it;
/// where the two differ, `max wr` shows whether the disk went past the paced time.
///
/// Example:
///
///   switchyard bench blocklog --periods 40ms,10ms,6ms --seconds 4
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct BlocklogBench {
    /// Injection periods (the load: 3 streams inject together each period), each with its unit
    /// (ns, us, ms, s, m).
    #[arg(long, value_delimiter = ',', value_parser = parse_duration, default_value = "40ms,20ms,10ms,7ms,6ms")]
    periods: Vec<Duration>,
    /// Seconds of injection per run.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    /// Policies, in the order run.
    #[arg(long, value_delimiter = ',', default_value = "fifo,edf,g-edf,rg-edf,linger")]
    policies: Vec<String>,
    /// Linger's wait for a full block.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    linger: Duration,
    /// A record's deadline.
    #[arg(long, default_value = "70ms", value_parser = parse_duration)]
    deadline: Duration,
    /// Every 10th injection of stream 0 is 5 records.
    #[arg(long)]
    bursty: bool,
    /// Records the writer holds at most.
    #[arg(long, default_value_t = 48)]
    capacity: usize,
    /// RG-EDF's margin beyond two writes (default: the core's); a coming sector penalty is added
    /// where one of the next two writes opens a sector.
    #[arg(long, value_parser = parse_duration)]
    buffer_time: Option<Duration>,
    /// Leave out the SD card's sector penalty (60-140 ms every 256 blocks, longer than the
    /// deadline: no policy can hide it).
    #[arg(long)]
    no_sector_penalty: bool,
    /// Where the log file goes (a filesystem that refuses O_DIRECT gets synchronised buffered writes, and the report's notes say so).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,

    #[command(flatten)]
    output: crate::print::Output,
}

pub(crate) fn run(a: &BlocklogBench) -> Result<()> {
    let mut setup = Setup::new(a.dir.clone());
    setup.policies = a.policies.iter().map(|p| policy(p, a.linger)).collect::<Result<_>>()?;
    setup.periods.clone_from(&a.periods);
    setup.profile.duration = Duration::from_secs_f64(a.seconds);
    setup.profile.deadline = a.deadline;
    setup.profile.bursty = a.bursty;
    setup.log.capacity = a.capacity;
    if let Some(b) = a.buffer_time {
        setup.log.buffer_time = b;
    }
    if a.no_sector_penalty {
        setup.pacing = Pacing::sd_card_without_sectors(setup.pacing.seed);
    }
    let report = bench(&setup, &crate::print::Bar::new())?.report(&setup);
    a.output.emit(&report)
}
