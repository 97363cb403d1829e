//! `gateway serve`'s settings, from a TOML file (`--config`), from flags, or both: one key per
//! flag, named as the flag is, read and checked here; [`Settings::resolve`] makes what the
//! gateway runs from them, [`Settings::reload_refusals`] says which of a reload's changes can
//! not be made to a running gateway.
//!
//! ```toml
//! listen = "0.0.0.0:8443"
//! tls-cert = "/etc/ssl/site.pem"
//! tls-key = "/etc/ssl/private/site.key"
//! origin = ["http://10.0.0.2:8080@0.4", { url = "http://10.0.0.3:8080", price = 1 }]
//! route = "optwait"
//! max-memory = "2GiB"
//! purge-from = ["10.0.0.0/8", "::1"]
//! ```
//!
//! Errors name the file, the line and column and the key, and say what was expected
//! (`gateway.toml:12:1: max-memory: "256 MB" is not a size; write 256MiB or 268435456`); an
//! unknown key is an error, not ignored. Every error in a file is reported, not only the first.
//! A setting given both as a flag and in the file is the flag's.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use switchyard_core::cache::http::{AgeReading, Heuristic};
use switchyard_core::cache::{AgeFrom, Eviction, Lookup};
use switchyard_core::place::sla::write::WriteRule;
use switchyard_core::place::sla::{RouteKind, Sla};
use toml::de::{DeTable, DeValue};

use crate::gateway::GatewayConfig;
use crate::origin::OriginConfig;
use crate::origins::{OriginSpec, parse_sla};
use crate::purge::PurgeRules;
use crate::tls::TlsFiles;

/// Where a setting came from, for its errors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    /// A file, at a line and column (from 1).
    #[allow(missing_docs)] // Its name, the line and the column.
    File { path: String, line: usize, column: usize },
    /// The command line (or a caller that built the settings itself).
    Flag,
}

/// One thing wrong with the settings: where, which key, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// Where the key was set.
    pub place: Place,
    /// The key (as the file and the flag name it), if the error is about one.
    pub key: Option<String>,
    /// What is wrong, and what would do.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.place, &self.key) {
            (Place::File { path, line, column }, Some(key)) => {
                write!(f, "{path}:{line}:{column}: {key}: {}", self.message)
            }
            (Place::File { path, line, column }, None) => write!(f, "{path}:{line}:{column}: {}", self.message),
            (Place::Flag, Some(key)) => write!(f, "--{key}: {}", self.message),
            (Place::Flag, None) => f.write_str(&self.message),
        }
    }
}

/// Every error found, one a line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lines: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        f.write_str(&lines.join("\n"))
    }
}

/// The settings: one per key (and flag), each `None` where neither said.
///
/// Adding a flag is one line in `settings!` below: its key, its field, its type and how a
/// TOML value of it is read (the flag's own value parser, for those given as text).
macro_rules! settings {
    ($($(#[doc = $doc:literal])* $key:literal $field:ident: $ty:ty = $read:expr;)*) => {
        #[derive(Clone, Debug, Default)]
        #[allow(missing_docs)] // Each field is its flag; `gateway serve --help` says what it does.
        pub struct Settings {
            $($(#[doc = $doc])* pub $field: Option<$ty>,)*
            /// Where each key set from a file was.
            places: BTreeMap<&'static str, Place>,
        }

        /// Every key, as the file and the flag (after `--`) write it.
        pub const KEYS: &[&str] = &[$($key),*];

        impl Settings {
            /// Sets `key` from `value`; `None` if there is no such key.
            fn set(&mut self, key: &str, value: &DeValue<'_>) -> Option<Result<(), String>> {
                match key {
                    $($key => Some(($read)(value).map(|v| self.$field = Some(v))),)*
                    _ => None,
                }
            }

            /// These settings with `top`'s over them: a key `top` sets is `top`'s.
            #[must_use]
            pub fn under(mut self, top: Settings) -> Settings {
                $(if top.$field.is_some() {
                    self.$field = top.$field;
                    self.places.remove($key);
                })*
                self
            }

            /// The keys whose values differ between `self` and `other`.
            fn differing(&self, other: &Settings) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if format!("{:?}", self.$field) != format!("{:?}", other.$field) {
                    out.push($key);
                })*
                out
            }

            /// The keys set.
            fn set_keys(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $(if self.$field.is_some() {
                    out.push($key);
                })*
                out
            }
        }
    };
}

settings! {
    "listen" listen: SocketAddr = |v| text(v).and_then(parse_listen);
    "tls-cert" tls_cert: PathBuf = path;
    "tls-key" tls_key: PathBuf = path;
    "h2c" h2c: bool = boolean;
    "drain-timeout" drain_timeout: Duration = seconds_value;
    "access-log" access_log: String = |v| text(v).map(str::to_string);
    "log-format" log_format: LogFormat = |v| text(v).and_then(str::parse);
    "access-log-flush" access_log_flush: Duration = seconds_value;
    "field" field: String = |v| text(v).map(str::to_string);
    "field-udp" field_udp: SocketAddr = |v| text(v).and_then(parse_listen);
    "origin" origin: Vec<OriginSpec> = origins;
    "route" route: RouteKind = |v| text(v).and_then(parse_route);
    "sla" sla: Sla = |v| text(v).and_then(parse_sla);
    "write-rule" write_rule: WriteRule = |v| text(v).and_then(parse_write_rule);
    "write-memory" write_memory: u64 = size_value;
    "max-memory" max_memory: u64 = size_value;
    "eviction" eviction: Eviction = |v| text(v).and_then(|s| s.parse::<Eviction>().map_err(|e| e.to_string()));
    "age-reading" age_reading: AgeReading = |v| text(v).and_then(str::parse);
    "max-object-size" max_object_size: u64 = size_value;
    "stale-while-revalidate" stale_while_revalidate: Duration = seconds_value;
    "policy" policy: Lookup = |v| text(v).and_then(|s| s.parse::<Lookup>().map_err(|e| e.to_string()));
    "ttl" ttl: Duration = seconds_value;
    "default-ttl" default_ttl: Duration = seconds_value;
    "heuristic" heuristic: u8 = percent;
    "targeted-field" targeted_field: String = |v| text(v).and_then(targeted_field_name);
    "purge-from" purge_from: Vec<IpNet> = purge_networks;
    "purge-token-file" purge_token_file: PathBuf = path;
    "age-from" age_from: AgeFrom = |v| text(v).and_then(|s| s.parse::<AgeFrom>().map_err(|e| e.to_string()));
    "keep-approximations" keep_approximations: bool = boolean;
    "upstream-timeout" upstream_timeout: Duration = seconds_value;
    "wait-timeout" wait_timeout: Duration = |v| seconds_value(v).and_then(more_than_zero);
    "stale-if-error" stale_if_error: Duration = seconds_value;
    "measure-deviation" measure_deviation: bool = boolean;
    "seed" seed: u64 = whole;
}

/// The keys a running gateway takes on a reload; a change to any other is refused.
pub const LIVE_KEYS: &[&str] = &[
    "origin",
    "route",
    "sla",
    "tls-cert",
    "tls-key",
    "purge-from",
    "purge-token-file",
    "max-memory",
    "access-log",
    "log-format",
    "access-log-flush",
];

/// The keys that only mean something in front of an origin (`origin` set).
const ORIGIN_ONLY: &[&str] = &[
    "route",
    "sla",
    "write-rule",
    "write-memory",
    "max-memory",
    "eviction",
    "age-reading",
    "max-object-size",
    "stale-while-revalidate",
    "default-ttl",
    "heuristic",
    "targeted-field",
    "purge-from",
    "purge-token-file",
];

/// The keys that only mean something in front of a sensor field (`origin` not set).
const SENSOR_ONLY: &[&str] =
    &["field", "field-udp", "policy", "ttl", "age-from", "keep-approximations", "measure-deviation"];

/// What `gateway serve` runs: resolved from [`Settings`], every default filled in.
#[derive(Clone)]
pub struct Resolved {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// TLS to clients, its files read.
    pub tls: Option<Arc<TlsFiles>>,
    /// Cleartext HTTP/2 by prior knowledge.
    pub h2c: bool,
    /// The longest a stop waits for requests in flight.
    pub drain_timeout: Duration,
    /// In front of an origin, or of a sensor field.
    pub mode: Mode,
    /// Where each request's line goes, in which format, flushed how often (`access-log`,
    /// `log-format`, `access-log-flush`).
    pub access_log: Option<crate::access_log::Options>,
}

/// `log-format`'s values, as the flag and the file spell them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// nginx's `combined`, then the cache's fields.
    Combined,
    /// One JSON object a line.
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "combined" => Ok(Self::Combined),
            "json" => Ok(Self::Json),
            other => Err(format!("`{other}` is not a log format; write combined or json")),
        }
    }
}

impl From<LogFormat> for crate::access_log::Format {
    fn from(f: LogFormat) -> Self {
        match f {
            LogFormat::Combined => Self::Combined,
            LogFormat::Json => Self::Json,
        }
    }
}

/// In front of what.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)] // One, made once per start or reload.
pub enum Mode {
    /// An HTTP origin (or several), as a shared HTTP cache.
    Origin(OriginConfig),
    /// A sensor field.
    Sensor(GatewayConfig),
}

impl Resolved {
    /// One line saying what this configuration serves (for `--check-config`).
    pub fn summary(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let what = match &self.mode {
            Mode::Origin(o) => format!(
                "an HTTP cache in front of {} (route {}), storing at most {:.1} MiB by {}",
                match o.origins.as_slice() {
                    [one] => one.url.clone(),
                    many => format!("{} origins", many.len()),
                },
                o.route.name(),
                o.max_memory as f64 / f64::from(1 << 20),
                o.eviction,
            ),
            Mode::Sensor(g) => format!("a {} cache in front of the sensor field {}", g.lookup, g.field),
        };
        format!("{scheme}://{}: {what}", self.listen)
    }
}

impl Settings {
    /// Reads settings from the text of a TOML file named `path` (the name is for errors).
    pub fn from_toml(text: &str, path: &str) -> Result<Self, ConfigErrors> {
        let place = |at: usize| {
            let (line, column) = line_column(text, at);
            Place::File { path: path.to_string(), line, column }
        };
        let table = DeTable::parse(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start);
            ConfigErrors(vec![ConfigError {
                place: place(at),
                key: None,
                message: format!("not TOML: {}", e.message().trim_end()),
            }])
        })?;
        let mut settings = Self::default();
        let mut errors = Vec::new();
        // In the file's order, so that errors are too.
        let mut entries: Vec<_> = table.get_ref().iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        for (key, value) in entries {
            let at = place(key.span().start);
            let name: &str = key.get_ref();
            match settings.set(name, value.get_ref()) {
                None => errors.push(ConfigError { place: at, key: None, message: unknown_key(name) }),
                Some(Err(message)) => errors.push(ConfigError { place: at, key: Some(name.to_string()), message }),
                Some(Ok(())) => {
                    let k = KEYS.iter().find(|k| **k == name).expect("set knows only KEYS");
                    settings.places.insert(k, at);
                }
            }
        }
        if errors.is_empty() { Ok(settings) } else { Err(ConfigErrors(errors)) }
    }

    /// Reads the TOML file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, ConfigErrors> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigErrors(vec![ConfigError {
                place: Place::Flag,
                key: None,
                message: format!("{shown} (--config): cannot be read: {e}"),
            }])
        })?;
        Self::from_toml(&text, &shown)
    }

    fn error(&self, key: &str, message: impl Into<String>) -> ConfigError {
        let place = self.places.get(key).cloned().unwrap_or(Place::Flag);
        ConfigError { place, key: Some(key.to_string()), message: message.into() }
    }

    /// What the gateway runs from these settings, defaults filled in, every key checked with
    /// the others (a key that needs `origin`, or that `origin` excludes), the TLS files and the
    /// purge token read. Every error found is returned.
    pub fn resolve(&self) -> Result<Resolved, ConfigErrors> {
        let mut errors = Vec::new();
        let origin = self.origin.as_ref().is_some_and(|o| !o.is_empty());
        let set = self.set_keys();
        for key in &set {
            if !origin && ORIGIN_ONLY.contains(key) {
                errors.push(self.error(key, "only in front of an origin: set `origin` too, or leave this out"));
            }
            if origin && SENSOR_ONLY.contains(key) {
                errors.push(self.error(key, "only in front of a sensor field: not with `origin`"));
            }
        }
        if self.origin.as_ref().is_some_and(Vec::is_empty) {
            errors.push(self.error("origin", "an empty list: give at least one origin URL"));
        }
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => match TlsFiles::load(cert, key) {
                Ok(t) => Some(t),
                Err(e) => {
                    let which = if matches!(e, crate::tls::TlsError::Key { .. }) { "tls-key" } else { "tls-cert" };
                    let mut error = self.error(which, e.to_string());
                    // The message names the file and the flag already.
                    if error.place == Place::Flag {
                        error.key = None;
                    }
                    errors.push(error);
                    None
                }
            },
            (Some(_), None) => {
                errors.push(self.error("tls-cert", "needs `tls-key`, the certificate's private key"));
                None
            }
            (None, Some(_)) => {
                errors.push(self.error("tls-key", "needs `tls-cert`, the certificate it is the key of"));
                None
            }
            (None, None) => None,
        };
        if self.access_log_flush.is_some() && self.access_log.is_none() {
            errors.push(self.error("access-log-flush", "only with `access-log`: there is no log to flush"));
        }
        if self.h2c == Some(true) && self.tls_cert.is_some() {
            errors.push(self.error("h2c", "not with TLS (`tls-cert`): over TLS, ALPN chooses HTTP/2"));
        }
        let upstream_timeout = self.upstream_timeout.unwrap_or(Duration::from_secs(10));
        let mode = if origin {
            let purge = match self.purge_rules() {
                Ok(p) => p,
                Err(e) => {
                    errors.push(e);
                    PurgeRules::default()
                }
            };
            let max_memory = self.max_memory.unwrap_or_else(crate::memory::default_max_memory);
            let config = OriginConfig {
                origins: self.origin.clone().unwrap_or_default(),
                route: self.route.unwrap_or(RouteKind::OptWait),
                sla: self.sla.unwrap_or(Sla { percent: 0.95, within: Duration::from_secs(1) }),
                heuristic: Heuristic {
                    last_modified_fraction: self.heuristic.map(|p| f64::from(p) / 100.0),
                    default: self.default_ttl,
                },
                stale_while_revalidate: self.stale_while_revalidate,
                stale_if_error: self.stale_if_error,
                upstream_timeout,
                wait_timeout: self.wait_timeout,
                write_rule: self.write_rule.unwrap_or(WriteRule::All),
                write_memory: self.write_memory.unwrap_or(crate::origin::WRITE_MEMORY),
                max_memory,
                max_object_size: self.max_object_size,
                eviction: self.eviction.unwrap_or(Eviction::DEFAULT),
                age_reading: self.age_reading.unwrap_or_default(),
                targeted_field: self.targeted_field.clone().unwrap_or_else(|| TARGETED_FIELD.to_string()),
                purge,
            };
            if config.object_bound() > config.max_memory {
                errors.push(self.error(
                    "max-object-size",
                    format!(
                        "{} is larger than max-memory {}: no response that size could be stored",
                        config.object_bound(),
                        config.max_memory
                    ),
                ));
            }
            Mode::Origin(config)
        } else {
            Mode::Sensor(GatewayConfig {
                field: self.field.clone().unwrap_or_else(|| FIELD.to_string()),
                field_udp: self.field_udp,
                lookup: self.policy.unwrap_or(Lookup::Piggyback),
                ttl: self.ttl.unwrap_or(Duration::from_secs_f64(80.0 / 9.0)),
                age_from: self.age_from.unwrap_or(AgeFrom::Load),
                keep_approximations: self.keep_approximations.unwrap_or(false),
                upstream_timeout,
                wait_timeout: self.wait_timeout,
                stale_if_error: self.stale_if_error,
                measure_deviation: self.measure_deviation.unwrap_or(false),
                seed: self.seed.unwrap_or(1),
            })
        };
        if !errors.is_empty() {
            return Err(ConfigErrors(errors));
        }
        Ok(Resolved {
            listen: self.listen.unwrap_or_else(|| LISTEN.parse().expect("an address")),
            tls,
            h2c: self.h2c.unwrap_or(false),
            drain_timeout: self.drain_timeout.unwrap_or(Duration::from_secs(10)),
            mode,
            access_log: self.access_log.as_deref().map(|path| crate::access_log::Options {
                target: crate::access_log::Target::parse(path),
                format: self.log_format.unwrap_or(LogFormat::Combined).into(),
                flush: self.access_log_flush.unwrap_or(crate::access_log::FLUSH),
            }),
        })
    }

    /// Who may purge, from `purge-from` and `purge-token-file` (read here).
    fn purge_rules(&self) -> Result<PurgeRules, ConfigError> {
        let mut rules = PurgeRules::default();
        if let Some(from) = &self.purge_from {
            rules.from.clone_from(from);
        }
        if let Some(path) = &self.purge_token_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                self.error("purge-token-file", format!("cannot read the purge token from {}: {e}", path.display()))
            })?;
            let token = text.lines().next().unwrap_or("").trim();
            if token.is_empty() {
                return Err(self.error("purge-token-file", format!("{}: no token on its first line", path.display())));
            }
            rules.token = Some(token.to_string());
        }
        Ok(rules)
    }

    /// Why `new` cannot replace `self` in a running gateway: one line for each key changed that
    /// cannot change live (see [`LIVE_KEYS`]), and TLS turned on or off. Empty: it can.
    pub fn reload_refusals(&self, new: &Self) -> Vec<String> {
        let mut out: Vec<String> = self
            .differing(new)
            .into_iter()
            .filter(|k| !LIVE_KEYS.contains(k))
            .map(|k| format!("{k} cannot change while the gateway runs (restart it for that)"))
            .collect();
        if self.tls_cert.is_some() != new.tls_cert.is_some() {
            out.push("tls-cert: TLS cannot be turned on or off while the gateway runs (restart it for that)".into());
        }
        if self.access_log.is_some() != new.access_log.is_some() {
            out.push(
                "access-log: the log cannot be turned on or off while the gateway runs (restart it for that); its path, format and flush interval can change"
                    .into(),
            );
        }
        let origin = |s: &Self| s.origin.as_ref().is_some_and(|o| !o.is_empty());
        if origin(self) != origin(new) {
            out.push(
                "origin: a gateway cannot move between a sensor field and origins while it runs (restart it for that)"
                    .into(),
            );
        }
        out
    }
}

/// A running gateway's settings, and what a reload changes in it.
pub struct Running {
    settings: Settings,
    tls: Option<Arc<TlsFiles>>,
    origin: Option<crate::origin::OriginService>,
    access_log: Option<crate::access_log::AccessLog>,
}

impl Running {
    /// The gateway started from `settings`, which resolved to `resolved`, serving `origin` (in
    /// front of origins) with TLS as `resolved` says.
    pub fn new(settings: Settings, resolved: &Resolved, origin: Option<crate::origin::OriginService>) -> Self {
        Self { settings, tls: resolved.tls.clone(), origin, access_log: None }
    }

    /// The access log the gateway writes, for a reload to move to another path, format or
    /// flush interval.
    #[must_use]
    pub fn with_access_log(mut self, log: Option<crate::access_log::AccessLog>) -> Self {
        self.access_log = log;
        self
    }

    /// Takes `new` if the whole of it can be taken: it resolves (its TLS files and purge token
    /// read) and changes only what can change live ([`Settings::reload_refusals`]), and a new
    /// access-log file opens. Then the TLS files are read again even if unchanged (a renewed
    /// certificate), and the origins, route, SLA, purge rules, memory bound and log are swapped
    /// in. Returns what it did, a line each; or, with nothing changed, why not, a line each.
    pub fn reload(&mut self, new: Settings) -> Result<Vec<String>, Vec<String>> {
        let resolved = new.resolve().map_err(|e| e.0.iter().map(ToString::to_string).collect::<Vec<_>>())?;
        let refused = self.settings.reload_refusals(&new);
        if !refused.is_empty() {
            return Err(refused);
        }
        // The one step of a reload that can fail after the checks: made before anything is
        // taken, so that a log that cannot be opened leaves the whole configuration running.
        let log = match (&self.access_log, &resolved.access_log) {
            (Some(log), Some(options)) if log.options() != *options => {
                match crate::access_log::Opened::open(options.clone()) {
                    Ok(opened) => Some((log, opened)),
                    Err(e) => {
                        let why = match e {
                            crate::access_log::AccessLogError::Open { path, source } => {
                                format!("{}: cannot be opened for appending: {source}", path.display())
                            }
                            other => other.to_string(),
                        };
                        return Err(vec![new.error("access-log", why).to_string()]);
                    }
                }
            }
            _ => None,
        };
        let mut said = Vec::new();
        if let Some((log, opened)) = log {
            let o = opened.options().clone();
            log.switch(opened);
            said.push(format!(
                "access-log: {} ({}, flushed every {} s); the lines buffered for the previous one written to it and it closed",
                o.target,
                match o.format {
                    crate::access_log::Format::Combined => "combined",
                    crate::access_log::Format::Json => "json",
                },
                o.flush.as_secs_f64()
            ));
        }
        if let (Some(now), Some(fresh)) = (&self.tls, &resolved.tls) {
            now.adopt(fresh);
            said.push(format!(
                "TLS: {} and its key read; new connections get them, open ones keep theirs",
                fresh.cert_path().display()
            ));
        }
        if let (Some(service), Mode::Origin(config)) = (&self.origin, &resolved.mode) {
            let r = service.reload(config);
            if r.origins {
                let urls: Vec<String> = config.origins.iter().map(|o| format!("{}@{}", o.url, o.price)).collect();
                said.push(format!(
                    "origin: {} (route {}), the router starting afresh",
                    urls.join(", "),
                    config.route.name()
                ));
            }
            let mib = |b: u64| format!("{:.1} MiB", b as f64 / f64::from(1 << 20));
            if r.max_memory.0 != r.max_memory.1 {
                said.push(format!(
                    "max-memory: {} (was {}){}",
                    mib(r.max_memory.1),
                    mib(r.max_memory.0),
                    if r.max_memory.1 < r.max_memory.0 {
                        format!("; evicted {} stored URLs, {} bytes, to fit", r.evicted.0, r.evicted.1)
                    } else {
                        String::new()
                    }
                ));
            }
            if self.settings.purge_from != new.purge_from || self.settings.purge_token_file != new.purge_token_file {
                let nets: Vec<String> = config.purge.from.iter().map(ToString::to_string).collect();
                said.push(format!(
                    "purge-from: {}{}",
                    if nets.is_empty() { "no network".into() } else { nets.join(", ") },
                    if config.purge.token.is_some() { ", and anywhere with the token" } else { "" }
                ));
            }
        }
        if said.is_empty() {
            said.push("nothing changed".into());
        }
        self.settings = new;
        Ok(said)
    }
}

/// `listen` by default.
pub const LISTEN: &str = "127.0.0.1:7000";
/// `field` by default.
pub const FIELD: &str = "http://127.0.0.1:7100";
/// `targeted-field` by default.
pub const TARGETED_FIELD: &str = "Switchyard-Cache-Control";

/// Line and column (from 1, the column in characters) of byte `at` of `text`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

/// An unknown key's message, with the nearest known key if one is near.
fn unknown_key(key: &str) -> String {
    let near = KEYS.iter().map(|k| (distance(key, k), *k)).min().filter(|(d, _)| *d <= 2);
    let snake = KEYS.iter().find(|k| k.replace('-', "_") == key);
    match (snake, near) {
        (Some(k), _) => format!("no key `{key}`: keys are written with hyphens, as the flags are: `{k}`"),
        (None, Some((_, k))) => format!("no key `{key}`: did you mean `{k}`?"),
        (None, None) => format!("no key `{key}` (the keys are gateway serve's flags, without `--`)"),
    }
}

/// Levenshtein distance, for suggesting a key.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

fn kind(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "a whole number",
        DeValue::Float(_) => "a number with a fraction",
        DeValue::Boolean(_) => "true or false",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "a list",
        DeValue::Table(_) => "a table",
    }
}

fn text<'a>(v: &'a DeValue<'_>) -> Result<&'a str, String> {
    match v {
        DeValue::String(s) => Ok(s),
        other => Err(format!("expected text in quotes, found {}", kind(other))),
    }
}

fn path(v: &DeValue<'_>) -> Result<PathBuf, String> {
    text(v).map(PathBuf::from)
}

fn boolean(v: &DeValue<'_>) -> Result<bool, String> {
    match v {
        DeValue::Boolean(b) => Ok(*b),
        other => Err(format!("expected true or false, found {}", kind(other))),
    }
}

/// A TOML integer's value (decimal, hex, octal or binary, `_` allowed).
fn integer(v: &DeValue<'_>) -> Option<i128> {
    let DeValue::Integer(i) = v else { return None };
    i128::from_str_radix(&i.as_str().replace('_', ""), i.radix()).ok()
}

fn number(v: &DeValue<'_>) -> Option<f64> {
    match v {
        DeValue::Float(f) => match f.as_str() {
            "inf" | "+inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            s if s.ends_with("nan") => Some(f64::NAN),
            s => s.replace('_', "").parse().ok(),
        },
        _ => integer(v).map(|i| i as f64),
    }
}

fn whole(v: &DeValue<'_>) -> Result<u64, String> {
    integer(v).and_then(|i| u64::try_from(i).ok()).ok_or_else(|| match integer(v) {
        Some(i) => format!("{i} is negative; expected a whole number ≥ 0"),
        None => format!("expected a whole number ≥ 0, found {}", kind(v)),
    })
}

fn percent(v: &DeValue<'_>) -> Result<u8, String> {
    integer(v)
        .and_then(|i| u8::try_from(i).ok())
        .filter(|p| (1..=100).contains(p))
        .ok_or_else(|| "expected a whole percentage from 1 to 100 (RFC 9111 suggests 10)".to_string())
}

fn seconds_value(v: &DeValue<'_>) -> Result<Duration, String> {
    match (v, number(v)) {
        (DeValue::String(s), _) => parse_seconds(s),
        (_, Some(n)) => seconds(n),
        _ => Err(format!("expected seconds (a number, e.g. 10 or 0.5), found {}", kind(v))),
    }
}

/// Seconds as flags write them: a number ≥ 0 (`10`, `0.5`).
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    let n: f64 = s.trim().parse().map_err(|_| format!("{s:?} is not a number of seconds; write e.g. 10 or 0.5"))?;
    seconds(n)
}

fn seconds(n: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(n).map_err(|_| format!("{n}: give zero or more seconds"))
}

/// More than zero seconds (a wait of none could never be met).
pub fn more_than_zero(d: Duration) -> Result<Duration, String> {
    if d.is_zero() { Err("give more than zero seconds".into()) } else { Ok(d) }
}

/// `--wait-timeout`: seconds, more than zero.
pub fn parse_wait_timeout(s: &str) -> Result<Duration, String> {
    parse_seconds(s).and_then(more_than_zero)
}

fn size_value(v: &DeValue<'_>) -> Result<u64, String> {
    match v {
        DeValue::String(s) => parse_size(s),
        DeValue::Integer(_) => {
            whole(v).and_then(|n| if n > 0 { Ok(n) } else { Err("0 is not a size; give more than zero bytes".into()) })
        }
        other => Err(format!("expected a size (e.g. \"256MiB\" or 268435456), found {}", kind(other))),
    }
}

/// `512`, `16K`, `2M`, `1G`: bytes, KiB, MiB, GiB (either case, also written `KiB`, `MiB`,
/// `GiB`), more than zero.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bare = t.strip_suffix("iB").or_else(|| t.strip_suffix("ib")).unwrap_or(t);
    let (digits, unit): (&str, u64) = match bare.as_bytes().last() {
        Some(b'K' | b'k') => (&bare[..bare.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&bare[..bare.len() - 1], 1 << 20),
        Some(b'G' | b'g') => (&bare[..bare.len() - 1], 1 << 30),
        _ if bare.len() < t.len() => ("", 1),
        _ => (t, 1),
    };
    match digits.parse::<u64>() {
        Ok(n) if n > 0 => n.checked_mul(unit).ok_or_else(|| format!("{s:?} is too large")),
        _ => Err(format!(
            "{s:?} is not a size; write 256MiB or 268435456 (bytes, or a whole number with K, M or G, KiB, MiB or GiB)"
        )),
    }
}

/// An address to listen on, `HOST:PORT`.
fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.trim().parse().map_err(|_| format!("{s:?} is not an address and port; write e.g. 127.0.0.1:7000 or [::]:443"))
}

/// `--route`.
pub fn parse_route(s: &str) -> Result<RouteKind, String> {
    RouteKind::parse(s).ok_or_else(|| format!("no route `{s}`: use one of {}", RouteKind::NAMES))
}

/// `--write-rule`.
pub fn parse_write_rule(s: &str) -> Result<WriteRule, String> {
    WriteRule::parse(s).ok_or_else(|| format!("no write rule `{s}`: use one of {}", WriteRule::NAMES))
}

/// `origin`: a URL (`URL[@PRICE]`), a table `{ url = "…", price = 0.4 }`, or a list of them.
fn origins(v: &DeValue<'_>) -> Result<Vec<OriginSpec>, String> {
    let one = |v: &DeValue<'_>, n: Option<usize>| -> Result<OriginSpec, String> {
        let which = n.map_or(String::new(), |n| format!("origin {}: ", n + 1));
        match v {
            DeValue::String(s) => OriginSpec::parse(s).map_err(|e| format!("{which}{e}")),
            DeValue::Table(t) => {
                let mut url = None;
                let mut price = 1.0;
                for (k, v) in t {
                    match &**k.get_ref() {
                        "url" => url = Some(text(v.get_ref()).map_err(|e| format!("{which}url: {e}"))?.to_string()),
                        "price" => {
                            price = number(v.get_ref())
                                .filter(|p| *p >= 0.0 && p.is_finite())
                                .ok_or_else(|| format!("{which}price: expected a number ≥ 0"))?;
                        }
                        other => return Err(format!("{which}no key `{other}` in an origin: it has `url` and `price`")),
                    }
                }
                let url = url.ok_or_else(|| format!("{which}an origin's table needs `url`"))?;
                let spec = OriginSpec::parse(&url).map_err(|e| format!("{which}{e}"))?;
                Ok(OriginSpec { price, ..spec })
            }
            other => Err(format!(
                "{which}expected a URL in quotes or a table {{ url = \"…\", price = … }}, found {}",
                kind(other)
            )),
        }
    };
    match v {
        DeValue::Array(a) => a.iter().enumerate().map(|(n, v)| one(v.get_ref(), Some(n))).collect(),
        other => one(other, None).map(|o| vec![o]),
    }
}

/// `--purge-from NETWORK`: a network (`10.0.0.0/8`), an address (a network of one), or `none`.
pub fn purge_network(s: &str) -> Result<Option<IpNet>, String> {
    let s = s.trim();
    if s == "none" {
        return Ok(None);
    }
    s.parse::<IpNet>()
        .or_else(|_| s.parse::<std::net::IpAddr>().map(IpNet::from))
        .map(Some)
        .map_err(|_| format!("`{s}` is not a network (such as 10.0.0.0/8 or ::1/128), an address, or `none`"))
}

/// `purge-from`: a list of networks (`[]` or `["none"]` for none), or one.
fn purge_networks(v: &DeValue<'_>) -> Result<Vec<IpNet>, String> {
    let all: Vec<Option<IpNet>> = match v {
        DeValue::Array(a) => a.iter().map(|v| text(v.get_ref()).and_then(purge_network)).collect::<Result<_, _>>()?,
        other => text(other).and_then(purge_network).map(|n| vec![n])?,
    };
    Ok(all.into_iter().flatten().collect())
}

/// `--targeted-field NAME`: a field name (an RFC 9110 §5.6.2 token), in lower case, and none
/// of the fields whose meaning is already fixed.
pub fn targeted_field_name(s: &str) -> Result<String, String> {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if s.is_empty() || !s.bytes().all(tchar) {
        return Err(format!("{s:?} is not a field name (letters, digits and !#$%&'*+-.^_`|~ only)"));
    }
    let name = s.to_ascii_lowercase();
    if ["cache-control", "surrogate-control", "expires", "age"].contains(&name.as_str()) {
        return Err(format!("{s} already has its own meaning; name a field targeted at this gateway"));
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> Vec<String> {
        match Settings::from_toml(text, "gateway.toml").and_then(|s| s.resolve().map(|_| s)) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn each_error_names_the_line_the_key_and_what_would_do() {
        let text =
            "origin = \"http://127.0.0.1:8080\"\n\n# the bound\nmax-memory = \"256 MB\"\n  route = \"fastest\"\n";
        assert_eq!(
            errors(text),
            [
                "gateway.toml:4:1: max-memory: \"256 MB\" is not a size; write 256MiB or 268435456 (bytes, or a whole number with K, M or G, KiB, MiB or GiB)",
                &format!("gateway.toml:5:3: route: no route `fastest`: use one of {}", RouteKind::NAMES),
            ]
        );
    }

    #[test]
    fn unknown_keys_are_refused_with_the_nearest_known_one() {
        let e = errors("origin = \"http://a:80\"\nmax_memory = \"1G\"\nmax-memry = 5\nfrobnicate = true\n");
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("gateway.toml:2:1: no key `max_memory`: keys are written with hyphens"), "{e:?}");
        assert!(e[1].starts_with("gateway.toml:3:1: no key `max-memry`: did you mean `max-memory`?"), "{e:?}");
        assert!(e[2].starts_with("gateway.toml:4:1: no key `frobnicate`"), "{e:?}");
    }

    #[test]
    fn wrong_types_bad_toml_and_keys_of_the_other_mode() {
        let e = errors("h2c = \"yes\"\nseed = -1\n");
        assert_eq!(
            e,
            [
                "gateway.toml:1:1: h2c: expected true or false, found a string",
                "gateway.toml:2:1: seed: -1 is negative; expected a whole number ≥ 0"
            ]
        );
        let e = errors("listen = \"127.0.0.1:7000\"\nmax-memory = [\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("gateway.toml:2:") && e[0].contains("not TOML"), "{e:?}");
        let e = errors("max-memory = \"1G\"\n");
        assert_eq!(
            e,
            ["gateway.toml:1:1: max-memory: only in front of an origin: set `origin` too, or leave this out"]
        );
        let e = errors("origin = [\"http://a:80\", { url = \"http://b:80\", price = -2 }]\npolicy = \"simple\"\n");
        assert_eq!(e, ["gateway.toml:1:1: origin: origin 2: price: expected a number ≥ 0"]);
        let e = errors("origin = \"http://a:80\"\npolicy = \"simple\"\ntls-cert = \"/nonexistent/cert.pem\"\n");
        assert_eq!(e.len(), 2, "{e:?}");
        assert_eq!(e[0], "gateway.toml:2:1: policy: only in front of a sensor field: not with `origin`");
        assert_eq!(e[1], "gateway.toml:3:1: tls-cert: needs `tls-key`, the certificate's private key");
    }

    #[test]
    fn lists_and_tables_of_origins_and_networks() {
        let s = Settings::from_toml(
            "origin = [\"http://a:80@0.4\", { url = \"http://b:80/\", price = 2 }]\npurge-from = [\"10.0.0.0/8\", \"::1\"]\nmax-memory = 1048576\nmax-object-size = \"64K\"\nupstream-timeout = 2.5\nsla = \"99:300ms\"\n",
            "g.toml",
        )
        .unwrap();
        let Mode::Origin(o) = s.resolve().unwrap().mode else { panic!("origin mode") };
        assert_eq!(
            o.origins,
            [
                OriginSpec { url: "http://a:80".into(), price: 0.4 },
                OriginSpec { url: "http://b:80".into(), price: 2.0 }
            ]
        );
        assert_eq!(o.purge.from, ["10.0.0.0/8".parse::<IpNet>().unwrap(), "::1/128".parse().unwrap()]);
        assert_eq!((o.max_memory, o.object_bound()), (1 << 20, 64 << 10));
        assert_eq!(o.upstream_timeout, Duration::from_millis(2500));
        assert_eq!(o.sla.within, Duration::from_millis(300));
    }

    #[test]
    fn the_log_may_move_on_a_reload_but_not_be_turned_on_or_off() {
        let with = |extra: &str| Settings::from_toml(&format!("origin = \"http://a:80\"\n{extra}"), "g.toml").unwrap();
        let one = with("access-log = \"/var/log/one.log\"\n");
        let two = with("access-log = \"/var/log/two.log\"\nlog-format = \"json\"\naccess-log-flush = 0.25\n");
        assert!(one.reload_refusals(&two).is_empty(), "{:?}", one.reload_refusals(&two));
        let options = two.resolve().unwrap().access_log.unwrap();
        assert_eq!(
            options,
            crate::access_log::Options {
                target: crate::access_log::Target::File("/var/log/two.log".into()),
                format: crate::access_log::Format::Json,
                flush: Duration::from_millis(250),
            }
        );
        assert_eq!(one.resolve().unwrap().access_log.unwrap().flush, crate::access_log::FLUSH);
        let refused = [
            "access-log: the log cannot be turned on or off while the gateway runs (restart it for that); its path, format and flush interval can change",
        ];
        assert_eq!(one.reload_refusals(&with("")), refused);
        assert_eq!(with("").reload_refusals(&one), refused);
        assert_eq!(
            errors("origin = \"http://a:80\"\naccess-log-flush = 2\n"),
            ["gateway.toml:2:1: access-log-flush: only with `access-log`: there is no log to flush"]
        );
    }

    #[test]
    fn flags_override_the_file_and_a_reload_names_what_cannot_change() {
        let file = Settings::from_toml(
            "origin = \"http://a:80\"\nmax-memory = \"1G\"\nlisten = \"127.0.0.1:7001\"\n",
            "g.toml",
        )
        .unwrap();
        let flags = Settings { max_memory: Some(2 << 20), ..Settings::default() };
        let merged = file.clone().under(flags);
        let Mode::Origin(o) = merged.resolve().unwrap().mode else { panic!("origin mode") };
        assert_eq!(o.max_memory, 2 << 20);
        // A flag's error names the flag.
        let bad = file.clone().under(Settings { max_object_size: Some(4 << 20), ..Settings::default() });
        let e = bad.under(Settings { max_memory: Some(1 << 20), ..Settings::default() }).resolve().err().unwrap();
        assert_eq!(
            e.to_string(),
            "--max-object-size: 4194304 is larger than max-memory 1048576: no response that size could be stored"
        );
        let changed = Settings::from_toml(
            "origin = \"http://b:80\"\nmax-memory = \"1M\"\nlisten = \"127.0.0.1:7002\"\neviction = \"lru\"\n",
            "g.toml",
        )
        .unwrap();
        assert_eq!(
            file.reload_refusals(&changed),
            [
                "listen cannot change while the gateway runs (restart it for that)",
                "eviction cannot change while the gateway runs (restart it for that)"
            ]
        );
        let live = Settings::from_toml(
            "origin = [\"http://b:80\", \"http://c:80\"]\nmax-memory = \"1M\"\nlisten = \"127.0.0.1:7001\"\n",
            "g.toml",
        )
        .unwrap();
        assert!(file.reload_refusals(&live).is_empty());
    }
}
