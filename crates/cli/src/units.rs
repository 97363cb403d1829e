//! Sizes as people write them on a command line.

/// `512`, `16K`, `2M`, `1G`: bytes, KiB, MiB, GiB (either case, also written `KiB`, `MiB`,
/// `GiB`), positive.
pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let bare = s.strip_suffix("iB").or_else(|| s.strip_suffix("ib")).unwrap_or(s);
    let (digits, unit) = match bare.as_bytes().last() {
        Some(b'K' | b'k') => (&bare[..bare.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&bare[..bare.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&bare[..bare.len() - 1], 1 << 30),
        _ if bare.len() < s.len() => ("", 1),
        _ => (s, 1),
    };
    match digits.parse::<usize>() {
        Ok(n) if n > 0 => n.checked_mul(unit).ok_or_else(|| format!("{s}: too large")),
        _ => Err(format!(
            "{s:?}: a size is a positive whole number, optionally with K, M or G, or KiB, MiB or GiB (e.g. 512, 16K, 2M, 256MiB)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("16K"), Ok(16 << 10));
        assert_eq!(parse_size("2m"), Ok(2 << 20));
        assert_eq!(parse_size(" 1G "), Ok(1 << 30));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("4kib"), Ok(4 << 10));
        for bad in ["0", "", "K", "-1", "1.5M", "2T", "5iB", "MiB", "2TiB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_size(&format!("{}G", usize::MAX)).unwrap_err().contains("too large"));
    }
}
