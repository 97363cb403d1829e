//! Flow identity: what a unit of work belongs to, and the one digest every policy hashes.
//!
//! The digest is specified, not incidental, so that placements are the same on every platform and
//! in every version: [`FlowKey::id`] is XXH3-64 (seed [`DIGEST_SEED`]) of the key's canonical
//! encoding:
//!
//! | key | encoding |
//! |---|---|
//! | 5-tuple | `0x01`, protocol number, then for source and destination: `0x04` + 4 address bytes or `0x06` + 16 address bytes, then the port as 2 big-endian bytes |
//! | bytes | `0x02`, then the bytes |
//! | number | `0x03`, then the 8 little-endian bytes of the value |
//!
//! XXH3 is a published algorithm with fixed test vectors, so its output does not change with the
//! crate version or the CPU (unlike `ahash`, whose keys are random per process).

use std::fmt;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The seed of the flow digest. Changing it changes every placement, so it never changes.
pub const DIGEST_SEED: u64 = 0x5357_4954_4348_5944; // "SWITCHYD"

/// The 64-bit digest of a [`FlowKey`]: what placement policies hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u64);

/// A flow's identity: a transport 5-tuple, an opaque byte string, or a number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FlowKey {
    /// A transport connection or datagram flow.
    Tuple(FiveTuple),
    /// Any other key: a stream name, a URL, a sensor id.
    Bytes(Box<[u8]>),
    /// A numeric key (a stream number, a request id).
    Number(u64),
}

/// A transport 5-tuple: protocol, source and destination address and port.
///
/// Kept compact and in whole words: both addresses as 128-bit numbers (an IPv4 address as its
/// IPv4-mapped IPv6 form, `::ffff:a.b.c.d`, with a flag saying it is IPv4), the two ports in one
/// 32-bit word. A reader makes one for every packet and a connection table moves, hashes and
/// compares it for every packet; as two `SocketAddr`s (68 bytes of enums written a few bytes at
/// a time and then copied 16 bytes at a time) making and moving it was most of the cost of
/// reading a packet. `src()` and `dst()` give the endpoints as `SocketAddr`s; an IPv6 address's
/// flow label and scope id are not kept (packets do not carry a scope id, and the flow label is
/// not part of a flow's identity here).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FiveTuple {
    addrs: [u128; 2],
    /// Source port in the high half, destination port in the low half.
    ports: u32,
    /// IP protocol number (6 = TCP, 17 = UDP).
    pub proto: u8,
    /// Bit 0: the source is IPv6; bit 1: the destination is.
    v6: u8,
}

/// The IPv4-mapped IPv6 prefix, `::ffff:0:0/96`.
const MAPPED: u128 = 0xffff_0000_0000;

impl FiveTuple {
    /// A tuple of any two endpoints.
    pub fn new(proto: u8, src: SocketAddr, dst: SocketAddr) -> Self {
        let (s, s6) = endpoint(src);
        let (d, d6) = endpoint(dst);
        Self { addrs: [s, d], ports: u32::from(src.port()) << 16 | u32::from(dst.port()), proto, v6: s6 | d6 << 1 }
    }

    /// An IPv4 tuple, from the addresses' bits as they stand on the wire (big-endian).
    #[inline]
    pub fn v4(proto: u8, src: u32, src_port: u16, dst: u32, dst_port: u16) -> Self {
        Self {
            addrs: [MAPPED | u128::from(src), MAPPED | u128::from(dst)],
            ports: u32::from(src_port) << 16 | u32::from(dst_port),
            proto,
            v6: 0,
        }
    }

    /// The tuple's fields, `(proto, src, src_port, dst, dst_port)`, where both ends are IPv4:
    /// cheaper to read than [`Self::src`] and [`Self::dst`].
    #[inline]
    pub fn v4_parts(&self) -> Option<(u8, u32, u16, u32, u16)> {
        (self.v6 == 0).then(|| {
            (self.proto, self.addrs[0] as u32, (self.ports >> 16) as u16, self.addrs[1] as u32, self.ports as u16)
        })
    }

    /// The source address and port.
    pub fn src(&self) -> SocketAddr {
        socket(self.addrs[0], self.v6 & 1 != 0, (self.ports >> 16) as u16)
    }

    /// The destination address and port.
    pub fn dst(&self) -> SocketAddr {
        socket(self.addrs[1], self.v6 & 2 != 0, self.ports as u16)
    }

    /// The same tuple seen from the other end.
    #[inline]
    pub fn reversed(self) -> Self {
        Self {
            addrs: [self.addrs[1], self.addrs[0]],
            ports: self.ports.rotate_left(16),
            proto: self.proto,
            v6: (self.v6 & 1) << 1 | (self.v6 & 2) >> 1,
        }
    }

    /// The same tuple with its endpoints in a fixed order (IPv4 before IPv6, then the smaller
    /// address, then the smaller port, first), so both directions of a connection have one
    /// identity.
    #[inline]
    pub fn undirected(self) -> Self {
        let src = (self.v6 & 1, self.addrs[0], self.ports >> 16);
        let dst = (self.v6 >> 1 & 1, self.addrs[1], self.ports & 0xffff);
        if dst < src { self.reversed() } else { self }
    }
}

fn endpoint(sa: SocketAddr) -> (u128, u8) {
    match sa.ip() {
        IpAddr::V4(ip) => (MAPPED | u128::from(ip.to_bits()), 0),
        IpAddr::V6(ip) => (ip.to_bits(), 1),
    }
}

fn socket(bits: u128, v6: bool, port: u16) -> SocketAddr {
    if v6 {
        SocketAddr::new(IpAddr::V6(Ipv6Addr::from_bits(bits)), port)
    } else {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::from_bits(bits as u32)), port)
    }
}

/// Written by hand so that the hasher takes the tuple in three words; equal tuples hash equal,
/// since the words are the fields `Eq` compares.
impl Hash for FiveTuple {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u128(self.addrs[0]);
        state.write_u128(self.addrs[1]);
        state.write_u64(u64::from(self.ports) << 16 | u64::from(self.proto) << 8 | u64::from(self.v6));
    }
}

impl fmt::Debug for FiveTuple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FiveTuple")
            .field("proto", &self.proto)
            .field("src", &self.src())
            .field("dst", &self.dst())
            .finish()
    }
}

impl FlowKey {
    /// The key's digest (see the module documentation for its exact definition).
    pub fn id(&self) -> FlowId {
        let mut buf = [0u8; 64];
        let bytes: &[u8] = match self {
            Self::Tuple(t) => {
                let mut n = 0;
                buf[n] = 1;
                buf[n + 1] = t.proto;
                n += 2;
                for sa in [t.src(), t.dst()] {
                    match sa.ip() {
                        IpAddr::V4(ip) => {
                            buf[n] = 4;
                            buf[n + 1..n + 5].copy_from_slice(&ip.octets());
                            n += 5;
                        }
                        IpAddr::V6(ip) => {
                            buf[n] = 6;
                            buf[n + 1..n + 17].copy_from_slice(&ip.octets());
                            n += 17;
                        }
                    }
                    buf[n..n + 2].copy_from_slice(&sa.port().to_be_bytes());
                    n += 2;
                }
                &buf[..n]
            }
            Self::Number(v) => {
                buf[0] = 3;
                buf[1..9].copy_from_slice(&v.to_le_bytes());
                &buf[..9]
            }
            Self::Bytes(b) => {
                // Tagged encoding without copying the bytes: hash the tag-prefixed form through
                // the streaming state only when the key is long.
                if b.len() < buf.len() {
                    buf[0] = 2;
                    buf[1..=b.len()].copy_from_slice(b);
                    &buf[..=b.len()]
                } else {
                    let mut v = Vec::with_capacity(b.len() + 1);
                    v.push(2);
                    v.extend_from_slice(b);
                    return FlowId(xxh3_64_with_seed(&v, DIGEST_SEED));
                }
            }
        };
        FlowId(xxh3_64_with_seed(bytes, DIGEST_SEED))
    }

    /// The same key with a 5-tuple's direction removed (see [`FiveTuple::undirected`]); other
    /// keys are returned unchanged.
    pub fn undirected(self) -> Self {
        match self {
            Self::Tuple(t) => Self::Tuple(t.undirected()),
            other => other,
        }
    }

    /// Reads a key from one line of text. Never fails: the forms are tried in order.
    ///
    /// 1. `PROTO SRC DST`, a 5-tuple: `tcp 10.0.0.1:4000 10.0.0.2:80`, `udp [::1]:53 [::2]:53`;
    ///    PROTO is `tcp`, `udp`, `sctp`, `icmp` or a protocol number.
    /// 2. A decimal integer that fits in 64 bits: a [`FlowKey::Number`].
    /// 3. Anything else: the line's bytes, as a [`FlowKey::Bytes`].
    pub fn parse(line: &str) -> Self {
        if let Some(t) = parse_tuple(line) {
            return Self::Tuple(t);
        }
        if let Ok(n) = line.parse::<u64>() {
            return Self::Number(n);
        }
        Self::Bytes(line.as_bytes().into())
    }
}

fn parse_tuple(line: &str) -> Option<FiveTuple> {
    let mut parts = line.split_ascii_whitespace();
    let proto = match parts.next()? {
        "tcp" | "TCP" => 6,
        "udp" | "UDP" => 17,
        "sctp" | "SCTP" => 132,
        "icmp" | "ICMP" => 1,
        other => other.parse().ok()?,
    };
    let src = parts.next()?.parse().ok()?;
    let dst = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(FiveTuple::new(proto, src, dst))
}

impl From<u64> for FlowKey {
    fn from(v: u64) -> Self {
        Self::Number(v)
    }
}

impl From<&str> for FlowKey {
    fn from(s: &str) -> Self {
        Self::Bytes(s.as_bytes().into())
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Tuple(t) => {
                let p = match t.proto {
                    6 => "tcp".to_string(),
                    17 => "udp".to_string(),
                    132 => "sctp".to_string(),
                    1 => "icmp".to_string(),
                    n => n.to_string(),
                };
                write!(f, "{p} {} {}", t.src(), t.dst())
            }
            Self::Number(n) => write!(f, "{n}"),
            Self::Bytes(b) => write!(f, "{}", String::from_utf8_lossy(b)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_follows_the_documented_encoding() {
        // If one of these changes, every placement changes (see tests/it/golden/place.txt).
        assert_eq!(FlowKey::Number(0).id().0, 0xd9d3_82e8_20d0_6678);
        assert_eq!(FlowKey::Number(0).id().0, xxh3_64_with_seed(&[3, 0, 0, 0, 0, 0, 0, 0, 0], DIGEST_SEED));
        let t = FlowKey::parse("tcp 10.0.0.1:40000 10.0.0.2:80");
        assert!(matches!(t, FlowKey::Tuple(_)));
        let mut enc = vec![1u8, 6, 4, 10, 0, 0, 1];
        enc.extend_from_slice(&40000u16.to_be_bytes());
        enc.extend_from_slice(&[4, 10, 0, 0, 2, 0, 80]);
        assert_eq!(t.id().0, xxh3_64_with_seed(&enc, DIGEST_SEED));
        assert_eq!(t.id().0, 0x5d45_783d_88d1_002e);
        assert_eq!(FlowKey::parse("42"), FlowKey::Number(42));
        assert_eq!(FlowKey::parse("video/7"), FlowKey::Bytes((*b"video/7").into()));
    }

    #[test]
    fn undirected_tuples_share_an_id() {
        let a = FlowKey::parse("tcp 10.0.0.1:40000 10.0.0.2:80").undirected();
        let b = FlowKey::parse("tcp 10.0.0.2:80 10.0.0.1:40000").undirected();
        assert_eq!(a.id(), b.id());
        let c = FlowKey::parse("tcp 10.0.0.1:40000 10.0.0.2:80");
        let d = FlowKey::parse("tcp 10.0.0.2:80 10.0.0.1:40000");
        assert_ne!(c.id(), d.id());
    }

    #[test]
    fn long_and_short_byte_keys_use_the_same_encoding() {
        let long = "x".repeat(200);
        let mut v = vec![2u8];
        v.extend_from_slice(long.as_bytes());
        assert_eq!(FlowKey::from(long.as_str()).id().0, xxh3_64_with_seed(&v, DIGEST_SEED));
    }

    #[test]
    fn display_round_trips_tuples() {
        for s in ["tcp 10.0.0.1:40000 10.0.0.2:80", "udp [::1]:53 [2001:db8::2]:5353", "99 1.2.3.4:1 5.6.7.8:2"] {
            let k = FlowKey::parse(s);
            assert_eq!(FlowKey::parse(&k.to_string()), k);
        }
    }

    /// The order the compact form sorts endpoints by, spelled out on `SocketAddr`s: IPv4 before
    /// IPv6, then the address's octets (IPv4 as mapped), then the port.
    fn endpoint_order(sa: &SocketAddr) -> (u8, [u8; 16], u16) {
        match sa.ip() {
            IpAddr::V4(ip) => (4, ip.to_ipv6_mapped().octets(), sa.port()),
            IpAddr::V6(ip) => (6, ip.octets(), sa.port()),
        }
    }

    fn any_endpoint() -> impl proptest::strategy::Strategy<Value = SocketAddr> {
        use proptest::prelude::*;
        prop_oneof![
            (any::<u32>(), any::<u16>()).prop_map(|(a, p)| SocketAddr::from((Ipv4Addr::from_bits(a), p))),
            (any::<u128>(), any::<u16>()).prop_map(|(a, p)| SocketAddr::from((Ipv6Addr::from_bits(a), p))),
            // Close addresses, so that ties on the address reach the port.
            (0u32..3, any::<u16>()).prop_map(|(a, p)| SocketAddr::from((Ipv4Addr::from_bits(a), p))),
            (0u128..3, any::<u16>()).prop_map(|(a, p)| SocketAddr::from((Ipv6Addr::from_bits(a), p))),
        ]
    }

    proptest::proptest! {
        /// The compact form gives back the endpoints it was made from, reverses and orders them
        /// as the rule on `SocketAddr`s says, and either direction gives one tuple.
        #[test]
        fn tuples_keep_their_endpoints_and_order_them_by_the_rule(
            src in any_endpoint(), dst in any_endpoint(), proto in proptest::prelude::any::<u8>(),
        ) {
            let t = FiveTuple::new(proto, src, dst);
            proptest::prop_assert_eq!((t.proto, t.src(), t.dst()), (proto, src, dst));
            let r = t.reversed();
            proptest::prop_assert_eq!((r.src(), r.dst()), (dst, src));
            proptest::prop_assert_eq!(r.reversed(), t);
            let general = if endpoint_order(&dst) < endpoint_order(&src) { r } else { t };
            proptest::prop_assert_eq!(t.undirected(), general);
            proptest::prop_assert_eq!(r.undirected(), general);
            if let (SocketAddr::V4(a), SocketAddr::V4(b)) = (src, dst) {
                let fast = FiveTuple::v4(proto, a.ip().to_bits(), a.port(), b.ip().to_bits(), b.port());
                proptest::prop_assert_eq!(fast, t);
            }
        }
    }
}
