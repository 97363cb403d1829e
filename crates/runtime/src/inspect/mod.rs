//! The inspection kernel: a connection's buffer in, its protocol out.
//!
//! Every signature ([`signatures::SIGNATURES`]) is compiled into one multi-pattern automaton
//! (`regex-automata`'s meta regex), so a buffer is scanned once whatever the number of protocols.
//! A connection ends MATCHED(protocol) when a buffer matches, NO_MATCH when its last inspected
//! buffer did not, or stays open (Guo §2.4's three states). For TLS the ClientHello's server name
//! is read too ([`tls::server_name`]).

pub mod samples;
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

    /// The protocol whose signature matches the start of `buffer`.
    ///
    /// The search stops at the first byte where any signature has matched (`earliest`), rather
    /// than running on to find where the match ends: only which protocol matched is wanted, and
    /// patterns such as `220[ -][^\r\n]*ftp` would otherwise read to the end of the line. When
    /// two signatures could both match, the one that matches at the earlier byte wins; the
    /// shipped signatures do not overlap on any protocol's opening (tested).
    pub fn classify(&self, buffer: &[u8]) -> Option<Protocol> {
        let input = Input::new(buffer).anchored(Anchored::Yes).earliest(true);
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

    use super::samples::openings;

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
