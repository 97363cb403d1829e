//! Disruption: how much of a placement changed (Guo §5.1.2's disruption coefficient).

/// Fraction of positions where `before` and `after` differ (Guo's "disruption coefficient").
/// Compares the common prefix; 0 for empty input.
pub fn moved_fraction<T: PartialEq>(before: &[T], after: &[T]) -> f64 {
    let n = before.len().min(after.len());
    if n == 0 {
        return 0.0;
    }
    before.iter().zip(after).filter(|(a, b)| a != b).count() as f64 / n as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_changed_positions() {
        assert_eq!(super::moved_fraction(&[1, 2, 3, 4], &[1, 9, 3, 9]), 0.5);
        assert_eq!(super::moved_fraction::<u8>(&[], &[]), 0.0);
    }
}
