//! What the HTTP cache's stored responses cost in memory, counted the way the allocator sees
//! them, and the machine's memory the default bound is a share of.
//!
//! The bound itself, and which response goes when it is reached, are the core's
//! (`switchyard_core::cache::Cache::bounded`); this module only weighs what the gateway keeps
//! and copies it out of the buffers it arrived in, so that what is counted is what is held.

use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// What one header field costs beyond its name and value: its slot in the map (hash, name,
/// value, links: about 100 bytes on 64-bit), its index, its value's allocation and the
/// allocator's headers. (Measured with a counting allocator: 3 typical fields take 508 bytes
/// asked for, 570 with the allocator's headers.)
pub(crate) const PER_FIELD: u64 = 160;

/// What one stored URL costs in the index beyond its key's bytes: the list of variants behind
/// an `Arc`, and the key in the core's index. (Measured with a counting allocator when the key
/// was held three times, in an ordered map beside the eviction policy's: 330 bytes asked for
/// per URL of 12 bytes, in six allocations, each with a 16-byte header.) Since the core's
/// entries are in one hash index whose slots also hold each entry's place in the policy, the
/// key is held twice (that index, and the policy's slot) in fewer allocations; this bound, and
/// the three copies of the key charged per URL, are kept as measured then: above the cost now,
/// never below it.
pub(crate) const PER_ENTRY: u64 = 400;

/// The allocator's header on each allocation (glibc: 16 bytes on 64-bit).
pub(crate) const PER_ALLOCATION: u64 = 16;

/// The share of the machine's memory the cache may fill by default (`--max-memory`).
pub const DEFAULT_SHARE: u64 = 4;

/// The bound where the machine's memory cannot be read.
pub const FALLBACK_MAX_MEMORY: u64 = 256 << 20;

/// The machine's memory in bytes (`MemTotal` of /proc/meminfo), if it can be read.
pub fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.trim_start_matches("MemTotal:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// `--max-memory` by default: a quarter of the machine's memory (a cache that is not the
/// machine's only job must leave it room), or 256 MiB where that cannot be read.
pub fn default_max_memory() -> u64 {
    machine_memory().map_or(FALLBACK_MAX_MEMORY, |m| m / DEFAULT_SHARE)
}

/// `--max-object-size` by default: an eighth of the bound, at most 64 MiB, so that no one
/// response can empty more than an eighth of the cache.
pub fn default_max_object_size(max_memory: u64) -> u64 {
    (max_memory / 8).min(64 << 20)
}

/// The process's resident memory in bytes (`VmRSS` of /proc/self/status), if it can be read.
pub fn resident() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// What `h`'s fields cost.
pub(crate) fn fields_weight(h: &HeaderMap) -> u64 {
    h.iter().map(|(n, v)| PER_FIELD + n.as_str().len() as u64 + v.len() as u64).sum()
}

/// `h` in allocations of its own. Fields parsed from a response are slices of the connection's
/// read buffer, so keeping them would keep that whole buffer (tens of KB) alive per response,
/// uncounted.
pub(crate) fn own_fields(h: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(h.len());
    for (n, v) in h {
        let name = HeaderName::from_bytes(n.as_str().as_bytes()).unwrap_or_else(|_| n.clone());
        let mut value = HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone());
        value.set_sensitive(v.is_sensitive());
        out.append(name, value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_and_the_process_can_be_read_here() {
        // Linux is where the gateway runs; these files are there.
        assert!(machine_memory().is_some_and(|m| m > 0));
        assert!(resident().is_some_and(|r| r > 0));
        assert_eq!(default_max_object_size(4 << 20), 512 << 10);
        assert_eq!(default_max_object_size(4 << 30), 64 << 20);
    }

    #[test]
    fn own_fields_keeps_every_field_and_value() {
        let mut h = HeaderMap::new();
        h.append("x-a", HeaderValue::from_static("1"));
        h.append("x-a", HeaderValue::from_static("2"));
        h.append("cache-control", HeaderValue::from_static("max-age=5"));
        assert_eq!(own_fields(&h), h);
        assert_eq!(fields_weight(&h), 3 * PER_FIELD + 3 + 1 + 3 + 1 + 13 + 9);
    }
}
