//! Checks a pattern cannot make, run after a signature's pattern matched (see
//! [`super::Signature::check`]): lengths that must agree with the bytes there are, a checksum,
//! a list that must walk to its end. Each takes the bytes from the match's start and reads only
//! what is there (a cut buffer is refused or judged on what it holds, never a panic).

fn u16_at(b: &[u8], at: usize) -> Option<usize> {
    Some(usize::from(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?])))
}

fn u32_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_be_bytes([*b.get(at)?, *b.get(at + 1)?, *b.get(at + 2)?, *b.get(at + 3)?]) as usize)
}

fn u32_le_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u32::from_le_bytes([*b.get(at)?, *b.get(at + 1)?, *b.get(at + 2)?, *b.get(at + 3)?]) as usize)
}

/// SOCKS (RFC 1928): a SOCKS 5 message the buffer holds whole — a method selection (§3:
/// NMETHODS, then that many methods, each assigned or private) followed by nothing or by the
/// next SOCKS 5 message, the server's two-byte choice alone, or a request or reply (§4, §6)
/// whose address, of the type ATYP says, fits; SOCKS 4's forms as the pattern matched them.
pub fn socks(b: &[u8]) -> bool {
    if b.first() != Some(&5) {
        return true;
    }
    if b.len() < 3 {
        return b.len() == 2;
    }
    let n = usize::from(b[1]);
    let selection = n >= 1
        && b.get(2..2 + n).is_some_and(|m| m.iter().all(|&m| m <= 3 || (0x80..=0xfe).contains(&m)))
        && b.get(2 + n).is_none_or(|&next| next == 5);
    let address = match b.get(3) {
        Some(1) => Some(4),
        Some(4) => Some(16),
        Some(3) => b.get(4).map(|&len| 1 + usize::from(len)),
        _ => None,
    };
    let request = b[1] <= 8 && b[2] == 0 && address.is_some_and(|a| 4 + a + 2 <= b.len());
    selection || request
}

/// NTP (RFC 5905 §7.3): a client or server packet is a whole datagram of 48 bytes, or 52, 68
/// or 72 with its key id and digest; a control message (mode 6, RFC 9327 §2) has its count of
/// data within the datagram, followed by at most 3 bytes of padding and a 24-byte MAC.
pub fn ntp(b: &[u8]) -> bool {
    if b.first().is_none_or(|&first| first & 0x07 != 6) {
        return matches!(b.len(), 48 | 52 | 68 | 72);
    }
    let Some(count) = u16_at(b, 10) else { return false };
    count <= 468 && (12 + count..=12 + count + 3 + 24).contains(&b.len())
}

/// TFTP (RFC 1350 §5): a first DATA block holds at most 512 bytes, so the client's ACK of
/// block 1, if the buffer holds it, lies within the 516 bytes after the block's start.
pub fn tftp(b: &[u8]) -> bool {
    if !b.starts_with(&[0, 3, 0, 1]) {
        return true;
    }
    b.len() <= 516 || b[4..b.len().min(520)].windows(4).any(|w| w == [0, 4, 0, 1])
}

/// The magic cookie of RFC 8489 §5, which RFC 3489's messages do not have.
const STUN_COOKIE: [u8; 4] = [0x21, 0x12, 0xa4, 0x42];

/// A STUN message: with RFC 8489's magic cookie, as its pattern matched; without it, an RFC
/// 3489 message (§11.1) whose length the buffer holds and whose attributes (§11.2: a type, a
/// length, the value) walk exactly to that length. Types are RFC 3489's (0x0001–0x000b), those
/// IANA's STUN Attributes registry assigned below 0x0031 since (TURN's, XOR-MAPPED-ADDRESS
/// 0x0020, which RFC 3489 servers such as stund already send), or 0x8000 and above, which a
/// receiver may ignore.
pub fn stun(b: &[u8]) -> bool {
    if b.get(4..8) == Some(&STUN_COOKIE[..]) || b.get(6..10) == Some(&STUN_COOKIE[..]) {
        return true;
    }
    let Some(len) = u16_at(b, 2) else { return false };
    let end = 20 + len;
    if end > b.len() {
        return false;
    }
    let mut at = 20;
    while at < end {
        let (Some(kind), Some(n)) = (u16_at(b, at), u16_at(b, at + 2)) else { return false };
        if !(matches!(kind, 0x0001..=0x0030) || kind >= 0x8000) || at + 4 + n > end {
            return false;
        }
        at += 4 + n;
    }
    at == end
}

/// STUN over TCP (RFC 8489 §6.2.2): a message with the magic cookie, plain or after RFC 4571's
/// two-byte framing. RFC 3489's classic messages, without it, are sent in the clear over UDP
/// only (§8.1; its Shared Secret Requests go over TLS, §9.2).
pub fn stun_tcp(b: &[u8]) -> bool {
    b.get(4..8) == Some(&STUN_COOKIE[..]) || b.get(6..10) == Some(&STUN_COOKIE[..])
}

/// Modbus/TCP (Implementation Guide v1.0b §3.1.3): ADUs one after another, each an MBAP header
/// whose protocol id is 0 and whose length (2–254: unit id and PDU) the buffer holds, then a
/// public function code or its exception (Application Protocol v1.1b3 §5.1, §7). The last ADU
/// may be cut by the end of the buffer, the first may not.
pub fn modbus(b: &[u8]) -> bool {
    let public = |code: u8| matches!(code & 0x7f, 1..=8 | 11 | 12 | 15..=17 | 20..=24 | 43);
    let mut at = 0;
    while at < b.len() {
        let Some(adu) = b.get(at..at + 8) else { return at > 0 };
        let len = usize::from(u16::from_be_bytes([adu[4], adu[5]]));
        if adu[2..4] != [0, 0] || !(2..=254).contains(&len) || !public(adu[7]) {
            return false;
        }
        if at + 6 + len > b.len() {
            return at > 0;
        }
        at += 6 + len;
    }
    true
}

/// BitTorrent: the handshake, a DHT message or a tracker's connect request as the pattern
/// matched them; a uTP packet (BEP 29, "Header format") must be a SYN: version 1 and type
/// ST_SYN (the pattern), its extension chain whole (each a next-extension byte, a length, the
/// bytes), a timestamp difference of 0 (nothing received yet) and a non-zero window.
pub fn bittorrent(b: &[u8]) -> bool {
    if b.first() != Some(&0x41) {
        return true;
    }
    if b.len() < 20 || b[8..12] != [0; 4] || b[12..16] == [0; 4] {
        return false;
    }
    let (mut next, mut at) = (b[1], 20);
    while next != 0 {
        let (Some(&kind), Some(&n)) = (b.get(at), b.get(at + 1)) else { return false };
        if kind > 2 || at + 2 + usize::from(n) > b.len() {
            return false;
        }
        next = kind;
        at += 2 + usize::from(n);
    }
    true
}

/// WireGuard's transport data (whitepaper §5.4.6), where its pattern matched type 4: a whole
/// datagram of at least 32 bytes and a multiple of 16 (the 16-byte header, the padded packet,
/// the tag). The handshake messages' lengths are the pattern's.
pub fn wireguard(b: &[u8]) -> bool {
    b.first() != Some(&4) || (b.len() >= 32 && b.len().is_multiple_of(16))
}

/// Gnutella: a handshake line or a G2 packet's header as the pattern matched them (G2's part
/// at most its count); a descriptor (v0.4 §2.2.1) whose payload length fits the buffer and is
/// at least its kind's smallest payload (a Pong's 14 bytes, a Bye's code and NUL, a Push's 26,
/// a Query's speed and NUL, a QueryHit's 11-byte header and 16-byte servent id), a Ping's empty
/// or a GGEP block (magic 0xC3). What follows the descriptor, if anything, is another one's
/// header or a G2 packet: datagrams follow one another in the buffer.
pub fn gnutella(b: &[u8]) -> bool {
    if b.starts_with(b"GNUTELLA") {
        return true;
    }
    if b.starts_with(b"GND") {
        return b.len() > 8 && b[6] <= b[7];
    }
    descriptor(b).is_some_and(|end| end == b.len() || b[end..].starts_with(b"GND") || descriptor(&b[end..]).is_some())
}

/// Where the Gnutella descriptor at the start of `b` ends, if it is one.
fn descriptor(b: &[u8]) -> Option<usize> {
    let (kind, ttl, hops) = (*b.get(16)?, *b.get(17)?, *b.get(18)?);
    let len = u32_le_at(b, 19)?;
    if ttl == 0 || u16::from(ttl) + u16::from(hops) > 16 || len > b.len().saturating_sub(23) {
        return None;
    }
    let least = match kind {
        0x00 => 0,
        0x01 => 14,
        0x02 => 3,
        0x40 => 26,
        0x80 => 3,
        0x81 => 27,
        _ => return None,
    };
    let ping_ok = kind != 0 || len == 0 || b[23] == 0xc3;
    (len >= least && ping_ok).then_some(23 + len)
}

/// A Bitcoin message header ("P2P Network: Message Headers"): a 12-byte command of lower-case
/// ASCII then NULs only, then a payload size of at most 32 MiB (Bitcoin Core's MAX_SIZE).
pub fn bitcoin(b: &[u8]) -> bool {
    let Some(command) = b.get(4..16) else { return false };
    let letters = command.iter().take_while(|c| c.is_ascii_lowercase()).count();
    letters > 0 && command[letters..].iter().all(|&c| c == 0) && u32_le_at(b, 16).is_some_and(|n| n <= 32 << 20)
}

/// RTP (RFC 3550 §5.1): the fixed header and its CSRCs within the buffer, and the same
/// stream's next packet after it: a header of version 2 with the same payload type, the same
/// SSRC and a sequence number 1–8 ahead (modulo 2^16), within the buffer's first 4 KiB.
/// Datagrams are appended in the buffer without their boundaries, so each offset past the first
/// header is tried.
pub fn rtp(b: &[u8]) -> bool {
    let header = 12 + 4 * usize::from(b.first().map_or(0, |v| v & 0x0f));
    if header > b.len() {
        return false;
    }
    let (seq, ssrc) = (u16::from_be_bytes([b[2], b[3]]), &b[8..12]);
    let window = &b[..b.len().min(4096)];
    (header..window.len().saturating_sub(11)).any(|k| {
        let next = &window[k..k + 12];
        next[0] & 0xc0 == 0x80
            && next[1] & 0x7f == b[1] & 0x7f
            && next[8..12] == *ssrc
            && (1..=8).contains(&u16::from_be_bytes([next[2], next[3]]).wrapping_sub(seq))
    })
}

/// A SOME/IP message (PRS_SOMEIPProtocol §4.1.2): its length, which counts from the request id
/// on, at least the 8 bytes of the header's rest and no more than the buffer holds.
pub fn someip(b: &[u8]) -> bool {
    u32_at(b, 4).is_some_and(|len| len >= 8 && 8 + len <= b.len())
}

/// An RTCP compound packet (RFC 3550 §6.1, and the validity checks of its Appendix A.2): the
/// first packet an SR (at least 28 bytes) or an RR (at least 8), whole within the buffer; the
/// bytes after it, if any, another RTCP packet of version 2 with a payload type of 192–223
/// (RFC 5761 §4's range for RTCP).
pub fn rtcp(b: &[u8]) -> bool {
    let Some(words) = u16_at(b, 2) else { return false };
    let len = (words + 1) * 4;
    let least = if b[1] == 200 { 28 } else { 8 };
    if len < least || len > b.len() {
        return false;
    }
    b.get(len..len + 2).is_none_or(|next| next[0] & 0xc0 == 0x80 && (192..=223).contains(&next[1]))
}

/// DNP3's CRC over a data link header's first 8 bytes (IEEE 1815-2012 §9.2.1.2.7 and Annex
/// E: the polynomial 0x3D65, reflected, ones' complement of the remainder, sent low byte first).
fn dnp3_crc(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xa6bc } else { crc >> 1 };
        }
    }
    !crc
}

/// A DNP3 data link frame's header (IEEE 1815-2012 §9.2.1): start bytes, a length of 5 or
/// more, control, destination and source, then the CRC of those 8 bytes.
pub fn dnp3(b: &[u8]) -> bool {
    b.len() >= 10 && b[2] >= 5 && dnp3_crc(&b[..8]).to_le_bytes() == b[8..10]
}

/// IEC 60870-5-104 APDUs (IEC 60870-5-104 §5.1–5.4): each a start byte 0x68, a length of 4 to
/// 253, a control field whose first and third octets' low bits say I-format (0), S-format (01,
/// then a zero octet) or U-format (11, then zeros); an I-format APDU carries an ASDU of a type
/// from 1 to 127, at least one object and a known cause of transmission. Every whole APDU in
/// the buffer must be one, the first must be whole, and bytes after the last whole one must
/// start the next.
pub fn iec104(b: &[u8]) -> bool {
    let mut rest = b;
    let mut whole = 0;
    while rest.len() >= 6 {
        let len = usize::from(rest[1]);
        if rest[0] != 0x68 || !(4..=253).contains(&len) {
            return false;
        }
        let Some(apdu) = rest.get(..2 + len) else { break };
        let c = &apdu[2..6];
        let ok = match c[0] & 0x03 {
            0b01 => len == 4 && c[1] == 0 && c[2] & 1 == 0,
            0b11 => len == 4 && c[1] == 0 && c[2] == 0 && c[3] == 0,
            // The ASDU's type, then its cause of transmission, 1–47 (IEC 60870-5-101 §7.2.3).
            // The ASDU's type, a number of objects of 1 or more (its variable structure
            // qualifier, IEC 60870-5-101 §7.2.2), then its cause of transmission, 1–47 (§7.2.3).
            _ => {
                len >= 10
                    && c[2] & 1 == 0
                    && (1..=127).contains(&apdu[6])
                    && apdu[7] & 0x7f > 0
                    && (1..=47).contains(&(apdu[8] & 0x3f))
            }
        };
        if !ok {
            return false;
        }
        whole += 1;
        rest = &rest[2 + len..];
    }
    // What is left is the start of the next APDU, cut by the buffer.
    whole > 0 && rest.first().is_none_or(|&b| b == 0x68)
}

/// A Kafka request header (Kafka protocol guide, "Common Request and Response Structure" and
/// "Request Header"): a size of at least the header's, an API key and version, a correlation
/// id, then a client id (a nullable string: length -1, or that many printable bytes, within the
/// size). The client id's bytes are checked as far as the buffer holds them.
pub fn kafka(b: &[u8]) -> bool {
    let (Some(size), Some(id_len)) = (u32_at(b, 0), u16_at(b, 12)) else { return false };
    if id_len == 0xffff {
        return size >= 10;
    }
    let id = &b[14.min(b.len())..(14 + id_len).min(b.len())];
    size >= 10 + id_len && id.iter().all(u8::is_ascii_graphic)
}

/// An IKE message (RFC 7296 §3.1; RFC 2408 §3.1 for IKEv1), over UDP or after UDP 4500's
/// non-ESP marker of four zero bytes (RFC 3948 §2.2): its length, at octets 24–27 of the
/// header, is at least the header's 28 and no more than the buffer holds.
pub fn ike(b: &[u8]) -> bool {
    let fits = |m: &[u8]| u32_at(m, 24).is_some_and(|len| (28..=m.len()).contains(&len));
    fits(b) || (b.starts_with(&[0; 4]) && fits(&b[4..]))
}

/// A BACnet/IP BVLC message (ASHRAE 135-2020 Annex J.2): its length (octets 2–3) at least the
/// BVLC header's and no more than the buffer holds; where it carries an NPDU (Forwarded-NPDU
/// after the originating address, Distribute-Broadcast-To-Network, Original-Unicast- and
/// -Broadcast-NPDU), the NPDU's version 1 and a control octet with its reserved bits 6 and 4
/// clear (clause 6.2.2).
pub fn bacnet(b: &[u8]) -> bool {
    let Some(len) = u16_at(b, 2) else { return false };
    let npdu = match b[1] {
        0x04 => Some(10),
        0x09..=0x0b => Some(4),
        _ => None,
    };
    let least = npdu.map_or(4, |at| at + 2);
    if len < least || len > b.len() {
        return false;
    }
    npdu.is_none_or(|at| b[at] == 0x01 && b[at + 1] & 0x50 == 0)
}

/// QUIC versions a version negotiation packet may list (RFC 9000 §15): 1, 2 (RFC 9369 §3.1),
/// the IETF drafts (0xff0000xx), Google's (`Q0xx`, `T0xx`: Chromium's quic_versions.h), and
/// the greasing versions 0x?a?a?a?a (§15).
fn quic_version(v: [u8; 4]) -> bool {
    let n = u32::from_be_bytes(v);
    matches!(n, 1 | 0x6b33_43cf)
        || n & 0xffff_ff00 == 0xff00_0000
        || (matches!(v[0], b'Q' | b'T') && v[1..].iter().all(u8::is_ascii_digit))
        || n & 0x0f0f_0f0f == 0x0a0a_0a0a
}

/// A QUIC long-header packet; for a version negotiation packet (version 0, RFC 9000 §17.2.1),
/// connection ids of at most 20 bytes (§17.2) within the buffer, then a list of whole versions,
/// every one a QUIC version.
pub fn quic(b: &[u8]) -> bool {
    if b.get(1..5) != Some(&[0; 4]) {
        return true;
    }
    let Some(&dcid) = b.get(5) else { return false };
    let Some(&scid) = b.get(6 + usize::from(dcid)) else { return false };
    let versions = b.get(7 + usize::from(dcid) + usize::from(scid)..).unwrap_or_default();
    dcid <= 20
        && scid <= 20
        && !versions.is_empty()
        && versions.len().is_multiple_of(4)
        && versions.chunks_exact(4).all(|v| quic_version([v[0], v[1], v[2], v[3]]))
}

/// DHCPv6 options (RFC 8415 §21.1): after a client or server message's 4-byte header (§8), or
/// a relay message's 34 (§9), each option a code of 1 or more and a length its data fits. The
/// options must walk to the buffer's end (a datagram ends where its last option does); a relay
/// message must carry its Relay Message option (9) or an Interface-Id (18).
pub fn dhcpv6(b: &[u8]) -> bool {
    let Some(&kind) = b.first() else { return false };
    let relay = matches!(kind, 12 | 13);
    let mut at = if relay { 34 } else { 4 };
    let mut codes = Vec::new();
    while at < b.len() {
        let (Some(code), Some(len)) = (u16_at(b, at), u16_at(b, at + 2)) else { return false };
        if code == 0 || at + 4 + len > b.len() {
            return false;
        }
        codes.push(code);
        at += 4 + len;
    }
    !codes.is_empty() && (!relay || codes.iter().any(|c| matches!(c, 9 | 18)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dnp3_s_crc_is_the_standard_s() {
        // The check value of CRC-16/DNP in Greg Cook's catalogue of parametrised CRCs.
        assert_eq!(dnp3_crc(b"123456789"), 0xea82);
        // A master's Reset Link States to outstation 1 (control 0xC0), CRC E9 21 low byte first.
        assert_eq!(dnp3_crc(b"\x05\x64\x05\xc0\x01\x00\x00\x04").to_le_bytes(), [0xe9, 0x21]);
        assert!(dnp3(b"\x05\x64\x05\xc0\x01\x00\x00\x04\xe9\x21"));
        assert!(!dnp3(b"\x05\x64\x05\xc0\x01\x00\x00\x04\xe9\x22"));
        assert!(!dnp3(b"\x05\x64\x05\xc0"), "cut");
    }

    #[test]
    fn lengths_that_do_not_fit_the_bytes_are_refused() {
        assert!(iec104(b"\x68\x04\x07\x00\x00\x00"));
        assert!(!iec104(b"\x68\x04\x07\x00\x00\x01"), "a U-format with a bit set where zeros go");
        assert!(iec104(b"\x68\x04\x07\x00\x00\x00\x68\x04"), "a second APDU cut by the buffer");
        assert!(!iec104(b"\x68\x04\x07\x00\x00\x00\x68\x02\x00\x00\x00\x00"), "a second APDU too short");
        assert!(!rtcp(b"\x80\xc9\x00\x07\x00\x00\x00\x01"), "longer than the buffer");
        assert!(rtcp(b"\x80\xc9\x00\x01\x00\x00\x00\x01"));
        assert!(!ike(&[0x11; 40]));
        assert!(!bacnet(b"\x81\x0a\x00\x30\x01\x00"), "48 bytes said, 6 there");
        assert!(!kafka(b"\x00\x00\x00\x05\x00\x12\x00\x03\x00\x00\x00\x01\x00\x04ab"), "smaller than its header");
        assert!(!dhcpv6(b"\x01\x10\x20\x30\x00\x01\x00\x20\x00"), "an option longer than the datagram");
    }

    /// Random bytes that opened 0x68 and a length were named `iec104` (found by
    /// `random_bytes_are_rarely_claimed`): an I-format ASDU of no objects, then 5 bytes that
    /// start no APDU.
    #[test]
    fn iec104_refuses_an_asdu_without_objects_and_bytes_that_start_no_apdu() {
        let mut b = vec![0x68, 0x2a, 0x30, 0x00, 0x5a, 0x00, 0x01, 0x00, 0x01];
        b.resize(49, 0);
        assert!(!iec104(&b));
        b[7] = 1;
        assert!(!iec104(&b), "one object, but 5 bytes after the APDU that are not 0x68");
        b.truncate(44);
        assert!(iec104(&b));
    }

    proptest::proptest! {
        /// Every signature's check returns on any bytes, whatever its pattern would have said
        /// of them (as the fuzz target also runs them).
        #[test]
        fn checks_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            for check in crate::inspect::SIGNATURES.iter().flat_map(|s| s.check.into_iter().chain(s.check_tcp)) {
                let _ = check(&bytes);
            }
            let _ = crate::inspect::dns::question(&bytes);
            let _ = descriptor(&bytes);
        }
    }

    #[test]
    fn a_version_negotiation_lists_quic_versions() {
        let mut vn = b"\x80\x00\x00\x00\x00\x08\x11\x22\x33\x44\x55\x66\x77\x88\x00".to_vec();
        vn.extend_from_slice(b"\x00\x00\x00\x01\xff\x00\x00\x1d\x1a\x2a\x3a\x4a");
        assert!(quic(&vn));
        vn.extend_from_slice(b"\x12\x34\x56\x78");
        assert!(!quic(&vn), "not a version");
        assert!(!quic(b"\x80\x00\x00\x00\x00\x30\x11"), "a connection id longer than 20");
    }
}
