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
/// from 1 to 127 and a known cause of transmission. Every whole APDU in the buffer must be one; the first must be whole.
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
            _ => len >= 10 && c[2] & 1 == 0 && (1..=127).contains(&apdu[6]) && (1..=47).contains(&(apdu[8] & 0x3f)),
        };
        if !ok {
            return false;
        }
        whole += 1;
        rest = &rest[2 + len..];
    }
    whole > 0
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

    proptest::proptest! {
        /// Every signature's check returns on any bytes, whatever its pattern would have said
        /// of them (as the fuzz target also runs them).
        #[test]
        fn checks_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            for check in crate::inspect::SIGNATURES.iter().filter_map(|s| s.check) {
                let _ = check(&bytes);
            }
            let _ = crate::inspect::dns::question(&bytes);
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
