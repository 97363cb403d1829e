//! `switchyard gateway serve` as a site runs it, driven by signals as an init system would:
//! HTTPS with HTTP/2 from certificates openssl made, SIGHUP reading them again (a bad file
//! refused, the old certificate serving on), SIGTERM finishing the request in flight and
//! exiting 0. Debian's curl and openssl are the client and the certificate maker; without
//! them the tests say so and pass nothing.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Gateway, certificate, have, text};

fn scratch(test: &str) -> std::path::PathBuf {
    common::scratch("site", test)
}

/// An origin whose `/slow` answers after 1.5 s and everything else at once, never cached;
/// counts the requests it has begun.
fn origin() -> (u16, Arc<AtomicUsize>) {
    let begun = Arc::new(AtomicUsize::new(0));
    let count = begun.clone();
    let port = common::origin(move |head, out| {
        count.fetch_add(1, Ordering::SeqCst);
        if head.starts_with("GET /slow") {
            std::thread::sleep(Duration::from_millis(1500));
        }
        let body = "origin";
        let answer =
            format!("HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        out.write_all(answer.as_bytes()).is_ok()
    });
    (port, begun)
}

/// `gateway serve ARGS` over TLS, once it listens.
fn start(args: &[&str]) -> Gateway {
    Gateway::run(&[&["gateway", "serve"], args].concat())
}

/// curl over TLS to `path`, the body then ` HTTP-VERSION`.
fn curl(gateway: &Gateway, ca: &Path, path: &str, extra: &[&str]) -> Output {
    common::curl_tls(gateway.port, ca, path, &[&["--write-out", " %{http_version}"], extra].concat())
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
    let gateway =
        start(&["--origin", &origin, "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()]);

    let said = curl(&gateway, &first, "/", &["--http2", "--tlsv1.3"]);
    assert_eq!(text(&said), "origin 2", "HTTP/2 over TLS 1.3");
    let said = curl(&gateway, &first, "/", &["--http1.1", "--tlsv1.2", "--tls-max", "1.2"]);
    assert_eq!(text(&said), "origin 1.1", "HTTP/1.1 over TLS 1.2");

    // A renewal gone wrong: the old certificate serves on.
    std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nnot base64 at all\n").unwrap();
    gateway.signal("HUP");
    let line = gateway.wait_for("SIGHUP");
    assert!(line.contains(&format!("TLS certificate {} (--tls-cert)", cert.display())), "{line}");
    let line = gateway.wait_for("SIGHUP");
    assert!(line.starts_with("SIGHUP: not reloaded; the configuration running stays whole"), "{line}");
    assert_eq!(text(&curl(&gateway, &first, "/", &[])), "origin 2", "after a refused reload");

    let (second, second_key) = certificate(&dir, "second");
    std::fs::copy(&second, &cert).unwrap();
    std::fs::copy(&second_key, &key).unwrap();
    gateway.signal("HUP");
    let line = gateway.wait_for("SIGHUP");
    assert!(line.contains("new connections get them"), "{line}");
    assert_eq!(text(&curl(&gateway, &second, "/", &[])), "origin 2", "the new certificate");
    assert!(!curl(&gateway, &first, "/", &[]).status.success(), "the old certificate after the reload");

    // SIGTERM with a request in flight: it is answered, and the gateway exits 0.
    let before = begun.load(Ordering::SeqCst);
    let slow = {
        let (ca, port) = (second.clone(), gateway.port);
        std::thread::spawn(move || common::curl_tls(port, &ca, "/slow", &[]))
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
    let field = Gateway::run(&["field", "serve", "--time-scale", "0.05"]);
    let field_url = format!("http://127.0.0.1:{}", field.port);
    let gateway = Gateway::run(&["gateway", "serve", "--field", &field_url, "--h2c"]);
    let url = format!("http://127.0.0.1:{}/v1/readings/3?max_age=5", gateway.port);
    let said = common::curl(&[
        "--http2-prior-knowledge",
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code} %{http_version}",
        &url,
    ]);
    assert_eq!(text(&said), "200 2", "a reading over h2c");
    let said = common::curl(&["--output", "/dev/null", "--write-out", "%{http_code} %{http_version}", &url]);
    assert_eq!(text(&said), "200 1.1", "a reading over HTTP/1.1 beside h2c");
    gateway.signal("TERM");
    let line = gateway.wait_for("stopped:");
    assert_eq!(line, "stopped: 0 requests in flight finished, 0 cut at --drain-timeout");
}
