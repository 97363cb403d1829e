//! The inspection kernel: a connection's buffer in, its protocol out.
//!
//! Every signature ([`signatures::SIGNATURES`]) is compiled into one multi-pattern automaton
//! (`regex-automata`'s meta regex), so a buffer is scanned once whatever the number of protocols.
//! A connection ends MATCHED(protocol) when a buffer matches, NO_MATCH when its last inspected
//! buffer did not, or stays open (Guo §2.4's three states). For TLS the ClientHello's server name
//! is read too ([`tls::server_name`]).

pub mod signatures;
pub mod tls;

use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{Anchored, Input};

pub use signatures::{SIGNATURES, Signature};

/// Index of a protocol in [`SIGNATURES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Protocol(pub u16);

impl Protocol {
    /// The protocol's name.
    pub fn name(self) -> &'static str {
        SIGNATURES[self.0 as usize].name
    }

    /// The protocol named `name`, if there is one.
    pub fn by_name(name: &str) -> Option<Self> {
        SIGNATURES.iter().position(|s| s.name == name).map(|i| Self(i as u16))
    }
}

/// The compiled signatures. Cheap to share between threads (`&Inspector` is all a worker needs).
#[derive(Clone, Debug)]
pub struct Inspector {
    regex: Regex,
}

impl Default for Inspector {
    fn default() -> Self {
        Self::new()
    }
}

impl Inspector {
    /// Compiles [`SIGNATURES`].
    ///
    /// # Panics
    ///
    /// Never for the shipped signatures, which a test compiles; a change that broke one would
    /// fail that test.
    pub fn new() -> Self {
        let patterns: Vec<&str> = SIGNATURES.iter().map(|s| s.pattern).collect();
        // Payloads are bytes, not text: `.` and classes may match any byte, and an empty match
        // need not fall on a UTF-8 boundary.
        let regex = Regex::builder()
            .syntax(syntax::Config::new().utf8(false))
            .configure(Regex::config().utf8_empty(false))
            .build_many(&patterns)
            .expect("the shipped signatures compile");
        Self { regex }
    }

    /// The protocol whose signature matches the start of `buffer`; the first in priority order
    /// when several could.
    pub fn classify(&self, buffer: &[u8]) -> Option<Protocol> {
        let input = Input::new(buffer).anchored(Anchored::Yes);
        self.regex.search(&input).map(|m| Protocol(m.pattern().as_usize() as u16))
    }

    /// Every protocol whose signature matches `buffer` (for checking that signatures do not
    /// overlap).
    pub fn all_matches(&self, buffer: &[u8]) -> Vec<Protocol> {
        let mut set = regex_automata::PatternSet::new(self.regex.pattern_len());
        let input = Input::new(buffer).anchored(Anchored::Yes);
        self.regex.which_overlapping_matches(&input, &mut set);
        set.iter().map(|p| Protocol(p.as_usize() as u16)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One canonical opening per protocol, written from its specification.
    pub(crate) fn openings() -> Vec<(&'static str, Vec<u8>)> {
        let mut dhcp = vec![0x01, 0x01, 0x06, 0x00];
        dhcp.extend_from_slice(&[0u8; 232]);
        dhcp.extend_from_slice(&[0x63, 0x82, 0x53, 0x63, 53, 1, 1, 0xff]);
        let mut ntp = vec![0x23, 0x00, 0x06, 0xec];
        ntp.extend_from_slice(&[0u8; 44]);
        vec![
            ("http", b"GET /index.html HTTP/1.1\r\nHost: example.org\r\n\r\n".to_vec()),
            ("http", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec()),
            ("tls", tls::tests::client_hello(Some("example.org"))),
            ("ssh", b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n".to_vec()),
            ("dns", b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03org\x00\x00\x01\x00\x01".to_vec()),
            ("ftp", b"220 ProFTPD Server (Debian) [::ffff:10.0.0.2]\r\n".to_vec()),
            ("smtp", b"220 mail.example.org ESMTP Postfix (Debian/GNU)\r\n".to_vec()),
            ("smtp", b"EHLO client.example.org\r\n".to_vec()),
            ("imap", b"* OK [CAPABILITY IMAP4rev1 SASL-IR LOGIN-REFERRALS] Dovecot ready.\r\n".to_vec()),
            ("pop3", b"+OK Dovecot ready.\r\n".to_vec()),
            ("sip", b"INVITE sip:bob@example.org SIP/2.0\r\nVia: SIP/2.0/UDP pc33.example.org\r\n".to_vec()),
            ("rtsp", b"DESCRIBE rtsp://example.org/media.mp4 RTSP/1.0\r\nCSeq: 2\r\n".to_vec()),
            ("mqtt", b"\x10\x10\x00\x04MQTT\x04\x02\x00\x3c\x00\x04abcd".to_vec()),
            ("redis", b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n".to_vec()),
            ("postgresql", b"\x00\x00\x00\x29\x00\x03\x00\x00user\x00postgres\x00database\x00app\x00\x00".to_vec()),
            ("mysql", b"\x4a\x00\x00\x00\x0a8.0.36\x00\x08\x00\x00\x00abcdefgh\x00".to_vec()),
            ("smb", b"\x00\x00\x00\x54\xfeSMB\x40\x00\x00\x00\x00\x00\x00\x00".to_vec()),
            ("rdp", b"\x03\x00\x00\x13\x0e\xe0\x00\x00\x00\x00\x00\x01\x00\x08\x00\x03\x00\x00\x00".to_vec()),
            ("bittorrent", b"\x13BitTorrent protocol\x00\x00\x00\x00\x00\x10\x00\x05".to_vec()),
            ("quic", b"\xc3\x00\x00\x00\x01\x08\x83\x94\xc8\xf0\x3e\x51\x57\x08\x00\x00\x44\x9e".to_vec()),
            ("ntp", ntp),
            ("dhcp", dhcp),
            ("telnet", b"\xff\xfd\x18\xff\xfd\x20\xff\xfd\x23".to_vec()),
            ("xmpp", b"<?xml version='1.0'?><stream:stream to='example.org' xmlns='jabber:client'>".to_vec()),
        ]
    }

    #[test]
    fn every_signature_compiles_and_there_are_at_least_twenty_protocols() {
        let _ = Inspector::new();
        assert!(SIGNATURES.len() >= 20);
        let mut names: Vec<&str> = SIGNATURES.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SIGNATURES.len(), "names are unique");
    }

    #[test]
    fn each_opening_is_named_by_its_own_signature_and_no_other() {
        let inspector = Inspector::new();
        let openings = openings();
        for s in SIGNATURES {
            assert!(openings.iter().any(|(n, _)| *n == s.name), "no opening for {}", s.name);
        }
        for (name, bytes) in openings {
            let all: Vec<&str> = inspector.all_matches(&bytes).into_iter().map(Protocol::name).collect();
            assert_eq!(all, [name], "{}", String::from_utf8_lossy(&bytes));
            assert_eq!(inspector.classify(&bytes).map(Protocol::name), Some(name));
        }
    }

    #[test]
    fn ordinary_text_and_cut_openings_are_not_claimed() {
        let inspector = Inspector::new();
        for text in [&b"hello world\r\n"[..], b"", b"GET", b"220 ", b"\x16\x03", b"SSH-", b"+OK", b"{\"a\":1}"] {
            assert_eq!(inspector.classify(text), None, "{}", String::from_utf8_lossy(text));
        }
    }

    proptest::proptest! {
        /// Random bytes almost never look like an opening: none of 2,000 random buffers does,
        /// except by starting with one of the few one-byte-prefix protocols' exact headers.
        #[test]
        fn random_bytes_are_rarely_claimed(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let inspector = Inspector::new();
            if let Some(p) = inspector.classify(&bytes) {
                // Only patterns that open with a short binary header can be hit by chance.
                proptest::prop_assert!(["telnet", "rdp", "smb", "mysql", "dns", "ntp", "quic"].contains(&p.name()), "{}", p.name());
            }
        }
    }
}
