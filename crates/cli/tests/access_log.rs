//! `gateway serve --access-log`: the lines a hit, a miss, a coalesced request, a 404 and a
//! client that leaves mid-body leave, from Debian's curl over TLS (HTTP/2 and HTTP/1.1), read
//! back by GoAccess (the combined format) and jq (JSON lines); rotation by a move and SIGHUP
//! losing no line; a disk slower than the requests (a pipe nobody reads) holding no request
//! back, its lost lines counted. Without curl, openssl, goaccess or jq the tests say SKIPPED.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use common::{Gateway, have, text as said};

fn scratch(test: &str) -> PathBuf {
    common::scratch("log", test)
}

/// Bytes of `/big`, which no client here reads whole.
const BIG: usize = 64 << 20;

/// Bytes of `/large`, stored, then read in part from the cache.
const LARGE: usize = 32 << 20;

/// An origin: `/slow` answers after 3 s, `/nope` is a 404, `/big` is 64 MiB not to be stored,
/// `/large` 32 MiB to be stored, everything else 1,000 bytes kept for a minute.
fn origin() -> u16 {
    common::origin(|head, out| {
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let (status, cache, len) = match path.as_str() {
            "/nope" => ("404 Not Found", "no-store", 9),
            "/big" => ("200 OK", "no-store", BIG),
            "/large" => ("200 OK", "max-age=60", LARGE),
            _ => ("200 OK", "max-age=60", 1000),
        };
        if path == "/slow" {
            std::thread::sleep(Duration::from_secs(3));
        }
        let head = format!("HTTP/1.1 {status}\r\nCache-Control: {cache}\r\nContent-Length: {len}\r\n\r\n");
        if out.write_all(head.as_bytes()).is_err() {
            return false;
        }
        let chunk = vec![b'x'; len.min(1 << 20)];
        let mut left = len;
        while left > 0 {
            let n = left.min(chunk.len());
            if out.write_all(&chunk[..n]).is_err() {
                return false;
            }
            left -= n;
        }
        true
    })
}

/// curl over TLS to `path` on `port`, with `extra` options; the body discarded.
fn curl(port: u16, ca: &Path, path: &str, extra: &[&str]) -> Output {
    let out = ["--output", "/dev/null", "--write-out", "%{http_code} %{http_version}"];
    common::curl_tls(port, ca, path, &[&out, extra].concat())
}

/// One request's fields, read from either format.
#[derive(Debug)]
struct Line {
    request: String,
    status: u16,
    bytes: u64,
    agent: String,
    cache: String,
    origin: String,
    ttfb: f64,
    rt: f64,
}

/// A combined line, read field by field as nginx wrote it.
fn combined(line: &str) -> Line {
    let quoted: Vec<&str> = line.split('"').collect();
    assert_eq!(quoted.len(), 7, "three quoted fields: {line}");
    let numbers: Vec<&str> = quoted[2].split_whitespace().collect();
    let extras: HashMap<&str, &str> =
        quoted[6].split_whitespace().map(|kv| kv.split_once('=').expect("name=value")).collect();
    Line {
        request: quoted[1].to_string(),
        status: numbers[0].parse().unwrap(),
        bytes: numbers[1].parse().unwrap(),
        agent: quoted[5].to_string(),
        cache: extras["cache"].to_string(),
        origin: extras["origin"].to_string(),
        ttfb: extras["ttfb"].parse().unwrap(),
        rt: extras["rt"].parse().unwrap(),
    }
}

fn json(line: &str) -> Line {
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let text = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    Line {
        request: format!("{} {} {}", text("method"), text("target"), text("protocol")),
        status: u16::try_from(v["status"].as_u64().expect("status a number")).unwrap(),
        bytes: v["body_bytes_sent"].as_u64().expect("bytes a number"),
        agent: text("user_agent"),
        cache: text("cache"),
        origin: text("origin"),
        ttfb: v["ttfb"].as_f64().expect("ttfb a number"),
        rt: v["rt"].as_f64().expect("rt a number"),
    }
}

/// The lines of `path`, once there are at least `n` (at most two minutes).
fn lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(Instant::now() < deadline, "{} has {} lines, not {n}: {text}", path.display(), lines.len());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A hit, a miss, two coalesced reads of `/slow`, a 404 and a client leaving `/big` after
/// 64 KiB, over HTTP/2 and HTTP/1.1 with TLS, logged in `format`: the lines, as written.
fn scenario(format: &str) -> Option<(Vec<Line>, PathBuf, u16)> {
    if !have("curl") || !have("openssl") {
        return None;
    }
    let dir = scratch(format);
    let (cert, key) = common::certificate(&dir, "site");
    let log = dir.join("access.log");
    let origin_port = origin();
    let origin = format!("http://127.0.0.1:{origin_port}");
    let gateway = Gateway::run(&[
        "gateway",
        "serve",
        "--origin",
        &origin,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--access-log",
        log.to_str().unwrap(),
        "--log-format",
        format,
    ]);
    assert_eq!(said(&curl(gateway.port, &cert, "/page", &["--http2", "-A", "first"])), "200 2");
    assert_eq!(said(&curl(gateway.port, &cert, "/page", &["--http2", "-A", "second"])), "200 2");
    assert_eq!(said(&curl(gateway.port, &cert, "/nope", &["--http1.1", "-A", "third"])), "404 1.1");
    let slow: Vec<_> = (0..2)
        .map(|i| {
            let (cert, port) = (cert.clone(), gateway.port);
            std::thread::spawn(move || said(&curl(port, &cert, "/slow", &["--http1.1", "-A", &format!("slow{i}")])))
        })
        .collect();
    for s in slow {
        assert_eq!(s.join().unwrap(), "200 1.1");
    }
    // Clients that read 64 KiB and leave: of a body carried through from the origin, and of
    // one stored (a hit, whose body is one buffer).
    assert_eq!(said(&curl(gateway.port, &cert, "/large", &["--http1.1", "-A", "whole"])), "200 1.1");
    let port = gateway.port;
    for (path, agent) in [("/big", "leaver"), ("/large", "hit-leaver")] {
        let cut = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "curl --silent --http1.1 -A {agent} --cacert '{}' --resolve localhost:{port}:127.0.0.1 https://localhost:{port}{path} | head -c 65536 | wc -c",
                cert.display()
            ))
            .output()
            .unwrap();
        assert_eq!(said(&cut).trim(), "65536");
    }
    let written = lines(&log, 8);
    gateway.stop();
    let read = if format == "json" { json } else { combined };
    Some((written.iter().map(|l| read(l)).collect(), log, origin_port))
}

/// What each request's line must say, in either format.
fn check(lines: &[Line], origin_port: u16) {
    let by_agent =
        |a: &str| lines.iter().find(|l| l.agent == a).unwrap_or_else(|| panic!("no line for {a}: {lines:?}"));
    let origin = format!("127.0.0.1:{origin_port}");
    let first = by_agent("first");
    assert_eq!(
        (first.request.as_str(), first.status, first.bytes, first.cache.as_str(), first.origin.as_str()),
        ("GET /page HTTP/2.0", 200, 1000, "miss", origin.as_str())
    );
    let second = by_agent("second");
    assert_eq!(
        (second.request.as_str(), second.status, second.bytes, second.cache.as_str(), second.origin.as_str()),
        ("GET /page HTTP/2.0", 200, 1000, "hit", "-")
    );
    let third = by_agent("third");
    assert_eq!(
        (third.request.as_str(), third.status, third.bytes, third.cache.as_str(), third.origin.as_str()),
        ("GET /nope HTTP/1.1", 404, 9, "miss", origin.as_str())
    );
    let mut slow = [by_agent("slow0"), by_agent("slow1")];
    slow.sort_by(|a, b| a.cache.cmp(&b.cache));
    assert_eq!([slow[0].cache.as_str(), slow[1].cache.as_str()], ["coalesced", "miss"]);
    for s in slow {
        assert_eq!((s.status, s.bytes, s.origin.as_str()), (200, 1000, origin.as_str()));
        // The origin took 3 s; the one that waited on the other's read came in later.
        assert!(s.ttfb > 1.0, "{s:?}");
    }
    let leaver = by_agent("leaver");
    assert_eq!((leaver.request.as_str(), leaver.status, leaver.cache.as_str()), ("GET /big HTTP/1.1", 200, "miss"));
    assert!(
        leaver.bytes >= 65536 && leaver.bytes < (BIG as u64) / 2,
        "a client that left after 64 KiB of 64 MiB: {} bytes logged",
        leaver.bytes
    );
    let whole = by_agent("whole");
    assert_eq!((whole.status, whole.bytes, whole.cache.as_str()), (200, LARGE as u64, "miss"));
    let hit_leaver = by_agent("hit-leaver");
    assert_eq!((hit_leaver.request.as_str(), hit_leaver.cache.as_str()), ("GET /large HTTP/1.1", "hit"));
    assert!(
        hit_leaver.bytes >= 65536 && hit_leaver.bytes < (LARGE as u64) / 2,
        "a client that left after 64 KiB of a 32 MiB hit: {} bytes logged",
        hit_leaver.bytes
    );
    for l in lines {
        assert!(l.ttfb <= l.rt && l.rt < 60.0, "{l:?}");
    }
}

#[test]
fn combined_lines_for_a_hit_a_miss_coalesced_reads_a_404_and_a_client_gone_read_by_goaccess() {
    if !have("goaccess") {
        return;
    }
    let Some((lines, log, origin_port)) = scenario("combined") else { return };
    check(&lines, origin_port);
    // GoAccess reads the lines as nginx's combined format (the fields after it ignored).
    let report = log.with_extension("json");
    let ran = Command::new("goaccess")
        .arg(&log)
        .args(["--log-format=COMBINED", "--no-global-config", "-o"])
        .arg(&report)
        .output()
        .expect("goaccess runs");
    assert!(ran.status.success(), "goaccess: {}", said(&ran));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let general = &report["general"];
    assert_eq!(
        (general["total_requests"].as_u64(), general["failed_requests"].as_u64()),
        (Some(8), Some(0)),
        "{general}"
    );
    let pages = report["requests"]["data"].as_array().unwrap();
    let page =
        |p: &str| pages.iter().find(|d| d["data"] == p).unwrap_or_else(|| panic!("GoAccess has no {p}: {pages:?}"));
    assert_eq!(
        (page("/page")["hits"]["count"].as_u64(), page("/page")["bytes"]["count"].as_u64()),
        (Some(2), Some(2000))
    );
    // GoAccess shows nginx's `HTTP/2.0` as `HTTP/2`.
    assert_eq!(page("/page")["protocol"], "HTTP/2");
    assert_eq!(page("/slow")["hits"]["count"].as_u64(), Some(2));
    let statuses: Vec<&str> =
        report["status_codes"]["data"].as_array().unwrap().iter().map(|s| s["data"].as_str().unwrap()).collect();
    assert!(statuses.iter().any(|s| s.starts_with("4xx")), "{statuses:?}");
}

#[test]
fn json_lines_for_the_same_requests_read_by_jq() {
    if !have("jq") {
        return;
    }
    let Some((lines, log, origin_port)) = scenario("json") else { return };
    check(&lines, origin_port);
    // jq reads every line as an object with numbers where numbers are.
    let ran = Command::new("jq")
        .args(["-e", "-s", "length == 8 and all(.[]; (.status|type) == \"number\" and (.body_bytes_sent|type) == \"number\" and (.ttfb|type) == \"number\" and (.time|test(\"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z$\")))"])
        .arg(&log)
        .output()
        .expect("jq runs");
    assert!(ran.status.success(), "jq: {}", said(&ran));
}

/// Requests over one HTTP/1.1 connection with curl, each answered 200: how many.
fn requests(port: u16, path: &str, n: usize, dir: &Path, name: &str) -> usize {
    let config = dir.join(format!("{name}.curl"));
    let mut text = String::new();
    for _ in 0..n {
        text += &format!(
            "url = \"http://127.0.0.1:{port}{path}\"\noutput = \"/dev/null\"\nwrite-out = \"%{{http_code}}\\n\"\n"
        );
    }
    std::fs::write(&config, text).unwrap();
    let out =
        Command::new("curl").args(["--silent", "--max-time", "120", "-K"]).arg(&config).output().expect("curl runs");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| *l == "200").count()
}

#[test]
fn sighup_after_a_move_writes_to_a_new_file_and_loses_no_line() {
    if !have("curl") {
        return;
    }
    let dir = scratch("rotate");
    let log = dir.join("access.log");
    let origin = format!("http://127.0.0.1:{}", origin());
    let gateway = Gateway::run(&["gateway", "serve", "--origin", &origin, "--access-log", log.to_str().unwrap()]);
    let port = gateway.port;
    assert_eq!(requests(port, "/page", 100, &dir, "before"), 100);
    assert_eq!(lines(&log, 100).len(), 100);
    // Requests under way while the log is moved and reopened: each lands in one file or the other.
    let during = {
        let dir = dir.clone();
        std::thread::spawn(move || requests(port, "/page", 400, &dir, "during"))
    };
    std::thread::sleep(Duration::from_millis(100));
    let moved = dir.join("access.log.1");
    std::fs::rename(&log, &moved).unwrap();
    gateway.signal("HUP");
    gateway.wait_for("SIGHUP: access log reopened");
    let answered = during.join().unwrap();
    assert_eq!(answered, 400);
    assert_eq!(requests(port, "/page", 100, &dir, "after"), 100);
    gateway.stop();
    let old = lines(&moved, 0);
    let new = lines(&log, 0);
    assert_eq!(old.len() + new.len(), 600, "{} lines in the moved file, {} in the new", old.len(), new.len());
    assert!(new.len() >= 100, "the requests after SIGHUP are in the new file: {} lines", new.len());
}

#[test]
fn a_disk_slower_than_the_requests_holds_none_back_and_its_lost_lines_are_counted_and_said() {
    if !have("curl") || !have("mkfifo") {
        return;
    }
    let dir = scratch("slow-disk");
    let fifo = dir.join("access.pipe");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    // The reader opens the pipe (the gateway's open waits for it) and reads nothing until told.
    let (go, wait) = channel::<()>();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut pipe = std::fs::File::open(&fifo).unwrap();
            wait.recv().unwrap();
            let mut all = String::new();
            pipe.read_to_string(&mut all).unwrap();
            all.lines().count()
        })
    };
    let origin = format!("http://127.0.0.1:{}", origin());
    let gateway = Gateway::run(&["gateway", "serve", "--origin", &origin, "--access-log", fifo.to_str().unwrap()]);
    // More lines than the queue (8,192), the writer's buffer and the pipe hold: all answered
    // while nothing reads the log.
    let n = 12_000;
    assert_eq!(requests(gateway.port, "/page", n, &dir, "flood"), n);
    let line = gateway.wait_for("lines lost");
    assert!(line.contains("gateway_access_log_lost_total"), "{line}");
    let metrics = Command::new("curl")
        .args(["--silent", "--max-time", "60", &format!("http://127.0.0.1:{}/metrics", gateway.port)])
        .output()
        .unwrap();
    let metrics = String::from_utf8_lossy(&metrics.stdout).to_string();
    let counter = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no {name}: {metrics}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(counter("gateway_access_log_lost_total") > 0, "{metrics}");
    assert!(metrics.trim_end().ends_with("# EOF"), "the counters before the closing # EOF");
    go.send(()).unwrap();
    let said = gateway.stop();
    let read = reader.join().unwrap();
    // The last report on standard error counts every line lost, those after the read of
    // /metrics too: each request (and that read) is a line read or a line counted.
    let last = [line].into_iter().chain(said).rfind(|l| l.contains("lines lost")).unwrap();
    let lost: usize = last.split(" in all").next().unwrap().rsplit('(').next().unwrap().parse().unwrap();
    assert_eq!(read + lost, n + 1, "{read} lines read, {lost} lost ({last})");
}

#[test]
fn in_front_of_a_sensor_field_json_lines_on_standard_output() {
    if !have("curl") {
        return;
    }
    let field = Gateway::run(&["field", "serve", "--time-scale", "0.05"]);
    let field_url = format!("http://127.0.0.1:{}", field.port);
    let field_addr = format!("127.0.0.1:{}", field.port);
    let mut command =
        common::switchyard(&["gateway", "serve", "--field", &field_url, "--access-log", "-", "--log-format", "json"]);
    command.stdout(Stdio::piped());
    let mut gateway = Gateway::spawn(command);
    let stdout = BufReader::new(gateway.child.stdout.take().unwrap());
    let get = |path: &str| {
        let out = Command::new("curl")
            .args(["--silent", "--max-time", "60", "--output", "/dev/null", "--write-out", "%{http_code}"])
            .arg(format!("http://127.0.0.1:{}{path}", gateway.port))
            .output()
            .expect("curl runs");
        said(&out)
    };
    assert_eq!(get("/v1/readings/3?max_age=60"), "200");
    assert_eq!(get("/v1/readings/3?max_age=60"), "200");
    assert_eq!(get("/v1/readings/999999"), "404");
    let _ = gateway.stop();
    let lines: Vec<Line> = stdout.lines().map_while(Result::ok).map(|l| json(&l)).collect();
    let seen: Vec<(&str, u16, &str, &str)> =
        lines.iter().map(|l| (l.request.as_str(), l.status, l.cache.as_str(), l.origin.as_str())).collect();
    assert_eq!(
        seen,
        [
            ("GET /v1/readings/3?max_age=60 HTTP/1.1", 200, "miss", field_addr.as_str()),
            ("GET /v1/readings/3?max_age=60 HTTP/1.1", 200, "hit", "-"),
            ("GET /v1/readings/999999 HTTP/1.1", 404, "-", "-"),
        ]
    );
    assert!(lines.iter().all(|l| l.bytes > 0 && l.ttfb <= l.rt), "{lines:?}");
}
