//! From a captured frame to a flow key and a transport payload.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use switchyard_core::flow::FiveTuple;

/// Link-layer types this reader decodes (tcpdump.org LINKTYPE_ values).
const ETHERNET: i32 = 1;
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
    let (src, dst, fragment) = match &sliced.net {
        Some(NetSlice::Ipv4(ip)) => (
            IpAddr::from(ip.header().source_addr()),
            IpAddr::from(ip.header().destination_addr()),
            ip.payload().fragmented,
        ),
        Some(NetSlice::Ipv6(ip)) => (
            IpAddr::from(ip.header().source_addr()),
            IpAddr::from(ip.header().destination_addr()),
            ip.payload().fragmented,
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
    let key = FiveTuple { proto, src: SocketAddr::new(src, sport), dst: SocketAddr::new(dst, dport) };
    Ok(Decoded { key, payload, tcp })
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
        assert_eq!(d.key.src, "10.0.0.1:40000".parse().unwrap());
        assert_eq!(d.key.dst, "10.0.0.2:80".parse().unwrap());
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
        assert_eq!((d.key.dst.port(), d.payload), (53, &b"q"[..]));
        frame[20..22].copy_from_slice(&[0xc0, 0x21]); // LCP, not IP
        assert_eq!(decode(ETHERNET, &frame), Err(Skip::NotIp));
        assert_eq!(decode(ETHERNET, &frame[..21]), Err(Skip::Malformed));
    }

    #[test]
    fn ipv6_udp_on_raw_ip() {
        let mut out = Vec::new();
        PacketBuilder::ipv6([1; 16], [2; 16], 64).udp(5353, 53).write(&mut out, b"q").unwrap();
        let d = decode(RAW, &out).unwrap();
        assert_eq!((d.key.proto, d.key.dst.port(), d.payload), (17, 53, &b"q"[..]));
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
