//! Reading a log back, after a clean close or a crash: every intact record in block order, and
//! every block that is not intact named with its reason. Nothing read can make it panic.
//!
//! The writer writes block `n` only after block `n - 1` is durable, so after a crash the log is
//! a run of intact blocks, then at most one torn block (the write in flight), then blocks that
//! were never written (zeros at the end of a file) or that an earlier log left (on a block
//! device: another log id, or a block number that is not the block's place).

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::Path;

use crate::frame::{self, Corrupt, Entry};

/// What a log holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The block size read with.
    pub block_size: usize,
    /// The log's id: that of its first intact block.
    pub log_id: Option<u64>,
    /// Blocks scanned (a partial block at the end counts as one, and as bad).
    pub blocks: u64,
    /// Blocks intact and of this log, in place.
    pub intact: u64,
    /// Blocks never written.
    pub empty: u64,
    /// Blocks that are intact but another log's, or out of place: their records are not read.
    pub stale: Vec<u64>,
    /// Blocks torn or corrupt, with why.
    pub bad: Vec<(u64, Corrupt)>,
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
    /// Reads one more block (the next in the log).
    pub fn push(&mut self, bytes: &[u8]) {
        let index = self.blocks;
        self.blocks += 1;
        if bytes.len() != self.block_size {
            self.bad.push((index, Corrupt::Short { len: bytes.len(), expected: self.block_size }));
            return;
        }
        let block = match frame::decode(bytes) {
            Ok(b) => b,
            Err(Corrupt::Empty) => {
                self.empty += 1;
                return;
            }
            Err(e) => {
                self.bad.push((index, e));
                return;
            }
        };
        let id = *self.log_id.get_or_insert(block.log_id);
        if block.log_id != id || block.number != index {
            self.stale.push(index);
            return;
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

    /// Whether the log is whole: no torn or corrupt block, no record out of its stream's order,
    /// and no stale block before the log's last intact one (stale blocks after it are what an
    /// earlier log left on a reused device).
    #[must_use]
    pub fn is_clean(&self) -> bool {
        self.bad.is_empty() && self.out_of_order == 0 && self.stale.iter().all(|&i| Some(i) > self.last_intact)
    }
}

/// Reads a whole log from memory. `block_size` `None` takes the size the first block's header
/// names (512 if it names none).
#[must_use]
pub fn recover(bytes: &[u8], block_size: Option<usize>) -> Recovery {
    let size = block_size.filter(|&s| s > 0).or_else(|| frame::block_size_of(bytes)).unwrap_or(frame::MIN_BLOCK);
    let mut r = Recovery { block_size: size, ..Recovery::default() };
    for chunk in bytes.chunks(size) {
        r.push(chunk);
    }
    r
}

/// Reads a log from a file or block device, a block at a time.
pub fn read_log(path: &Path, block_size: Option<usize>) -> io::Result<Recovery> {
    let mut file = std::fs::File::open(path)?;
    let size = match block_size.filter(|&s| s > 0) {
        Some(s) => s,
        None => {
            let mut head = [0; frame::HEADER_LEN];
            let n = read_full(&mut file, &mut head)?;
            file = std::fs::File::open(path)?;
            frame::block_size_of(&head[..n]).unwrap_or(frame::MIN_BLOCK)
        }
    };
    let mut r = Recovery { block_size: size, ..Recovery::default() };
    let mut buf = vec![0; size];
    loop {
        let n = read_full(&mut file, &mut buf)?;
        if n == 0 {
            break;
        }
        r.push(&buf[..n]);
        if n < size {
            break;
        }
    }
    Ok(r)
}

/// Reads until `buf` is full or the end; returns the bytes read.
fn read_full(file: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match file.read(&mut buf[at..]) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
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
        let r = recover(&bytes, None);
        assert_eq!(r.intact, 2);
        assert_eq!(r.empty, 1);
        assert_eq!(r.bad.len(), 1);
        assert_eq!(r.bad[0].0, 2);
        assert!(matches!(r.bad[0].1, Corrupt::BadChecksum { .. }));
        assert_eq!(r.entries.iter().map(|e| (e.stream, e.seq)).collect::<Vec<_>>(), [(1, 0), (2, 0), (1, 1)]);
        assert!(!r.is_clean());
    }

    #[test]
    fn another_logs_blocks_and_misplaced_blocks_are_stale() {
        let mut bytes = log(&[&[(1, 0)], &[(1, 1)]], 5);
        bytes.extend(log(&[&[(1, 7)]], 6));
        bytes.extend(log(&[&[(1, 2)]], 5)); // block number 0 at place 3
        let r = recover(&bytes, Some(512));
        assert_eq!(r.intact, 2);
        assert_eq!(r.stale, [2, 3]);
        assert_eq!(r.entries.len(), 2);
        assert!(r.is_clean(), "an earlier log's blocks after this one's end");
        let mut with_gap = log(&[&[(1, 0)]], 5);
        with_gap.extend(log(&[&[(1, 7)]], 6));
        let mut next = vec![0; 512];
        frame::encode(5, 2, [(1, 1, b"x".as_slice())], &mut next).unwrap();
        with_gap.extend(next);
        assert!(!recover(&with_gap, None).is_clean(), "a stale block inside the log");
    }

    #[test]
    fn a_duplicate_record_is_counted() {
        let r = recover(&log(&[&[(1, 0), (1, 1)], &[(1, 1)]], 5), None);
        assert_eq!(r.out_of_order, 1);
    }

    proptest! {
        #[test]
        fn any_bytes_recover_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..3000), size in prop_oneof![Just(None), Just(Some(512)), (0usize..700).prop_map(Some)]) {
            let r = recover(&bytes, size);
            prop_assert!(r.intact + r.empty + r.stale.len() as u64 + r.bad.len() as u64 == r.blocks);
        }
    }
}
