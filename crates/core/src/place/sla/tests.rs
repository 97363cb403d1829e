use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// A CDF whose k-th percentile is `f(k)` ms.
fn cdf(f: impl Fn(u32) -> u64) -> PercentileCdf {
    PercentileCdf::from_quantiles(|p| ms(f((p * 100.0).round() as u32)))
}

#[test]
fn a_cdf_is_read_conservatively() {
    let samples: Vec<Duration> = (1..=100).map(ms).collect();
    let c = PercentileCdf::from_samples(&samples).unwrap();
    assert_eq!(c.at(ms(50)), 0.50);
    assert_eq!(c.at(Duration::from_micros(50_900)), 0.50, "rounded down, never interpolated");
    assert_eq!(c.at(ms(0)), 0.0);
    assert_eq!(c.latency(95), ms(95));
    assert_eq!(c.latency(0), Duration::ZERO);
    assert!(PercentileCdf::from_samples(&[]).is_none());
}

#[test]
fn a_tracker_follows_its_window_and_reads_cut_offs_for_what_they_are() {
    let mut t = LatencyTracker::new(100, 0.1);
    for _ in 0..200 {
        t.record(ms(10));
    }
    assert_eq!(t.quantile(0.5), Some(ms(10)));
    for _ in 0..200 {
        t.record(ms(100));
    }
    assert_eq!(t.quantile(0.05), Some(ms(100)), "the old window is gone");
    // Half answer in 1 ms, half are cut short at 5 ms: the first half is known, the rest is
    // not, and is taken as slow.
    let mut c = LatencyTracker::new(100, 0.1);
    for _ in 0..100 {
        c.record(ms(1));
        c.censored(ms(5));
    }
    let cdf = c.cdf().unwrap();
    assert_eq!(cdf.at(ms(1)), 0.5);
    assert_eq!(cdf.latency(51), cdf::LATENCY_MAX);
    // Cut-offs after some answers: Kaplan–Meier keeps them at risk until they leave.
    let mut k = LatencyTracker::new(100, 0.1);
    for l in [1, 2, 3, 4] {
        k.record(ms(l));
    }
    for _ in 0..4 {
        k.censored(Duration::from_micros(2500));
    }
    // F(2 ms) = 2/8; then 4 left at risk of which 2 answer: F = 1 − (6/8)(1 − 1/2)(…).
    let cdf = k.cdf().unwrap();
    assert_eq!(cdf.at(ms(2)), 0.25);
    assert_eq!(cdf.at(ms(3)), 0.62, "1 − 0.75 × 0.5 = 0.625, rounded down");
    assert_eq!(cdf.at(ms(4)), 1.0);
    assert_eq!(k.answered_quantile(1.0).map(|d| d >= ms(4)), Some(true));
}

/// Table 2's worked case (notes 004b §1(c)): costs [5, 10, 15], 95 % within 600 ms. The
/// published OptWait plan waits 511 ms (89 %) on the medium back-end, then the dear one:
/// 0.89·10 + 0.11·(10 + 15) = 11.65; Base splits 50/50 between them: 12.50.
#[test]
fn the_published_plans_cost_what_the_paper_says() {
    let cheap = cdf(|k| 400 + 10 * u64::from(k)); // 1 % within 410 ms … 100 % within 1.4 s
    let medium = cdf(|k| if k <= 89 { 422 + u64::from(k) } else { 700 + u64::from(k) }); // 89 % within 511 ms
    let dear = cdf(|k| if k <= 99 { 30 + u64::from(k) / 2 } else { 700 });
    let backends =
        [Backend { price: 5.0, cdf: cheap }, Backend { price: 10.0, cdf: medium }, Backend { price: 15.0, cdf: dear }];
    let (cost, _) = evaluate(&backends, &[(1, ms(0)), (2, ms(511))], ms(600));
    assert!((cost - 11.65).abs() < 1e-9, "{cost}");
    let sla = Sla { percent: 0.95, within: ms(600) };
    let w = optwait(&backends, sla, 1).unwrap();
    assert!(w.attained >= 0.95 && w.cost <= 11.65 + 1e-9, "{w:?}");
    let b = base(&backends, sla).unwrap();
    assert!(b.attained >= 0.95 - 1e-9, "{b:?}");
    assert!(b.p.iter().filter(|p| **p > 0.0).count() <= 2);
}

#[test]
fn base_mixes_the_two_that_straddle_the_target() {
    let backends = [
        Backend { price: 1.0, cdf: cdf(|k| if k <= 80 { 10 } else { 1000 }) }, // 80 % within 100 ms
        Backend { price: 3.0, cdf: cdf(|_| 10) },                              // 100 %
    ];
    let s = base(&backends, Sla { percent: 0.9, within: ms(100) }).unwrap();
    assert!((s.p[0] - 0.5).abs() < 1e-9 && (s.p[1] - 0.5).abs() < 1e-9, "{s:?}");
    assert!((s.cost - 2.0).abs() < 1e-9);
    let e = base(&backends[..1], Sla { percent: 0.9, within: ms(100) }).unwrap_err();
    assert!((e.best - 0.8).abs() < 1e-9);
}

#[test]
fn replicas_for_availability_are_minimal() {
    // (availability, price class)
    let b = [(0.9, 0), (0.9, 0), (0.99, 1), (0.999, 2)];
    let set = replicas_for_availability(1.0, &b, 0.999).unwrap();
    let holds = |s: &[usize]| 1.0 - s.iter().map(|&i| 1.0 - b[i].0).product::<f64>() >= 0.999;
    assert!(holds(&set));
    for &i in &set {
        let without: Vec<usize> = set.iter().copied().filter(|&k| k != i).collect();
        assert!(!holds(&without), "{set:?} is not minimal");
    }
    assert_eq!(replicas_for_availability(0.9, &b, 0.95), None, "the front-end alone is too weak");
}

#[test]
fn routes_follow_their_policy() {
    let sla = Sla { percent: 0.9, within: ms(100) };
    let mut r = SlaRouter::new(RouteKind::HedgeFixed(ms(20)), sla, vec![3.0, 1.0, 2.0], 100);
    let backends: Vec<usize> = r.route(0.5, 0.5).iter().map(|a| a.backend).collect();
    assert_eq!(backends, [1, 2, 0], "cheapest first");
    assert_eq!(r.route(0.5, 0.5)[2].at, ms(40));
    r = SlaRouter::new(RouteKind::LeastOutstanding, sla, vec![3.0, 1.0, 2.0], 100);
    r.sent(1);
    assert_eq!(r.route(0.0, 0.0)[0].backend, 2);
    let mut p = SlaRouter::new(RouteKind::P2c, sla, vec![1.0, 1.0], 100);
    p.observed(0, Ended::Answered(ms(100)));
    p.observed(1, Ended::Answered(ms(10)));
    assert_eq!(p.route(0.0, 0.9)[0].backend, 1, "the lower peak EWMA");
    let oracle = vec![cdf(|k| if k <= 80 { 10 } else { 1000 }), cdf(|_| 10)];
    let base = SlaRouter::new(RouteKind::Base, sla, vec![1.0, 3.0], 100).with_oracle(oracle);
    let to_first = (0..1000).filter(|i| base.route(f64::from(*i) / 1000.0, 0.0)[0].backend == 0).count();
    assert_eq!(to_first, 500, "Base's split, drawn");
    let mut probed = SlaRouter::new(RouteKind::OptWait, sla, vec![1.0, 2.0], 100);
    probed.observed(0, Ended::Answered(ms(5)));
    assert_eq!(probed.probe_target(7), Some(1), "the one with fewest latencies first");
    for b in 0..2 {
        for _ in 0..route::PROBE_UNTIL {
            probed.observed(b, Ended::Answered(ms(5)));
        }
    }
    assert_eq!(probed.probe_target(7), None);
    assert_eq!(probed.probe_target(route::PROBE_EVERY), Some(1), "then each in turn");
    assert_eq!(RouteKind::parse("hedge:25ms"), Some(RouteKind::HedgeFixed(ms(25))));
    assert_eq!(RouteKind::parse(&RouteKind::OptWait.name()), Some(RouteKind::OptWait));
}

/// A read avoids the back-ends that lack a write to its key, and starts at once.
#[test]
fn a_route_avoids_back_ends_behind_on_a_write() {
    let sla = Sla { percent: 0.9, within: ms(100) };
    let r = SlaRouter::new(RouteKind::HedgeFixed(ms(20)), sla, vec![3.0, 1.0, 2.0], 100);
    let plan = |avoid: &[usize]| -> Vec<(usize, Duration)> {
        r.route_avoiding(0.5, 0.5, avoid).iter().map(|a| (a.backend, a.at)).collect()
    };
    assert_eq!(plan(&[]), [(1, ms(0)), (2, ms(20)), (0, ms(40))]);
    assert_eq!(plan(&[1]), [(2, ms(0)), (0, ms(20))], "the cheapest is behind: the next at once");
    assert_eq!(plan(&[2]), [(1, ms(0)), (0, ms(40))]);
    assert_eq!(plan(&[0, 1, 2]), plan(&[]), "every one behind: none is known to be ahead");
    let one = SlaRouter::new(RouteKind::LeastOutstanding, sla, vec![3.0, 1.0, 2.0], 100);
    assert_eq!(one.route_avoiding(0.0, 0.0, &[1])[0], Attempt { backend: 2, at: ms(0) }, "the cheapest of the others");
}

fn arb_cdf() -> impl Strategy<Value = PercentileCdf> {
    proptest::collection::vec(1u64..50, 100).prop_map(|steps| {
        let mut acc = 0;
        let pts: Vec<u64> = steps
            .iter()
            .map(|s| {
                acc += s;
                acc
            })
            .collect();
        PercentileCdf::from_quantiles(|p| ms(pts[((p * 100.0).round() as usize).clamp(1, 100) - 1]))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The three-back-end chain's price and attainment are Eqs 6 and 7 as printed.
    #[test]
    fn the_general_form_is_eqs_6_and_7(c in proptest::collection::vec(arb_cdf(), 3), l1 in 0u64..2000, l2 in 0u64..2000, lf in 1u64..3000) {
        let price = [5.0, 10.0, 15.0];
        let b: Vec<Backend> = c.iter().zip(price).map(|(cdf, price)| Backend { price, cdf: cdf.clone() }).collect();
        let (l1, l2, lf) = (ms(l1), ms(l2), ms(lf));
        let (cost, att) = evaluate(&b, &[(0, ms(0)), (1, l1), (2, l1 + l2)], lf);
        let cdf = |i: usize, l: Duration| b[i].cdf.at(l);
        let p1 = cdf(0, l1);
        let p2 = cdf(1, l2);
        let c12 = cdf(0, l1 + l2);
        let eq6 = p1 * 5.0 + ((1.0 - c12) * p2 + c12 - p1) * 15.0 + (1.0 - (1.0 - c12) * p2 - c12) * 30.0;
        prop_assert!((cost - eq6).abs() < 1e-9, "{} vs {}", cost, eq6);
        let s2 = lf.saturating_sub(l1);
        let s3 = lf.saturating_sub(l1 + l2);
        let mut eq7 = cdf(0, lf);
        if l1 < lf { eq7 += (1.0 - cdf(0, lf)) * cdf(1, s2); }
        if l1 + l2 < lf { eq7 += (1.0 - cdf(0, lf)) * (1.0 - cdf(1, s2)) * cdf(2, s3); }
        prop_assert!((att - eq7).abs() < 1e-9, "{} vs {}", att, eq7);
    }

    /// Base is the LP's optimum: no split on a 1 % grid that meets the SLA costs less, it
    /// meets the SLA, and it uses at most two back-ends. OptWait never costs more than the
    /// cheapest back-end that meets the SLA alone.
    #[test]
    fn base_is_optimal_and_optwait_no_worse_than_one_backend(c in proptest::collection::vec(arb_cdf(), 3), lf in 100u64..3000, pf in 50u32..99) {
        let b: Vec<Backend> = c.iter().zip([5.0, 10.0, 15.0]).map(|(cdf, price)| Backend { price, cdf: cdf.clone() }).collect();
        let sla = Sla { percent: f64::from(pf) / 100.0, within: ms(lf) };
        let q: Vec<f64> = b.iter().map(|x| x.cdf.at(sla.within)).collect();
        let mut grid_best = f64::INFINITY;
        for a in 0..=100u32 {
            for bb in 0..=(100 - a) {
                let p = [f64::from(a) / 100.0, f64::from(bb) / 100.0, f64::from(100 - a - bb) / 100.0];
                if p.iter().zip(&q).map(|(p, q)| p * q).sum::<f64>() >= sla.percent {
                    grid_best = grid_best.min(p[0] * 5.0 + p[1] * 10.0 + p[2] * 15.0);
                }
            }
        }
        match base(&b, sla) {
            Ok(s) => {
                prop_assert!(s.cost <= grid_best + 1e-9);
                prop_assert!(s.attained >= sla.percent - 1e-9);
                prop_assert!(s.p.iter().filter(|p| **p > 1e-12).count() <= 2);
            }
            Err(_) => prop_assert!(grid_best.is_infinite()),
        }
        let alone = (0..3).filter(|&i| q[i] >= sla.percent).map(|i| b[i].price).fold(f64::INFINITY, f64::min);
        if let Ok(w) = optwait(&b, sla, 5) {
            prop_assert!(w.cost <= alone + 1e-9);
            prop_assert!(w.attained >= sla.percent);
        } else {
            prop_assert!(alone.is_infinite());
        }
    }
}
