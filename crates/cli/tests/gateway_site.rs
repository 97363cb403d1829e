//! `switchyard gateway serve` as a site runs it, driven by signals as an init system would:
//! HTTPS with HTTP/2 from certificates openssl made, SIGHUP reading them again (a bad file
//! refused, the old certificate serving on), SIGTERM finishing the request in flight and
//! exiting 0. Debian's curl and openssl are the client and the certificate maker; without
//! them the tests say so and pass nothing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

fn have(tool: &str) -> bool {
    let found = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
        || Command::new(tool).arg("version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: {tool} is not installed (bench/install-peers.sh installs it)");
    }
    found
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-site-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A self-signed P-256 certificate for localhost, as an operator makes one with openssl.
fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-days", "2"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(made.status.success(), "openssl: {}", String::from_utf8_lossy(&made.stderr));
    (cert, key)
}

/// An origin whose `/slow` answers after 1.5 s and everything else at once, never cached;
/// counts the requests it has begun.
fn origin() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let begun = Arc::new(AtomicUsize::new(0));
    let count = begun.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let count = count.clone();
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
                    count.fetch_add(1, Ordering::SeqCst);
                    if head.starts_with("GET /slow") {
                        std::thread::sleep(Duration::from_millis(1500));
                    }
                    let body = "origin";
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, begun)
}

/// The gateway, its standard error line by line, and its port.
struct Gateway {
    child: Child,
    lines: Receiver<String>,
    port: u16,
}

impl Gateway {
    fn start(args: &[&str]) -> Self {
        Self::run(&[&["gateway", "serve"], args].concat(), " on https://127.0.0.1:")
    }

    /// `switchyard ARGS --listen 127.0.0.1:0`, its port read from the line holding `said`.
    fn run(args: &[&str], said: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
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
        let line = gateway.wait_for(said);
        let port = line.rsplit_once("127.0.0.1:").unwrap().1.split_whitespace().next().unwrap();
        gateway.port = port.parse().unwrap();
        gateway
    }

    /// The next line of standard error holding `needle`, waiting at most a minute.
    fn wait_for(&self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("the gateway never said {needle:?} ({e})"),
            }
        }
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name}");
    }

    fn curl(&self, ca: &Path, path: &str, extra: &[&str]) -> Output {
        let port = self.port;
        Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "60", "--write-out", " %{http_version}"])
            .args(extra)
            .arg("--cacert")
            .arg(ca)
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
            .arg(format!("https://localhost:{port}{path}"))
            .output()
            .expect("curl runs")
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn https_and_http2_reload_on_sighup_and_drain_on_sigterm() {
    if !have("curl") || !have("openssl") {
        return;
    }
    let dir = scratch("signals");
    let (first, first_key) = certificate(&dir, "first");
    let (cert, key) = (dir.join("live.crt"), dir.join("live.key"));
    std::fs::copy(&first, &cert).unwrap();
    std::fs::copy(&first_key, &key).unwrap();
    let (port, begun) = origin();
    let origin = format!("http://127.0.0.1:{port}");
    let gateway = Gateway::start(&[
        "--origin",
        &origin,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);

    let said = gateway.curl(&first, "/", &["--http2", "--tlsv1.3"]);
    assert_eq!(text(&said), "origin 2", "HTTP/2 over TLS 1.3");
    let said = gateway.curl(&first, "/", &["--http1.1", "--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!(text(&said), "origin 1.1", "HTTP/1.1 over TLS 1.2");

    // A renewal gone wrong: the old certificate serves on.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nnot base64 at all\n").unwrap();
    gateway.signal("HUP");
    let line = gateway.wait_for("SIGHUP");
    assert!(line.contains(&format!("TLS certificate {} (--tls-cert)", cert.display())), "{line}");
    let line = gateway.wait_for("SIGHUP");
    assert!(line.starts_with("SIGHUP: not reloaded; the configuration running stays whole"), "{line}");
    assert_eq!(text(&gateway.curl(&first, "/", &[])), "origin 2", "after a refused reload");

    let (second, second_key) = certificate(&dir, "second");
    std::fs::copy(&second, &cert).unwrap();
    std::fs::copy(&second_key, &key).unwrap();
    gateway.signal("HUP");
    let line = gateway.wait_for("SIGHUP");
    assert!(line.contains("new connections get them"), "{line}");
    assert_eq!(text(&gateway.curl(&second, "/", &[])), "origin 2", "the new certificate");
    assert!(!gateway.curl(&first, "/", &[]).status.success(), "the old certificate after the reload");

    // SIGTERM with a request in flight: it is answered, and the gateway exits 0.
    let before = begun.load(Ordering::SeqCst);
    let slow = {
        let (ca, port) = (second.clone(), gateway.port);
        std::thread::spawn(move || {
            Command::new("curl")
                .args(["--silent", "--show-error", "--max-time", "60", "--cacert"])
                .arg(ca)
                .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
                .arg(format!("https://localhost:{port}/slow"))
                .output()
                .expect("curl runs")
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while begun.load(Ordering::SeqCst) == before {
        assert!(std::time::Instant::now() < deadline, "the slow request never reached the origin");
        std::thread::sleep(Duration::from_millis(10));
    }
    gateway.signal("TERM");
    let line = gateway.wait_for("stopped:");
    assert_eq!(line, "stopped: 1 request in flight finished, 0 cut at --drain-timeout");
    assert_eq!(text(&slow.join().unwrap()), "origin", "the request in flight at SIGTERM");
    let mut gateway = gateway;
    let status = gateway.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the gateway's exit");
}

#[test]
fn a_certificate_that_cannot_be_used_is_refused_at_start() {
    let dir = scratch("start");
    let missing = dir.join("missing.crt");
    std::fs::write(dir.join("empty.key"), "").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["gateway", "serve", "--listen", "127.0.0.1:0", "--origin", "http://127.0.0.1:9"])
        .arg("--tls-cert")
        .arg(&missing)
        .arg("--tls-key")
        .arg(dir.join("empty.key"))
        .output()
        .expect("the binary runs");
    let mut err = String::new();
    out.stderr.as_slice().read_to_string(&mut err).unwrap();
    assert!(!out.status.success());
    assert!(err.contains(&format!("TLS certificate {} (--tls-cert): cannot be read", missing.display())), "{err}");
}

#[test]
fn in_front_of_a_sensor_field_h2c_when_asked_for() {
    if !have("curl") {
        return;
    }
    let field = Gateway::run(&["field", "serve", "--time-scale", "0.05"], "sensor field on http://127.0.0.1:");
    let field_url = format!("http://127.0.0.1:{}", field.port);
    let gateway = Gateway::run(&["gateway", "serve", "--field", &field_url, "--h2c"], " on http://127.0.0.1:");
    let url = format!("http://127.0.0.1:{}/v1/readings/3?max_age=5", gateway.port);
    let said = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "60", "--http2-prior-knowledge"])
        .args(["--output", "/dev/null", "--write-out", "%{http_code} %{http_version}", &url])
        .output()
        .expect("curl runs");
    assert_eq!(text(&said), "200 2", "a reading over h2c");
    let said = Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "60"])
        .args(["--output", "/dev/null", "--write-out", "%{http_code} %{http_version}", &url])
        .output()
        .expect("curl runs");
    assert_eq!(text(&said), "200 1.1", "a reading over HTTP/1.1 beside h2c");
    gateway.signal("TERM");
    let line = gateway.wait_for("stopped:");
    assert_eq!(line, "stopped: 0 requests in flight finished, 0 cut at --drain-timeout");
}
