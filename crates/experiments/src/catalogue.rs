//! Every report the evidence can give, by command: what `switchyard schema` prints and what
//! the tests check each report against.

use crate::report::ReportSpec;

/// The reproductions' reports, by `switchyard reproduce NAME`.
pub const REPRODUCTIONS: &[&ReportSpec] =
    &[&crate::guo_irq::SPEC, &crate::yates_cache::SPEC, &crate::cacheflow::SPEC, &crate::figurehead::SPEC];

/// The benchmarks' reports, by `switchyard bench NAME`.
pub const BENCHMARKS: &[&ReportSpec] = &[];

/// The spec of reproduction `name`, if there is one.
pub fn reproduction(name: &str) -> Option<&'static ReportSpec> {
    REPRODUCTIONS.iter().copied().find(|s| s.name == name)
}

/// The spec of benchmark `name` (`mux`, `gateway`, …), if there is one.
pub fn benchmark(name: &str) -> Option<&'static ReportSpec> {
    BENCHMARKS.iter().copied().find(|s| s.name.strip_prefix("bench-") == Some(name))
}
