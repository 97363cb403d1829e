//! Flow records as one JSON object a line, in the shape of Suricata's EVE output
//! (`switchyard inspect --eve`), so that the pipelines that read Suricata's `eve.json`
//! (Filebeat's Suricata module, jq scripts, SIEM parsers) read inspect's verdicts unchanged.
//!
//! The fields follow Suricata's "EVE JSON Format" documentation (docs.suricata.io, output/eve,
//! and the EVE index of 8.0): every event has `timestamp`, `flow_id`, `event_type`, `src_ip`,
//! `src_port`, `dest_ip`, `dest_port`, `proto`; a `flow` event's `flow` object has
//! `pkts_toserver`, `pkts_toclient`, `bytes_toserver`, `bytes_toclient`, `start`, `end`, `age`,
//! `state`, `reason`, `alerted`; a `tls` event's `tls` object has `sni`, `version`, `ja4`,
//! `client_alpns` and `server_alpns`; a `dns` event's `dns` object (a query, as Suricata's
//! version-2 DNS logger writes one) has `type`, `id`, `rrname`, `rrtype`, `tx_id`; an `http`
//! event's `http` object has `hostname`, `url`, `http_method`, and `status` where the response
//! was in the bytes that named the connection. A connection's events come before its `flow`
//! event, in the order `tls`, `dns`/`http`, `flow`.
//!
//! Where inspect knows less than Suricata, a field says what inspect knows, never a guess:
//! - `bytes_*` count each frame's length as captured on the wire, link header included, as
//!   Suricata's counters do.
//! - `state` is `new` (only the client was heard) or `established` (both ends were): the
//!   connection table does not follow TCP's closing, so `closed` is never claimed.
//! - `reason` is `timeout` where the connection was silent longer than the idle timeout before
//!   the run's last packet, else `shutdown` (the run ended with it open), judged from the
//!   capture's times so that it is the same for any number of workers.
//! - `app_proto` is the protocol a signature named by payload; `failed` where every inspected
//!   packet was seen and none matched (as Suricata's detection gives up), absent while the
//!   connection was still open or lost buffers. A `--guess` by port is never put there: it is in
//!   `switchyard.verdict` with evidence `port`, beside the carrier of a carried service.
//! - `flow_id` is inspect's connection number, the `id` of `--results`, to join the two.
//! - Times are UTC (`+0000`).

use std::io::{self, Write};

use serde::Serialize;

use crate::app_fields::AppFields;
use crate::inspect::tls;
use crate::serial::{ConnResult, Verdict};

/// What the records need beside the connections.
#[derive(Clone, Copy, Debug)]
pub struct EveConfig {
    /// The idle timeout the connections were tracked with: a connection silent longer than
    /// this before the run's last packet ended by `timeout`.
    pub idle_timeout_ns: u64,
}

/// The fields every event has (EVE's "common section").
#[derive(Serialize)]
struct Header<'a> {
    timestamp: String,
    flow_id: u64,
    event_type: &'static str,
    src_ip: String,
    src_port: u16,
    dest_ip: String,
    dest_port: u16,
    proto: &'a str,
}

#[derive(Serialize)]
struct FlowEvent<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    app_proto: Option<&'a str>,
    flow: Flow,
    /// What inspect's verdict rests on, which EVE has no field for.
    switchyard: Extra<'a>,
}

#[derive(Serialize)]
struct Flow {
    pkts_toserver: u64,
    pkts_toclient: u64,
    bytes_toserver: u64,
    bytes_toclient: u64,
    start: String,
    end: String,
    age: u64,
    state: &'static str,
    reason: &'static str,
    alerted: bool,
}

#[derive(Serialize)]
struct Extra<'a> {
    /// As `--results` shows it: a protocol, `NAME (guessed)`, `no-match`, `open`, `incomplete`.
    verdict: std::borrow::Cow<'static, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    evidence: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    carrier: Option<&'a str>,
}

#[derive(Serialize)]
struct DnsEvent<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    dns: Dns<'a>,
}

/// A query as Suricata's version-2 DNS logger writes one.
#[derive(Serialize)]
struct Dns<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: u16,
    rrname: &'a str,
    rrtype: String,
    tx_id: u64,
}

#[derive(Serialize)]
struct HttpEvent<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    http: Http<'a>,
}

#[derive(Serialize)]
struct Http<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    hostname: Option<&'a str>,
    url: &'a str,
    http_method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
}

#[derive(Serialize)]
struct TlsEvent<'a> {
    #[serde(flatten)]
    header: Header<'a>,
    tls: Tls<'a>,
}

#[derive(Serialize)]
struct Tls<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    sni: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ja4: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    client_alpns: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    server_alpns: Vec<&'a str>,
}

/// Writes each connection's events, in the order of `conns`: its `tls` event if it showed a
/// TLS handshake, its `dns` or `http` event if its opening showed a query or a request, then
/// its `flow` event; one JSON object a line.
pub fn write_eve(conns: &[ConnResult], config: EveConfig, mut out: impl Write) -> io::Result<()> {
    // The run's last packet: a connection silent long before it had timed out.
    let run_end = conns.iter().map(|c| c.last_ns).max().unwrap_or(0);
    for c in conns {
        if let Some(seen) = c.tls.as_deref() {
            let event = TlsEvent {
                header: header(c, "tls"),
                tls: Tls {
                    sni: seen.server_name.as_deref(),
                    version: seen.version.map(tls_version),
                    ja4: seen.ja4.as_deref(),
                    client_alpns: &seen.alpn,
                    server_alpns: seen.chosen_alpn.as_deref().into_iter().collect(),
                },
            };
            line(&mut out, &event)?;
        }
        match c.app.as_deref() {
            Some(AppFields::Dns { id, rrname, rrtype }) => {
                let dns = Dns { kind: "query", id: *id, rrname, rrtype: rrtype_name(*rrtype), tx_id: 0 };
                line(&mut out, &DnsEvent { header: header(c, "dns"), dns })?;
            }
            Some(AppFields::Http { method, url, hostname, status }) => {
                let http = Http { hostname: hostname.as_deref(), url, http_method: method, status: *status };
                line(&mut out, &HttpEvent { header: header(c, "http"), http })?;
            }
            None => {}
        }
        let app_proto = match c.verdict {
            Verdict::Matched(p) => Some(p.name()),
            Verdict::NoMatch | Verdict::Guessed(_) => Some("failed"),
            Verdict::Open | Verdict::Incomplete => None,
        };
        let timed_out = run_end.saturating_sub(c.last_ns) > config.idle_timeout_ns;
        let event = FlowEvent {
            header: header(c, "flow"),
            app_proto,
            flow: Flow {
                pkts_toserver: c.to_server.packets,
                pkts_toclient: c.to_client.packets,
                bytes_toserver: c.to_server.wire_bytes,
                bytes_toclient: c.to_client.wire_bytes,
                start: timestamp(c.first_ns),
                end: timestamp(c.last_ns),
                age: c.last_ns.saturating_sub(c.first_ns) / 1_000_000_000,
                state: if c.to_client.packets == 0 { "new" } else { "established" },
                reason: if timed_out { "timeout" } else { "shutdown" },
                alerted: false,
            },
            switchyard: Extra {
                verdict: c.verdict.shown(),
                evidence: c.verdict.evidence(),
                carrier: c.verdict.carrier(),
            },
        };
        line(&mut out, &event)?;
    }
    out.flush()
}

fn line(out: &mut impl Write, event: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, event)?;
    out.write_all(b"\n")
}

/// The common section of a connection's event; the event's time is the connection's start, as
/// Suricata stamps a flow's events with its first packet's.
fn header(c: &ConnResult, event_type: &'static str) -> Header<'static> {
    let (src, dst) = (c.key.src(), c.key.dst());
    Header {
        timestamp: timestamp(c.first_ns),
        flow_id: c.id,
        event_type,
        src_ip: src.ip().to_string(),
        src_port: src.port(),
        dest_ip: dst.ip().to_string(),
        dest_port: dst.port(),
        proto: proto_name(c.key.proto),
    }
}

/// EVE's `proto`: the transport's name as Suricata writes it, else its IANA number.
fn proto_name(proto: u8) -> &'static str {
    match proto {
        6 => "TCP",
        17 => "UDP",
        1 => "ICMP",
        58 => "IPv6-ICMP",
        132 => "SCTP",
        _ => "unknown",
    }
}

/// A query type's mnemonic (IANA's "Resource Record (RR) TYPEs" registry), or `TYPE` and its
/// number for the others (RFC 3597 §5).
fn rrtype_name(t: u16) -> String {
    let name = match t {
        1 => "A",
        2 => "NS",
        5 => "CNAME",
        6 => "SOA",
        12 => "PTR",
        15 => "MX",
        16 => "TXT",
        28 => "AAAA",
        33 => "SRV",
        35 => "NAPTR",
        43 => "DS",
        48 => "DNSKEY",
        64 => "SVCB",
        65 => "HTTPS",
        252 => "AXFR",
        255 => "ANY",
        _ => return format!("TYPE{t}"),
    };
    name.into()
}

/// A negotiated version as Suricata's TLS logger names it (`TLS 1.3`, `TLSv1`, `SSLv3`).
fn tls_version(version: u16) -> String {
    match version {
        0x0301 => "TLSv1".into(),
        0x0300 => "SSLv3".into(),
        v => format!("TLS {}", tls::version_name(v)),
    }
}

/// `2026-11-27T11:37:20.123456+0000`: EVE's timestamp, to the microsecond, in UTC.
pub fn timestamp(ns: u64) -> String {
    let at =
        time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ns)).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    at.format(time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]+0000"
    ))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dates either side of leap days and of a century that is not leap, checked against
    /// `date -u -d @SECONDS`.
    #[test]
    fn timestamps_are_utc_dates_to_the_microsecond() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000000+0000");
        assert_eq!(timestamp(951_782_400_000_000_000), "2000-02-29T00:00:00.000000+0000");
        assert_eq!(timestamp(1_709_251_199_999_999_999), "2024-02-29T23:59:59.999999+0000");
        assert_eq!(timestamp(4_107_542_400_000_001_000), "2100-03-01T00:00:00.000001+0000");
        assert_eq!(timestamp(1_795_779_440_123_456_789), "2026-11-27T11:37:20.123456+0000");
    }
}
