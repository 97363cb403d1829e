//! The parsers of outside input never panic on any string (the fuzz targets in `fuzz/` explore
//! further; these run in CI).

use proptest::prelude::*;
use switchyard_core::{FlowKey, Topology};

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn topology_specs_never_panic(spec in "\\PC{0,24}|[0-9x@,.:a-z-]{0,24}") {
        if let Ok(t) = Topology::parse(&spec) {
            let n = t.leaves().min(32);
            for a in 0..n {
                prop_assert_eq!(t.cost(a, a), 1.0);
                for b in 0..n {
                    prop_assert_eq!(t.cost(a, b), t.cost(b, a));
                }
            }
        }
    }

    #[test]
    fn key_lines_never_panic(line in "\\PC{0,60}|(tcp|udp|17|6) [0-9.:\\[\\]a-f]{0,24} [0-9.:\\[\\]a-f]{0,24}") {
        let key = FlowKey::parse(&line);
        let _ = key.id();
        if let FlowKey::Tuple(_) = &key {
            prop_assert_eq!(FlowKey::parse(&key.to_string()), key);
        }
    }
}

/// The frame decoder's fuzz corpus (fuzz/corpus/frame), replayed on stable Rust with the fuzz
/// target's checks: whole frames re-encode to their own bytes, and a partial or bad frame is left
/// where it was.
#[test]
fn the_frame_fuzz_corpus_decodes_and_re_encodes() {
    use switchyard_core::carry::Frame;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/frame");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).expect("the corpus is in the repository") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        files += 1;
        let mut buf = bytes::BytesMut::from(&data[..]);
        let mut at = 0;
        loop {
            let before = buf.len();
            match Frame::decode(&mut buf, 4096) {
                Ok(Some(frame)) => {
                    let taken = before - buf.len();
                    let mut again = bytes::BytesMut::new();
                    frame.encode(&mut again);
                    assert_eq!(&again[..], &data[at..at + taken]);
                    at += taken;
                }
                Ok(None) | Err(_) => {
                    assert_eq!(buf.len(), before);
                    break;
                }
            }
        }
    }
    assert!(files >= 10, "{files} corpus files");
}
