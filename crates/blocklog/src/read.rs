//! Reading a log back, after a clean close or a crash: every intact record in block order,
//! every block that is not intact named with its reason, and a [`Verdict`] on the whole. Nothing
//! read can make it panic.
//!
//! The writer writes block `n` only after block `n - 1` is durable, so after a crash the log is
//! a run of intact blocks, then at most one torn block (the write in flight), then blocks that
//! were never written (zeros at the end of a file) or that an earlier log left (on a block
//! device, which is not truncated: another log id, or a block number that is not the block's
//! place).
//!
//! # Whose blocks these are
//!
//! A log is named by its block 0: the writer writes it first, and a block carrying another id
//! than block 0's is not this log's. When block 0 is not intact (torn, never written, or not a
//! blocklog block), the blocks after it cannot be told apart from an earlier log's on the same
//! device: a second log killed while writing its block 0 leaves the first log's blocks 1, 2, …
//! intact behind it. Those are then read as nobody's ([`Verdict::Unnamed`]), unless the caller
//! knows the log's id ([`ReadOptions::log_id`]; `blocklog write` prints it). Since block 1 is
//! written only once block 0 is durable, a log whose block 0 tore while being written
//! acknowledged no record at all.
//!
//! # Which block size
//!
//! Unless the caller gives it, the block size is the one an intact block 0's header names. When
//! block 0 is not intact its header cannot be trusted, so the size is probed: each size the
//! format allows, smallest first, until the block at offset `size` decodes as an intact block
//! numbered 1 (of the given log, if one is given). Failing that, a torn block 0's header's size
//! if it names one, else 512.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::Path;

use crate::device::read_full_at;
use crate::frame::{self, Corrupt, Entry};

/// How to read a log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Bytes of a block; `None`: what block 0 says, or probed when block 0 is not intact.
    pub block_size: Option<usize>,
    /// The log's id, if the caller knows it: checked against block 0, and what names the log
    /// when block 0 is not intact.
    pub log_id: Option<u64>,
}

/// Where the block size read with came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SizeFrom {
    /// The caller's.
    Given,
    /// Block 0's header, block 0 being intact.
    #[default]
    Block0,
    /// Block 0 is not intact; block 1 decoded at this size.
    Probed,
    /// Neither: a torn block 0's header's size, or the smallest.
    Guessed,
}

/// Why block 0 does not name the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block0 {
    /// There is no block 0: the file or device is empty.
    Missing,
    /// Block 0 is torn, corrupt, not a blocklog block, or never written ([`Corrupt::Empty`]).
    Bad(Corrupt),
    /// Block 0 is intact but says it is block `number` of its log.
    OutOfPlace {
        /// The number it carries.
        number: u64,
    },
    /// Block 0 is an intact block of another log than the one the caller named.
    OtherLog {
        /// Its log's id.
        log_id: u64,
    },
}

impl std::fmt::Display for Block0 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing => write!(f, "there is no block 0 (nothing was written)"),
            Self::Bad(Corrupt::Empty) => write!(f, "block 0 was never written (all zeros)"),
            Self::Bad(why) => write!(f, "block 0 is not intact: {why}"),
            Self::OutOfPlace { number } => write!(f, "block 0 is intact but says it is block {number} of its log"),
            Self::OtherLog { log_id } => write!(f, "block 0 is log {log_id:016x}'s, not the one asked for"),
        }
    }
}

/// What reading a log found, on the whole: the caller's question "is every acknowledged record
/// there?" answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every block from 0 to the last intact one is intact, and the block after it is not torn:
    /// a clean close, or a crash between writes.
    Clean,
    /// The block after the last intact one is torn or corrupt, and nothing before it: what a
    /// crash during that block's write leaves. Its records were never acknowledged (a record is
    /// acknowledged once its block is durable), so every acknowledged record is intact — unless
    /// the block was damaged after it was durable, which a reader cannot tell apart.
    TornTail {
        /// The torn block.
        block: u64,
        /// Why it is not intact.
        why: Corrupt,
    },
    /// Blocks before the last intact one are not intact blocks of this log (torn, corrupt,
    /// never written or another log's), or records are out of their stream's order: records
    /// that were durable are lost or damaged.
    Damaged {
        /// Blocks lost before the last intact one.
        lost_blocks: u64,
        /// The first of them.
        first_lost: Option<u64>,
        /// Records out of their stream's order.
        out_of_order: u64,
    },
    /// Block 0 does not name the log and the caller gave no log id: whose blocks follow
    /// cannot be told, so no record is read as this log's. Or the caller named a log, block 0
    /// is an intact block of another, and no block of the one named is there.
    Unnamed {
        /// Why block 0 does not name it.
        block0: Block0,
    },
}

/// What a log holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The block size read with.
    pub block_size: usize,
    /// Where that size came from.
    pub size_from: SizeFrom,
    /// The log's id: block 0's, or the caller's. `None` when block 0 does not name the log and
    /// the caller gave none: then no block is read as this log's.
    pub log_id: Option<u64>,
    /// Why block 0 does not name the log (`None`: it does).
    pub block0: Option<Block0>,
    /// Blocks scanned (a partial block at the end counts as one, and as bad).
    pub blocks: u64,
    /// Blocks intact and of this log, in place.
    pub intact: u64,
    /// Blocks never written.
    pub empty: u64,
    /// Blocks that are intact but another log's (or nobody's known), or out of place: their
    /// records are not read.
    pub stale: Vec<u64>,
    /// Intact blocks of other logs than this one, by log id: with no log named, every intact
    /// block is counted here (the earlier log a torn block 0 leaves behind shows as one).
    pub other_logs: BTreeMap<u64, u64>,
    /// Blocks torn or corrupt, with why.
    pub bad: Vec<(u64, Corrupt)>,
    /// Runs of blocks before an intact block of this log that are not intact blocks of it:
    /// their records are lost.
    pub holes: Vec<Range<u64>>,
    /// Every record of the intact blocks, in block order.
    pub entries: Vec<Entry>,
    /// Records whose number is not above the last one read of their stream (a duplicate or a
    /// reordering: the writer never produces one).
    pub out_of_order: u64,
    /// Records per stream.
    pub per_stream: BTreeMap<u32, u64>,
    /// The last intact block's index.
    pub last_intact: Option<u64>,
    last_seq: BTreeMap<u32, u64>,
}

impl Recovery {
    /// An empty reading of blocks of `block_size` bytes, the log named by block 0 or, failing
    /// that, by `log_id`.
    #[must_use]
    pub fn new(block_size: usize, size_from: SizeFrom, log_id: Option<u64>) -> Self {
        Self { block_size, size_from, log_id, block0: Some(Block0::Missing), ..Self::default() }
    }

    /// Reads one more block (the next in the log).
    pub fn push(&mut self, bytes: &[u8]) {
        let index = self.blocks;
        self.blocks += 1;
        let decoded = if bytes.len() == self.block_size {
            frame::decode(bytes)
        } else if bytes.starts_with(&frame::MAGIC) || bytes.iter().all(|&b| b == 0) {
            Err(Corrupt::Short { len: bytes.len(), expected: self.block_size })
        } else {
            // Not even the start of a block: a short file that is no log says so.
            Err(Corrupt::BadMagic)
        };
        let block = match decoded {
            Ok(b) => b,
            Err(why) => {
                if index == 0 {
                    self.block0 = Some(Block0::Bad(why));
                }
                match why {
                    Corrupt::Empty => self.empty += 1,
                    why => self.bad.push((index, why)),
                }
                return;
            }
        };
        if index == 0 {
            self.block0 = match (block.number, self.log_id) {
                (0, None) => {
                    self.log_id = Some(block.log_id);
                    None
                }
                (0, Some(id)) if id == block.log_id => None,
                (0, Some(_)) => Some(Block0::OtherLog { log_id: block.log_id }),
                (number, _) => Some(Block0::OutOfPlace { number }),
            };
        }
        if self.log_id != Some(block.log_id) {
            *self.other_logs.entry(block.log_id).or_default() += 1;
        }
        if self.log_id != Some(block.log_id) || block.number != index {
            self.stale.push(index);
            return;
        }
        let next = self.last_intact.map_or(0, |last| last + 1);
        if index > next {
            self.holes.push(next..index);
        }
        self.intact += 1;
        self.last_intact = Some(index);
        for e in block.entries {
            if self.last_seq.get(&e.stream).is_some_and(|&last| e.seq <= last) {
                self.out_of_order += 1;
            }
            self.last_seq.insert(e.stream, e.seq);
            *self.per_stream.entry(e.stream).or_default() += 1;
            self.entries.push(e);
        }
    }

    /// The block after the last intact one: the end of the log, where a crash mid-write leaves
    /// a torn block. Blocks past it were never this log's (it writes one block at a time).
    #[must_use]
    pub fn tail(&self) -> u64 {
        self.last_intact.map_or(0, |last| last + 1)
    }

    /// What was found, on the whole.
    #[must_use]
    pub fn verdict(&self) -> Verdict {
        match (self.log_id, self.block0) {
            (None, block0) => return Verdict::Unnamed { block0: block0.unwrap_or(Block0::Missing) },
            (Some(_), Some(block0 @ Block0::OtherLog { .. })) if self.intact == 0 => {
                return Verdict::Unnamed { block0 };
            }
            _ => {}
        }
        if !self.holes.is_empty() || self.out_of_order > 0 {
            return Verdict::Damaged {
                lost_blocks: self.holes.iter().map(|h| h.end - h.start).sum(),
                first_lost: self.holes.first().map(|h| h.start),
                out_of_order: self.out_of_order,
            };
        }
        let tail = self.tail();
        match self.bad.iter().find(|&&(i, _)| i == tail) {
            Some(&(block, why)) => Verdict::TornTail { block, why },
            None => Verdict::Clean,
        }
    }

    /// Whether the log is whole: named by block 0 (or the caller), with every block up to its
    /// last intact one intact and in its streams' order, and the block after that not torn.
    /// Blocks past that are not the log's: never written, or an earlier log's on a reused device.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.verdict() == Verdict::Clean
    }
}

/// Reads a whole log from memory.
#[must_use]
pub fn recover(bytes: &[u8], opts: ReadOptions) -> Recovery {
    let read_at = |at: u64, len: usize| -> Result<Vec<u8>, std::convert::Infallible> {
        let from = usize::try_from(at).unwrap_or(usize::MAX).min(bytes.len());
        Ok(bytes[from..from.saturating_add(len).min(bytes.len())].to_vec())
    };
    let Ok((size, from)) = block_size(opts, read_at);
    let mut r = Recovery::new(size, from, opts.log_id);
    for chunk in bytes.chunks(size) {
        r.push(chunk);
    }
    r
}

/// Reads a log from a file or block device, a block at a time.
pub fn read_log(path: &Path, opts: ReadOptions) -> io::Result<Recovery> {
    let file = File::open(path)?;
    let (size, from) = block_size(opts, |at, len| -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        let n = read_full_at(&file, &mut buf, at)?;
        buf.truncate(n);
        Ok(buf)
    })?;
    let mut r = Recovery::new(size, from, opts.log_id);
    let mut buf = vec![0; size];
    let mut at = 0u64;
    loop {
        let n = read_full_at(&file, &mut buf, at)?;
        if n == 0 {
            break;
        }
        r.push(&buf[..n]);
        if n < size {
            break;
        }
        at += size as u64;
    }
    Ok(r)
}

/// The block size to read with, and where it came from (the module's doc says how).
fn block_size<E>(
    opts: ReadOptions,
    mut read_at: impl FnMut(u64, usize) -> Result<Vec<u8>, E>,
) -> Result<(usize, SizeFrom), E> {
    if let Some(size) = opts.block_size.filter(|&s| s > 0) {
        return Ok((size, SizeFrom::Given));
    }
    let ours = |b: &frame::Block| opts.log_id.is_none_or(|id| id == b.log_id);
    let named = frame::block_size_of(&read_at(0, frame::HEADER_LEN)?);
    if let Some(size) = named
        && frame::decode(&read_at(0, size)?).is_ok_and(|b| ours(&b))
    {
        return Ok((size, SizeFrom::Block0));
    }
    let mut size = frame::MIN_BLOCK;
    while size <= frame::MAX_BLOCK {
        if frame::decode(&read_at(size as u64, size)?).is_ok_and(|b| b.number == 1 && ours(&b)) {
            return Ok((size, SizeFrom::Probed));
        }
        size *= 2;
    }
    Ok((named.unwrap_or(frame::MIN_BLOCK), SizeFrom::Guessed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn log(blocks: &[&[(u32, u64)]], id: u64) -> Vec<u8> {
        let mut out = vec![0; 512 * blocks.len()];
        for (n, (chunk, records)) in out.chunks_mut(512).zip(blocks).enumerate() {
            frame::encode(id, n as u64, records.iter().map(|&(s, q)| (s, q, b"data".as_slice())), chunk).unwrap();
        }
        out
    }

    #[test]
    fn a_torn_last_block_is_named_and_the_rest_read() {
        let mut bytes = log(&[&[(1, 0), (2, 0)], &[(1, 1)], &[(2, 1)]], 5);
        bytes[1024 + 100] ^= 1;
        bytes.extend([0; 512]);
        let r = recover(&bytes, ReadOptions::default());
        assert_eq!(r.intact, 2);
        assert_eq!(r.empty, 1);
        assert_eq!(r.bad.len(), 1);
        assert_eq!(r.bad[0].0, 2);
        assert!(matches!(r.bad[0].1, Corrupt::BadChecksum { .. }));
        assert_eq!(r.entries.iter().map(|e| (e.stream, e.seq)).collect::<Vec<_>>(), [(1, 0), (2, 0), (1, 1)]);
        assert!(!r.is_clean());
        assert_eq!(r.last_intact, Some(1));
        assert!(matches!(r.verdict(), Verdict::TornTail { block: 2, why: Corrupt::BadChecksum { .. } }));
    }

    #[test]
    fn another_logs_blocks_and_misplaced_blocks_are_stale() {
        let mut bytes = log(&[&[(1, 0)], &[(1, 1)]], 5);
        bytes.extend(log(&[&[(1, 7)]], 6));
        bytes.extend(log(&[&[(1, 2)]], 5)); // block number 0 at place 3
        let r = recover(&bytes, ReadOptions { block_size: Some(512), log_id: None });
        assert_eq!(r.intact, 2);
        assert_eq!(r.stale, [2, 3]);
        assert_eq!(r.entries.len(), 2);
        assert!(r.is_clean(), "an earlier log's blocks after this one's end");
        let mut with_gap = log(&[&[(1, 0)]], 5);
        with_gap.extend(log(&[&[(1, 7)]], 6));
        let mut next = vec![0; 512];
        frame::encode(5, 2, [(1, 1, b"x".as_slice())], &mut next).unwrap();
        with_gap.extend(next);
        let r = recover(&with_gap, ReadOptions::default());
        assert_eq!(r.holes, vec![1..2]);
        assert_eq!(r.verdict(), Verdict::Damaged { lost_blocks: 1, first_lost: Some(1), out_of_order: 0 });
    }

    #[test]
    fn a_duplicate_record_is_counted() {
        let r = recover(&log(&[&[(1, 0), (1, 1)], &[(1, 1)]], 5), ReadOptions::default());
        assert_eq!(r.out_of_order, 1);
        assert!(matches!(r.verdict(), Verdict::Damaged { lost_blocks: 0, out_of_order: 1, .. }));
    }

    #[test]
    fn a_torn_tail_is_told_from_a_hole_before_it() {
        let whole = log(&[&[(1, 0)], &[(1, 1)], &[(1, 2)], &[(1, 3)]], 5);
        assert_eq!(recover(&whole, ReadOptions::default()).verdict(), Verdict::Clean);
        let mut tail = whole.clone();
        tail[3 * 512 + 40] ^= 0xff;
        let r = recover(&tail, ReadOptions::default());
        assert!(matches!(r.verdict(), Verdict::TornTail { block: 3, .. }), "{:?}", r.verdict());
        // A write cut short at the end of a file leaves part of a block.
        let r = recover(&whole[..3 * 512 + 100], ReadOptions::default());
        assert!(matches!(r.verdict(), Verdict::TornTail { block: 3, why: Corrupt::Short { .. } }));
        for (what, at) in [("torn", 512 + 40), ("never written", 512)] {
            let mut hole = whole.clone();
            if what == "torn" {
                hole[at] ^= 0xff;
            } else {
                hole[at..at + 512].fill(0);
            }
            let r = recover(&hole, ReadOptions::default());
            assert_eq!(
                r.verdict(),
                Verdict::Damaged { lost_blocks: 1, first_lost: Some(1), out_of_order: 0 },
                "{what}"
            );
            assert_eq!((r.last_intact, r.entries.len()), (Some(3), 3), "{what}");
        }
        // Past the block after the last intact one, nothing is the log's: a torn block there is
        // an earlier log's on a reused device.
        let mut reused = log(&[&[(1, 0)], &[(1, 1)]], 5);
        reused.extend(log(&[&[(1, 0)], &[(1, 1)], &[(1, 2)], &[(1, 3)]], 4)[2 * 512..].iter());
        reused[3 * 512 + 40] ^= 0xff;
        let r = recover(&reused, ReadOptions::default());
        assert_eq!((r.verdict(), r.bad.len(), r.stale.clone()), (Verdict::Clean, 1, vec![2]));
    }

    #[test]
    fn a_torn_block_0_does_not_adopt_the_older_log_after_it() {
        // Log 5 on a block device, then log 6 killed while writing its block 0.
        let mut bytes = log(&[&[(1, 0)], &[(1, 1)], &[(1, 2)], &[(1, 3)]], 5);
        bytes[..512].copy_from_slice(&log(&[&[(2, 0)]], 6));
        bytes[300] ^= 0x10;
        let r = recover(&bytes, ReadOptions::default());
        assert_eq!(r.log_id, None, "the log's id is block 0's, and block 0 is torn");
        assert!(r.entries.is_empty(), "no record of log 5 is read as this log's: {:?}", r.entries);
        assert!(!r.is_clean());
        assert!(matches!(r.verdict(), Verdict::Unnamed { block0: Block0::Bad(Corrupt::BadChecksum { .. }) }));
        assert_eq!(r.other_logs, BTreeMap::from([(5, 3)]), "the older log's blocks are named as such");
        // Told which log to read, the reader takes it on the caller's word: log 6 has nothing
        // past its torn block 0, log 5 lost its block 0.
        let six = recover(&bytes, ReadOptions { log_id: Some(6), ..ReadOptions::default() });
        assert!(six.entries.is_empty());
        assert!(matches!(six.verdict(), Verdict::TornTail { block: 0, .. }));
        let five = recover(&bytes, ReadOptions { log_id: Some(5), ..ReadOptions::default() });
        assert_eq!(five.entries.len(), 3);
        assert!(matches!(five.verdict(), Verdict::Damaged { first_lost: Some(0), .. }));
        // Block 0 intact but another log's than the one asked for.
        let whole = log(&[&[(1, 0)], &[(1, 1)]], 5);
        let r = recover(&whole, ReadOptions { log_id: Some(6), ..ReadOptions::default() });
        assert_eq!(r.block0, Some(Block0::OtherLog { log_id: 5 }));
        assert!(r.entries.is_empty());
        assert_eq!(r.verdict(), Verdict::Unnamed { block0: Block0::OtherLog { log_id: 5 } });
        // Nothing at all.
        assert_eq!(recover(&[], ReadOptions::default()).verdict(), Verdict::Unnamed { block0: Block0::Missing });
        let zeros = recover(&[0; 2048], ReadOptions::default());
        assert_eq!(zeros.verdict(), Verdict::Unnamed { block0: Block0::Bad(Corrupt::Empty) });
    }

    #[test]
    fn without_a_block_size_a_torn_block_0s_size_is_probed() {
        let mut bytes = vec![0; 4 * 4096];
        for (n, chunk) in bytes.chunks_mut(4096).enumerate() {
            frame::encode(9, n as u64, [(1, n as u64, b"data".as_slice())], chunk).unwrap();
        }
        // Torn within its first sector: the header that names the size is gone.
        bytes[..512].fill(0x5a);
        let r = recover(&bytes, ReadOptions::default());
        assert_eq!(r.block_size, 4096, "probed from block 1");
        assert_eq!(r.blocks, 4);
        assert_eq!(r.log_id, None);
        assert_eq!(r.size_from, SizeFrom::Probed);
        // Probed for the log asked for only.
        assert_eq!(
            recover(&bytes, ReadOptions { log_id: Some(8), ..ReadOptions::default() }).size_from,
            SizeFrom::Guessed
        );
        let r = recover(&bytes, ReadOptions { log_id: Some(9), ..ReadOptions::default() });
        assert_eq!((r.block_size, r.entries.len()), (4096, 3));
    }

    proptest! {
        #[test]
        fn any_bytes_recover_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..3000), size in prop_oneof![Just(None), Just(Some(512)), (0usize..700).prop_map(Some)]) {
            let opts = ReadOptions { block_size: size, log_id: None };
            let r = recover(&bytes, opts);
            prop_assert!(r.intact + r.empty + r.stale.len() as u64 + r.bad.len() as u64 == r.blocks);
        }
    }
}
