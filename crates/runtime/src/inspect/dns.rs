//! What a pattern cannot check of a DNS message (RFC 1035 §4.1): that its header's counts fit
//! the message and that its first question is a well-formed name followed by a type and a class.
//! Encrypted or random bytes often pass a header pattern (a few fixed bits); they almost never
//! hold a name of printable labels that ends where a known type and class follow. The DNS-shaped
//! protocols' signatures (DNS, DNSCrypt's certificate query, mDNS, LLMNR) run these after their
//! pattern.

/// The first question of a DNS message (RFC 1035 §4.1.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The name's labels, lower-cased.
    pub labels: Vec<String>,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS.
    pub qclass: u16,
}

/// A name's longest wire form (RFC 1035 §2.3.4).
const MAX_NAME: usize = 255;
/// A label's longest (RFC 1035 §2.3.4).
const MAX_LABEL: usize = 63;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// QTYPEs in IANA's "Resource Record (RR) TYPEs" registry (the assigned ranges, and TA and
/// DLV), and QCLASSes IN, CH, HS, NONE (RFC 2136 §1.3) and ANY (RFC 1035 §3.2.5).
fn known_type_and_class(qtype: u16, qclass: u16) -> bool {
    (matches!(qtype, 1..=128 | 249..=261) || matches!(qtype, 32768 | 32769)) && matches!(qclass, 1 | 3 | 4 | 254 | 255)
}

/// The first question of the DNS message `m` (its bytes from the header on), if the header's
/// counts fit a message of `len` bytes and the question is well formed: one to eight questions,
/// each of at least 5 bytes and each other record of at least 11 (RFC 1035 §4.1.3); a name of
/// labels of 1–63 bytes, printable, spaces or UTF-8, 255 bytes at most, ending in the root or in a pointer back
/// into itself (§4.1.4); a known type and class. The question must lie within `m`.
fn question_in(m: &[u8], len: usize) -> Option<Question> {
    let count = |i: usize| u16_at(m, 4 + 2 * i).map(usize::from);
    let (qd, records) = (count(0)?, count(1)? + count(2)? + count(3)?);
    if !(1..=8).contains(&qd) || 12 + 5 * qd + 11 * records > len {
        return None;
    }
    let mut labels = Vec::new();
    let mut at = 12;
    loop {
        let n = usize::from(*m.get(at)?);
        match n {
            0 => {
                at += 1;
                break;
            }
            1..=MAX_LABEL => {
                let label = m.get(at + 1..at + 1 + n)?;
                // Printable ASCII, spaces and UTF-8 (DNS-SD's instance names, RFC 6763 §4.1.1;
                // RFC 6762 §16): no control bytes.
                if !label.iter().all(|&c| c >= 0x20 && c != 0x7f) {
                    return None;
                }
                labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
                at += 1 + n;
            }
            // A pointer, only back into the name read so far: nothing else precedes it.
            0xc0..=0xff => {
                let to = usize::from(u16_at(m, at)? & 0x3fff);
                if !(12..at).contains(&to) {
                    return None;
                }
                at += 2;
                break;
            }
            _ => return None,
        }
        if at - 12 > MAX_NAME {
            return None;
        }
    }
    let (qtype, qclass) = (u16_at(m, at)?, u16_at(m, at + 2)?);
    known_type_and_class(qtype, qclass).then_some(Question { labels, qtype, qclass })
}

/// The first question of the DNS message that opens `b`: over UDP, the message itself; over
/// TCP, after a two-byte length (RFC 1035 §4.2.2) that is the message's, whose first segment
/// may not hold all of it (the counts are checked against the length it gives).
pub fn question(b: &[u8]) -> Option<Question> {
    question_in(b, b.len()).or_else(|| {
        let len = usize::from(u16_at(b, 0)?);
        question_in(b.get(2..)?, len)
    })
}

/// Whether `b` opens with a DNS message ([`question`]) that is not one of the services carried
/// in DNS messages that have signatures of their own ([`is_dnscrypt_cert_query`]).
pub fn is_plain(b: &[u8]) -> bool {
    question(b).is_some_and(|q| !names_dnscrypt_cert(&q))
}

/// A DNSCrypt client's certificate query: TXT for `2.dnscrypt-cert.<provider name>` ("DNSCrypt
/// version 2" protocol specification, §"Certificates": the provider name starts with
/// `2.dnscrypt-cert.`, and the certificates are TXT records).
fn names_dnscrypt_cert(q: &Question) -> bool {
    q.labels.len() > 2 && q.labels[0] == "2" && q.labels[1] == "dnscrypt-cert"
}

/// Whether `b` opens with a DNSCrypt certificate query, or the answer to one.
pub fn is_dnscrypt_cert_query(b: &[u8]) -> bool {
    question(b).is_some_and(|q| names_dnscrypt_cert(&q) && q.qtype == 16)
}

/// The magic that opens every encrypted DNSCrypt response, over UDP or after TCP's two-byte
/// length ("DNSCrypt version 2", §"Encrypted responses": `resolver_magic`, 0x72 0x36 0x66 0x6e
/// 0x76 0x57 0x6a 0x38).
pub const RESOLVER_MAGIC: &[u8; 8] = b"r6fnvWj8";

/// Whether `b` opens with DNSCrypt: a certificate query or its answer (a DNS message), or an
/// encrypted response (the resolver's magic, then the 24-byte nonce and at least the 16-byte
/// tag of its box).
pub fn is_dnscrypt(b: &[u8]) -> bool {
    let response = |r: &[u8]| r.starts_with(RESOLVER_MAGIC) && r.len() >= 8 + 24 + 16;
    response(b) || b.get(2..).is_some_and(response) || is_dnscrypt_cert_query(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUERY: &[u8] = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03org\x00\x00\x01\x00\x01";

    #[test]
    fn a_query_s_question_is_read_over_udp_and_tcp() {
        let q = question(QUERY).expect("a query");
        assert_eq!((q.labels, q.qtype, q.qclass), (vec!["example".to_string(), "org".to_string()], 1, 1));
        let tcp = [&[0x00, QUERY.len() as u8][..], QUERY].concat();
        assert!(is_plain(&tcp));
        // A root query (a resolver's priming query for the root's NS).
        assert!(is_plain(b"\x00\x07\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01"));
    }

    #[test]
    fn counts_names_types_and_classes_that_do_not_fit_are_refused() {
        let with = |at: usize, byte: u8| {
            let mut b = QUERY.to_vec();
            b[at] = byte;
            b
        };
        assert!(!is_plain(&with(5, 0)), "no question");
        assert!(!is_plain(&with(7, 3)), "three answers in 29 bytes");
        assert!(!is_plain(&with(12, 0x40)), "a label longer than 63");
        assert!(!is_plain(&with(14, 0x07)), "a control byte in a label");
        assert!(!is_plain(&with(25, 0x77)), "no such type");
        assert!(!is_plain(&with(27, 0x77)), "no such class");
        assert!(!is_plain(&QUERY[..QUERY.len() - 1]), "cut before its class ends");
        let mut long = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00".to_vec();
        for _ in 0..5 {
            long.push(63);
            long.extend_from_slice(&[b'a'; 63]);
        }
        long.extend_from_slice(b"\x00\x00\x01\x00\x01");
        assert!(!is_plain(&long), "a name longer than 255");
        let mut pointer_forward = QUERY[..12].to_vec();
        pointer_forward.extend_from_slice(b"\xc0\x20\x00\x01\x00\x01");
        assert!(!is_plain(&pointer_forward), "a pointer to nothing read");
    }

    #[test]
    fn a_dnscrypt_certificate_query_is_not_plain_dns() {
        let q = b"\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x012\x0ddnscrypt-cert\x08resolver\x07example\x00\x00\x10\x00\x01";
        assert!(is_dnscrypt_cert_query(q));
        assert!(!is_plain(q));
        assert!(question(q).is_some(), "a DNS message all the same");
        assert!(is_dnscrypt(q));
        let mut response = RESOLVER_MAGIC.to_vec();
        response.extend_from_slice(&[0x5c; 24 + 16 + 32]);
        assert!(is_dnscrypt(&response));
        assert!(is_dnscrypt(&[&[0x00, response.len() as u8][..], &response].concat()), "over TCP");
        assert!(!is_dnscrypt(&response[..30]), "too short for a nonce and a tag");
        assert!(!is_dnscrypt_cert_query(QUERY));
    }
}
