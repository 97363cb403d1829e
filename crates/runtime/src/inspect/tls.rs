//! What a TLS handshake shows in the clear: the ClientHello's server name (SNI, RFC 6066 §3),
//! ALPN protocols and offered versions (RFC 8446 §4.1.2), its JA4 fingerprint, and the version a
//! ServerHello negotiated (§4.1.3). Every length is checked against what is there: a cut or
//! forged hello gives `None` or leaves a part out, never a panic (fuzzed with the other parsers
//! of outside input).

/// Reads `n` bytes from the front of `b`.
fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if b.len() < n {
        return None;
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Some(head)
}

fn u8_len(b: &mut &[u8]) -> Option<usize> {
    take(b, 1).map(|x| usize::from(x[0]))
}

fn u16_len(b: &mut &[u8]) -> Option<usize> {
    take(b, 2).map(|x| usize::from(u16::from_be_bytes([x[0], x[1]])))
}

/// What a ClientHello offers (RFC 8446 §4.1.2), as read from the handshake record that opens a
/// buffer: the parts users ask for and that a JA4 fingerprint is made of.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHello<'a> {
    /// `legacy_version` (0x0303 for TLS 1.2 and 1.3).
    pub legacy_version: u16,
    /// Cipher suites, in the client's order.
    pub ciphers: Vec<u16>,
    /// Extension types, in the client's order.
    pub extensions: Vec<u16>,
    /// The host name of `server_name` (RFC 6066 §3), if it has one that is printable ASCII.
    pub server_name: Option<&'a str>,
    /// `application_layer_protocol_negotiation`'s protocols (RFC 7301 §3.1), in order.
    pub alpn: Vec<&'a [u8]>,
    /// `supported_versions` (RFC 8446 §4.2.1), in order.
    pub versions: Vec<u16>,
    /// `signature_algorithms` (RFC 8446 §4.2.3), in order.
    pub signature_algorithms: Vec<u16>,
}

/// A list of big-endian u16s.
fn u16s(b: &[u8]) -> Option<Vec<u16>> {
    (b.len().is_multiple_of(2)).then(|| b.chunks_exact(2).map(|x| u16::from_be_bytes([x[0], x[1]])).collect())
}

/// The body of the handshake message of type `kind` in the record that opens `buffer`, as far
/// as the buffer goes, and the length its header gives (RFC 8446 §5.1, §4).
fn handshake(buffer: &[u8], kind: u8) -> Option<(&[u8], usize)> {
    let mut b = buffer;
    if take(&mut b, 5)?[0] != 0x16 {
        return None;
    }
    let header = take(&mut b, 4)?;
    (header[0] == kind)
        .then(|| (b, usize::from(header[1]) << 16 | usize::from(header[2]) << 8 | usize::from(header[3])))
}

/// The ClientHello in the handshake record that opens `buffer`. The hello may be cut short by
/// the buffer, as long as its extensions' block starts within it; an extension cut short, and
/// those after it, are left out.
pub fn client_hello(buffer: &[u8]) -> Option<ClientHello<'_>> {
    let (mut b, _) = handshake(buffer, 0x01)?;
    let version = take(&mut b, 2)?;
    let mut hello =
        ClientHello { legacy_version: u16::from_be_bytes([version[0], version[1]]), ..ClientHello::default() };
    take(&mut b, 32)?; // random
    let n = u8_len(&mut b)?;
    take(&mut b, n)?; // legacy_session_id
    let n = u16_len(&mut b)?;
    hello.ciphers = u16s(take(&mut b, n)?)?;
    let n = u8_len(&mut b)?;
    take(&mut b, n)?; // legacy_compression_methods
    let n = u16_len(&mut b)?;
    let mut exts = &b[..n.min(b.len())];
    while let (Some(kind), Some(n)) = (take(&mut exts, 2), u16_len(&mut exts)) {
        let Some(body) = take(&mut exts, n) else { break };
        let kind = u16::from_be_bytes([kind[0], kind[1]]);
        hello.extensions.push(kind);
        // A malformed extension's contents are left out; its type still counts.
        match kind {
            0x0000 => hello.server_name = sni(body),
            0x0010 => hello.alpn = alpn(body).unwrap_or_default(),
            0x002b => hello.versions = prefixed(body, 1).and_then(u16s).unwrap_or_default(),
            0x000d => hello.signature_algorithms = prefixed(body, 2).and_then(u16s).unwrap_or_default(),
            _ => {}
        }
    }
    Some(hello)
}

/// The contents of a vector with a `len`-byte length prefix that fills `body`.
fn prefixed(mut body: &[u8], len: usize) -> Option<&[u8]> {
    let n = if len == 1 { u8_len(&mut body)? } else { u16_len(&mut body)? };
    (n == body.len()).then_some(body)
}

fn sni(body: &[u8]) -> Option<&str> {
    let mut list = prefixed(body, 2)?;
    while !list.is_empty() {
        let name_type = take(&mut list, 1)?[0];
        let n = u16_len(&mut list)?;
        let name = take(&mut list, n)?;
        if name_type == 0 {
            let name = std::str::from_utf8(name).ok()?;
            return name.bytes().all(|c| c.is_ascii_graphic()).then_some(name);
        }
    }
    None
}

fn alpn(body: &[u8]) -> Option<Vec<&[u8]>> {
    let mut list = prefixed(body, 2)?;
    let mut out = Vec::new();
    while !list.is_empty() {
        let n = u8_len(&mut list)?;
        out.push(take(&mut list, n)?);
    }
    Some(out)
}

/// The host name in the ClientHello that opens `buffer`, if it has one. The hello may be cut
/// short by the buffer; whatever lies before the name must be whole.
pub fn server_name(buffer: &[u8]) -> Option<&str> {
    client_hello(buffer)?.server_name
}

/// What a ServerHello chose (RFC 8446 §4.1.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerHello<'a> {
    /// The version negotiated: `supported_versions`'s selected version (TLS 1.3, §4.2.1), else
    /// `legacy_version` (TLS 1.2 and before).
    pub version: u16,
    /// The cipher suite chosen.
    pub cipher: u16,
    /// The protocol ALPN chose, where the ServerHello carries it (TLS 1.2; TLS 1.3 sends it in
    /// EncryptedExtensions, which a capture cannot read).
    pub alpn: Option<&'a [u8]>,
}

/// The ServerHello in the handshake record that opens `buffer`, if it is whole.
/// A HelloRetryRequest (a ServerHello with RFC 8446 §4.1.3's special random) is none: it
/// negotiates nothing yet.
pub fn server_hello(buffer: &[u8]) -> Option<ServerHello<'_>> {
    const RETRY: [u8; 8] = [0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e];
    let (mut b, length) = handshake(buffer, 0x02)?;
    // Whole, or nothing: a hello cut before its extensions would read as one without any.
    let mut b = take(&mut b, length)?;
    let version = take(&mut b, 2)?;
    let random = take(&mut b, 32)?;
    if random[..8] == RETRY {
        return None;
    }
    let n = u8_len(&mut b)?;
    take(&mut b, n)?; // legacy_session_id_echo
    let cipher = take(&mut b, 2)?;
    take(&mut b, 1)?; // legacy_compression_method
    let mut hello = ServerHello {
        version: u16::from_be_bytes([version[0], version[1]]),
        cipher: u16::from_be_bytes([cipher[0], cipher[1]]),
        alpn: None,
    };
    // TLS 1.2 and before may send no extensions at all.
    let Some(n) = u16_len(&mut b) else { return Some(hello) };
    let mut exts = take(&mut b, n)?;
    while !exts.is_empty() {
        let kind = take(&mut exts, 2)?;
        let n = u16_len(&mut exts)?;
        let body = take(&mut exts, n)?;
        match u16::from_be_bytes([kind[0], kind[1]]) {
            0x002b if body.len() == 2 => hello.version = u16::from_be_bytes([body[0], body[1]]),
            0x0010 => hello.alpn = alpn(body).and_then(|l| l.first().copied()),
            _ => {}
        }
    }
    Some(hello)
}

/// A version's name: `1.3`, `1.2`, … (`ssl3`), or its number in hex.
pub fn version_name(version: u16) -> String {
    match version {
        0x0304 => "1.3".into(),
        0x0303 => "1.2".into(),
        0x0302 => "1.1".into(),
        0x0301 => "1.0".into(),
        0x0300 => "ssl3".into(),
        v => format!("0x{v:04x}"),
    }
}

/// Whether `v` is a GREASE value (RFC 8701 §2): both bytes alike, each `0x?a`.
fn grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// The JA4 TLS client fingerprint of `hello` over TCP (FoxIO's JA4 specification, "JA4: TLS
/// Client Fingerprinting"): `a_b_c`, where
/// - `a` is `t`, the highest non-GREASE `supported_versions` entry (else `legacy_version`) as
///   `13`, `12`, …, `d` with a server name extension or `i` without, the counts of cipher
///   suites and of extensions (GREASE left out, at most 99), and the first and last character
///   of the first ALPN protocol (`00` with none; their hex digits where either is not
///   alphanumeric);
/// - `b` is the first 12 hex digits of the SHA-256 of the cipher suites, sorted, as 4-digit
///   hex joined by commas (`000000000000` with none);
/// - `c` the same of the extensions, sorted, without server name and ALPN, then `_` and the
///   signature algorithms in the client's order (without the `_` part where there are none;
///   `000000000000` with no extensions).
pub fn ja4(hello: &ClientHello<'_>) -> String {
    use sha2::Digest;
    let version = hello.versions.iter().copied().filter(|&v| !grease(v)).max().unwrap_or(hello.legacy_version);
    let version = match version {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        _ => "00",
    };
    let ciphers: Vec<u16> = hello.ciphers.iter().copied().filter(|&c| !grease(c)).collect();
    let extensions: Vec<u16> = hello.extensions.iter().copied().filter(|&e| !grease(e)).collect();
    let sni = if extensions.contains(&0x0000) { 'd' } else { 'i' };
    let alpn = match hello.alpn.first().copied() {
        Some(&[first, .., last]) | Some(&[first @ last])
            if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() =>
        {
            format!("{}{}", first as char, last as char)
        }
        Some(&[first, .., last]) | Some(&[first @ last]) => {
            let hex = |b: u8| char::from_digit(u32::from(b), 16).unwrap_or('0');
            format!("{}{}", hex(first >> 4), hex(last & 0x0f))
        }
        _ => "00".into(),
    };
    let hex_list = |v: &[u16]| v.iter().map(|x| format!("{x:04x}")).collect::<Vec<_>>().join(",");
    let hash12 = |text: &str| {
        if text.is_empty() {
            return "000000000000".to_string();
        }
        sha2::Sha256::digest(text.as_bytes()).iter().take(6).map(|b| format!("{b:02x}")).collect()
    };
    let mut sorted_ciphers = ciphers.clone();
    sorted_ciphers.sort_unstable();
    let mut sorted_exts: Vec<u16> = extensions.iter().copied().filter(|&e| e != 0x0000 && e != 0x0010).collect();
    sorted_exts.sort_unstable();
    let sigs: Vec<u16> = hello.signature_algorithms.iter().copied().filter(|&s| !grease(s)).collect();
    let c = if sorted_exts.is_empty() {
        String::new()
    } else if sigs.is_empty() {
        hex_list(&sorted_exts)
    } else {
        format!("{}_{}", hex_list(&sorted_exts), hex_list(&sigs))
    };
    format!(
        "t{version}{sni}{:02}{:02}{alpn}_{}_{}",
        ciphers.len().min(99),
        extensions.len().min(99),
        hash12(&hex_list(&sorted_ciphers)),
        hash12(&c)
    )
}

/// What a TLS connection's handshake showed, gathered from its buffer as it grows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The ClientHello's server name.
    pub server_name: Option<String>,
    /// The ClientHello's ALPN protocols, in order (lossy UTF-8).
    pub alpn: Vec<String>,
    /// The ClientHello's JA4 fingerprint.
    pub ja4: Option<String>,
    /// The version the ServerHello negotiated.
    pub version: Option<u16>,
    /// The protocol the ServerHello's ALPN chose (TLS 1.2 only: 1.3 hides it).
    pub chosen_alpn: Option<String>,
}

impl Seen {
    /// Reads the hellos that open either direction's bytes in `buffer` (`starts`: where the
    /// client's and the server's first bytes lie). Returns whether the ServerHello is still to
    /// come, so that the connection's later buffers are worth reading.
    pub fn read(&mut self, buffer: &[u8], starts: [Option<usize>; 2]) -> bool {
        for at in starts.into_iter().flatten().filter(|&at| at < buffer.len()) {
            let bytes = &buffer[at..];
            if self.ja4.is_none()
                && let Some(hello) = client_hello(bytes)
            {
                self.server_name = hello.server_name.map(str::to_owned);
                self.alpn = hello.alpn.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect();
                self.ja4 = Some(ja4(&hello));
            }
            if self.version.is_none()
                && let Some(hello) = server_hello(bytes)
            {
                self.version = Some(hello.version);
                self.chosen_alpn = hello.alpn.map(|p| String::from_utf8_lossy(p).into_owned());
            }
        }
        self.version.is_none()
    }
}

/// A TLS 1.3-style ClientHello, with a server_name extension when `sni` is given.
pub fn sample_client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut exts = Vec::new();
    exts.extend_from_slice(&[0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]); // supported_versions
    if let Some(name) = sni {
        let n = name.len() as u16;
        exts.extend_from_slice(&[0x00, 0x00]);
        exts.extend_from_slice(&(n + 5).to_be_bytes());
        exts.extend_from_slice(&(n + 3).to_be_bytes());
        exts.push(0);
        exts.extend_from_slice(&n.to_be_bytes());
        exts.extend_from_slice(name.as_bytes());
    }
    let mut hello = vec![0x03, 0x03];
    hello.extend_from_slice(&[0x5a; 32]);
    hello.push(0);
    hello.extend_from_slice(&[0x00, 0x02, 0x13, 0x01]);
    hello.extend_from_slice(&[0x01, 0x00]);
    hello.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    hello.extend_from_slice(&exts);
    let mut hs = vec![0x01];
    hs.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&hello);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_read_and_damage_gives_none() {
        let hello = sample_client_hello(Some("www.example.org"));
        assert_eq!(server_name(&hello), Some("www.example.org"));
        assert_eq!(server_name(&sample_client_hello(None)), None);
        for cut in 0..hello.len() {
            assert!(server_name(&hello[..cut]).is_none(), "cut at {cut}");
        }
        let mut forged = hello.clone();
        let at = forged.len() - 15 - 2;
        forged[at] = 0xff; // a name length far past the end
        assert_eq!(server_name(&forged), None);
    }

    /// FoxIO's worked example (JA4 README, "JA4: TLS Client Fingerprinting"): Chrome's hello,
    /// with GREASE values added that must be left out.
    #[test]
    fn ja4_of_the_published_example() {
        let ids = |s: &str| s.split(',').map(|x| u16::from_str_radix(x, 16).expect("hex")).collect::<Vec<u16>>();
        let mut ciphers = ids("1301,1302,1303,c02b,c02f,c02c,c030,cca9,cca8,c013,c014,009c,009d,002f,0035");
        ciphers.insert(0, 0x3a3a);
        let mut extensions = ids("001b,0000,0033,0010,4469,0017,002d,000d,0005,0023,0012,002b,ff01,000b,000a,0015");
        extensions.insert(0, 0x9a9a);
        extensions.push(0xdada);
        let hello = ClientHello {
            legacy_version: 0x0303,
            ciphers,
            extensions,
            server_name: Some("example.org"),
            alpn: vec![b"h2", b"http/1.1"],
            versions: vec![0x1a1a, 0x0304, 0x0303],
            signature_algorithms: ids("0403,0804,0401,0503,0805,0501,0806,0601"),
        };
        assert_eq!(ja4(&hello), "t13d1516h2_8daaf6152771_e5627efa2ab1");
        let bare = ClientHello { legacy_version: 0x0301, ..ClientHello::default() };
        assert_eq!(ja4(&bare), "t10i000000_000000000000_000000000000");
        let odd_alpn = ClientHello { alpn: vec![b"\x01x\xff"], ..bare };
        assert_eq!(ja4(&odd_alpn), "t10i00000f_000000000000_000000000000", "hex digits of a non-alphanumeric ALPN");
    }

    fn server_hello_bytes(version_ext: Option<u16>) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[0x11; 32]);
        body.extend_from_slice(&[0x00, 0x13, 0x01, 0x00]);
        if let Some(v) = version_ext {
            body.extend_from_slice(&[0x00, 0x06, 0x00, 0x2b, 0x00, 0x02]);
            body.extend_from_slice(&v.to_be_bytes());
        }
        let mut rec = vec![0x16, 0x03, 0x03];
        rec.extend_from_slice(&(body.len() as u16 + 4).to_be_bytes());
        rec.extend_from_slice(&[0x02, 0x00]);
        rec.extend_from_slice(&(body.len() as u16).to_be_bytes());
        rec.extend_from_slice(&body);
        rec
    }

    #[test]
    fn the_negotiated_version_is_read_from_the_server_s_bytes() {
        let hello = sample_client_hello(Some("example.org"));
        let server = server_hello_bytes(Some(0x0304));
        let buffer = [&hello[..], &server[..]].concat();
        let mut seen = Seen::default();
        assert!(seen.read(&hello, [Some(0), None]), "the ServerHello is still to come");
        assert_eq!(seen.server_name.as_deref(), Some("example.org"));
        assert!(seen.ja4.as_deref().is_some_and(|j| j.starts_with("t13d010200_")), "{:?}", seen.ja4);
        assert!(!seen.read(&buffer, [Some(0), Some(hello.len())]));
        assert_eq!(seen.version.map(version_name).as_deref(), Some("1.3"));
        assert_eq!(
            server_hello(&server_hello_bytes(None)).map(|h| h.version),
            Some(0x0303),
            "TLS 1.2 by legacy_version"
        );
        let mut retry = server_hello_bytes(Some(0x0304));
        retry[11..19].copy_from_slice(&[0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e]);
        assert_eq!(server_hello(&retry), None, "a HelloRetryRequest negotiates nothing");
        for cut in 0..server.len() {
            assert_eq!(
                server_hello(&server[..cut]).map(|h| h.version),
                None.or((cut >= server.len()).then_some(0x0304))
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_safe(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = server_name(&bytes);
            let _ = server_hello(&bytes);
            if let Some(hello) = client_hello(&bytes) {
                let _ = ja4(&hello);
            }
            let mut seen = Seen::default();
            let _ = seen.read(&bytes, [Some(0), Some(bytes.len() / 2)]);
        }
    }
}
