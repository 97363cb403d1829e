//! Every report the evidence can give, by command: what `switchyard schema` prints and what
//! the tests check each report against.

use crate::report::ReportSpec;

/// The reproductions' reports, by `switchyard reproduce NAME`.
pub const REPRODUCTIONS: &[&ReportSpec] = &[
    &crate::guo_irq::SPEC,
    &crate::rgedf::SPEC,
    &crate::ko::SPEC,
    &crate::miscort::SPEC,
    &crate::miscort_real::SPEC,
    &crate::guo_xen::SPEC,
    &crate::scenarios::DPI_AFFINITY,
    &crate::scenarios::NIAGARA_HIERARCHY,
    &crate::scenarios::GOP_CACHE_AWARE,
    &crate::scenarios::NIAGARA_HIERARCHY_CACHE,
    &crate::scenarios::GOP_CACHE_AWARE_CACHE,
    &crate::scenarios::PS_SHARES,
    &crate::clp::SPEC,
    &crate::iwashima::SPEC,
    &crate::yates_cache::SPEC,
    &crate::cacheflow::SPEC,
    &crate::figurehead::SPEC,
];

/// The benchmarks' reports, by `switchyard bench NAME`.
pub const BENCHMARKS: &[&ReportSpec] = &[
    &crate::bench::inspect::SPEC,
    &crate::bench::mux::SPEC,
    #[cfg(target_os = "linux")]
    &crate::bench::steer::SPEC,
    &crate::bench::shm::SPEC,
    &crate::bench::gateway::SPEC,
    &crate::bench::deliver::SPEC,
    &crate::bench::jobs::SPEC,
    &crate::bench::figurehead::SPEC,
    &crate::bench::blocklog::SPEC,
    &crate::bench::eviction::SPEC,
    &crate::bench::memory::SPEC,
    &crate::bench::transcode::SPEC,
];

/// The spec of reproduction `name`, if there is one.
pub fn reproduction(name: &str) -> Option<&'static ReportSpec> {
    REPRODUCTIONS.iter().copied().find(|s| s.name == name)
}

/// The spec of benchmark `name` (`mux`, `gateway`, …), if there is one.
pub fn benchmark(name: &str) -> Option<&'static ReportSpec> {
    BENCHMARKS.iter().copied().find(|s| s.name.strip_prefix("bench-") == Some(name))
}
