#![no_main]
//! What reaches the jobs coordinator and its workers from outside: result bodies (framed
//! parts), poll bodies, program names and arguments, applications' inputs, and the records a
//! reduce reads. Any bytes read without a panic; a result body that decodes encodes back to
//! itself; splitting keeps every byte.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| switchyard_jobs::fuzzing::check(data));
