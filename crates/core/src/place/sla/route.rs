//! Which back-ends a request goes to, and when: Figurehead's Base and OptWait (re-planned from
//! latencies kept online), and the modern peers they are measured against — Tail-at-Scale
//! hedging at the 95th percentile (Dean & Barroso 2013), a fixed hedging delay as Envoy's
//! `hedge_policy` and gRPC's hedging policy do, least outstanding requests, and power of two
//! choices by peak-EWMA latency (Finagle, Linkerd). Sans-IO: the driver sends the attempts,
//! reports what became of them, and asks for a new plan when it likes.

use std::time::Duration;

use super::cdf::{LatencyTracker, PercentileCdf};
use super::split::{self, Backend, Chain, Infeasible, Sla, Split};

/// How requests are spread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// Figurehead's Base: one back-end per request, drawn by the LP's split.
    Base,
    /// Figurehead's OptWait: back-ends in order of price, each after its optimised wait.
    OptWait,
    /// Tail at Scale: the cheapest back-end, then the next cheapest once the first has taken
    /// its own 95th-percentile latency.
    Hedge95,
    /// A fixed hedging delay: the cheapest, then each next cheapest `delay` later (three
    /// attempts at most, as gRPC's default `maxAttempts`).
    HedgeFixed(Duration),
    /// The back-end with the fewest requests under way (the cheapest among equals).
    LeastOutstanding,
    /// Two back-ends at random, the one with the lower peak EWMA × (outstanding + 1).
    P2c,
}

impl RouteKind {
    /// The names `--route` takes.
    pub const NAMES: &'static str = "base, optwait, hedge95, hedge:MS (fixed delay), least-outstanding, p2c";

    /// Reads a name from [`RouteKind::NAMES`].
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "base" => Self::Base,
            "optwait" => Self::OptWait,
            "hedge95" => Self::Hedge95,
            "least-outstanding" | "lor" => Self::LeastOutstanding,
            "p2c" => Self::P2c,
            _ => {
                Self::HedgeFixed(Duration::from_millis(s.strip_prefix("hedge:")?.trim_end_matches("ms").parse().ok()?))
            }
        })
    }

    /// Its name.
    pub fn name(self) -> String {
        match self {
            Self::Base => "base".into(),
            Self::OptWait => "optwait".into(),
            Self::Hedge95 => "hedge95".into(),
            Self::HedgeFixed(d) => format!("hedge:{}ms", d.as_millis()),
            Self::LeastOutstanding => "least-outstanding".into(),
            Self::P2c => "p2c".into(),
        }
    }
}

/// Send to `backend` `at` after the request arrived, unless it has been answered by then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The back-end.
    pub backend: usize,
    /// Its start offset.
    pub at: Duration,
}

/// What became of an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It answered after this long.
    Answered(Duration),
    /// It was cancelled (another answered first) or failed, this long after it was sent.
    Abandoned(Duration),
}

/// The plan Base or OptWait follows until the next [`SlaRouter::replan`].
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// No plan yet (no latencies for some back-end), or a policy that needs none.
    None,
    /// Base's split.
    Split(Split),
    /// OptWait's chain.
    Chain(Chain),
    /// No plan meets the SLA: every request goes to the back-end that comes closest.
    Infeasible(Infeasible, usize),
}

/// Reads between probes of the next back-end in turn ([`SlaRouter::probe_target`]).
pub const PROBE_EVERY: u64 = 20;
/// Latencies a back-end needs before it is probed only in turn.
pub const PROBE_UNTIL: u64 = 20;

/// The router: one per set of back-ends.
#[derive(Clone, Debug)]
pub struct SlaRouter {
    kind: RouteKind,
    sla: Sla,
    prices: Vec<f64>,
    trackers: Vec<LatencyTracker>,
    outstanding: Vec<u32>,
    /// CDFs given from outside (the simulator's oracle), used instead of the trackers'.
    oracle: Option<Vec<PercentileCdf>>,
    plan: Plan,
    step: u8,
}

impl SlaRouter {
    /// A router over back-ends with these prices per request; each keeps its last `2 × window`
    /// latencies. OptWait searches in steps of 1 % up to three back-ends, 2 % for four, 5 %
    /// beyond (see [`split::optwait`]).
    pub fn new(kind: RouteKind, sla: Sla, prices: Vec<f64>, window: u64) -> Self {
        let n = prices.len();
        let step = match n {
            0..=3 => 1,
            4 => 2,
            _ => 5,
        };
        Self {
            kind,
            sla,
            prices,
            trackers: (0..n).map(|_| LatencyTracker::new(window, 0.1)).collect(),
            outstanding: vec![0; n],
            oracle: None,
            plan: Plan::None,
            step,
        }
    }

    /// Plans from these CDFs (one per back-end) instead of the latencies observed: the paper's
    /// "oracle CDFs" runs.
    pub fn with_oracle(mut self, cdfs: Vec<PercentileCdf>) -> Self {
        self.oracle = Some(cdfs);
        self.replan();
        self
    }

    /// The policy.
    pub fn kind(&self) -> RouteKind {
        self.kind
    }

    /// The SLA.
    pub fn sla(&self) -> Sla {
        self.sla
    }

    /// The current plan (Base and OptWait only).
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Requests under way at each back-end.
    pub fn outstanding(&self) -> &[u32] {
        &self.outstanding
    }

    /// Back-end `b`'s latencies.
    pub fn tracker(&self, b: usize) -> &LatencyTracker {
        &self.trackers[b]
    }

    /// The CDFs plans are made from: the oracle's, or the trackers' (`None` while any
    /// back-end has no latency yet).
    pub fn cdfs(&self) -> Option<Vec<PercentileCdf>> {
        match &self.oracle {
            Some(c) => Some(c.clone()),
            None => self.trackers.iter().map(LatencyTracker::cdf).collect(),
        }
    }

    /// Makes Base's or OptWait's plan again from the CDFs as they are now. Cost: Base is
    /// O(n²); OptWait up to about a million chain evaluations for four back-ends.
    pub fn replan(&mut self) {
        if !matches!(self.kind, RouteKind::Base | RouteKind::OptWait) {
            return;
        }
        let Some(cdfs) = self.cdfs() else {
            self.plan = Plan::None;
            return;
        };
        let backends: Vec<Backend> = self.prices.iter().zip(cdfs).map(|(&price, cdf)| Backend { price, cdf }).collect();
        let planned = match self.kind {
            RouteKind::Base => split::base(&backends, self.sla).map(Plan::Split),
            _ => split::optwait(&backends, self.sla, self.step).map(Plan::Chain),
        };
        self.plan = planned.unwrap_or_else(|e| {
            let closest = (0..backends.len())
                .max_by(|&a, &b| backends[a].cdf.at(self.sla.within).total_cmp(&backends[b].cdf.at(self.sla.within)))
                .unwrap_or(0);
            Plan::Infeasible(e, closest)
        });
    }

    /// Back-ends by price, cheapest first (ties by index).
    fn by_price(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.prices.len()).collect();
        order.sort_by(|&a, &b| self.prices[a].total_cmp(&self.prices[b]).then(a.cmp(&b)));
        order
    }

    fn least_outstanding(&self) -> usize {
        self.by_price().into_iter().min_by_key(|&b| self.outstanding[b]).unwrap_or(0)
    }

    /// The attempts for a new request, in order of start; `u1` and `u2` are uniform draws in
    /// [0, 1) (the driver owns the random stream).
    pub fn route(&self, u1: f64, u2: f64) -> Vec<Attempt> {
        let now = |b| vec![Attempt { backend: b, at: Duration::ZERO }];
        let order = self.by_price();
        if order.is_empty() {
            return Vec::new();
        }
        match self.kind {
            RouteKind::Base | RouteKind::OptWait => match &self.plan {
                Plan::Split(s) => {
                    let mut acc = 0.0;
                    let b = s.p.iter().position(|p| {
                        acc += p;
                        u1 < acc
                    });
                    now(b.unwrap_or_else(|| s.p.iter().rposition(|p| *p > 0.0).unwrap_or(0)))
                }
                Plan::Chain(c) => c.steps.iter().map(|&(backend, at)| Attempt { backend, at }).collect(),
                Plan::Infeasible(_, closest) => now(*closest),
                // No latencies yet: spread by load until there are.
                Plan::None => now(self.least_outstanding()),
            },
            RouteKind::Hedge95 => {
                let first = order[0];
                let mut out = now(first);
                if let (Some(&second), Some(p95)) = (order.get(1), self.trackers[first].quantile(0.95)) {
                    out.push(Attempt { backend: second, at: p95 });
                }
                out
            }
            RouteKind::HedgeFixed(d) => {
                order.iter().take(3).enumerate().map(|(k, &backend)| Attempt { backend, at: d * k as u32 }).collect()
            }
            RouteKind::LeastOutstanding => now(self.least_outstanding()),
            RouteKind::P2c => {
                let n = self.prices.len();
                let a = ((u1 * n as f64) as usize).min(n - 1);
                let b = if n > 1 { (a + 1 + ((u2 * (n - 1) as f64) as usize).min(n - 2)) % n } else { a };
                let load = |i: usize| {
                    let e = self.trackers[i].ewma().as_secs_f64();
                    e.max(1e-6) * f64::from(self.outstanding[i] + 1)
                };
                now(if load(b) < load(a) { b } else { a })
            }
        }
    }

    /// [`SlaRouter::route`]'s attempts without the back-ends in `avoid` (those that lack a
    /// write to the key read, [`super::write::Replicas::behind`]): the others keep their
    /// order, and their waits less the first one's, so the read starts at once. If the route
    /// named only back-ends to avoid, the cheapest of the others, at once; if every back-end
    /// is to be avoided, the route as it is.
    pub fn route_avoiding(&self, u1: f64, u2: f64, avoid: &[usize]) -> Vec<Attempt> {
        let planned = self.route(u1, u2);
        if avoid.is_empty() || (0..self.prices.len()).all(|b| avoid.contains(&b)) {
            return planned;
        }
        let kept: Vec<Attempt> = planned.into_iter().filter(|a| !avoid.contains(&a.backend)).collect();
        match kept.first() {
            Some(first) => {
                let lead = first.at;
                kept.into_iter().map(|a| Attempt { at: a.at - lead, ..a }).collect()
            }
            None => {
                let b =
                    self.by_price().into_iter().find(|b| !avoid.contains(b)).expect("not every back-end is avoided");
                vec![Attempt { backend: b, at: Duration::ZERO }]
            }
        }
    }

    /// Which back-end, if any, read number `n` should also be copied to, only to learn its
    /// latency (as Figurehead's monitoring module probes every back-end): one with fewer than
    /// [`PROBE_UNTIL`] latencies (the fewest first), else every [`PROBE_EVERY`] reads the next
    /// in turn. A route that never sends to a back-end would otherwise never learn that it got
    /// faster, and Base and OptWait could not plan before every back-end has answered.
    pub fn probe_target(&self, n: u64) -> Option<usize> {
        let k = self.trackers.len();
        let starved = (0..k).filter(|&i| self.trackers[i].len() < PROBE_UNTIL).min_by_key(|&i| self.trackers[i].len());
        starved.or_else(|| (k > 0 && n.is_multiple_of(PROBE_EVERY)).then(|| (n / PROBE_EVERY) as usize % k))
    }

    /// An attempt was sent to `backend`.
    pub fn sent(&mut self, backend: usize) {
        self.outstanding[backend] += 1;
    }

    /// An attempt at `backend` ended.
    pub fn ended(&mut self, backend: usize, how: Ended) {
        self.outstanding[backend] = self.outstanding[backend].saturating_sub(1);
        self.observed(backend, how);
    }

    /// A latency seen outside a request (a probe, as Figurehead's monitoring module sends
    /// every 5 s).
    pub fn observed(&mut self, backend: usize, how: Ended) {
        match how {
            Ended::Answered(l) => self.trackers[backend].record(l),
            Ended::Abandoned(after) => self.trackers[backend].censored(after),
        }
    }
}
