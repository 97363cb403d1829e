#![no_main]
//! A request's and a response's header fields, from outside, through every RFC 9111 decision
//! of the gateway's origin mode (`switchyard_core::cache::http`): see `fuzzing::check`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| switchyard_core::cache::http::fuzzing::check(data));
