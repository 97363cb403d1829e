//! What the producer hands the workers: a connection's shared state, the slots its packets are
//! left in, and the buffer units that point into them.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Mutex, OnceLock};

use switchyard_ingest::{Assembly, ConnConfig, Tcp};

use crate::app_fields::AppFields;
use crate::inspect::{Found, Ports, Protocol, tls};

/// The shared state of one connection, allocated in the run's arena.
///
/// `first_match` is the earliest matching buffer, packed as `index << 16 | match` in 64
/// bits (so every u32 index fits; 32 bits wrapped indices of 65,536 and more), or `u64::MAX`
/// while none has matched; `match` is the protocol, [`FROM_SERVER`] where the server's bytes
/// matched, and [`MORE`] while a TLS connection's ServerHello is still to come (its later
/// buffers are read for it, not skipped). `lost` says a buffer of the connection was dropped at a full
/// queue, so that no match is no verdict. The producer reads it for every packet and writes each
/// of `pieces` once; workers take `work`'s lock, feed the assembly from `pieces` and scan. The
/// lock sits on cache lines of its own so that taking it does not evict what the producer reads.
#[derive(Debug)]
pub(super) struct Shared<'s, 'a> {
    pub(super) first_match: AtomicU64,
    pub(super) lost: AtomicBool,
    /// The connection's buffered packets, by number: slot `i` is set before buffer `i` is sent.
    pub(super) pieces: Pieces<'s, 'a>,
    /// The connection's transport and ports, for signatures that need a port.
    pub(super) ports: Ports,
    /// Made by the first worker to take the connection: allocating it is a worker's work, not
    /// the producer's (whose time per packet bounds the pipeline).
    pub(super) work: Padded<Mutex<Option<Box<Assembled>>>>,
}

#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct Padded<T>(pub(super) T);

/// A packet the producer has numbered and no worker has yet fed to the assembly. Its payload
/// is borrowed from the capture, which outlives the workers: nothing is copied.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Piece<'a> {
    pub(super) from_client: bool,
    pub(super) tcp: Option<Tcp>,
    pub(super) payload: &'a [u8],
}

/// Where the producer leaves a connection's packet `i` for the workers: written once, by the
/// producer, before any buffer unit of index `i` or later exists; read by a worker only once it
/// holds such a unit, received through its queue. The queue orders the two (its send releases
/// what the producer wrote before, its receive acquires it), so the slot needs no lock and no
/// atomic of its own. A `OnceLock` per slot did the same with a compare-and-swap and a closure
/// call per packet, 3–5% of the producer's time.
pub(super) struct PieceSlot<'a>(UnsafeCell<Piece<'a>>);

// SAFETY: shared between the producer and the workers under the protocol of `set` and `get`:
// one write, ordered before every read by the worker queues' release and acquire.
unsafe impl Sync for PieceSlot<'_> {}

impl<'a> PieceSlot<'a> {
    pub(super) fn empty() -> Self {
        Self(UnsafeCell::new(Piece::default()))
    }

    /// # Safety
    /// Only the producer calls this, at most once per slot, and before it creates any buffer
    /// unit whose index is this slot's or later (so no worker can be reading the slot).
    pub(super) unsafe fn set(&self, piece: Piece<'a>) {
        // SAFETY: by the contract, no other thread accesses the slot now.
        unsafe { *self.0.get() = piece }
    }

    /// # Safety
    /// The caller received, through a worker queue, a buffer unit of this connection whose
    /// index is this slot's or later: the slot was written before that unit was sent and is
    /// never written again.
    pub(super) unsafe fn get(&self) -> Piece<'a> {
        // SAFETY: by the contract, the write happened before, and no write can follow.
        unsafe { *self.0.get() }
    }
}

impl std::fmt::Debug for PieceSlot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PieceSlot")
    }
}

/// A connection's packet slots, made as its packets come: segment `k` holds [`FIRST`] `<< k`
/// slots (the last cut to the packet limit) and is allocated when the connection's first
/// packet numbered in it arrives. Slots reserved up front, one per packet the limit allows,
/// took `--packets 100000` × 32 bytes per connection (32 GB on 10,000 connections) for
/// packets most connections never have; this way a connection holds at most twice the slots
/// its packets fill, plus a pointer per possible segment (30 at most).
///
/// Segments never move once made (each is its own allocation in the run's arena), so a worker
/// can read one while the producer makes the next. The producer makes segment `k` before it
/// writes a slot in it, so before any buffer unit that could read it: a worker that holds a
/// unit of index `i` finds every segment up to `i`'s made.
pub(super) struct Pieces<'s, 'a> {
    segments: &'s [OnceLock<&'s [PieceSlot<'a>]>],
    limit: u32,
}

/// Slots in a connection's first segment: Guo's 8 packets a connection, so that the default
/// limit takes one segment, as many slots as it did when all were reserved at once.
pub(super) const FIRST: u32 = 8;

impl<'s, 'a> Pieces<'s, 'a> {
    /// How many segments hold `limit` slots.
    pub(super) fn segments_for(limit: u32) -> usize {
        (0..).find(|&k| Self::start_of(k) >= u64::from(limit)).unwrap_or(0)
    }

    /// The first slot of segment `k` (FIRST · (2^k − 1)).
    fn start_of(k: usize) -> u64 {
        u64::from(FIRST) * ((1u64 << k) - 1)
    }

    /// The segment of slot `i` and its place there.
    fn locate(i: u32) -> (usize, usize) {
        let k = (63 - (u64::from(i) / u64::from(FIRST) + 1).leading_zeros()) as usize;
        (k, (u64::from(i) - Self::start_of(k)) as usize)
    }

    /// The slots of a connection of at most `limit` packets, over `segments` (made empty, as
    /// many as [`Self::segments_for`] says).
    pub(super) fn new(segments: &'s [OnceLock<&'s [PieceSlot<'a>]>], limit: u32) -> Self {
        debug_assert_eq!(segments.len(), Self::segments_for(limit));
        Self { segments, limit }
    }

    /// Slot `i`, its segment made by `alloc(slots)` if it is not yet. Only the producer calls
    /// this (it alone makes segments).
    pub(super) fn slot_or_make(&self, i: u32, alloc: impl FnOnce(usize) -> &'s [PieceSlot<'a>]) -> &PieceSlot<'a> {
        let (k, at) = Self::locate(i);
        let segment = self.segments[k].get_or_init(|| {
            let start = Self::start_of(k);
            let len = (u64::from(FIRST) << k).min(u64::from(self.limit) - start);
            alloc(len as usize)
        });
        &segment[at]
    }

    /// Slot `i`, which the caller knows is made (it holds a buffer unit of index `i` or later).
    fn slot(&self, i: usize) -> &PieceSlot<'a> {
        let (k, at) = Self::locate(i as u32);
        &self.segments[k].get().expect("the producer makes a slot's segment before any unit that reads it")[at]
    }
}

impl std::fmt::Debug for Pieces<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let made = self.segments.iter().filter(|s| s.get().is_some()).count();
        write!(f, "Pieces {{ limit: {}, segments made: {made} of {} }}", self.limit, self.segments.len())
    }
}

/// The connection's assembly, its length after each packet fed to it, and what a TLS
/// connection's handshake showed.
#[derive(Debug, Default)]
pub(super) struct Assembled {
    pub(super) assembly: Assembly,
    pub(super) len_after: Vec<u32>,
    pub(super) tls: Option<Box<tls::Seen>>,
    /// What the earliest buffer that matched showed (DNS, HTTP), and that buffer's index: kept
    /// from the earliest, as the serial pipeline reads it, whichever worker scanned first.
    pub(super) app: Option<(u32, Option<Box<AppFields>>)>,
}

impl Assembled {
    /// Feeds the packets up to number `index`, in order, from the connection's slots.
    pub(super) fn take_in(&mut self, pieces: &Pieces<'_, '_>, index: usize, config: &ConnConfig) {
        while self.len_after.len() <= index {
            // SAFETY: the caller holds the connection's buffer unit `index`, received through
            // its queue, and feeds only slots up to it.
            let piece = unsafe { pieces.slot(self.len_after.len()).get() };
            let len = self.assembly.push(config, piece.from_client, piece.tcp, piece.payload);
            self.len_after.push(len as u32);
        }
    }
}

pub(super) struct Job<'s, 'a> {
    pub(super) shared: &'s Shared<'s, 'a>,
    pub(super) index: u32,
    /// What the producer counted as the buffer's length in the load view: the connection's
    /// payload bytes so far, up to the byte limit (the buffer's length unless segments were
    /// retransmitted or held behind a gap).
    pub(super) size: u32,
}

/// In `first_match`: the match was on the server's bytes.
pub(super) const FROM_SERVER: u64 = 1 << 15;
/// In `first_match`: a TLS connection's ServerHello is still to come.
pub(super) const MORE: u64 = 1 << 14;

/// `first_match`'s packing of a matching buffer's index and match (protocols number fewer than
/// 2^14, which a test checks).
pub(super) fn pack(index: u32, found: Found, more: bool) -> u64 {
    let side = if found.from_client { 0 } else { FROM_SERVER };
    (u64::from(index) << 16) | u64::from(found.protocol.0) | side | if more { MORE } else { 0 }
}

/// The match of a packed `first_match` that is not `u64::MAX`.
pub(super) fn found_of(packed: u64) -> Found {
    Found { protocol: Protocol((packed & (MORE - 1)) as u16), from_client: packed & FROM_SERVER == 0 }
}

/// The buffer index of a packed `first_match`.
pub(super) fn index_of(packed: u64) -> u64 {
    packed >> 16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every slot number up to the limit has one place, the segments tile the numbers in order
    /// without gaps, and the largest limit takes 30 segments.
    #[test]
    fn segments_tile_every_slot_number_once() {
        assert_eq!(Pieces::segments_for(1), 1);
        assert_eq!(Pieces::segments_for(FIRST), 1);
        assert_eq!(Pieces::segments_for(FIRST + 1), 2);
        assert_eq!(Pieces::segments_for(u32::MAX), 30);
        let mut next = (0usize, 0usize);
        for i in 0..10_000u32 {
            let (k, at) = Pieces::locate(i);
            assert_eq!((k, at), next, "slot {i}");
            next = if at + 1 == (FIRST as usize) << k { (k + 1, 0) } else { (k, at + 1) };
        }
        let (k, at) = Pieces::locate(u32::MAX - 1);
        assert!(k < 30 && Pieces::start_of(k) + at as u64 == u64::from(u32::MAX - 1));
        // A connection with a limit of 20 gets segments of 8 and 12 slots, as its packets come.
        let arena: typed_arena::Arena<PieceSlot<'_>> = typed_arena::Arena::new();
        let made: Vec<OnceLock<&[PieceSlot<'_>]>> = (0..Pieces::segments_for(20)).map(|_| OnceLock::new()).collect();
        let pieces = Pieces::new(&made, 20);
        let mut sizes = Vec::new();
        for i in 0..20 {
            pieces.slot_or_make(i, |n| {
                sizes.push(n);
                &*arena.alloc_extend((0..n).map(|_| PieceSlot::empty()))
            });
        }
        assert_eq!(sizes, [8, 12]);
    }

    #[test]
    fn packing_orders_by_index_for_every_u32_index() {
        assert!(crate::inspect::SIGNATURES.len() < MORE as usize);
        let found = |p, from_client| Found { protocol: Protocol(p), from_client };
        let last = found((MORE - 1) as u16, false);
        for (a, b) in [(0u32, 1u32), (65_535, 65_536), (65_536, 70_000), (1 << 20, u32::MAX)] {
            assert!(pack(a, last, true) < pack(b, found(0, true), false), "{a} {b}");
            assert_eq!(index_of(pack(b, found(7, true), false)), u64::from(b));
            for f in [found(7, true), found(7, false), last] {
                for more in [false, true] {
                    assert_eq!(found_of(pack(b, f, more)), f);
                    assert_eq!(pack(b, f, more) & MORE != 0, more);
                }
            }
        }
        assert!(pack(u32::MAX, last, true) < u64::MAX, "no buffer looks unmatched");
    }
}
