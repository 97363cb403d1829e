//! The machine a benchmark ran on, in one line for its report: a figure measured here is this
//! machine's, and a reader comparing two reports needs to know whether the machines differ.

/// `CPU model, N cores, L3 S` as Linux describes this machine (`/proc/cpuinfo`'s model name,
/// the cores this process may use, CPU 0's last-level cache from sysfs); what cannot be read is
/// left out of the line.
pub fn describe() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| model_name(&text));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut parts = vec![model.unwrap_or_else(|| "unknown CPU".to_string())];
    parts.push(format!("{cores} core{}", if cores == 1 { "" } else { "s" }));
    if let Some((level, size)) = last_level_cache() {
        parts.push(format!("L{level} {size}"));
    }
    parts.join(", ")
}

/// The first `model name` of `/proc/cpuinfo`'s text.
fn model_name(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|v| !v.is_empty())
}

/// CPU 0's highest cache level and its size as sysfs writes it (`266240K` becomes `260 MiB`).
fn last_level_cache() -> Option<(u32, String)> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    (0..16)
        .map_while(|k| {
            let d = dir.join(format!("index{k}"));
            d.exists().then_some(d)
        })
        .filter_map(|d| {
            let read = |f: &str| std::fs::read_to_string(d.join(f)).ok().map(|s| s.trim().to_owned());
            Some((read("level")?.parse::<u32>().ok()?, read("size")?))
        })
        .max_by_key(|(level, _)| *level)
        .map(|(level, size)| (level, readable_size(&size)))
}

fn readable_size(sys: &str) -> String {
    match sys.strip_suffix('K').and_then(|k| k.parse::<u64>().ok()) {
        Some(k) if k >= 1024 && k % 1024 == 0 => format!("{} MiB", k / 1024),
        Some(k) => format!("{k} KiB"),
        None => sys.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_and_cache_read_as_people_write_them() {
        let text = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)  Platinum 8488C\nflags\t: fpu\n";
        assert_eq!(model_name(text).as_deref(), Some("Intel(R) Xeon(R) Platinum 8488C"));
        assert_eq!(model_name("processor: 0\n"), None);
        assert_eq!(readable_size("266240K"), "260 MiB");
        assert_eq!(readable_size("48K"), "48 KiB");
        assert!(describe().contains("core"));
    }
}
