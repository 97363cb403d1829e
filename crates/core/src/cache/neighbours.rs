//! Which locations may stand in for a location: the neighbourhood N(l) of the approximate
//! policies.
//!
//! Yates §5.2 never defines N(l) (notes 000 §3.5). It is pluggable here: lattice neighbours
//! (the six cells that share a face, in a 3-D grid), the k nearest, or all within a radius.
//! Each list is sorted nearest first, ties by location.

/// A location's coordinates, in the field's units.
pub type Point = [f64; 3];

/// Gives each key the keys that may stand in for it, nearest first, with their distances.
pub trait Neighbourhood<K> {
    /// `key`'s neighbours and their distances from it, nearest first.
    fn of(&self, key: &K) -> &[(K, f64)];
}

/// No key stands in for another: the precise policies, and a generic HTTP cache.
#[derive(Clone, Copy, Debug, Default)]
pub struct Alone;

impl<K> Neighbourhood<K> for Alone {
    fn of(&self, _key: &K) -> &[(K, f64)] {
        &[]
    }
}

/// How N(l) is chosen for a field of numbered locations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// The cells sharing a face in an `nx × ny × nz` lattice numbered x fastest (at most six).
    Lattice {
        /// Cells along x, y and z.
        dims: [usize; 3],
    },
    /// The `k` nearest other locations.
    Nearest(usize),
    /// Every other location within this distance.
    Within(f64),
}

impl std::str::FromStr for Rule {
    type Err = String;

    /// `nearest:K` or `within:R` (the lattice rule needs the field's shape, so drivers build it).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || {
            format!(
                "neighbourhood `{s}`: say `nearest:K` (the K nearest locations) or `within:R` (all within distance R)"
            )
        };
        let (kind, arg) = s.split_once(':').ok_or_else(bad)?;
        match kind {
            "nearest" => arg.parse().ok().filter(|k| *k > 0).map(Self::Nearest).ok_or_else(bad),
            "within" => arg.parse().ok().filter(|r: &f64| r.is_finite() && *r > 0.0).map(Self::Within).ok_or_else(bad),
            _ => Err(bad()),
        }
    }
}

/// The neighbourhoods of locations `0..n`, computed once.
#[derive(Clone, Debug, Default)]
pub struct Neighbours {
    lists: Vec<Vec<(u32, f64)>>,
}

fn distance(a: Point, b: Point) -> f64 {
    let d: f64 = (0..3).map(|i| (a[i] - b[i]) * (a[i] - b[i])).sum();
    d.sqrt()
}

impl Neighbours {
    /// The neighbourhoods of `points` under `rule`. For [`Rule::Lattice`], `points` must be the
    /// lattice's cells, x fastest.
    pub fn new(points: &[Point], rule: Rule) -> Self {
        let n = points.len();
        let lists = (0..n)
            .map(|i| {
                let mut list: Vec<(u32, f64)> = match rule {
                    Rule::Lattice { dims: [nx, ny, nz] } => {
                        debug_assert_eq!(nx * ny * nz, n, "the lattice's cells");
                        let (x, y, z) = (i % nx, (i / nx) % ny, i / (nx * ny));
                        let mut cells = Vec::with_capacity(6);
                        let step = [1, nx, nx * ny];
                        for (axis, (c, len)) in [(x, nx), (y, ny), (z, nz)].into_iter().enumerate() {
                            if c > 0 {
                                cells.push(i - step[axis]);
                            }
                            if c + 1 < len {
                                cells.push(i + step[axis]);
                            }
                        }
                        cells.into_iter().map(|j| (j as u32, distance(points[i], points[j]))).collect()
                    }
                    Rule::Nearest(_) | Rule::Within(_) => (0..n)
                        .filter(|&j| j != i)
                        .map(|j| (j as u32, distance(points[i], points[j])))
                        .filter(|&(_, d)| !matches!(rule, Rule::Within(r) if d > r))
                        .collect(),
                };
                list.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
                if let Rule::Nearest(k) = rule {
                    list.truncate(k);
                }
                list
            })
            .collect();
        Self { lists }
    }

    /// Neighbourhoods given as lists (for location `i`, `lists[i]`: neighbours and distances),
    /// such as a field service describes; each list is sorted nearest first.
    pub fn from_lists(mut lists: Vec<Vec<(u32, f64)>>) -> Self {
        for list in &mut lists {
            list.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        }
        Self { lists }
    }

    /// Locations covered.
    pub fn len(&self) -> usize {
        self.lists.len()
    }

    /// Whether no location is covered.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// The mean neighbourhood size.
    pub fn mean_size(&self) -> f64 {
        self.lists.iter().map(Vec::len).sum::<usize>() as f64 / self.lists.len().max(1) as f64
    }
}

impl Neighbourhood<u32> for Neighbours {
    fn of(&self, key: &u32) -> &[(u32, f64)] {
        self.lists.get(*key as usize).map_or(&[], Vec::as_slice)
    }
}

/// The cells of an `nx × ny × nz` lattice with the given spacing, x fastest, starting at the
/// origin.
pub fn lattice(dims: [usize; 3], spacing: [f64; 3]) -> Vec<Point> {
    let [nx, ny, nz] = dims;
    (0..nx * ny * nz)
        .map(|i| {
            let c = [i % nx, (i / nx) % ny, i / (nx * ny)];
            [c[0] as f64 * spacing[0], c[1] as f64 * spacing[1], c[2] as f64 * spacing[2]]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lattice_cells_have_their_face_neighbours_nearest_first() {
        let points = lattice([10, 10, 10], [8.0, 6.0, 4.0]);
        let n = Neighbours::new(&points, Rule::Lattice { dims: [10, 10, 10] });
        // A corner has three, an inner cell six; the z neighbour (4 apart) comes first.
        assert_eq!(n.of(&0).iter().map(|p| p.0).collect::<Vec<_>>(), vec![100, 10, 1]);
        let inner = 5 + 5 * 10 + 5 * 100;
        let got: Vec<(u32, f64)> = n.of(&inner).to_vec();
        assert_eq!(got.len(), 6);
        assert_eq!(got[0], (inner - 100, 4.0));
        assert_eq!(got[5], (inner + 1, 8.0));
        // 8 corners × 3 + 12 edges × 8 × 4 + 6 faces × 64 × 5 + 512 × 6, over 1,000.
        assert!((n.mean_size() - 5.4).abs() < 1e-9, "{}", n.mean_size());
    }

    #[test]
    fn nearest_and_within_agree_with_distances() {
        let points = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [3.0, 0.0, 0.0], [0.0, 2.0, 0.0]];
        let k2 = Neighbours::new(&points, Rule::Nearest(2));
        assert_eq!(k2.of(&0), &[(1, 1.0), (3, 2.0)]);
        let r = Neighbours::new(&points, Rule::Within(2.0));
        assert_eq!(r.of(&2), &[(1, 2.0)]);
        assert!(r.of(&9).is_empty(), "an unknown location has no neighbours");
    }

    #[test]
    fn rules_parse_with_teaching_errors() {
        assert_eq!("nearest:4".parse::<Rule>(), Ok(Rule::Nearest(4)));
        assert_eq!("within:7.5".parse::<Rule>(), Ok(Rule::Within(7.5)));
        for bad in ["nearest", "nearest:0", "within:-1", "ring:3"] {
            assert!(bad.parse::<Rule>().unwrap_err().contains("nearest:K"), "{bad}");
        }
    }
}
