//! What the CLI's gateway tests share (`mod common;` in each): the gateway run as a process,
//! its standard error read line by line and its port taken from its listening line; Debian's
//! curl and openssl as the client and the certificate maker; a scratch directory; an origin
//! made of a closure.

// Each test file is a crate of its own and uses a part of this.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// Whether `tool` runs; if not, says the test is SKIPPED.
pub(crate) fn have(tool: &str) -> bool {
    // openssl says its version to `version`, the others to `--version`.
    let found = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
        || Command::new(tool).arg("version").output().is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: {tool} is not installed (bench/install-peers.sh installs it)");
    }
    found
}

/// An empty directory of this process's, for test `test` of file `file`.
pub(crate) fn scratch(file: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-{file}-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A self-signed P-256 certificate for localhost in `dir` (`NAME.crt`, `NAME.key`), as an
/// operator makes one with openssl.
pub(crate) fn certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
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

/// An HTTP/1.1 origin on a port of its own (returned), a thread a connection: `answer` gets
/// each request's head and the connection to write the response to, and says whether to
/// keep the connection open.
pub(crate) fn origin(answer: impl Fn(&str, &mut TcpStream) -> bool + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let answer = Arc::clone(&answer);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut head = String::new();
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                        head += &line;
                        line.clear();
                    }
                    if head.is_empty() || !answer(&head, reader.get_mut()) {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// `switchyard ARGS --listen 127.0.0.1:0`, its standard output thrown away.
pub(crate) fn switchyard(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.args(args).args(["--listen", "127.0.0.1:0"]).stdout(Stdio::null());
    command
}

/// A server of ours running, its standard error line by line, and its port.
pub(crate) struct Gateway {
    pub(crate) child: Child,
    pub(crate) lines: Receiver<String>,
    pub(crate) port: u16,
}

impl Gateway {
    /// `switchyard ARGS --listen 127.0.0.1:0`, once it listens.
    pub(crate) fn run(args: &[&str]) -> Self {
        Self::spawn(switchyard(args))
    }

    /// `command` started, once it says it listens (` on http://127.0.0.1:PORT` or
    /// ` on https://…`).
    pub(crate) fn spawn(mut command: Command) -> Self {
        let mut child = command.stderr(Stdio::piped()).spawn().expect("the binary runs");
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
        let line = gateway.wait_for(" on http");
        let port = line.rsplit_once("127.0.0.1:").unwrap().1.split_whitespace().next().unwrap();
        gateway.port = port.parse().unwrap();
        gateway
    }

    /// The next line of standard error holding `needle`, waiting at most two minutes.
    pub(crate) fn wait_for(&self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(120)) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(e) => panic!("the gateway never said {needle:?} ({e})"),
            }
        }
    }

    /// `kill -NAME`.
    pub(crate) fn signal(&self, name: &str) {
        let sent = Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -{name}");
    }

    /// The lines one reload (SIGHUP) prints.
    pub(crate) fn reload(&self) -> Vec<String> {
        self.signal("HUP");
        let mut said = vec![self.wait_for("SIGHUP: ")];
        // A reload's lines are printed together, the first a moment after the signal.
        while let Ok(more) = self.lines.recv_timeout(Duration::from_millis(500)) {
            said.push(more);
        }
        said
    }

    /// SIGTERM, and the exit (0) awaited: every log line is written by then. The rest of its
    /// standard error.
    pub(crate) fn stop(mut self) -> Vec<String> {
        self.signal("TERM");
        let status = self.child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "the gateway's exit");
        self.lines.try_iter().collect()
    }

    /// `http://127.0.0.1:PORT` and `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Counter or gauge `name` of /metrics.
    pub(crate) fn metric(&self, name: &str) -> f64 {
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

/// curl with `args`, silent but for errors, a minute at most.
pub(crate) fn curl(args: &[&str]) -> Output {
    Command::new("curl").args(["--silent", "--show-error", "--max-time", "60"]).args(args).output().expect("curl runs")
}

/// curl with `args` to `https://localhost:PORT/PATH`, trusting `ca`.
pub(crate) fn curl_tls(port: u16, ca: &Path, path: &str, args: &[&str]) -> Output {
    let resolve = format!("localhost:{port}:127.0.0.1");
    let url = format!("https://localhost:{port}{path}");
    let ca = ca.to_str().unwrap();
    curl(&[args, &["--cacert", ca, "--resolve", &resolve, &url]].concat())
}

/// What a command wrote, standard output then standard error.
pub(crate) fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}
