//! The machine as a tree of sharing levels (socket → shared cache → core → hardware thread), whose
//! leaves are workers, and the core-to-core communication cost derived from it.
//!
//! Trees are uniform: every node of one level has the same number of children, which is true of
//! all the machines in the source material and lets leaves be numbered in mixed radix (leaf `i`
//! is worker `i`, level 0 the most significant digit). A level's `cost` is the communication-cost
//! ratio between two distinct leaves whose paths first part at that level; a leaf's cost to itself
//! is 1. This is Guo's matrix `C[i][j] = c_ij` (Eq. 6.3), built from the tree rather than by hand.
//!
//! # Specs
//!
//! | spec | tree | costs (by parting level) |
//! |---|---|---|
//! | `xeon-e5335` | 2 sockets × 2 shared L2 × 2 cores | 12, 4, 2 (Guo §6.5.1: "2, 4, 12 as the core, L2 and socket level") |
//! | `opteron-2350` | 2 sockets (shared L3) × 4 cores | 3, 1.5 (Guo §6.5.1: "1.5 and 3 … core and L3 level") |
//! | `niagara2` | 8 cores × 2 pipelines × 4 threads | 2, 1.5, 1.25 (not in the source: chosen so that sharing more costs less) |
//! | `SxCxT`, e.g. `2x4x2` | any 1–8 fanouts, root side first | 2^L, …, 4, 2 for L levels |
//! | `flat:N` | N workers under one root | 2 |
//!
//! Any spec may end in `@c0,c1,…` to set the costs, one per level (e.g. `2x4@10,2`). The reading
//! of Guo's cost labels is the one in the notes (002_guo.md §3.6): the diagonal is 1 and each
//! value is the cost of running a flow's unit one sharing level further from its home node.

use std::fmt;

use thiserror::Error;

/// The most levels a tree may have.
pub const MAX_LEVELS: usize = 8;
/// The largest communication-cost ratio a level may have.
pub const MAX_COST: f64 = 1e6;
/// The most leaves (workers) a tree may have.
pub const MAX_LEAVES: u32 = 1 << 16;

/// One level of the tree.
#[derive(Clone, Debug, PartialEq)]
pub struct Level {
    /// What a node at this level is ("socket", "core", …).
    pub name: String,
    /// Children per node of the level above.
    pub fanout: u32,
    /// Communication-cost ratio between two leaves that part at this level.
    pub cost: f64,
}

/// A uniform topology tree whose leaves are workers `0..leaves()`.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    name: String,
    levels: Vec<Level>,
    /// `span[d]`: leaves under one node at depth `d` (depth 0 is the root).
    span: Vec<u32>,
    /// `offset[d]`: global id of the first node at depth `d`, for hashing tree nodes.
    offset: Vec<u32>,
    /// Bit position of each level's digit in a leaf's packed path code.
    shift: Vec<u32>,
    /// Level of each bit of a packed path code, for the parting level of two leaves.
    bit_level: [u8; 64],
    /// Each leaf's path packed into bit fields, level 0 highest, so two leaves' parting level is
    /// the level of the highest bit in which their codes differ.
    codes: Vec<u64>,
}

/// Why a topology spec was refused.
#[derive(Debug, Error, PartialEq)]
#[error(
    "bad topology spec `{spec}`: {reason}. Valid forms: xeon-e5335, opteron-2350, niagara2, SxCxT (e.g. 2x4x2), flat:N; optionally followed by @cost,cost,… with one cost per level"
)]
#[non_exhaustive]
pub struct TopologyError {
    /// The spec as given.
    pub spec: String,
    /// What is wrong with it.
    pub reason: String,
}

impl Topology {
    /// Builds a tree from its levels, root side first.
    pub fn new(name: impl Into<String>, levels: Vec<Level>) -> Result<Self, TopologyError> {
        let name = name.into();
        let err = |reason: String| TopologyError { spec: name.clone(), reason };
        if levels.is_empty() || levels.len() > MAX_LEVELS {
            return Err(err(format!("a tree has 1 to {MAX_LEVELS} levels, not {}", levels.len())));
        }
        let mut leaves: u64 = 1;
        for l in &levels {
            if l.fanout == 0 {
                return Err(err(format!("level `{}` has fanout 0", l.name)));
            } // Guo §6.3: c_ij > 1 off the diagonal (farther costs more); the upper bound keeps
            // weighted queues finite.
            if !(1.0..=MAX_COST).contains(&l.cost) {
                return Err(err(format!(
                    "level `{}` has cost {}; costs are numbers from 1 to {MAX_COST}",
                    l.name, l.cost
                )));
            }
            leaves *= u64::from(l.fanout);
            if leaves > u64::from(MAX_LEAVES) {
                return Err(err(format!("more than {MAX_LEAVES} leaves")));
            }
        }
        let depth = levels.len();
        let mut span = vec![0u32; depth + 1];
        span[depth] = 1;
        for d in (0..depth).rev() {
            span[d] = span[d + 1] * levels[d].fanout;
        }
        let mut offset = vec![0u32; depth + 1];
        let mut nodes_at = 1u32;
        for d in 0..depth {
            offset[d + 1] = offset[d] + nodes_at;
            nodes_at *= levels[d].fanout;
        }
        let bits: Vec<u32> = levels.iter().map(|l| 32 - (l.fanout - 1).leading_zeros()).collect();
        let mut shift = vec![0u32; depth];
        let mut bit_level = [0u8; 64];
        let mut pos = 0;
        for d in (0..depth).rev() {
            shift[d] = pos;
            for b in pos..pos + bits[d] {
                bit_level[b as usize] = d as u8;
            }
            pos += bits[d];
        }
        let mut t = Self { name, levels, span, offset, shift, bit_level, codes: Vec::new() };
        t.codes = (0..t.leaves()).map(|leaf| t.code(leaf)).collect();
        Ok(t)
    }

    /// `n` workers under one root, all equally far apart.
    pub fn flat(n: u32) -> Result<Self, TopologyError> {
        Self::new(format!("flat:{n}"), vec![Level { name: "worker".into(), fanout: n, cost: 2.0 }])
    }

    /// Parses a spec (see the module documentation).
    pub fn parse(spec: &str) -> Result<Self, TopologyError> {
        let err = |reason: &str| TopologyError { spec: spec.to_string(), reason: reason.to_string() };
        let (shape, costs) = match spec.split_once('@') {
            Some((s, c)) => (s.trim(), Some(c)),
            None => (spec.trim(), None),
        };
        let level = |name: &str, fanout: u32, cost: f64| Level { name: name.into(), fanout, cost };
        let mut levels = match shape {
            "xeon-e5335" => vec![level("socket", 2, 12.0), level("l2", 2, 4.0), level("core", 2, 2.0)],
            "opteron-2350" => vec![level("socket", 2, 3.0), level("core", 4, 1.5)],
            "niagara2" | "niagara-2" => {
                vec![level("core", 8, 2.0), level("pipeline", 2, 1.5), level("thread", 4, 1.25)]
            }
            s if s.starts_with("flat:") => {
                let n = s["flat:".len()..].parse::<u32>().map_err(|_| err("flat:N needs a whole number N"))?;
                vec![level("worker", n, 2.0)]
            }
            s => {
                let fanouts = s
                    .split(['x', 'X'])
                    .map(|f| f.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| err("expected a preset name or fanouts separated by `x`"))?;
                let names: &[&str] = match fanouts.len() {
                    1 => &["core"],
                    2 => &["socket", "core"],
                    3 => &["socket", "core", "thread"],
                    4 => &["socket", "cache", "core", "thread"],
                    _ => &[],
                };
                let l = fanouts.len();
                fanouts
                    .iter()
                    .enumerate()
                    .map(|(d, &f)| {
                        let name = names.get(d).map_or_else(|| format!("level{d}"), |n| n.to_string());
                        Level { name, fanout: f, cost: f64::from(1u32 << (l - d).min(31)) }
                    })
                    .collect()
            }
        };
        if let Some(costs) = costs {
            let parsed = costs
                .split(',')
                .map(|c| c.trim().parse::<f64>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| err("costs after `@` must be numbers separated by commas"))?;
            if parsed.len() != levels.len() {
                return Err(err(&format!("{} costs given for {} levels", parsed.len(), levels.len())));
            }
            for (l, c) in levels.iter_mut().zip(parsed) {
                l.cost = c;
            }
        }
        Self::new(spec.trim(), levels).map_err(|e| TopologyError { spec: spec.to_string(), reason: e.reason })
    }

    /// The spec this tree was made from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The levels, root side first.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Number of levels below the root.
    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    /// Number of leaves (workers).
    pub fn leaves(&self) -> u32 {
        self.span[0]
    }

    /// Leaves under one node at depth `d` (the root is depth 0).
    #[inline]
    pub fn span(&self, d: usize) -> u32 {
        self.span[d]
    }

    /// Children of each node at depth `d`.
    #[inline]
    pub fn fanout(&self, d: usize) -> u32 {
        self.levels[d].fanout
    }

    /// A tree-wide id for the `index`-th node at depth `d`, distinct for every node.
    #[inline]
    pub fn node_id(&self, d: usize, index: u32) -> u32 {
        self.offset[d] + index
    }

    fn code(&self, leaf: u32) -> u64 {
        let mut code = 0u64;
        for d in 0..self.depth() {
            let digit = (leaf / self.span[d + 1]) % self.levels[d].fanout;
            code |= u64::from(digit) << self.shift[d];
        }
        code
    }

    /// The level at which leaves `a` and `b` part, or `None` if they are the same leaf.
    ///
    /// # Panics
    ///
    /// If either leaf is not below [`Topology::leaves`].
    pub fn parting_level(&self, a: u32, b: u32) -> Option<usize> {
        let x = self.codes[a as usize] ^ self.codes[b as usize];
        (x != 0).then(|| self.bit_level[63 - x.leading_zeros() as usize] as usize)
    }

    /// Communication-cost ratio of running on leaf `to` a unit whose home is leaf `from`: 1 on the
    /// diagonal, the parting level's cost elsewhere (Guo Eq. 6.3, derived from the tree).
    ///
    /// # Panics
    ///
    /// If either leaf is not below [`Topology::leaves`].
    #[inline]
    pub fn cost(&self, from: u32, to: u32) -> f64 {
        self.parting_level(from, to).map_or(1.0, |d| self.levels[d].cost)
    }

    /// The full matrix `C[i][j] = cost(i, j)`. Symmetric by construction.
    pub fn cost_matrix(&self) -> Vec<Vec<f64>> {
        let n = self.leaves();
        (0..n).map(|i| (0..n).map(|j| self.cost(i, j)).collect()).collect()
    }

    /// Row `home` of the matrix: the adjustment vector of a flow whose home is `home`.
    pub fn cost_row(&self, home: u32) -> Vec<f64> {
        (0..self.leaves()).map(|j| self.cost(home, j)).collect()
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = ", self.name)?;
        for (i, l) in self.levels.iter().enumerate() {
            if i > 0 {
                write!(f, " × ")?;
            }
            write!(f, "{} {}", l.fanout, l.name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xeon_costs_follow_the_cache_tree() {
        let t = Topology::parse("xeon-e5335").unwrap();
        assert_eq!(t.leaves(), 8);
        assert_eq!(t.cost(0, 0), 1.0);
        assert_eq!(t.cost(0, 1), 2.0); // same L2
        assert_eq!(t.cost(0, 2), 4.0); // same socket, other L2
        assert_eq!(t.cost(0, 4), 12.0); // other socket
        assert_eq!(t.cost(7, 3), 12.0);
    }

    #[test]
    fn niagara_has_64_threads() {
        let t = Topology::parse("niagara2").unwrap();
        assert_eq!(t.leaves(), 64);
        assert_eq!(t.parting_level(0, 3), Some(2));
        assert_eq!(t.parting_level(0, 4), Some(1));
        assert_eq!(t.parting_level(0, 8), Some(0));
    }

    #[test]
    fn generic_spec_and_cost_override() {
        let t = Topology::parse("2x3x1@10,5,1").unwrap();
        assert_eq!(t.leaves(), 6);
        assert_eq!(t.cost(0, 1), 5.0);
        assert_eq!(t.cost(0, 3), 10.0);
        let m = t.cost_matrix();
        for (i, row) in m.iter().enumerate() {
            for (j, &c) in row.iter().enumerate() {
                assert_eq!(c, m[j][i]);
            }
        }
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        for (spec, needle) in [
            ("", "preset name or fanouts"),
            ("2x0", "fanout 0"),
            ("2xq", "preset name or fanouts"),
            ("2x2@1", "1 costs given for 2 levels"),
            ("2x2@1,nan", "costs are numbers from 1 to"),
            ("2x2@1,-1", "costs are numbers from 1 to"),
            ("2x2@0.5,2", "costs are numbers from 1 to"),
            ("2x2@1e300,2", "costs are numbers from 1 to"),
            ("1x1x1x1x1x1x1x1x1", "1 to 8 levels"),
            ("256x256x2", "more than 65536 leaves"),
            ("flat:x", "flat:N"),
        ] {
            let e = Topology::parse(spec).unwrap_err();
            assert!(e.to_string().contains(needle), "{spec}: {e}");
        }
    }
}
