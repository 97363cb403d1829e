//! Figurehead's two ways of meeting a latency SLA over back-ends of different speed and
//! price at least cost (notes 004b §1(c); the reads-only form, `r_f = 1`, as the paper's
//! evaluation uses): **Base**, a probabilistic split with one back-end per request (Eqs 3–4),
//! and **OptWait**, sequential hedging with optimised waits (Eqs 6–7, in the general form the
//! notes derive). Both read each back-end's latency only through its [`PercentileCdf`].

use std::time::Duration;

use super::cdf::PercentileCdf;

/// A latency guarantee: `percent` of requests finish `within` (Figurehead's `(P_f, L_f)`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sla {
    /// The fraction of requests, 0 to 1.
    pub percent: f64,
    /// The latency they finish within.
    pub within: Duration,
}

/// One back-end as the split sees it: its price per read and its latency CDF.
#[derive(Clone, Debug, PartialEq)]
pub struct Backend {
    /// Price per read (`c_i^r`).
    pub price: f64,
    /// Latency CDF.
    pub cdf: PercentileCdf,
}

/// The SLA cannot be met by any split of these back-ends.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("no split meets {:.1} % within {:?}: the best reaches {:.1} %", .sla.percent * 100.0, .sla.within, .best * 100.0)]
pub struct Infeasible {
    /// The SLA asked for.
    pub sla: Sla,
    /// The best attainment any plan of the kind reaches.
    pub best: f64,
}

/// Base's answer: send each read to back-end `i` with probability `p[i]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// Probabilities, one per back-end, summing to 1; at most two are non-zero.
    pub p: Vec<f64>,
    /// Expected price per read.
    pub cost: f64,
    /// Expected fraction within the SLA's latency (`P_f^r`).
    pub attained: f64,
}

/// **Base** (Eqs 3–4 with `r_f = 1`): minimise `Σ p_i c_i` subject to `Σ p_i CDF_i(L) ≥ P`,
/// `Σ p_i = 1`, `p_i ≥ 0`.
///
/// With two constraints an optimal basic solution uses at most two back-ends (the notes'
/// derivation, and Table 2), so it is found exactly, without an LP solver, by trying every
/// back-end alone and every pair that straddles `P` (the cheaper one's share as large as the
/// constraint allows). Ties go to the lower index.
pub fn base(backends: &[Backend], sla: Sla) -> Result<Split, Infeasible> {
    let q: Vec<f64> = backends.iter().map(|b| b.cdf.at(sla.within)).collect();
    let mut best: Option<Split> = None;
    let mut consider = |p: Vec<f64>| {
        let cost: f64 = p.iter().zip(backends).map(|(p, b)| p * b.price).sum();
        let attained: f64 = p.iter().zip(&q).map(|(p, q)| p * q).sum();
        if best.as_ref().is_none_or(|b| cost < b.cost - 1e-12) {
            best = Some(Split { p, cost, attained });
        }
    };
    let n = backends.len();
    for i in 0..n {
        if q[i] >= sla.percent {
            let mut p = vec![0.0; n];
            p[i] = 1.0;
            consider(p);
        }
        for j in 0..n {
            // i below the target, j above: the mix that meets it exactly.
            if q[i] < sla.percent && q[j] > sla.percent {
                let pj = (sla.percent - q[i]) / (q[j] - q[i]);
                let mut p = vec![0.0; n];
                p[i] = 1.0 - pj;
                p[j] = pj;
                consider(p);
            }
        }
    }
    best.ok_or(Infeasible { sla, best: q.iter().copied().fold(0.0, f64::max) })
}

/// A sequential hedge: send to `steps[0].0` at once, to `steps[k].0` at offset `steps[k].1`
/// unless an answer came first; earlier requests are not cancelled (the paper's model: the
/// first answer wins, every back-end contacted is paid).
#[derive(Clone, Debug, PartialEq)]
pub struct Chain {
    /// Back-ends in the order contacted, each with its start offset (`s_j = Σ_{m<j} l_m`).
    pub steps: Vec<(usize, Duration)>,
    /// Expected price per read.
    pub cost: f64,
    /// Expected fraction within the SLA's latency.
    pub attained: f64,
}

/// A chain's expected price and attainment (the notes' general form of Eqs 6–7, back-ends
/// independent): back-end `j` is contacted with probability `Π_{m<j} (1 − CDF_m(s_j − s_m))`,
/// and a read is late only if every back-end started before `L` is late.
pub fn evaluate(backends: &[Backend], steps: &[(usize, Duration)], within: Duration) -> (f64, f64) {
    let mut cost = 0.0;
    let mut late = 1.0;
    for (k, &(j, s_j)) in steps.iter().enumerate() {
        let contacted: f64 =
            steps[..k].iter().map(|&(m, s_m)| 1.0 - backends[m].cdf.at(s_j.saturating_sub(s_m))).product();
        cost += backends[j].price * contacted;
        if s_j < within {
            late *= 1.0 - backends[j].cdf.at(within - s_j);
        }
    }
    (cost, 1.0 - late)
}

/// **OptWait** (Eqs 6–7, general form): back-ends in order of price, each either skipped,
/// waited on for `l_i = CDF_i⁻¹(p_i)` before the next is tried, or waited on to the end (the
/// last one used); the feasible chain of least expected price, searching `p_i` in steps of
/// `step` percent (the paper uses 1 % over 2–3 back-ends: 101^(n−1) chains at most, about a
/// million for four; coarser steps for more).
pub fn optwait(backends: &[Backend], sla: Sla, step: u8) -> Result<Chain, Infeasible> {
    let step = step.clamp(1, 50);
    let mut order: Vec<usize> = (0..backends.len()).collect();
    order.sort_by(|&a, &b| backends[a].price.total_cmp(&backends[b].price).then(a.cmp(&b)));
    let mut best: Option<Chain> = None;
    let mut best_attained: f64 = 0.0;
    let mut steps: Vec<(usize, Duration)> = Vec::new();
    search(backends, &order, 0, Duration::ZERO, &mut steps, sla, step, &mut best, &mut best_attained);
    best.ok_or(Infeasible { sla, best: best_attained })
}

#[allow(clippy::too_many_arguments)]
fn search(
    backends: &[Backend],
    order: &[usize],
    from: usize,
    offset: Duration,
    steps: &mut Vec<(usize, Duration)>,
    sla: Sla,
    step: u8,
    best: &mut Option<Chain>,
    best_attained: &mut f64,
) {
    for (k, &j) in order.iter().enumerate().skip(from) {
        // j is the last one used: wait for it to the end.
        steps.push((j, offset));
        let (cost, attained) = evaluate(backends, steps, sla.within);
        *best_attained = best_attained.max(attained);
        if attained >= sla.percent && best.as_ref().is_none_or(|b| cost < b.cost - 1e-12) {
            *best = Some(Chain { steps: steps.clone(), cost, attained });
        }
        // j waited on for its p-th percentile, then the next ones tried. A wait at or past L
        // cannot help the SLA; later back-ends would start too late.
        if k + 1 < order.len() {
            let mut p = step;
            while p < 100 {
                let wait = backends[j].cdf.latency(p);
                if offset + wait < sla.within {
                    search(backends, order, k + 1, offset + wait, steps, sla, step, best, best_attained);
                }
                p = p.saturating_add(step);
            }
        }
        steps.pop();
    }
}

/// The back-ends to replicate on for an availability guarantee `target` (Eq 1:
/// `A_front × (1 − Π (1 − A_i)) ≥ A_f`, failures independent): taken round-robin across price
/// classes (cheapest class first, and within a class in the order given; the paper draws
/// within a class at random, which the caller may do by shuffling), then made minimal by
/// dropping any member whose removal keeps Eq 1 true, dearest first. `None` if all of them
/// together fall short.
pub fn replicas_for_availability(front: f64, backends: &[(f64, u32)], target: f64) -> Option<Vec<usize>> {
    let holds = |set: &[usize]| front * (1.0 - set.iter().map(|&i| 1.0 - backends[i].0).product::<f64>()) >= target;
    let mut classes: Vec<u32> = backends.iter().map(|b| b.1).collect();
    classes.sort_unstable();
    classes.dedup();
    let mut queues: Vec<Vec<usize>> =
        classes.iter().map(|c| (0..backends.len()).filter(|&i| backends[i].1 == *c).rev().collect()).collect();
    let mut chosen = Vec::new();
    'fill: while !holds(&chosen) {
        let mut took = false;
        for q in queues.iter_mut() {
            if let Some(i) = q.pop() {
                chosen.push(i);
                took = true;
                if holds(&chosen) {
                    break 'fill;
                }
            }
        }
        if !took {
            return None;
        }
    }
    // Minimal: drop the dearest first while Eq 1 still holds.
    let mut by_class = chosen.clone();
    by_class.sort_by_key(|&i| std::cmp::Reverse(backends[i].1));
    for i in by_class {
        let without: Vec<usize> = chosen.iter().copied().filter(|&k| k != i).collect();
        if !without.is_empty() && holds(&without) {
            chosen = without;
        }
    }
    Some(chosen)
}
