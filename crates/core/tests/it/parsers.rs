//! The parsers of outside input never panic on any string (the fuzz targets in `fuzz/` explore
//! further; these run in CI).

use proptest::prelude::*;
use switchyard_core::{FlowKey, Topology};

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn topology_specs_never_panic(spec in "\\PC{0,24}|[0-9x@,.:a-z-]{0,24}") {
        if let Ok(t) = Topology::parse(&spec) {
            let n = t.leaves().min(32);
            for a in 0..n {
                prop_assert_eq!(t.cost(a, a), 1.0);
                for b in 0..n {
                    prop_assert_eq!(t.cost(a, b), t.cost(b, a));
                }
            }
        }
    }

    #[test]
    fn key_lines_never_panic(line in "\\PC{0,60}|(tcp|udp|17|6) [0-9.:\\[\\]a-f]{0,24} [0-9.:\\[\\]a-f]{0,24}") {
        let key = FlowKey::parse(&line);
        let _ = key.id();
        if let FlowKey::Tuple(_) = &key {
            prop_assert_eq!(FlowKey::parse(&key.to_string()), key);
        }
    }
}
