//! The fuzzer's buffers (fuzz/corpus/tls_sni, which seeds the `app_fields` target) through the
//! readers of what flow records show of DNS and HTTP, on stable Rust in every test run.

use switchyard_runtime::app_fields::{self, AppFields};
use switchyard_runtime::inspect::{Found, Protocol};

#[test]
fn the_fuzz_corpus_is_read_without_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/tls_sni");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        for name in ["dns", "http"] {
            let found = Found { protocol: Protocol::by_name(name).unwrap(), from_client: true };
            for split in [0, bytes.len() / 2, bytes.len()] {
                if let Some(AppFields::Http { url, .. }) =
                    app_fields::read(found, &bytes, [Some(0), Some(split)], true).as_deref()
                {
                    assert!(url.bytes().all(|c| c == b' ' || c.is_ascii_graphic()));
                }
            }
        }
        files += 1;
    }
    assert!(files > 50, "the corpus is in the repository: {files} files");
}
