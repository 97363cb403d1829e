//! The board's rules on hand-made cases, and its promises under random failures: no result is
//! counted twice, no reduce starts before its maps are done, and every application finishes
//! once some worker is reliable, whatever the rule and the order.

use proptest::prelude::*;

use super::*;
use crate::measure::EstimateConfig;
use crate::order::apps::AppOrder;
use crate::{Nanos, WorkerId};

const A: WorkerId = WorkerId(0);
const B: WorkerId = WorkerId(1);

fn s(secs: u64) -> Nanos {
    Nanos(secs * 1_000_000_000)
}

fn spec(maps: u32, reduces: u32, deadline: u64) -> AppSpec {
    AppSpec { maps, reduces, deadline: s(deadline), task_estimate: Some(10.0) }
}

fn board(rule: TaskRule) -> Board {
    // A prior worth ten seconds of work, so that one failure moves the estimate.
    let estimates = EstimateConfig { prior_exposure: 10.0, ..EstimateConfig::default() };
    Board::new(BoardConfig { rule, estimates, ..BoardConfig::default() })
}

/// A fails once, takes the task again, and B finishes the other: the case in which MiscoRT's
/// step 3 must decide whether B gets a replica.
fn slow_holder(deadline: u64) -> (Board, Option<Assignment>) {
    let mut b = board(TaskRule::MiscoRt);
    b.submit(spec(2, 0, deadline), s(0));
    let first = b.poll(A, s(0)).unwrap();
    b.failed(A, first.attempt, s(10), 0).unwrap();
    let other = b.poll(B, s(10)).unwrap();
    let again = b.poll(A, s(10)).unwrap();
    assert_eq!((other.task.index, again.task.index, again.repeat), (1, 0, true), "step 2 re-issues the failed task");
    assert_eq!(b.upload(B, other.attempt, s(20)), Ok(Upload::Accepted { phase_done: false, app_done: false }));
    let offer = b.poll(B, s(20));
    (b, offer)
}

#[test]
fn miscort_replicates_only_to_save_the_deadline() {
    // A's one failure in 20 s of work puts its expected time at 45 s (Eq. 3.4, τλ = 0.5), so
    // the task is expected at 55 s. B would take about 10 s.
    let (b, offer) = slow_holder(50);
    let offer = offer.expect("a replica: A would miss 50 s, B would make it");
    assert_eq!((offer.task.index, offer.repeat), (0, true));
    let w = b.expected_time(A, AppId(0), Phase::Map);
    assert!((w - 45.0).abs() < 0.5, "{w}");
    let (_, offer) = slow_holder(100);
    assert_eq!(offer, None, "A is expected by 55 s, before the deadline: no replica");
}

#[test]
fn a_late_attempt_is_presumed_failed_and_its_task_reissued_and_the_first_result_wins() {
    let mut b = board(TaskRule::MiscoRt);
    b.submit(spec(1, 1, 1000), s(0));
    let a = b.poll(A, s(0)).unwrap();
    assert_eq!(b.poll(B, s(29)), None, "29 s is within three times the 10 s estimate");
    let again = b.poll(B, s(31)).expect("31 s is past it: presumed failed, re-issued");
    assert!(again.repeat && again.task == a.task);
    // A was only slow: its result is taken, and B's is a duplicate.
    assert_eq!(b.upload(A, a.attempt, s(35)), Ok(Upload::Accepted { phase_done: true, app_done: false }));
    assert_eq!(b.worker_estimate(A).map(|e| e.0 < 0.01), Some(true), "the false alarm is taken back");
    assert_eq!(b.upload(B, again.attempt, s(41)), Ok(Upload::Duplicate));
    assert_eq!(b.upload(B, again.attempt, s(42)), Err(Refusal::AlreadyReported(again.attempt)));
    assert_eq!(b.upload(A, a.attempt, s(42)), Err(Refusal::AlreadyReported(a.attempt)));
    let st = b.app_status(AppId(0), s(42));
    assert_eq!((st.maps, st.reduces, st.duplicates, st.repeats), ((1, 1), (0, 1), 1, 1));
    // The reduce is on offer now, and only now.
    let r = b.poll(A, s(43)).unwrap();
    assert_eq!(r.task.phase, Phase::Reduce);
    assert_eq!(b.upload(A, r.attempt, s(50)), Ok(Upload::Accepted { phase_done: true, app_done: true }));
    assert_eq!(b.app_status(AppId(0), s(50)).met(s(50)), Some(true));
    assert!(b.all_done());
}

#[test]
fn a_presumed_worker_that_reports_late_is_taken_back_as_alive_even_when_another_won() {
    let mut b = board(TaskRule::MiscoRt);
    b.submit(spec(1, 0, 1000), s(0));
    let a = b.poll(A, s(0)).unwrap();
    let again = b.poll(B, s(31)).unwrap();
    assert_eq!(b.upload(B, again.attempt, s(41)), Ok(Upload::Accepted { phase_done: true, app_done: true }));
    assert_eq!(b.upload(A, a.attempt, s(43)), Ok(Upload::Duplicate));
    let (rate, recovery) = b.worker_estimate(A).unwrap();
    assert!(rate < 0.01, "the presumed failure is taken back: {rate}");
    // Its next poll is not a return from a failure: the recovery time keeps its prior.
    b.poll(A, s(55));
    assert_eq!(b.worker_estimate(A).unwrap().1, recovery);
}

#[test]
fn uploads_of_unknown_or_foreign_attempts_are_refused() {
    let mut b = board(TaskRule::MiscoRt);
    b.submit(spec(1, 0, 100), s(0));
    let a = b.poll(A, s(0)).unwrap();
    assert_eq!(b.upload(B, a.attempt, s(1)), Err(Refusal::NotYours { attempt: a.attempt, holder: A, worker: B }));
    assert_eq!(b.upload(A, AttemptId(99), s(1)), Err(Refusal::Unknown(AttemptId(99))));
    assert_eq!(b.failed(B, a.attempt, s(1), 0), Err(Refusal::NotYours { attempt: a.attempt, holder: A, worker: B }));
    assert_eq!(b.app_status(AppId(0), s(1)).maps, (0, 1), "nothing counted");
}

#[test]
fn a_worker_that_polls_while_holding_a_task_has_lost_it() {
    let mut b = board(TaskRule::MiscoRt);
    b.submit(spec(1, 0, 100), s(0));
    let a = b.poll(A, s(0)).unwrap();
    let again = b.poll(A, s(5)).expect("it restarted: the task is offered again");
    assert!(again.repeat);
    assert!(b.worker_estimate(A).unwrap().0 > 0.05, "and the restart counts as a failure");
    // Its old attempt, if it ever reports, still counts while the task is open.
    assert_eq!(b.upload(A, a.attempt, s(6)), Ok(Upload::Accepted { phase_done: true, app_done: true }));
}

#[test]
fn the_orders_pick_the_application_their_rule_says_and_fall_through() {
    for (order, first) in [(AppOrder::Fifo, 0), (AppOrder::Edf, 1), (AppOrder::default(), 1)] {
        let mut b = Board::new(BoardConfig { order, ..BoardConfig::default() });
        b.submit(spec(1, 0, 1000), s(0));
        b.submit(spec(1, 0, 100), s(1));
        let got = b.poll(A, s(2)).unwrap();
        assert_eq!(got.task.app, AppId(first), "{order:?}");
        // The first application has nothing more for B (its task is out and on time), so B
        // gets the other one's.
        assert_eq!(b.poll(B, s(2)).unwrap().task.app, AppId(1 - first), "{order:?}");
    }
    let mut b = Board::new(BoardConfig { order: AppOrder::Fifo, fall_through: false, ..BoardConfig::default() });
    b.submit(spec(1, 0, 1000), s(0));
    b.submit(spec(1, 0, 100), s(1));
    b.poll(A, s(2)).unwrap();
    assert_eq!(b.poll(B, s(2)), None, "Algorithm 1 as written answers only from the first");
}

#[test]
fn the_baselines_repeat_as_they_are_meant_to() {
    // Sequential: in order, then again over what is not done.
    let mut b = board(TaskRule::Sequential);
    b.submit(spec(3, 0, 1000), s(0));
    let got: Vec<u32> = (0..5).map(|w| b.poll(WorkerId(w), s(1)).unwrap().task.index).collect();
    assert_eq!(got, [0, 1, 2, 0, 1]);
    // Modified Hadoop: nothing until a task outruns its mean (10 s), then that task.
    let mut b = board(TaskRule::ModifiedHadoop);
    b.submit(spec(2, 0, 1000), s(0));
    b.poll(A, s(0)).unwrap();
    b.poll(B, s(4)).unwrap();
    assert_eq!(b.poll(WorkerId(2), s(9)), None);
    assert_eq!(b.poll(WorkerId(2), s(11)).map(|a| a.task.index), Some(0));
    // Random: only incomplete tasks, and the same seed gives the same choices.
    let run = || {
        let mut b = board(TaskRule::Random);
        b.submit(spec(4, 0, 1000), s(0));
        for w in 0..4 {
            let _ = b.poll(WorkerId(w), s(0));
        }
        (4..12).map(|w| b.poll(WorkerId(w), s(1)).unwrap().task.index).collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
    assert!(run().iter().any(|&i| i != run()[0]), "{:?}", run());
}

#[test]
fn spark_speculates_a_straggler_once_most_tasks_are_done() {
    let mut b = board(TaskRule::SPARK);
    b.submit(spec(4, 0, 1000), s(0));
    let out: Vec<Assignment> = (0..4).map(|w| b.poll(WorkerId(w), s(0)).unwrap()).collect();
    for a in &out[..2] {
        b.upload(WorkerId(a.attempt.0 as u32), a.attempt, s(4)).unwrap();
    }
    assert_eq!(b.poll(WorkerId(0), s(7)), None, "half done: below the 0.75 quantile");
    b.upload(WorkerId(2), out[2].attempt, s(8)).unwrap();
    // Median 4 s, so past 6 s a single attempt is speculated; the last has run 8 s.
    let spec_copy = b.poll(WorkerId(0), s(8)).expect("a speculative copy");
    assert_eq!((spec_copy.task.index, spec_copy.repeat), (3, true));
    assert_eq!(b.poll(WorkerId(1), s(9)), None, "only one copy");
}

#[test]
fn late_copies_the_task_expected_to_finish_last_and_not_onto_a_slow_worker() {
    let mut b = board(TaskRule::LATE);
    b.submit(spec(3, 0, 1000), s(0));
    let out: Vec<Assignment> = (0..3).map(|w| b.poll(WorkerId(w), s(0)).unwrap()).collect();
    b.progress(WorkerId(0), out[0].attempt, 0.9);
    b.progress(WorkerId(1), out[1].attempt, 0.2);
    b.progress(WorkerId(2), out[2].attempt, 0.5);
    // Worker 3 is new and as fast as any: it gets a copy of task 1, the slowest.
    let copy = b.poll(WorkerId(3), s(5)).expect("a copy");
    assert_eq!((copy.task.index, copy.repeat), (1, true));
    assert_eq!(b.poll(WorkerId(4), s(5)), None, "the cap: one copy among five workers");
}

#[test]
fn late_sends_no_copy_to_a_worker_known_to_be_slow() {
    let mut b = board(TaskRule::LATE);
    b.submit(spec(8, 0, 1000), s(0));
    // Workers 0–3 each finish a task in 4 s; worker 4 takes 40 s.
    for w in 0..4 {
        let a = b.poll(WorkerId(w), s(0)).unwrap();
        b.upload(WorkerId(w), a.attempt, s(4)).unwrap();
    }
    let slow = b.poll(WorkerId(4), s(0)).unwrap();
    b.upload(WorkerId(4), slow.attempt, s(40)).unwrap();
    for w in 0..3 {
        b.poll(WorkerId(w), s(40)).unwrap();
    }
    assert_eq!(b.poll(WorkerId(4), s(45)), None, "the slowest worker gets no copy");
    assert!(b.poll(WorkerId(3), s(45)).is_some_and(|a| a.repeat), "a fast one does");
}

/// What a simulated worker does next.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Finish what it holds and upload.
    Finish,
    /// Say it failed.
    Fail,
    /// Die silently and come back (polling) later.
    Vanish,
    /// Stay quiet this step.
    Wait,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![4 => Just(Act::Finish), 1 => Just(Act::Fail), 1 => Just(Act::Vanish), 2 => Just(Act::Wait)]
}

fn rule() -> impl Strategy<Value = TaskRule> {
    prop_oneof![
        Just(TaskRule::MiscoRt),
        Just(TaskRule::Random),
        Just(TaskRule::Sequential),
        Just(TaskRule::ModifiedHadoop),
        Just(TaskRule::SPARK),
        Just(TaskRule::LATE),
        Just(TaskRule::BOINC),
        Just(TaskRule::WorkerCentric { metric: locality::Metric::Overlap, top: 2 }),
    ]
}

fn order() -> impl Strategy<Value = AppOrder> {
    prop_oneof![
        Just(AppOrder::default()),
        Just(AppOrder::LeastLaxity { negative_last: false }),
        Just(AppOrder::Edf),
        Just(AppOrder::Fifo),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Workers finish, fail, vanish and wait at random for a while; then one reliable worker
    /// is left. Every application must finish, every task counted exactly once, no reduce
    /// handed out before its maps were done.
    #[test]
    fn nothing_is_counted_twice_and_everything_finishes(
        rule in rule(),
        order in order(),
        apps in proptest::collection::vec((1u32..6, 0u32..4, 20u64..400), 1..4),
        plan in proptest::collection::vec((0u32..4, act(), 1u64..8), 0..200),
        fall_through in any::<bool>(),
    ) {
        // No bound on failures here: with one reason for every failure, a bound would give
        // applications up (that promise has a property of its own).
        let mut b = Board::new(BoardConfig { rule, order, fall_through, give_up_after: None, ..BoardConfig::default() });
        for (maps, reduces, deadline) in &apps {
            b.submit(spec(*maps, *reduces, *deadline), s(0));
        }
        let mut holding: [Option<Assignment>; 4] = [None; 4];
        let mut accepted = 0u64;
        let mut now = s(0);
        let step = |b: &mut Board, w: u32, act: Act, now: Nanos, holding: &mut [Option<Assignment>; 4]| -> Result<u64, TestCaseError> {
            let worker = WorkerId(w);
            let mut got = 0;
            match (holding[w as usize], act) {
                (None, Act::Wait) => {}
                (None, _) => {
                    if let Some(a) = b.poll(worker, now) {
                        if a.task.phase == Phase::Reduce {
                            let st = b.app_status(a.task.app, now);
                            prop_assert_eq!(st.maps.0, st.maps.1, "a reduce before the maps were done");
                        }
                        holding[w as usize] = Some(a);
                    }
                }
                (Some(a), Act::Finish) => {
                    match b.upload(worker, a.attempt, now) {
                        Ok(Upload::Accepted { .. }) => got = 1,
                        Ok(Upload::Duplicate) => {}
                        Err(e) => prop_assert!(false, "a held attempt was refused: {e}"),
                    }
                    holding[w as usize] = None;
                }
                (Some(a), Act::Fail) => {
                    // Refused only if the board already gave it up.
                    let _ = b.failed(worker, a.attempt, now, 0);
                    holding[w as usize] = None;
                }
                (Some(_), Act::Vanish) => holding[w as usize] = None,
                (Some(_), Act::Wait) => {}
            }
            Ok(got)
        };
        for (w, a, dt) in plan {
            now = Nanos(now.0 + s(dt).0);
            accepted += step(&mut b, w, a, now, &mut holding)?;
        }
        // Calm: worker 0 alone, finishing everything it gets, a second a step; the others are
        // gone with whatever they held.
        let total: u64 = apps.iter().map(|(m, r, _)| u64::from(m + r)).sum();
        for _ in 0..(total * 200 + 2000) {
            if b.all_done() {
                break;
            }
            now = Nanos(now.0 + s(1).0);
            accepted += step(&mut b, 0, Act::Finish, now, &mut holding)?;
        }
        prop_assert!(b.all_done(), "not finished: {:?}", b.status(now));
        prop_assert_eq!(accepted, total, "every task accepted exactly once");
        for st in b.status(now) {
            prop_assert_eq!((st.maps.0, st.reduces.0), (st.maps.1, st.reduces.1));
            prop_assert!(st.attempts >= u64::from(st.maps.1 + st.reduces.1));
            prop_assert_eq!(st.running, 0);
        }
    }
}

/// A coordinator rebuilds its board from a log of what happened: polls replayed with the
/// answers they got give the same board, which goes on to decide as the original would, for
/// every rule (the sequential rule's cursor and the random rule's stream included). Workers report, fail, vanish without a word (their
/// next poll says they restarted) and fall silent long enough to be presumed failed, so the
/// replay must make the same presumptions and losses at the same times.
#[test]
fn a_board_replayed_from_its_log_is_the_board() {
    enum Entry {
        Poll(u64, WorkerId, Option<TaskRef>),
        Report(u64, WorkerId, AttemptId, bool),
    }
    for rule in [
        TaskRule::MiscoRt,
        TaskRule::Random,
        TaskRule::Sequential,
        TaskRule::ModifiedHadoop,
        TaskRule::SPARK,
        TaskRule::BOINC,
    ] {
        let workers = [A, B, WorkerId(2)];
        let mut live = board(rule);
        let mut log = Vec::new();
        live.submit(spec(40, 8, 900), s(0));
        live.submit(spec(20, 4, 600), s(0));
        let mut held: Vec<Option<AttemptId>> = vec![None; 3];
        let mut draw = 12345u64;
        let mut t = 0;
        for _ in 0..60 {
            for (i, &w) in workers.iter().enumerate() {
                t += 3;
                draw = draw.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                match (draw >> 33) % 7 {
                    // Silent this turn: holds its attempt, does not poll.
                    0..=2 if held[i].is_some() => continue,
                    // Vanishes: the attempt is never reported.
                    3 => held[i] = None,
                    4 => {
                        if let Some(at) = held[i].take() {
                            let _ = live.failed(w, at, s(t), 0);
                            log.push(Entry::Report(t, w, at, false));
                        }
                    }
                    _ => {
                        if let Some(at) = held[i].take() {
                            let _ = live.upload(w, at, s(t));
                            log.push(Entry::Report(t, w, at, true));
                        }
                    }
                }
                let got = live.poll(w, s(t));
                log.push(Entry::Poll(t, w, got.map(|a| a.task)));
                held[i] = got.map(|a| a.attempt);
            }
        }
        let mut again = board(rule);
        again.submit(spec(40, 8, 900), s(0));
        again.submit(spec(20, 4, 600), s(0));
        for e in &log {
            match *e {
                Entry::Poll(t, w, task) => {
                    again.replay_poll(w, s(t), task);
                }
                Entry::Report(t, w, at, true) => {
                    let _ = again.upload(w, at, s(t));
                }
                Entry::Report(t, w, at, false) => {
                    let _ = again.failed(w, at, s(t), 0);
                }
            }
        }
        assert_eq!(again.status(s(t)), live.status(s(t)), "{rule:?}");
        assert!(!live.all_done(), "{rule:?}: the log ends while tasks are out, so what is out must match");
        for w in workers {
            assert_eq!(again.worker_estimate(w), live.worker_estimate(w), "{rule:?} {w:?}");
        }
        // And it goes on deciding as the original would.
        for k in 0..6 {
            let w = workers[k % 3];
            t += 40;
            assert_eq!(again.poll(w, s(t)), live.poll(w, s(t)), "{rule:?}, poll {k} after the replay");
        }
    }
}

/// BOINC's rule: an endangered application goes to reliable workers only (an unreliable one is
/// sent on to the next application), and a reliable worker takes over what an unreliable one
/// holds; an application with slack goes to anyone, and so does any work when no reliable
/// worker is known.
#[test]
fn boinc_routes_endangered_work_to_reliable_workers() {
    // A fails twice in two seconds of work on a filler application; B does one task well.
    let setup = || {
        let mut b = board(TaskRule::BOINC);
        b.submit(spec(3, 0, 10_000), s(0));
        for k in 0..2 {
            let a = b.poll(A, s(k)).unwrap();
            b.failed(A, a.attempt, s(k + 1), 0).unwrap();
        }
        b
    };
    // Nobody reliable is known yet: A still gets work, even of an endangered application.
    let mut b = setup();
    b.submit(spec(1, 0, 12), s(2));
    assert!(b.poll(A, s(2)).is_some(), "no reliable worker known: A works");

    let with_b = || {
        let mut b = setup();
        let t = b.poll(B, s(2)).unwrap();
        assert!(matches!(b.upload(B, t.attempt, s(12)), Ok(Upload::Accepted { .. })));
        b
    };
    // Endangered (deadline in 14 s, a task takes 10): A is sent on, B gets it.
    let mut b = with_b();
    b.submit(spec(1, 0, 26), s(12));
    let got = b.poll(A, s(12)).unwrap();
    assert_eq!(got.task.app, AppId(0), "A is sent on to the application with slack");
    let got = b.poll(B, s(12)).unwrap();
    assert_eq!(got.task.app, AppId(1));

    // With slack at first, A takes the task; once it is endangered, B takes over.
    let mut b = with_b();
    b.submit(spec(1, 0, 40), s(12));
    let held = b.poll(A, s(12)).unwrap();
    assert_eq!(held.task.app, AppId(1), "slack: A may take it");
    let early = b.poll(B, s(13)).unwrap();
    assert_eq!(early.task.app, AppId(0), "still slack at 13 s: B is not sent to rescue");
    b.upload(B, early.attempt, s(23)).unwrap();
    let rescue = b.poll(B, s(23)).unwrap();
    assert_eq!((rescue.task, rescue.repeat), (held.task, true), "endangered at 23 s: B takes over A's task");
}

/// Ko et al.'s worker-centric rule on the board: a worker gets the never-assigned map whose
/// files its site holds; the site's table learns from hand-outs and evictions; a board
/// replayed from its log decides the same.
#[test]
fn worker_centric_gives_a_worker_the_map_its_site_holds() {
    use super::locality::Metric;
    let rule = TaskRule::WorkerCentric { metric: Metric::Overlap, top: 1 };
    let files = vec![vec![1, 2], vec![3, 4], vec![1, 5], vec![3, 6]];
    let mut b = board(rule);
    b.submit_with_files(spec(4, 0, 1000), s(0), files.clone());
    b.set_site(A, 0);
    b.set_site(B, 1);
    // Nothing held anywhere: the first never-assigned map.
    let a1 = b.poll(A, s(1)).unwrap();
    assert_eq!(a1.task.index, 0);
    assert!(b.site_table(0).unwrap().holds(1) && b.site_table(0).unwrap().holds(2));
    let b1 = b.poll(B, s(1)).unwrap();
    assert_eq!(b1.task.index, 1, "site 1 holds nothing yet: the first left");
    b.upload(A, a1.attempt, s(5)).unwrap();
    b.upload(B, b1.attempt, s(5)).unwrap();
    // Site 0 holds file 1, so A gets map 2 (files 1, 5); site 1 holds 3, so B gets map 3.
    let a2 = b.poll(A, s(5)).unwrap();
    assert_eq!(a2.task.index, 2, "A's site holds file 1");
    let b2 = b.poll(B, s(5)).unwrap();
    assert_eq!(b2.task.index, 3, "B's site holds file 3");

    // Evicted files no longer count.
    let mut c = board(rule);
    c.submit_with_files(spec(4, 0, 1000), s(0), files.clone());
    c.set_site(A, 0);
    let first = c.poll(A, s(1)).unwrap();
    c.upload(A, first.attempt, s(2)).unwrap();
    c.site_evicted(0, &[1, 2]);
    assert_eq!(c.poll(A, s(2)).unwrap().task.index, 1, "file 1 gone: no preference, the first left");

    // Drawn among the top two, replayed from the log: the same decisions after.
    let rule = TaskRule::WorkerCentric { metric: Metric::Combined { as_printed: false }, top: 2 };
    let many: Vec<Vec<u32>> = (0..12).map(|i| vec![i % 4, 10 + i % 3]).collect();
    let mut live = board(rule);
    live.submit_with_files(spec(12, 0, 1000), s(0), many.clone());
    live.set_site(A, 0);
    live.set_site(B, 1);
    let mut log = Vec::new();
    for k in 0..6u64 {
        for w in [A, B] {
            let got = live.poll(w, s(k)).unwrap();
            log.push((w, k, got.task));
            live.upload(w, got.attempt, s(k)).unwrap();
        }
    }
    let mut again = board(rule);
    again.submit_with_files(spec(12, 0, 1000), s(0), many);
    again.set_site(A, 0);
    again.set_site(B, 1);
    for (i, (w, k, task)) in log.iter().enumerate() {
        let a = again.replay_poll(*w, s(*k), Some(*task)).unwrap();
        assert_eq!(a.attempt, AttemptId(i as u64));
        again.upload(*w, a.attempt, s(*k)).unwrap();
    }
    assert_eq!(again.site_table(0), live.site_table(0));
    for w in [A, B] {
        assert_eq!(again.poll(w, s(10)), live.poll(w, s(10)), "the next decision after a replay");
    }
}
