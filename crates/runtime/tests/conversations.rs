//! Real conversations, recorded by tcpdump between Debian's clients and servers
//! (`bench/record-conversations.sh`: curl and nginx over HTTP/1.1, h2c and TLS 1.3 and 1.2, dig
//! and dnsmasq over UDP and TCP, redis-cli, mosquitto_pub, memcached, ssh and sshd, Python's
//! smtplib, curl and vsftpd, tftp-hpa, snmpget and snmpd, sntp and chronyd, psql and
//! PostgreSQL, curl and Dovecot over IMAP and POP3, Python and ngIRCd over IRC, git and git
//! daemon, logger's syslog over UDP). Labelled by the server's port, not by payload, and checked
//! by hand: every design names every connection as labelled, and reads the TLS handshakes'
//! details.

use switchyard_core::place::{self, PlaceConfig};
use switchyard_core::{Policy, WorkerId};
use switchyard_ingest::{ConnConfig, SliceReader};
use switchyard_runtime::inspect::{Inspector, tls};
use switchyard_runtime::pipeline::{self, PipelineConfig};
use switchyard_runtime::serial::{ConnResult, inspect_serial};
use switchyard_runtime::sharded;
use switchyard_runtime::tracegen::check_labels;

const PCAP: &[u8] = include_bytes!("../../../data/traces/conversations.pcap");
const LABELS: &[u8] = include_bytes!("../../../data/traces/conversations.csv");

fn all_named(conns: &[ConnResult], design: &str) {
    let check = check_labels(conns, LABELS).unwrap();
    assert_eq!(check.checked, 22, "{design}");
    assert!(check.missed.is_empty(), "{design}: {:?}", check.missed);
}

#[test]
fn every_design_names_every_recorded_conversation() {
    let inspector = Inspector::new();
    let serial = inspect_serial(SliceReader::new(PCAP).unwrap(), ConnConfig::default(), &inspector).unwrap();
    all_named(&serial.conns, "single thread");
    let ids = [WorkerId(0), WorkerId(1)];
    let mut placer = place::build(Policy::Affinity, &PlaceConfig::default(), &ids).unwrap();
    let config = PipelineConfig { pin: false, ..PipelineConfig::default() };
    let r = pipeline::run(SliceReader::new(PCAP).unwrap(), placer.as_mut(), &config, &inspector).unwrap();
    all_named(&r.summary.conns, "producer design");
    let r = sharded::run(PCAP, 2, Policy::Hrw, ConnConfig::default(), &inspector, false).unwrap();
    all_named(&r.summary.conns, "sharded design");
}

/// curl's two handshakes with nginx: TLS 1.3 offering h2 and http/1.1, and TLS 1.2 (`--tls-max
/// 1.2 --http1.1`) offering http/1.1 without supported_versions; both to `localhost`.
#[test]
fn the_tls_handshakes_show_their_name_protocols_version_and_fingerprint() {
    let s = inspect_serial(SliceReader::new(PCAP).unwrap(), ConnConfig::default(), &Inspector::new()).unwrap();
    let seen: Vec<&tls::Seen> = s.conns.iter().filter_map(|c| c.tls.as_deref()).collect();
    assert_eq!(seen.len(), 2);
    let (v13, v12) = (seen[0], seen[1]);
    assert_eq!(v13.server_name.as_deref(), Some("localhost"));
    assert_eq!(v13.alpn, ["h2", "http/1.1"]);
    assert_eq!(v13.version, Some(0x0304));
    assert!(v13.ja4.as_deref().is_some_and(|j| j.starts_with("t13d") && j[4..10].ends_with("h2")), "{:?}", v13.ja4);
    assert_eq!(v12.server_name.as_deref(), Some("localhost"));
    assert_eq!(v12.alpn, ["http/1.1"]);
    assert_eq!(v12.version, Some(0x0303));
    assert!(v12.ja4.as_deref().is_some_and(|j| j.starts_with("t12d") && j[4..10].ends_with("h1")), "{:?}", v12.ja4);
    // TLS 1.2 shows the server's choice in the clear.
    assert_eq!(v12.chosen_alpn.as_deref(), Some("http/1.1"));
}

/// The second recording (`bench/record-conversations.sh`): DNS over TLS and over HTTPS (dig and
/// unbound), QUIC versions 1 and 2 (aioquic), drafts 29 and 32 and a version negotiation (aioquic
/// 0.9), Modbus/TCP (pymodbus), OpenVPN over UDP and TCP
/// and with tls-auth and tls-crypt, WireGuard (wireguard-go), IKEv2's IKE_SA_INIT and IKE_AUTH
/// and IKEv1's Main Mode over UDP 4500 (strongSwan), NFSv4 (nfs-ganesha and libnfs), and SIP
/// calls over UDP, with RTP, and over TCP (SIPp). Labelled by the server's port: every
/// connection is named as labelled, by every design.
#[test]
fn every_design_names_every_recorded_conversation_of_issue_39() {
    const MORE: &[u8] = include_bytes!("../../../data/traces/conversations-more.pcap");
    const MORE_LABELS: &[u8] = include_bytes!("../../../data/traces/conversations-more.csv");
    let inspector = Inspector::new();
    let check = |conns: &[ConnResult], design: &str| {
        let check = check_labels(conns, MORE_LABELS).unwrap();
        assert_eq!(check.checked, 22, "{design}");
        assert!(check.missed.is_empty(), "{design}: {:?}", check.missed);
    };
    let serial = inspect_serial(SliceReader::new(MORE).unwrap(), ConnConfig::default(), &inspector).unwrap();
    check(&serial.conns, "single thread");
    let ids = [WorkerId(0), WorkerId(1)];
    let mut placer = place::build(Policy::Affinity, &PlaceConfig::default(), &ids).unwrap();
    let config = PipelineConfig { pin: false, ..PipelineConfig::default() };
    let r = pipeline::run(SliceReader::new(MORE).unwrap(), placer.as_mut(), &config, &inspector).unwrap();
    check(&r.summary.conns, "producer design");
    let r = sharded::run(MORE, 2, Policy::Hrw, ConnConfig::default(), &inspector, false).unwrap();
    check(&r.summary.conns, "sharded design");
}
