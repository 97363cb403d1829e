//! Captures written by other tools (see `.ci/fetch-captures`, which CI runs): formats, link
//! types and damage this project did not produce itself. With `SWITCHYARD_CAPTURES` unset the
//! test says so and passes, so `cargo test` needs no network; CI sets it, and then a missing
//! capture fails the run.

use std::path::{Path, PathBuf};

use switchyard_ingest::{CaptureReader, ConnConfig, IngestError, Skip, SliceReader};
use switchyard_runtime::inspect::Inspector;
use switchyard_runtime::serial::inspect_serial;

fn dir() -> Option<PathBuf> {
    let d = std::env::var_os("SWITCHYARD_CAPTURES")?;
    let d = PathBuf::from(d);
    assert!(d.join(".complete").exists(), "SWITCHYARD_CAPTURES={} holds no fetched captures", d.display());
    Some(d)
}

/// (packets read, skipped, error) for one file.
fn read(path: &Path) -> Result<(u64, switchyard_ingest::SkipCounts, Option<String>), IngestError> {
    let bytes = std::fs::read(path).unwrap();
    let mut r = CaptureReader::new(&bytes[..])?;
    let mut n = 0;
    loop {
        match r.next_packet() {
            Ok(Some(_)) => n += 1,
            Ok(None) => return Ok((n, r.skipped(), None)),
            Err(e) => return Ok((n, r.skipped(), Some(e.to_string()))),
        }
    }
}

#[test]
fn captures_written_by_other_tools() {
    let Some(d) = dir() else {
        eprintln!("skipped: set SWITCHYARD_CAPTURES (see .ci/fetch-captures)");
        return;
    };
    // dpkt: HTTP over Ethernet, DNS beside ICMP, HTTP over PPPoE, and DNS cut short.
    let (n, skipped, err) = read(&d.join("dpkt/http.pcap")).unwrap();
    assert_eq!((n, skipped.total(), err), (43, 0, None));
    let bytes = std::fs::read(d.join("dpkt/http.pcap")).unwrap();
    let s = inspect_serial(CaptureReader::new(&bytes[..]).unwrap(), ConnConfig::default(), &Inspector::new()).unwrap();
    assert!(s.conns.iter().any(|c| c.verdict.name() == "http"), "{:?}", s.conns);
    let (n, skipped, _) = read(&d.join("dpkt/dns_icmp.pcap")).unwrap();
    assert_eq!((n, skipped.get(Skip::NotTcpOrUdp)), (10, 22));
    // 45 of its TCP and UDP packets ride in PPPoE sessions; the rest are 6 ARP and 1 ICMP.
    let (n, skipped, _) = read(&d.join("dpkt/nb6-http.pcap")).unwrap();
    assert_eq!(
        (n, skipped.get(Skip::NotIp), skipped.get(Skip::NotTcpOrUdp)),
        (55, 6, 1),
        "PPPoE sessions are unwrapped"
    );
    let (n, skipped, _) = read(&d.join("dpkt/truncated_dns_2.pcap")).unwrap();
    assert_eq!((n, skipped.get(Skip::TruncatedRecord)), (0, 1));
    // pcapfix: a damaged capture keeps what came before; one with no header is refused.
    let (n, skipped, _) = read(&d.join("pcapfix/test_damaged.pcap")).unwrap();
    assert_eq!((n, skipped.get(Skip::TruncatedRecord)), (1, 1));
    assert!(matches!(read(&d.join("pcapfix/test_without_pcap_header.pcap")), Err(IngestError::NotACapture)));
    assert_eq!(read(&d.join("pcapfix/test.pcap")).unwrap().0, 28);
    // gopacket's pcapng conformance suite: every file reads, and each big-endian file reads
    // exactly as its little-endian twin.
    let mut files = 0;
    for entry in std::fs::read_dir(d.join("gopacket/le")).unwrap() {
        let le = entry.unwrap().path();
        let be = d.join("gopacket/be").join(le.file_name().unwrap());
        let (a, b) = (read(&le).unwrap(), read(&be).unwrap());
        assert_eq!(a, b, "{}", le.display());
        assert_eq!(a.2, None, "{}", le.display());
        files += 1;
    }
    assert!(files >= 25, "{files} conformance files");
    // The in-memory reader reads every one of them as the streaming reader does.
    let mut all = Vec::new();
    for sub in ["dpkt", "pcapfix", "gopacket", "gopacket/le", "gopacket/be"] {
        for entry in std::fs::read_dir(d.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                all.push(path);
            }
        }
    }
    for path in &all {
        let bytes = std::fs::read(path).unwrap();
        let in_memory = SliceReader::new(&bytes).map(|mut r| {
            let mut n = 0;
            while let Ok(Some(_)) = r.next_packet() {
                n += 1;
            }
            (n, switchyard_ingest::Packets::skipped(&r))
        });
        match (read(path), in_memory) {
            (Ok((n, skipped, None)), Ok(b)) => assert_eq!((n, skipped), b, "{}", path.display()),
            (Ok((n, _, Some(_))), Ok((m, _))) => assert!(m >= n, "{}", path.display()),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("{}: {a:?} vs {b:?}", path.display()),
        }
    }
    for f in ["test_dns.pcap", "test_ethernet.pcap", "test_loopback.pcap"] {
        let (n, skipped, err) = read(&d.join("gopacket").join(f)).unwrap();
        assert!(n >= 10 && skipped.total() == 0 && err.is_none(), "{f}: {n} {skipped} {err:?}");
    }
}
