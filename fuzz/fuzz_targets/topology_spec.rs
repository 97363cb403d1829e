#![no_main]
//! Any string as a topology spec: refused with an error or accepted as a consistent tree.

use libfuzzer_sys::fuzz_target;
use switchyard_core::Topology;

fuzz_target!(|spec: &str| {
    if let Ok(t) = Topology::parse(spec) {
        let n = t.leaves().min(64);
        for a in 0..n {
            assert_eq!(t.cost(a, a), 1.0);
            for b in 0..n {
                assert_eq!(t.cost(a, b), t.cost(b, a));
            }
        }
    }
});
