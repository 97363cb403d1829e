//! From a captured frame to a flow key and a transport payload.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use switchyard_core::flow::FiveTuple;

use crate::glimpse::Glimpse;

/// Link-layer types this reader decodes (tcpdump.org LINKTYPE_ values).
pub(crate) const ETHERNET: i32 = 1;
const NULL: i32 = 0;
const RAW: i32 = 101;
const LINUX_SLL: i32 = 113;
const IPV4: i32 = 228;
const IPV6: i32 = 229;

/// A decoded packet: its 5-tuple as seen on the wire (source first) and its transport payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Protocol, source and destination.
    pub key: FiveTuple,
    /// The TCP or UDP payload (as captured: it may be cut short by the snap length).
    pub payload: &'a [u8],
    /// TCP's sequence number and flags (`None` for UDP).
    pub tcp: Option<Tcp>,
    /// The IP datagram's length as its header gives it (IPv4's total length; IPv6's payload
    /// length and its 40-byte header): what flow records count as `octetDeltaCount` (IANA IE 1),
    /// which leaves out the link header and an Ethernet frame's padding.
    pub ip_len: u32,
}

/// What reassembly needs of a TCP header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tcp {
    /// Sequence number of the first payload byte (of the SYN itself when `syn`).
    pub seq: u32,
    /// SYN: the sequence starts here, and payload begins at `seq + 1`.
    pub syn: bool,
    /// FIN: the sender has no more to send.
    pub fin: bool,
    /// RST: the connection is torn down.
    pub rst: bool,
}

/// Why a packet was left out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Skip {
    /// The capture's link type is not one this reader decodes.
    UnsupportedLink,
    /// Headers are cut short or inconsistent.
    Malformed,
    /// Not IPv4 or IPv6 (ARP, LLDP, …).
    NotIp,
    /// IP, but neither TCP nor UDP (ICMP, IGMP, …).
    NotTcpOrUdp,
    /// An IP fragment: its ports are not in this packet (fragments are not reassembled).
    Fragment,
    /// The capture ended inside a record.
    TruncatedRecord,
}

impl Skip {
    /// Every reason, in the order reports list them.
    pub const ALL: [Self; 6] =
        [Self::UnsupportedLink, Self::Malformed, Self::NotIp, Self::NotTcpOrUdp, Self::Fragment, Self::TruncatedRecord];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::UnsupportedLink => "unsupported link type",
            Self::Malformed => "malformed headers",
            Self::NotIp => "not IP",
            Self::NotTcpOrUdp => "not TCP or UDP",
            Self::Fragment => "IP fragment",
            Self::TruncatedRecord => "truncated record",
        }
    }
}

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Ethernet carrying a PPPoE session (EtherType 0x8864, RFC 2516), as DSL captures do.
fn pppoe_session(frame: &[u8]) -> bool {
    frame.get(12..14) == Some(&[0x88, 0x64])
}

/// The IP packet inside a PPPoE session frame: after the 14-byte Ethernet header, the 6-byte
/// PPPoE header and the 2-byte PPP protocol, which must be IPv4 (0x0021) or IPv6 (0x0057).
fn pppoe_ip(frame: &[u8]) -> Result<&[u8], Skip> {
    match frame.get(20..22) {
        Some([0x00, 0x21] | [0x00, 0x57]) => Ok(&frame[22..]),
        Some(_) => Err(Skip::NotIp),
        None => Err(Skip::Malformed),
    }
}

/// Decodes one frame of link type `linktype`.
pub fn decode(linktype: i32, frame: &[u8]) -> Result<Decoded<'_>, Skip> {
    if linktype == ETHERNET
        && let Some(d) = plain_ipv4(frame)
    {
        return Ok(d);
    }
    thorough(linktype, frame)
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The common case, read directly: Ethernet II, IPv4 not fragmented, TCP or UDP, every length
/// consistent. Anything else (VLAN tags, IPv6, fragments, odd lengths, damage) is `None` and
/// goes to [`thorough`], etherparse's full slicing, which this must agree with wherever it
/// answers (a proptest and the `decode` fuzz target check that).
///
/// Why by hand: the producer reads every packet, and etherparse's general slicing (every link
/// and extension header it knows, each checked) was a quarter of reading a packet; this reads
/// the dozen fields the dispatcher needs.
fn plain_ipv4(frame: &[u8]) -> Option<Decoded<'_>> {
    Plain::of(frame).map(Plain::decoded)
}

/// A plain frame's fields ([`plain_ipv4`]'s case), before they are made into a [`Decoded`]:
/// a reader that only needs to know whose packet it is reads these and stops (the wide
/// [`FiveTuple`] and [`Decoded`] cost more to build and move than the fields cost to read).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plain<'a> {
    proto: u8,
    src: u32,
    sport: u16,
    dst: u32,
    dport: u16,
    payload: &'a [u8],
    tcp: Option<Tcp>,
    ip_len: u16,
}

impl<'a> Plain<'a> {
    /// The fields of an Ethernet II frame that [`plain_ipv4`] reads directly, `None` for any
    /// other frame.
    #[inline]
    pub(crate) fn of(frame: &'a [u8]) -> Option<Self> {
        const ETH: usize = 14;
        if frame.len() < ETH + 20 || be16(frame, 12) != 0x0800 {
            return None;
        }
        let ip = &frame[ETH..];
        let (version, ihl) = (ip[0] >> 4, usize::from(ip[0] & 0x0f) * 4);
        let total = usize::from(be16(ip, 2));
        let fragmented = be16(ip, 6) & 0x3fff != 0;
        if version != 4 || ihl < 20 || total < ihl || total > ip.len() || fragmented {
            return None;
        }
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let l4 = &ip[ihl..total];
        let (proto, sport, dport, payload, tcp) = match ip[9] {
            6 if l4.len() >= 20 => {
                let offset = usize::from(l4[12] >> 4) * 4;
                if offset < 20 || offset > l4.len() {
                    return None;
                }
                let flags = l4[13];
                let seq = u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]);
                let tcp = Tcp { seq, syn: flags & 0x02 != 0, fin: flags & 0x01 != 0, rst: flags & 0x04 != 0 };
                (6, be16(l4, 0), be16(l4, 2), &l4[offset..], Some(tcp))
            }
            17 if l4.len() >= 8 && usize::from(be16(l4, 4)) == l4.len() => {
                (17, be16(l4, 0), be16(l4, 2), &l4[8..], None)
            }
            _ => return None,
        };
        Some(Self { proto, src, sport, dst, dport, payload, tcp, ip_len: total as u16 })
    }

    /// Whose packet this is, either way round.
    #[inline]
    pub(crate) fn glimpse(&self) -> Glimpse {
        Glimpse::v4(self.proto, self.src, self.sport, self.dst, self.dport)
    }

    #[inline]
    pub(crate) fn decoded(self) -> Decoded<'a> {
        let key = FiveTuple::v4(self.proto, self.src, self.sport, self.dst, self.dport);
        Decoded { key, payload: self.payload, tcp: self.tcp, ip_len: u32::from(self.ip_len) }
    }
}

/// Decodes one frame through etherparse's full slicing only: the reference [`decode`]'s direct
/// reading of plain frames is checked against (by the `decode` fuzz target).
pub fn decode_thorough(linktype: i32, frame: &[u8]) -> Result<Decoded<'_>, Skip> {
    thorough(linktype, frame)
}

/// Any frame, through etherparse's full slicing.
fn thorough(linktype: i32, frame: &[u8]) -> Result<Decoded<'_>, Skip> {
    let sliced = match linktype {
        ETHERNET if pppoe_session(frame) => SlicedPacket::from_ip(pppoe_ip(frame)?),
        ETHERNET => SlicedPacket::from_ethernet(frame),
        RAW | IPV4 | IPV6 => SlicedPacket::from_ip(frame),
        LINUX_SLL => SlicedPacket::from_linux_sll(frame),
        // BSD loopback: a 4-byte address family in the capturing host's byte order, then IP.
        NULL => SlicedPacket::from_ip(frame.get(4..).ok_or(Skip::Malformed)?),
        _ => return Err(Skip::UnsupportedLink),
    }
    .map_err(|_| Skip::Malformed)?;
    let (src, dst, fragment, ip_len) = match &sliced.net {
        Some(NetSlice::Ipv4(ip)) => (
            IpAddr::from(ip.header().source_addr()),
            IpAddr::from(ip.header().destination_addr()),
            ip.payload().fragmented,
            u32::from(ip.header().total_len()),
        ),
        Some(NetSlice::Ipv6(ip)) => (
            IpAddr::from(ip.header().source_addr()),
            IpAddr::from(ip.header().destination_addr()),
            ip.payload().fragmented,
            40 + u32::from(ip.header().payload_length()),
        ),
        _ => return Err(Skip::NotIp),
    };
    if fragment {
        return Err(Skip::Fragment);
    }
    let (proto, sport, dport, payload, tcp) = match &sliced.transport {
        Some(TransportSlice::Tcp(t)) => {
            let flags = Tcp { seq: t.sequence_number(), syn: t.syn(), fin: t.fin(), rst: t.rst() };
            (6, t.source_port(), t.destination_port(), t.payload(), Some(flags))
        }
        Some(TransportSlice::Udp(u)) => (17, u.source_port(), u.destination_port(), u.payload(), None),
        _ => return Err(Skip::NotTcpOrUdp),
    };
    let key = FiveTuple::new(proto, SocketAddr::new(src, sport), SocketAddr::new(dst, dport));
    Ok(Decoded { key, payload, tcp, ip_len })
}

#[cfg(test)]
mod tests {
    use etherparse::PacketBuilder;

    use super::*;

    fn tcp(payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .single_vlan(7.try_into().unwrap())
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40000, 80, 1, 65535)
            .write(&mut out, payload)
            .unwrap();
        out
    }

    #[test]
    fn vlan_tagged_tcp_decodes_to_its_tuple_and_payload() {
        let frame = tcp(b"GET / HTTP/1.1\r\n");
        let d = decode(ETHERNET, &frame).unwrap();
        assert_eq!(d.key.proto, 6);
        assert_eq!(d.key.src(), "10.0.0.1:40000".parse().unwrap());
        assert_eq!(d.key.dst(), "10.0.0.2:80".parse().unwrap());
        assert_eq!(d.payload, b"GET / HTTP/1.1\r\n");
    }

    #[test]
    fn pppoe_sessions_are_unwrapped() {
        let mut ip = Vec::new();
        PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64).udp(1000, 53).write(&mut ip, b"q").unwrap();
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x88, 0x64, 0x11, 0x00, 0x00, 0x01]);
        frame.extend_from_slice(&((ip.len() + 2) as u16).to_be_bytes());
        frame.extend_from_slice(&[0x00, 0x21]);
        frame.extend_from_slice(&ip);
        let d = decode(ETHERNET, &frame).unwrap();
        assert_eq!((d.key.dst().port(), d.payload), (53, &b"q"[..]));
        frame[20..22].copy_from_slice(&[0xc0, 0x21]); // LCP, not IP
        assert_eq!(decode(ETHERNET, &frame), Err(Skip::NotIp));
        assert_eq!(decode(ETHERNET, &frame[..21]), Err(Skip::Malformed));
    }

    #[test]
    fn ipv6_udp_on_raw_ip() {
        let mut out = Vec::new();
        PacketBuilder::ipv6([1; 16], [2; 16], 64).udp(5353, 53).write(&mut out, b"q").unwrap();
        let d = decode(RAW, &out).unwrap();
        assert_eq!((d.key.proto, d.key.dst().port(), d.payload), (17, 53, &b"q"[..]));
    }

    proptest::proptest! {
        /// Wherever the direct reading answers, it answers as etherparse does: on valid frames
        /// of every shape, and on the same frames with bytes changed and cut short.
        #[test]
        fn the_direct_reading_agrees_with_etherparse(
            udp in proptest::bool::ANY,
            options in 0usize..3,
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            pokes in proptest::collection::vec((0usize..80, proptest::num::u8::ANY), 0..4),
            cut in 0usize..100,
        ) {
            let mut ip = Vec::new();
            let b = PacketBuilder::ethernet2([1; 6], [2; 6]).ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64);
            if udp {
                b.udp(5353, 53).write(&mut ip, &payload).unwrap();
            } else {
                b.tcp(40000, 80, 7, 100).syn().write(&mut ip, &payload).unwrap();
            }
            // IPv4 options: lengthen the header by `options` words.
            for _ in 0..options {
                ip[14] += 1;
                let total = u16::from_be_bytes([ip[16], ip[17]]) + 4;
                ip[16..18].copy_from_slice(&total.to_be_bytes());
                ip.splice(34..34, [1, 1, 1, 1]);
            }
            ip.extend_from_slice(&[0; 6]); // Ethernet padding after the IP packet
            let mut pokes_made = 0;
            for (at, byte) in pokes {
                if let Some(b) = ip.get_mut(at) {
                    *b = byte;
                    pokes_made += 1;
                }
            }
            // Half the frames are left whole.
            let cut = cut.saturating_sub(50);
            let whole = pokes_made == 0 && cut == 0;
            ip.truncate(ip.len().saturating_sub(cut));
            proptest::prop_assert!(!whole || plain_ipv4(&ip).is_some(), "a plain frame is read directly");
            if let Some(fast) = plain_ipv4(&ip) {
                proptest::prop_assert_eq!(Ok(fast), thorough(ETHERNET, &ip));
            }
        }
    }

    #[test]
    fn the_direct_reading_takes_the_common_case() {
        let mut frame = Vec::new();
        PacketBuilder::ethernet2([1; 6], [2; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40000, 80, 1, 65535)
            .write(&mut frame, b"hi")
            .unwrap();
        assert_eq!(plain_ipv4(&frame).map(|d| d.payload), Some(&b"hi"[..]));
        // VLAN tags are left to etherparse.
        assert_eq!(plain_ipv4(&tcp(b"hi")), None);
    }

    #[test]
    fn damage_is_a_reason_not_a_panic() {
        let frame = tcp(b"hello");
        for cut in 0..frame.len() - 5 {
            assert!(decode(ETHERNET, &frame[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(decode(147, &frame), Err(Skip::UnsupportedLink));
        let mut icmp = Vec::new();
        PacketBuilder::ipv4([1; 4], [2; 4], 9).icmpv4_echo_request(1, 1).write(&mut icmp, b"").unwrap();
        assert_eq!(decode(RAW, &icmp), Err(Skip::NotTcpOrUdp));
    }
}
