//! The server name a TLS client asks for (SNI, RFC 6066 §3), read from its ClientHello
//! (RFC 8446 §4.1.2). Every length is checked against what is there: a cut or forged hello gives
//! `None`, never a panic (fuzzed with the other parsers of outside input).

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

/// The host name in the ClientHello that opens `buffer`, if it has one. The hello may be cut
/// short by the buffer; whatever lies before the name must be whole.
pub fn server_name(buffer: &[u8]) -> Option<&str> {
    let mut b = buffer;
    let record = take(&mut b, 5)?;
    if record[0] != 0x16 {
        return None;
    }
    let header = take(&mut b, 4)?;
    if header[0] != 0x01 {
        return None;
    }
    take(&mut b, 2 + 32)?; // legacy_version, random
    let n = u8_len(&mut b)?;
    take(&mut b, n)?; // legacy_session_id
    let n = u16_len(&mut b)?;
    take(&mut b, n)?; // cipher_suites
    let n = u8_len(&mut b)?;
    take(&mut b, n)?; // legacy_compression_methods
    let n = u16_len(&mut b)?;
    let mut exts = &b[..n.min(b.len())];
    while !exts.is_empty() {
        let kind = take(&mut exts, 2)?;
        let n = u16_len(&mut exts)?;
        let mut body = take(&mut exts, n)?;
        if kind != [0, 0] {
            continue;
        }
        let n = u16_len(&mut body)?;
        let mut list = take(&mut body, n)?;
        while !list.is_empty() {
            let name_type = take(&mut list, 1)?[0];
            let n = u16_len(&mut list)?;
            let name = take(&mut list, n)?;
            if name_type == 0 {
                let name = std::str::from_utf8(name).ok()?;
                return name.bytes().all(|c| c.is_ascii_graphic()).then_some(name);
            }
        }
        return None;
    }
    None
}

/// A TLS 1.3-style ClientHello, with a server_name extension when `sni` is given.
pub fn client_hello(sni: Option<&str>) -> Vec<u8> {
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
        let hello = client_hello(Some("www.example.org"));
        assert_eq!(server_name(&hello), Some("www.example.org"));
        assert_eq!(server_name(&client_hello(None)), None);
        for cut in 0..hello.len() {
            assert!(server_name(&hello[..cut]).is_none(), "cut at {cut}");
        }
        let mut forged = hello.clone();
        let at = forged.len() - 15 - 2;
        forged[at] = 0xff; // a name length far past the end
        assert_eq!(server_name(&forged), None);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_are_safe(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = server_name(&bytes);
        }
    }
}
