//! Idle workers do not grow the coordinator's log: an empty poll that changes nothing but when
//! the worker was last heard from is logged at most once per `HEARTBEAT`, and a coordinator that
//! replays the log still sees every polling worker as live.

use std::time::Duration;

use switchyard_core::place::tasks::BoardConfig;
use switchyard_jobs::coordinator::{Coordinator, HEARTBEAT, LIVE};
use switchyard_jobs::store::{Store, Sync};

const SECOND: u64 = 1_000_000_000;

#[test]
fn an_idle_worker_adds_a_row_per_heartbeat_not_per_poll() {
    let dir = std::env::temp_dir().join(format!("switchyard-jobs-idle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jobs.db");
    let idle = Duration::from_millis(100);
    let mut c = Coordinator::open(Store::open(&path, Sync::Normal).unwrap(), BoardConfig::default(), idle).unwrap();
    // Two idle workers poll ten times a second for a minute: 1,200 polls.
    let minute = 60 * SECOND;
    let mut now = SECOND;
    while now < SECOND + minute {
        for w in ["w1", "w2"] {
            assert!(c.poll(w, now).unwrap().is_none());
        }
        now += idle.as_nanos() as u64;
    }
    let rows = Store::open(&path, Sync::Normal).unwrap().replay().unwrap().len();
    // Each worker: its arrival, then a poll per heartbeat (12 in a minute), and the first.
    let most = 2 * (2 + (minute / HEARTBEAT.as_nanos() as u64) as usize);
    assert!(rows <= most, "{rows} rows logged for 1,200 idle polls (at most {most} expected)");
    assert!(rows >= 2 * 12, "{rows} rows: the heartbeats are missing");
    // A coordinator that replays the log sees both workers as heard from within a heartbeat.
    let again = Coordinator::open(Store::open(&path, Sync::Normal).unwrap(), BoardConfig::default(), idle).unwrap();
    assert_eq!(again.board().workers().len(), 2);
    assert!(HEARTBEAT < LIVE);
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}
