//! `bench inspect --peer ndpi`: the inspector beside nDPI's `ndpiReader` (Debian's
//! `libndpi-bin`, nDPI 4.2), on the same captures in the same run: which protocol each names for
//! every connection, and how fast each goes on one thread.
//!
//! ndpiReader is run as users run it, with its per-flow report (`-v 2`), and its report is read
//! back: one line per flow, with the flow's ends, nDPI's protocol (`master.app`) and how sure it
//! is (`Confidence: DPI`, or `Match by port` where it guessed). Names are mapped to ours by
//! [`NAME_MAP`]; agreement is counted on the connections both name from their payload, and the
//! connections only one side names are listed apart.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use switchyard_ingest::{ConnConfig, SliceReader};
use switchyard_runtime::inspect::Inspector;
use switchyard_runtime::serial::{ConnResult, Verdict, inspect_serial, write_results};
use switchyard_runtime::tracegen::{TraceSpec, generate};

use super::median;
use crate::report::{Progress, Report, Table, Value};

/// nDPI's protocol names (the master protocol of `master.app`) beside ours. NetBIOS is one name
/// in nDPI and two here (`netbios-ns` over UDP, `netbios-ssn` over TCP); nDPI names TLS on
/// mail and DNS ports apart (IMAPS, POPS, SMTPS, DoH_DoT), which are TLS here. Ours without an
/// nDPI name: `http2` (a prior-knowledge preface; nDPI 4.2 has no HTTP/2 of its own).
pub const NAME_MAP: &[(&str, &str)] = &[
    ("HTTP", "http"),
    ("HTTP_Connect", "http"),
    ("HTTP_Proxy", "http"),
    ("TLS", "tls"),
    ("IMAPS", "tls"),
    ("POPS", "tls"),
    ("SMTPS", "tls"),
    ("DoH_DoT", "tls"),
    ("SSH", "ssh"),
    ("DNS", "dns"),
    ("FTP_CONTROL", "ftp"),
    ("SMTP", "smtp"),
    ("IMAP", "imap"),
    ("POP3", "pop3"),
    ("SIP", "sip"),
    ("RTSP", "rtsp"),
    ("MQTT", "mqtt"),
    ("Redis", "redis"),
    ("PostgreSQL", "postgresql"),
    ("MySQL", "mysql"),
    ("SMBv1", "smb"),
    ("SMBv23", "smb"),
    ("RDP", "rdp"),
    ("BitTorrent", "bittorrent"),
    ("QUIC", "quic"),
    ("NTP", "ntp"),
    ("DHCP", "dhcp"),
    ("Telnet", "telnet"),
    ("SSDP", "ssdp"),
    ("Syslog", "syslog"),
    ("SNMP", "snmp"),
    ("LDAP", "ldap"),
    ("Kerberos", "kerberos"),
    ("STUN", "stun"),
    ("TFTP", "tftp"),
    ("BGP", "bgp"),
    ("AMQP", "amqp"),
    ("VNC", "vnc"),
    ("IRC", "irc"),
    ("Git", "git"),
    ("WireGuard", "wireguard"),
    ("Memcached", "memcached"),
    ("Nats", "nats"),
    ("MongoDB", "mongodb"),
    ("Jabber", "xmpp"),
    ("MDNS", "mdns"),
    ("LLMNR", "llmnr"),
    ("Radius", "radius"),
    ("COAP", "coap"),
    ("SOCKS", "socks"),
    // Added with issue 39's signatures; the names are nDPI's display names.
    ("DNScrypt", "dnscrypt"),
    ("s7comm", "s7comm"),
    ("DTLS", "dtls"),
    ("RTCP", "rtcp"),
    ("IPsec", "ike"),
    ("Zabbix", "zabbix"),
    ("OpenVPN", "openvpn"),
    ("NFS", "nfs"),
    ("FIX", "fix"),
    ("MsSQL-TDS", "tds"),
    ("BACnet", "bacnet"),
    ("DNP3", "dnp3"),
    ("IEC60870", "iec104"),
    ("DHCPV6", "dhcpv6"),
    // Added with issue 39's second round. nDPI 4.2 (Debian 12's) has Gnutella, RTP, MGCP and
    // SOMEIP; later releases name RakNet, NAT-PMP, Bitcoin and SLP (their display names).
    ("Gnutella", "gnutella"),
    ("RTP", "rtp"),
    ("MGCP", "mgcp"),
    ("SOMEIP", "someip"),
    ("RakNet", "raknet"),
    ("NAT-PMP", "natpmp"),
    ("Bitcoin", "bitcoin"),
    ("Service_Location_Protocol", "slp"),
    ("SLP", "slp"),
    // Added with the recordings of real clients (Modbus/TCP from pymodbus).
    ("Modbus", "modbus"),
];

/// Our name for nDPI's `name` (`master.app` or `app`) on IP protocol `proto`, if it is in our set.
/// NetBIOS over UDP is the name service here unless the flow is on the datagram service's
/// port ([`ours_for_flow`] knows the ports).
pub fn ours_for(name: &str, proto: u8) -> Option<&'static str> {
    let master = name.split('.').next().unwrap_or(name);
    // nDPI's `NetBIOS.SMBv1`, `NetBIOS.SMBv23`: SMB over the session service, ours `smb`
    // (its carrier, `netbios-ssn`, counts as alike too: see [`alike`]).
    if master == "NetBIOS" && proto == 6 && name.contains(".SMBv") {
        return Some("smb");
    }
    if master == "NetBIOS" {
        return Some(if proto == 17 { "netbios-ns" } else { "netbios-ssn" });
    }
    NAME_MAP.iter().find(|(n, _)| *n == master).map(|(_, ours)| *ours)
}

/// [`ours_for`] for one flow: nDPI's one NetBIOS is our `netbios-dgm` on UDP port 138
/// (RFC 1002 §4.4), the name service elsewhere on UDP.
pub fn ours_for_flow(f: &NdpiFlow) -> Option<&'static str> {
    let on_138 = f.ends.0.port() == 138 || f.ends.1.port() == 138;
    match ours_for(&f.name, f.proto) {
        Some("netbios-ns") if on_138 => Some("netbios-dgm"),
        other => other,
    }
}

/// Whether our name `ours` is nDPI's `theirs` (ours for its name) for `flow`: the same, or for
/// SMB over NetBIOS (nDPI's `NetBIOS.SMBv23`) the session service that carries it, which is
/// what a capture that opens with the session request shows first.
fn alike(ours: &str, theirs: &str, flow: &NdpiFlow) -> bool {
    ours == theirs || (theirs == "smb" && ours == "netbios-ssn" && flow.name.starts_with("NetBIOS."))
}

/// One flow of ndpiReader's `-v 2` report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NdpiFlow {
    /// 6 (TCP) or 17 (UDP).
    pub proto: u8,
    /// Its two ends, as nDPI printed them (client first).
    pub ends: (SocketAddr, SocketAddr),
    /// nDPI's protocol, `master.app` or `app`, `Unknown` for none.
    pub name: String,
    /// nDPI's confidence: `DPI`, `DPI (cache)`, `Match by port`, `Unknown`, ….
    pub confidence: String,
}

impl NdpiFlow {
    /// Whether nDPI named it from its payload, not its port.
    pub fn by_payload(&self) -> bool {
        self.confidence.starts_with("DPI")
    }
}

/// An endpoint as ndpiReader prints it: `10.0.0.1:80` or `[2001:db8::1]:80`.
fn endpoint(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.rsplit_once(':')?;
    let ip: IpAddr = ip.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
    Some(SocketAddr::new(ip, port.parse().ok()?))
}

/// The flows of ndpiReader's `-v 2` report; lines of any other kind (statistics, ICMP flows)
/// are skipped.
pub fn parse_flows(report: &str) -> Vec<NdpiFlow> {
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(key)? + key.len();
        Some(line[at..].split(']').next()?.to_string())
    };
    report
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.next()?.parse::<u64>().ok()?;
            let proto = match words.next()? {
                "TCP" => 6,
                "UDP" => 17,
                _ => return None,
            };
            let a = endpoint(words.next()?)?;
            // `->` for a flow seen one way only.
            matches!(words.next()?, "<->" | "->").then_some(())?;
            let b = endpoint(words.next()?)?;
            let proto_field = field(line, "[proto: ")?;
            let name = proto_field.split_once('/')?.1.to_string();
            let confidence = field(line, "[Confidence: ").unwrap_or_else(|| "Unknown".into());
            Some(NdpiFlow { proto, ends: (a, b), name, confidence })
        })
        .collect()
}

/// How the two sides' verdicts compare on one capture.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Agreement {
    /// By our protocol name: connections both named from payload, and how many of those nDPI
    /// named the same.
    pub per_protocol: BTreeMap<String, (usize, usize)>,
    /// (ours, nDPI's) for connections both named differently, with counts.
    pub disagreements: BTreeMap<(String, String), usize>,
    /// Connections we named that nDPI did not name from payload (unknown, or by port): by our name.
    pub ours_only: BTreeMap<String, usize>,
    /// (ours, nDPI's) for connections we named that nDPI named from payload with a name outside
    /// our set: false claims too, as a disagreement is.
    pub outside_named: BTreeMap<(String, String), usize>,
    /// Connections nDPI named from payload, in our set, that we did not: by nDPI's name.
    pub theirs_only: BTreeMap<String, usize>,
    /// nDPI names outside our set (named from payload), by name.
    pub theirs_outside: BTreeMap<String, usize>,
    /// Connections nDPI named by port alone ("Match by port").
    pub theirs_by_port: usize,
    /// Connections only one side reported at all (flow tables differ: time-outs, non-IP).
    pub unpaired: usize,
}

impl Agreement {
    /// Connections both named from payload, and how many alike.
    pub fn totals(&self) -> (usize, usize) {
        self.per_protocol.values().fold((0, 0), |(a, b), (x, y)| (a + x, b + y))
    }

    /// Issue 39's three figures over connections nDPI named from payload: `(named, known,
    /// alike, false)`: how many nDPI named, how many of those with a name in our set, how
    /// many we named alike, and how many we named otherwise (a different protocol of ours, or
    /// any of ours where nDPI's is outside our set).
    pub fn figures(&self) -> (usize, usize, usize, usize) {
        let (alike, both) = self.totals();
        let sum = |m: &BTreeMap<String, usize>| m.values().sum::<usize>();
        let known = both + sum(&self.theirs_only);
        let wrong = (both - alike) + self.outside_named.values().sum::<usize>();
        (known + sum(&self.theirs_outside), known, alike, wrong)
    }

    /// The agreed share of connections both named, if any were.
    pub fn share(&self) -> Option<f64> {
        let (agree, both) = self.totals();
        (both > 0).then(|| agree as f64 / both as f64)
    }
}

/// A connection's identity whichever end is first: protocol and the two ends in order.
fn pair(proto: u8, a: SocketAddr, b: SocketAddr) -> (u8, SocketAddr, SocketAddr) {
    if a <= b { (proto, a, b) } else { (proto, b, a) }
}

/// Compares our verdicts with nDPI's flows, connection by connection.
pub fn compare(ours: &[ConnResult], theirs: &[NdpiFlow]) -> Agreement {
    let mut ndpi: BTreeMap<_, &NdpiFlow> = BTreeMap::new();
    for f in theirs {
        ndpi.entry(pair(f.proto, f.ends.0, f.ends.1)).or_insert(f);
    }
    let mut a = Agreement::default();
    let mut seen = std::collections::BTreeSet::new();
    for c in ours {
        let key = pair(c.key.proto, c.key.src(), c.key.dst());
        if !seen.insert(key) {
            continue; // a later connection on the same ends: nDPI's flow table merged them
        }
        let ours = match c.verdict {
            Verdict::Matched(p) => Some(p.name()),
            _ => None,
        };
        let Some(f) = ndpi.get(&key) else {
            a.unpaired += 1;
            continue;
        };
        let theirs = f.by_payload().then(|| ours_for_flow(f));
        if !f.by_payload() && f.confidence != "Unknown" {
            a.theirs_by_port += 1;
        }
        match (ours, theirs) {
            (Some(o), Some(Some(t))) => {
                let e = a.per_protocol.entry(o.to_string()).or_default();
                e.1 += 1;
                if alike(o, t, f) {
                    e.0 += 1;
                } else {
                    *a.disagreements.entry((o.to_string(), f.name.clone())).or_default() += 1;
                }
            }
            (Some(o), Some(None)) => {
                *a.theirs_outside.entry(f.name.clone()).or_default() += 1;
                *a.outside_named.entry((o.to_string(), f.name.clone())).or_default() += 1;
            }
            (Some(o), None) => *a.ours_only.entry(o.to_string()).or_default() += 1,
            (None, Some(Some(_))) => *a.theirs_only.entry(f.name.clone()).or_default() += 1,
            (None, Some(None)) => *a.theirs_outside.entry(f.name.clone()).or_default() += 1,
            (None, None) => {}
        }
    }
    a.unpaired += ndpi.len().saturating_sub(seen.len());
    a
}

/// One capture's figures.
#[derive(Clone, Debug)]
pub struct PeerRun {
    /// The capture's name.
    pub capture: String,
    /// Packets in it.
    pub packets: u64,
    /// Ours on one thread, packets per second (median round): building the inspector, reading,
    /// inspecting and writing the per-connection CSV, as `inspect --workers 1 --results` does.
    pub ours_pps: f64,
    /// The same without building the inspector and writing results: reading and inspecting.
    pub ours_inspect_pps: f64,
    /// ndpiReader's whole run with its per-flow report, packets per second (median round).
    pub ndpi_pps: f64,
    /// ndpiReader's own figure, "nDPI throughput" (its packet processing alone).
    pub ndpi_reported_pps: Option<f64>,
    /// How the verdicts compare.
    pub agreement: Agreement,
}

/// The packets per second ndpiReader's report gives ("nDPI throughput: 252.18 K pps").
fn reported_pps(report: &str) -> Option<f64> {
    let line = report.lines().find(|l| l.contains("nDPI throughput:"))?;
    let mut words = line.split_once(':')?.1.split_whitespace();
    let value: f64 = words.next()?.parse().ok()?;
    let scale = match words.next()? {
        "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "pps" => return Some(value),
        _ => return None,
    };
    Some(value * scale)
}

/// Runs ndpiReader on `capture` with its per-flow report, returning the report and the time
/// the whole run took.
fn run_ndpi(ndpi: &Path, capture: &Path) -> Result<(String, Duration)> {
    let started = Instant::now();
    let out = Command::new(ndpi)
        .args(["-i", &capture.display().to_string(), "-v", "2"])
        .output()
        .with_context(|| format!("running {}", ndpi.display()))?;
    let took = started.elapsed();
    if !out.status.success() {
        bail!("{} on {} failed: {}", ndpi.display(), capture.display(), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok((String::from_utf8_lossy(&out.stdout).into_owned(), took))
}

/// Our single thread on `bytes`, as `inspect --workers 1 --results` runs: the whole, and
/// reading and inspecting alone.
fn run_ours(bytes: &[u8]) -> Result<(Vec<ConnResult>, u64, Duration, Duration)> {
    let started = Instant::now();
    let inspector = Inspector::new();
    let inspecting = Instant::now();
    let summary = inspect_serial(SliceReader::new(bytes)?, ConnConfig::default(), &inspector)?;
    let inspected = inspecting.elapsed();
    let mut csv = Vec::with_capacity(summary.conns.len() * 96);
    write_results(&summary.conns, &mut csv)?;
    std::hint::black_box(&csv);
    Ok((summary.conns, summary.packets, started.elapsed(), inspected))
}

/// Both sides on each capture, `rounds` times in turn (the median round is reported),
/// advancing `progress` per round.
pub fn run(
    ndpi: &Path,
    captures: &[(String, PathBuf)],
    rounds: usize,
    progress: &dyn Progress,
) -> Result<Vec<PeerRun>> {
    let mut runs = Vec::new();
    progress.stage("bench inspect --peer ndpi: rounds", (captures.len() * rounds.max(1)) as u64);
    for (name, path) in captures {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let (mut ours_t, mut inspect_t, mut ndpi_t, mut reported) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut last = None;
        for _ in 0..rounds.max(1) {
            let (conns, packets, whole, inspected) = run_ours(&bytes)?;
            let (report, took) = run_ndpi(ndpi, path)?;
            ours_t.push(whole);
            inspect_t.push(inspected);
            ndpi_t.push(took);
            reported.extend(reported_pps(&report));
            last = Some((conns, packets, report));
            progress.advance(1);
        }
        let (conns, packets, report) = last.expect("at least one round");
        let pps = |d: Duration| packets as f64 / d.as_secs_f64().max(1e-9);
        reported.sort_by(f64::total_cmp);
        runs.push(PeerRun {
            capture: name.clone(),
            packets,
            ours_pps: pps(median(ours_t)),
            ours_inspect_pps: pps(median(inspect_t)),
            ndpi_pps: pps(median(ndpi_t)),
            ndpi_reported_pps: reported.get(reported.len() / 2).copied(),
            agreement: compare(&conns, &parse_flows(&report)),
        });
    }
    Ok(runs)
}

/// What `bench inspect --peer ndpi` compared, and what it could not.
#[derive(Clone, Debug)]
pub struct Suite {
    /// ndpiReader, as found; `None` when it is not installed (then nothing ran).
    pub reader: Option<PathBuf>,
    /// One per capture.
    pub runs: Vec<PeerRun>,
    /// A sentence for each capture left out, and why.
    pub left_out: Vec<String>,
}

/// The comparison `switchyard bench inspect --peer ndpi` makes: ndpiReader as installed
/// (`bench/install-peers.sh`), on the shipped `sample`, a generated trace of `connections`,
/// the recorded conversations beside the sample (`conversations.pcap`), and each of `extra`;
/// `rounds` rounds of each. Without ndpiReader nothing runs, and the suite says why.
pub fn suite(
    connections: u32,
    sample: &Path,
    extra: &[PathBuf],
    rounds: usize,
    progress: &dyn Progress,
) -> Result<Suite> {
    let Some(reader) = super::peers::found("ndpiReader") else {
        return Ok(Suite {
            reader: None,
            runs: Vec::new(),
            left_out: vec![
                "ndpiReader is not installed, so nothing was compared: bench/install-peers.sh installs it (Debian's libndpi-bin)"
                    .into(),
            ],
        });
    };
    let dir = std::env::temp_dir().join(format!("switchyard-ndpi-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let generated = dir.join("uniform.pcap");
    let spec = TraceSpec { connections, ..TraceSpec::default() };
    let file = std::fs::File::create(&generated)?;
    generate(&spec, std::io::BufWriter::new(file)).context("writing a trace")?;
    let (mut captures, mut left_out) = (Vec::new(), Vec::new());
    if sample.is_file() {
        captures.push(("sample".to_string(), sample.to_path_buf()));
    } else {
        left_out.push(format!("sample {}: not there", sample.display()));
    }
    captures.push((format!("uniform ({connections} connections)"), generated));
    // Real clients and servers, recorded by tcpdump (bench/record-conversations.sh).
    let recorded = sample.with_file_name("conversations.pcap");
    if recorded.is_file() {
        captures.push(("conversations (recorded)".to_string(), recorded));
    } else {
        left_out.push(format!("{}: not there", recorded.display()));
    }
    captures.extend(extra.iter().map(|p| (p.display().to_string(), p.clone())));
    let runs = run(&reader, &captures, rounds, progress);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Suite { reader: Some(reader), runs: runs?, left_out })
}

impl Suite {
    /// The comparison as `bench inspect --peer ndpi`'s report: a row per capture with both
    /// sides' speed and their agreement, agreement per protocol, the differences, and the goals
    /// met or not.
    pub fn report(&self, connections: u32, rounds: usize) -> Report {
        use super::inspect::{NDPI_CAPTURES, NDPI_DIFFERENCES, NDPI_PROTOCOLS, SPEC};
        let mut r = Report::new(&SPEC);
        r.param("peer", "ndpi", "the engine compared with")
            .param("connections", connections, "connections in the generated trace")
            .param("repeat", rounds, "rounds of each capture (the median round is reported)");
        r.machine = Some(crate::machine::describe());
        if let Some(reader) = &self.reader {
            r.note(format!(
                "nDPI: {} (-v 2, its per-flow report); ours: inspect on one thread, --results",
                reader.display()
            ));
        }
        for why in &self.left_out {
            r.note(format!("left out: {why}"));
        }
        let mut caps = Table::new(&NDPI_CAPTURES);
        let mut protocols = Table::new(&NDPI_PROTOCOLS).grouped_by("capture");
        let mut diffs = Table::new(&NDPI_DIFFERENCES).grouped_by("capture");
        for run in &self.runs {
            let a = &run.agreement;
            let (alike, both) = a.totals();
            caps.push(vec![
                run.capture.as_str().into(),
                run.packets.into(),
                run.ours_pps.into(),
                run.ours_inspect_pps.into(),
                run.ndpi_pps.into(),
                run.ndpi_reported_pps.into(),
                (run.ours_pps / run.ndpi_pps).into(),
                run.ndpi_reported_pps.map(|p| run.ours_inspect_pps / p).into(),
                both.into(),
                alike.into(),
                a.share().into(),
                a.theirs_by_port.into(),
                a.unpaired.into(),
            ]);
            for (name, (alike, both)) in &a.per_protocol {
                protocols.push(vec![
                    run.capture.as_str().into(),
                    name.as_str().into(),
                    (*both).into(),
                    (*alike).into(),
                ]);
            }
            let mut diff = |kind: &str, ours: Value, theirs: Value, n: usize| {
                diffs.push(vec![run.capture.as_str().into(), kind.into(), ours, theirs, n.into()]);
            };
            for ((ours, theirs), n) in &a.disagreements {
                diff("differ", ours.as_str().into(), theirs.as_str().into(), *n);
            }
            for (ours, n) in &a.ours_only {
                diff("only ours", ours.as_str().into(), Value::Null, *n);
            }
            for ((ours, theirs), n) in &a.outside_named {
                diff("ours, nDPI's outside our set", ours.as_str().into(), theirs.as_str().into(), *n);
            }
            for (theirs, n) in &a.theirs_only {
                diff("only nDPI's, in our set", Value::Null, theirs.as_str().into(), *n);
            }
            for (theirs, n) in &a.theirs_outside {
                diff("nDPI's outside our set", Value::Null, theirs.as_str().into(), *n);
            }
        }
        for (line, met) in goals(&self.runs) {
            caps.note(format!("{} {line}", if met { "met:    " } else { "NOT MET:" }));
        }
        // Without ndpiReader nothing was compared: the note says so, and there are no tables.
        if self.reader.is_some() {
            r.tables.extend([caps, protocols, diffs]);
        }
        r
    }
}

/// Issue 21's goals: agreement on connections both name, and our single thread's speed.
pub const AGREEMENT_GOAL: f64 = 0.98;
/// Issue 39's goals on traffic never seen, over connections nDPI names from payload: agreement
/// where our set has nDPI's protocol, breadth over all of them, false claims at most.
pub const ISSUE39_AGREEMENT: f64 = 0.95;
/// See [`ISSUE39_AGREEMENT`].
pub const ISSUE39_BREADTH: f64 = 0.85;
/// See [`ISSUE39_AGREEMENT`].
pub const ISSUE39_FALSE_CLAIMS: f64 = 0.01;
/// Ours over ndpiReader's packets per second, each on one thread with its per-connection output.
pub const SPEED_GOAL: f64 = 3.0;

/// The goals' lines, read off the runs: agreement over every capture's connections both
/// named, and the speed ratio on each capture; each with whether it was met.
pub fn goals(runs: &[PeerRun]) -> Vec<(String, bool)> {
    let (agree, both) = runs.iter().map(|r| r.agreement.totals()).fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
    let mut lines = Vec::new();
    let (named, known, alike, wrong) = runs
        .iter()
        .map(|r| r.agreement.figures())
        .fold((0, 0, 0, 0), |t, f| (t.0 + f.0, t.1 + f.1, t.2 + f.2, t.3 + f.3));
    if named > 0 {
        let pct = |n: usize, of: usize| if of == 0 { 0.0 } else { n as f64 * 100.0 / of as f64 };
        lines.push((
            format!(
                "issue 39, on connections nDPI names from payload in every capture: agreement {alike} of {known} whose protocol we know, {:.1}% (goal ≥ {:.0}%)",
                pct(alike, known),
                ISSUE39_AGREEMENT * 100.0
            ),
            known > 0 && alike as f64 >= ISSUE39_AGREEMENT * known as f64,
        ));
        lines.push((
            format!(
                "issue 39: breadth {alike} of {named} named alike, {:.1}% (goal ≥ {:.0}%)",
                pct(alike, named),
                ISSUE39_BREADTH * 100.0
            ),
            alike as f64 >= ISSUE39_BREADTH * named as f64,
        ));
        lines.push((
            format!(
                "issue 39: false claims {wrong} of {named}, {:.1}% (goal ≤ {:.0}%)",
                pct(wrong, named),
                ISSUE39_FALSE_CLAIMS * 100.0
            ),
            wrong as f64 <= ISSUE39_FALSE_CLAIMS * named as f64,
        ));
    }
    if both > 0 {
        let share = agree as f64 / both as f64;
        lines.push((
            format!(
                "agreement on connections both name from payload: {agree} of {both}, {:.1}% (goal ≥ {:.0}%)",
                share * 100.0,
                AGREEMENT_GOAL * 100.0
            ),
            share >= AGREEMENT_GOAL,
        ));
    }
    for r in runs {
        let ratio = r.ours_pps / r.ndpi_pps;
        let reported = r.ndpi_reported_pps.map_or(String::new(), |p| {
            format!("; reading and inspecting alone {:.1}× nDPI's own throughput figure", r.ours_inspect_pps / p)
        });
        lines.push((
            format!(
                "{}: one thread, whole runs with per-connection output: {ratio:.1}× ndpiReader (goal ≥ {SPEED_GOAL:.0}×){reported}",
                r.capture
            ),
            ratio >= SPEED_GOAL,
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_runtime::serial::Sent;

    /// What inspect found of one of nDPI's flows, as `compare` reads it.
    fn seen(f: &NdpiFlow, verdict: Verdict) -> ConnResult {
        ConnResult {
            id: 0,
            key: switchyard_core::flow::FiveTuple::new(f.proto, f.ends.1, f.ends.0),
            verdict,
            tls: None,
            app: None,
            matched_at: None,
            packets: 1,
            bytes: 1,
            first_ns: 0,
            last_ns: 0,
            to_server: Sent::default(),
            to_client: Sent::default(),
        }
    }

    const REPORT: &str = "\
\tnDPI throughput:       252.18 K pps / 691.88 Mb/sec
\t1\tTCP 10.1.0.160:32928 <-> 192.0.2.161:443 [proto: 91/TLS][Encrypted][Confidence: DPI][cat: Web/5][6 pkts/603 bytes]
\t2\tTCP 10.1.0.236:33004 <-> 192.0.2.37:143 [proto: 4/IMAP][ClearText][Confidence: Match by port][cat: Email/3]
\t3\tUDP [2001:db8::1]:5353 <-> [ff02::fb]:5353 [proto: 8/MDNS][ClearText][Confidence: DPI][cat: Network/14]
\t4\tUDP 10.0.0.9:40000 <-> 10.0.0.1:53 [proto: 5.126/DNS.Google][ClearText][Confidence: DPI]
\t5\tTCP 10.1.1.57:33081 <-> 192.0.2.114:5222 [proto: 0/Unknown][ClearText][Confidence: Unknown][5 pkts/445 bytes]
\t6\tICMP 10.0.0.1:0 <-> 10.0.0.2:0 [proto: 81/ICMP][ClearText][Confidence: DPI]
\t7\tUDP 10.1.0.6:32774 -> 192.0.2.7:1812 [proto: 146/Radius][ClearText][Confidence: DPI][cat: Network/14]
";

    #[test]
    fn the_per_flow_report_is_read() {
        let flows = parse_flows(REPORT);
        assert_eq!(flows.len(), 6, "ICMP and statistics are skipped");
        assert_eq!(ours_for(&flows[5].name, 17), Some("radius"), "a flow seen one way");
        assert_eq!(flows[0].name, "TLS");
        assert!(flows[0].by_payload() && !flows[1].by_payload());
        assert_eq!(flows[2].ends.0, "[2001:db8::1]:5353".parse().unwrap());
        assert_eq!(ours_for(&flows[3].name, 17), Some("dns"), "master of master.app");
        assert_eq!(ours_for("NetBIOS", 17), Some("netbios-ns"));
        assert_eq!(ours_for("NetBIOS", 6), Some("netbios-ssn"));
        assert_eq!(ours_for("NetBIOS.SMBv23", 6), Some("smb"), "SMB over the session service was netbios-ssn");
        let smb = NdpiFlow { name: "NetBIOS.SMBv1".into(), ..flows[0].clone() };
        assert!(alike("netbios-ssn", "smb", &smb) && alike("smb", "smb", &smb));
        assert!(!alike("netbios-ssn", "smb", &flows[0]), "only for nDPI's NetBIOS.SMB");
        assert_eq!(ours_for("Skype_Teams", 17), None);
        assert_eq!(reported_pps(REPORT), Some(252_180.0));
    }

    #[test]
    fn netbios_over_udp_is_the_datagram_service_on_its_port() {
        let flow = |port: u16| NdpiFlow {
            proto: 17,
            ends: ("10.0.0.1:138".parse().unwrap(), SocketAddr::from(([10, 0, 0, 255], port))),
            name: "NetBIOS".into(),
            confidence: "DPI".into(),
        };
        assert_eq!(ours_for_flow(&flow(138)), Some("netbios-dgm"));
        let ns = NdpiFlow { ends: ("10.0.0.1:137".parse().unwrap(), "10.0.0.2:137".parse().unwrap()), ..flow(137) };
        assert_eq!(ours_for_flow(&ns), Some("netbios-ns"));
    }

    #[test]
    fn every_mapped_name_is_one_of_ours() {
        for (theirs, ours) in NAME_MAP {
            assert!(switchyard_runtime::inspect::Protocol::by_name(ours).is_some(), "{ours} (for {theirs})");
        }
    }

    #[test]
    fn agreement_counts_only_what_both_name_from_payload() {
        use switchyard_runtime::inspect::Protocol;
        let flows = parse_flows(REPORT);
        let conn = seen;
        let named = |n| Verdict::Matched(Protocol::by_name(n).unwrap());
        let ours = vec![
            conn(&flows[0], named("tls")),
            conn(&flows[1], named("imap")),
            conn(&flows[2], named("dns")),
            conn(&flows[3], Verdict::NoMatch),
            conn(&flows[4], named("xmpp")),
        ];
        let a = compare(&ours, &flows[..5]);
        assert_eq!(a.totals(), (1, 2), "tls alike; mdns called dns by us");
        assert_eq!(a.disagreements.get(&("dns".into(), "MDNS".into())), Some(&1));
        assert_eq!(a.theirs_by_port, 1);
        assert_eq!(a.ours_only.get("imap"), Some(&1), "nDPI only guessed it");
        assert_eq!(a.ours_only.get("xmpp"), Some(&1));
        assert_eq!(a.theirs_only.get("DNS.Google"), Some(&1));
        assert_eq!(a.unpaired, 0);
    }

    /// A flow nDPI names outside our set that we name was counted as "only ours", beside the
    /// flows nDPI did not name at all: it is a false claim and is counted as one now.
    #[test]
    fn a_flow_named_outside_our_set_is_a_false_claim() {
        use switchyard_runtime::inspect::Protocol;
        let mut flows = parse_flows(REPORT);
        flows[4].name = "Gnutella_Unmapped".into();
        flows[4].confidence = "DPI".into();
        let conn = |f: &NdpiFlow, name| seen(f, Verdict::Matched(Protocol::by_name(name).unwrap()));
        let a = compare(&[conn(&flows[0], "tls"), conn(&flows[1], "imap"), conn(&flows[4], "xmpp")], &flows[..5]);
        assert_eq!(a.ours_only.get("xmpp"), None, "nDPI named it");
        assert_eq!(a.outside_named.get(&("xmpp".into(), "Gnutella_Unmapped".into())), Some(&1));
        // Of the connections both saw, nDPI named two from payload (TLS, in our set; one outside):
        // we named TLS alike and the outside one wrongly.
        assert_eq!(a.figures(), (2, 1, 1, 1));
    }
}
