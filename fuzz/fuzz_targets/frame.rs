#![no_main]
//! Any bytes as a session connection's stream: the frame decoder takes whole frames, waits for
//! partial ones and refuses bad ones without panicking, and whatever it takes re-encodes to
//! exactly the bytes it came from.

use libfuzzer_sys::fuzz_target;
use switchyard_core::carry::Frame;
use switchyard_core::carry::frame::HEADER_LEN;

fuzz_target!(|data: &[u8]| {
    let mut buf = bytes::BytesMut::from(data);
    let mut at = 0;
    loop {
        let before = buf.len();
        match Frame::decode(&mut buf, 4096) {
            Ok(Some(frame)) => {
                let taken = before - buf.len();
                assert!(taken >= HEADER_LEN);
                assert_eq!(taken, frame.encoded_len());
                let mut again = bytes::BytesMut::new();
                frame.encode(&mut again);
                assert_eq!(&again[..], &data[at..at + taken], "{frame:?}");
                at += taken;
            }
            Ok(None) | Err(_) => {
                assert_eq!(buf.len(), before, "a partial or bad frame is left in place");
                break;
            }
        }
    }
});
