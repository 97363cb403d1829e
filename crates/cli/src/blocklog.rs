//! `switchyard blocklog write|read`: streams of records with deadlines written to a file or a
//! block device in whole durable blocks (Dou's RG-EDF write coalescer on a real device), and
//! the log read back and verified.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use switchyard_blocklog::device::DeviceError;
use switchyard_blocklog::frame::{self, Corrupt};
use switchyard_blocklog::load::{self, Profile, check_payload};
use switchyard_blocklog::read::{Block0, ReadOptions, Recovery, SizeFrom, Verdict};
use switchyard_blocklog::{Fate, Log, LogConfig, LogError, Pacing, read_log};
use switchyard_core::Nanos;
use switchyard_core::order::blocks::BlockPolicy;

/// A deadline-aware write coalescer on a real file or block device: records from several
/// streams, each due on stable storage by its deadline, packed into whole blocks by one of the
/// core's block policies and written with O_DIRECT and O_DSYNC, so that a record counts as
/// written only once it is durable.
///
/// A tour:
///
///   switchyard blocklog write --path /tmp/demo.log --policy rg-edf --paced-sd --duration 5s
///   switchyard blocklog write --path /tmp/demo.log --policy fifo --paced-sd --period 10ms
///   switchyard blocklog read --path /tmp/demo.log
///
/// `switchyard bench blocklog` runs every policy at several loads in one go.
#[derive(Args)]
#[command(verbatim_doc_comment)]
pub(crate) struct BlocklogArgs {
    #[command(subcommand)]
    command: BlocklogCommand,
}

#[derive(Subcommand)]
enum BlocklogCommand {
    Write(WriteArgs),
    Read(ReadArgs),
}

/// Write the reproduction's load (Dou §2.5: n streams injected together every period, each
/// record due a deadline after it is appended) to a log, and print what became of the records:
/// on time, late, refused (the writer held --capacity records), dropped (--drop), records on
/// time per second, write amplification (bytes written over payload bytes made durable), and
/// how the device was opened.
///
/// A file is truncated, but only if it is empty or already a blocklog of the same --block-size:
/// any other non-empty file is refused unless --force, so that a mistyped path does not cost a
/// file. A block device is written from its start without that check: naming one is the
/// operator's choice (its old blocks after the log's end are told apart by the log's id, and
/// `read` counts them stale). Without O_DIRECT support (tmpfs before Linux 6.6) the writes are
/// buffered and still synchronised, and the summary says so.
///
/// The first line printed (on stderr) gives the log's id, which every block carries: should
/// block 0 ever be torn, `read --log-id` needs it to tell this log's blocks from an earlier
/// log's.
///
/// Durations take a unit: ns, us, ms, s or m (40ms, 10s); a bare number is refused.
///
/// With --acks, every durable record is printed as `ack STREAM SEQ K` as soon as its block is
/// durable (K: its number among its stream's appends, carried in its payload): a process that
/// kills the writer can then check the log against what was acknowledged.
#[derive(Args)]
struct WriteArgs {
    /// The file or block device to write.
    #[arg(long)]
    path: PathBuf,
    /// How blocks are made up: fifo and edf (one record a block), g-edf (the earliest
    /// deadline's stream, as many of its records as fit), rg-edf (g-edf, but a fuller group of
    /// the next stream goes first when the earliest deadline can wait), linger (Kafka's
    /// batch.size and linger.ms), group-commit, mq-deadline.
    #[arg(long, default_value = "rg-edf", value_parser = parse_policy_name)]
    policy: String,
    /// Linger's wait for a full block.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    linger: Duration,
    /// Streams.
    #[arg(long, default_value_t = 3)]
    streams: u32,
    /// Time between injections (every stream injects at once).
    #[arg(long, default_value = "40ms", value_parser = parse_duration)]
    period: Duration,
    /// Payload bytes of a record (each takes 16 more in the block).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// A record's deadline, after it is appended.
    #[arg(long, default_value = "70ms", value_parser = parse_duration)]
    deadline: Duration,
    /// Every 10th injection of stream 0 is 5 records instead of 1.
    #[arg(long)]
    bursty: bool,
    /// How long to inject for.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Bytes of a block: a power of two from 512.
    #[arg(long, default_value_t = 512)]
    block_size: usize,
    /// Records the writer holds at most; more are refused.
    #[arg(long, default_value_t = LogConfig::default().capacity)]
    capacity: usize,
    /// Drop records predicted to miss instead of writing them late.
    #[arg(long)]
    drop: bool,
    /// What the scheduler expects a block write to take.
    #[arg(long, default_value = "9ms", value_parser = parse_duration)]
    write_time: Duration,
    /// RG-EDF's margin beyond two writes before it lets a fuller group go first (default: the
    /// core's). With --paced-sd, a coming sector penalty is added where one of the next two
    /// writes opens a sector.
    #[arg(long, value_parser = parse_duration)]
    buffer_time: Option<Duration>,
    /// Pace each block write like the thesis's SD card: 9-13 ms a block, 60-140 ms more on the
    /// first write into each 256-block sector (this kernel has no dm-delay, so the slow device
    /// is emulated by the writer).
    #[arg(long)]
    paced_sd: bool,
    /// With --paced-sd, leave out the sector penalty.
    #[arg(long, requires = "paced_sd")]
    no_sector_penalty: bool,
    /// Print `ack STREAM SEQ K` for each record as it becomes durable.
    #[arg(long)]
    acks: bool,
    /// Overwrite --path even if it is a non-empty file that is not a blocklog of --block-size
    /// blocks (refused otherwise). A block device needs no --force.
    #[arg(long)]
    force: bool,
}

/// Read a log back and verify it: intact blocks and records per stream, the last intact block,
/// never-written blocks, torn or corrupt blocks (named, with why), blocks left by another log,
/// and records out of their stream's order or with a payload that is not the load generator's;
/// then a verdict, which is also the exit status.
///
/// The log is the one block 0 names: blocks carrying another log id are not read as its. When
/// block 0 is not intact, the blocks after it cannot be told from an earlier log's left on the
/// same device, so none is read and `read` fails, naming the log ids it found, unless --log-id
/// says which log to read (`blocklog write` prints it). A log whose writer was killed while
/// writing block 0 acknowledged no record: block 1 is written only once block 0 is durable.
#[derive(Args)]
#[command(after_help = EXIT_CODES)]
struct ReadArgs {
    /// The file or block device.
    #[arg(long)]
    path: PathBuf,
    /// Bytes of a block. Default: what block 0's header says; when block 0 is not intact its
    /// header cannot be trusted, so each size from 512 up is probed for an intact block 1 (of
    /// --log-id's log, if given), and the output says the size was probed.
    #[arg(long, value_parser = parse_block_size)]
    block_size: Option<usize>,
    /// The log to read, as `blocklog write` printed its id (16 hex digits): checked against
    /// block 0, and what names the log when block 0 is not intact.
    #[arg(long, value_parser = parse_log_id)]
    log_id: Option<u64>,
    /// Skip the payload check (for logs written by another application than `blocklog write`).
    #[arg(long)]
    any_payload: bool,
}

/// `read`'s exit statuses, in its --help.
const EXIT_CODES: &str = "\
Exit status:
  0  clean: every block up to the last intact one is intact and the block after it is not torn
     (a clean close, or a crash between two writes)
  2  not read: the path cannot be read, holds no log, or block 0 is not intact so the log's
     identity cannot be established (give --log-id); also bad arguments
  3  torn tail only: the block after the last intact one is torn, as a crash during its write
     leaves it; a record is acknowledged only once its block is durable, so every acknowledged
     record is intact
  4  records lost before the tail: a block before the last intact one is torn, corrupt, never
     written or another log's, or records are out of their stream's order";

/// `read`'s exit status for a torn tail.
const EXIT_TORN_TAIL: u8 = 3;
/// `read`'s exit status for records lost before the tail.
const EXIT_DAMAGED: u8 = 4;

/// Runs the subcommand; its exit status is `read`'s verdict ([`EXIT_CODES`]), else success.
pub(crate) fn run(args: &BlocklogArgs) -> Result<ExitCode> {
    match &args.command {
        BlocklogCommand::Write(a) => write(a).map(|()| ExitCode::SUCCESS),
        BlocklogCommand::Read(a) => read(a),
    }
}

fn write(a: &WriteArgs) -> Result<()> {
    let policy = policy(&a.policy, a.linger)?;
    let pacing =
        a.paced_sd.then(|| if a.no_sector_penalty { Pacing::sd_card_without_sectors(1) } else { Pacing::sd_card(1) });
    let cfg = LogConfig {
        policy,
        block_size: a.block_size,
        write_time: a.write_time,
        buffer_time: a.buffer_time.unwrap_or(LogConfig::default().buffer_time),
        drop_predicted_misses: a.drop,
        capacity: a.capacity,
        pacing,
        overwrite_any: a.force,
    };
    // Checked before the open, which truncates the file.
    if frame::valid_block_size(a.block_size) {
        let max = frame::room(a.block_size) - frame::RECORD_HEADER_LEN;
        if a.size > max {
            bail!("--size {}: a {}-byte block holds payloads of at most {max} bytes", a.size, a.block_size);
        }
    }
    let log = match Log::open(&a.path, cfg) {
        Ok(log) => log,
        Err(e @ LogError::Device(DeviceError::WouldOverwrite { .. })) => bail!("{e}; pass --force to overwrite it"),
        Err(e) => return Err(e).with_context(|| format!("opening {}", a.path.display())),
    };
    let profile = Profile {
        streams: a.streams,
        period: a.period,
        size: a.size,
        deadline: a.deadline,
        bursty: a.bursty,
        duration: a.duration,
    };
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "blocklog: {} on {} ({}-byte blocks, log id {:016x}), {}",
        policy.name(),
        a.path.display(),
        a.block_size,
        log.log_id(),
        log.info()
    )?;
    let (mut on_time, mut late, mut other) = (0u64, 0u64, 0u64);
    let mut last = Instant::now();
    let mut failed = None;
    load::run(&log, &profile, |o| {
        match o.fate {
            Fate::Durable { .. } if o.on_time() => on_time += 1,
            Fate::Durable { .. } => late += 1,
            _ => other += 1,
        }
        if a.acks
            && let (Fate::Durable { .. }, Some(seq)) = (o.fate, o.seq)
            && let Err(e) = writeln!(out, "ack {} {} {}", o.stream, seq, o.tag).and_then(|()| out.flush())
        {
            failed.get_or_insert(e);
        }
        if last.elapsed() >= Duration::from_secs(1) {
            last = Instant::now();
            let _ = writeln!(
                err,
                "  {:>5.1} s: {on_time} on time, {late} late, {other} refused or dropped",
                log.now().as_secs_f64()
            );
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    let s = log.close()?;
    writeln!(err, "\n{}", summary(&s))?;
    Ok(())
}

fn summary(s: &switchyard_blocklog::LogStats) -> String {
    let pct = |n: u64| if s.appended == 0 { 0.0 } else { 100.0 * n as f64 / s.appended as f64 };
    format!(
        "policy {}: {} records appended in {:.1} s\n  \
         on time   {:>8} ({:.1}%), {:.1} records/s\n  \
         late      {:>8} ({:.1}%)\n  \
         refused   {:>8} ({:.1}%, the writer was full)\n  \
         dropped   {:>8} ({:.1}%, predicted misses)\n  \
         failed    {:>8}\n  \
         missed    {:>8} ({:.1}% of records not durable by their deadline)\n  \
         blocks    {:>8} ({} RG-EDF reorderings), {} bytes written for {} payload bytes: write amplification {:.2}\n  \
         longest append-to-durable {:.1} ms, longest block write {:.1} ms\n  \
         device: {}",
        s.policy,
        s.appended,
        s.elapsed.as_secs_f64(),
        s.on_time,
        pct(s.on_time),
        s.on_time_per_second(),
        s.late,
        pct(s.late),
        s.refused,
        pct(s.refused),
        s.dropped,
        pct(s.dropped),
        s.failed,
        s.missed(),
        pct(s.missed()),
        s.blocks,
        s.reordered,
        s.bytes_written,
        s.payload_bytes,
        s.write_amplification(),
        s.max_latency.as_secs_f64() * 1e3,
        s.max_write.as_secs_f64() * 1e3,
        s.device,
    )
}

fn read(a: &ReadArgs) -> Result<ExitCode> {
    let opts = ReadOptions { block_size: a.block_size, log_id: a.log_id };
    let r = read_log(&a.path, opts).with_context(|| format!("reading {}", a.path.display()))?;
    let (line, code) = match r.verdict() {
        Verdict::Clean => ("clean: every block up to the last intact one is intact".to_owned(), ExitCode::SUCCESS),
        Verdict::TornTail { block, why } => (
            format!(
                "torn tail: block {block} ({why}) is torn, as a crash during its write leaves it; its records were \
                 never acknowledged, and every record before it is intact (exit status {EXIT_TORN_TAIL})"
            ),
            ExitCode::from(EXIT_TORN_TAIL),
        ),
        Verdict::Damaged { lost_blocks, first_lost, out_of_order } => {
            let mut why = Vec::new();
            if let Some(first) = first_lost {
                why.push(format!(
                    "{} before the last intact one not an intact block of this log (the first: block {first})",
                    blocks(lost_blocks)
                ));
            }
            if out_of_order > 0 {
                why.push(format!("{out_of_order} records are out of their stream's order"));
            }
            (
                format!(
                    "NOT clean, records lost or damaged before the tail: {} (exit status {EXIT_DAMAGED})",
                    why.join("; ")
                ),
                ExitCode::from(EXIT_DAMAGED),
            )
        }
        // Nothing is printed for a log that cannot be named: the error says why.
        Verdict::Unnamed { block0 } => bail!("{}", unnamed(&a.path, &r, block0)),
    };
    let mut out = std::io::stdout().lock();
    let size_from = match r.size_from {
        SizeFrom::Given | SizeFrom::Block0 => "",
        SizeFrom::Probed => " (probed: block 0 is not intact, block 1 is at this size)",
        SizeFrom::Guessed => " (guessed: block 0 is not intact and no block 1 was found; give --block-size)",
    };
    writeln!(out, "{}: {} blocks of {} bytes{size_from}", a.path.display(), r.blocks, r.block_size)?;
    let id = r.log_id.unwrap_or_default();
    match r.block0 {
        None => writeln!(out, "  log id        {id:016x}")?,
        Some(why) => writeln!(out, "  log id        {id:016x} (given with --log-id; {why})")?,
    }
    writeln!(out, "  intact        {}", r.intact)?;
    match r.last_intact {
        Some(last) => writeln!(out, "  last intact   block {last}")?,
        None => writeln!(out, "  last intact   none")?,
    }
    writeln!(out, "  never written {}", r.empty)?;
    writeln!(out, "  torn/corrupt  {}", r.bad.len())?;
    let tail = r.tail();
    for (i, why) in r.bad.iter().take(20) {
        let place = if *i > tail { " (past the log's end: not this log's)" } else { "" };
        writeln!(out, "    block {i}: {why}{place}")?;
    }
    if r.bad.len() > 20 {
        writeln!(out, "    …")?;
    }
    writeln!(out, "  stale         {} (another log's, or out of place){}", r.stale.len(), list(&r.stale))?;
    if !r.holes.is_empty() {
        let lost: u64 = r.holes.iter().map(|h| h.end - h.start).sum();
        let runs: Vec<String> = r
            .holes
            .iter()
            .take(10)
            .map(|h| if h.end - h.start == 1 { h.start.to_string() } else { format!("{}-{}", h.start, h.end - 1) })
            .collect();
        let more = if r.holes.len() > 10 { ", …" } else { "" };
        writeln!(out, "  lost          {} before the last intact one: {}{more}", blocks(lost), runs.join(", "))?;
    }
    writeln!(out, "  records       {}", r.entries.len())?;
    for (stream, n) in &r.per_stream {
        writeln!(out, "    stream {stream}: {n}")?;
    }
    writeln!(out, "  out of order  {} (a duplicate or a reordering within a stream)", r.out_of_order)?;
    if !a.any_payload {
        let foreign = r.entries.iter().filter(|e| check_payload(e.stream, &e.payload).is_none()).count();
        writeln!(out, "  foreign payloads {foreign} (not blocklog write's pattern)")?;
    }
    writeln!(out, "  {line}")?;
    Ok(code)
}

/// Why a log whose block 0 does not name it is not read, and what to do.
fn unnamed(path: &Path, r: &Recovery, block0: Block0) -> String {
    let path = path.display();
    if let (Block0::OtherLog { log_id }, Some(asked)) = (block0, r.log_id) {
        return format!(
            "{path}: block 0 is an intact block of log {log_id:016x}, and no block of log {asked:016x} (--log-id) \
             is here: read without --log-id to read log {log_id:016x}"
        );
    }
    if r.other_logs.is_empty() {
        match block0 {
            Block0::Missing => return format!("{path} is empty: no log was written to it"),
            Block0::Bad(Corrupt::Empty) if r.bad.is_empty() => {
                return format!("{path}: block 0 was never written (all zeros) and no block is a log's: no log here");
            }
            Block0::Bad(Corrupt::BadMagic) if r.bad.iter().all(|(_, why)| *why == Corrupt::BadMagic) => {
                return format!("{path} is not a blocklog: no block has a blocklog header");
            }
            _ => {}
        }
    }
    let found = if r.other_logs.is_empty() {
        "no intact block follows it".to_owned()
    } else {
        let ids: Vec<String> = r.other_logs.iter().take(5).map(|(id, n)| format!("{n} of log {id:016x}")).collect();
        let more = if r.other_logs.len() > 5 { ", …" } else { "" };
        format!("the intact blocks after it ({}{more}) may be an earlier log's on the same device", ids.join(", "))
    };
    let size = match r.size_from {
        SizeFrom::Probed => format!(" (read as {}-byte blocks, probed)", r.block_size),
        SizeFrom::Guessed => format!(" (read as {}-byte blocks, guessed: give --block-size)", r.block_size),
        SizeFrom::Given | SizeFrom::Block0 => String::new(),
    };
    format!(
        "{path}: {block0}, so the log's identity cannot be established and nothing is read: {found}{size}. \
         A log whose writer was killed while writing block 0 acknowledged no record; to read a log whose id you \
         know (`blocklog write` prints it), pass --log-id ID"
    )
}

/// `1 block`, `3 blocks`.
fn blocks(n: u64) -> String {
    if n == 1 { "1 block".to_owned() } else { format!("{n} blocks") }
}

fn list(blocks: &[u64]) -> String {
    if blocks.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = blocks.iter().take(10).map(u64::to_string).collect();
    let more = if blocks.len() > 10 { ", …" } else { "" };
    format!(": blocks {}{more}", shown.join(", "))
}

/// Every policy's name, as the core names them.
fn names() -> Vec<&'static str> {
    BlockPolicy::all(Nanos::ZERO, Nanos::ZERO).map(BlockPolicy::name).to_vec()
}

fn parse_policy_name(s: &str) -> Result<String, String> {
    if names().contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!("`{s}` is not a policy; one of: {}", names().join(", ")))
    }
}

/// The policy named `name`, with linger's wait (mq-deadline: Linux's defaults, 16 and 5 s).
pub(crate) fn policy(name: &str, linger: Duration) -> Result<BlockPolicy> {
    let ns = |d: Duration| Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    BlockPolicy::all(ns(linger), Nanos::from_millis(5_000))
        .into_iter()
        .find(|p| p.name() == name)
        .with_context(|| format!("`{name}` is not a policy; one of: {}", names().join(", ")))
}

/// The units a duration flag takes, for its errors.
const UNITS: &str = "ns, us, ms, s, m (e.g. 20ms, 10s)";

/// A duration as `40ms`, `10s`, `500us`, `250ns` or `2m`. The unit is required: a bare number
/// used to be milliseconds, and `--duration 5` meant as five seconds ran for 5 ms.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration: a number and a unit, one of {UNITS}"))?;
    let nanos_per = match unit.trim() {
        "" => return Err(format!("`{s}`: a duration needs a unit: {UNITS}")),
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        other => return Err(format!("`{other}` in `{s}` is not a unit: use one of {UNITS}")),
    };
    let nanos = (n * nanos_per).round();
    if !(0.0..=u64::MAX as f64).contains(&nanos) {
        return Err(format!("`{s}` is not a duration one can wait"));
    }
    Ok(Duration::from_nanos(nanos as u64))
}

/// `read --block-size`: one the format allows.
fn parse_block_size(s: &str) -> Result<usize, String> {
    s.trim()
        .parse()
        .ok()
        .filter(|&n| frame::valid_block_size(n))
        .ok_or_else(|| format!("`{s}` is not a block size: a power of two from 512 to 1048576 bytes"))
}

/// `read --log-id`: 16 hex digits, as `blocklog write` and `blocklog read` print it.
fn parse_log_id(s: &str) -> Result<u64, String> {
    let digits = s.trim().trim_start_matches("0x");
    u64::from_str_radix(digits, 16)
        .map_err(|_| format!("`{s}` is not a log id: 16 hex digits, as `blocklog write` prints it"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_with_units_and_a_bare_number_is_an_error_listing_them() {
        assert_eq!(parse_duration("40ms"), Ok(Duration::from_millis(40)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("250ns"), Ok(Duration::from_nanos(250)));
        assert_eq!(parse_duration("1.5m"), Ok(Duration::from_secs(90)));
        for bare in ["5", "70", "0.5", " 20 "] {
            let err = parse_duration(bare).unwrap_err();
            assert!(err.contains("needs a unit") && err.contains("ns, us, ms, s, m"), "{bare}: {err}");
        }
        assert!(parse_duration("10 parsecs").unwrap_err().contains("not a unit"));
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn every_policy_name_is_known_and_a_wrong_one_lists_them() {
        for name in names() {
            assert_eq!(policy(name, Duration::from_millis(5)).unwrap().name(), name);
        }
        assert!(parse_policy_name("rgedf").unwrap_err().contains("rg-edf"));
    }
}
