//! The `deliver_request` fuzz corpus (fuzz/corpus/deliver_request), replayed on stable: every
//! input parses as a request line and as an answer line without a panic, and what parses writes
//! back to a line that parses the same.

use switchyard_runtime::deliver::request::{Answer, parse};

#[test]
fn the_fuzz_corpus_parses_without_panic_and_round_trips() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/deliver_request");
    let (mut n, mut requests) = (0, 0);
    for entry in std::fs::read_dir(dir).expect("the corpus is in the tree") {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        if let Ok(req) = parse(&data) {
            assert_eq!(parse(req.line().as_bytes()), Ok(req));
            requests += 1;
        }
        if let Some(a) = Answer::parse(&data) {
            assert_eq!(Answer::parse(a.line().as_bytes()), Some(a));
        }
        n += 1;
    }
    assert!(n >= 7 && requests >= 3, "{n} inputs, {requests} requests: the corpus is missing");
}
