#![no_main]
//! Any bytes as a blocklog device: reading them back never panics and accounts for every block,
//! and a block that decodes re-encodes to exactly the bytes it came from. The checks live in
//! `switchyard_blocklog::fuzzing`, which the stable tests replay the corpus through.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| switchyard_blocklog::fuzzing::check(data));
