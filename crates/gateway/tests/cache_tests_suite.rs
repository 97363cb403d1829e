//! The public HTTP cache test suite (cache-tests.fyi, npm `http-cache-tests`), run through the
//! gateway's origin mode in process: its test origin (Node.js) behind the gateway, its client
//! in front. `.ci/install-cache-tests` fetches it; without it (or without Node.js) the test
//! says SKIPPED. `bench/cache-tests.sh` runs the same suite beside nginx and prints the lot.
//! The suite is run twice, once per `Age` reading (`--age-reading`).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchyard_core::cache::http::AgeReading;
use switchyard_gateway::origin::{self, OriginConfig};

/// Kills the suite's origin when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One run of the suite's client through a gateway reading `Age` as `reading` says: the
/// summary's row for it (counts by kind, result by test id) and its text.
async fn run_suite(suite: &Path, dir: &Path, reading: AgeReading) -> (serde_json::Value, String) {
    let port = free_port();
    let origin = Killed(
        Command::new("node")
            .arg("server/server.mjs")
            .current_dir(suite)
            .env("npm_config_protocol", "http")
            .env("npm_config_port", port.to_string())
            .env("npm_config_pidfile", dir.join(format!("origin-{}.pid", reading.name())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting the suite's origin"),
    );
    let t = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < Duration::from_secs(20), "the suite's origin did not start on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gateway = listener.local_addr().unwrap();
    let config = OriginConfig { age_reading: reading, ..OriginConfig::new(format!("http://127.0.0.1:{port}")) };
    let server = tokio::spawn(async move { axum::serve(listener, origin::router(config)).await.unwrap() });

    let results = dir.join(format!("switchyard-{}.json", reading.name()));
    let (suite2, results2) = (suite.to_path_buf(), results.clone());
    let client = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .args(["--no-warnings", "cli.mjs"])
            .current_dir(&suite2)
            .env("npm_config_base", format!("http://{gateway}"))
            .env("npm_package_config_id", "")
            .output()
            .inspect(|o| std::fs::write(&results2, &o.stdout).unwrap())
    })
    .await
    .unwrap()
    .expect("running the suite's client");
    assert!(client.status.success(), "the suite's client failed: {}", String::from_utf8_lossy(&client.stderr));
    drop(origin);
    server.abort();

    let summary = Command::new("node")
        .arg(root().join("bench/cache-tests/summarise.mjs"))
        .arg(suite)
        .arg(format!("switchyard={}", results.display()))
        .output()
        .expect("summarising");
    let text = String::from_utf8_lossy(&summary.stdout).into_owned();
    let json = text.lines().find_map(|l| l.strip_prefix("json: ")).expect("the summary's json line");
    let rows: serde_json::Value = serde_json::from_str(json).unwrap();
    // The table and the failures, without the machine-readable line: a failing run's own
    // message must not be pushed out of a CI log's excerpt by 15 kB of JSON.
    let table = text.lines().filter(|l| !l.starts_with("json: ")).collect::<Vec<_>>().join("\n");
    (rows[0].clone(), table)
}

/// The ids of the required tests, setups or harness runs that failed.
fn failing(ours: &serde_json::Value) -> Vec<&str> {
    ours["byId"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, k)| matches!(k.as_str(), Some("fail" | "setup_fail" | "harness_fail")))
        .map(|(id, _)| id.as_str())
        .collect()
}

/// The `Age` tests where the npm release 0.4.5 asks the opposite of RFC 9111 §5.1, which the
/// gateway follows by default (cache::http::age_field: the first member counts, a value that
/// is not a non-negative integer is ignored): 0.4.5 wants `Age: abc`, `-7200`, `7200.0`,
/// `0, 0`, `0` + `0`, `0` + `7200`, `3600, 3600` (under max-age=10000) and `7200;foo=…` all
/// taken as stale. The suite's own later version reverses these (its age-parse tests expect
/// the RFC's reading, or are checks), and `age-parse-prefix` (`Age: 0,7200`, fresh), the one
/// 0.4.5 shares with the RFC, passes either way.
const AGAINST_THE_RFC: [&str; 9] = [
    "age-parse-dup-0",
    "age-parse-dup-0-twoline",
    "age-parse-dup-old",
    "age-parse-float",
    "age-parse-negative",
    "age-parse-nonnumeric",
    "age-parse-numeric-parameter",
    "age-parse-parameter",
    "age-parse-prefix-twoline",
];

/// The suite through the gateway twice: reading `Age` as RFC 9111 says (the default), the only
/// required failures are the nine where 0.4.5 contradicts the RFC; with `--age-reading
/// suite-0.4.5` there are none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_cache_test_suite_passes_through_the_gateway() {
    let suite = root().join("target/peers/cache-tests/node_modules/http-cache-tests");
    let node = Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !node || !suite.join("cli.mjs").exists() {
        eprintln!(
            "SKIPPED: the cache test suite is not installed (.ci/install-cache-tests fetches it; Node.js needed)"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("switchyard-cache-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The release decides which Age tests want the RFC's reading; it is read from the
    // package's own manifest, and where that cannot be read the results decide (the nine
    // failing together, and nothing else, is 0.4.5's signature).
    let release = std::fs::read_to_string(suite.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|manifest| manifest["version"].as_str().map(str::to_owned));
    eprintln!("http-cache-tests release: {}", release.as_deref().unwrap_or("unknown (package.json unreadable)"));

    let (rfc, text) = run_suite(&suite, &dir, AgeReading::Rfc).await;
    eprintln!("--age-reading rfc\n{text}");
    let failed = failing(&rfc);
    let against_the_rfc = match release.as_deref() {
        Some("0.4.5") => true,
        Some(_) => false,
        None => failed == AGAINST_THE_RFC,
    };
    let want: &[&str] = if against_the_rfc { &AGAINST_THE_RFC } else { &[] };
    assert_eq!(failed, want, "required, setup or harness failures reading Age as the RFC says");
    assert_eq!(rfc["byId"]["age-parse-prefix"], "pass");
    // Ahead of every result the suite's release publishes (Apache httpd, 178 passes).
    let passes = |row: &serde_json::Value| row["counts"]["pass"].as_u64().unwrap();
    assert!(passes(&rfc) > 178, "{} passes", passes(&rfc));

    if against_the_rfc {
        let (suite_reading, text) = run_suite(&suite, &dir, AgeReading::Suite045).await;
        eprintln!("--age-reading suite-0.4.5\n{text}");
        assert_eq!(failing(&suite_reading), Vec::<&str>::new(), "required failures reading Age as 0.4.5 asks");
        for id in AGAINST_THE_RFC.iter().chain(&["age-parse-prefix"]) {
            assert_eq!(suite_reading["byId"][id], "pass", "{id}");
        }
        let moved: Vec<String> = rfc["byId"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(id, _)| !AGAINST_THE_RFC.contains(&id.as_str()))
            .filter(|(id, was)| suite_reading["byId"][id.as_str()] != **was)
            .map(|(id, was)| format!("{id}: {was} then {}", suite_reading["byId"][id.as_str()]))
            .collect();
        assert!(moved.is_empty(), "only the nine may change between the readings; also changed: {moved:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
