//! `switchyard inspect`: deep packet inspection of a capture on worker threads, each connection
//! buffer placed by a core policy.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use switchyard_core::measure::balance;
use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{Policy, Topology, WorkerId};
use switchyard_ingest::{CaptureBytes, ConnConfig, SliceReader};
use switchyard_runtime::eve::{self, EveConfig};
use switchyard_runtime::inspect::{Engine, Inspector, Needs, Ports, SIGNATURES};
use switchyard_runtime::ipfix::{Exporter, IpfixConfig};
use switchyard_runtime::pipeline::{self, OnFull, PipelineConfig, RunReport};
use switchyard_runtime::serial::ConnResult;
use switchyard_runtime::sharded;

use crate::print::RowFormat as Format;

/// Identify the protocol of every connection in a capture, on worker threads.
///
/// The capture (pcap or pcapng) is mapped into memory, so it may be larger than memory; inspect
/// finished captures (one truncated while mapped would fault). One producer reads each packet,
/// tracks its connection, and for each of a connection's first packets makes a buffer unit; the
/// placement policy puts each unit on a worker's bounded queue. The worker reassembles the
/// connection's TCP in sequence order as far as that packet, then matches the protocol
/// signatures (`switchyard inspect --list` shows them; in one automaton, or one at a time with
/// `--kernel sequential`) from each direction's first byte, so a capture that starts
/// mid-connection or holds one side is still named; buffers of connections already classified
/// are skipped. TLS connections are read on to their ServerHello, for the version negotiated.
/// The verdicts are the same for any policy and any number of workers.
///
/// Evidence: a protocol is named by its payload. A few (mDNS, LLMNR, RADIUS, CoAP, SOCKS,
/// DHCPv6) are named by their payload on their own port only, as `payload+port`; with
/// `--guess`, a connection nothing matched is named by its port alone, shown `(guessed)`. A
/// service carried in another protocol's messages is named by what its own bytes say, and
/// `--results` shows the carrier beside it (`dnscrypt`, carrier `dns`), as it shows TLS's
/// server name; payload that only looks like a carrier's (TPKT under S7comm, MMS and RDP) is
/// named for what it carries or left unnamed.
///
/// Verdicts: a protocol's name when a signature matched; `no-match` when all of a connection's
/// inspected packets (`--packets`) were seen and none matched; `open` when the capture ended
/// before the connection sent that many packets and nothing matched yet (more of it might
/// have); `incomplete` when buffers of it were dropped unscanned (`--drop`) and nothing
/// matched, so no verdict can be given; `NAME (guessed)` with `--guess`, for a `no-match` or
/// `open` connection named by its port alone.
///
/// Examples:
///
///   switchyard inspect data/traces/labelled.pcap --labels data/traces/labelled.csv
///
///   switchyard inspect site.pcapng --guess --results conns.csv   (with SNI, ALPN, JA4)
///
///   switchyard inspect --interface eth0 --workers 2   (live; Ctrl-C for the summary)
///
///   switchyard inspect --feed /tmp/dpi.sock --workers 2   (then, in another process:
///   switchyard feed capture.pcap --to /tmp/dpi.sock, or tcpdump -w - | switchyard feed - ...)
///
///   switchyard inspect big.pcap --workers 2 --policy ahrw --results conns.csv
///
///   switchyard inspect site.pcap --eve eve.json --ipfix 127.0.0.1:4739   (flow records)
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct InspectArgs {
    /// The capture (pcap or pcapng).
    #[arg(required_unless_present_any = ["list", "interface", "feed"], conflicts_with_all = ["interface", "feed"])]
    file: Option<PathBuf>,

    /// Inspect a live interface instead of a file (Linux, root or CAP_NET_RAW): each worker
    /// reads an AF_PACKET ring of its own (TPACKET_V3), the kernel sharing the frames between
    /// them by flow hash (PACKET_FANOUT). Prints the protocols named and the frames received
    /// and dropped every second; Ctrl-C stops it with the summary a file gives.
    #[arg(long, short = 'i', value_name = "IF", conflicts_with = "feed")]
    interface: Option<String>,
    /// Inspect what another process feeds (Linux): listen on the Unix socket PATH, wait for
    /// `switchyard feed CAPTURE --to PATH`, and read the capture it sends through shared-memory
    /// rings, one per worker, the feeder placing each connection on a ring by flow. Nothing is
    /// dropped: a full ring makes the feeder wait. Ends when the feeder has sent everything.
    #[arg(long, value_name = "PATH")]
    feed: Option<PathBuf>,
    /// Each feed ring's size in KiB (a power of two).
    #[arg(long, value_name = "KIB", default_value_t = 4096, requires = "feed")]
    feed_ring_kib: usize,

    /// List the protocols: name, transports, which end opens, ports, evidence needed, and the
    /// specification each signature is written from; then exit.
    #[arg(long)]
    list: bool,

    /// Name a connection that no signature matched by its well-known port, shown as
    /// `(guessed)` and with evidence `port` in `--results`. Off by default: a port is not
    /// evidence of what a connection carries.
    #[arg(long)]
    pub(crate) guess: bool,

    /// Worker threads (default: the machine's cores; 1 with `--interface`). With fewer workers
    /// than cores the
    /// producer gets a core of its own; with as many, it shares one. On a 2-core machine,
    /// where the producer's work is most of the total, 1 worker can beat 2 (`switchyard bench
    /// inspect` measures both).
    #[arg(long, short)]
    pub(crate) workers: Option<u32>,

    /// Placement policy for connection buffers (see `switchyard place --help`); default
    /// affinity, or hrw with `--design sharded`, which takes only policies that place by the
    /// flow alone (mod-n, hrw, hrw-classic, jump, maglev).
    #[arg(long, short)]
    policy: Option<String>,

    /// How the work is shared out. `producer`: one thread reads and places each connection's
    /// buffers on the workers' queues by the policy, which may follow their load. `sharded`:
    /// no producer; every worker reads the whole capture and keeps the connections a policy
    /// that places by the flow alone gives it, and nothing is handed over. On two cores, with
    /// the default kernel on captures of many connections, sharded is the faster (1.3× the
    /// single thread against 1.1×); on a small capture, starting threads outweighs the work
    /// (`switchyard bench inspect` measures both).
    #[arg(long, value_enum, default_value_t = Design::Producer)]
    design: Design,

    /// Topology for the tree and cache-aware policies.
    #[arg(long)]
    topology: Option<String>,

    /// Packets per connection that are inspected (Guo: 8; upstream l7-filter: 10). Any value up
    /// to 4294967295 is taken: memory follows the packets each connection has, not this limit
    /// (a connection's slots are made in doubling segments as its packets come).
    #[arg(long, default_value_t = 8)]
    pub(crate) packets: u32,

    /// Bytes per connection buffer (upstream l7-filter: 12,000).
    #[arg(long, default_value_t = 12_000)]
    pub(crate) bytes: usize,

    /// How the signatures are matched (the verdicts are the same; the cost is not).
    #[arg(long, value_enum, default_value_t = Kernel::Combined)]
    pub(crate) kernel: Kernel,

    /// Buffers each worker's queue holds.
    #[arg(long, default_value_t = PipelineConfig::default().queue_capacity)]
    queue: usize,

    /// Drop buffers at a full queue (counted) instead of waiting. A connection that loses a
    /// buffer this way and matches nothing is reported `incomplete`, not `no-match`.
    #[arg(long)]
    drop: bool,

    /// Buffers handed to a worker at once (1 hands each over as it is made; larger batches wake
    /// workers less often).
    #[arg(long, default_value_t = PipelineConfig::default().batch)]
    batch: usize,

    /// Do not pin workers (nor the producer) to cores.
    #[arg(long)]
    no_pin: bool,

    /// Write one CSV row per connection here (id, client, server, protocol, server name, …).
    #[arg(long)]
    pub(crate) results: Option<PathBuf>,

    /// Write flow records here as JSON lines in the shape of Suricata's EVE output (`-`:
    /// standard output, the summary then going to standard error), for the tools that read
    /// Suricata's eve.json (Filebeat, jq, SIEM parsers). Each connection gives a `flow` event
    /// (5-tuple, `app_proto`, packets and bytes each way, start, end, state, reason), and
    /// before it a `tls` event (sni, version, ja4, client_alpns), a `dns` event (the query's
    /// rrname, rrtype, id; answers are not read) or an `http` event (hostname, url, http_method;
    /// status only where the response was in the bytes that named it). `flow_id` is the `id` of
    /// `--results`; `app_proto` is only a payload verdict (`failed` where nothing matched: a
    /// `--guess` is in `switchyard.verdict`, with evidence `port`); bytes count each frame as
    /// captured; `state` is never `closed` (FIN and RST are not followed). Written when the run
    /// ends (Ctrl-C for a live one), like `--results`. E.g.
    ///   switchyard inspect site.pcap --eve - | jq 'select(.event_type=="flow") | .app_proto'
    #[arg(long, value_name = "PATH|-", verbatim_doc_comment)]
    pub(crate) eve: Option<PathBuf>,

    /// Export the connections as IPFIX (RFC 7011) over UDP to the collector at HOST:PORT
    /// (4739 is IPFIX's port), when the run ends. Each connection is a record a direction
    /// (biflowDirection 1 from the client, 2 from the server) with the 5-tuple,
    /// flowStart/EndMilliseconds, packetDeltaCount, octetDeltaCount (IP bytes),
    /// layer2OctetDeltaCount (frames as captured), and the protocol named by payload in
    /// applicationName (IE 96, RFC 6759) and as a number in applicationId (IE 95), which
    /// options records sent with each export name. Messages stay under 1,400 bytes; templates
    /// lead each export and come again every 16 messages, since UDP may lose them. E.g.
    /// `nfcapd -p 4739 -w DIR` collects them (nfdump 1.7.1 shows flows, packets, bytes, times,
    /// direction and the id as %nbid, but not names), or
    /// `tshark -i lo -f 'udp port 4739' -d udp.port==4739,cflow -V` decodes every field.
    #[arg(long, value_name = "HOST:PORT", verbatim_doc_comment)]
    pub(crate) ipfix: Option<String>,

    /// Check the verdicts against a labels CSV from `switchyard trace-gen`, and report misses.
    #[arg(long)]
    pub(crate) labels: Option<PathBuf>,

    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// How `inspect` shares the work out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Design {
    /// A producer places buffers on the workers' queues.
    Producer,
    /// Each worker reads the capture and keeps its own connections.
    Sharded,
}

/// The inspection kernel's matching engine, as the command line names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Kernel {
    /// Every signature in one automaton, scanned once (fast).
    Combined,
    /// One signature at a time on an NFA simulation, as the source's L7-filter matched: slower,
    /// so that matching dominates the work as it did in the source.
    Sequential,
}

impl Kernel {
    /// Its name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Combined => "combined",
            Self::Sequential => "sequential",
        }
    }

    /// What the kernel does, for reports.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Combined => "combined: every signature in one automaton, one pass over a buffer's opening",
            Self::Sequential => {
                "sequential: matching one signature at a time on an NFA simulation, as the source's L7-filter did"
            }
        }
    }

    pub(crate) fn engine(self) -> Engine {
        match self {
            Self::Combined => Engine::Combined,
            Self::Sequential => Engine::Sequential,
        }
    }

    pub(crate) fn inspector(self) -> Inspector {
        Inspector::with_engine(self.engine())
    }
}

/// Captures from this size up get a progress bar (on a terminal).
const SHOW_PROGRESS: u64 = 256 << 20;

/// The run's figures, as JSON and CSV print them.
#[derive(Debug, Serialize)]
struct Totals {
    policy: String,
    workers: usize,
    packets: u64,
    connections: usize,
    inspected: u64,
    skipped_classified: u64,
    marked: u64,
    dropped: u64,
    left_out: u64,
    seconds: f64,
    packets_per_s: f64,
    gbps: f64,
    migrations: u64,
    duplicated_matches: u64,
    busy_max_over_mean: f64,
    busy_cov: f64,
    busy_jain: f64,
    producer_blocked_ms: f64,
    labels_checked: Option<usize>,
    labels_missed: Option<usize>,
}

pub(crate) fn run(args: &InspectArgs) -> Result<()> {
    if args.list {
        return list_protocols(&mut std::io::stdout().lock());
    }
    if let Some(interface) = &args.interface {
        #[cfg(target_os = "linux")]
        return crate::inspect_live::run(args, interface);
        #[cfg(not(target_os = "linux"))]
        bail!("--interface {interface}: live capture is for Linux only");
    }
    if let Some(feed) = &args.feed {
        #[cfg(target_os = "linux")]
        return crate::inspect_live::run_feed(args, feed, args.feed_ring_kib);
        #[cfg(not(target_os = "linux"))]
        bail!("--feed {}: feeds are for Linux only", feed.display());
    }
    let Some(path) = args.file.as_ref() else {
        bail!("a capture file, --interface or --feed is needed (see --help)");
    };
    let default_policy = if args.design == Design::Sharded { "hrw" } else { "affinity" };
    let policy: Policy = args.policy.as_deref().unwrap_or(default_policy).parse()?;
    let n = args.workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    if n == 0 {
        bail!("--workers 0: at least one worker is needed");
    }
    if args.packets == 0 {
        bail!("--packets 0: at least one packet per connection must be inspected");
    }
    let topology = args.topology.as_deref().map(Topology::parse).transpose()?;
    let config = PlaceConfig { topology, ..PlaceConfig::default() };
    let ids: Vec<WorkerId> = (0..n).map(WorkerId).collect();
    let mut placer = place::build(policy, &config, &ids)?;
    let shown = path.display().to_string();
    let file = File::open(path).with_context(|| format!("cannot open capture `{shown}`"))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let pipeline_config = PipelineConfig {
        conn: ConnConfig { max_packets: args.packets, max_bytes: args.bytes, ..ConnConfig::default() },
        queue_capacity: args.queue,
        on_full: if args.drop { OnFull::Drop } else { OnFull::Block },
        pin: !args.no_pin,
        batch: args.batch,
    };
    let inspector = args.kernel.inspector();
    // Mapped, not read: packets are parsed in place and workers borrow their payloads, so no
    // byte is copied, and a capture larger than memory is paged in as it is read.
    let capture = CaptureBytes::open(&file).with_context(|| format!("cannot read `{shown}`"))?;
    let reader = SliceReader::new(capture.bytes()).with_context(|| format!("reading `{shown}`"))?;
    let bar = if size >= SHOW_PROGRESS && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        ProgressBar::new(size)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {elapsed}").expect("static"));
    bar.set_message(shown.clone());
    let report = match args.design {
        Design::Producer => {
            pipeline::run_with_progress(reader, placer.as_mut(), &pipeline_config, &inspector, &mut |at| {
                bar.set_position(at as u64)
            })
            .with_context(|| format!("reading `{shown}`"))
        }
        Design::Sharded => {
            sharded::run(capture.bytes(), n, policy, pipeline_config.conn, &inspector, pipeline_config.pin)
                .map(RunReport::from)
                .with_context(|| format!("inspecting `{shown}`"))
        }
    };
    bar.finish_and_clear();
    let mut report = report?;
    let check = finish(args, &mut report.summary.conns)?;
    let mut totals = totals(policy, &report, check.as_ref().map(|c| (c.0, c.1.len())));
    if args.design == Design::Sharded {
        totals.policy = format!("{} (sharded)", totals.policy);
    }
    let mut out = summary_out(args);
    match args.format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&totals)?)?,
        Format::Csv => {
            let mut w = csv::Writer::from_writer(&mut out);
            w.serialize(&totals)?;
            w.flush()?;
        }
        Format::Table => print_table(&mut out, &shown, &report, &totals)?,
    }
    if let Some((checked, missed)) = check {
        for m in missed.iter().take(10) {
            writeln!(out, "  miss: {m}")?;
        }
        if !missed.is_empty() {
            bail!("{} of {checked} labelled connections were not named as labelled", missed.len());
        }
    }
    Ok(())
}

fn totals(policy: Policy, r: &RunReport, check: Option<(usize, usize)>) -> Totals {
    let s = &r.summary;
    let busy: Vec<f64> = r.workers.iter().map(|w| w.busy.as_secs_f64()).collect();
    let b = balance(&busy, None);
    let secs = r.elapsed.as_secs_f64().max(1e-9);
    Totals {
        policy: policy.name().into(),
        workers: r.workers.len(),
        packets: s.packets,
        connections: s.conns.len(),
        inspected: s.inspected,
        skipped_classified: s.skipped_classified,
        marked: s.marked,
        dropped: r.dropped,
        left_out: s.skipped.total(),
        seconds: secs,
        packets_per_s: s.packets as f64 / secs,
        gbps: s.payload_bytes as f64 * 8.0 / secs / 1e9,
        migrations: r.migrations,
        duplicated_matches: r.workers.iter().map(|w| w.duplicated).sum(),
        busy_max_over_mean: b.max_over_mean,
        busy_cov: b.cov,
        busy_jain: b.jain,
        producer_blocked_ms: r.producer_blocked.as_secs_f64() * 1e3,
        labels_checked: check.map(|c| c.0),
        labels_missed: check.map(|c| c.1),
    }
}

fn print_table(out: &mut impl Write, name: &str, r: &RunReport, t: &Totals) -> Result<()> {
    let s = &r.summary;
    writeln!(
        out,
        "{name}: {} packets, {} connections; {} on {} worker{} in {:.3} s ({:.0} packets/s, {:.3} Gbit/s of payload)",
        t.packets,
        t.connections,
        t.policy,
        t.workers,
        if t.workers == 1 { "" } else { "s" },
        t.seconds,
        t.packets_per_s,
        t.gbps
    )?;
    writeln!(
        out,
        "buffers inspected {}, skipped as classified {}, packets only marked {}, dropped {}; left out by the reader: {}",
        t.inspected, t.skipped_classified, t.marked, t.dropped, s.skipped
    )?;
    print_protocols(out, &s.conns)?;
    writeln!(out, "\nworker  core  scanned   skipped  busy ms  duplicated")?;
    for (i, w) in r.workers.iter().enumerate() {
        let core = w.core.map_or_else(|| "-".to_string(), |c| c.to_string());
        writeln!(
            out,
            "w{i:<6} {core:>4} {:>8} {:>9} {:>8.1} {:>11}",
            w.scanned,
            w.skipped,
            w.busy.as_secs_f64() * 1e3,
            w.duplicated
        )?;
    }
    writeln!(
        out,
        "\nbusy time max/mean {:.3}, CoV {:.3}, Jain {:.4}; migrations {}; producer waited {:.1} ms",
        t.busy_max_over_mean, t.busy_cov, t.busy_jain, t.migrations, t.producer_blocked_ms
    )?;
    if let (Some(checked), Some(missed)) = (t.labels_checked, t.labels_missed) {
        writeln!(out, "labels: {} of {checked} connections named as labelled", checked - missed)?;
    }
    Ok(())
}

/// The connections by verdict, most first, with what each verdict rests on.
pub(crate) fn print_protocols(out: &mut impl Write, conns: &[ConnResult]) -> Result<()> {
    let mut counts: BTreeMap<(std::borrow::Cow<'static, str>, &str), usize> = BTreeMap::new();
    for c in conns {
        *counts.entry((c.verdict.shown(), c.verdict.evidence().unwrap_or("-"))).or_default() += 1;
    }
    let mut by_count: Vec<_> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    writeln!(out, "\nprotocol             connections  evidence")?;
    for ((name, evidence), n) in by_count {
        writeln!(out, "{name:<20} {n:>11}  {evidence}")?;
    }
    Ok(())
}

fn list_protocols(out: &mut impl Write) -> Result<()> {
    writeln!(out, "{:<12} {:<5} {:<7} {:<28} {:<13} specification", "protocol", "over", "opens", "ports", "needs")?;
    for s in SIGNATURES {
        let ports = s.ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",");
        let needs = match s.needs {
            Needs::Payload => "payload",
            Needs::PayloadOnPort => "payload+port",
        };
        let over = format!("{:?}", s.over).to_lowercase();
        let opens = format!("{:?}", s.opens).to_lowercase();
        writeln!(out, "{:<12} {over:<5} {opens:<7} {ports:<28} {needs:<13} {}", s.name, s.what)?;
    }
    writeln!(out, "\n{} protocols", SIGNATURES.len())?;
    Ok(())
}

pub(crate) fn write_results(conns: &[ConnResult], path: &PathBuf) -> Result<()> {
    let f = File::create(path).with_context(|| format!("cannot create `{}`", path.display()))?;
    switchyard_runtime::serial::write_results(conns, std::io::BufWriter::new(f))
        .with_context(|| format!("cannot write `{}`", path.display()))
}

fn write_eve(conns: &[ConnResult], path: &Path) -> Result<()> {
    let config = EveConfig { idle_timeout_ns: ConnConfig::default().idle_timeout_ns };
    if path == Path::new("-") {
        return eve::write_eve(conns, config, std::io::BufWriter::new(std::io::stdout().lock()))
            .context("cannot write the EVE records to standard output");
    }
    let f = File::create(path).with_context(|| format!("--eve: cannot create `{}`", path.display()))?;
    eve::write_eve(conns, config, std::io::BufWriter::new(f))
        .with_context(|| format!("--eve: cannot write `{}`", path.display()))
}

fn export_ipfix(conns: &[ConnResult], addr: &str) -> Result<()> {
    let mut exporter = Exporter::connect(addr, IpfixConfig::default())?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let sent = exporter.export(conns, u32::try_from(now).unwrap_or(u32::MAX))?;
    eprintln!("ipfix: {} records in {} messages to {addr}", sent.records, sent.messages);
    Ok(())
}

/// Where the summary is printed: standard error when `--eve -` has standard output.
pub(crate) fn summary_out(args: &InspectArgs) -> Box<dyn Write> {
    if args.eve.as_deref() == Some(Path::new("-")) {
        Box::new(std::io::stderr().lock())
    } else {
        Box::new(std::io::stdout().lock())
    }
}

/// Compares verdicts with a labels CSV: the number checked, and a line per miss.
/// What an inspection does with its connections once the run is over, whether they came from
/// a file or an interface: `--guess` names the unnamed by port, `--results` writes them, and
/// `--labels` checks them (how many were checked, and the misses).
pub(crate) fn finish(args: &InspectArgs, conns: &mut [ConnResult]) -> Result<Option<(usize, Vec<String>)>> {
    if args.guess {
        for c in conns.iter_mut() {
            c.verdict = c.verdict.guessed(Ports::of(&c.key));
        }
    }
    if let Some(path) = &args.results {
        write_results(conns, path)?;
    }
    if let Some(path) = &args.eve {
        write_eve(conns, path)?;
    }
    if let Some(addr) = &args.ipfix {
        export_ipfix(conns, addr)?;
    }
    args.labels.as_ref().map(|p| check_labels(conns, p)).transpose()
}

fn check_labels(conns: &[ConnResult], path: &PathBuf) -> Result<(usize, Vec<String>)> {
    let shown = path.display();
    let file = File::open(path).with_context(|| format!("cannot read labels `{shown}`"))?;
    let check = switchyard_runtime::tracegen::check_labels(conns, BufReader::new(file))
        .with_context(|| format!("labels `{shown}`"))?;
    Ok((check.checked, check.missed))
}
