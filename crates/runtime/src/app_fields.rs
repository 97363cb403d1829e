//! What flow records show of a matched connection's opening beside its protocol: a DNS query's
//! name and type (RFC 1035 §4.1.2), an HTTP/1 request's method, target and `Host` (RFC 9112
//! §3, RFC 9110 §7.2) and the response's status where the response is in the same buffer
//! (RFC 9112 §4). Read once, from the buffer whose match named the connection, so that they are
//! the same for any number of workers. Every length is checked against the bytes there: cut or
//! forged input gives `None` or leaves a field out, never a panic (fuzzed:
//! `fuzz/fuzz_targets/app_fields.rs`).

use crate::inspect::{Found, dns};

/// The fields read, by protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppFields {
    /// A DNS (or mDNS, LLMNR) query.
    Dns {
        /// The message's ID.
        id: u16,
        /// The first question's name, its labels joined by dots.
        rrname: String,
        /// Its QTYPE.
        rrtype: u16,
    },
    /// An HTTP/1 exchange.
    Http {
        /// The request's method.
        method: String,
        /// The request target as sent (a path, or an absolute URI to a proxy).
        url: String,
        /// The `Host` field's value.
        hostname: Option<String>,
        /// The response's status code, if the response was in the buffer.
        status: Option<u16>,
    },
}

/// Longest field kept: a URL beyond this is cut (flow records are not a log of URLs).
const MAX_FIELD: usize = 2048;

/// The fields of a connection `found` named, read from `buffer` (`starts`: where the table's
/// first sender's and the other end's bytes begin). `tcp`: DNS messages carry a length first.
pub fn read(found: Found, buffer: &[u8], starts: [Option<usize>; 2], tcp: bool) -> Option<Box<AppFields>> {
    let side = |i: usize| starts[i].and_then(|at| buffer.get(at..));
    let (client, server) = if found.roles_reversed() { (side(1), side(0)) } else { (side(0), side(1)) };
    match found.protocol.name() {
        "dns" | "mdns" | "llmnr" => dns_query(client?, tcp).map(Box::new),
        "http" => http(client?, server).map(Box::new),
        _ => None,
    }
}

fn dns_query(b: &[u8], tcp: bool) -> Option<AppFields> {
    let q = dns::question(b)?;
    let m = if tcp { b.get(2..)? } else { b };
    let id = u16::from_be_bytes([*m.first()?, *m.get(1)?]);
    Some(AppFields::Dns { id, rrname: q.labels.join("."), rrtype: q.qtype })
}

/// The lines of the header section that opens `b`, up to its blank line or the buffer's end
/// (a line cut by the end is left out).
fn lines(b: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = b;
    std::iter::from_fn(move || {
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        let (line, after) = (&rest[..end], &rest[end + 2..]);
        rest = after;
        (!line.is_empty()).then_some(line)
    })
}

/// `b` as a field value: visible ASCII and spaces only, cut at [`MAX_FIELD`].
fn text(b: &[u8]) -> Option<String> {
    let b = &b[..b.len().min(MAX_FIELD)];
    b.iter().all(|&c| c == b' ' || c.is_ascii_graphic()).then(|| String::from_utf8_lossy(b).into_owned())
}

fn http(client: &[u8], server: Option<&[u8]>) -> Option<AppFields> {
    let mut lines = lines(client);
    // request-line = method SP request-target SP HTTP-version (RFC 9112 §3).
    let request = lines.next()?;
    let mut parts = request.splitn(3, |&c| c == b' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if method.is_empty() || !method.iter().all(u8::is_ascii_uppercase) || !version.starts_with(b"HTTP/") {
        return None;
    }
    let hostname = lines
        .find_map(|l| {
            let colon = l.iter().position(|&c| c == b':')?;
            l[..colon].eq_ignore_ascii_case(b"host").then(|| l[colon + 1..].trim_ascii())
        })
        .and_then(text);
    // status-line = HTTP-version SP status-code SP [ reason-phrase ] (RFC 9112 §4).
    let status = server.and_then(|s| {
        let code = s.strip_prefix(b"HTTP/")?.get(3..7)?; // "1.1 404"
        (code[0] == b' ' && code[1..].iter().all(u8::is_ascii_digit))
            .then(|| code[1..].iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0')))
    });
    Some(AppFields::Http { method: text(method)?, url: text(target)?, hostname, status })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::Protocol;

    fn found(name: &str) -> Found {
        Found { protocol: Protocol::by_name(name).expect("shipped"), from_client: true }
    }

    #[test]
    fn an_http_request_gives_method_target_and_host_and_a_response_its_status() {
        let buffer = b"GET /index.html?q=1 HTTP/1.1\r\nUser-Agent: curl\r\nhost:  example.org \r\n\r\nHTTP/1.1 404 Not Found\r\n";
        let response = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let got = read(found("http"), buffer, [Some(0), Some(response)], true);
        let want = AppFields::Http {
            method: "GET".into(),
            url: "/index.html?q=1".into(),
            hostname: Some("example.org".into()),
            status: Some(404),
        };
        assert_eq!(got.as_deref(), Some(&want));
        let cut = read(found("http"), &buffer[..40], [Some(0), None], true);
        assert!(matches!(cut.as_deref(), Some(AppFields::Http { hostname: None, status: None, .. })), "{cut:?}");
        assert_eq!(read(found("http"), b"GET /\r\n", [Some(0), None], true), None, "no version");
        assert_eq!(
            read(found("http"), b"HTTP/1.1 200 OK\r\n", [Some(0), None], true),
            None,
            "a response is no request"
        );
    }

    #[test]
    fn a_dns_query_gives_its_id_name_and_type_over_udp_and_tcp() {
        let mut udp = vec![0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        udp.extend_from_slice(b"\x07example\x03org\x00\x00\x1c\x00\x01");
        let want = AppFields::Dns { id: 0x1234, rrname: "example.org".into(), rrtype: 28 };
        assert_eq!(read(found("dns"), &udp, [Some(0), None], false).as_deref(), Some(&want));
        let mut tcp = (udp.len() as u16).to_be_bytes().to_vec();
        tcp.extend_from_slice(&udp);
        assert_eq!(read(found("dns"), &tcp, [Some(0), None], true).as_deref(), Some(&want));
        assert_eq!(read(found("dns"), &udp[..15], [Some(0), None], false), None, "a name cut short");
    }

    proptest::proptest! {
        /// Any bytes, either side, any protocol: a value or `None`, never a panic.
        #[test]
        fn any_bytes_are_read_without_panic(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..120),
            split in 0usize..130,
        ) {
            for name in ["dns", "http", "mdns"] {
                for tcp in [false, true] {
                    let _ = read(found(name), &bytes, [Some(0), Some(split)], tcp);
                }
            }
        }
    }
}
