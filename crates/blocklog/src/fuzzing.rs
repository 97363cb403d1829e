//! The fuzz target's checks, here so that the stable test suite can replay its corpus with
//! exactly them (fuzz/fuzz_targets/blocklog_block.rs, tests/it/corpus.rs).

use crate::frame::{decode, encode};
use crate::read::{ReadOptions, Verdict, recover};

/// Any bytes as a blocklog device: reading them back never panics, accounts for every block and
/// reads no record unless block 0 names the log; and a block that decodes re-encodes to exactly
/// the bytes it came from (the format has one encoding per block, padding included, so nothing
/// unread can hide in it).
pub fn check(data: &[u8]) {
    let r = recover(data, ReadOptions::default());
    assert_eq!(r.intact + r.empty + r.stale.len() as u64 + r.bad.len() as u64, r.blocks);
    if let Verdict::Unnamed { .. } = r.verdict() {
        assert!(r.entries.is_empty() && r.intact == 0);
    }
    if let Ok(block) = decode(data) {
        let mut again = vec![0; data.len()];
        let entries = block.entries.iter().map(|e| (e.stream, e.seq, e.payload.as_slice()));
        encode(block.log_id, block.number, entries, &mut again).expect("a decoded block fits its own size");
        assert_eq!(again, data);
    }
}
