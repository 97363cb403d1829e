#![no_main]
//! Any bytes as the far end's TLS records after the handshake, arriving in any pieces: the
//! mux's record opener (`switchyard_mux::record`) takes whole records, waits for partial ones
//! and refuses bad ones without panicking, never reads past what has arrived, and never puts
//! plaintext past the record it came from. (Bytes that pass the AEAD's tag need the key; the
//! unit tests seal those with rustls.)

use libfuzzer_sys::fuzz_target;
use rustls::ConnectionTrafficSecrets;
use rustls::crypto::cipher::{AeadKey, Iv};
use switchyard_mux::record::{Direction, HEADER, Opened, Opener, TAG};

fuzz_target!(|input: (Vec<u8>, Vec<u16>)| {
    let (wire, cuts) = input;
    let secrets = ConnectionTrafficSecrets::Aes256Gcm { key: AeadKey::from([7u8; 32]), iv: Iv::from([9; 12]) };
    let mut opener = Opener::new(Direction::new(0, secrets).unwrap());
    let mut cuts: Vec<usize> = cuts.into_iter().map(|c| usize::from(c).min(wire.len())).collect();
    cuts.sort_unstable();
    let (mut buf, mut plain, mut raw, mut at) = (Vec::new(), 0, 0, 0);
    for cut in cuts.into_iter().chain([wire.len()]) {
        buf.extend_from_slice(&wire[at..cut]);
        at = cut;
        loop {
            match opener.open(&mut buf, plain, raw) {
                Ok(Opened::Data { len, used }) => {
                    assert!(len + HEADER + TAG < used);
                    plain += len;
                    raw += used;
                }
                Ok(Opened::Nothing { used }) => raw += used,
                Ok(Opened::Closed { .. }) | Err(_) => return,
                Ok(Opened::Partial { need }) => {
                    assert!(need > 0);
                    break;
                }
            }
            assert!(plain <= raw && raw <= buf.len());
        }
    }
});
