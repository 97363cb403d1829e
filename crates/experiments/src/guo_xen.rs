//! `reproduce guo-xen-credit`: Guo ch. 8's dynamic cache-aware credit scheduling (notes 002
//! §3.10, §5.7) in the simulator's [`xen`](switchyard_sim::models::xen) model: SPECweb2005-like
//! sessions against a web server in DomU, the capacity in sessions under Xen's credit scheduler
//! and under Table 8.3's cache-aware rule, the L2 misses by the VMM's functions beside Table 8.2,
//! and the miss share of execution time at an equal session count beside Fig. 8.6b.

use switchyard_sim::models::xen::{Capacity, Charge, Rule, Workload, XenOutcome, XenParams, capacity, simulate};

use crate::ExperimentError;
pub use crate::claim::Claim;
use crate::report::{ColumnSpec, Progress, Quiet, Report, ReportSpec, Table, TableSpec};
use crate::sweep::sweep;

/// The experiment's setup.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The workloads.
    pub workloads: Vec<Workload>,
    /// Root seed (think times, idlers' races).
    pub seed: u64,
    /// Capacity searches per workload and rule, seeds `seed`, `seed + 1`, …: a capacity is found
    /// to a step, and a seed's QoS crosses the target a step or two either way, so the gains are
    /// means over seeds.
    pub runs: u64,
    /// Simulated time per run against [`XenParams::guo`]'s 1.2 s.
    pub scale: f64,
    /// The capacity search's resolution, in sessions.
    pub step: u32,
    /// The share of answers that must be good (SPECweb2005's QoS is 95% within its "good" time).
    pub target: f64,
    /// The application's working set per request on its VCPU, in place of each workload's own
    /// (the sensitivity the published gain hangs on: see the claims).
    pub app_bytes: Option<u64>,
    /// Threads the independent searches are spread over (the result does not depend on it).
    pub threads: usize,
}

impl Setup {
    /// The four workloads, three seeds, full length, to 10 sessions, 95% good.
    pub fn guo(seed: u64, threads: usize) -> Self {
        Self {
            workloads: Workload::ALL.to_vec(),
            seed,
            runs: 3,
            scale: 1.0,
            step: 10,
            target: 0.95,
            app_bytes: None,
            threads,
        }
    }
}

/// One workload under one rule.
#[derive(Clone, Debug)]
pub struct Row {
    /// The workload.
    pub workload: Workload,
    /// The rule.
    pub rule: Rule,
    /// The capacity search of the first seed.
    pub capacity: Capacity,
    /// Every seed's capacity, in sessions.
    pub sessions: Vec<u32>,
    /// The run, with the first seed, at the credit scheduler's capacity for that seed (the same
    /// session count for every rule).
    pub at_credit_capacity: XenOutcome,
}

/// The runs and the claims.
#[derive(Clone, Debug)]
pub struct Reproduction {
    /// One row per workload and rule, workloads in the setup's order, rules in [`Rule::ALL`]'s.
    pub rows: Vec<Row>,
    /// Every published claim of §5.7, ours beside it.
    pub claims: Vec<Claim>,
}

impl Row {
    /// The mean capacity over the seeds.
    pub fn mean_sessions(&self) -> f64 {
        self.sessions.iter().map(|&s| f64::from(s)).sum::<f64>() / self.sessions.len().max(1) as f64
    }
}

impl Reproduction {
    /// The row of `workload` and `rule`.
    pub fn row(&self, workload: Workload, rule: Rule) -> Option<&Row> {
        self.rows.iter().find(|r| r.workload == workload && r.rule == rule)
    }

    /// `rule`'s mean capacity over the credit scheduler's for `workload`.
    pub fn gain(&self, workload: Workload, rule: Rule) -> Option<f64> {
        let base = self.row(workload, Rule::Credit)?.mean_sessions();
        let ours = self.row(workload, rule)?.mean_sessions();
        (base > 0.0).then(|| ours / base)
    }

    /// The share of L2 misses the grant table and the scheduler take under the credit scheduler
    /// at its capacity (Table 8.2's "about 60%").
    pub fn vmm_share(&self, workload: Workload) -> Option<f64> {
        let o = &self.row(workload, Rule::Credit)?.at_credit_capacity;
        (o.l2_per_answer() > 0.0).then(|| o.l2_share(Charge::GrantTable) + o.l2_share(Charge::Scheduler))
    }
}

// Written after running the model with its one fitted parameter (the web server's working set,
// fitted to Table 8.2 alone) and its chosen costs, seeds 1–3; nothing was changed to move them.
// `--app-kib` gives the sensitivity runs the texts cite.
const WHY_SESSIONS: &str = "ours is flat (Support -0.3%, Banking -0.8%, Ecommerce 0.0%: within the search's \
10-session step). In the model most VCPU moves at capacity (88-99%) are a woken VCPU taken by an idle PCPU \
because its own was busy (the notifier still runs when it sends the event) and idle PCPUs stealing waiting \
VCPUs; Table 8.3 redirects only the other two kinds, a VCPU displaced by a tickle and the tick's check. And a \
move costs at most the VCPU's working set once, while most of an answer's misses are the grant copies of data \
no cache holds. With 2 MiB working sets (--app-kib 2048: the two VCPUs of an L2 pair then fill its 4 MiB \
and evict each other) the rule gives +11.7% (Banking +28%, Ecommerce +10%, Support -3%), near the published \
figure, but Table 8.2's share then falls to 7%: in this model the two published figures cannot both hold. \
Cache-to-cache transfers are not modelled (a line leaving a pair comes from memory)";
const WHY_STEALS: &str = "the wider reading keeps more woken VCPUs in their L2 (Banking: 29% of those moves \
leave it, against 86% under credit) and cuts L2 misses per answer (Banking 451 to 350), but not the capacity: \
at the QoS boundary the answers wait behind the guest's four busy VCPUs, and a few percent less CPU per answer \
is within a step. At light load it keeps 70-83% of all moves in the L2. With 2 MiB working sets it gives +47%";
const WHY_TABLE: &str = "close by construction: this share is what the one fitted parameter, the web server's \
working set per request, was fitted to, on a grid (256 KiB: 75%, 512 KiB: 71%, 1 MiB: 62%, 2 MiB: 7%). By \
workload ours is Support 93%, Banking 47%, Ecommerce 46%, against the listed functions' 63%, 50-58% and 56%: \
Support's grant copies of 64 KiB files from the page cache dominate whatever the guest does, and the model has \
no per-workload fit. Event channels take under 1% here against 13.65% in Guo's Support column: the model \
charges them one line per notification";
const WHY_SHARE: &str = "Guo's direction, small (3.8% less of the busy time at the credit scheduler's \
capacity, mean of SPECweb's three), for the reasons of the first claim; Fig. 8.6b gives no number to set \
beside it";
const WHY_USERSPACE: &str = "ours is flat (-0.1%): L7-filter's eight Dom0 VCPUs on eight PCPUs seldom \
meet, so VCPUs move some 390 times a second against 63,500 packets; the rule cuts the moves that leave the L2 \
(90% to 50%) and L2 misses per packet (by 11%), but the capacity is set by the dispatcher, one VCPU handling \
every packet and busy all the time at capacity (the busiest-VCPU column), and it moves least. FFmpeg is not modelled here (its GOP hand-off is \
reproduced natively in gop-cache-aware-cache). Guo gives neither the VCPU counts nor how the threads wake \
each other, so this is one reading of the setup";
const WHY_NATIVE: &str = "left out: the loss against native Linux needs a native model of the same server \
(no Dom0, no grant copies, no VCPUs), whose costs ch. 8 does not give apart from the totals it compares";
fn runs(setup: &Setup, progress: &dyn Progress) -> Vec<(Workload, Rule, u64, Capacity)> {
    let search = |w: usize, r: usize, i: u64| -> Result<_, std::convert::Infallible> {
        let (workload, rule, seed) = (setup.workloads[w], Rule::ALL[r], setup.seed + i);
        let base = XenParams { seed, ..params(setup, workload, rule, 0) };
        Ok((workload, rule, seed, capacity(&base, setup.step, 1 << 20, setup.target)))
    };
    progress.stage("guo-xen-credit capacity searches", searches(setup) as u64);
    let Ok(all) =
        sweep(setup.workloads.len(), Rule::ALL.len(), setup.runs, setup.threads, &search, &|_| progress.advance(1));
    all
}

fn params(setup: &Setup, workload: Workload, rule: Rule, sessions: u32) -> XenParams {
    let mut p = XenParams::guo(workload, rule, sessions, setup.seed);
    p.duration_ns *= setup.scale;
    p.warmup_ns *= setup.scale;
    if let Some(bytes) = setup.app_bytes {
        p.mix.app_bytes = bytes;
    }
    p
}

/// The capacity searches [`run`] makes: one per workload, rule and seed.
pub fn searches(setup: &Setup) -> usize {
    setup.workloads.len() * Rule::ALL.len() * setup.runs as usize
}

/// Runs every workload under every rule, then compares with §5.7.
pub fn run(setup: &Setup) -> Result<Reproduction, ExperimentError> {
    run_with(setup, &Quiet)
}

/// [`run`], advancing `progress` by one a capacity search (of [`searches`]).
pub fn run_with(setup: &Setup, progress: &dyn Progress) -> Result<Reproduction, ExperimentError> {
    if setup.workloads.is_empty() {
        return Err(ExperimentError::Input("at least one workload is needed".into()));
    }
    if !(setup.scale > 0.0 && setup.scale.is_finite()) {
        return Err(ExperimentError::Input(format!("scale {} must be a positive number", setup.scale)));
    }
    if setup.step == 0 || setup.runs == 0 || !(setup.target > 0.0 && setup.target <= 1.0) {
        return Err(ExperimentError::Input("the step and runs must be positive and the target in (0, 1]".into()));
    }
    let searches = runs(setup, progress);
    let first = |w: Workload, rule: Rule| {
        searches.iter().find(|(sw, r, seed, _)| *sw == w && *r == rule && *seed == setup.seed).map(|s| &s.3)
    };
    let rows: Vec<Row> = setup
        .workloads
        .iter()
        .flat_map(|&w| Rule::ALL.into_iter().map(move |r| (w, r)))
        .map(|(w, r)| {
            let c = first(w, r).expect("every case was searched");
            let sessions = first(w, Rule::Credit).map_or(0, |c| c.sessions).max(setup.step);
            let at_credit_capacity = if r == Rule::Credit && c.sessions == sessions {
                c.at.clone()
            } else {
                simulate(&params(setup, w, r, sessions))
            };
            let all = searches.iter().filter(|(sw, sr, _, _)| *sw == w && *sr == r).map(|s| s.3.sessions).collect();
            Row { workload: w, rule: r, capacity: c.clone(), sessions: all, at_credit_capacity }
        })
        .collect();
    let mut repro = Reproduction { rows, claims: Vec::new() };
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let specweb: Vec<Workload> = setup.workloads.iter().copied().filter(|w| !w.dom0_only()).collect();
    let gains = |rule| mean(specweb.iter().filter_map(|&w| repro.gain(w, rule)).collect());
    let userspace = mean(
        setup.workloads.iter().filter(|w| w.dom0_only()).filter_map(|&w| repro.gain(w, Rule::CacheAware)).collect(),
    );
    let share = mean(specweb.iter().filter_map(|&w| repro.vmm_share(w)).collect());
    let miss_share = mean(
        specweb
            .iter()
            .filter_map(|&w| {
                let credit = repro.row(w, Rule::Credit)?.at_credit_capacity.miss_share;
                let aware = repro.row(w, Rule::CacheAware)?.at_credit_capacity.miss_share;
                (credit > 0.0).then(|| aware / credit)
            })
            .collect(),
    );
    repro.claims = vec![
        Claim {
            claim: "SPECweb2005 sessions, cache-aware migration over the credit scheduler, average of the three workloads",
            source: "Guo 2010 ch. 8.3 (notes 002 §5.7)",
            published: Some(1.15),
            published_text: "+15%",
            ours: gains(Rule::CacheAware),
            why: WHY_SESSIONS,
            gain: true,
        },
        Claim {
            claim: "the same, with woken VCPUs also stolen by an idle L2 sibling first (the wider reading)",
            source: "Guo 2010 ch. 8.3, Table 8.3 (notes 002 §3.10)",
            published: Some(1.15),
            published_text: "+15% (for the rule as published)",
            ours: gains(Rule::CacheAwareSteals),
            why: WHY_STEALS,
            gain: true,
        },
        Claim {
            claim: "share of L2 misses in grant-table and credit-scheduler functions, average of the workloads",
            source: "Guo 2010 ch. 8, Table 8.2 (notes 002 §5.7)",
            published: Some(0.60),
            published_text: "about 60% (the listed functions: Support 63%, Banking 50%, 58% with context_switch, Ecommerce 56%)",
            ours: share,
            why: WHY_TABLE,
            gain: false,
        },
        Claim {
            claim: "share of execution time in L2 misses at an equal session count, cache-aware over credit",
            source: "Guo 2010 ch. 8, Fig. 8.6b (notes 002 §5.7)",
            published: None,
            published_text: "falls, with a proportional rise in normal execution (no number)",
            ours: miss_share,
            why: WHY_SHARE,
            gain: false,
        },
        Claim {
            claim: "userspace schedulers in Dom0, cache-aware over credit (ours: L7-filter's connections)",
            source: "Guo 2010 ch. 8 (notes 002 §5.7)",
            published: Some(1.095),
            published_text: "+9.5% on average (L7-filter and FFmpeg)",
            ours: userspace,
            why: WHY_USERSPACE,
            gain: true,
        },
        Claim {
            claim: "session capacity lost in DomU against native Linux",
            source: "Guo 2010 ch. 8, Table 8.1 (notes 002 §5.7)",
            published: None,
            published_text: "Support 45%, Banking 31%, Ecommerce 38%",
            ours: None,
            why: WHY_NATIVE,
            gain: false,
        },
    ];
    Ok(repro)
}

/// Each workload's capacity under each rule, and the run at the credit scheduler's capacity.
pub const CAPACITY: TableSpec = TableSpec::new(
    "capacity",
    "Session capacity by workload and rule",
    &[
        ColumnSpec::text("workload"),
        ColumnSpec::text("rule")
            .about("how VCPUs are placed: Xen 3.3's credit scheduler, or Table 8.3's cache-aware rule"),
        ColumnSpec::num("sessions", 0).about("the most sessions meeting the QoS target, mean over the seeds"),
        ColumnSpec::num("gain", 1).gain().header("vs credit").about("sessions over the credit scheduler's"),
        ColumnSpec::num("answers_per_s", 0).header("answers/s").about("at the first seed's capacity"),
        ColumnSpec::num("busy", 2).unit("PCPUs").about("PCPUs busy on average, at the first seed's capacity"),
        ColumnSpec::text("busiest_vcpu").header("busiest VCPU").about("the VCPU busiest at the first seed's capacity"),
        ColumnSpec::num("busiest_share", 0).percent().header("busy").about("the busiest VCPU's share of the time busy"),
        ColumnSpec::num("moves_per_s", 0)
            .header("moves/s")
            .about("VCPU moves per second, at the credit scheduler's capacity"),
        ColumnSpec::num("leave_l2", 0)
            .percent()
            .header("leave L2")
            .about("share of the moves to a PCPU outside the VCPU's L2"),
        ColumnSpec::num("l2_per_answer", 0)
            .header("L2/answer")
            .about("L2 misses per answer, at the credit scheduler's capacity"),
        ColumnSpec::num("miss_share", 1)
            .percent()
            .header("miss share")
            .about("share of the busy time spent in L2 misses"),
    ],
);

/// VCPU moves by cause.
pub const MOVES: TableSpec = TableSpec::new(
    "moves",
    "VCPU moves by cause at the credit scheduler's capacity (per second, and the share leaving the L2)",
    &[
        ColumnSpec::text("workload"),
        ColumnSpec::text("rule"),
        ColumnSpec::num("wake_per_s", 0).header("woken /s").about("woken VCPUs taken by an idle PCPU, per second"),
        ColumnSpec::num("wake_leave_l2", 0).percent().header("leave L2").about("share of those leaving the L2"),
        ColumnSpec::num("displace_per_s", 0).header("displaced /s").about("VCPUs displaced by a tickle, per second"),
        ColumnSpec::num("displace_leave_l2", 0).percent().header("leave L2").about("share of those leaving the L2"),
        ColumnSpec::num("tick_per_s", 0).header("tick /s").about("moves by the tick's check, per second"),
        ColumnSpec::num("tick_leave_l2", 0).percent().header("leave L2").about("share of those leaving the L2"),
        ColumnSpec::num("idle_per_s", 0).header("stolen /s").about("VCPUs stolen by an idle PCPU, per second"),
        ColumnSpec::num("idle_leave_l2", 0).percent().header("leave L2").about("share of those leaving the L2"),
    ],
);

/// L2 misses by function (Table 8.2's grouping).
pub const L2_BY_FUNCTION: TableSpec = TableSpec::new(
    "l2_by_function",
    "L2 misses by function under the credit scheduler at its capacity (Table 8.2's grouping)",
    &[
        ColumnSpec::text("workload"),
        ColumnSpec::num("guest", 1)
            .percent()
            .header("guests, app")
            .about("the two domains' own kernels and the application"),
        ColumnSpec::num("grant_table", 1)
            .percent()
            .header("grant table")
            .about("do_grant_table_op, gnttab_copy: copies and entries"),
        ColumnSpec::num("scheduler", 1)
            .percent()
            .header("credit scheduler")
            .about("the credit scheduler and context switches"),
        ColumnSpec::num("event_channel", 1).percent().header("event channels").about("event channel notifications"),
    ],
);

/// What `reproduce guo-xen-credit` reports.
pub const SPEC: ReportSpec = ReportSpec {
    name: "guo-xen-credit",
    title: "Guo ch. 8 in the simulator: SPECweb2005-like session capacity of a web server in DomU under Xen's credit scheduler against Table 8.3's cache-aware VCPU migration, and the VMM's L2 misses",
    tables: &[&CAPACITY, &MOVES, &L2_BY_FUNCTION],
};

impl Reproduction {
    /// The reproduction as a report: capacities, moves by cause, L2 misses by function, claims.
    pub fn report(&self, setup: &Setup) -> Report {
        let mut r = Report::new(&SPEC);
        r.param("seed", setup.seed, "the first seed")
            .param("runs", setup.runs, "capacity searches per workload and rule, seeds seed, seed + 1, …")
            .param("scale", setup.scale, "simulated time per run against the default 1.2 s")
            .param("step", setup.step, "the capacity search's resolution, sessions")
            .param("target", setup.target, "the share of answers that must be within 10 ms")
            .param("app_kib", setup.app_bytes.map(|b| b >> 10), "the application's working set per request, KiB, in place of the mixes' own (none: the fitted 1,024)")
            .note(format!(
                "A web server in DomU (4 VCPUs) behind Dom0 (8 VCPUs) on a Xeon E5335 (L2 shared by core pairs), VCPUs placed by Xen's credit scheduler or by Table 8.3's cache-aware rule; capacity = the most sessions (to {}) with {:.0}% of answers within 10 ms, mean of seeds {}–{}.",
                setup.step,
                setup.target * 100.0,
                setup.seed,
                setup.seed + setup.runs.max(1) - 1
            ));
        if let Some(b) = setup.app_bytes {
            r.note(format!(
                "The application's working set per request: {} KiB on every workload, in place of the mixes' own.",
                b >> 10
            ));
        }
        let mut capacity = Table::new(&CAPACITY).grouped_by("workload");
        capacity.note("sessions: mean over the seeds; answers/s, busy PCPUs and the busiest VCPU at the first seed's capacity; moves/s, leave L2, L2/answer and miss share at the credit scheduler's capacity, first seed, for every rule.");
        let mut moves = Table::new(&MOVES).grouped_by("workload");
        for row in &self.rows {
            let (c, e) = (&row.capacity.at, &row.at_credit_capacity);
            capacity.push(vec![
                row.workload.name().into(),
                row.rule.name().into(),
                row.mean_sessions().into(),
                self.gain(row.workload, row.rule).into(),
                c.answers_per_s.into(),
                c.busy_pcpus.into(),
                c.busiest_vcpu.0.as_str().into(),
                c.busiest_vcpu.1.into(),
                e.moves_per_s.into(),
                e.moves_leaving_l2.into(),
                e.l2_per_answer().into(),
                e.miss_share.into(),
            ]);
            let mut cells = vec![row.workload.name().into(), row.rule.name().into()];
            // In `Move::ALL`'s order, which the columns follow: wake, displace, tick, idle.
            for (per_s, leaving) in e.moves_by_cause {
                cells.extend([per_s.into(), leaving.into()]);
            }
            moves.push(cells);
        }
        r.tables.push(capacity);
        r.tables.push(moves);
        let mut l2 = Table::new(&L2_BY_FUNCTION);
        for w in &setup.workloads {
            let Some(row) = self.row(*w, Rule::Credit) else { continue };
            let o = &row.at_credit_capacity;
            let mut cells = vec![w.name().into()];
            cells.extend(Charge::ALL.iter().map(|&c| o.l2_share(c).into()));
            l2.push(cells);
        }
        r.tables.push(l2);
        r.claims = self.claims.iter().map(Into::into).collect();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_setups_are_refused_with_a_reason() {
        let good = Setup { scale: 0.1, ..Setup::guo(1, 1) };
        for bad in [
            Setup { workloads: Vec::new(), ..good.clone() },
            Setup { scale: 0.0, ..good.clone() },
            Setup { step: 0, ..good.clone() },
            Setup { runs: 0, ..good.clone() },
            Setup { target: 1.5, ..good.clone() },
        ] {
            assert!(matches!(run(&bad), Err(ExperimentError::Input(_))), "{bad:?}");
        }
    }
}
