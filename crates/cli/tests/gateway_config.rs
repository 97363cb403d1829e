//! `switchyard gateway serve --config FILE`: the file serves as its flags do, `--check-config`
//! names every error, and SIGHUP reloads the file whole or not at all, under load dropping
//! no request. Debian's curl is the client; without it the tests that need it say so and pass
//! nothing.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

fn have(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: {tool} is not installed (bench/install-peers.sh installs it)");
    }
    found
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-config-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An origin answering every GET with `name` and `pad` bytes after it, stored for an hour;
/// `/fresh/...` is never stored.
fn origin(name: &'static str, pad: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut head = String::new();
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                        head += &line;
                        line.clear();
                    }
                    if head.is_empty() {
                        return;
                    }
                    let cc = if head.starts_with("GET /fresh/") { "no-store" } else { "max-age=3600" };
                    let body = format!("{name}{}", "x".repeat(pad));
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nCache-Control: {cc}\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// The gateway, its standard error line by line, and its port.
struct Gateway {
    child: Child,
    lines: Receiver<String>,
    port: u16,
}

impl Gateway {
    /// `switchyard gateway serve ARGS --listen 127.0.0.1:0`.
    fn start(args: &[&str]) -> Self {
        Self::start_in(&std::env::temp_dir(), args)
    }

    /// As [`Gateway::start`], run in `dir`.
    fn start_in(dir: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .current_dir(dir)
            .args(["gateway", "serve"])
            .args(args)
            .args(["--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs");
        let (tx, lines) = channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut gateway = Self { child, lines, port: 0 };
        let line = gateway.wait_for(" on http://127.0.0.1:");
        let port = line.rsplit_once("127.0.0.1:").unwrap().1.split_whitespace().next().unwrap();
        gateway.port = port.parse().unwrap();
        gateway
    }

    /// The next line of standard error holding `needle`, waiting at most a minute; the lines
    /// passed over are returned before it.
    fn wait_for(&self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("the gateway never said {needle:?} ({e})"),
            }
        }
    }

    /// The lines one reload prints.
    fn reload(&self) -> Vec<String> {
        let sent = Command::new("kill").arg("-HUP").arg(self.child.id().to_string()).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -HUP");
        let mut said = vec![self.wait_for("SIGHUP: ")];
        // A reload's lines are printed together, the first a moment after the signal.
        while let Ok(more) = self.lines.recv_timeout(Duration::from_millis(500)) {
            said.push(more);
        }
        said
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn metric(&self, name: &str) -> f64 {
        let text = curl(&[&self.url("/metrics")]);
        let line = String::from_utf8_lossy(&text.stdout)
            .lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .unwrap_or_else(|| panic!("no {name} in /metrics"))
            .to_string();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl").args(["--silent", "--show-error", "--max-time", "60"]).args(args).output().expect("curl runs")
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
    let by_file = Gateway::start(&["--config", file.to_str().unwrap()]);
    let by_flags = Gateway::start(&["--origin", &origin, "--max-memory", "4MiB", "--purge-from", "none"]);
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
    let gateway = Gateway::start_in(&dir, &["--config", "gateway.toml"]);
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
    let gateway = Gateway::start(&["--config", file.to_str().unwrap()]);
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
