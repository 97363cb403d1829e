//! Whose packet it is, told before the packet is decoded: for readers that share a capture
//! and keep only some of its connections (the sharded runtime's workers each read every
//! packet and keep their own). Leaving another's packet after a glimpse costs the record
//! header and a dozen header fields; decoding it into a [`Packet`](crate::Packet) first cost about three
//! times that, most of it building and moving the wide [`FiveTuple`].

use switchyard_core::flow::FiveTuple;

/// A packet's connection, the same whichever way the packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Glimpse {
    /// IPv4: each endpoint as its address above its port (`address << 16 | port`), the lower
    /// endpoint first. Endpoints ordered so are ordered as [`FiveTuple::undirected`] orders
    /// them, so [`Glimpse::undirected`] is that tuple.
    V4 {
        /// IP protocol number.
        proto: u8,
        /// The lower endpoint.
        low: u64,
        /// The higher endpoint.
        high: u64,
    },
    /// Any other packet: its undirected tuple.
    Tuple(FiveTuple),
}

impl Glimpse {
    /// The glimpse of an IPv4 packet from `src:sport` to `dst:dport`.
    #[inline]
    pub fn v4(proto: u8, src: u32, sport: u16, dst: u32, dport: u16) -> Self {
        let a = u64::from(src) << 16 | u64::from(sport);
        let b = u64::from(dst) << 16 | u64::from(dport);
        Self::V4 { proto, low: a.min(b), high: a.max(b) }
    }

    /// The glimpse of a packet with flow key `key` (either direction).
    #[inline]
    pub fn of(key: &FiveTuple) -> Self {
        match key.v4_parts() {
            Some((proto, src, sport, dst, dport)) => Self::v4(proto, src, sport, dst, dport),
            None => Self::Tuple(key.undirected()),
        }
    }

    /// The connection's undirected tuple ([`FiveTuple::undirected`]).
    pub fn undirected(&self) -> FiveTuple {
        match *self {
            Self::V4 { proto, low, high } => {
                let part = |e: u64| ((e >> 16) as u32, e as u16);
                let ((a, ap), (b, bp)) = (part(low), part(high));
                FiveTuple::v4(proto, a, ap, b, bp)
            }
            Self::Tuple(t) => t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{Ipv6Addr, SocketAddr};

    proptest! {
        /// The reader's glimpse (from header fields) and one made from the decoded key agree,
        /// and either gives back the undirected tuple.
        #[test]
        fn a_glimpse_is_the_undirected_tuple_either_way(
            proto in prop_oneof![Just(6u8), Just(17u8)],
            src in any::<u32>(), sport in any::<u16>(), dst in any::<u32>(), dport in any::<u16>(),
        ) {
            let key = FiveTuple::v4(proto, src, sport, dst, dport);
            let g = Glimpse::v4(proto, src, sport, dst, dport);
            prop_assert_eq!(g, Glimpse::v4(proto, dst, dport, src, sport));
            prop_assert_eq!(g, Glimpse::of(&key));
            prop_assert_eq!(g, Glimpse::of(&key.reversed()));
            prop_assert!(g.undirected() == key.undirected());
        }
    }

    #[test]
    fn ipv6_is_glimpsed_as_its_tuple() {
        let a = SocketAddr::from((Ipv6Addr::LOCALHOST, 9));
        let b = SocketAddr::from((Ipv6Addr::UNSPECIFIED, 80));
        let key = FiveTuple::new(6, a, b);
        assert!(Glimpse::of(&key) == Glimpse::Tuple(key.undirected()));
        assert!(Glimpse::of(&key).undirected() == key.undirected());
    }
}
