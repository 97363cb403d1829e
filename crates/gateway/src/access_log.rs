//! The access log: one line per request, in nginx's `combined` format with the cache's fields
//! after it, or as JSON lines, written off the request path.
//!
//! # How a line gets to the disk
//!
//! The serving loop ([`crate::listener`]) fills an [`Entry`] when a response's body is done
//! with (sent whole, or dropped because the client left) and hands it to [`AccessLog::record`],
//! which puts it on a bounded queue without waiting: a request never waits on the disk. One
//! thread of the log's own formats the entries straight into a buffer of 64 KiB and writes the
//! buffer when it is full, or when [`Options::flush`] has passed since its oldest line went in
//! (nginx's `access_log ... buffer=64k flush=1s`): a line can be read at most that long after
//! its response. A disk slower than the requests fills the queue; an entry that finds it full
//! is not written but counted as lost (`gateway_access_log_lost_total` in `/metrics`), and the
//! writer says on standard error how many were lost since it last said so. Loss over
//! backpressure because a hit must not wait on a disk: nginx's buffered `access_log` waits on
//! the write instead, and a slow disk slows every request.
//!
//! While lines keep coming the writer does not wait on the queue but sleeps [`TICK`] between
//! takes from it: a receiver blocked on the queue makes every request's send a wake-up (a
//! futex call) on the request path, which cost more than the line itself.
//!
//! # Reopening and switching
//!
//! [`AccessLog::reopen`] (the CLI calls it on SIGHUP, as nginx reopens its logs on USR1) opens
//! the file at the path again; [`AccessLog::switch`] opens another target, format or interval
//! (a reload that changes `access-log`). Either way the writer writes what it has buffered to
//! the old file, closes it, then writes to the new one. Lines queued at the switch go to the
//! new file: none is lost, whichever file it lands in.

use std::fs::File;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderValue, Method, Uri, Version};
use serde::Serialize;

use crate::metrics::{Count, Metrics};

/// Entries the queue holds before further ones are lost: about 2 MiB, a few tenths of a
/// second of the fastest hits this machine serves.
pub const QUEUE: usize = 8192;

/// How long a line may wait in the buffer by default (`--access-log-flush`): nginx's example
/// `flush=1s`, long enough that a busy log fills its buffer before the interval ends.
pub const FLUSH: Duration = Duration::from_secs(1);

/// Bytes buffered before a write: nginx's example `buffer=64k`.
const BUFFER: usize = 64 << 10;

/// Room kept at the buffer's end for one more line, so that the buffer is written before a
/// usual line would make it grow.
const SLACK: usize = 4 << 10;

/// How long the writer sleeps between takes from a queue that held lines: short beside the
/// queue (8,192 lines in 10 ms is 800,000 a second) and beside [`FLUSH`].
pub const TICK: Duration = Duration::from_millis(10);

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

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Stdout => f.write_str("(standard output)"),
            Self::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Where lines go, how they are written, and how long one may wait in the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Where.
    pub target: Target,
    /// How.
    pub format: Format,
    /// The longest a line waits in the buffer before it is written (zero: written as soon as
    /// the queue is empty).
    pub flush: Duration,
}

impl Options {
    /// `target` in `format`, flushed every [`FLUSH`].
    pub fn new(target: Target, format: Format) -> Self {
        Self { target, format, flush: FLUSH }
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
    /// What the log writes now (or will, once the writer has taken [`Shared::next`]).
    options: Mutex<Options>,
    /// An output opened by a reopen or a switch, for the writer to take.
    next: Mutex<Option<Opened>>,
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

/// An output opened, not yet written to: what a reload checks before it takes anything.
pub struct Opened {
    out: Box<dyn Write + Send>,
    options: Options,
}

impl Opened {
    /// Opens `options`' target (a file is created if need be, and appended to).
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(options: Options) -> Result<Self, AccessLogError> {
        let out: Box<dyn Write + Send> = match &options.target {
            Target::Stdout => Box::new(std::io::stdout()),
            Target::File(path) => Box::new(append(path)?),
        };
        Ok(Self { out, options })
    }

    /// What it was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }
}

// Entries are queued unboxed: the queue's slots are allocated once, and a hit allocates nothing
// for its line.
#[allow(clippy::large_enum_variant)]
enum Message {
    Line(Entry),
    /// Look at `next` now.
    Wake,
    /// Write what is queued, then end.
    Close,
}

impl AccessLog {
    /// Opens `options`' target (a file is created if need be and appended to) and starts the
    /// writer.
    ///
    /// # Errors
    /// The file cannot be opened, or the thread started.
    pub fn open(options: Options) -> Result<Self, AccessLogError> {
        Self::with_queue(options, QUEUE)
    }

    /// [`AccessLog::open`] with a queue of `queue` entries.
    ///
    /// # Errors
    /// As [`AccessLog::open`].
    pub fn with_queue(options: Options, queue: usize) -> Result<Self, AccessLogError> {
        Self::start(Opened::open(options)?, queue)
    }

    /// Starts the writer on `opened`, with a queue of `queue` entries.
    ///
    /// # Errors
    /// The thread cannot be started.
    fn start(opened: Opened, queue: usize) -> Result<Self, AccessLogError> {
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
            options: Mutex::new(opened.options.clone()),
            next: Mutex::new(None),
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
            .spawn(move || Writer::new(&s, opened).run(&rx))
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
        let mut options = self.0.options.lock().expect("no panic holding the options");
        if options.target == Target::Stdout {
            return Ok(());
        }
        let opened = Opened::open(options.clone())?;
        self.take(&mut options, opened);
        Ok(())
    }

    /// Writes to `opened` from now on, in its format and with its interval: what is buffered
    /// goes to the old output first, which is then closed.
    pub fn switch(&self, opened: Opened) {
        let mut options = self.0.options.lock().expect("no panic holding the options");
        self.take(&mut options, opened);
    }

    fn take(&self, options: &mut Options, opened: Opened) {
        options.clone_from(&opened.options);
        *self.0.next.lock().expect("no panic holding the next output") = Some(opened);
        // A full queue means the writer is busy: it looks at the new output after its batch.
        let _ = self.0.queue.try_send(Message::Wake);
    }

    /// What the log writes (or will, once the writer has taken a switch).
    pub fn options(&self) -> Options {
        self.0.options.lock().expect("no panic holding the options").clone()
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

    /// Writes what is queued and buffered and stops the writer; entries recorded after are
    /// lost (counted).
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

/// The writer's thread: the queue taken in batches, formatted into one buffer, written when it
/// is full or its oldest line has waited the interval.
struct Writer<'a> {
    s: &'a Shared,
    out: Box<dyn Write + Send>,
    options: Options,
    buf: Vec<u8>,
    /// Lines in `buf`, counted as written or lost when it is.
    lines: u64,
    /// When `buf`'s oldest line went in.
    since: Option<Instant>,
    clock: Clock,
}

impl<'a> Writer<'a> {
    fn new(s: &'a Shared, opened: Opened) -> Self {
        Self {
            s,
            out: opened.out,
            options: opened.options,
            buf: Vec::with_capacity(BUFFER),
            lines: 0,
            since: None,
            clock: Clock::default(),
        }
    }

    fn run(mut self, rx: &Receiver<Message>) {
        let mut busy = false;
        let mut closing = false;
        while !closing {
            let due = self.since.map(|since| since + self.options.flush);
            let first = if busy && !self.options.flush.is_zero() {
                let until = due.map_or(TICK, |d| d.saturating_duration_since(Instant::now()));
                std::thread::sleep(TICK.min(until));
                match rx.try_recv() {
                    Ok(m) => Some(m),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => break,
                }
            } else {
                let wait = due.map(|d| d.saturating_duration_since(Instant::now()));
                match wait.map_or_else(|| rx.recv().map_err(|_| RecvTimeoutError::Disconnected), |w| rx.recv_timeout(w))
                {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            };
            // A new output first: the lines now queued came after it was asked for.
            let next = self.s.next.lock().expect("no panic holding the next output").take();
            if let Some(opened) = next {
                self.flush();
                self.out = opened.out;
                self.options = opened.options;
            }
            let mut taken = 0usize;
            let mut message = first;
            while let Some(m) = message {
                match m {
                    Message::Line(entry) => {
                        self.line(&entry);
                        taken += 1;
                    }
                    Message::Wake => {}
                    Message::Close => closing = true,
                }
                message = rx.try_recv().ok();
            }
            busy = taken > 0;
            if self.since.is_some_and(|since| since.elapsed() >= self.options.flush) {
                self.flush();
            }
        }
        self.flush();
    }

    fn line(&mut self, entry: &Entry) {
        if self.since.is_none() {
            self.since = Some(Instant::now());
        }
        format_line(entry, self.options.format, &mut self.clock, &mut self.buf);
        self.lines += 1;
        if self.buf.len() >= BUFFER - SLACK {
            self.flush();
        }
    }

    /// Writes the buffer: its lines counted as written, or, if the write fails, as lost.
    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        match self.out.write_all(&self.buf).and_then(|()| self.out.flush()) {
            Ok(()) => {
                self.s.written.inc_by(self.lines);
            }
            Err(e) => {
                self.s.lost.inc_by(self.lines);
                eprintln!(
                    "access log {}: a write failed ({e}); its {} lines counted as lost",
                    self.options.target, self.lines
                );
            }
        }
        self.buf.clear();
        self.lines = 0;
        self.since = None;
    }
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
            let target = s.options.lock().expect("no panic holding the options").target.clone();
            eprintln!(
                "access log {target}: {} lines lost since the last report ({lost} in all, gateway_access_log_lost_total): the disk is slower than the requests (the queue of {} lines was full), or a write failed",
                lost - told,
                s.capacity,
            );
            told = lost;
        }
        if closed {
            return;
        }
    }
}

/// The formatted time of the last second a line was written in: lines come many a second,
/// and the calendar is worked out once for them all.
#[derive(Default)]
struct Clock {
    /// Seconds since the epoch of the times below (none yet: `None`).
    second: Option<u64>,
    /// `27/Nov/2026:20:05:48 +0000`.
    local: Vec<u8>,
    /// `2026-11-27T20:05:48`.
    rfc3339: Vec<u8>,
}

impl Clock {
    /// The second `at` falls in, formatted, and its microseconds.
    fn at(&mut self, at: SystemTime) -> (&[u8], &[u8], u32) {
        let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        if self.second != Some(since.as_secs()) {
            let t = time::OffsetDateTime::from(UNIX_EPOCH + Duration::from_secs(since.as_secs()));
            self.local.clear();
            let _ = t.format_into(
                &mut self.local,
                time::macros::format_description!("[day]/[month repr:short]/[year]:[hour]:[minute]:[second] +0000"),
            );
            self.rfc3339.clear();
            let _ = t.format_into(
                &mut self.rfc3339,
                time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]"),
            );
            self.second = Some(since.as_secs());
        }
        (&self.local, &self.rfc3339, since.subsec_micros())
    }
}

/// `entry` as one line of `format`, newline included (a test's, or a caller's; the writer
/// keeps its clock from line to line).
pub fn format(entry: &Entry, format: Format, out: &mut Vec<u8>) {
    format_line(entry, format, &mut Clock::default(), out);
}

fn format_line(entry: &Entry, format: Format, clock: &mut Clock, out: &mut Vec<u8>) {
    match format {
        Format::Combined => combined(entry, clock, out),
        Format::Json => json(entry, clock, out),
    }
}

/// nginx's `combined`: `$remote_addr - $remote_user [$time_local] "$request" $status
/// $body_bytes_sent "$http_referer" "$http_user_agent"`, then the cache's fields.
fn combined(e: &Entry, clock: &mut Clock, out: &mut Vec<u8>) {
    address(e.peer.ip(), out);
    out.extend_from_slice(b" - - [");
    out.extend_from_slice(clock.at(e.at).0);
    out.extend_from_slice(b"] \"");
    escaped(e.method.as_str().as_bytes(), out);
    out.push(b' ');
    escaped(target(&e.target, e.version).as_bytes(), out);
    out.push(b' ');
    out.extend_from_slice(protocol(e.version).as_bytes());
    out.extend_from_slice(b"\" ");
    decimal(u64::from(e.status), out);
    out.push(b' ');
    decimal(e.bytes, out);
    out.extend_from_slice(b" \"");
    quoted_field(e.referer.as_ref(), out);
    out.extend_from_slice(b"\" \"");
    quoted_field(e.agent.as_ref(), out);
    out.extend_from_slice(b"\" cache=");
    match &e.cache {
        Some(v) if !v.is_empty() && v.as_bytes().iter().all(u8::is_ascii_graphic) => {
            out.extend_from_slice(v.as_bytes());
        }
        _ => out.push(b'-'),
    }
    out.extend_from_slice(b" origin=");
    out.extend_from_slice(e.origin.as_deref().unwrap_or("-").as_bytes());
    out.extend_from_slice(b" ttfb=");
    seconds(e.ttfb, out);
    out.extend_from_slice(b" rt=");
    seconds(e.total, out);
    out.push(b'\n');
}

/// Seconds to the nearest microsecond, as nginx's `$request_time` (to the millisecond) but
/// finer: `0.000123`. Digits pushed by hand, as every number of a line: `core::fmt` (a
/// float's, or even an integer's through `write!`) cost about a third of a line's
/// instructions.
fn seconds(d: Duration, out: &mut Vec<u8>) {
    let micros = d.as_secs().saturating_mul(1_000_000).saturating_add(u64::from(d.subsec_nanos() + 500) / 1000);
    decimal(micros / 1_000_000, out);
    out.push(b'.');
    let fraction = micros % 1_000_000;
    let at = out.len();
    decimal(fraction + 1_000_000, out);
    // `1` then six digits: the `1` gives way to the point's leading zeros.
    out.remove(at);
}

/// `n` in decimal.
fn decimal(mut n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// An address as `Display` writes it; an IPv4 one by hand (see [`seconds`]).
fn address(ip: IpAddr, out: &mut Vec<u8>) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                decimal(u64::from(octet), out);
            }
        }
        IpAddr::V6(_) => {
            let _ = write!(out, "{ip}");
        }
    }
}

/// A request field's value as nginx logs it: `-` when absent or empty, escaped otherwise.
fn quoted_field(v: Option<&HeaderValue>, out: &mut Vec<u8>) {
    match v {
        Some(v) if !v.is_empty() => escaped(v.as_bytes(), out),
        _ => out.push(b'-'),
    }
}

/// nginx's default escaping of a logged variable: `"`, `\`, control bytes and bytes past ASCII
/// as `\xHH`, so that a line stays one line and its quoted fields end where they should.
fn escaped(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in bytes {
        if b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b) {
            out.extend_from_slice(&[b'\\', b'x', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
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

/// An address serialised as text without a `String` made for it.
struct Addr(IpAddr);

impl Serialize for Addr {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&self.0)
    }
}

/// A JSON line: the same fields, named as in the combined line's extras, times in RFC 3339
/// (`2026-11-27T20:05:48.123456Z`, UTC, microseconds), durations in seconds, numbers as
/// numbers.
#[derive(Serialize)]
struct JsonLine<'a> {
    time: &'a str,
    remote_addr: Addr,
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

fn json(e: &Entry, clock: &mut Clock, out: &mut Vec<u8>) {
    fn text(v: &Option<HeaderValue>) -> Option<std::borrow::Cow<'_, str>> {
        v.as_ref().filter(|v| !v.is_empty()).map(|v| String::from_utf8_lossy(v.as_bytes()))
    }
    let (_, day, micros) = clock.at(e.at);
    // `YYYY-MM-DDTHH:MM:SS` (19 bytes, or more past the year 9999), `.`, six digits, `Z`.
    let mut time = [0u8; 40];
    let mut cursor = std::io::Cursor::new(&mut time[..]);
    let _ = cursor.write_all(day);
    let _ = write!(cursor, ".{micros:06}Z");
    let end = usize::try_from(cursor.position()).unwrap_or(0);
    let line = JsonLine {
        time: std::str::from_utf8(&time[..end]).unwrap_or(""),
        remote_addr: Addr(e.peer.ip()),
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
    serde_json::to_writer(&mut *out, &line).expect("a line of strings and numbers serialises");
    out.push(b'\n');
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

    fn line(e: &Entry, f: Format) -> String {
        let mut out = Vec::new();
        format(e, f, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_combined_line_is_nginx_s_then_the_cache_s_fields() {
        assert_eq!(
            line(&entry(), Format::Combined),
            "10.0.0.7 - - [27/Nov/2026:20:05:48 +0000] \"GET /a/b?c=1 HTTP/1.1\" 200 1024 \"-\" \"curl/7.88.1 \\x22quoted\\x22\" cache=hit origin=- ttfb=0.000123 rt=0.000456\n"
        );
        let mut e = entry();
        e.agent = Some(HeaderValue::from_bytes(b"caf\xc3\xa9\\").unwrap());
        e.ttfb = Duration::new(2, 999_999_600);
        e.total = Duration::new(12, 345_678_400);
        let l = line(&e, Format::Combined);
        assert!(l.contains("\"caf\\xC3\\xA9\\x5C\" cache=hit"), "{l}");
        assert!(l.ends_with(" ttfb=3.000000 rt=12.345678\n"), "rounded to the microsecond: {l}");
        e.peer = "[2001:db8::7]:443".parse().unwrap();
        e.ttfb = Duration::ZERO;
        e.total = Duration::new(100_000, 10_000);
        e.status = 404;
        e.bytes = u64::MAX;
        let l = line(&e, Format::Combined);
        assert!(l.starts_with("2001:db8::7 - - ["), "{l}");
        assert!(l.contains("\" 404 18446744073709551615 \""), "{l}");
        assert!(l.ends_with(" ttfb=0.000000 rt=100000.000010\n"), "{l}");
    }

    #[test]
    fn a_json_line_has_the_same_fields_as_numbers_and_rfc3339() {
        let mut e = entry();
        e.origin = Some("10.0.0.2:80".into());
        e.version = Version::HTTP_2;
        let v: serde_json::Value = serde_json::from_str(line(&e, Format::Json).trim_end()).unwrap();
        assert_eq!(v["time"], "2026-11-27T20:05:48.000123Z");
        assert_eq!(v["remote_addr"], "10.0.0.7");
        assert_eq!(v["protocol"], "HTTP/2.0");
        assert_eq!(v["status"], 200);
        assert_eq!(v["body_bytes_sent"], 1024);
        assert_eq!(v["user_agent"], "curl/7.88.1 \"quoted\"");
        assert_eq!(v["referer"], serde_json::Value::Null);
        assert_eq!(v["origin"], "10.0.0.2:80");
        assert_eq!(v["ttfb"], 0.000123);
    }

    fn times(clock: &mut Clock, at: SystemTime) -> (String, String) {
        let (local, day, micros) = clock.at(at);
        (String::from_utf8(local.to_vec()).unwrap(), format!("{}.{micros:06}Z", std::str::from_utf8(day).unwrap()))
    }

    #[test]
    fn dates_are_civil_dates() {
        let mut clock = Clock::default();
        // 2000-02-29 (a leap day of a century leap year) and 1970-01-01.
        assert_eq!(times(&mut clock, UNIX_EPOCH + Duration::from_secs(951_782_400)).1, "2000-02-29T00:00:00.000000Z");
        assert_eq!(times(&mut clock, UNIX_EPOCH).1, "1970-01-01T00:00:00.000000Z");
        assert_eq!(times(&mut clock, UNIX_EPOCH + Duration::from_secs(1_709_251_199)).0, "29/Feb/2024:23:59:59 +0000");
    }

    #[test]
    fn the_clock_formats_each_second_once_and_never_keeps_a_second_gone() {
        let mut clock = Clock::default();
        let base = UNIX_EPOCH + Duration::from_secs(1_709_251_199);
        // In order, within a second, across midnight, and back (lines leave the queue in the
        // order their responses ended, not their times').
        for (offset_ms, local, rfc) in [
            (0, "29/Feb/2024:23:59:59 +0000", "2024-02-29T23:59:59.000000Z"),
            (999, "29/Feb/2024:23:59:59 +0000", "2024-02-29T23:59:59.999000Z"),
            (1_000, "01/Mar/2024:00:00:00 +0000", "2024-03-01T00:00:00.000000Z"),
            (1_250, "01/Mar/2024:00:00:00 +0000", "2024-03-01T00:00:00.250000Z"),
            (500, "29/Feb/2024:23:59:59 +0000", "2024-02-29T23:59:59.500000Z"),
        ] {
            let got = times(&mut clock, base + Duration::from_millis(offset_ms));
            assert_eq!((got.0.as_str(), got.1.as_str()), (local, rfc), "{offset_ms} ms past");
        }
    }

    #[test]
    fn an_origin_is_logged_as_host_and_port() {
        assert_eq!(&*Upstream::of("http://10.0.0.2").0, "10.0.0.2:80");
        assert_eq!(&*Upstream::of("https://origin.example/base").0, "origin.example:443");
        assert_eq!(&*Upstream::of("http://127.0.0.1:8080").0, "127.0.0.1:8080");
        assert_eq!(&*Upstream::of("http://[::1]:8080/x").0, "[::1]:8080");
        assert_eq!(&*Upstream::of("http://[::1]").0, "[::1]:80");
    }

    /// An output that keeps what is written to it and the size of each write.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<(Vec<u8>, Vec<usize>)>>);

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut s = self.0.lock().unwrap();
            s.0.extend_from_slice(buf);
            s.1.push(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn writes(&self) -> Vec<usize> {
            self.0.lock().unwrap().1.clone()
        }
        /// The `bytes` field of each line written, which the tests number lines by.
        fn numbers(&self) -> Vec<u64> {
            let s = self.0.lock().unwrap();
            String::from_utf8_lossy(&s.0)
                .lines()
                .map(|l| l.split("\" 200 ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap())
                .collect()
        }
    }

    fn log_into(sink: &Sink, flush: Duration) -> AccessLog {
        let options = Options { target: Target::Stdout, format: Format::Combined, flush };
        AccessLog::start(Opened { out: Box::new(sink.clone()), options }, QUEUE).unwrap()
    }

    fn numbered(n: u64) -> Entry {
        Entry { bytes: n, ..entry() }
    }

    #[test]
    fn lines_wait_in_the_buffer_for_the_interval_or_a_full_buffer_then_go_in_one_write() {
        let sink = Sink::default();
        let log = log_into(&sink, Duration::from_secs(3600));
        // Lines a while apart: a writer that wrote whenever the queue was empty would write
        // nearly each on its own.
        for n in 0..100 {
            log.record(numbered(n));
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(sink.writes(), [0usize; 0], "nothing written before the interval, the buffer not full");
        log.close();
        assert_eq!(sink.writes().len(), 1, "written whole at the close");
        assert_eq!(sink.numbers(), (0..100).collect::<Vec<_>>());
        assert_eq!((log.written(), log.lost()), (100, 0));

        // More than a buffer holds: written a buffer at a time.
        let sink = Sink::default();
        let log = log_into(&sink, Duration::from_secs(3600));
        for n in 0..2_000 {
            log.record(numbered(n));
        }
        log.close();
        let writes = sink.writes();
        let bytes: usize = writes.iter().sum();
        assert!(writes.len() <= bytes / (BUFFER - SLACK) + 1, "{} writes of {bytes} bytes", writes.len());
        assert!(writes[..writes.len() - 1].iter().all(|w| *w >= BUFFER - SLACK), "{writes:?}");
        assert_eq!(sink.numbers(), (0..2_000).collect::<Vec<_>>());

        // A line alone is written once the interval has passed, not before.
        let sink = Sink::default();
        let log = log_into(&sink, Duration::from_millis(300));
        let recorded = Instant::now();
        log.record(numbered(7));
        let deadline = recorded + Duration::from_secs(60);
        while sink.writes().is_empty() {
            assert!(Instant::now() < deadline, "the line was never written");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(recorded.elapsed() >= Duration::from_millis(300), "written after {:?}", recorded.elapsed());
        assert_eq!(sink.numbers(), [7]);
        log.close();
    }

    #[test]
    fn a_switch_writes_what_is_buffered_to_the_old_output_and_the_rest_to_the_new() {
        let (old, new) = (Sink::default(), Sink::default());
        let log = log_into(&old, Duration::from_secs(3600));
        for n in 0..50 {
            log.record(numbered(n));
        }
        let options = Options { target: Target::File("/new".into()), format: Format::Combined, flush: FLUSH };
        log.switch(Opened { out: Box::new(new.clone()), options: options.clone() });
        assert_eq!(log.options(), options);
        for n in 50..80 {
            log.record(numbered(n));
        }
        // The old output is written to, and dropped, without a close.
        let deadline = Instant::now() + Duration::from_secs(60);
        while Arc::strong_count(&old.0) > 1 {
            assert!(Instant::now() < deadline, "the old output was never let go");
            std::thread::sleep(Duration::from_millis(5));
        }
        log.close();
        // Each line in one output: those before the switch in order, the rest in the new.
        let (before, after) = (old.numbers(), new.numbers());
        assert_eq!([before, after].concat(), (0..80).collect::<Vec<_>>());
        assert_eq!((log.written(), log.lost()), (80, 0));
    }
}
