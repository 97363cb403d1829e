//! The on-disk format: a log is a run of equal blocks, each written whole, and each able to say
//! on its own whether it is intact.
//!
//! # A block
//!
//! ```text
//! offset  size  field
//!      0     4  magic "SYBL"
//!      4     1  format version (1)
//!      5     1  log2 of the block size (9 = 512 bytes … 20 = 1 MiB)
//!      6     2  records in the block
//!      8     8  log id: random per log, so a block left from an earlier log is told apart
//!     16     8  block number: its index in the log
//!     24     4  bytes of records used after the header
//!     28     4  checksum: the low 32 bits of XXH3-64 over the whole block with this field left out
//!     32     …  records, back to back, then zeros to the end of the block
//! ```
//!
//! A record is `stream u32, length u32, seq u64` (16 bytes) and then `length` bytes of payload.
//! All integers are little-endian. The record's deadline is not stored: once the record is
//! durable no reader needs it, and 8 more bytes a record would leave room for five 64-byte
//! records in a 512-byte block instead of six (write amplification 1.6 instead of 1.33).
//!
//! # Why one checksum per block and none per record
//!
//! A block is the unit the device writes and the unit that can tear: a record never spans two
//! blocks, so a record is intact exactly when its block is. One checksum over the whole block
//! (padding included, so a torn write into the padding is caught too) costs 4 bytes a block
//! instead of 4 a record; with 64-byte payloads that is what keeps six records in a 512-byte
//! block and write amplification at 512/384 = 1.33. XXH3 rather than a CRC because it is the
//! checksum already in the workspace (notes/crates.md has no CRC crate) and is specified, so the
//! format is stable across versions and machines.
//!
//! # Parsing outside input
//!
//! [`decode`] takes any bytes and returns a block or a [`Corrupt`] reason; it never panics,
//! whatever the length fields say (a fuzz target and a property test hold it to that).

use xxhash_rust::xxh3::Xxh3;

/// The first four bytes of every block.
pub const MAGIC: [u8; 4] = *b"SYBL";
/// The format version this code writes and reads.
pub const VERSION: u8 = 1;
/// Bytes of a block's header.
pub const HEADER_LEN: usize = 32;
/// Bytes of a record's framing before its payload.
pub const RECORD_HEADER_LEN: usize = 16;
/// The smallest block (one sector of the thesis's SD card).
pub const MIN_BLOCK: usize = 512;
/// The largest block: a record count in 16 bits cannot overflow below it.
pub const MAX_BLOCK: usize = 1 << 20;

/// One record as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its stream.
    pub stream: u32,
    /// Its number in its stream (the scheduler's).
    pub seq: u64,
    /// What the application appended.
    pub payload: Vec<u8>,
}

/// A decoded block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The log it belongs to.
    pub log_id: u64,
    /// Its index in that log.
    pub number: u64,
    /// Its records, in the order they were written.
    pub entries: Vec<Entry>,
}

/// Why a block's bytes are not an intact block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Corrupt {
    /// Every byte is zero: the block was never written (the end of a log on a fresh file).
    #[error("never written (all zeros)")]
    Empty,
    /// Fewer bytes than a header, or not the block size the header names.
    #[error("{len} bytes where the header names a {expected}-byte block")]
    Short {
        /// Bytes given.
        len: usize,
        /// Bytes the header names (0 if it names none).
        expected: usize,
    },
    /// The magic is wrong: not a blocklog block, or its start was torn.
    #[error("no blocklog magic")]
    BadMagic,
    /// A format version this code does not read.
    #[error("format version {0}, this reader knows {VERSION}")]
    BadVersion(u8),
    /// The checksum does not match: a torn or corrupted write.
    #[error("checksum mismatch (stored {stored:08x}, computed {computed:08x}): torn or corrupt")]
    BadChecksum {
        /// The header's.
        stored: u32,
        /// The bytes'.
        computed: u32,
    },
    /// The checksum matched but the lengths do not add up (a writer bug, or forged bytes).
    #[error("record lengths do not add up to the header's {used} bytes in {count} records")]
    BadLayout {
        /// Bytes the header says are used.
        used: u32,
        /// Records it says there are.
        count: u16,
    },
}

/// Why a block could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The block size is not a power of two from 512 bytes to 1 MiB.
    #[error("block size {0} is not a power of two from {MIN_BLOCK} to {MAX_BLOCK}")]
    BlockSize(usize),
    /// The records take more than the block holds after its header.
    #[error("{need} bytes of records do not fit in the {room} a block holds")]
    TooFull {
        /// Bytes the framed records take.
        need: usize,
        /// Bytes a block holds after its header.
        room: usize,
    },
}

/// Whether `size` is a block size this format allows.
#[must_use]
pub const fn valid_block_size(size: usize) -> bool {
    size.is_power_of_two() && size >= MIN_BLOCK && size <= MAX_BLOCK
}

/// Bytes a record with `payload` bytes takes in a block: what the scheduler must be told, so that
/// its packing is the block's.
#[must_use]
pub const fn framed_len(payload: usize) -> usize {
    RECORD_HEADER_LEN + payload
}

/// Bytes of records a block of `block_size` holds.
#[must_use]
pub const fn room(block_size: usize) -> usize {
    block_size - HEADER_LEN
}

/// Writes a block of `out.len()` bytes holding `entries` (stream, seq, payload) into `out`.
pub fn encode<'a>(
    log_id: u64,
    number: u64,
    entries: impl IntoIterator<Item = (u32, u64, &'a [u8])>,
    out: &mut [u8],
) -> Result<(), EncodeError> {
    let size = out.len();
    if !valid_block_size(size) {
        return Err(EncodeError::BlockSize(size));
    }
    out.fill(0);
    let mut at = HEADER_LEN;
    let mut count: u16 = 0;
    for (stream, seq, payload) in entries {
        let need = at - HEADER_LEN + framed_len(payload.len());
        if need > room(size) {
            return Err(EncodeError::TooFull { need, room: room(size) });
        }
        out[at..at + 4].copy_from_slice(&stream.to_le_bytes());
        // Fits in u32: the block is at most 1 MiB.
        out[at + 4..at + 8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&seq.to_le_bytes());
        out[at + 16..at + 16 + payload.len()].copy_from_slice(payload);
        at += framed_len(payload.len());
        // At most 1 MiB / 16 bytes = 65,536 records, and a block of that size has a header too.
        count += 1;
    }
    out[0..4].copy_from_slice(&MAGIC);
    out[4] = VERSION;
    out[5] = size.trailing_zeros() as u8;
    out[6..8].copy_from_slice(&count.to_le_bytes());
    out[8..16].copy_from_slice(&log_id.to_le_bytes());
    out[16..24].copy_from_slice(&number.to_le_bytes());
    out[24..28].copy_from_slice(&((at - HEADER_LEN) as u32).to_le_bytes());
    let sum = checksum(out);
    out[28..32].copy_from_slice(&sum.to_le_bytes());
    Ok(())
}

/// The block size a block's header names, if its first bytes look like a block's.
#[must_use]
pub fn block_size_of(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < HEADER_LEN || bytes[0..4] != MAGIC {
        return None;
    }
    let size = 1usize.checked_shl(u32::from(bytes[5]))?;
    valid_block_size(size).then_some(size)
}

/// Parses one block: all of `bytes`, which must be exactly the block size its header names.
pub fn decode(bytes: &[u8]) -> Result<Block, Corrupt> {
    if bytes.iter().all(|&b| b == 0) {
        return Err(Corrupt::Empty);
    }
    if bytes.len() < HEADER_LEN {
        return Err(Corrupt::Short { len: bytes.len(), expected: 0 });
    }
    if bytes[0..4] != MAGIC {
        return Err(Corrupt::BadMagic);
    }
    if bytes[4] != VERSION {
        return Err(Corrupt::BadVersion(bytes[4]));
    }
    match block_size_of(bytes) {
        Some(size) if size == bytes.len() => {}
        named => return Err(Corrupt::Short { len: bytes.len(), expected: named.unwrap_or(0) }),
    }
    let stored = u32::from_le_bytes(field(bytes, 28));
    let computed = checksum(bytes);
    if stored != computed {
        return Err(Corrupt::BadChecksum { stored, computed });
    }
    let count = u16::from_le_bytes(field(bytes, 6));
    let used = u32::from_le_bytes(field(bytes, 24));
    let bad = Corrupt::BadLayout { used, count };
    let end = HEADER_LEN.checked_add(used as usize).filter(|&e| e <= bytes.len()).ok_or(bad)?;
    let mut entries = Vec::with_capacity(usize::from(count).min(bytes.len() / RECORD_HEADER_LEN));
    let mut at = HEADER_LEN;
    for _ in 0..count {
        if end - at < RECORD_HEADER_LEN {
            return Err(bad);
        }
        let stream = u32::from_le_bytes(field(bytes, at));
        let len = u32::from_le_bytes(field(bytes, at + 4)) as usize;
        let seq = u64::from_le_bytes(field(bytes, at + 8));
        at += RECORD_HEADER_LEN;
        if end - at < len {
            return Err(bad);
        }
        entries.push(Entry { stream, seq, payload: bytes[at..at + len].to_vec() });
        at += len;
    }
    if at != end || bytes[end..].iter().any(|&b| b != 0) {
        return Err(bad);
    }
    Ok(Block { log_id: u64::from_le_bytes(field(bytes, 8)), number: u64::from_le_bytes(field(bytes, 16)), entries })
}

/// `N` bytes at `at`; the caller has checked the length.
fn field<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

/// XXH3-64 over the block with the checksum field (bytes 28..32) left out, low 32 bits.
fn checksum(block: &[u8]) -> u32 {
    let mut h = Xxh3::new();
    h.update(&block[..28]);
    h.update(&block[HEADER_LEN..]);
    h.digest() as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn block(entries: &[(u32, u64, Vec<u8>)], size: usize) -> Vec<u8> {
        let mut out = vec![0; size];
        encode(7, 3, entries.iter().map(|(s, q, p)| (*s, *q, p.as_slice())), &mut out).unwrap();
        out
    }

    #[test]
    fn six_framed_64_byte_records_fill_a_512_byte_block() {
        assert_eq!(room(512) / framed_len(64), 6);
        let entries: Vec<_> = (0..6).map(|k| (1, k, vec![k as u8; 64])).collect();
        let b = block(&entries, 512);
        assert_eq!(decode(&b).unwrap().entries.len(), 6);
        let mut out = vec![0; 512];
        let seven = (0..7).map(|k| (1, k, [0u8; 64].as_slice()));
        assert_eq!(encode(1, 0, seven, &mut out), Err(EncodeError::TooFull { need: 560, room: 480 }));
    }

    #[test]
    fn a_flipped_byte_anywhere_is_caught() {
        let b = block(&[(2, 9, b"hello".to_vec())], 512);
        for i in 0..b.len() {
            let mut torn = b.clone();
            torn[i] ^= 0x40;
            assert!(decode(&torn).is_err(), "flip at {i} went unnoticed");
        }
    }

    #[test]
    fn a_block_torn_after_its_first_sector_is_caught() {
        let entries: Vec<_> = (0..50).map(|k| (1, k, vec![0xab; 64])).collect();
        let mut b = block(&entries, 4096);
        b[512..].fill(0);
        assert!(matches!(decode(&b), Err(Corrupt::BadChecksum { .. })));
        assert_eq!(decode(&[0; 512]), Err(Corrupt::Empty));
        assert_eq!(decode(&b[..512]), Err(Corrupt::Short { len: 512, expected: 4096 }));
    }

    #[test]
    fn odd_block_sizes_are_refused() {
        let mut out = vec![0; 1000];
        assert_eq!(encode(1, 0, [], &mut out), Err(EncodeError::BlockSize(1000)));
    }

    proptest! {
        #[test]
        fn decode_inverts_encode(
            log_id in any::<u64>(),
            number in any::<u64>(),
            shift in 9u32..13,
            entries in proptest::collection::vec((any::<u32>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..200)), 0..30),
        ) {
            let size = 1usize << shift;
            let mut fitting = Vec::new();
            let mut used = 0;
            for e in entries {
                if used + framed_len(e.2.len()) > room(size) { break; }
                used += framed_len(e.2.len());
                fitting.push(e);
            }
            let mut out = vec![0; size];
            encode(log_id, number, fitting.iter().map(|(s, q, p)| (*s, *q, p.as_slice())), &mut out).unwrap();
            let b = decode(&out).unwrap();
            prop_assert_eq!(b.log_id, log_id);
            prop_assert_eq!(b.number, number);
            let back: Vec<_> = b.entries.into_iter().map(|e| (e.stream, e.seq, e.payload)).collect();
            prop_assert_eq!(back, fitting);
        }

        #[test]
        fn any_bytes_decode_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..1100), valid_head in any::<bool>()) {
            let mut bytes = bytes;
            if valid_head && bytes.len() >= HEADER_LEN {
                // Get past the magic and version checks, to reach the length fields.
                bytes[0..4].copy_from_slice(&MAGIC);
                bytes[4] = VERSION;
            }
            let _ = decode(&bytes);
            let _ = block_size_of(&bytes);
        }
    }
}
