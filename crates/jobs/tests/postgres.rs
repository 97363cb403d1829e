//! The coordinator's state in PostgreSQL (Debian's server, started by this test in a folder of
//! its own; skipped with a message where it cannot start): two coordinators share one
//! database, workers go to either for every request, and no attempt is handed out twice; the
//! output equals the one-process reference; a third coordinator opened later sees the same.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard_core::place::tasks::BoardConfig;
use switchyard_jobs::programs::{self, NoCommands, Program};
use switchyard_jobs::server::{Limits, now, serve};
use switchyard_jobs::store::Location;
use switchyard_jobs::wire::{AppView, Grant, encode_parts};
use switchyard_jobs::{Coordinator, Shared, Store, Sync};

const TOKEN: &str = "pg-token";

struct Postgres {
    server: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.server.id().to_string()).status();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Debian's PostgreSQL binaries, newest first.
fn pg_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin")).collect();
    dirs.sort();
    dirs.into_iter().rev().find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
}

/// Runs `program` as the postgres user when we are root (PostgreSQL refuses to run as root).
fn as_owner(program: PathBuf, root: bool) -> Command {
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn start(name: &str) -> Result<Postgres, String> {
    let bin = pg_bin().ok_or("no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")?;
    let root = nix_is_root();
    let dir = std::env::temp_dir().join(format!("switchyard-pg-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    if root {
        let ok = Command::new("chown")
            .args(["postgres:", &dir.display().to_string()])
            .status()
            .map_err(|e| e.to_string())?;
        if !ok.success() {
            return Err("cannot give the data folder to the postgres user".into());
        }
    }
    let data = dir.join("data");
    let out = as_owner(bin.join("initdb"), root)
        .args(["-A", "trust", "-U", "postgres", "-D"])
        .arg(&data)
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!("initdb: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let server = as_owner(bin.join("postgres"), root)
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-k"])
        .arg(&dir)
        .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("postgres: {e}"))?;
    let pg = Postgres { server, dir, url: format!("postgres://postgres@127.0.0.1:{port}/postgres") };
    let t = Instant::now();
    while postgres::Client::connect(&pg.url, postgres::NoTls).is_err() {
        if t.elapsed() > Duration::from_secs(30) {
            return Err("the server did not accept connections within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(pg)
}

fn nix_is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn coordinator(url: &str) -> Coordinator {
    let config = BoardConfig { default_task_time: 5.0, ..BoardConfig::default() };
    let store = Store::connect(&Location::Postgres(url.into()), Sync::Normal).unwrap();
    Coordinator::open(store, config, Duration::from_millis(1)).unwrap()
}

async fn serve_on(c: Coordinator) -> (String, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let shared: Arc<Shared> = Shared::new(c, TOKEN.into());
    let task = tokio::spawn(async move {
        serve(listener, shared, Limits::default(), async {
            let _ = rx.await;
        })
        .await
        .unwrap();
    });
    (base, tx, task)
}

/// A worker that sends each request to one of the coordinators in turn.
async fn worker(bases: Vec<String>, name: String) -> Vec<u64> {
    let http = reqwest::Client::new();
    let mut got = Vec::new();
    let mut turn = name.len();
    let mut idle = 0;
    loop {
        turn += 1;
        let base = &bases[turn % bases.len()];
        let r = http
            .post(format!("{base}/v1/poll"))
            .bearer_auth(TOKEN)
            .body(format!("{{\"worker\":\"{name}\"}}"))
            .send()
            .await
            .unwrap();
        if r.status() != reqwest::StatusCode::OK {
            idle += 1;
            if idle > 40 {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        idle = 0;
        let g: Grant = r.json().await.unwrap();
        got.push(g.attempt);
        turn += 1;
        let base = &bases[turn % bases.len()];
        let data = http
            .get(format!("{base}/v1/attempts/{}/input?worker={name}", g.attempt))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert!(data.status().is_success(), "input of {} at {base}: {}", g.attempt, data.status());
        let data = data.bytes().await.unwrap();
        let p = Program::parse(&g.program, &g.arg).unwrap();
        let body = if g.phase == "map" {
            encode_parts(&programs::run_map(&p, &data, g.reduces, &NoCommands).unwrap())
        } else {
            encode_parts(&[programs::run_reduce(&p, &data, &NoCommands).unwrap()])
        };
        turn += 1;
        let base = &bases[turn % bases.len()];
        let r = http
            .post(format!("{base}/v1/attempts/{}/result?worker={name}", g.attempt))
            .bearer_auth(TOKEN)
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "result of {} at {base}: {}", g.attempt, r.text().await.unwrap());
    }
}

#[test]
fn two_coordinators_share_one_postgres_database_and_never_hand_out_an_attempt_twice() {
    let pg = match start("two") {
        Ok(pg) => pg,
        Err(why) => {
            eprintln!("SKIPPED: PostgreSQL could not start here: {why}");
            return;
        }
    };
    let text: Vec<u8> = (0..3000).map(|i| format!("w{} x{} pg\n", i % 101, i % 13)).collect::<String>().into_bytes();
    // Coordinators are opened off the runtime: PostgreSQL's blocking client runs its own.
    let (a, b) = (coordinator(&pg.url), coordinator(&pg.url));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (views, grants) = rt.block_on(async {
        let (base_a, stop_a, task_a) = serve_on(a).await;
        let (base_b, stop_b, task_b) = serve_on(b).await;
        let r = reqwest::Client::new()
            .post(format!("{base_a}/v1/apps?program=wordcount&reduces=3&deadline=300&split=500"))
            .bearer_auth(TOKEN)
            .body(text.clone())
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        let bases = vec![base_a.clone(), base_b.clone()];
        let workers: Vec<_> = (0..4).map(|i| tokio::spawn(worker(bases.clone(), format!("w{i}")))).collect();
        let mut grants: HashMap<u64, usize> = HashMap::new();
        for (i, w) in workers.into_iter().enumerate() {
            for attempt in w.await.unwrap() {
                if let Some(other) = grants.insert(attempt, i) {
                    panic!("attempt {attempt} handed to w{other} and w{i}");
                }
            }
        }
        let http = reqwest::Client::new();
        let mut views = Vec::new();
        for base in [&base_a, &base_b] {
            let v: Vec<AppView> =
                http.get(format!("{base}/v1/apps")).bearer_auth(TOKEN).send().await.unwrap().json().await.unwrap();
            let out = http.get(format!("{base}/v1/apps/0/output")).bearer_auth(TOKEN).send().await.unwrap();
            views.push((v, out.bytes().await.unwrap().to_vec()));
        }
        let _ = stop_a.send(());
        let _ = stop_b.send(());
        task_a.await.unwrap();
        task_b.await.unwrap();
        (views, grants)
    });
    let want = programs::reference(&Program::WordCount, &text, 500, 3).unwrap();
    for (v, out) in &views {
        assert_eq!(v[0].verdict, "met", "{v:?}");
        assert!(out == &want, "an output differs from the reference");
    }
    assert_eq!(views[0].0[0].maps, views[1].0[0].maps);
    assert_eq!(views[0].0[0].attempts as usize, grants.len(), "every attempt logged was handed to one worker");
    // A coordinator opened afterwards rebuilds the same state from the database.
    let c = coordinator(&pg.url);
    let later = c.views(now());
    assert_eq!(
        (later[0].maps, later[0].reduces, later[0].attempts),
        (views[0].0[0].maps, views[0].0[0].reduces, views[0].0[0].attempts)
    );
    // Its last handle dropped on a runtime's thread, as a connection task can drop the router
    // after `serve` returned: the client closes on a thread of its own instead of aborting.
    rt.block_on(async move { tokio::spawn(async move { drop(c) }).await.unwrap() });
    eprintln!("{} attempts from two coordinators on {}", grants.len(), pg.url);
}

/// What each worker runs, a failure that gave an application up and a cancel are entries of the
/// shared log: the other coordinator, and one opened afresh, know them.
#[test]
fn give_ups_cancels_and_what_workers_run_are_shared_through_postgres() {
    use switchyard_jobs::Submission;
    use switchyard_jobs::wire::Poll;
    let pg = match start("ends") {
        Ok(pg) => pg,
        Err(why) => {
            eprintln!("SKIPPED: PostgreSQL could not start here: {why}");
            return;
        }
    };
    let (mut a, mut b) = (coordinator(&pg.url), coordinator(&pg.url));
    let sub = |program: &str| Submission {
        name: program.into(),
        program: program.into(),
        arg: String::new(),
        reduces: 0,
        deadline: 600.0,
        split: 1 << 20,
        estimate: None,
    };
    let t = now();
    a.submit(sub("exec:upper"), b"a\n", t).unwrap();
    a.submit(sub("exec:lower"), b"a\n", t).unwrap();
    let up = Poll { worker: "up".into(), site: None, evicted: Vec::new(), programs: Some(vec!["exec:upper".into()]) };
    for k in 0..4 {
        // Handed out by one coordinator, reported failed to the other.
        let g = b.poll_from(&up, t + k).unwrap().unwrap();
        assert_eq!(g.app, 0);
        a.failed("up", g.attempt, "command \"upper\": exit status: 3", t + k).unwrap();
    }
    b.cancel(1, t + 5).unwrap();
    a.refresh().unwrap();
    b.refresh().unwrap();
    let seen = a.views(t + 6);
    assert_eq!(seen.iter().map(|v| v.verdict.as_str()).collect::<Vec<_>>(), ["failed", "cancelled"], "{seen:?}");
    assert_eq!(b.views(t + 6), seen);
    assert_eq!(b.poll_from(&up, t + 7).unwrap(), None, "nothing of either is handed out");
    let c = coordinator(&pg.url);
    assert_eq!(c.views(t + 6), seen);
    // The blocking client is closed off any runtime, as the other test does.
    drop((a, b, c));
}
