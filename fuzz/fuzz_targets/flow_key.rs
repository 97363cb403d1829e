#![no_main]
//! Any line of a key file: parsed without panicking, and 5-tuples round-trip through Display.

use libfuzzer_sys::fuzz_target;
use switchyard_core::FlowKey;

fuzz_target!(|line: &str| {
    let key = FlowKey::parse(line);
    let _ = key.id();
    if let FlowKey::Tuple(t) = &key {
        assert_eq!(FlowKey::parse(&key.to_string()), key);
        let reversed = FlowKey::Tuple(t.reversed());
        assert_eq!(key.clone().undirected().id(), reversed.undirected().id());
    }
});
