//! `switchyard field serve` and `switchyard gateway serve`: the sensor-field emulator and the
//! caching gateway in front of it.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use switchyard_core::cache::{AgeFrom, Lookup};
use switchyard_core::place::sla::write::WriteRule;
use switchyard_core::place::sla::{RouteKind, Sla};
use switchyard_gateway::access_log::AccessLog;
use switchyard_gateway::config::{self, ConfigErrors, Mode, Resolved, Running, Settings};
use switchyard_gateway::field::FieldConfig;
use switchyard_gateway::listener::ServeOptions;
use switchyard_gateway::origins::{OriginSpec, parse_sla};
use switchyard_sim::models::sensor::{ChangeModel, FieldSpec, Stations};

/// Serve a sensor field over HTTP: the simulator's field in real time, with its access
/// links, delays and costs (Yates ch. 5), for a gateway to sit in front of.
///
/// Reads: GET /v1/sensors/{location}. The field's shape: GET /v1/field. The true value now
/// (for measuring deviation): GET /v1/truth/{location}. Counters: GET /metrics.
///
/// Examples:
///
///   switchyard field serve
///
///   switchyard field serve --field lab --listen 127.0.0.1:7100 --time-scale 0.1
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct FieldArgs {
    #[command(subcommand)]
    command: FieldCommand,
}

#[derive(Subcommand, Debug)]
enum FieldCommand {
    /// Serve the field until interrupted.
    Serve(FieldServe),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum FieldKind {
    /// Yates's 1,000-location lattice.
    Lattice,
    /// The Intel lab trace's light readings (--lab-data, --lab-locs).
    Lab,
}

#[derive(Args, Debug)]
struct FieldServe {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7100")]
    listen: SocketAddr,
    /// Which field.
    #[arg(long, value_enum, default_value_t = FieldKind::Lattice)]
    field: FieldKind,
    /// Lattice: how values change.
    #[arg(long, value_enum, default_value_t = Changes::Correlated)]
    changes: Changes,
    /// Lattice: changes a second.
    #[arg(long, default_value_t = 90.0)]
    rate: f64,
    #[command(flatten)]
    lab: crate::reproduce_cache::LabArgs,
    /// Wall seconds per model second: 1 is real time, 0.01 a hundred times as fast.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Queries a second each base station's link takes (the thesis: 25 on the lattice).
    #[arg(long, default_value_t = 25.0)]
    link_capacity: f64,
    /// The longest a read may wait for its link, model seconds (the thesis: 2).
    #[arg(long, default_value_t = 2.0)]
    max_wait: f64,
    /// Seed of the field's values and changes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also answer reads over UDP on this address: a datagram `read LOCATION` gets the JSON
    /// of /v1/sensors/LOCATION back.
    #[arg(long)]
    udp: Option<SocketAddr>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    /// nginx's combined format, then cache=, origin=, ttfb=, rt=.
    Combined,
    /// One JSON object a line.
    Json,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Changes {
    /// Fresh draws from N(0, σ).
    Independent,
    /// Correlated in space and time (Jindal and Psounis).
    Correlated,
}

/// Serve sensor readings through a freshness-bounded cache with one of Yates's seven lookup
/// policies, reading the field (switchyard field serve) on a miss.
///
/// GET /v1/readings/{location}?max_age=SECONDS answers the value, when it was sensed, its
/// age, whether it is approximate and from which locations. Concurrent misses of one location
/// make one read of the field (except under simple and all-misses, which do not coalesce).
/// GET /metrics: hits, approximate hits, misses, coalesced waits, upstream reads and
/// failures, stale answers, cost.
///
/// With --origin URL it sits in front of any HTTP origin instead, as a shared HTTP cache
/// (RFC 9111): a response is kept as long as the origin's Surrogate-Control, Cache-Control
/// (s-maxage, max-age) or Expires says, one per set of the request fields its Vary names;
/// stale ones are revalidated with If-None-Match / If-Modified-Since; a client's own
/// conditional or single-range request is answered from what is kept; other methods pass
/// through, and an unsafe one invalidates its target. Concurrent misses of one URL make one
/// origin read. X-Cache (hit, miss, coalesced, revalidated, stale, pass), Age, X-Cache-Stale
/// and, for a response not kept, X-Cache-Store (the reason) say how each answer was made.
/// `bench/cache-tests.sh` runs the public HTTP cache test suite through it and nginx.
///
/// Examples:
///
///   switchyard gateway serve --field http://127.0.0.1:7100
///
///   switchyard gateway serve --origin http://127.0.0.1:8080 --stale-while-revalidate 60
///
///   curl 'http://127.0.0.1:7000/v1/readings/42?max_age=5'
///
///   switchyard gateway serve --policy greedy-age --ttl 88.9 --stale-if-error 60
///
/// As a site runs it: HTTPS with HTTP/2 (--tls-cert, --tls-key; `kill -HUP` reads them again
/// without dropping a connection) and a graceful stop (`kill -TERM`: what is in flight
/// finishes, within --drain-timeout):
///
///   switchyard gateway serve --origin http://127.0.0.1:8080 --listen 0.0.0.0:443 \
///     --tls-cert /etc/ssl/site.pem --tls-key /etc/ssl/private/site.key \
///     --access-log /var/log/switchyard/access.log
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub(crate) struct GatewayArgs {
    #[command(subcommand)]
    command: GatewayCommand,
}

#[derive(Subcommand, Debug)]
enum GatewayCommand {
    /// Serve until interrupted.
    Serve(Box<GatewayServe>),
    /// Serve as one of Cacheflow's cooperating gateways (Dou 2011 ch. 4).
    Coop(CoopServe),
}

/// One of Cacheflow's cooperating gateways: an LRU of objects read from an origin, its adds and
/// evictions told to its neighbours in batches, evicting first what a neighbour also holds.
///
/// A client sends a set's keys (one per line) to its own gateway, POST /v1/coop/local, and to
/// each of that gateway's neighbours (GET /v1/coop/neighbours), POST /v1/coop/remote, at once;
/// the local gateway answers what it holds and loads what no neighbour holds, and names in
/// X-Cacheflow-Ignore any neighbour not worth waiting for. Answers are framed objects: the
/// key's length (2 bytes, big-endian), the key, the body's length (4 bytes), the body.
///
/// The batches of changes to a neighbour are numbered: one it refuses, or one that does not
/// follow the last it took (it or this gateway restarted), is followed by a snapshot of
/// everything held, which replaces its view. A neighbour that is down is sent each batch
/// again until it takes it, at most --outbox-limit changes kept for it (then one snapshot).
/// /metrics counts per neighbour the batches taken, snapshots, refusals, failed sendings,
/// overflows and the changes still owed.
///
/// Example, three gateways on a ring in front of one origin:
///
///   switchyard gateway coop --listen 127.0.0.1:7201 --origin http://127.0.0.1:8080 \
///     --neighbour http://127.0.0.1:7202 --neighbour http://127.0.0.1:7203
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
struct CoopServe {
    /// Address to listen on.
    #[arg(long)]
    listen: SocketAddr,
    /// This gateway's URL as its neighbours reach it (default: http:// and --listen).
    #[arg(long)]
    me: Option<String>,
    /// The origin's base URL; object KEY is read from ORIGIN + KEY.
    #[arg(long)]
    origin: String,
    /// A neighbour's base URL (repeat; Cacheflow uses two).
    #[arg(long = "neighbour")]
    neighbours: Vec<String>,
    /// Objects kept (Cacheflow: 600 of 50 KB).
    #[arg(long, default_value_t = 600)]
    capacity: usize,
    /// Changes buffered per neighbour before they are sent (Cacheflow's L; 0 sends at once).
    #[arg(long, default_value_t = 0)]
    link_buffer: usize,
    /// Fewest objects of a request a neighbour must hold to be waited for (0: always).
    #[arg(long, default_value_t = 0)]
    threshold: usize,
    /// Evict in plain LRU order, ignoring what neighbours hold.
    #[arg(long)]
    no_dedup: bool,
    /// The longest a read of the origin may take, seconds.
    #[arg(long, default_value_t = 10.0)]
    upstream_timeout: f64,
    /// Changes kept for a neighbour that has not taken them (it is down, or slow). Past this
    /// many they are dropped, and the neighbour gets one snapshot of everything held when it is
    /// back instead: what a neighbour that is down costs in memory is bounded by this and
    /// --capacity, however long it is down.
    #[arg(long, default_value_t = switchyard_gateway::coop::OUTBOX_LIMIT, value_parser = clap::value_parser!(usize))]
    outbox_limit: usize,
}

#[derive(Args, Debug)]
struct GatewayServe {
    /// Read the settings from this TOML file: one key for each flag of `gateway serve`, named
    /// as the flag without `--` (`max-memory = "2GiB"`, `h2c = true`), lists as arrays
    /// (`origin = ["http://a:8080@0.4", { url = "http://b:8080", price = 1 }]`,
    /// `purge-from = ["10.0.0.0/8", "::1"]`); examples/gateway.toml is a sample. A flag given
    /// on the command line overrides the file's key; an unknown key is an error. On SIGHUP the
    /// file is read again (the flags still override it) and the gateway takes its origins,
    /// route, sla, TLS files, purge-from, purge-token-file, max-memory (a smaller bound
    /// evicts at once, down to it) and access-log, log-format and access-log-flush (a new path
    /// is opened before anything is taken; the old file gets its buffered lines, then is
    /// closed); a change to any other key (listen, h2c, eviction, turning the log on or off, ...) is
    /// refused with a line naming it, and a file with any error is refused whole: the running
    /// configuration stays as it was.
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Check the settings (--config's file and the flags) and exit: 0 with a line saying what
    /// would be served, or 2 with every error found, each naming the file, line and key. The
    /// TLS files and the purge token are read; nothing listens.
    #[arg(long)]
    check_config: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7000")]
    listen: SocketAddr,
    /// Serve HTTPS with this certificate chain (PEM: the server's certificate first, then
    /// its intermediates); needs --tls-key. TLS 1.3 and 1.2; ALPN offers h2, then http/1.1,
    /// so clients that can speak HTTP/2 do. On SIGHUP both files are read again: new
    /// connections get the new certificate, those open keep theirs; a file that cannot be used
    /// is refused with a line saying which and why, and the previous certificate serves on.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<std::path::PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8 `PRIVATE KEY`, `RSA PRIVATE KEY` or
    /// `EC PRIVATE KEY`).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<std::path::PathBuf>,
    /// Without TLS: accept cleartext HTTP/2 from clients that know it is spoken here (prior
    /// knowledge, RFC 9113 §3.3; curl --http2-prior-knowledge) beside HTTP/1.1. Off by
    /// default, as in nginx and Varnish; `Upgrade: h2c` is not offered (RFC 9113 removed it).
    /// Over TLS, HTTP/2 needs no flag: ALPN chooses it.
    #[arg(long)]
    h2c: bool,
    /// On SIGTERM or Ctrl-C the gateway stops accepting connections, lets each request in
    /// flight finish (idle connections are closed, HTTP/2 clients are sent GOAWAY) for at
    /// most this many seconds, cuts what is left, and exits 0 with a line counting the
    /// requests finished and cut.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = config::parse_seconds)]
    drain_timeout: Duration,
    /// Write a line for each request to this file (`-`: standard output), once its response
    /// is sent (or the client left). The file is appended to; SIGHUP opens it again, so that
    /// logrotate can move it and ask for a new one (postrotate: kill -HUP). Lines are written
    /// by a thread of their own from a queue of 8,192: a request never waits on the disk. A
    /// disk slower than the requests loses the lines that find the queue full; they are
    /// counted in /metrics (gateway_access_log_lost_total, beside
    /// gateway_access_log_lines_total) and said on standard error, never dropped silently.
    /// Lines are buffered (64 KiB) and written when the buffer is full or --access-log-flush
    /// has passed; a stop and a SIGHUP write what is buffered first.
    #[arg(long, value_name = "PATH")]
    access_log: Option<String>,
    /// The longest a line of --access-log waits in its buffer (64 KiB, as nginx's
    /// `access_log ... buffer=64k flush=1s`) before it is written: a line can be read at most
    /// this long after its response (a full buffer, a stop or a SIGHUP write sooner). 0 writes
    /// whenever the log's queue is empty: under load, a write for nearly every line.
    #[arg(long, value_name = "SECONDS", value_parser = config::parse_seconds)]
    access_log_flush: Option<Duration>,
    /// The access log's lines:
    ///   combined  nginx's `combined` (GoAccess, AWStats, ... read it), then the cache's
    ///             fields as nginx users add them (one line):
    ///             ADDR - - [27/Nov/2026:20:05:48 +0000] "GET /a HTTP/1.1" 200 1024 "REFERER"
    ///             "USER-AGENT" cache=hit origin=10.0.0.2:80 ttfb=0.000123 rt=0.000456
    ///   json      one object a line: time (RFC 3339), remote_addr, remote_user (null),
    ///             method, target, protocol, status, body_bytes_sent, referer, user_agent,
    ///             cache, origin, ttfb, rt (null where the combined line has `-`).
    /// Times are UTC. cache is X-Cache's word (hit, miss, coalesced, revalidated, stale, pass,
    /// purge; in front of a sensor field also approximate); origin is the HOST:PORT that
    /// answered (`-` when none was asked). The body bytes are those the connection took, not
    /// the Content-Length: a client that leaves mid-body is logged with what it was sent
    /// (what the socket's buffers took counts as sent, as in nginx).
    /// ttfb runs from the request's head read to the response's head handed to the
    /// connection, rt to its body's last byte (or the client gone): ttfb ≤ rt.
    #[arg(long, value_enum, default_value_t = LogFormat::Combined, verbatim_doc_comment)]
    log_format: LogFormat,
    /// The field service's base URL.
    #[arg(long, default_value = "http://127.0.0.1:7100")]
    field: String,
    /// Read the field over UDP at this address (field serve --udp); its shape still comes
    /// from --field.
    #[arg(long)]
    field_udp: Option<SocketAddr>,
    /// Sit in front of this HTTP origin instead of a sensor field, as a shared HTTP cache (RFC
    /// 9111): responses kept as the origin's Cache-Control, Expires and Vary allow,
    /// revalidated with ETag and Last-Modified, concurrent misses coalesced; answers carry
    /// X-Cache and Age. Give it several times, as URL@PRICE, for origins holding the same
    /// content at different speeds and prices: each read then goes to them as --route says.
    #[arg(long, value_name = "URL[@PRICE]", value_parser = OriginSpec::parse)]
    origin: Vec<OriginSpec>,
    /// With several --origin: how reads are spread. base and optwait are Figurehead's
    /// (Middleware 2007): Base splits reads over at most two origins, OptWait tries them in
    /// order of price, each after an optimised wait; both plan from the latencies seen, for
    /// --sla, at least price. hedge95 (the cheapest, then the next once the first has taken
    /// its 95th percentile), hedge:MS (a fixed hedging delay, as Envoy and gRPC), least-
    /// outstanding and p2c (peak-EWMA latency) are today's peers. The first answer wins; the
    /// other attempts are cancelled.
    #[arg(long, default_value = "optwait", value_parser = config::parse_route)]
    route: RouteKind,
    /// With several --origin: the latency guarantee base and optwait plan for, as
    /// PERCENT:LATENCY (95:600ms: 95 % of reads within 600 ms); /metrics counts how many met it.
    #[arg(long, default_value = "95:1s", value_parser = parse_sla)]
    sla: Sla,
    /// With several --origin: how many origins must take a write (PUT, POST, DELETE, ...)
    /// before the client is told it is stored. all: every one; majority: more than half (two
    /// of three). Fewer than that: 202 while those that failed it are sent it again until they
    /// take it, 502 if too many refused it for the rule to be met, never the origin's 2xx. An
    /// origin that lacks a write another took is kept out of reads of that URL until it has
    /// it. Writes to one URL are sent in order, each decided before the next is sent.
    #[arg(long, default_value = "all", value_parser = config::parse_write_rule)]
    write_rule: WriteRule,
    /// With several --origin: the most bytes of writes held for origins that have not taken
    /// them yet (e.g. 64M); a write that would pass it is refused with 503 before it is sent.
    #[arg(long, default_value = "64M", value_parser = config::parse_size)]
    write_memory: u64,
    /// With --origin: the most memory the stored responses may take (e.g. 256MiB, 2G). Every
    /// stored byte counts: bodies, header fields, URLs, variants, and an estimate of the index
    /// per URL; past the bound responses are evicted as --eviction says. Default: a quarter of
    /// the machine's memory (256 MiB where it cannot be read), printed at start. Writes held for origins that lack them are bounded apart, by
    /// --write-memory, and count beside this bound, not in it: they are data the gateway owes
    /// an origin, which eviction must never drop, and a burst of writes must not empty the
    /// cache. The gateway's memory is about --max-memory + --write-memory + what is in flight.
    /// /metrics: gateway_stored_bytes, gateway_max_memory_bytes, gateway_stored_entries,
    /// gateway_evictions_total, gateway_evicted_bytes_total.
    #[arg(long, value_parser = config::parse_size)]
    max_memory: Option<u64>,
    /// With --origin: which stored responses go first past --max-memory, each weighed in bytes
    /// (`switchyard bench eviction` measures them beside moka on Zipf, scan and shifting
    /// traces; the default is chosen from it):
    ///   lru      least recently used goes first (the classic; a scan flushes it).
    ///   tinylfu  TinyLFU, the default: a segmented LRU that holds a newcomer to a full cache
    ///            only if a count-min sketch says it is asked for at least as often as the
    ///            victims its bytes would evict, summed (Einziger et al., ACM ToS 2017 and
    ///            2022), behind a window of the newest entries (0-10% of the bound) that
    ///            a hill climber grows when recency pays and shrinks when frequency does
    ///            (Einziger et al., Middleware 2018); the sketch forgets sooner when the
    ///            hit ratio falls for a while. The best of these four in hit ratio
    ///            (requests) on every family bench eviction runs; it keeps many small
    ///            popular objects, so its byte hit ratio can be lower than s3fifo's.
    ///   s3fifo   S3-FIFO: newcomers in a small FIFO, moved to a main FIFO if used there, else
    ///            remembered as ghosts that go straight to main next time (Yang et al., SOSP
    ///            2023); the best byte hit ratio at small caches, and a hit costs one bit.
    ///   sieve    SIEVE: one FIFO; a hit sets a visited bit, a hand sweeping from the oldest
    ///            evicts the first unvisited (Zhang et al., NSDI 2024).
    #[arg(long, default_value_t = switchyard_core::cache::Eviction::DEFAULT, verbatim_doc_comment)]
    eviction: switchyard_core::cache::Eviction,
    /// With --origin: how a response's `Age` field is read where RFC 9111 and the public cache
    /// test suite's npm release (http-cache-tests 0.4.5, the one `bench/cache-tests.sh` runs)
    /// contradict each other:
    ///   rfc          RFC 9111 §5.1 with RFC 9110 §5.3: of a list (one line or several), the
    ///                first member counts; a first member that is not a non-negative integer
    ///                makes the field ignored. The default; the suite's later version agrees.
    ///   suite-0.4.5  what 0.4.5 requires on nine tests: an Age that is not one non-negative
    ///                integer (abc, -7200, 7200.0, 7200;foo=bar), that comes on several lines, or
    ///                that repeats a value (0, 0) makes the response stale.
    #[arg(long, default_value = "rfc", value_parser = parse_age_reading, verbatim_doc_comment)]
    age_reading: switchyard_core::cache::http::AgeReading,
    /// With --origin: the largest response stored, body and fields (e.g. 8MiB); a larger one
    /// is answered and not kept (X-Cache-Store: no (larger than --max-object-size);
    /// gateway_too_large_total). Default: an eighth of --max-memory, at most 64 MiB.
    /// It also bounds the bodies in flight, apart from --max-memory: a response that may be
    /// stored is read whole, up to this size, before it is answered (one read per URL at a
    /// time, its concurrent readers sharing that one body); one larger (by its Content-Length,
    /// or once its body passes this size) or one that may not be stored is carried straight
    /// through as it comes, to the one client that asked (coalesced readers of it read for
    /// themselves), holding about 1 MB per connection (hyper's buffers and one chunk), however
    /// large it is. Request bodies are carried through likewise. So bodies in flight take at
    /// most: reads being stored x this size, plus connections x about 1 MB; /metrics reports
    /// them as gateway_buffered_bytes and gateway_streamed_bytes.
    #[arg(long, value_parser = config::parse_size)]
    max_object_size: Option<u64>,
    /// With --origin: answer a response this many seconds past its freshness at once, while
    /// one read refreshes it (RFC 5861 stale-while-revalidate).
    #[arg(long, value_parser = config::parse_seconds)]
    stale_while_revalidate: Option<Duration>,
    /// The lookup policy: all-hits, all-misses, simple, piggyback, greedy-age,
    /// greedy-distance or median-of-3.
    #[arg(long, default_value = "piggyback")]
    policy: Lookup,
    /// Yates's T: how long a value stays fresh, in wall seconds (with a field run at
    /// --time-scale S, the model's T is this over S). Sensor mode only [default: 8.89, the
    /// thesis's 80/9]. In front of an origin, freshness is the origin's word (see
    /// --default-ttl).
    #[arg(long, value_parser = config::parse_seconds)]
    ttl: Option<Duration>,
    /// With --origin: how long a response that states no freshness of its own (no
    /// Surrogate-Control or Cache-Control max-age, no s-maxage, no Expires) and has no
    /// Last-Modified stays fresh, seconds. Applies only where RFC 9111 §4.2.2 allows a
    /// heuristic: status codes cacheable by default, or `public`. Off by default: such a
    /// response is stored stale and revalidated.
    #[arg(long, value_parser = config::parse_seconds)]
    default_ttl: Option<Duration>,
    /// With --origin: a response that states no freshness but has a Last-Modified stays fresh
    /// for this percentage of its age at arrival (RFC 9111 §4.2.2 suggests 10). Off by
    /// default.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100))]
    heuristic: Option<u8>,
    /// With --origin: the response field that targets cache directives at this gateway alone
    /// (RFC 9213). The gateway is a CDN-class cache, so its target list is this field, then
    /// `CDN-Cache-Control`: the first of the two present with a valid, non-empty value (a
    /// structured-field Dictionary) governs the response, with the meaning `Cache-Control`'s
    /// directives have, and `Cache-Control`, `Surrogate-Control` and `Expires` are then
    /// ignored; with neither, `Surrogate-Control` and `Cache-Control` apply as before. Both
    /// fields are passed on to clients unchanged (caches after this one may be CDNs too).
    #[arg(long, value_name = "NAME", default_value = config::TARGETED_FIELD, value_parser = config::targeted_field_name)]
    targeted_field: String,
    /// With --origin: the networks whose clients may send PURGE (repeat the flag, or separate
    /// with commas; `none` for no network). By default this machine only (127.0.0.0/8, ::1).
    /// A purge is `curl -X PURGE http://GATEWAY/path` (that URL, all its variants),
    /// `curl -X PURGE 'http://GATEWAY/prefix*'` (every URL beginning with /prefix) or
    /// `curl -X PURGE -H 'Surrogate-Key: tag1 tag2' http://GATEWAY/` (every response the origin
    /// tagged so in `Surrogate-Key` or `Cache-Tag`; those fields are not passed on to clients).
    /// Reads under way of what is purged answer their clients and are not kept. Refused purges
    /// get 403 saying why; /metrics counts purges, refusals and URLs purged.
    #[arg(long, value_name = "NETWORK", value_delimiter = ',', value_parser = config::purge_network)]
    purge_from: Vec<Option<ipnet::IpNet>>,
    /// With --origin: a client sending `Authorization: Bearer TOKEN` may purge from anywhere.
    /// Read from the file named here (its first line), so that the token is not in the
    /// process list.
    #[arg(long, value_name = "FILE")]
    purge_token_file: Option<std::path::PathBuf>,
    /// Count an entry's age from its `load` into the cache or from its `sensor` timestamp.
    #[arg(long, default_value = "load")]
    age_from: AgeFrom,
    /// Keep approximate answers in the cache, as old as the values they came from.
    #[arg(long)]
    keep_approximations: bool,
    /// The longest a read of the field (or of one origin) may take, seconds; its waiters then
    /// get 504. With --origin, the longest the origin may keep the gateway waiting: to connect,
    /// for an answer's head, or between two pieces of a body; a body carried through (not
    /// stored) takes as long as its size needs while the origin keeps sending, and is cut
    /// short (an aborted answer) if the origin goes silent for this long.
    #[arg(long, default_value = "10", value_parser = config::parse_seconds)]
    upstream_timeout: Duration,
    /// The longest a request waits on a read, its own or one it joined, seconds; it then gets
    /// 504 saying so. A read still under way then is failed too, so the next request reads
    /// again rather than join it: no request waits for ever on a read that hangs or whose task
    /// died. With several --origin, also the longest a write waits for its verdict (504 then:
    /// it goes on). Default: --upstream-timeout once for each origin (one for a sensor field),
    /// plus 1.
    #[arg(long, value_parser = config::parse_wait_timeout)]
    wait_timeout: Option<Duration>,
    /// When a read fails, answer with the cached value if it is no older than this many
    /// seconds, marked stale (default: answer the failure).
    #[arg(long, value_parser = config::parse_seconds)]
    stale_if_error: Option<Duration>,
    /// After each answer ask the field for the true value (only `switchyard field` has one)
    /// and count the answer's deviation in /metrics (gateway_deviation_total over
    /// gateway_deviation_samples_total is the mean).
    #[arg(long)]
    measure_deviation: bool,
    /// Seed of median-of-3's random choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn seconds(name: &str, s: f64) -> Result<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| anyhow::anyhow!("{name} {s}: give zero or more seconds"))
}

async fn listen(listen: SocketAddr, what: &str) -> Result<tokio::net::TcpListener> {
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listening on {listen}"))?;
    eprintln!("{what} on http://{}", listener.local_addr()?);
    Ok(listener)
}

/// Serves `router` on `listen` until Ctrl-C, in the loop every mode shares: it answers clients
/// that half-close after their request, and hands each request its peer's address.
async fn serve(listen_on: SocketAddr, router: axum::Router, what: &str) -> Result<()> {
    let options = ServeOptions::default();
    switchyard_gateway::listener::serve(listen(listen_on, what).await?, router, options, interrupted()).await;
    Ok(())
}

/// Until Ctrl-C.
async fn interrupted() {
    let _ = tokio::signal::ctrl_c().await;
}

/// `gateway serve`'s server: TLS and HTTP/2 as `resolved` says, a reload on SIGHUP (of
/// --config's file, or of the TLS files alone without one), and a drained stop on SIGTERM or
/// Ctrl-C.
async fn serve_site(
    resolved: &Resolved,
    router: impl switchyard_gateway::listener::Served,
    what: &str,
    running: Running,
    reread: impl Fn() -> Result<Settings, ConfigErrors> + Send + 'static,
) -> Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let listen = resolved.listen;
    let access_log = match &resolved.access_log {
        Some(options) => Some(AccessLog::open(options.clone())?),
        None => None,
    };
    let mut running = running.with_access_log(access_log.clone());
    let options = ServeOptions {
        tls: resolved.tls.clone(),
        h2c: resolved.h2c,
        drain_timeout: resolved.drain_timeout,
        access_log,
    };
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("listening on {listen}"))?;
    let addr = listener.local_addr()?;
    let spoken = match (&options.tls, options.h2c) {
        (Some(_), _) => format!("https://{addr} (TLS 1.3 and 1.2; HTTP/2 and HTTP/1.1 by ALPN)"),
        (None, true) => format!("http://{addr} (HTTP/1.1, and HTTP/2 by prior knowledge)"),
        (None, false) => format!("http://{addr}"),
    };
    eprintln!("{what} on {spoken}");
    // Registered before serving: SIGHUP's default action would end the process.
    let mut hangups = signal(SignalKind::hangup()).context("listening for SIGHUP")?;
    let log = options.access_log.clone();
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            // The whole reload is made before any of it is taken: a file with an error, or a
            // change that cannot be made live, leaves the running configuration whole.
            match reread().map_err(|e| e.0.iter().map(ToString::to_string).collect()).and_then(|s| running.reload(s)) {
                Ok(said) => {
                    for line in said {
                        eprintln!("SIGHUP: {line}");
                    }
                }
                Err(why) => {
                    for line in why {
                        eprintln!("SIGHUP: {line}");
                    }
                    eprintln!(
                        "SIGHUP: not reloaded; the configuration running stays whole (its certificate, origins, bounds and log)"
                    );
                }
            }
            // The log is opened again on every SIGHUP, whatever the file says: log rotation
            // (logrotate's postrotate `kill -HUP`) must not depend on the configuration being
            // valid. After the reload, so that a new path is not preceded by the old one
            // opened again (and made afresh if it had been moved away).
            if let Some(log) = &log {
                match log.reopen() {
                    Ok(()) => eprintln!("SIGHUP: access log reopened"),
                    Err(e) => eprintln!("SIGHUP: {e}; still writing to the file open before"),
                }
            }
        }
    });
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let bound = options.drain_timeout;
    let stop = async move {
        let which = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = tokio::signal::ctrl_c() => "interrupted",
        };
        eprintln!(
            "{which}: no new connections; finishing the requests in flight, for at most {} s (--drain-timeout)",
            bound.as_secs_f64()
        );
    };
    let log = options.access_log.clone();
    let drained = switchyard_gateway::listener::serve(listener, router, options, stop).await;
    if let Some(log) = log {
        // The lines of the requests finished or cut at the stop, written before the exit.
        log.close();
    }
    eprintln!(
        "stopped: {} {} in flight finished, {} cut at --drain-timeout",
        drained.finished,
        if drained.finished == 1 { "request" } else { "requests" },
        drained.cut
    );
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")
}

pub(crate) fn run_field(args: &FieldArgs) -> Result<()> {
    let FieldCommand::Serve(a) = &args.command;
    let spec = match a.field {
        FieldKind::Lattice => FieldSpec::Lattice {
            model: match a.changes {
                Changes::Independent => ChangeModel::Independent,
                Changes::Correlated => ChangeModel::Correlated,
            },
            rate: a.rate,
            stations: Stations::Quadrants,
            rule: None,
        },
        FieldKind::Lab => {
            let (trace, said) = switchyard_experiments::yates_cache::lab_trace(&a.lab.lab_data, &a.lab.lab_locs)?;
            eprintln!("{said}");
            FieldSpec::Trace { trace, rule: a.lab.neighbourhood }
        }
    };
    let config = FieldConfig {
        spec,
        seed: a.seed,
        time_scale: a.time_scale,
        link_capacity: a.link_capacity,
        max_wait_s: a.max_wait,
    };
    let service = switchyard_gateway::field::FieldService::new(config)?;
    runtime()?.block_on(async {
        if let Some(udp) = a.udp {
            let socket = tokio::net::UdpSocket::bind(udp).await.with_context(|| format!("binding UDP {udp}"))?;
            eprintln!("sensor field reads over UDP on {}", socket.local_addr()?);
            let service = service.clone();
            tokio::spawn(async move {
                if let Err(e) = switchyard_gateway::field::serve_udp(&service, socket).await {
                    eprintln!("switchyard: UDP: {e}");
                }
            });
        }
        serve(a.listen, service.router(), "sensor field").await
    })
}

fn run_coop(a: &CoopServe) -> Result<()> {
    let node = switchyard_gateway::coop::CoopNode::new(switchyard_gateway::coop::CoopConfig {
        me: a.me.clone().unwrap_or_else(|| format!("http://{}", a.listen)),
        origin: a.origin.clone(),
        capacity: a.capacity,
        dedup: !a.no_dedup,
        link_buffer: a.link_buffer,
        threshold: a.threshold,
        upstream_timeout: seconds("--upstream-timeout", a.upstream_timeout)?,
        outbox_limit: a.outbox_limit,
    });
    let what = format!(
        "cooperating gateway ({} objects, {} neighbours) in front of {}",
        a.capacity,
        a.neighbours.len(),
        a.origin
    );
    runtime()?.block_on(async {
        // The neighbours' senders are tasks: start them inside the runtime.
        node.set_neighbours(a.neighbours.clone());
        serve(a.listen, node.router(), &what).await
    })
}

/// The flags given on the command line (not their defaults), as settings to put over the
/// file's: a key each, as [`Settings`] names them.
fn flag_settings(a: &GatewayServe, m: Option<&clap::ArgMatches>) -> Settings {
    let given = |id: &str| m.is_some_and(|m| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine));
    let pick = |id: &str| given(id);
    let mut s = Settings::default();
    s.listen = pick("listen").then_some(a.listen);
    s.tls_cert = a.tls_cert.clone();
    s.tls_key = a.tls_key.clone();
    s.h2c = pick("h2c").then_some(a.h2c);
    s.drain_timeout = pick("drain_timeout").then_some(a.drain_timeout);
    s.access_log = a.access_log.clone();
    s.access_log_flush = a.access_log_flush;
    s.log_format = pick("log_format").then_some(match a.log_format {
        LogFormat::Combined => config::LogFormat::Combined,
        LogFormat::Json => config::LogFormat::Json,
    });
    s.field = pick("field").then(|| a.field.clone());
    s.field_udp = a.field_udp;
    s.origin = pick("origin").then(|| a.origin.clone());
    s.route = pick("route").then_some(a.route);
    s.sla = pick("sla").then_some(a.sla);
    s.write_rule = pick("write_rule").then_some(a.write_rule);
    s.write_memory = pick("write_memory").then_some(a.write_memory);
    s.max_memory = a.max_memory;
    s.eviction = pick("eviction").then_some(a.eviction);
    s.age_reading = pick("age_reading").then_some(a.age_reading);
    s.max_object_size = a.max_object_size;
    s.stale_while_revalidate = a.stale_while_revalidate;
    s.policy = pick("policy").then_some(a.policy);
    s.ttl = a.ttl;
    s.default_ttl = a.default_ttl;
    s.heuristic = a.heuristic;
    s.targeted_field = pick("targeted_field").then(|| a.targeted_field.clone());
    s.purge_from = pick("purge_from").then(|| a.purge_from.iter().flatten().copied().collect());
    s.purge_token_file = a.purge_token_file.clone();
    s.age_from = pick("age_from").then_some(a.age_from);
    s.keep_approximations = pick("keep_approximations").then_some(a.keep_approximations);
    s.upstream_timeout = pick("upstream_timeout").then_some(a.upstream_timeout);
    s.wait_timeout = a.wait_timeout;
    s.stale_if_error = a.stale_if_error;
    s.measure_deviation = pick("measure_deviation").then_some(a.measure_deviation);
    s.seed = pick("seed").then_some(a.seed);
    s
}

/// The settings: --config's file, if any, with the flags given over it.
fn read_settings(config: Option<&std::path::Path>, flags: &Settings) -> Result<Settings, ConfigErrors> {
    match config {
        Some(path) => Ok(Settings::from_file(path)?.under(flags.clone())),
        None => Ok(flags.clone()),
    }
}

/// Every error, a line each, then what they stopped.
fn refused(errors: &ConfigErrors, what: &str) -> anyhow::Error {
    for e in &errors.0 {
        eprintln!("switchyard: {e}");
    }
    let n = errors.0.len();
    anyhow::anyhow!("{n} {} in {what}", if n == 1 { "error" } else { "errors" })
}

pub(crate) fn run_gateway(args: &GatewayArgs, matches: Option<&clap::ArgMatches>) -> Result<()> {
    let a = match &args.command {
        GatewayCommand::Serve(a) => a,
        GatewayCommand::Coop(c) => return run_coop(c),
    };
    let flags = flag_settings(a, matches.and_then(|m| m.subcommand_matches("serve")));
    let what = match &a.config {
        Some(path) => format!("{} and the flags", path.display()),
        None => "the flags".to_string(),
    };
    let settings = read_settings(a.config.as_deref(), &flags).map_err(|e| refused(&e, &what))?;
    let resolved = settings.resolve().map_err(|e| refused(&e, &what))?;
    if a.check_config {
        println!("{what}: ok: {}", resolved.summary());
        return Ok(());
    }
    let config_path = a.config.clone();
    // A reload reads the file again, with the same flags over it.
    let reread = move || read_settings(config_path.as_deref(), &flags);
    match resolved.mode.clone() {
        Mode::Origin(config) => {
            let origins = &config.origins;
            let what = if origins.len() == 1 {
                format!("gateway (an RFC 9111 shared cache) in front of {}", origins[0].url)
            } else {
                format!(
                    "gateway (an RFC 9111 shared cache) over {} origins, route {}, SLA {:.1} % within {:?}",
                    origins.len(),
                    config.route.name(),
                    config.sla.percent * 100.0,
                    config.sla.within
                )
            };
            eprintln!(
                "storing at most {} (max-memory{}), evicting by {} (eviction), responses of at most {} each (max-object-size; larger ones and those not stored are carried through as they come, about 1 MB per connection); writes held for origins bounded apart by {} (write-memory)",
                mib(config.max_memory),
                if settings.max_memory.is_some() { "" } else { ": a quarter of this machine's memory by default" },
                config.eviction,
                mib(config.object_bound()),
                mib(config.write_memory),
            );
            let nets: Vec<String> = config.purge.from.iter().map(ToString::to_string).collect();
            eprintln!(
                "PURGE allowed from {}{}",
                if nets.is_empty() { "no network".to_string() } else { nets.join(", ") },
                if config.purge.token.is_some() {
                    ", and from anywhere with the token (purge-token-file)"
                } else {
                    " (purge-from)"
                },
            );
            // The gateway's own service (a hit answered without a router), in the serving loop
            // every mode shares: half-closed clients answered, each request with its peer's
            // address (for purge-from), TLS and HTTP/2 as asked.
            let service = switchyard_gateway::origin::service(config);
            let running = Running::new(settings, &resolved, Some(service.clone()));
            runtime()?.block_on(serve_site(&resolved, service, &what, running, reread))
        }
        Mode::Sensor(config) => {
            let what = format!("gateway ({}, T = {:.2} s)", config.lookup, config.ttl.as_secs_f64());
            let running = Running::new(settings, &resolved, None);
            let rt = runtime()?;
            rt.block_on(async {
                let router = switchyard_gateway::gateway::router(config).await?;
                serve_site(&resolved, router, &what, running, reread).await
            })
        }
    }
}

/// A size for people: MiB with one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

fn parse_age_reading(s: &str) -> Result<switchyard_core::cache::http::AgeReading, String> {
    s.parse()
}
