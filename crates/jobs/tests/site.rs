//! Worker-centric locality on the coordinator (Ko et al., Middleware 2007): workers say their
//! site; a second application over the same input gives each site the maps whose splits its
//! store already holds, where the first-unassigned order would not; evictions a worker reports
//! are forgotten; and real workers with site stores read splits locally and still compute the
//! reference output.

use std::time::Duration;

use switchyard_core::place::tasks::locality::Metric;
use switchyard_core::place::tasks::{BoardConfig, TaskRule};
use switchyard_jobs::programs::{self, NoCommands, Program};
use switchyard_jobs::server::now;
use switchyard_jobs::wire::{Grant, encode_parts};
use switchyard_jobs::{Coordinator, Store, Submission, Sync};

fn db(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-site-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn coordinator(dir: &std::path::Path, rule: TaskRule) -> Coordinator {
    let store = Store::open(&dir.join("jobs.db"), Sync::Normal).unwrap();
    Coordinator::open(store, BoardConfig { rule, default_task_time: 5.0, ..BoardConfig::default() }, Duration::ZERO)
        .unwrap()
}

fn submission() -> Submission {
    Submission {
        name: "same input".into(),
        program: "grep".into(),
        arg: "a".into(),
        reduces: 0,
        deadline: 600.0,
        split: 8,
        estimate: Some(1.0),
    }
}

const INPUT: &[u8] = b"aaaaaaa\nbbbbbbb\nccccccc\nddddddd\neeeeeee\nfffffff\nggggggg\nhhhhhhh\n";

/// Runs `worker`'s granted map and uploads its result.
fn finish(c: &mut Coordinator, worker: &str, g: &Grant, t: u64) {
    let p = Program::parse(&g.program, &g.arg).unwrap();
    let parts = programs::run_map(&p, b"x\n", g.reduces, &NoCommands).unwrap();
    c.result(worker, g.attempt, &encode_parts(&parts), t).unwrap();
}

/// Two sites, one worker each. The first application's maps alternate between them; then a1
/// polls twice and b1 twice for the second. Returns how many of the second's maps went to
/// the site that held their split.
fn second_app_local(rule: TaskRule) -> usize {
    let dir = db(rule.name());
    let mut c = coordinator(&dir, rule);
    let t = now();
    let mut held: std::collections::HashMap<&str, Vec<u32>> = Default::default();
    let s = submission();
    c.submit(s.clone(), INPUT, t).unwrap();
    for k in 0..4 {
        for (w, site) in [("a1", "a"), ("b1", "b")] {
            let g = c.poll_at(w, Some(site), &[], t + k).unwrap().unwrap();
            held.entry(site).or_default().push(g.input_id.unwrap());
            finish(&mut c, w, &g, t + k);
        }
    }
    c.submit(s, INPUT, t + 10).unwrap();
    let mut local = 0;
    for round in 0..2 {
        for (w, site) in [("a1", "a"), ("b1", "b")] {
            for k in 0..2 {
                let at = t + 20 + round * 10 + k;
                let g = c.poll_at(w, Some(site), &[], at).unwrap().unwrap();
                assert_eq!(g.app, 1);
                local += usize::from(held[site].contains(&g.input_id.unwrap()));
                finish(&mut c, w, &g, at);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    local
}

#[test]
fn a_site_gets_the_maps_whose_splits_it_holds() {
    let centric = second_app_local(TaskRule::WorkerCentric { metric: Metric::Overlap, top: 1 });
    let plain = second_app_local(TaskRule::MiscoRt);
    eprintln!(
        "maps of the repeated application sent where their split was: {centric} of 8 worker-centric, {plain} of 8 first-unassigned"
    );
    assert_eq!(centric, 8, "every map of the second application went where its split was");
    assert!(plain < 8, "the first-unassigned order sends some elsewhere ({plain})");

    // Evictions a worker reports are forgotten: b1, whose site evicted everything, gets the
    // first map left, not one of the splits its site held.
    let dir = db("evicted");
    let mut c = coordinator(&dir, TaskRule::WorkerCentric { metric: Metric::Overlap, top: 1 });
    let t = now();
    let mut held_b = Vec::new();
    c.submit(submission(), INPUT, t).unwrap();
    for k in 0..4 {
        for (w, site) in [("a1", "a"), ("b1", "b")] {
            let g = c.poll_at(w, Some(site), &[], t + k).unwrap().unwrap();
            if site == "b" {
                held_b.push(g.input_id.unwrap());
            }
            finish(&mut c, w, &g, t + k);
        }
    }
    c.submit(submission(), INPUT, t + 10).unwrap();
    let g = c.poll_at("b1", Some("b"), &held_b, t + 11).unwrap().unwrap();
    assert!(!held_b.contains(&g.input_id.unwrap()), "b's evictions were applied");
    assert_eq!(g.index, 0, "nothing held at b: the first map");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_with_site_stores_read_splits_locally_and_compute_the_same() {
    use switchyard_jobs::server::{Limits, serve};
    use switchyard_jobs::{Allowed, Failures, Shared, WorkerConfig};
    let dir = db("workers");
    let c = coordinator(&dir, TaskRule::WorkerCentric { metric: Metric::Overlap, top: 1 });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shared: std::sync::Arc<Shared> = Shared::new(c, "t".into());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut stop_server = stop_rx.clone();
    let server = tokio::spawn(serve(listener, shared, Limits::default(), async move {
        let _ = stop_server.changed().await;
    }));
    let mut workers = Vec::new();
    for (name, site) in [("a1", "a"), ("a2", "a"), ("b1", "b"), ("b2", "b")] {
        let config = WorkerConfig {
            coordinator: base.clone(),
            token: "t".into(),
            name: name.into(),
            idle: Duration::from_millis(5),
            failures: Failures::Never,
            seed: 1,
            allowed: Allowed::default(),
            max_tasks: None,
            site: Some(site.into()),
            store: Some((dir.join(format!("store-{site}")), 1 << 20)),
        };
        workers.push(switchyard_jobs::worker::spawn(config, stop_rx.clone()));
    }
    let text: Vec<u8> = (0..2000).map(|i| format!("w{} z{}\n", i % 97, i % 7)).collect::<String>().into_bytes();
    let sub = switchyard_jobs::client::Submitter::new(&base, "t");
    let s = Submission { program: "wordcount".into(), arg: String::new(), reduces: 2, split: 1000, ..submission() };
    let want = programs::reference(&Program::WordCount, &text, 1000, 2).unwrap();
    for app in 0..2u32 {
        let r = sub.submit(&s, text.clone()).await.unwrap();
        assert_eq!(r.app, app);
        loop {
            let v = sub.status().await.unwrap();
            if v[app as usize].took.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(sub.output(app).await.unwrap() == want, "application {app}'s output");
    }
    let _ = stop_tx.send(true);
    let (mut local, mut fetched) = (0, 0);
    for w in workers {
        let r = w.await.unwrap().unwrap();
        local += r.local;
        fetched += r.fetched;
    }
    server.await.unwrap().unwrap();
    eprintln!("{local} maps read from their site's store, {fetched} fetched");
    // The first application fetched every split once per site at most; the second found most
    // of them at home.
    assert!(local > 0, "the second application read splits from the stores");
    let _ = std::fs::remove_dir_all(&dir);
}
