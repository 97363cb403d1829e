//! Who gets what, and how an application ends without finishing: a worker is offered only
//! the applications it can run; a task that keeps failing the same way gives its application
//! up; a cancelled application hands nothing out and counts nothing more (issue 35).

use proptest::prelude::*;

use super::*;
use crate::{Nanos, WorkerId};

const A: WorkerId = WorkerId(0);
const B: WorkerId = WorkerId(1);
const C: WorkerId = WorkerId(2);

fn s(secs: u64) -> Nanos {
    Nanos(secs * 1_000_000_000)
}

fn spec(maps: u32, reduces: u32, deadline: u64) -> AppSpec {
    AppSpec { maps, reduces, deadline: s(deadline), task_estimate: Some(10.0) }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|n| n.to_string()).collect()
}

#[test]
fn a_worker_is_offered_only_the_applications_it_can_run() {
    for fall_through in [true, false] {
        let mut b = Board::new(BoardConfig {
            order: crate::order::apps::AppOrder::Fifo,
            fall_through,
            ..BoardConfig::default()
        });
        let upper = b.submit(spec(3, 0, 1000), s(0));
        b.require(upper, "exec:upper");
        let count = b.submit(spec(1, 0, 1000), s(0));
        b.require(count, "wordcount");
        b.set_programs(A, names(&["wordcount", "grep"]));
        b.set_programs(B, names(&["wordcount", "exec:upper"]));
        // A cannot run the first application: it gets the second, even as Algorithm 1 is
        // written (the first application it *can* run).
        let got = b.poll(A, s(1)).expect("A runs wordcount");
        assert_eq!(got.task.app, count, "fall_through {fall_through}");
        b.upload(A, got.attempt, s(2)).unwrap();
        assert_eq!(b.poll(A, s(2)), None, "nothing else A can run");
        assert_eq!(b.poll(B, s(2)).unwrap().task.app, upper);
        // A worker that never said what it runs is offered anything.
        assert_eq!(b.poll(C, s(2)).unwrap().task.app, upper);
        let st = b.app_status(upper, s(2));
        assert_eq!((st.attempts, st.repeats), (2, 0));
        // Live and able: B holds a running attempt, C was heard from; A cannot run it.
        assert_eq!(b.able_workers(upper, s(3), s(5)), 2);
        assert_eq!(b.able_workers(count, s(3), s(5)), 3);
        assert_eq!(b.able_workers(count, s(9), s(5)), 2, "A fell silent; B and C are busy");
        assert!(b.can_run(A, count) && !b.can_run(A, upper));
    }
    // Nobody live can run it: the application waits, and says so.
    let mut b = Board::new(BoardConfig::default());
    let upper = b.submit(spec(1, 0, 1000), s(0));
    b.require(upper, "exec:upper");
    b.set_programs(A, names(&["wordcount"]));
    assert_eq!(b.poll(A, s(1)), None);
    assert_eq!(b.able_workers(upper, s(1), s(30)), 0);
    b.set_programs(B, names(&["exec:upper"]));
    let got = b.poll(B, s(2)).unwrap();
    b.upload(B, got.attempt, s(3)).unwrap();
    assert_eq!(b.able_workers(upper, s(20), s(30)), 1);
    assert_eq!(b.able_workers(upper, s(100), s(30)), 0, "B fell silent");
}

#[test]
fn a_task_failing_the_same_way_gives_its_application_up() {
    let mut b = Board::new(BoardConfig { give_up_after: Some(3), ..BoardConfig::default() });
    let app = b.submit(spec(2, 1, 1000), s(0));
    let other = b.submit(spec(1, 0, 1000), s(0));
    // Different reasons start the count again: a passing fault does not end anything.
    for (k, why) in [1, 2, 1, 2].into_iter().enumerate() {
        let a = b.poll(A, s(k as u64)).unwrap();
        assert_eq!(a.task.app, app);
        assert_eq!(b.failed(A, a.attempt, s(k as u64), why), Ok(None));
    }
    // The same reason three times in a row: given up, with the task and the count.
    let mut ended = None;
    for k in 4..7 {
        let a = b.poll(A, s(k)).unwrap();
        ended = b.failed(A, a.attempt, s(k), 9).unwrap();
    }
    let task = TaskRef { app, phase: Phase::Map, index: 0 };
    assert_eq!(ended, Some(End::GaveUp { task, failures: 3 }));
    let st = b.app_status(app, s(7));
    assert_eq!(st.ended, Some((s(6), End::GaveUp { task, failures: 3 })));
    assert_eq!((st.met(s(7)), st.laxity, st.running), (Some(false), None, 0));
    // Nothing of it is offered again; the other application goes on.
    let next = b.poll(A, s(7)).unwrap();
    assert_eq!(next.task.app, other);
    assert_eq!(b.app_status(app, s(8)).attempts, 7);
    assert!(!b.all_over());
    b.upload(A, next.attempt, s(8)).unwrap();
    assert!(b.all_over() && !b.all_done());

    // Without a bound a task is re-offered for ever, as before.
    let mut b = Board::new(BoardConfig { give_up_after: None, ..BoardConfig::default() });
    b.submit(spec(1, 0, 1000), s(0));
    for k in 0..50 {
        let a = b.poll(A, s(k)).expect("re-offered");
        assert_eq!(b.failed(A, a.attempt, s(k), 9), Ok(None));
    }
}

#[test]
fn a_cancelled_application_hands_out_nothing_and_counts_nothing() {
    let mut b = Board::new(BoardConfig::default());
    let app = b.submit(spec(2, 1, 1000), s(0));
    let a = b.poll(A, s(0)).unwrap();
    let done = b.poll(B, s(0)).unwrap();
    b.upload(B, done.attempt, s(1)).unwrap();
    assert_eq!(b.cancel(app, s(2)), Ok(()));
    assert_eq!(b.cancel(app, s(3)), Err(NotCancelled::Over(app, End::Cancelled)));
    assert_eq!(b.cancel(AppId(7), s(3)), Err(NotCancelled::Unknown(AppId(7))));
    assert_eq!(b.poll(B, s(3)), None);
    // A's attempt is dropped: its result and its failure are refused, and it was no failure
    // of A's (A's next poll does not count it as lost).
    assert_eq!(b.upload(A, a.attempt, s(4)), Err(Refusal::Over { attempt: a.attempt, app }));
    assert_eq!(b.failed(A, a.attempt, s(4), 1), Err(Refusal::Over { attempt: a.attempt, app }));
    let rate = b.worker_estimate(A).unwrap().0;
    b.poll(A, s(5));
    assert_eq!(b.worker_estimate(A).unwrap().0, rate);
    let st = b.app_status(app, s(5));
    assert_eq!((st.maps, st.running, st.ended), ((1, 2), 0, Some((s(2), End::Cancelled))));
    assert!(b.all_over());
    // A finished application cannot be cancelled.
    let mut b = Board::new(BoardConfig::default());
    let app = b.submit(spec(1, 0, 1000), s(0));
    let a = b.poll(A, s(0)).unwrap();
    b.upload(A, a.attempt, s(1)).unwrap();
    assert_eq!(b.cancel(app, s(2)), Err(NotCancelled::Done(app)));
}

#[test]
fn a_replayed_failure_gives_up_exactly_when_the_log_says() {
    // Logged with a bound of 2; replayed on a board whose bound is 5: still given up at the
    // second failure, and not at the first.
    let mut live = Board::new(BoardConfig { give_up_after: Some(2), ..BoardConfig::default() });
    let mut again = Board::new(BoardConfig { give_up_after: Some(5), ..BoardConfig::default() });
    for b in [&mut live, &mut again] {
        b.submit(spec(1, 0, 1000), s(0));
        b.require(AppId(0), "exec:upper");
    }
    for k in 0..2 {
        let a = live.poll(A, s(k)).unwrap();
        let end = live.failed(A, a.attempt, s(k), 4).unwrap();
        let b = again.replay_poll(A, s(k), Some(a.task)).unwrap();
        assert_eq!(again.replay_failed(A, b.attempt, s(k), 4, end.is_some()).unwrap(), end);
    }
    assert_eq!(again.status(s(3)), live.status(s(3)));
    assert!(again.all_over());
}

/// What a simulated worker does with what it holds.
#[derive(Clone, Copy, Debug)]
enum Act {
    Finish,
    /// Says it failed, with this reason.
    Fail(u64),
    Vanish,
    Wait,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::Finish),
        2 => (1u64..3).prop_map(Act::Fail),
        1 => Just(Act::Vanish),
        1 => Just(Act::Wait),
    ]
}

const PROGRAMS: [&str; 3] = ["p0", "p1", "p2"];

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Workers that can run some of the programs poll, finish, fail with one of two reasons,
    /// vanish and wait at random; then worker 0, which runs everything, is left alone. No
    /// worker ever gets a task it cannot run; every application ends, done or given up; a
    /// done one had each task counted exactly once; one given up had a task fail the bound's
    /// number of times in a row; and a task fails at most that often in a row.
    #[test]
    fn only_runnable_tasks_are_handed_out_and_every_application_ends(
        bound in 1u32..5,
        apps in proptest::collection::vec((1u32..5, 0u32..3, 0usize..3), 1..4),
        can in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 3), 3),
        plan in proptest::collection::vec((0u32..4, act(), 0u64..4), 0..200),
    ) {
        let mut b = Board::new(BoardConfig { give_up_after: Some(bound), ..BoardConfig::default() });
        for (maps, reduces, program) in &apps {
            let id = b.submit(spec(*maps, *reduces, 500), s(0));
            b.require(id, PROGRAMS[*program]);
        }
        let mut runs = vec![vec![true; 3]];
        runs.extend(can);
        for (w, r) in runs.iter().enumerate() {
            let list = PROGRAMS.iter().zip(r).filter(|(_, ok)| **ok).map(|(p, _)| p.to_string());
            b.set_programs(WorkerId(w as u32), list);
        }
        let mut holding: [Option<Assignment>; 4] = [None; 4];
        let mut accepted = vec![0u32; apps.len()];
        let mut now = s(0);
        let mut step = |b: &mut Board, w: u32, act: Act, now: Nanos, holding: &mut [Option<Assignment>; 4]| -> Result<(), TestCaseError> {
            let worker = WorkerId(w);
            match (holding[w as usize], act) {
                (None, Act::Wait) => {}
                (None, _) => {
                    if let Some(a) = b.poll(worker, now) {
                        let program = apps[a.task.app.0 as usize].2;
                        prop_assert!(runs[w as usize][program], "worker {} got {:?}, which it cannot run", w, a.task);
                        prop_assert!(b.app_status(a.task.app, now).ended.is_none(), "a task of an application that ended");
                        holding[w as usize] = Some(a);
                    }
                }
                (Some(a), Act::Finish) => {
                    match b.upload(worker, a.attempt, now) {
                        Ok(Upload::Accepted { .. }) => accepted[a.task.app.0 as usize] += 1,
                        Ok(Upload::Duplicate) | Err(Refusal::Over { .. }) => {}
                        Err(e) => prop_assert!(false, "a held attempt was refused: {e}"),
                    }
                    holding[w as usize] = None;
                }
                (Some(a), Act::Fail(why)) => {
                    if let Ok(Some(End::GaveUp { failures, .. })) = b.failed(worker, a.attempt, now, why) {
                        prop_assert_eq!(failures, bound);
                    }
                    holding[w as usize] = None;
                }
                (Some(_), Act::Vanish) => holding[w as usize] = None,
                (Some(_), Act::Wait) => {}
            }
            Ok(())
        };
        for (w, a, dt) in plan {
            now = Nanos(now.0 + s(dt).0);
            step(&mut b, w, a, now, &mut holding)?;
        }
        let total: u64 = apps.iter().map(|(m, r, _)| u64::from(m + r)).sum();
        for _ in 0..(total * 200 + 2000) {
            if b.all_over() {
                break;
            }
            now = Nanos(now.0 + s(1).0);
            step(&mut b, 0, Act::Finish, now, &mut holding)?;
        }
        prop_assert!(b.all_over(), "not over: {:?}", b.status(now));
        for (st, (maps, reduces, _)) in b.status(now).iter().zip(&apps) {
            match st.ended {
                None => prop_assert_eq!(accepted[st.app.0 as usize], maps + reduces, "{:?}", st),
                Some((_, End::GaveUp { failures, .. })) => prop_assert_eq!(failures, bound),
                Some((_, End::Cancelled)) => prop_assert!(false, "nobody cancelled {:?}", st),
            }
            prop_assert_eq!(st.running, 0);
        }
    }
}
