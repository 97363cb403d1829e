//! `switchyard inspect --eve` and `--ipfix` as their consumers read them: the EVE lines
//! against the fields Suricata's EVE documentation lists (and their counts against tshark's
//! conversation table), the IPFIX export against real collectors from Debian (nfcapd/nfdump
//! on loopback, and tshark's IPFIX dissector). A consumer that is not installed is reported
//! `SKIPPED` (`.ci/install-flow-collectors` installs them).

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The real conversations of Debian's clients and servers (HTTP, TLS 1.2 and 1.3, DNS, …).
const CONVERSATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/conversations.pcap");
const LABELLED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/traces/labelled.pcap");

fn switchyard(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard")).args(args).output().expect("the binary runs");
    assert!(out.status.success(), "switchyard {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    out
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-flow-records-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn installed(tool: &str) -> bool {
    Command::new(tool).arg("-h").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn eve_lines(args: &[&str]) -> Vec<Value> {
    let out = switchyard(args);
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// `2026-11-26T01:21:48.889781+0000`: the shape of EVE's timestamps.
fn is_eve_time(v: &Value) -> bool {
    let s = v.as_str().unwrap_or("");
    let b = s.as_bytes();
    s.len() == 31
        && [4, 7].iter().all(|&i| b[i] == b'-')
        && b[10] == b'T'
        && [13, 16].iter().all(|&i| b[i] == b':')
        && b[19] == b'.'
        && &s[26..] == "+0000"
        && s.chars().enumerate().all(|(i, c)| c.is_ascii_digit() || [4, 7, 10, 13, 16, 19, 26].contains(&i))
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().expect("an object").keys().map(String::as_str).collect()
}

/// Every line is an event of the shape Suricata's EVE documentation gives: the common section
/// (`timestamp`, `flow_id`, `event_type`, `src_ip`, `src_port`, `dest_ip`, `dest_port`,
/// `proto`), a `flow` object with exactly the fields its "Event type: Flow" lists (less the
/// bypass ones), and for TLS a `tls` event with `sni`, `version`, `ja4`, `client_alpns`. The
/// flows are the connections of `--results`, the same ids, protocols and packet counts.
#[test]
fn eve_lines_carry_the_fields_suricata_documents() {
    let dir = scratch("eve");
    let csv = dir.join("conns.csv");
    let events = eve_lines(&["inspect", CONVERSATIONS, "-w", "1", "--eve", "-", "--results", csv.to_str().unwrap()]);
    let rows: Vec<Vec<String>> = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    let flows: Vec<&Value> = events.iter().filter(|e| e["event_type"] == "flow").collect();
    assert_eq!(flows.len(), rows.len(), "a flow event per connection");
    for e in &events {
        for field in ["timestamp", "flow_id", "event_type", "src_ip", "src_port", "dest_ip", "dest_port", "proto"] {
            assert!(e.get(field).is_some(), "no `{field}`: {e}");
        }
        assert!(is_eve_time(&e["timestamp"]), "{e}");
        assert!(e["flow_id"].is_u64() && e["src_port"].is_u64() && e["dest_port"].is_u64(), "{e}");
        assert!(e["src_ip"].as_str().unwrap().parse::<std::net::IpAddr>().is_ok(), "{e}");
        assert!(["TCP", "UDP"].contains(&e["proto"].as_str().unwrap()), "{e}");
    }
    let mut documented = [
        "pkts_toserver",
        "pkts_toclient",
        "bytes_toserver",
        "bytes_toclient",
        "start",
        "end",
        "age",
        "state",
        "reason",
        "alerted",
    ];
    documented.sort_unstable();
    for (e, row) in flows.iter().zip(&rows) {
        let f = &e["flow"];
        let mut got = keys(f);
        got.sort_unstable();
        assert_eq!(got, documented, "{e}");
        assert!(is_eve_time(&f["start"]) && is_eve_time(&f["end"]) && f["start"].as_str() <= f["end"].as_str(), "{e}");
        assert_eq!(e["timestamp"], f["start"]);
        assert!(["new", "established"].contains(&f["state"].as_str().unwrap()), "{e}");
        assert!(["timeout", "shutdown"].contains(&f["reason"].as_str().unwrap()), "{e}");
        assert_eq!(f["alerted"], false);
        // The same connection as --results' row: id, client, server, protocol, packets.
        assert_eq!(e["flow_id"].to_string(), row[0]);
        assert_eq!(format!("{}:{}", e["src_ip"].as_str().unwrap(), e["src_port"]), row[2]);
        assert_eq!(format!("{}:{}", e["dest_ip"].as_str().unwrap(), e["dest_port"]), row[3]);
        let packets = f["pkts_toserver"].as_u64().unwrap() + f["pkts_toclient"].as_u64().unwrap();
        assert_eq!(packets.to_string(), row[row.len() - 2], "{e}");
        match e.get("app_proto") {
            Some(p) if p != "failed" => assert_eq!(p.as_str().unwrap(), row[4], "{e}"),
            _ => assert!(["no-match", "open"].contains(&row[4].as_str()), "{e} / {row:?}"),
        }
    }
    // The TLS conversations' handshakes, each event before its flow's.
    let tls: Vec<&Value> = events.iter().filter(|e| e["event_type"] == "tls").collect();
    assert!(tls.len() >= 2, "the capture has TLS 1.3 and 1.2 conversations");
    let versions: Vec<&str> = tls.iter().map(|e| e["tls"]["version"].as_str().unwrap()).collect();
    assert!(versions.contains(&"TLS 1.3") && versions.contains(&"TLS 1.2"), "{versions:?}");
    for e in tls {
        assert_eq!(e["tls"]["sni"], "localhost", "{e}");
        assert!(e["tls"]["ja4"].as_str().unwrap().starts_with("t1"), "{e}");
        assert!(e["tls"]["client_alpns"].as_array().unwrap().iter().any(|a| a == "http/1.1"), "{e}");
        let at = events.iter().position(|x| x == e).unwrap();
        assert_eq!(events[at + 1]["event_type"], "flow");
        assert_eq!(events[at + 1]["flow_id"], e["flow_id"]);
        assert_eq!(events[at + 1]["app_proto"], "tls");
    }
    // A query's and a request's events carry the fields Suricata's DNS and HTTP loggers write.
    for e in events.iter().filter(|e| e["event_type"] == "dns") {
        let mut got = keys(&e["dns"]);
        got.sort_unstable();
        assert_eq!(got, ["id", "rrname", "rrtype", "tx_id", "type"], "{e}");
    }
    let http: Vec<&Value> = events.iter().filter(|e| e["event_type"] == "http").collect();
    assert!(!http.is_empty(), "the capture has curl's HTTP/1.1 request");
    for e in http {
        assert!(e["http"]["hostname"].is_string() && e["http"]["url"].is_string(), "{e}");
        assert!(e["http"]["http_method"].is_string(), "{e}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Each direction's packets and bytes are what tshark's conversation table counts of the same
/// capture, connection by connection: frames each way, and their lengths on the wire.
#[test]
fn eve_counts_each_direction_as_tshark_does() {
    if !installed("tshark") {
        eprintln!("SKIPPED: tshark is not installed (.ci/install-flow-collectors installs it)");
        return;
    }
    let events = eve_lines(&["inspect", CONVERSATIONS, "-w", "2", "--eve", "-"]);
    // (client, server) -> (packets, bytes) each way.
    let mut ours = BTreeMap::new();
    for e in events.iter().filter(|e| e["event_type"] == "flow") {
        let end = |ip: &str, port: &str| format!("{}:{}", e[ip].as_str().unwrap(), e[port]);
        let f = &e["flow"];
        let n = |k: &str| f[k].as_u64().unwrap();
        ours.insert(
            (e["proto"].as_str().unwrap().to_lowercase(), end("src_ip", "src_port"), end("dest_ip", "dest_port")),
            ((n("pkts_toserver"), n("bytes_toserver")), (n("pkts_toclient"), n("bytes_toclient"))),
        );
    }
    // (proto, from, to) -> (frames, bytes), added up: tshark may split one exchange into two
    // conversations, one a direction (its SNMP request and response here).
    let mut theirs: BTreeMap<(String, String, String), (u64, u64)> = BTreeMap::new();
    for proto in ["tcp", "udp"] {
        let out = Command::new("tshark")
            .args(["-r", CONVERSATIONS, "-q", "-z", &format!("conv,{proto}")])
            .output()
            .expect("tshark runs");
        // `A <-> B  frames bytes  frames bytes ...`: first from B to A, then from A to B.
        for line in String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("<->")) {
            let w: Vec<&str> = line.split_whitespace().collect();
            let (a, b) = (w[0].to_string(), w[2].to_string());
            let num = |i: usize| w[i].parse::<u64>().unwrap();
            for (from, to, frames, bytes) in [(&b, &a, num(3), num(4)), (&a, &b, num(6), num(7))] {
                let t = theirs.entry((proto.to_string(), from.clone(), to.clone())).or_default();
                *t = (t.0 + frames, t.1 + bytes);
            }
        }
    }
    theirs.retain(|_, t| t.0 > 0);
    let mut covered = 0;
    for ((proto, client, server), (to_server, to_client)) in &ours {
        for (from, to, counts) in [(client, server, to_server), (server, client, to_client)] {
            let t = theirs.get(&(proto.clone(), from.clone(), to.clone())).copied().unwrap_or_default();
            assert_eq!(t, *counts, "{proto} {from} -> {to}: tshark's (frames, bytes), then ours");
            covered += usize::from(t.0 > 0);
        }
    }
    assert_eq!(covered, theirs.len(), "every direction tshark saw is a flow event's: {theirs:?}");
}

/// The `dns` and `http` events say what tshark's dissectors read of the same queries and
/// requests: the query's ID, name and type; the request's host, target and method.
#[test]
fn eve_dns_and_http_events_agree_with_tshark() {
    if !installed("tshark") {
        eprintln!("SKIPPED: tshark is not installed (.ci/install-flow-collectors installs it)");
        return;
    }
    let events = eve_lines(&["inspect", CONVERSATIONS, "-w", "2", "--eve", "-"]);
    let tshark = |filter: &str, fields: &[&str]| -> Vec<String> {
        let mut args = vec!["-r", CONVERSATIONS, "-Y", filter, "-T", "fields"];
        for f in fields {
            args.extend(["-e", f]);
        }
        let out = Command::new("tshark").args(&args).output().expect("tshark runs");
        let mut rows: Vec<String> =
            String::from_utf8_lossy(&out.stdout).lines().map(|l| l.replace('\t', " ")).collect();
        rows.sort();
        rows
    };
    let port = |e: &Value| e["src_port"].to_string();
    // tshark: a UDP or a TCP source port (the other field empty), the ID in hex, name, type.
    let mut ours: Vec<String> = events
        .iter()
        .filter(|e| e["event_type"] == "dns")
        .map(|e| {
            let d = &e["dns"];
            assert_eq!(d["type"], "query");
            let rrtype = match d["rrtype"].as_str().unwrap() {
                "A" => 1,
                "AAAA" => 28,
                other => panic!("a type this capture does not have: {other}"),
            };
            let (udp, tcp) = if e["proto"] == "UDP" { (port(e), String::new()) } else { (String::new(), port(e)) };
            format!("{udp} {tcp} 0x{:04x} {} {rrtype}", d["id"].as_u64().unwrap(), d["rrname"].as_str().unwrap())
        })
        .collect();
    ours.sort();
    let theirs =
        tshark("dns.flags.response==0", &["udp.srcport", "tcp.srcport", "dns.id", "dns.qry.name", "dns.qry.type"]);
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs, "DNS queries: ours, then tshark's");
    let mut ours: Vec<String> = events
        .iter()
        .filter(|e| e["event_type"] == "http")
        .map(|e| {
            let h = &e["http"];
            let s = |k: &str| h[k].as_str().unwrap_or("").to_string();
            format!("{} {} {} {}", port(e), s("hostname"), s("url"), s("http_method"))
        })
        .collect();
    ours.sort();
    let theirs = tshark("http.request", &["tcp.srcport", "http.host", "http.request.uri", "http.request.method"]);
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs, "HTTP requests: ours, then tshark's");
}

/// The records are the same whatever the workers and the design: they come from the
/// connection table's counts, not from where a connection's buffers were inspected.
#[test]
fn eve_is_the_same_for_any_workers_and_design() {
    let one = switchyard(&["inspect", LABELLED, "-w", "1", "--eve", "-"]).stdout;
    let two = switchyard(&["inspect", LABELLED, "-w", "2", "--eve", "-"]).stdout;
    let sharded = switchyard(&["inspect", LABELLED, "-w", "2", "--design", "sharded", "--eve", "-"]).stdout;
    assert!(one.len() > 10_000);
    assert!(one == two && one == sharded, "the EVE lines differ between runs");
}

/// A UDP port free at the moment (the collector binds it next).
fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// nfcapd, nfdump's collector, listens on loopback; the export reaches it whole, and nfdump
/// reads back every direction of every connection as a flow with its 5-tuple, its packets, its
/// bytes (`octetDeltaCount`: the IP datagrams', which on this capture's loopback Ethernet frames
/// are each frame's length less its 14-byte header), its first and last times to the
/// millisecond, and its application id. (nfdump 1.7.1 keeps neither applicationName nor
/// layer2OctetDeltaCount, and over IPFIX does not read the options records that name the ids:
/// tshark's test below reads those.)
#[test]
fn ipfix_reaches_nfcapd_and_nfdump_reads_the_flows() {
    if !installed("nfcapd") || !installed("nfdump") {
        eprintln!("SKIPPED: nfcapd/nfdump are not installed (.ci/install-flow-collectors installs them)");
        return;
    }
    let dir = scratch("nfcapd");
    let port = free_udp_port();
    let mut collector = Command::new("nfcapd")
        .args(["-b", "127.0.0.1", "-p", &port.to_string(), "-w", dir.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nfcapd starts");
    std::thread::sleep(Duration::from_millis(500));
    let out = switchyard(&["inspect", CONVERSATIONS, "-w", "1", "--eve", "-", "--ipfix", &format!("127.0.0.1:{port}")]);
    std::thread::sleep(Duration::from_millis(500));
    // SIGTERM: nfcapd writes out what it holds and ends.
    let _ = Command::new("kill").arg(collector.id().to_string()).status();
    let _ = collector.wait();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("ipfix: ") && said.contains(" records in "), "{said}");
    let dump = Command::new("nfdump").args(["-R", dir.to_str().unwrap(), "-o", "json"]).output().expect("nfdump runs");
    let text = String::from_utf8_lossy(&dump.stdout);
    let records: Vec<Value> = serde_json::from_str(&text).unwrap_or_else(|e| panic!("nfdump's JSON ({e}): {text}"));
    // Expected: a record a direction that sent something, from the EVE lines.
    let mut expected = Vec::new();
    for e in String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()) {
        if e["event_type"] != "flow" {
            continue;
        }
        let proto = if e["proto"] == "TCP" { 6 } else { 17 };
        let (c, s) = ((e["src_ip"].clone(), e["src_port"].clone()), (e["dest_ip"].clone(), e["dest_port"].clone()));
        let f = &e["flow"];
        for (from, to, packets, bytes) in
            [(&c, &s, &f["pkts_toserver"], &f["bytes_toserver"]), (&s, &c, &f["pkts_toclient"], &f["bytes_toclient"])]
        {
            let (packets, bytes) = (packets.as_u64().unwrap(), bytes.as_u64().unwrap());
            if packets != 0 {
                let ip_bytes = bytes - 14 * packets;
                expected.push((proto, from.0.clone(), from.1.clone(), to.0.clone(), to.1.clone(), packets, ip_bytes));
            }
        }
    }
    let mut got: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r["proto"].as_u64().unwrap(),
                r["src4_addr"].clone(),
                r["src_port"].clone(),
                r["dst4_addr"].clone(),
                r["dst_port"].clone(),
                r["in_packets"].as_u64().unwrap(),
                r["in_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    expected.sort_by_key(|e| format!("{e:?}"));
    got.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(got, expected, "nfdump's flows are the connections' directions");
    // The first connection (HTTP/1.1 to 8080): its times to the millisecond.
    let http = records.iter().find(|r| r["dst_port"] == 8080).expect("the HTTP/1.1 conversation");
    assert_eq!(http["first"], "2026-11-26T01:21:48.889");
    assert_eq!(http["last"], "2026-11-26T01:21:48.890");
    // Its application id: nfdump prints RFC 6759's selector, then the engine (6, user defined).
    let ids = Command::new("nfdump")
        .args(["-R", dir.to_str().unwrap(), "-q", "-o", "fmt:%dp %nbid", "dst port 8080"])
        .output()
        .expect("nfdump runs");
    let ids = String::from_utf8_lossy(&ids.stdout);
    let http_id = switchyard_runtime::inspect::Protocol::by_name("http").unwrap().0 + 1;
    assert_eq!(ids.split_whitespace().collect::<Vec<_>>(), ["8080", &format!("{http_id}..6")], "{ids}");
    let _ = std::fs::remove_dir_all(dir);
}

/// The export as tshark's IPFIX dissector reads it: the datagrams an exporter sends to a
/// socket on loopback, written to a capture, decoded field by field, the application name
/// (IE 96) and the frames' bytes (IE 352) with them.
#[test]
fn ipfix_decodes_in_tshark_with_the_application_name() {
    if !installed("tshark") {
        eprintln!("SKIPPED: tshark is not installed (.ci/install-flow-collectors installs it)");
        return;
    }
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let port = socket.local_addr().unwrap().port();
    let out = switchyard(&["inspect", CONVERSATIONS, "-w", "1", "--eve", "-", "--ipfix", &format!("127.0.0.1:{port}")]);
    let said = String::from_utf8_lossy(&out.stderr);
    let messages: usize = said
        .split("records in ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of messages: {said}"));
    let mut datagrams = Vec::new();
    let mut buf = [0u8; 65_536];
    for _ in 0..messages {
        let n = socket.recv(&mut buf).expect("every message arrives on loopback");
        assert!(n <= 1400, "a message of {n} bytes");
        datagrams.push(buf[..n].to_vec());
    }
    let dir = scratch("tshark");
    let pcap = dir.join("ipfix.pcap");
    write_udp_capture(&pcap, port, &datagrams);
    let fields = [
        "cflow.srcaddr",
        "cflow.srcport",
        "cflow.dstaddr",
        "cflow.dstport",
        "cflow.protocol",
        "cflow.biflow_direction",
        "cflow.packets",
        "cflow.octets",
        "cflow.layer2_octet_delta_count",
        "cflow.appl_name",
    ];
    let mut args: Vec<String> =
        ["-r", pcap.to_str().unwrap(), "-d", &format!("udp.port=={port},cflow"), "-T", "fields"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    args.extend(["-E", "occurrence=a", "-E", "aggregator=|"].map(String::from));
    for f in fields {
        args.extend(["-e".to_string(), f.to_string()]);
    }
    let decoded = Command::new("tshark").args(&args).output().expect("tshark runs");
    let text = String::from_utf8_lossy(&decoded.stdout);
    // A row per message, each field's values across its records joined by `|`: lay them out
    // as one row per record.
    // tshark lists a message's application names without the empty ones, so they are compared
    // apart, in the order sent (connections in id order, the client's record first).
    let (mut records, mut got_names): (Vec<Vec<String>>, Vec<String>) = (Vec::new(), Vec::new());
    for row in text.lines() {
        let mut columns: Vec<Vec<&str>> = row.split('\t').map(|c| c.split('|').collect()).collect();
        assert_eq!(columns.len(), fields.len(), "{row}");
        got_names.extend(columns.pop().unwrap().into_iter().filter(|n| !n.is_empty()).map(String::from));
        for i in 0..columns[0].len() {
            records.push(columns.iter().map(|c| c[i].to_string()).collect());
        }
    }
    // Expected from the EVE lines: each direction that sent something, with its counts.
    let mut expected = Vec::new();
    for e in String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str::<Value>(l).unwrap()) {
        if e["event_type"] != "flow" {
            continue;
        }
        let f = &e["flow"];
        let s = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        let name = e.get("app_proto").filter(|p| *p != "failed").map_or_else(String::new, s);
        let proto = if e["proto"] == "TCP" { "6" } else { "17" };
        let (c, sv) = ((s(&e["src_ip"]), s(&e["src_port"])), (s(&e["dest_ip"]), s(&e["dest_port"])));
        for (from, to, dir, p, b) in [
            (&c, &sv, "1", &f["pkts_toserver"], &f["bytes_toserver"]),
            (&sv, &c, "2", &f["pkts_toclient"], &f["bytes_toclient"]),
        ] {
            if *p != 0 {
                expected.push(vec![
                    from.0.clone(),
                    from.1.clone(),
                    to.0.clone(),
                    to.1.clone(),
                    proto.to_string(),
                    dir.to_string(),
                    s(p),
                    // IP bytes: each loopback Ethernet frame less its 14-byte header.
                    (b.as_u64().unwrap() - 14 * p.as_u64().unwrap()).to_string(),
                    s(b),
                    name.clone(),
                ]);
            }
        }
    }
    let flow_names: Vec<String> = expected.iter_mut().map(|r| r.pop().unwrap()).filter(|n| !n.is_empty()).collect();
    // The options records naming each application id come first, in the signatures' order.
    let mut named: Vec<_> =
        flow_names.iter().map(|n| switchyard_runtime::inspect::Protocol::by_name(n).unwrap()).collect();
    named.sort();
    named.dedup();
    let expected_names: Vec<String> =
        named.iter().map(|p| p.name().to_string()).chain(flow_names.iter().cloned()).collect();
    assert_eq!(
        got_names, expected_names,
        "applicationName (IE 96) as tshark decodes it: the ids' names, then the flows'"
    );
    let expected_names = flow_names;
    assert!(expected_names.iter().any(|n| n == "tls") && expected_names.iter().any(|n| n == "dns"));
    records.sort();
    expected.sort();
    assert_eq!(
        records,
        expected,
        "tshark's decoding of the export; tshark said {}",
        String::from_utf8_lossy(&decoded.stderr)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A pcap of `payloads` as UDP datagrams from 127.0.0.1:40000 to 127.0.0.1:`port` (raw IPv4,
/// LINKTYPE_RAW 101), for tshark to dissect.
fn write_udp_capture(path: &Path, port: u16, payloads: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65_535u32.to_le_bytes());
    out.extend_from_slice(&101u32.to_le_bytes());
    for (i, p) in payloads.iter().enumerate() {
        let len = 20 + 8 + p.len();
        out.extend_from_slice(&(1_800_000_000u32 + i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&(len as u32).to_le_bytes());
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1];
        ip[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        out.extend_from_slice(&ip);
        out.extend_from_slice(&40_000u16.to_be_bytes());
        out.extend_from_slice(&port.to_be_bytes());
        out.extend_from_slice(&((8 + p.len()) as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(p);
    }
    std::fs::write(path, out).expect("the capture is written");
}

/// A capture fed by another process (`switchyard feed`) gives the file's flow records: the
/// same events, connection by connection, once the feeder has sent everything.
#[cfg(target_os = "linux")]
#[test]
fn eve_from_a_feed_is_the_file_s() {
    let dir = scratch("feed");
    let (sock, eve) = (dir.join("feed.sock"), dir.join("eve.json"));
    let mut inspector = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["inspect", "--feed", sock.to_str().unwrap(), "--workers", "2", "--feed-ring-kib", "64"])
        .args(["--eve", eve.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let started = std::time::Instant::now();
    while !sock.exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "the inspector never listened at {sock:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    switchyard(&["feed", CONVERSATIONS, "--to", sock.to_str().unwrap()]);
    let (tx, rx) = std::sync::mpsc::channel();
    let pid = inspector.id();
    std::thread::spawn(move || tx.send(inspector.wait()));
    let status = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
        let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        panic!("the inspector still ran a minute after the feeder ended");
    });
    assert!(status.expect("waited").success());
    // Events by connection (the feed numbers connections per ring: compared without flow_id).
    let events = |text: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .map(|l| {
                let mut e: Value = serde_json::from_str(l).unwrap();
                e.as_object_mut().unwrap().remove("flow_id");
                e.to_string()
            })
            .collect();
        v.sort();
        v
    };
    let fed = events(&std::fs::read_to_string(&eve).expect("the EVE file is written"));
    let file =
        events(&String::from_utf8(switchyard(&["inspect", CONVERSATIONS, "-w", "1", "--eve", "-"]).stdout).unwrap());
    assert!(!file.is_empty());
    assert_eq!(fed, file);
    let _ = std::fs::remove_dir_all(dir);
}
