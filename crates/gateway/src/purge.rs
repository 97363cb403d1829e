//! Purges an operator sends the gateway's origin mode: who may send them, what they name,
//! and the tags a stored response carries. The stored responses are forgotten by the core
//! cache's own invalidation (`Cache::invalidate_run`, `Cache::invalidate_picked`), whose rule
//! for a read under way — it answers its waiters and is not kept — is what makes a purge hold
//! for coalesced readers in flight.
//!
//! A purge is a request with the method `PURGE`, as Squid and Varnish take it:
//! - `PURGE /path?query`: that URL, with all its variants;
//! - `PURGE /prefix*`: every URL that begins with `/prefix` (a trailing `*`);
//! - `PURGE /` with `Surrogate-Key: a b` (or `Cache-Tag: a,b`): every response the origin
//!   tagged `a` or `b` in the same field, as Fastly's and Cloudflare's purge by tag.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::http::{HeaderMap, Method, header};
use ipnet::IpNet;
use switchyard_core::Nanos;

/// The method a purge is sent with.
pub fn is_purge(method: &Method) -> bool {
    method.as_str() == "PURGE"
}

/// The response fields that tag a stored response, and the request fields a purge by tag
/// names its tags in: Fastly's `Surrogate-Key` (tags apart by spaces) and Cloudflare's
/// `Cache-Tag` (apart by commas). Neither goes on to clients: they are the origin's word to
/// its caches.
pub const TAG_FIELDS: [&str; 2] = ["surrogate-key", "cache-tag"];

/// Who may purge.
#[derive(Clone, Debug)]
pub struct PurgeRules {
    /// Anyone whose `Authorization: Bearer …` carries this token.
    pub token: Option<String>,
    /// Anyone whose address is in one of these networks.
    pub from: Vec<IpNet>,
}

impl Default for PurgeRules {
    /// Purges from this machine only (127.0.0.0/8 and ::1), with no token.
    fn default() -> Self {
        Self {
            token: None,
            from: vec!["127.0.0.0/8".parse().expect("a network"), "::1/128".parse().expect("a network")],
        }
    }
}

impl PurgeRules {
    /// Whether a purge with these request fields from `peer` (unknown where the server was
    /// not started with the peers' addresses) may go ahead; if not, why, in words that say
    /// what to change.
    pub fn allows(&self, headers: &HeaderMap, peer: Option<SocketAddr>) -> Result<(), String> {
        if let Some(token) = &self.token {
            let given = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::trim);
            if given.is_some_and(|g| same(g.as_bytes(), token.as_bytes())) {
                return Ok(());
            }
        }
        // An IPv4 peer on an IPv6 socket arrives as ::ffff:a.b.c.d.
        let ip = peer.map(|p| match p.ip() {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        });
        if let Some(ip) = ip
            && self.from.iter().any(|net| net.contains(&ip))
        {
            return Ok(());
        }
        let who = ip.map_or_else(|| "a client whose address is unknown".to_string(), |ip| ip.to_string());
        let token = if self.token.is_some() { "without the right token, " } else { "" };
        Err(format!(
            "purge refused: {who} is not allowed to purge ({token}allowed: {}); start the gateway with --purge-from NETWORK or --purge-token TOKEN and send Authorization: Bearer TOKEN",
            if self.from.is_empty() {
                "no network".to_string()
            } else {
                self.from.iter().map(IpNet::to_string).collect::<Vec<_>>().join(", ")
            },
        ))
    }
}

/// Compares secrets in time that depends on their lengths only, not on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// What a purge names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// One URL (path and query), all its variants.
    Url(String),
    /// Every URL beginning with this.
    Prefix(String),
    /// Every response carrying one of these tags.
    Tags(Vec<String>),
}

impl Scope {
    /// The scope of a purge of `key` (its path and query) with request fields `headers`.
    pub fn of(key: &str, headers: &HeaderMap) -> Self {
        let tags = tags(headers);
        if !tags.is_empty() {
            Self::Tags(tags)
        } else if let Some(prefix) = key.strip_suffix('*') {
            Self::Prefix(prefix.to_string())
        } else {
            Self::Url(key.to_string())
        }
    }

    /// Its name in `/metrics` and answers.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Url(_) => "url",
            Self::Prefix(_) => "prefix",
            Self::Tags(_) => "tag",
        }
    }
}

/// The tags in `headers`' tag fields, each once.
pub fn tags(headers: &HeaderMap) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in TAG_FIELDS {
        for value in headers.get_all(name).iter().filter_map(|v| v.to_str().ok()) {
            for tag in value.split(|c: char| c == ',' || c.is_ascii_whitespace()).filter(|t| !t.is_empty()) {
                if !out.iter().any(|t| t == tag) {
                    out.push(tag.to_string());
                }
            }
        }
    }
    out
}

/// When each tag was last purged, so that a read under way when its tag was purged (whose
/// tags were not known until it answered) is not kept. Only purges younger than the longest a
/// read may take are needed: older ones are let go, which bounds this by the purges of that
/// long.
#[derive(Debug, Default)]
pub struct TagPurges {
    at: HashMap<String, Nanos>,
}

impl TagPurges {
    /// Records that `tags` were purged at `now`, letting go of purges older than `horizon`.
    pub fn purged(&mut self, tags: &[String], now: Nanos, horizon: Duration) {
        let oldest = now.0.saturating_sub(u64::try_from(horizon.as_nanos()).unwrap_or(u64::MAX));
        self.at.retain(|_, t| t.0 >= oldest);
        for tag in tags {
            self.at.insert(tag.clone(), now);
        }
    }

    /// Whether any of `tags` was purged after `started` (a read that started then brings what
    /// the purge removed).
    pub fn any_since(&self, tags: &[String], started: Nanos) -> bool {
        tags.iter().any(|t| self.at.get(t).is_some_and(|at| *at >= started))
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn fields(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(*n, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    fn peer(ip: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip.parse().unwrap(), 4000))
    }

    #[test]
    fn the_scope_comes_from_the_tags_or_the_url() {
        assert_eq!(Scope::of("/a/b?x=1", &HeaderMap::new()), Scope::Url("/a/b?x=1".into()));
        assert_eq!(Scope::of("/a/*", &HeaderMap::new()), Scope::Prefix("/a/".into()));
        let h = fields(&[("surrogate-key", "k1  k2"), ("cache-tag", "k2,k3"), ("cache-tag", "k4")]);
        assert_eq!(Scope::of("/", &h), Scope::Tags(vec!["k1".into(), "k2".into(), "k3".into(), "k4".into()]));
    }

    #[test]
    fn by_default_only_this_machine_may_purge() {
        let rules = PurgeRules::default();
        assert!(rules.allows(&HeaderMap::new(), peer("127.0.0.1")).is_ok());
        assert!(rules.allows(&HeaderMap::new(), peer("::1")).is_ok());
        assert!(rules.allows(&HeaderMap::new(), peer("::ffff:127.0.0.1")).is_ok(), "IPv4 on an IPv6 socket");
        let why = rules.allows(&HeaderMap::new(), peer("192.0.2.7")).unwrap_err();
        assert!(why.contains("192.0.2.7") && why.contains("--purge-from"), "{why}");
        assert!(rules.allows(&HeaderMap::new(), None).is_err(), "an unknown address is not this machine");
    }

    #[test]
    fn a_token_lets_anyone_purge_and_a_wrong_one_is_refused() {
        let rules = PurgeRules { token: Some("s3cret".into()), from: vec![] };
        assert!(rules.allows(&fields(&[("authorization", "Bearer s3cret")]), peer("192.0.2.7")).is_ok());
        for wrong in ["Bearer s3cre", "Bearer s3cret2", "Basic s3cret", ""] {
            let why = rules.allows(&fields(&[("authorization", wrong)]), peer("192.0.2.7")).unwrap_err();
            assert!(why.contains("without the right token"), "{why}");
        }
        let nets = PurgeRules { token: None, from: vec!["10.0.0.0/8".parse().unwrap()] };
        assert!(nets.allows(&HeaderMap::new(), peer("10.1.2.3")).is_ok());
        assert!(nets.allows(&HeaderMap::new(), peer("127.0.0.1")).is_err(), "--purge-from replaces the default");
    }

    #[test]
    fn tag_purges_are_remembered_as_long_as_a_read_may_take() {
        let mut p = TagPurges::default();
        let s = Duration::from_secs(1);
        p.purged(&["a".into()], Nanos(5_000_000_000), s);
        assert!(p.any_since(&["b".into(), "a".into()], Nanos(4_000_000_000)), "a read started before the purge");
        assert!(!p.any_since(&["a".into()], Nanos(6_000_000_000)), "a read started after it");
        p.purged(&["b".into()], Nanos(7_000_000_000), s);
        assert!(!p.at.contains_key("a"), "older than any read: let go");
    }
}
