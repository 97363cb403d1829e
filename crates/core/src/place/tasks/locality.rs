//! Worker-centric scheduling for data-intensive bags of tasks (Ko, Morales and Gupta,
//! Middleware 2007; notes 004a §7): a worker asks for a task when it can start one at once, and
//! the scheduler picks, among the tasks not yet scheduled, the best one *for that worker's
//! site*, by how much of the task's input the site's store already holds.
//!
//! - [`SiteTable`]: the scheduler's view of one site's store, a reference count per file. A
//!   request piggybacks the files the site evicted since its last one; after a choice, the
//!   task's files are in the store (new ones with one reference, present ones one more).
//! - [`Metric`]: the weight of a task for a site — *overlap* (files present), *rest* (one over
//!   the files missing) and *combined* (how hot the present files are at the site, plus rest).
//! - [`choose`]: the n best tasks by weight, one of them drawn in proportion to its weight;
//!   n = 1 is greedy, n = 2 was the paper's best.
//!
//! Peers, written from their descriptions: task-centric *storage affinity* (Santos-Neto et al.:
//! a task's affinity for a site is the bytes of its input the site holds; [`affinity`]), and
//! *delay scheduling* (Zaharia et al., EuroSys 2010, as Spark's `spark.locality.wait` and
//! Hadoop's use it: a worker whose site holds no input of any waiting task is refused a few
//! times before it gets a task without locality; [`DelayScheduling`]).
//!
//! # Errata (notes 004a §7, "Errata" 1–4)
//!
//! - *combined* is printed as ref_t/totalRef + totalRest/rest_t, which grows with the files
//!   missing, against the paper's stated intent. The default is the normalised form
//!   ref_t/totalRef + rest_t/totalRest; [`Metric::Combined`]`{ as_printed: true }` keeps the
//!   printed one. totalRef = 0 makes the first term 0.
//! - *rest* divides by zero when every file is present; that task is given 1/(missing + 1),
//!   i.e. rest is computed as 1/(1 + missing) throughout, which keeps the order of the printed
//!   form and gives the complete task the largest weight (2× the one missing one file).
//! - The paper's ".2 variants with the overlap metric" means rest and combined.
//! - The store's eviction policy is the driver's (the simulator's); the table learns only from
//!   the piggybacked evictions.

use std::collections::BTreeMap;

use crate::place::score::splitmix64;

/// A file, by number.
pub type FileId = u32;

/// The scheduler's view of one site's store: which files it holds, and how many scheduled tasks
/// have used each (r_i).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteTable {
    refs: BTreeMap<FileId, u32>,
}

impl SiteTable {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Files the site reports evicted since its last request.
    pub fn evicted(&mut self, files: &[FileId]) {
        for f in files {
            self.refs.remove(f);
        }
    }

    /// A task with `files` was scheduled at the site: its files are (or will be) in the store.
    pub fn scheduled(&mut self, files: &[FileId]) {
        for f in files {
            *self.refs.entry(*f).or_insert(0) += 1;
        }
    }

    /// Whether the store holds `file`.
    pub fn holds(&self, file: FileId) -> bool {
        self.refs.contains_key(&file)
    }

    /// The references to `file` at the site (0 if absent).
    pub fn refs(&self, file: FileId) -> u32 {
        self.refs.get(&file).copied().unwrap_or(0)
    }

    /// Files held.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }
}

/// The weight of a task for a site.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// |F_t|: files present.
    Overlap,
    /// 1 / (1 + files missing).
    Rest,
    /// ref_t/totalRef + rest_t/totalRest (normalised), or as printed.
    Combined {
        /// ref_t/totalRef + totalRest/rest_t, as the paper prints it.
        as_printed: bool,
    },
}

impl Metric {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Overlap => "overlap",
            Self::Rest => "rest",
            Self::Combined { as_printed: false } => "combined",
            Self::Combined { as_printed: true } => "combined-printed",
        }
    }
}

/// The weight of each task in `tasks` (each a list of its files) for the site whose store is
/// `site`.
pub fn weights(metric: Metric, tasks: &[&[FileId]], site: &SiteTable) -> Vec<f64> {
    let present = |t: &[FileId]| t.iter().filter(|f| site.holds(**f)).count();
    let rest = |t: &[FileId]| 1.0 / (1.0 + (t.len() - present(t)) as f64);
    match metric {
        Metric::Overlap => tasks.iter().map(|t| present(t) as f64).collect(),
        Metric::Rest => tasks.iter().map(|t| rest(t)).collect(),
        Metric::Combined { as_printed } => {
            let refs: Vec<f64> = tasks.iter().map(|t| t.iter().map(|f| f64::from(site.refs(*f))).sum()).collect();
            let rests: Vec<f64> = tasks.iter().map(|t| rest(t)).collect();
            let total_ref: f64 = refs.iter().sum();
            let total_rest: f64 = rests.iter().sum();
            refs.iter()
                .zip(&rests)
                .map(|(r, s)| {
                    let hot = if total_ref > 0.0 { r / total_ref } else { 0.0 };
                    hot + if as_printed { total_rest / s } else { s / total_rest }
                })
                .collect()
        }
    }
}

/// Picks among `weights`: the `n` largest (ties to the lower index), then one of them with
/// probability in proportion to its weight, by `draw` (a uniform 64-bit number the caller
/// supplies). With n = 1, or when the n best weigh nothing, the best.
pub fn choose(weights: &[f64], n: usize, draw: u64) -> Option<usize> {
    if weights.is_empty() {
        return None;
    }
    let mut idx: Vec<usize> = (0..weights.len()).collect();
    idx.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    idx.truncate(n.max(1));
    let total: f64 = idx.iter().map(|&i| weights[i].max(0.0)).sum();
    if idx.len() == 1 || total <= 0.0 || !total.is_finite() {
        return Some(idx[0]);
    }
    // A uniform number in [0, total), from the top 53 bits of the draw.
    let mut x = (splitmix64(draw) >> 11) as f64 / (1u64 << 53) as f64 * total;
    for &i in &idx {
        let w = weights[i].max(0.0);
        if x < w {
            return Some(i);
        }
        x -= w;
    }
    // Rounding left a sliver: the last task that weighs anything.
    idx.iter().rev().find(|&&i| weights[i] > 0.0).copied()
}

/// Storage affinity (Santos-Neto et al.): the bytes of `task`'s input that `site` holds, in
/// files (the files are of equal size, as in the paper's model).
pub fn affinity(task: &[FileId], site: &SiteTable) -> f64 {
    task.iter().filter(|f| site.holds(**f)).count() as f64
}

/// Storage affinity's choice for a free worker at `site`: the task with the most of its input
/// there (ties to the lower index).
pub fn most_affine(tasks: &[&[FileId]], site: &SiteTable) -> Option<usize> {
    let w: Vec<f64> = tasks.iter().map(|t| affinity(t, site)).collect();
    choose(&w, 1, 0)
}

/// Storage affinity's replication once every task is out: of the running tasks with a single
/// copy, given as (task, when its copy started), the one that started first (ties to the lower
/// task).
pub fn replica_of(running: impl Iterator<Item = (u32, u64)>) -> Option<u32> {
    running.min_by_key(|&(task, started)| (started, task)).map(|(task, _)| task)
}

/// Delay scheduling: how many times each site has been refused for want of a local task.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayScheduling {
    /// Refusals a site may take before it gets a task without locality (Spark: its
    /// `spark.locality.wait` of 3 s, over the requests that fall in it).
    pub max_skips: u32,
    skipped: BTreeMap<u32, u32>,
}

impl DelayScheduling {
    /// A scheduler that refuses a site up to `max_skips` times.
    pub fn new(max_skips: u32) -> Self {
        Self { max_skips, skipped: BTreeMap::new() }
    }

    /// Picks for `site`: the task with the most of its input at the site, if any holds some;
    /// otherwise nothing until the site has been refused `max_skips` times in a row, then the
    /// first task.
    pub fn choose(&mut self, site: u32, tasks: &[&[FileId]], table: &SiteTable) -> Option<usize> {
        if tasks.is_empty() {
            return None;
        }
        let best = choose(&weights(Metric::Overlap, tasks, table), 1, 0)?;
        let local = tasks[best].iter().any(|f| table.holds(*f));
        let skipped = self.skipped.entry(site).or_insert(0);
        if local || *skipped >= self.max_skips {
            *skipped = 0;
            Some(if local { best } else { 0 })
        } else {
            *skipped += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn site(files: &[(FileId, u32)]) -> SiteTable {
        let mut s = SiteTable::new();
        for &(f, r) in files {
            for _ in 0..r {
                s.scheduled(&[f]);
            }
        }
        s
    }

    #[test]
    fn each_metric_as_the_paper_defines_it() {
        // The site holds files 1 (used 3 times) and 2 (once).
        let s = site(&[(1, 3), (2, 1)]);
        let (a, b, c): (&[FileId], &[FileId], &[FileId]) = (&[1, 2], &[1, 5, 6], &[7, 8]);
        let tasks = [a, b, c];
        assert_eq!(weights(Metric::Overlap, &tasks, &s), [2.0, 1.0, 0.0]);
        assert_eq!(weights(Metric::Rest, &tasks, &s), [1.0, 1.0 / 3.0, 1.0 / 3.0]);
        // refs: 4, 3, 0 of 7; rests: 1, 1/3, 1/3 of 5/3.
        let combined = weights(Metric::Combined { as_printed: false }, &tasks, &s);
        let expected = [4.0 / 7.0 + 0.6, 3.0 / 7.0 + 0.2, 0.2];
        assert!(combined.iter().zip(expected).all(|(x, y)| (x - y).abs() < 1e-12), "{combined:?}");
        // As printed, the task missing the most files weighs the most: the erratum.
        let printed = weights(Metric::Combined { as_printed: true }, &tasks, &s);
        assert!(printed[2] > printed[0], "{printed:?}");
    }

    #[test]
    fn the_table_follows_schedules_and_piggybacked_evictions() {
        let mut s = SiteTable::new();
        s.scheduled(&[1, 2]);
        s.scheduled(&[2, 3]);
        assert_eq!((s.refs(1), s.refs(2), s.refs(3), s.len()), (1, 2, 1, 3));
        s.evicted(&[2, 9]);
        assert!(!s.holds(2) && s.holds(1) && s.len() == 2);
        assert_eq!(affinity(&[1, 2, 3, 4], &s), 2.0);
        let (a, b): (&[FileId], &[FileId]) = (&[1, 9], &[1, 3, 8]);
        assert_eq!(most_affine(&[a, b], &s), Some(1));
        assert_eq!(replica_of([(4, 30), (2, 10), (7, 10)].into_iter()), Some(2));
    }

    #[test]
    fn delay_scheduling_waits_for_locality_then_gives_up() {
        let s = site(&[(1, 1)]);
        let (far, near): (&[FileId], &[FileId]) = (&[5], &[1, 6]);
        let mut d = DelayScheduling::new(2);
        assert_eq!(d.choose(0, &[far, near], &s), Some(1), "a local task at once");
        assert_eq!(d.choose(0, &[far], &s), None);
        assert_eq!(d.choose(0, &[far], &s), None);
        assert_eq!(d.choose(0, &[far], &s), Some(0), "after two refusals, any task");
        assert_eq!(d.choose(0, &[far], &s), None, "and the count starts again");
    }

    #[test]
    fn the_top_two_are_drawn_in_proportion_to_their_weights() {
        let w = [3.0, 0.5, 1.0];
        let firsts = (0..20_000u64).filter(|d| choose(&w, 2, *d) == Some(0)).count();
        // 3 of 4 for the heaviest, 1 of 4 for the second; the third is never drawn.
        assert!((firsts as f64 / 20_000.0 - 0.75).abs() < 0.02, "{firsts}");
        assert!((0..1_000u64).all(|d| choose(&w, 2, d) != Some(1)));
    }

    proptest! {
        /// n = 1 is the arg-max; larger n only ever picks among the n heaviest, and in
        /// proportion to weight (a task of zero weight among positive ones is never picked).
        #[test]
        fn choose_picks_from_the_top_n(weights in proptest::collection::vec(0.0f64..10.0, 1..20), n in 1usize..5, draw in any::<u64>()) {
            let best = weights.iter().copied().fold(f64::MIN, f64::max);
            let greedy = choose(&weights, 1, draw).unwrap();
            prop_assert_eq!(weights[greedy], best);
            let got = choose(&weights, n, draw).unwrap();
            let heavier = weights.iter().filter(|w| **w > weights[got]).count();
            prop_assert!(heavier < n, "picked {} with {} heavier", weights[got], heavier);
            if weights.iter().any(|w| *w > 0.0) {
                prop_assert!(weights[got] > 0.0, "a weightless task picked among {:?}", weights);
            }
        }

        /// The normalised combined metric's two terms each sum to 1 over the tasks (when any
        /// file is referenced), so the weights sum to 2.
        #[test]
        fn combined_is_two_normalised_terms(
            tasks in proptest::collection::vec(proptest::collection::vec(0u32..30, 1..8), 1..10),
            held in proptest::collection::vec((0u32..30, 1u32..4), 1..20),
        ) {
            let s = site(&held);
            let refs: Vec<&[FileId]> = tasks.iter().map(Vec::as_slice).collect();
            let w = weights(Metric::Combined { as_printed: false }, &refs, &s);
            let any_ref = tasks.iter().flatten().any(|f| s.holds(*f));
            let sum: f64 = w.iter().sum();
            prop_assert!((sum - if any_ref { 2.0 } else { 1.0 }).abs() < 1e-9, "{sum}");
        }
    }
}
