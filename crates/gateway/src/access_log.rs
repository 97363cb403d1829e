//! The access log: one line per request, in nginx's `combined` format with the cache's fields
//! after it, or as JSON lines, written off the request path.
//!
//! # How a line gets to the disk
//!
//! The serving loop ([`crate::listener`]) fills an [`Entry`] when a response's body is done
//! with (sent whole, or dropped because the client left) and hands it to [`AccessLog::record`],
//! which puts it on a bounded queue without waiting: a request never waits on the disk. One
//! thread of the log's own formats the entries and writes them through a buffer, flushed each
//! time the queue is empty. A disk slower than the requests fills the queue; an entry that
//! finds it full is not written but counted as lost (`gateway_access_log_lost_total` in
//! `/metrics`), and the writer says on standard error how many were lost since it last said
//! so. Loss over backpressure because a hit must not wait on a disk: nginx's buffered
//! `access_log` waits on the write instead, and a slow disk slows every request.
//!
//! # Reopening
//!
//! [`AccessLog::reopen`] (the CLI calls it on SIGHUP, as nginx reopens its logs on USR1) opens
//! the file at the path again; the writer flushes what it has to the old file, then writes to
//! the new one. Lines queued at the reopen go to the new file: none is lost, whichever file it
//! lands in.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderValue, Method, Uri, Version};
use serde::Serialize;

use crate::metrics::{Count, Metrics};

/// Entries the queue holds before further ones are lost: about 2 MiB, a few tenths of a
/// second of the fastest hits this machine serves.
pub const QUEUE: usize = 8192;

/// How lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// nginx's `combined`, then ` cache=WORD origin=HOST:PORT ttfb=SECONDS rt=SECONDS`.
    Combined,
    /// One JSON object a line.
    Json,
}

/// Where lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Standard output.
    Stdout,
    /// A file, appended to, created if need be.
    File(PathBuf),
}

impl Target {
    /// `-` for standard output, else a path.
    pub fn parse(s: &str) -> Self {
        if s == "-" { Self::Stdout } else { Self::File(PathBuf::from(s)) }
    }
}

/// Why the log cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum AccessLogError {
    /// The file cannot be opened for appending.
    #[error("access log {path} (--access-log): cannot be opened for appending: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The writer's thread could not be started.
    #[error("access log: its writer thread could not be started: {0}")]
    Thread(std::io::Error),
}

/// How the cache answered, for the log, where the response has no `X-Cache` field that says it
/// (the sensor-field gateway answers JSON): put it in the response's extensions.
#[derive(Clone, Copy, Debug)]
pub struct CacheResult(pub &'static str);

/// The origin a response came from, as `HOST:PORT`, in the response's extensions (none: no
/// origin was asked, as for a hit).
#[derive(Clone, Debug)]
pub struct Upstream(pub Arc<str>);

impl Upstream {
    /// The `HOST:PORT` of the origin at base URL `url` (the scheme's port when it names none).
    pub fn of(url: &str) -> Self {
        let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
        let has_port = authority.rsplit_once(':').is_some_and(|(_, p)| !p.is_empty() && !p.contains(']'));
        if has_port {
            return Self(authority.into());
        }
        let port = if scheme.eq_ignore_ascii_case("https") { 443 } else { 80 };
        Self(format!("{authority}:{port}").into())
    }
}

/// One request, as logged.
#[derive(Debug)]
pub struct Entry {
    /// The client's address.
    pub peer: SocketAddr,
    /// When the response ended (nginx's `$time_local` is the time the line is written).
    pub at: SystemTime,
    /// The request line.
    pub method: Method,
    /// Its target (path and query, as sent).
    pub target: Uri,
    /// Its protocol.
    pub version: Version,
    /// The response's status.
    pub status: u16,
    /// Body bytes handed to the connection (not the `Content-Length` claimed).
    pub bytes: u64,
    /// `Referer`, `User-Agent`.
    pub referer: Option<HeaderValue>,
    /// The client's `User-Agent`.
    pub agent: Option<HeaderValue>,
    /// How the cache answered, in `X-Cache`'s words.
    pub cache: Option<HeaderValue>,
    /// The origin asked.
    pub origin: Option<Arc<str>>,
    /// From the request's head read to the response's head handed to the connection.
    pub ttfb: Duration,
    /// From the request's head read to the response's body done with.
    pub total: Duration,
}

/// The access log: a handle the serving loop records entries with (cheap to clone).
#[derive(Clone)]
pub struct AccessLog(Arc<Shared>);

struct Shared {
    queue: SyncSender<Message>,
    target: Target,
    format: Format,
    /// A file opened by [`AccessLog::reopen`], for the writer to take.
    reopened: Mutex<Option<File>>,
    lost: Count,
    written: Count,
    metrics: Metrics,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Says on standard error what was lost, each second there was a loss: not the writer,
    /// which a slow disk holds in its write.
    reporter: Mutex<Option<std::thread::JoinHandle<()>>>,
    closed: std::sync::atomic::AtomicBool,
    capacity: usize,
}

// Entries are queued unboxed: the queue's slots are allocated once, and a hit allocates nothing
// for its line.
#[allow(clippy::large_enum_variant)]
enum Message {
    Line(Entry),
    /// Look at `reopened` now.
    Wake,
    /// Write what is queued, then end.
    Close,
}

impl AccessLog {
    /// Opens `target` (a file is created if need be and appended to) and starts the writer.
    ///
    /// # Errors
    /// The file cannot be opened, or the thread started.
    pub fn open(target: Target, format: Format) -> Result<Self, AccessLogError> {
        Self::with_queue(target, format, QUEUE)
    }

    /// [`AccessLog::open`] with a queue of `queue` entries.
    ///
    /// # Errors
    /// As [`AccessLog::open`].
    pub fn with_queue(target: Target, format: Format, queue: usize) -> Result<Self, AccessLogError> {
        let out: Box<dyn std::io::Write + Send> = match &target {
            Target::Stdout => Box::new(std::io::stdout()),
            Target::File(path) => Box::new(append(path)?),
        };
        let capacity = queue.max(1);
        let (tx, rx) = sync_channel(capacity);
        let mut metrics = Metrics::default();
        let lost = metrics.count(
            "gateway_access_log_lost",
            "Access-log lines not written: the queue to the disk was full (the disk is slower than the requests), or the write failed.",
        );
        let written = metrics.count("gateway_access_log_lines", "Access-log lines written.");
        let shared = Arc::new(Shared {
            queue: tx,
            target,
            format,
            reopened: Mutex::new(None),
            lost,
            written,
            metrics,
            writer: Mutex::new(None),
            reporter: Mutex::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
            capacity,
        });
        let s = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("access-log".into())
            .spawn(move || write_lines(&s, &rx, out))
            .map_err(AccessLogError::Thread)?;
        *shared.writer.lock().expect("no panic holding the writer") = Some(handle);
        let s = Arc::clone(&shared);
        let reporter = std::thread::Builder::new()
            .name("access-log-losses".into())
            .spawn(move || report_losses(&s))
            .map_err(AccessLogError::Thread)?;
        *shared.reporter.lock().expect("no panic holding the reporter") = Some(reporter);
        Ok(Self(shared))
    }

    /// Queues `entry` for writing, never waiting: a full queue counts it as lost.
    pub fn record(&self, entry: Entry) {
        match self.0.queue.try_send(Message::Line(entry)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.0.lost.inc();
            }
        }
    }

    /// Opens the file again at its path (after logrotate moved it): lines from now on go to
    /// the new file. Standard output is left as it is.
    ///
    /// # Errors
    /// The file cannot be opened; the log goes on to the file it had.
    pub fn reopen(&self) -> Result<(), AccessLogError> {
        let Target::File(path) = &self.0.target else { return Ok(()) };
        let file = append(path)?;
        *self.0.reopened.lock().expect("no panic holding the reopened file") = Some(file);
        // A full queue means the writer is busy: it looks at the new file after its batch.
        let _ = self.0.queue.try_send(Message::Wake);
        Ok(())
    }

    /// Where lines go.
    pub fn target(&self) -> &Target {
        &self.0.target
    }

    /// Lines written so far.
    pub fn written(&self) -> u64 {
        self.0.written.get()
    }

    /// Lines lost so far.
    pub fn lost(&self) -> u64 {
        self.0.lost.get()
    }

    /// The log's counters in the OpenMetrics text format, without the closing `# EOF`.
    pub fn metrics_text(&self) -> String {
        let mut text = self.0.metrics.render();
        if let Some(at) = text.rfind("# EOF") {
            text.truncate(at);
        }
        text
    }

    /// Writes what is queued and stops the writer; entries recorded after are lost (counted).
    pub fn close(&self) {
        let Some(handle) = self.0.writer.lock().expect("no panic holding the writer").take() else { return };
        // Waits for room: the writer is emptying the queue.
        let _ = self.0.queue.send(Message::Close);
        let _ = handle.join();
        self.0.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(reporter) = self.0.reporter.lock().expect("no panic holding the reporter").take() {
            reporter.thread().unpark();
            let _ = reporter.join();
        }
    }
}

fn append(path: &Path) -> Result<File, AccessLogError> {
    File::options()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|source| AccessLogError::Open { path: path.to_path_buf(), source })
}

/// The writer's loop: a batch is what the queue holds when it wakes, written through one
/// buffer and flushed when the queue is empty.
fn write_lines(s: &Shared, rx: &Receiver<Message>, out: Box<dyn std::io::Write + Send>) {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, out);
    let mut line = String::with_capacity(512);
    let mut closing = false;
    while !closing {
        let first = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        // A reopened file first: the lines now queued came after the reopen was asked for.
        if let Some(file) = s.reopened.lock().expect("no panic holding the reopened file").take() {
            let _ = out.flush();
            out = std::io::BufWriter::with_capacity(64 << 10, Box::new(file));
        }
        let mut next = first;
        let mut failed = 0u64;
        while let Some(message) = next {
            match message {
                Message::Line(entry) => {
                    line.clear();
                    format(&entry, s.format, &mut line);
                    if out.write_all(line.as_bytes()).is_ok() {
                        s.written.inc();
                    } else {
                        failed += 1;
                    }
                }
                Message::Wake => {}
                Message::Close => closing = true,
            }
            next = rx.try_recv().ok();
        }
        if out.flush().is_err() {
            // What was buffered is not known to have been written; the lines that failed at
            // once are counted, the error said below.
            failed += 1;
        }
        if failed > 0 {
            s.lost.inc_by(failed);
            eprintln!("access log {}: a write failed; lines counted as lost", s.target_name());
        }
    }
    let _ = out.flush();
}

/// Each second, and once more when the log is closed: how many lines were lost since it last
/// said, if any.
fn report_losses(s: &Shared) {
    let mut told = 0;
    loop {
        std::thread::park_timeout(Duration::from_secs(1));
        let closed = s.closed.load(std::sync::atomic::Ordering::SeqCst);
        let lost = s.lost.get();
        if lost > told {
            eprintln!(
                "access log {}: {} lines lost since the last report ({} in all, gateway_access_log_lost_total): the disk is slower than the requests (the queue of {} lines was full), or a write failed",
                s.target_name(),
                lost - told,
                lost,
                s.capacity,
            );
            told = lost;
        }
        if closed {
            return;
        }
    }
}

impl Shared {
    fn target_name(&self) -> String {
        match &self.target {
            Target::Stdout => "(standard output)".into(),
            Target::File(p) => p.display().to_string(),
        }
    }
}

/// `entry` as one line of `format`, newline included.
pub fn format(entry: &Entry, format: Format, out: &mut String) {
    match format {
        Format::Combined => combined(entry, out),
        Format::Json => json(entry, out),
    }
}

/// nginx's `combined`: `$remote_addr - $remote_user [$time_local] "$request" $status
/// $body_bytes_sent "$http_referer" "$http_user_agent"`, then the cache's fields.
fn combined(e: &Entry, out: &mut String) {
    let _ = write!(out, "{} - - [", e.peer.ip());
    time_local(e.at, out);
    out.push_str("] \"");
    escaped(e.method.as_str().as_bytes(), out);
    out.push(' ');
    escaped(target(&e.target, e.version).as_bytes(), out);
    out.push(' ');
    out.push_str(protocol(e.version));
    let _ = write!(out, "\" {} {} \"", e.status, e.bytes);
    quoted_field(e.referer.as_ref(), out);
    out.push_str("\" \"");
    quoted_field(e.agent.as_ref(), out);
    out.push_str("\" cache=");
    match &e.cache {
        Some(v) if !v.is_empty() && v.as_bytes().iter().all(|b| b.is_ascii_graphic()) => {
            out.push_str(v.to_str().unwrap_or("-"));
        }
        _ => out.push('-'),
    }
    out.push_str(" origin=");
    out.push_str(e.origin.as_deref().unwrap_or("-"));
    let _ = writeln!(out, " ttfb={:.6} rt={:.6}", e.ttfb.as_secs_f64(), e.total.as_secs_f64());
}

/// A request field's value as nginx logs it: `-` when absent or empty, escaped otherwise.
fn quoted_field(v: Option<&HeaderValue>, out: &mut String) {
    match v {
        Some(v) if !v.is_empty() => escaped(v.as_bytes(), out),
        _ => out.push('-'),
    }
}

/// nginx's default escaping of a logged variable: `"`, `\`, control bytes and bytes past ASCII
/// as `\xHH`, so that a line stays one line and its quoted fields end where they should.
fn escaped(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            let _ = write!(out, "\\x{b:02X}");
        } else {
            out.push(char::from(b));
        }
    }
}

/// The request target as nginx's `$request` has it: the path and query, or the absolute URL
/// an HTTP/1 client sent as its target (an HTTP/2 request's URI always holds `:scheme` and
/// `:authority`, which nginx leaves out).
fn target(uri: &Uri, version: Version) -> std::borrow::Cow<'_, str> {
    if uri.scheme().is_some() && version < Version::HTTP_2 {
        uri.to_string().into()
    } else {
        uri.path_and_query().map_or("/", |p| p.as_str()).into()
    }
}

/// The protocol as nginx's `$server_protocol` says it.
fn protocol(v: Version) -> &'static str {
    match v {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// `27/Nov/2026:20:05:48 +0000`: nginx's `$time_local`, in UTC (the gateway keeps no time zone).
fn time_local(at: SystemTime, out: &mut String) {
    let at = time::OffsetDateTime::from(at.max(UNIX_EPOCH));
    let _ = write!(
        out,
        "{}",
        at.format(time::macros::format_description!("[day]/[month repr:short]/[year]:[hour]:[minute]:[second] +0000"))
            .unwrap_or_default()
    );
}

/// `2026-11-27T20:05:48.123456Z` (RFC 3339, UTC, microseconds).
fn rfc3339(at: SystemTime) -> String {
    time::OffsetDateTime::from(at.max(UNIX_EPOCH))
        .format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
        ))
        .unwrap_or_default()
}

/// A JSON line: the same fields, named as in the combined line's extras, times in RFC 3339,
/// durations in seconds, numbers as numbers.
#[derive(Serialize)]
struct JsonLine<'a> {
    time: String,
    remote_addr: String,
    remote_user: Option<&'a str>,
    method: &'a str,
    target: std::borrow::Cow<'a, str>,
    protocol: &'static str,
    status: u16,
    body_bytes_sent: u64,
    referer: Option<std::borrow::Cow<'a, str>>,
    user_agent: Option<std::borrow::Cow<'a, str>>,
    cache: Option<std::borrow::Cow<'a, str>>,
    origin: Option<&'a str>,
    ttfb: f64,
    rt: f64,
}

fn json(e: &Entry, out: &mut String) {
    let text = |v: &'_ Option<HeaderValue>| {
        v.as_ref().filter(|v| !v.is_empty()).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned().into())
    };
    let line = JsonLine {
        time: rfc3339(e.at),
        remote_addr: e.peer.ip().to_string(),
        remote_user: None,
        method: e.method.as_str(),
        target: target(&e.target, e.version),
        protocol: protocol(e.version),
        status: e.status,
        body_bytes_sent: e.bytes,
        referer: text(&e.referer),
        user_agent: text(&e.agent),
        cache: text(&e.cache),
        origin: e.origin.as_deref(),
        ttfb: e.ttfb.as_secs_f64(),
        rt: e.total.as_secs_f64(),
    };
    out.push_str(&serde_json::to_string(&line).expect("a line of strings and numbers serialises"));
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            peer: "10.0.0.7:51234".parse().unwrap(),
            // 2026-11-27T20:05:48.000123Z
            at: UNIX_EPOCH + Duration::new(1_795_809_948, 123_000),
            method: Method::GET,
            target: "/a/b?c=1".parse().unwrap(),
            version: Version::HTTP_11,
            status: 200,
            bytes: 1024,
            referer: None,
            agent: Some(HeaderValue::from_static("curl/7.88.1 \"quoted\"")),
            cache: Some(HeaderValue::from_static("hit")),
            origin: None,
            ttfb: Duration::from_micros(123),
            total: Duration::from_micros(456),
        }
    }

    #[test]
    fn a_combined_line_is_nginx_s_then_the_cache_s_fields() {
        let mut out = String::new();
        format(&entry(), Format::Combined, &mut out);
        assert_eq!(
            out,
            "10.0.0.7 - - [27/Nov/2026:20:05:48 +0000] \"GET /a/b?c=1 HTTP/1.1\" 200 1024 \"-\" \"curl/7.88.1 \\x22quoted\\x22\" cache=hit origin=- ttfb=0.000123 rt=0.000456\n"
        );
    }

    #[test]
    fn a_json_line_has_the_same_fields_as_numbers_and_rfc3339() {
        let mut e = entry();
        e.origin = Some("10.0.0.2:80".into());
        e.version = Version::HTTP_2;
        let mut out = String::new();
        format(&e, Format::Json, &mut out);
        let v: serde_json::Value = serde_json::from_str(out.trim_end()).unwrap();
        assert_eq!(v["time"], "2026-11-27T20:05:48.000123Z");
        assert_eq!(v["protocol"], "HTTP/2.0");
        assert_eq!(v["status"], 200);
        assert_eq!(v["body_bytes_sent"], 1024);
        assert_eq!(v["user_agent"], "curl/7.88.1 \"quoted\"");
        assert_eq!(v["referer"], serde_json::Value::Null);
        assert_eq!(v["origin"], "10.0.0.2:80");
        assert_eq!(v["ttfb"], 0.000123);
    }

    #[test]
    fn dates_are_civil_dates() {
        // 2000-02-29 (a leap day of a century leap year) and 1970-01-01.
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000000Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000000Z");
        let mut out = String::new();
        time_local(UNIX_EPOCH + Duration::from_secs(1_709_251_199), &mut out);
        assert_eq!(out, "29/Feb/2024:23:59:59 +0000");
    }

    #[test]
    fn an_origin_is_logged_as_host_and_port() {
        assert_eq!(&*Upstream::of("http://10.0.0.2").0, "10.0.0.2:80");
        assert_eq!(&*Upstream::of("https://origin.example/base").0, "origin.example:443");
        assert_eq!(&*Upstream::of("http://127.0.0.1:8080").0, "127.0.0.1:8080");
        assert_eq!(&*Upstream::of("http://[::1]:8080/x").0, "[::1]:8080");
        assert_eq!(&*Upstream::of("http://[::1]").0, "[::1]:80");
    }
}
