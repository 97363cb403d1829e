//! The coordinator over HTTP on loopback: bad input of every kind gets a clear error and
//! changes nothing, a result is counted once, and a coordinator reopened on its database
//! carries on where it stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use switchyard_core::place::tasks::BoardConfig;
use switchyard_jobs::programs::{Program, reference};
use switchyard_jobs::server::{Limits, serve};
use switchyard_jobs::wire::{AppView, Grant, encode_parts};
use switchyard_jobs::{Coordinator, Shared, Store, Sync};

const TOKEN: &str = "test-token";

fn db(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-jobs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("jobs.db")
}

struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

async fn start(path: &Path, limits: Limits, idle: Duration) -> Server {
    let config = BoardConfig { default_task_time: 5.0, ..BoardConfig::default() };
    let coordinator = Coordinator::open(Store::open(path, Sync::Normal).unwrap(), config, idle).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared: Arc<Shared> = Shared::new(coordinator, TOKEN.into());
    let task = tokio::spawn(async move {
        serve(listener, shared, limits, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    Server { base, stop: Some(tx), task }
}

impl Server {
    async fn stop(mut self) {
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

async fn poll(base: &str, worker: &str) -> (StatusCode, Option<Grant>) {
    let r = http()
        .post(format!("{base}/v1/poll"))
        .bearer_auth(TOKEN)
        .body(format!("{{\"worker\": \"{worker}\"}}"))
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, if status == StatusCode::OK { Some(r.json().await.unwrap()) } else { None })
}

async fn input(base: &str, worker: &str, attempt: u64) -> (StatusCode, Vec<u8>) {
    let r = http()
        .get(format!("{base}/v1/attempts/{attempt}/input?worker={worker}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    (r.status(), r.bytes().await.unwrap().to_vec())
}

async fn upload(base: &str, worker: &str, attempt: u64, body: Vec<u8>) -> (StatusCode, String) {
    let r = http()
        .post(format!("{base}/v1/attempts/{attempt}/result?worker={worker}"))
        .bearer_auth(TOKEN)
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

/// Runs one granted task as a worker would, and uploads its result.
async fn run(base: &str, worker: &str, g: &Grant) -> (StatusCode, String) {
    let (status, data) = input(base, worker, g.attempt).await;
    if status != StatusCode::OK {
        return (status, String::from_utf8_lossy(&data).into_owned());
    }
    let p = Program::parse(&g.program, &g.arg).unwrap();
    let none = switchyard_jobs::programs::NoCommands;
    let body = if g.phase == "map" {
        encode_parts(&switchyard_jobs::programs::run_map(&p, &data, g.reduces, &none).unwrap())
    } else {
        encode_parts(&[switchyard_jobs::programs::run_reduce(&p, &data, &none).unwrap()])
    };
    upload(base, worker, g.attempt, body).await
}

async fn views(base: &str) -> Vec<AppView> {
    http().get(format!("{base}/v1/apps")).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_error_and_changes_nothing() {
    let path = db("bad");
    let limits = Limits { max_input: 4096, max_result: 4096 };
    let s = start(&path, limits, Duration::from_millis(500)).await;
    let base = s.base.as_str();

    // No token, and a wrong one.
    let r = http().get(format!("{base}/v1/apps")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let r = http().get(format!("{base}/v1/apps")).bearer_auth("nope").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("Authorization: Bearer"));

    // Malformed specifications, each named.
    let cases: [(&str, &[u8], &str); 7] = [
        ("program=eval&reduces=1&deadline=10", b"x", "unknown program"),
        ("program=wordcount&deadline=10", b"x", "reduces"),
        ("program=wordcount&reduces=1&deadline=-3", b"x", "deadline"),
        ("program=wordcount&reduces=many&deadline=3", b"x", "reduces"),
        ("program=grep&arg=a&reduces=2&deadline=10", b"x", "map-only"),
        ("program=invindex&reduces=1&deadline=10", b"d1\tok\nno tab\n", "line 2"),
        ("program=kmeans&arg=0,0&reduces=1&deadline=10", b"1,2\n3\n", "line 2"),
    ];
    for (query, body, says) in cases {
        let (status, text) = submit(base, query, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {text}");
        assert!(text.contains(says), "{query}: {text:?} should say {says:?}");
    }
    // An input over the limit.
    let (status, _) = submit(base, "program=wordcount&reduces=1&deadline=10", &[b'a'; 5000]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(views(base).await.is_empty(), "nothing refused was kept");

    // A good one, two maps and one reduce.
    let text = b"b a\nc a\n";
    let (status, body) = submit(base, "program=wordcount&reduces=1&deadline=60&split=4", text).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A malformed poll, then a poll, then one too soon after an empty one.
    let r = http().post(format!("{base}/v1/poll")).bearer_auth(TOKEN).body("{").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let (_, g1) = poll(base, "w1").await;
    let g1 = g1.unwrap();
    let (_, g2) = poll(base, "w2").await;
    let g2 = g2.unwrap();
    let (status, _) = poll(base, "w3").await;
    assert_eq!(status, StatusCode::NO_CONTENT, "two maps, both out");
    let r = http().post(format!("{base}/v1/poll")).bearer_auth(TOKEN).body(r#"{"worker":"w3"}"#).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(r.headers().contains_key("retry-after"));

    // Results for a task the worker does not hold, or never handed out; a body framed wrong;
    // one too large. None of them counts.
    let (status, text) = upload(base, "w2", g1.attempt, encode_parts(&[b"a\t1\n".to_vec()])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    let (status, _) = upload(base, "w1", 99, encode_parts(&[Vec::new()])).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = upload(base, "nobody", g1.attempt, Vec::new()).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, text) = upload(base, "w1", g1.attempt, b"not framed".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    let (status, _) = upload(base, "w1", g1.attempt, vec![0; 5000]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let v = views(base).await;
    assert_eq!((v[0].maps, v[0].duplicates), ((0, 2), 0));

    // The output before it is done.
    let r = http().get(format!("{base}/v1/apps/0/output")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT);
    let r = http().get(format!("{base}/v1/apps/7/output")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);

    // The real results; the same one again is refused and not counted twice, and so is the
    // input of an attempt whose task is done.
    let (_, kept) = input(base, "w1", g1.attempt).await;
    assert_eq!(run(base, "w1", &g1).await.0, StatusCode::OK);
    let (status, text) = run(base, "w1", &g1).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    let (status, text) = upload(base, "w1", g1.attempt, encode_parts(&[kept])).await;
    assert_eq!(status, StatusCode::CONFLICT, "{text}");
    assert!(text.contains("already reported"), "{text}");
    assert_eq!(run(base, "w2", &g2).await.0, StatusCode::OK);
    let (_, g3) = poll(base, "w1").await;
    let g3 = g3.unwrap();
    assert_eq!(g3.phase, "reduce");
    assert_eq!(run(base, "w1", &g3).await.0, StatusCode::OK);
    let r = http().get(format!("{base}/v1/apps/0/output")).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.bytes().await.unwrap().to_vec(), b"a\t2\nb\t1\nc\t1\n".to_vec());
    let v = views(base).await;
    assert_eq!((v[0].maps, v[0].reduces, v[0].verdict.as_str()), ((2, 2), (1, 1), "met"));
    // The counters tell refusals from duplicates: five results refused (not held, never
    // handed out, no such worker, framed wrong, already reported), none a duplicate; the
    // oversized one was answered by the body limit before the coordinator saw it.
    let m = http().get(format!("{base}/metrics")).bearer_auth(TOKEN).send().await.unwrap().text().await.unwrap();
    let count = |name: &str| -> u64 {
        m.lines().find_map(|l| l.strip_prefix(&format!("switchyard_jobs_{name}_total "))).unwrap().parse().unwrap()
    };
    assert_eq!(count("results_accepted"), 3, "{m}");
    assert_eq!(count("results_duplicate"), 0, "{m}");
    assert_eq!(count("results_refused"), 5, "{m}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_coordinator_carries_on_and_refuses_a_stale_attempt() {
    let path = db("reopen");
    let text: Vec<u8> = (0..400).map(|i| format!("w{} x{} common\n", i % 37, i % 11)).collect::<String>().into_bytes();
    let s = start(&path, Limits::default(), Duration::from_millis(1)).await;
    let (status, body) =
        submit(&s.base, "program=wordcount&reduces=3&deadline=120&split=1000&estimate=0.2", &text).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Two maps done, one handed out and not finished, when the coordinator stops.
    for _ in 0..2 {
        let (_, g) = poll(&s.base, "a").await;
        assert_eq!(run(&s.base, "a", &g.unwrap()).await.0, StatusCode::OK);
    }
    let (_, held) = poll(&s.base, "b").await;
    let held = held.unwrap();
    let before = views(&s.base).await;
    s.stop().await;

    let s = start(&path, Limits::default(), Duration::from_millis(1)).await;
    let after = views(&s.base).await;
    assert_eq!((after[0].maps, after[0].running, after[0].attempts), (before[0].maps, 1, 3));
    // b's attempt outlived the restart; a finishes everything else meanwhile, b's held task
    // being presumed failed (0.6 s, three times the estimate) and re-issued to a.
    tokio::time::sleep(Duration::from_millis(700)).await;
    loop {
        let (status, g) = poll(&s.base, "a").await;
        match g {
            Some(g) => assert_eq!(run(&s.base, "a", &g).await.0, StatusCode::OK),
            None if status == StatusCode::NO_CONTENT => break,
            None => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
    // b comes back with its stale result: refused, not counted.
    let (status, said) = run(&s.base, "b", &held).await;
    assert_eq!(status, StatusCode::CONFLICT, "{said}");
    let v = views(&s.base).await;
    assert_eq!(v[0].verdict, "met");
    let r = http().get(format!("{}/v1/apps/0/output", s.base)).bearer_auth(TOKEN).send().await.unwrap();
    let want = reference(&Program::WordCount, &text, 1000, 3).unwrap();
    assert_eq!(r.bytes().await.unwrap().to_vec(), want);
    s.stop().await;
}
