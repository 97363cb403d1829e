//! `switchyard gateway serve --config FILE`: the file serves as its flags do, `--check-config`
//! names every error, and SIGHUP reloads the file whole or not at all, under load dropping
//! no request. Debian's curl is the client; without it the tests that need it say so and pass
//! nothing.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{Gateway, curl, have};

fn scratch(test: &str) -> std::path::PathBuf {
    common::scratch("config", test)
}

/// An origin answering every GET with `name` and `pad` bytes after it, stored for an hour;
/// `/fresh/...` is never stored.
fn origin(name: &'static str, pad: usize) -> String {
    let port = common::origin(move |head, out| {
        let cc = if head.starts_with("GET /fresh/") { "no-store" } else { "max-age=3600" };
        let body = format!("{name}{}", "x".repeat(pad));
        let answer = format!("HTTP/1.1 200 OK\r\nCache-Control: {cc}\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        out.write_all(answer.as_bytes()).is_ok()
    });
    format!("http://127.0.0.1:{port}")
}

/// `switchyard gateway serve ARGS --listen 127.0.0.1:0`, run in the temporary directory.
fn start(args: &[&str]) -> Gateway {
    start_in(&std::env::temp_dir(), args)
}

/// As [`start`], run in `dir`.
fn start_in(dir: &Path, args: &[&str]) -> Gateway {
    let mut command = common::switchyard(&[&["gateway", "serve"], args].concat());
    command.current_dir(dir);
    Gateway::spawn(command)
}

/// Body and X-Cache of a GET.
fn get(gateway: &Gateway, path: &str) -> String {
    let o = curl(&["--dump-header", "/dev/stderr", &gateway.url(path)]);
    let head = String::from_utf8_lossy(&o.stderr).to_ascii_lowercase();
    let cache = head.lines().find_map(|l| l.strip_prefix("x-cache: ")).unwrap_or("none").trim().to_string();
    format!("{} {cache}", String::from_utf8_lossy(&o.stdout))
}

fn check(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["gateway", "serve", "--check-config"])
        .args(args)
        .output()
        .expect("the binary runs")
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn the_sample_file_loads_and_check_config_names_every_error() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/gateway.toml");
    let ok = check(&["--config", sample]);
    let out = String::from_utf8_lossy(&ok.stdout);
    assert!(ok.status.success(), "{out}{}", String::from_utf8_lossy(&ok.stderr));
    assert!(out.contains(": ok: http://127.0.0.1:7000: an HTTP cache in front of 2 origins (route optwait)"), "{out}");

    let dir = scratch("check");
    let bad = dir.join("gateway.toml");
    write(
        &bad,
        "origin = \"http://127.0.0.1:9\"\nmax-memory = \"256 MB\"\n\nlisten = \"nowhere\"\nmax_object_size = \"1M\"\ntls-cert = \"/nonexistent.pem\"\ntls-key = \"/nonexistent.key\"\n",
    );
    let out = check(&["--config", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let b = bad.display();
    for line in [
        format!("switchyard: {b}:2:1: max-memory: \"256 MB\" is not a size; write 256MiB or 268435456"),
        format!("switchyard: {b}:4:1: listen: \"nowhere\" is not an address and port"),
        format!(
            "switchyard: {b}:5:1: no key `max_object_size`: keys are written with hyphens, as the flags are: `max-object-size`"
        ),
        format!("switchyard: 3 errors in {b} and the flags"),
    ] {
        assert!(err.contains(&line), "{line}\nnot in:\n{err}");
    }
    // Once the file parses, the certificate is read, and a flag overrides the file.
    write(
        &bad,
        "origin = \"http://127.0.0.1:9\"\ntls-cert = \"/nonexistent.pem\"\ntls-key = \"/nonexistent.key\"\nmax-memory = \"1G\"\n",
    );
    let out = check(&["--config", bad.to_str().unwrap(), "--max-object-size", "2G"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{b}:2:1: tls-cert: TLS certificate /nonexistent.pem (--tls-cert): cannot be read")),
        "{err}"
    );
    assert!(err.contains("--max-object-size: 2147483648 is larger than max-memory 1073741824"), "{err}");
    assert!(err.contains("2 errors in"), "{err}");
}

#[test]
fn a_file_serves_as_its_flags_do() {
    if !have("curl") {
        return;
    }
    let origin = origin("same", 10);
    let dir = scratch("same");
    let file = dir.join("gateway.toml");
    write(&file, &format!("origin = [\"{origin}\"]\nmax-memory = \"4MiB\"\npurge-from = \"none\"\n"));
    let by_file = start(&["--config", file.to_str().unwrap()]);
    let by_flags = start(&["--origin", &origin, "--max-memory", "4MiB", "--purge-from", "none"]);
    let mut answers = Vec::new();
    for g in [&by_file, &by_flags] {
        let said: Vec<String> = ["/a", "/a", "/fresh/b"].iter().map(|p| get(g, p)).collect();
        let purge = curl(&["-X", "PURGE", "--write-out", "%{http_code}", "--output", "/dev/null", &g.url("/a")]);
        answers.push((said, String::from_utf8_lossy(&purge.stdout).to_string(), g.metric("gateway_max_memory_bytes")));
    }
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0].0, ["samexxxxxxxxxx miss", "samexxxxxxxxxx hit", "samexxxxxxxxxx miss"]);
    assert_eq!(answers[0].1, "403", "purge-from none");
    assert_eq!(answers[0].2, f64::from(4 << 20));
}

#[test]
fn sighup_takes_a_new_origin_refuses_a_bad_file_whole_and_shrinks_the_bound() {
    if !have("curl") {
        return;
    }
    let (a, b) = (origin("a", 10_000), origin("b", 10_000));
    let dir = scratch("reload");
    let file = dir.join("gateway.toml");
    let config = |origin: &str, memory: &str, extra: &str| {
        write(&file, &format!("origin = \"{origin}\"\nmax-memory = \"{memory}\"\n{extra}"));
    };
    config(&a, "1MiB", "");
    let gateway = start_in(&dir, &["--config", "gateway.toml"]);
    assert!(get(&gateway, "/fresh/1").starts_with("ax"));

    config(&b, "1MiB", "");
    let said = gateway.reload();
    assert!(said[0].starts_with(&format!("SIGHUP: origin: {b}@1 (route optwait)")), "{said:?}");
    assert!(get(&gateway, "/fresh/2").starts_with("bx"), "new requests go to the new origin");

    // One error, and one change that cannot be made live: nothing is taken, not even the
    // origin that could have been.
    config(&a, "256 MB", "eviction = \"lru\"\n");
    let said = gateway.reload();
    assert_eq!(
        said[0],
        "SIGHUP: gateway.toml:2:1: max-memory: \"256 MB\" is not a size; write 256MiB or 268435456 (bytes, or a whole number with K, M or G, KiB, MiB or GiB)"
    );
    assert!(said.last().unwrap().starts_with("SIGHUP: not reloaded"), "{said:?}");
    config(&a, "1MiB", "eviction = \"lru\"\n");
    let said = gateway.reload();
    assert_eq!(said[0], "SIGHUP: eviction cannot change while the gateway runs (restart it for that)");
    assert!(said.last().unwrap().starts_with("SIGHUP: not reloaded"), "{said:?}");
    assert!(get(&gateway, "/fresh/3").starts_with("bx"), "the old origin serves on");

    // Fill about 800 KB of the 1 MiB, then shrink the bound to 200 KB: it evicts at once.
    for i in 0..80 {
        assert!(get(&gateway, &format!("/kept/{i}")).ends_with("miss"));
    }
    let stored = gateway.metric("gateway_stored_bytes");
    assert!(stored > 700_000.0, "{stored}");
    config(&b, "200K", "");
    let said = gateway.reload();
    let line = said
        .iter()
        .find(|l| l.starts_with("SIGHUP: max-memory: 0.2 MiB (was 1.0 MiB); evicted "))
        .expect("a line for max-memory");
    let evicted: u64 = line.split("evicted ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(evicted >= 60, "{line}");
    let after = gateway.metric("gateway_stored_bytes");
    assert!(after <= 200.0 * 1024.0, "{after} stored over a bound of 200K");
    assert_eq!(gateway.metric("gateway_max_memory_bytes"), 200.0 * 1024.0);
    assert_eq!(gateway.metric("gateway_evictions_total"), evicted as f64);
}

/// Clients over keep-alive connections and over new ones, all the while, through reloads
/// that move the origin and the memory bound: every request sent is answered, whole.
#[test]
fn a_reload_under_load_drops_no_request() {
    if !have("curl") {
        return;
    }
    let (a, b) = (origin("a", 100), origin("b", 100));
    let dir = scratch("load");
    let file = dir.join("gateway.toml");
    let config =
        |origin: &str, memory: &str| write(&file, &format!("origin = [\"{origin}\"]\nmax-memory = \"{memory}\"\n"));
    config(&a, "1MiB");
    let gateway = start(&["--config", file.to_str().unwrap()]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for c in 0..6 {
        let (stop, base) = (stop.clone(), gateway.url(""));
        clients.push(std::thread::spawn(move || {
            let (mut sent, mut whole) = (0usize, 0usize);
            let mut round = 0;
            while !stop.load(Ordering::SeqCst) || round < 2 {
                round += 1;
                // Even clients: 50 requests over one keep-alive connection; odd: one each.
                let n = if c % 2 == 0 { 50 } else { 1 };
                let mut args: Vec<String> =
                    ["--write-out", "%{http_code} %{size_download} %{num_connects}\\n"].map(String::from).to_vec();
                for i in 0..n {
                    let path = if i % 2 == 0 { format!("/fresh/{c}/{i}") } else { format!("/kept/{}", i % 7) };
                    args.extend(["--output".to_string(), "/dev/null".to_string(), format!("{base}{path}")]);
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let out = curl(&args);
                sent += n;
                let text = String::from_utf8_lossy(&out.stdout).to_string();
                whole += text.lines().filter(|l| l.starts_with("200 101 ")).count();
                assert_eq!(text.lines().count(), n, "curl said: {text}{}", String::from_utf8_lossy(&out.stderr));
                if c % 2 == 0 {
                    let connects: usize =
                        text.lines().map(|l| l.rsplit(' ').next().unwrap().parse::<usize>().unwrap()).sum();
                    assert_eq!(connects, 1, "{n} requests over one connection");
                }
            }
            (sent, whole)
        }));
    }
    for (i, (origin, memory)) in
        [(&b, "64K"), (&a, "1MiB"), (&b, "1MiB"), (&a, "32K"), (&b, "2MiB")].into_iter().enumerate()
    {
        std::thread::sleep(Duration::from_millis(300));
        config(origin, memory);
        let said = gateway.reload();
        assert!(!said.iter().any(|l| l.contains("not reloaded")), "reload {i}: {said:?}");
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    let (mut sent, mut whole) = (0, 0);
    for c in clients {
        let (s, w) = c.join().unwrap();
        sent += s;
        whole += w;
    }
    assert!(sent > 200, "only {sent} requests sent");
    assert_eq!(whole, sent, "of {sent} requests sent, {whole} answered whole");
    assert!(get(&gateway, "/fresh/last").starts_with("bx"), "the last reload's origin");
}

/// The targets of the lines of the combined-format log at `path` (none if there is no file).
fn logged_targets(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| l.split('"').nth(1).unwrap().split(' ').nth(1).unwrap().to_string()).collect()
}

/// `access-log` moved by a reload while clients keep sending: every request's line is in
/// exactly one of the two files, the old one written whole and closed; a path that cannot be
/// opened is refused with the rest of its reload, and the log goes on where it was.
#[test]
fn a_reload_moves_the_access_log_under_load_each_line_in_one_file_and_a_bad_path_is_refused_whole() {
    if !have("curl") {
        return;
    }
    let (a, b) = (origin("a", 100), origin("b", 100));
    let dir = scratch("log");
    let file = dir.join("gateway.toml");
    let (one, two, bad) = (dir.join("one.log"), dir.join("two.log"), dir.join("missing").join("three.log"));
    let config = |origin: &str, log: &Path| {
        write(&file, &format!("origin = \"{origin}\"\naccess-log = \"{}\"\naccess-log-flush = 0.2\n", log.display()));
    };
    config(&a, &one);
    let gateway = start(&["--config", file.to_str().unwrap()]);
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (stop, base) = (stop.clone(), gateway.url(""));
            std::thread::spawn(move || {
                let mut answered = Vec::new();
                let mut round = 0;
                while !stop.load(Ordering::SeqCst) || round < 2 {
                    round += 1;
                    // 20 requests over one keep-alive connection, each to a path of its own.
                    let paths: Vec<String> = (0..20).map(|i| format!("/load/{c}/{round}/{i}")).collect();
                    let mut args = vec!["--write-out".to_string(), "%{http_code}\\n".to_string()];
                    for p in &paths {
                        args.extend(["--output".to_string(), "/dev/null".to_string(), format!("{base}{p}")]);
                    }
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let out = curl(&args);
                    let codes = String::from_utf8_lossy(&out.stdout).to_string();
                    assert_eq!(codes.lines().filter(|l| *l == "200").count(), 20, "curl said: {codes}");
                    answered.extend(paths);
                }
                answered
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    config(&a, &two);
    let said = gateway.reload();
    assert!(
        said.iter()
            .any(|l| l.starts_with(&format!("SIGHUP: access-log: {} (combined, flushed every 0.2 s)", two.display()))),
        "{said:?}"
    );
    assert!(!said.iter().any(|l| l.contains("not reloaded")), "{said:?}");
    std::thread::sleep(Duration::from_millis(500));
    // A directory that is not there, beside an origin that could have been taken: neither is.
    config(&b, &bad);
    let said = gateway.reload();
    assert!(
        said[0].starts_with(&format!(
            "SIGHUP: {}:2:1: access-log: {}: cannot be opened for appending",
            file.display(),
            bad.display()
        )),
        "{said:?}"
    );
    assert!(said.iter().any(|l| l.starts_with("SIGHUP: not reloaded")), "{said:?}");
    assert!(get(&gateway, "/fresh/after").starts_with("ax"), "the old origin serves on");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    let mut sent: Vec<String> = clients.into_iter().flat_map(|c| c.join().unwrap()).collect();
    gateway.stop();
    let (first, second) = (logged_targets(&one), logged_targets(&two));
    assert!(!bad.exists(), "{}", bad.display());
    let mut logged: Vec<String> = first.iter().chain(&second).filter(|t| t.starts_with("/load/")).cloned().collect();
    sent.sort();
    logged.sort();
    assert_eq!(logged.len(), sent.len(), "{} requests answered, {} lines", sent.len(), logged.len());
    assert_eq!(logged, sent, "each request's line in exactly one of the files");
    assert!(first.iter().any(|t| t.starts_with("/load/")), "lines before the move in {}", one.display());
    assert!(second.iter().any(|t| t.starts_with("/load/")), "lines after the move in {}", two.display());
    assert!(second.contains(&"/fresh/after".to_string()), "the log after the refused reload is still the second");
}
