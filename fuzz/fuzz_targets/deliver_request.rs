#![no_main]
//! Any bytes as a delivery client's request line and as a server's answer line: both parsers
//! return, never panic, and whatever parses writes back to a line that parses the same.

use libfuzzer_sys::fuzz_target;
use switchyard_runtime::deliver::request::{Answer, parse};

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(req) => assert_eq!(parse(req.line().as_bytes()), Ok(req)),
        Err(e) => {
            let _ = e.to_string();
        }
    }
    if let Some(answer) = Answer::parse(data) {
        assert_eq!(Answer::parse(answer.line().as_bytes()), Some(answer));
    }
});
