//! Work that cannot succeed must not run away (issue 35): a program no worker can run is
//! handed to nobody, and waits with the reason shown; one that only some workers can run goes
//! to those only; a task that keeps failing the same way fails its application with the
//! reason; a submitter can cancel an application; and a task estimate has a bound.
//!
//! Real workers (`worker::spawn`) poll a coordinator on loopback, as `jobs worker` does.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;
use switchyard_core::place::tasks::BoardConfig;
use switchyard_jobs::server::{Limits, serve};
use switchyard_jobs::{Allowed, Coordinator, Failures, Shared, Store, Sync, WorkerConfig};

const TOKEN: &str = "runaway-token";

fn db(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-runaway-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("jobs.db")
}

struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    workers: Vec<tokio::task::JoinHandle<Result<switchyard_jobs::WorkerReport, switchyard_jobs::worker::WorkerError>>>,
    quit: tokio::sync::watch::Sender<bool>,
}

async fn start(name: &str) -> Server {
    let config = BoardConfig { default_task_time: 5.0, ..BoardConfig::default() };
    let coordinator = Coordinator::open(Store::open(&db(name), Sync::Normal).unwrap(), config, Duration::ZERO).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared: Arc<Shared> = Shared::new(coordinator, TOKEN.into());
    let task = tokio::spawn(async move {
        serve(listener, shared, Limits::default(), async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    let (quit, _) = tokio::sync::watch::channel(false);
    Server { base, stop: Some(tx), task, workers: Vec::new(), quit }
}

impl Server {
    /// A real worker, allow-listing `allow` (NAME, COMMAND) as maps.
    fn worker(&mut self, name: &str, allow: &[(&str, &str)]) {
        let allowed = Allowed {
            map: allow.iter().map(|(n, c)| (n.to_string(), c.to_string())).collect::<HashMap<_, _>>(),
            reduce: HashMap::new(),
        };
        let config = WorkerConfig {
            coordinator: self.base.clone(),
            token: TOKEN.into(),
            name: name.into(),
            idle: Duration::from_millis(5),
            failures: Failures::Never,
            seed: 1,
            allowed,
            max_tasks: None,
            site: None,
            store: None,
        };
        self.workers.push(switchyard_jobs::worker::spawn(config, self.quit.subscribe()));
    }

    async fn stop(mut self) {
        let _ = self.quit.send(true);
        for w in self.workers.drain(..) {
            w.await.unwrap().unwrap();
        }
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap();
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

async fn submit(base: &str, query: &str, body: &[u8]) -> (StatusCode, String) {
    let r = http().post(format!("{base}/v1/apps?{query}")).bearer_auth(TOKEN).body(body.to_vec()).send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

async fn app(base: &str, id: u32) -> Value {
    http().get(format!("{base}/v1/apps/{id}")).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap()
}

/// Waits for application `id`'s view to satisfy `f` (a limit that only catches a hang).
async fn wait_for(base: &str, id: u32, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let t = Instant::now();
    loop {
        let v = app(base, id).await;
        if f(&v) {
            return v;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "waited a minute for {what}: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Twelve lines of eight bytes: six maps of 16 bytes.
const TEXT: &[u8] =
    b"alpha 1\nbravo 2\ncharl 3\ndelta 4\necho  5\nfoxtr 6\ngolf  7\nhotel 8\nindia 9\njulie 0\nkilo  1\nlima  2\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_no_worker_can_run_is_handed_to_nobody_and_waits_with_the_reason() {
    let mut s = start("nobody").await;
    for name in ["w1", "w2", "w3"] {
        s.worker(name, &[("lower", "tr A-Z a-z")]);
    }
    let (status, body) = submit(&s.base, "program=exec:upper&reduces=0&deadline=600&split=16", TEXT).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The workers poll every 5 ms; before the fix, each took the map, failed it ("not
    // allow-listed") and it was offered again at once, thousands of times a minute.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let v = app(&s.base, 0).await;
    assert_eq!(v["attempts"], 0, "a task was handed to a worker that cannot run it: {v}");
    assert_eq!(v["verdict"], "running", "{v}");
    let why = v["why"].as_str().unwrap_or_default();
    assert!(why.contains("no live worker can run exec:upper"), "the reason is shown: {v}");
    // A worker that allow-lists it polls: the application goes ahead.
    s.worker("w4", &[("upper", "tr a-z A-Z")]);
    let v = wait_for(&s.base, 0, "the application to finish", |v| v["verdict"] != "running").await;
    assert_eq!((&v["verdict"], &v["attempts"], &v["repeats"]), (&Value::from("met"), &Value::from(6), &Value::from(0)));
    let out = http().get(format!("{}/v1/apps/0/output", s.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(out.text().await.unwrap().as_bytes(), TEXT.to_ascii_uppercase());
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_one_worker_of_three_can_run_goes_to_that_worker_only() {
    let mut s = start("one-of-three").await;
    s.worker("w1", &[]);
    s.worker("w2", &[("upper", "tr a-z A-Z")]);
    s.worker("w3", &[("lower", "tr A-Z a-z")]);
    let (status, body) = submit(&s.base, "program=exec:upper&reduces=0&deadline=600&split=16", TEXT).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v = wait_for(&s.base, 0, "the application to finish", |v| v["verdict"] != "running").await;
    // Before the fix, 41 of 48 attempts were repeats of tasks the other two had failed.
    assert_eq!(
        (&v["verdict"], &v["attempts"], &v["repeats"]),
        (&Value::from("met"), &Value::from(6), &Value::from(0)),
        "{v}"
    );
    let workers: Value =
        http().get(format!("{}/v1/workers", s.base)).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
    assert_eq!(workers.as_array().unwrap().len(), 3, "{workers}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_failing_the_same_way_fails_its_application_with_the_reason() {
    let mut s = start("fails").await;
    // It allow-lists the program, but the command always fails the same way.
    s.worker("w1", &[("upper", "echo 'no such table' >&2; exit 3")]);
    let (status, body) = submit(&s.base, "program=exec:upper&reduces=0&deadline=600&split=16", TEXT).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v = wait_for(&s.base, 0, "the application to be given up", |v| v["verdict"] != "running").await;
    assert_eq!(v["verdict"], "failed", "{v}");
    let why = v["why"].as_str().unwrap_or_default();
    assert!(why.contains("map 0 failed 4 times in a row") && why.contains("no such table"), "{v}");
    // Given up at the bound: each of the six maps fails at most four times (the first to
    // reach four ends it), and nothing more is handed out.
    let attempts = v["attempts"].as_u64().unwrap();
    assert!((4..=6 * 4).contains(&attempts), "{v}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(app(&s.base, 0).await["attempts"], attempts);
    let r = http().get(format!("{}/v1/apps/0/output", s.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("failed"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_application_hands_out_nothing_more() {
    let mut s = start("cancel").await;
    // Maps that take 5 s each: the first is out when the application is cancelled.
    let (status, body) = submit(&s.base, "program=sleep&arg=5,0&reduces=1&deadline=600&split=16", TEXT).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    s.worker("w1", &[]);
    wait_for(&s.base, 0, "a map to be out", |v| v["running"] == 1).await;
    let r = http().post(format!("{}/v1/apps/0/cancel", s.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK, "{}", r.text().await.unwrap());
    let v = app(&s.base, 0).await;
    assert_eq!((&v["verdict"], &v["running"]), (&Value::from("cancelled"), &Value::from(0)), "{v}");
    // Cancelled again, or an application that does not exist: said so.
    let r = http().post(format!("{}/v1/apps/0/cancel", s.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("already cancelled"));
    let r = http().post(format!("{}/v1/apps/9/cancel", s.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = http().get(format!("{}/v1/apps/0/output", s.base)).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(r.text().await.unwrap().contains("cancelled"));
    // The worker's poll after its attempt was dropped gets nothing.
    let r =
        http().post(format!("{}/v1/poll", s.base)).bearer_auth(TOKEN).body(r#"{"worker": "w9"}"#).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_estimate_has_an_upper_bound() {
    let s = start("estimate").await;
    // A worker that dies holding a map is presumed failed after 3 × the estimate: with 1e9 s,
    // never in practice.
    let (status, text) = submit(&s.base, "program=wordcount&reduces=1&deadline=600&estimate=1e9", b"a b\n").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("task estimate 1000000000 s") && text.contains("--max-estimate"), "{text}");
    let (status, text) = submit(&s.base, "program=wordcount&reduces=1&deadline=600&estimate=3600", b"a b\n").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    s.stop().await;
}

/// What the workers said they run, the failures that gave an application up and a cancel are
/// in the log: a coordinator reopened on the database says and does the same.
#[test]
fn a_reopened_coordinator_keeps_what_workers_run_the_failures_and_the_cancels() {
    use switchyard_jobs::Submission;
    use switchyard_jobs::wire::Poll;
    let path = db("reopen");
    let open = || {
        let config = BoardConfig { default_task_time: 5.0, ..BoardConfig::default() };
        Coordinator::open(Store::open(&path, Sync::Normal).unwrap(), config, Duration::ZERO).unwrap()
    };
    let sub = |program: &str| Submission {
        name: program.into(),
        program: program.into(),
        arg: String::new(),
        reduces: 0,
        deadline: 600.0,
        split: 1 << 20,
        estimate: None,
    };
    let poll = |worker: &str, programs: &[&str]| Poll {
        worker: worker.into(),
        site: None,
        evicted: Vec::new(),
        programs: Some(programs.iter().map(|p| p.to_string()).collect()),
    };
    let mut c = open();
    let t = switchyard_jobs::server::now();
    c.submit(sub("exec:upper"), b"a\n", t).unwrap();
    c.submit(sub("exec:lower"), b"a\n", t).unwrap();
    c.submit(sub("exec:upper"), b"a\n", t).unwrap();
    assert_eq!(c.poll_from(&poll("plain", &["wordcount"]), t).unwrap(), None, "it runs neither");
    for k in 0..4 {
        let g = c.poll_from(&poll("up", &["exec:upper"]), t + k).unwrap().unwrap();
        assert_eq!(g.app, 0);
        c.failed("up", g.attempt, "command \"upper\": exit status: 3", t + k).unwrap();
    }
    c.cancel(2, t + 5).unwrap();
    let before = c.views(t + 6);
    assert_eq!(
        before.iter().map(|v| v.verdict.as_str()).collect::<Vec<_>>(),
        ["failed", "running", "cancelled"],
        "{before:?}"
    );
    assert!(before[0].why.as_deref().unwrap().contains("failed 4 times in a row, each time: command"));
    drop(c);

    // Reopened with a bound of 10: the application stays given up, as the log says.
    let config = BoardConfig { default_task_time: 5.0, give_up_after: Some(10), ..BoardConfig::default() };
    let mut c = Coordinator::open(Store::open(&path, Sync::Normal).unwrap(), config, Duration::ZERO).unwrap();
    assert_eq!(c.views(t + 6), before);
    // The worker that runs only wordcount is still known to: nothing for it (a poll without a
    // list says the built-in programs).
    assert_eq!(c.poll("plain", t + 7).unwrap(), None);
    let g = c.poll_from(&poll("low", &["exec:lower"]), t + 7).unwrap().unwrap();
    assert_eq!(g.app, 1);
}
