#![no_main]
//! Any bytes as an Ethernet frame: the decoder's direct reading of plain IPv4 frames answers
//! exactly as etherparse's full slicing does, for every input (where it cannot answer, it
//! hands the frame to etherparse, so the two must always agree).

use libfuzzer_sys::fuzz_target;
use switchyard_ingest::{decode, decode_thorough};

fuzz_target!(|data: &[u8]| {
    assert_eq!(decode(1, data), decode_thorough(1, data));
});
