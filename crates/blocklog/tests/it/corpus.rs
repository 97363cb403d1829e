//! The `blocklog_block` fuzz corpus (fuzz/corpus/blocklog_block), replayed on stable with the
//! fuzz target's own checks.

#[test]
fn the_fuzz_corpus_reads_without_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/blocklog_block");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("the corpus is in the tree") {
        switchyard_blocklog::fuzzing::check(&std::fs::read(entry.unwrap().path()).unwrap());
        n += 1;
    }
    assert!(n >= 2, "{n} inputs");
}
