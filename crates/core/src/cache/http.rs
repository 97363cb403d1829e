//! HTTP caching as a shared cache does it (RFC 9111), as pure functions of header fields and
//! times: whether a response may be stored (§3), how long it is fresh (§4.2.1, with the
//! targeted fields of RFC 9213 — `CDN-Cache-Control` and the gateway's own — and then
//! Surrogate-Control from the W3C Edge Architecture note before it), how old it is (§4.2.3),
//! which stored response a request may use and how (§4, §4.1, §5.2.1), how a client's
//! conditional request is answered from what is stored (§4.3.2), which fields a `304` updates
//! (§3.2), and a single byte range (RFC 9110 §14).
//!
//! The gateway's origin mode keeps the responses and does the I/O; the choices live here.
//! Where the RFC leaves a choice, or the public cache test suite (cache-tests.fyi) expects
//! more than the RFC asks, the choice is documented where it is made.

use std::time::{Duration, SystemTime};

/// A message's header fields: one `(name, value)` pair per field line, in order, names in
/// lower case (as the `http` crate keeps them). Values that are not text are left out by the
/// caller.
#[derive(Clone, Copy, Debug)]
pub struct Fields<'a>(pub &'a [(&'a str, &'a str)]);

impl<'a> Fields<'a> {
    /// Every line of field `name` (lower case).
    pub fn all(self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// The first line of field `name`.
    pub fn get(self, name: &str) -> Option<&'a str> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }

    /// Whether field `name` is present.
    pub fn has(self, name: &str) -> bool {
        self.0.iter().any(|(n, _)| *n == name)
    }
}

/// Splits a list-valued field (RFC 9110 §5.6.1) at commas outside quoted strings; members are
/// trimmed of the optional whitespace around them, and empty members dropped.
fn members(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in value.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&value[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&value[start..]);
    out.into_iter().map(|m| m.trim_matches([' ', '\t'])).filter(|m| !m.is_empty()).collect()
}

/// A quoted string's content (RFC 9110 §5.6.4), or `s` itself if it is not quoted.
fn unquote(s: &str) -> String {
    match s.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                out.push(if c == '\\' { chars.next().unwrap_or('\\') } else { c });
            }
            out
        }
        None => s.to_string(),
    }
}

/// The greatest delta-seconds a cache must represent; larger values are taken as this
/// (RFC 9111 §1.2.2).
pub const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// A delta-seconds value (RFC 9111 §1.2.2): digits only, capped at [`DELTA_SECONDS_MAX`];
/// `None` for anything else.
fn delta_seconds(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits = v.trim_start_matches('0');
    Some(if digits.len() > 10 { DELTA_SECONDS_MAX } else { digits.parse::<u64>().unwrap_or(0).min(DELTA_SECONDS_MAX) })
}

/// Cache directives (RFC 9111 §5.2), from every line of `Cache-Control` (or of the targeted
/// `Surrogate-Control`): names in lower case, values unquoted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Directives(Vec<(String, Option<String>)>);

impl Directives {
    /// Reads the directives of every line. A directive whose name is not a token, or that has
    /// whitespace around its `=`, is not one (it is kept under no name, so it matches
    /// nothing): `max-age = 5` does not set a max-age.
    pub fn parse<'a>(lines: impl IntoIterator<Item = &'a str>) -> Self {
        let mut out = Vec::new();
        for line in lines {
            for m in members(line) {
                out.push(Self::directive(m));
            }
        }
        Self(out)
    }

    fn directive(m: &str) -> (String, Option<String>) {
        let token =
            |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && !b"\"(),/:;<=>?@[\\]{}".contains(&b));
        match m.split_once('=') {
            Some((k, v)) if token(k) && !v.starts_with([' ', '\t']) => (k.to_ascii_lowercase(), Some(unquote(v))),
            Some(_) => (String::new(), None),
            None if token(m) => (m.to_ascii_lowercase(), None),
            None => (String::new(), None),
        }
    }

    /// The directives of `Surrogate-Control` lines meant for the surrogate named `target`:
    /// those with no `;device-token`, and those whose token is `target` (W3C Edge
    /// Architecture 1.0, §2.2).
    pub fn parse_targeted<'a>(lines: impl IntoIterator<Item = &'a str>, target: &str) -> Self {
        let mut out = Vec::new();
        for line in lines {
            for m in members(line) {
                let (d, to) = match m.rsplit_once(';') {
                    Some((d, t)) if !t.contains('"') => (d.trim_end(), Some(t.trim())),
                    _ => (m, None),
                };
                if to.is_none_or(|t| t.eq_ignore_ascii_case(target)) {
                    out.push(Self::directive(d));
                }
            }
        }
        Self(out)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|(k, _)| k.is_empty())
    }

    /// Whether directive `name` is present, with or without a value.
    pub fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(k, _)| k == name)
    }

    /// The value of the first `name` that has one.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.0.iter().filter(|(k, _)| k == name).find_map(|(_, v)| v.as_deref())
    }

    /// `name`'s delta-seconds (RFC 9111 §1.2.2): digits only, the first occurrence (§4.2.1
    /// lets a cache use the first of several), capped at [`DELTA_SECONDS_MAX`]. `None` if
    /// absent or not a number (`'3600'`, `-1`, `3600.5`): such a directive is ignored.
    pub fn seconds(&self, name: &str) -> Option<u64> {
        delta_seconds(self.0.iter().find(|(k, _)| k == name)?.1.as_deref()?)
    }

    /// The field names a qualified `no-cache="a, b"` or `private="a"` lists, in lower case.
    pub fn qualified(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .filter_map(|(_, v)| v.as_deref())
            .flat_map(|v| members(v).into_iter().map(str::to_ascii_lowercase).collect::<Vec<_>>())
            .collect()
    }

    /// Whether `name` is present without a value (the unqualified form of `no-cache` and
    /// `private`).
    pub fn bare(&self, name: &str) -> bool {
        self.0.iter().any(|(k, v)| k == name && v.is_none())
    }
}

/// Reads an HTTP-date (RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime
/// forms a recipient must accept).
pub fn http_date(value: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(value.trim()).ok()
}

/// The `Age` a response arrived with (RFC 9111 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgeField {
    /// None was sent.
    Absent,
    /// Its first member is a non-negative integer, in seconds (capped at
    /// [`DELTA_SECONDS_MAX`]).
    Seconds(u64),
    /// Its first member is something else (a sign, a fraction, a parameter, not a number): the
    /// field is ignored, as if absent.
    Invalid,
}

/// How `Age` is read where RFC 9111 and the public cache test suite's npm release disagree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AgeReading {
    /// RFC 9111 §5.1 with RFC 9110 §5.3 ([`age_field`]): the first member counts, an invalid
    /// first member makes the field ignored.
    #[default]
    Rfc,
    /// What the suite's npm release 0.4.5 (`http-cache-tests`) requires ([`age_field_suite`]).
    Suite045,
}

impl AgeReading {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rfc => "rfc",
            Self::Suite045 => "suite-0.4.5",
        }
    }
}

impl std::str::FromStr for AgeReading {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "rfc" => Ok(Self::Rfc),
            "suite-0.4.5" => Ok(Self::Suite045),
            _ => Err(format!("unknown Age reading {s:?}: expected rfc or suite-0.4.5")),
        }
    }
}

/// Reads `Age` as RFC 9111 §5.1 says: of a list, the first member counts and the rest are
/// discarded; a first member that is not a non-negative integer makes the field ignored.
/// Several field lines are one list, in order (RFC 9110 §5.3), so `Age: 0` then `Age: 7200`
/// is 0, and `Age: 7200, 0` is 7200. Empty members are no members (RFC 9110 §5.6.1).
///
/// The public test suite's newer version checks exactly this; its npm release 0.4.5 requires
/// otherwise on nine tests ([`age_field_suite`]).
pub fn age_field(resp: Fields) -> AgeField {
    let Some(first) = resp.all("age").flat_map(members).next() else {
        return if resp.has("age") { AgeField::Invalid } else { AgeField::Absent };
    };
    delta_seconds(first).map_or(AgeField::Invalid, AgeField::Seconds)
}

/// Reads `Age` as the cache test suite's npm release 0.4.5 requires, against RFC 9111 §5.1: an
/// `Age` that is not one non-negative integer, that comes on several field lines, or whose
/// list repeats a value (`0, 0`) makes the response stale (taken as [`DELTA_SECONDS_MAX`]
/// old) instead of being ignored or read by its first member; a one-line list of distinct
/// integers (`0,7200`) counts by its first member, as under the RFC. The suite's later
/// version expects the RFC's reading (or only checks), so this is offered only as an option.
pub fn age_field_suite(resp: Fields) -> AgeField {
    let lines: Vec<&str> = resp.all("age").collect();
    let stale = AgeField::Seconds(DELTA_SECONDS_MAX);
    match lines.as_slice() {
        [] => AgeField::Absent,
        [line] => {
            let list = members(line);
            let values: Option<Vec<u64>> = list.iter().map(|m| delta_seconds(m)).collect();
            match values {
                Some(v) if !v.is_empty() && !v.iter().enumerate().any(|(i, x)| v[..i].contains(x)) => {
                    AgeField::Seconds(v[0])
                }
                _ => stale,
            }
        }
        _ => stale,
    }
}

/// `Age` as `reading` says.
pub fn age_field_read(resp: Fields, reading: AgeReading) -> AgeField {
    match reading {
        AgeReading::Rfc => age_field(resp),
        AgeReading::Suite045 => age_field_suite(resp),
    }
}

/// Status codes heuristically cacheable by default (RFC 9110 §15.1).
pub fn heuristically_cacheable(status: u16) -> bool {
    matches!(status, 200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501)
}

/// Status codes this cache understands (RFC 9111 §3, §5.2.2.3 must-understand): the final
/// codes RFC 9110 defines. A response with `must-understand` and any other code is not stored.
pub fn understood(status: u16) -> bool {
    matches!(status, 200..=208 | 226 | 300..=305 | 307 | 308 | 400..=418 | 421..=426 | 428 | 429 | 431 | 451 | 500..=508 | 510 | 511)
}

/// How a cache may make up freshness for a response that states none (RFC 9111 §4.2.2). Both
/// are off by default: a cache in front of an origin serves what the origin allows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Heuristic {
    /// A fraction of the time since `Last-Modified` (10% is the RFC's example), if set.
    pub last_modified_fraction: Option<f64>,
    /// A fixed lifetime for a response with no `Last-Modified`, if set.
    pub default: Option<Duration>,
}

/// Who is asking: the name this cache answers to in `Surrogate-Control` targets, its list of
/// targeted cache-control fields, and its heuristic.
#[derive(Clone, Debug)]
pub struct Policy {
    /// This surrogate's device token (`Surrogate-Capability: TOKEN="Surrogate/1.0"`).
    pub surrogate: String,
    /// Its target list (RFC 9213 §2.1): the targeted cache-control fields it obeys, most
    /// specific first, names in lower case. See [`target_list`].
    pub targets: Vec<String>,
    /// Freshness for responses that state none.
    pub heuristic: Heuristic,
    /// How `Age` is read ([`AgeReading`]).
    pub age_reading: AgeReading,
}

/// The targeted field meant for this gateway alone, unless configured otherwise.
pub const OWN_TARGETED_FIELD: &str = "switchyard-cache-control";

/// The field RFC 9213 §3 targets at every CDN cache, which this gateway is one of.
pub const CDN_CACHE_CONTROL: &str = "cdn-cache-control";

/// A CDN cache's target list (RFC 9213 §2.1, §3): the field targeted at it alone (`own`,
/// e.g. [`OWN_TARGETED_FIELD`]), then `CDN-Cache-Control`. Names are compared in lower case.
pub fn target_list(own: &str) -> Vec<String> {
    let own = own.to_ascii_lowercase();
    if own == CDN_CACHE_CONTROL { vec![own] } else { vec![own, CDN_CACHE_CONTROL.to_string()] }
}

/// The `Surrogate-Capability` request field announcing `token` (Edge Architecture §2.1).
pub fn surrogate_capability(token: &str) -> String {
    format!("{token}=\"Surrogate/1.0\"")
}

/// What a response's fields say of its caching, read once when it arrives.
#[derive(Clone, Debug, PartialEq)]
pub struct ResponseRules {
    /// How long it is fresh from its generation (§4.2.1), `None` if it states nothing and no
    /// heuristic applies: stale on arrival.
    pub lifetime: Option<Duration>,
    /// Whether `lifetime` is heuristic.
    pub heuristic: bool,
    /// Unqualified `no-cache`: every use must be validated with the origin (§5.2.2.4).
    pub no_cache: bool,
    /// `must-revalidate`, `proxy-revalidate` or `s-maxage`: never served stale (§5.2.2.2,
    /// §5.2.2.8, §5.2.2.10).
    pub must_revalidate: bool,
    /// `stale-while-revalidate=N` (RFC 5861 §3).
    pub stale_while_revalidate: Option<Duration>,
    /// `stale-if-error=N` (RFC 5861 §4).
    pub stale_if_error: Option<Duration>,
    /// Fields not to be stored: those a qualified `no-cache` or `private` names (§5.2.2.4,
    /// §5.2.2.7), in lower case.
    pub omit: Vec<String>,
    /// `Age` as it arrived.
    pub age: AgeField,
}

/// Which field's directives govern a response for this cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Governs {
    /// `Cache-Control` (with `Expires`), as RFC 9111 has it.
    CacheControl,
    /// `Surrogate-Control` meant for this surrogate (Edge Architecture §2.2), beside
    /// `Cache-Control` for what it does not say.
    Surrogate,
    /// A targeted field of the target list (RFC 9213 §2.1): `Cache-Control` and `Expires`
    /// are ignored.
    Targeted,
}

/// The caching directives that apply, as `(directives, surrogate directives, which)`.
///
/// RFC 9213 §2.1: the first field of the target list ([`Policy::targets`]) with a valid,
/// non-empty value governs, and `Cache-Control` and `Expires` are then ignored; its
/// directives mean what they mean in `Cache-Control`. Without one, `Surrogate-Control` for
/// this surrogate governs if it says anything (Edge Architecture §2.2: a surrogate obeys it
/// over Cache-Control), else `Cache-Control`. The targeted fields come before
/// Surrogate-Control because they are the standard one (an origin sending both most likely
/// means the newer for caches that read it).
fn controls(resp: Fields, policy: &Policy) -> (Directives, Directives, Governs) {
    if let Some(d) = policy.targets.iter().find_map(|name| targeted_field(resp, name)) {
        return (d, Directives::default(), Governs::Targeted);
    }
    let cc = Directives::parse(resp.all("cache-control"));
    let sc = Directives::parse_targeted(resp.all("surrogate-control"), &policy.surrogate);
    let governs = if sc.is_empty() { Governs::CacheControl } else { Governs::Surrogate };
    (cc, sc, governs)
}

/// The directives of the targeted field `name` (RFC 9213 §2.2): its lines joined as one
/// list, read as a structured-field Dictionary (RFC 8941 §4.2.2); `None` if it is absent,
/// empty, or does not parse, which make it ignored as if absent. A directive whose value has
/// another type than its definition asks (`max-age="10"`: a String where an Integer is due)
/// is not consumed (§2.1): it is kept with a value no reading accepts. A Boolean false
/// (`no-store=?0`) is no directive.
fn targeted_field(resp: Fields, name: &str) -> Option<Directives> {
    if !resp.has(name) {
        return None;
    }
    let joined = resp.all(name).collect::<Vec<_>>().join(", ");
    let members = structured::dictionary(&joined)?;
    if members.is_empty() {
        return None;
    }
    let out = members
        .into_iter()
        .filter_map(|(key, value)| match value {
            structured::Value::True => Some((key, None)),
            structured::Value::False => None,
            structured::Value::Integer(i) => Some((key, Some(i.to_string()))),
            // Not consumed: a value no delta-seconds or field-name reading accepts.
            structured::Value::Other => Some((key, Some("\u{0}".to_string()))),
        })
        .collect();
    Some(Directives(out))
}

/// Just enough of Structured Field Values (RFC 8941) to read a Dictionary and tell a valid
/// one from one that must be ignored: every bare item type is parsed (and Dates and Display
/// Strings of RFC 9651), but only Booleans and Integers are kept, the types cache directives
/// take.
mod structured {
    /// A member's value, as far as cache directives care.
    #[derive(Debug, PartialEq)]
    pub(super) enum Value {
        True,
        False,
        Integer(i64),
        Other,
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn peek(&self) -> Option<u8> {
            self.s.get(self.i).copied()
        }
        fn eat(&mut self, b: u8) -> bool {
            let hit = self.peek() == Some(b);
            self.i += usize::from(hit);
            hit
        }
        fn skip(&mut self, set: &[u8]) {
            while self.peek().is_some_and(|b| set.contains(&b)) {
                self.i += 1;
            }
        }
        fn key(&mut self) -> Option<String> {
            let start = self.i;
            if !self.peek().is_some_and(|b| b.is_ascii_lowercase() || b == b'*') {
                return None;
            }
            self.skip(b"abcdefghijklmnopqrstuvwxyz0123456789_-.*");
            Some(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
        }
        fn bare_item(&mut self) -> Option<Value> {
            match self.peek()? {
                b'-' | b'0'..=b'9' => self.number(),
                b'"' => self.string().map(|_| Value::Other),
                b'?' => {
                    self.i += 1;
                    if self.eat(b'1') {
                        Some(Value::True)
                    } else if self.eat(b'0') {
                        Some(Value::False)
                    } else {
                        None
                    }
                }
                b':' => {
                    self.i += 1;
                    self.skip(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=");
                    self.eat(b':').then_some(Value::Other)
                }
                b'@' => {
                    self.i += 1;
                    matches!(self.number()?, Value::Integer(_)).then_some(Value::Other)
                }
                b'%' => {
                    self.i += 1;
                    self.string().map(|_| Value::Other)
                }
                b if b.is_ascii_alphabetic() || b == b'*' => {
                    self.i += 1;
                    while self.peek().is_some_and(|b| b.is_ascii_graphic() && !b"\"(),;<=>?@[\\]{}".contains(&b)) {
                        self.i += 1;
                    }
                    Some(Value::Other)
                }
                _ => None,
            }
        }
        /// RFC 8941 §4.2.4: at most 15 integer digits, or 12 and up to 3 fraction digits.
        fn number(&mut self) -> Option<Value> {
            let neg = self.eat(b'-');
            let start = self.i;
            self.skip(b"0123456789");
            let int = &self.s[start..self.i];
            if int.is_empty() {
                return None;
            }
            if self.eat(b'.') {
                let f = self.i;
                self.skip(b"0123456789");
                let frac = self.i - f;
                return (int.len() <= 12 && (1..=3).contains(&frac)).then_some(Value::Other);
            }
            if int.len() > 15 {
                return None;
            }
            let n: i64 = std::str::from_utf8(int).ok()?.parse().ok()?;
            Some(Value::Integer(if neg { -n } else { n }))
        }
        fn string(&mut self) -> Option<()> {
            self.i += 1;
            loop {
                match self.peek()? {
                    b'\\' => {
                        self.i += 1;
                        if !matches!(self.peek()?, b'"' | b'\\') {
                            return None;
                        }
                        self.i += 1;
                    }
                    b'"' => {
                        self.i += 1;
                        return Some(());
                    }
                    b' '..=b'~' => self.i += 1,
                    _ => return None,
                }
            }
        }
        fn parameters(&mut self) -> Option<()> {
            while self.eat(b';') {
                self.skip(b" ");
                self.key()?;
                if self.eat(b'=') {
                    self.bare_item()?;
                }
            }
            Some(())
        }
        fn item_or_inner_list(&mut self) -> Option<Value> {
            if self.eat(b'(') {
                loop {
                    self.skip(b" ");
                    if self.eat(b')') {
                        break;
                    }
                    self.bare_item()?;
                    self.parameters()?;
                    if !matches!(self.peek()?, b' ' | b')') {
                        return None;
                    }
                }
                self.parameters()?;
                return Some(Value::Other);
            }
            let v = self.bare_item()?;
            self.parameters()?;
            Some(v)
        }
    }

    /// A Dictionary's members in order, a later duplicate key replacing the earlier value in
    /// place (RFC 8941 §4.2.2); `None` on any parse error.
    pub(super) fn dictionary(input: &str) -> Option<Vec<(String, Value)>> {
        let mut p = Parser { s: input.as_bytes(), i: 0 };
        p.skip(b" ");
        let mut out: Vec<(String, Value)> = Vec::new();
        while p.peek().is_some() {
            let key = p.key()?;
            let value = if p.eat(b'=') {
                p.item_or_inner_list()?
            } else {
                p.parameters()?;
                Value::True
            };
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => out.push((key, value)),
            }
            p.skip(b" \t");
            if p.peek().is_none() {
                break;
            }
            if !p.eat(b',') {
                return None;
            }
            p.skip(b" \t");
            p.peek()?;
        }
        // Trailing spaces are discarded (§4.2); anything else left is an error, caught above.
        Some(out)
    }
}

/// Reads a response's caching rules. `received` is when it arrived (wall clock), the date a
/// response without a valid `Date` is taken to have (RFC 9110 §6.6.1).
pub fn response_rules(status: u16, resp: Fields, policy: &Policy, received: SystemTime) -> ResponseRules {
    let (cc, sc, governs) = controls(resp, policy);
    let surrogate = governs == Governs::Surrogate;
    // A targeted field makes Expires ignored too (RFC 9213 §2.1).
    let expires = resp.get("expires").filter(|_| governs != Governs::Targeted);
    let secs = |s: u64| Duration::from_secs(s);
    let age = age_field_read(resp, policy.age_reading);
    let mut heuristic = false;
    let lifetime = if let Some(s) = sc.seconds("max-age") {
        Some(secs(s))
    } else if let Some(s) = (!surrogate).then(|| cc.seconds("s-maxage").or_else(|| cc.seconds("max-age"))).flatten() {
        Some(secs(s))
    } else if let Some(expires) = expires {
        // An Expires that does not read is in the past (§5.3); the first of several is used.
        let date = resp.get("date").and_then(http_date).unwrap_or(received);
        Some(http_date(expires).map_or(Duration::ZERO, |e| e.duration_since(date).unwrap_or(Duration::ZERO)))
    } else if heuristically_cacheable(status) || cc.has("public") {
        // §4.2.2: only without explicit expiry, only for these codes or `public`.
        heuristic = true;
        let date = resp.get("date").and_then(http_date).unwrap_or(received);
        match (resp.get("last-modified").and_then(http_date), policy.heuristic) {
            (Some(lm), Heuristic { last_modified_fraction: Some(f), .. }) => {
                Some(date.duration_since(lm).unwrap_or(Duration::ZERO).mul_f64(f.clamp(0.0, 1.0)))
            }
            (_, Heuristic { default: Some(d), .. }) => Some(d),
            _ => {
                heuristic = false;
                None
            }
        }
    } else {
        None
    };
    let mut omit = cc.qualified("no-cache");
    omit.extend(cc.qualified("private"));
    ResponseRules {
        lifetime,
        heuristic,
        no_cache: cc.bare("no-cache"),
        must_revalidate: cc.has("must-revalidate") || cc.has("proxy-revalidate") || cc.has("s-maxage"),
        stale_while_revalidate: cc.seconds("stale-while-revalidate").map(secs),
        stale_if_error: cc.seconds("stale-if-error").map(secs),
        omit,
        age,
    }
}

/// Why a response is not stored (RFC 9111 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStored {
    /// Only `GET` responses are stored.
    Method,
    /// An interim (1xx) response: never a response to store (RFC 9111 §3: only a final
    /// response is; RFC 9110 §15.2).
    Interim,
    /// `206` and `304` are not stored here, nor a code outside 100–599.
    Status,
    /// `must-understand` with a status code this cache does not understand (§5.2.2.3).
    NotUnderstood,
    /// `no-store` in the request or the response (§5.2.1.5, §5.2.2.5).
    NoStore,
    /// `private`: for one user only (§5.2.2.7).
    Private,
    /// The request carried `Authorization` and the response did not allow sharing it (§3.5).
    Authorization,
    /// `Vary: *`: no later request can match it (§4.1).
    VaryStar,
    /// Nothing allows storing it: no freshness, not `public`, not heuristically cacheable.
    Nothing,
}

impl NotStored {
    /// A word for the `X-Cache-Store` field and the logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Method => "method",
            Self::Interim => "interim",
            Self::Status => "status",
            Self::NotUnderstood => "must-understand",
            Self::NoStore => "no-store",
            Self::Private => "private",
            Self::Authorization => "authorization",
            Self::VaryStar => "vary-star",
            Self::Nothing => "no-freshness",
        }
    }
}

/// Whether a shared cache may store the response to `method` with `status` (RFC 9111 §3).
///
/// `Set-Cookie` does not stop storing (§7.3 leaves it to the origin to mark such responses
/// `private`), nor does a qualified `private="f"` or `no-cache="f"` (the fields named are
/// left out instead).
pub fn storable(method: &str, status: u16, req: Fields, resp: Fields, policy: &Policy) -> Result<(), NotStored> {
    if method != "GET" {
        return Err(NotStored::Method);
    }
    if (100..=199).contains(&status) {
        return Err(NotStored::Interim);
    }
    if !(200..=599).contains(&status) || status == 206 || status == 304 {
        return Err(NotStored::Status);
    }
    let (cc, sc, governs) = controls(resp, policy);
    let surrogate = governs == Governs::Surrogate;
    let must_understand = cc.has("must-understand");
    if must_understand && !understood(status) {
        return Err(NotStored::NotUnderstood);
    }
    let req_cc = Directives::parse(req.all("cache-control"));
    if req_cc.has("no-store") || sc.has("no-store") {
        return Err(NotStored::NoStore);
    }
    // With Surrogate-Control for it, a surrogate leaves Cache-Control to the caches after it.
    if !surrogate && cc.has("no-store") && !must_understand {
        return Err(NotStored::NoStore);
    }
    if !surrogate && cc.bare("private") {
        return Err(NotStored::Private);
    }
    if req.has("authorization") && !(cc.has("public") || cc.has("must-revalidate") || cc.has("s-maxage")) {
        return Err(NotStored::Authorization);
    }
    if vary_names(resp).is_none() {
        return Err(NotStored::VaryStar);
    }
    let expires = resp.has("expires") && governs != Governs::Targeted;
    let explicit = sc.has("max-age") || cc.has("max-age") || cc.has("s-maxage") || expires;
    if !(explicit || cc.has("public") || heuristically_cacheable(status)) {
        return Err(NotStored::Nothing);
    }
    Ok(())
}

/// The age a response had when it arrived (RFC 9111 §4.2.3): the larger of its apparent age
/// (`received` less its `Date`) and its `Age` plus the time the request took.
///
/// `Date` has a resolution of one second, so the apparent age is counted in whole seconds of
/// the wall clock (`received` truncated): counted to the nanosecond, a response dated
/// 12:00:00 that left the origin at 12:00:00.9 would arrive 0.9 s old, and one with
/// `max-age=1` would be all but stale on arrival.
pub fn initial_age(rules: &ResponseRules, resp: Fields, requested: SystemTime, received: SystemTime) -> Duration {
    let whole = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let apparent = resp
        .get("date")
        .and_then(http_date)
        .map_or(Duration::ZERO, |d| Duration::from_secs(whole(received).saturating_sub(whole(d))));
    let delay = received.duration_since(requested).unwrap_or_default();
    let age = match rules.age {
        AgeField::Seconds(s) => Duration::from_secs(s),
        _ => Duration::ZERO,
    };
    apparent.max(age + delay)
}

/// A request's own caching directives (RFC 9111 §5.2.1), read once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestRules {
    /// `max-age=N`: no older than this.
    pub max_age: Option<Duration>,
    /// `max-stale[=N]`: stale by up to N (by any amount without N).
    pub max_stale: Option<Option<Duration>>,
    /// `min-fresh=N`: fresh for at least N more.
    pub min_fresh: Option<Duration>,
    /// `no-cache`: validate with the origin first.
    pub no_cache: bool,
    /// `no-store`: store nothing of this exchange.
    pub no_store: bool,
    /// `only-if-cached`: answer from the cache or with 504.
    pub only_if_cached: bool,
}

/// Reads a request's `Cache-Control`. `Pragma: no-cache` is not read: RFC 9111 §5.4 deprecates
/// it, and the suite's client sends `Pragma` on every request.
pub fn request_rules(req: Fields) -> RequestRules {
    let cc = Directives::parse(req.all("cache-control"));
    let secs = |name: &str| cc.seconds(name).map(Duration::from_secs);
    RequestRules {
        max_age: secs("max-age"),
        max_stale: cc.has("max-stale").then(|| secs("max-stale")),
        min_fresh: secs("min-fresh"),
        no_cache: cc.has("no-cache"),
        no_store: cc.has("no-store"),
        only_if_cached: cc.has("only-if-cached"),
    }
}

/// What a stored response may do for a request (RFC 9111 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Answer with it: it is fresh enough for the request.
    Fresh,
    /// Answer with it although stale: the request allows it (`max-stale`).
    StaleAllowed,
    /// Ask the origin first (with its validators, if it has any).
    Validate,
}

/// How a stored response of `age` with `rules` may serve a request with `req` (RFC 9111 §4.2,
/// §5.2.1).
pub fn usable(rules: &ResponseRules, age: Duration, req: &RequestRules) -> Use {
    if rules.no_cache || req.no_cache || req.max_age.is_some_and(|m| age > m) {
        return Use::Validate;
    }
    let lifetime = rules.lifetime.unwrap_or(Duration::ZERO);
    let left = lifetime.saturating_sub(age);
    if age < lifetime && req.min_fresh.is_none_or(|m| left >= m) {
        return Use::Fresh;
    }
    match req.max_stale {
        Some(bound) if !rules.must_revalidate && age >= lifetime && bound.is_none_or(|b| age - lifetime <= b) => {
            Use::StaleAllowed
        }
        _ => Use::Validate,
    }
}

/// Whether the origin's `status` is an error a stale response may stand in for under
/// stale-if-error (RFC 5861 §4: 500, 502, 503 and 504).
pub fn stale_may_answer(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504)
}

/// Whether a stale response may still be served for `grace` past its lifetime (RFC 5861's
/// stale-while-revalidate and stale-if-error), given its own rules.
pub fn stale_within(rules: &ResponseRules, age: Duration, grace: Duration) -> bool {
    !rules.must_revalidate && !rules.no_cache && age < rules.lifetime.unwrap_or(Duration::ZERO).saturating_add(grace)
}

/// The request fields a response varies on (RFC 9111 §4.1), in lower case; `None` for
/// `Vary: *` (on any line, among any others), which no later request matches.
pub fn vary_names(resp: Fields) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for line in resp.all("vary") {
        for m in members(line) {
            if m == "*" {
                return None;
            }
            names.push(m.to_ascii_lowercase());
        }
    }
    Some(names)
}

/// A request's value of field `name`, normalised for comparison (§4.1 allows removing
/// whitespace, combining lines, and normalising by the field's syntax): its lines' members,
/// trimmed; for the `Accept-*` fields, in lower case and sorted, since their members are
/// unordered and case-insensitive tokens. `None` if the request lacks it.
pub fn vary_value(req: Fields, name: &str) -> Option<String> {
    let mut ms: Vec<String> = req.all(name).flat_map(members).map(str::to_string).collect();
    if ms.is_empty() && !req.has(name) {
        return None;
    }
    if name.starts_with("accept") {
        for m in &mut ms {
            m.make_ascii_lowercase();
            m.retain(|c| c != ' ' && c != '\t');
        }
        ms.sort();
    }
    Some(ms.join(","))
}

/// The values a stored response was selected with: each name it varies on, with the
/// request's normalised value.
pub fn vary_key(names: &[String], req: Fields) -> Vec<(String, Option<String>)> {
    names.iter().map(|n| (n.clone(), vary_value(req, n))).collect()
}

/// Whether a request matches a stored response's [`vary_key`] (§4.1).
pub fn vary_matches(key: &[(String, Option<String>)], req: Fields) -> bool {
    key.iter().all(|(n, v)| vary_value(req, n) == *v)
}

/// Weak comparison of entity tags (RFC 9110 §8.8.3.2): equal opaque tags, either weak.
fn weak_eq(a: &str, b: &str) -> bool {
    let strip = |t: &str| t.trim().strip_prefix("W/").unwrap_or(t.trim()).to_string();
    strip(a) == strip(b)
}

/// Whether a client's conditional `GET` or `HEAD` is answered `304 Not Modified` from a
/// stored response (RFC 9111 §4.3.2, RFC 9110 §13.1.2, §13.1.3): `If-None-Match` by weak
/// comparison with the stored `ETag` (`*` matches any); without it, `If-Modified-Since` no
/// earlier than the stored `Last-Modified` (or its `Date`, or when it arrived).
pub fn not_modified(req: Fields, stored: Fields, received: SystemTime) -> bool {
    if req.has("if-none-match") {
        let Some(etag) = stored.get("etag") else {
            return req.all("if-none-match").flat_map(members).any(|t| t == "*");
        };
        return req.all("if-none-match").flat_map(members).any(|t| t == "*" || weak_eq(t, etag));
    }
    let Some(since) = req.get("if-modified-since").and_then(http_date) else { return false };
    let modified = stored.get("last-modified").or_else(|| stored.get("date")).and_then(http_date).unwrap_or(received);
    modified <= since
}

/// The fields a `304` answer to a client carries (RFC 9110 §15.4.5), besides `Age`.
pub const NOT_MODIFIED_FIELDS: [&str; 6] = ["cache-control", "content-location", "date", "etag", "expires", "vary"];

/// Fields of one connection (RFC 9110 §7.6.1), never stored or forwarded, with the old
/// `Proxy-Connection` and the proxy authentication fields, which concern the hop too.
pub const HOP_BY_HOP: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authentication-info",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "surrogate-capability",
];

/// Whether field `name` of a message is hop-by-hop: a [`HOP_BY_HOP`] field or one its
/// `Connection` lines name (RFC 9110 §7.6.1).
pub fn hop_by_hop(name: &str, fields: Fields) -> bool {
    HOP_BY_HOP.contains(&name) || fields.all("connection").flat_map(members).any(|c| c.eq_ignore_ascii_case(name))
}

/// Whether a `304` may replace the stored field `name` (RFC 9111 §3.2): every field but the
/// hop-by-hop ones and those describing the stored body itself, which a `304` has none of
/// (its length, encoding, digest and range), and the validator it was matched on.
pub fn updated_by_304(name: &str) -> bool {
    !matches!(name, "content-length" | "content-encoding" | "content-md5" | "content-range" | "etag")
}

/// The request fields that make a request conditional or partial (RFC 9110 §13.1, §14.2),
/// left off a read other clients wait on (each client's own is answered from the response).
pub const CONDITIONAL: [&str; 6] =
    ["if-none-match", "if-modified-since", "if-match", "if-unmodified-since", "if-range", "range"];

/// A single byte range of a body of `len` bytes (RFC 9110 §14.1.2): `Ok(Some(first..=last))`,
/// `Ok(None)` to send the whole body (several ranges, or a field that does not read, may be
/// ignored), `Err(())` if it cannot be satisfied (416).
#[allow(clippy::result_unit_err)]
pub fn byte_range(value: &str, len: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(spec) = value.trim().strip_prefix("bytes=") else { return Ok(None) };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return Ok(None) };
    let num =
        |s: &str| (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())).then(|| s.parse::<u64>().ok()).flatten();
    match (a.trim(), b.trim()) {
        ("", n) => match num(n) {
            Some(0) => Err(()),
            Some(n) if len > 0 => Ok(Some((len.saturating_sub(n), len - 1))),
            Some(_) => Err(()),
            None => Ok(None),
        },
        (f, l) => {
            let Some(first) = num(f) else { return Ok(None) };
            let last = if l.is_empty() { Some(u64::MAX) } else { num(l) };
            match last {
                None => Ok(None),
                Some(last) if last < first => Ok(None),
                Some(_) if first >= len => Err(()),
                Some(last) => Ok(Some((first, last.min(len - 1)))),
            }
        }
    }
}

/// The fuzz target `http_fields` and its corpus's replay on stable: any bytes, read as a
/// request's and a response's header fields, go through every decision here without a panic,
/// and the decisions hang together.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;

    /// Lines `name: value`; the first line that is `--` ends the request's fields and starts
    /// the response's; a leading byte picks the status code and the age.
    pub fn check(data: &[u8]) {
        let Some((&first, rest)) = data.split_first() else { return };
        let text = String::from_utf8_lossy(rest);
        let (mut req, mut resp, mut in_resp) = (Vec::new(), Vec::new(), false);
        let lowered: Vec<(String, String)> = text
            .lines()
            .filter_map(|l| {
                if l == "--" {
                    return Some((String::from("--"), String::new()));
                }
                let (n, v) = l.split_once(':')?;
                Some((n.trim().to_ascii_lowercase(), v.trim().to_string()))
            })
            .collect();
        for (n, v) in &lowered {
            if n == "--" {
                in_resp = true;
            } else if in_resp {
                resp.push((n.as_str(), v.as_str()));
            } else {
                req.push((n.as_str(), v.as_str()));
            }
        }
        let (req, resp) = (Fields(&req), Fields(&resp));
        let status = [200, 203, 204, 206, 301, 304, 404, 410, 500, 503, 599, 201][usize::from(first % 12)];
        let policy = Policy {
            surrogate: "switchyard".into(),
            targets: target_list(OWN_TARGETED_FIELD),
            heuristic: Heuristic { last_modified_fraction: Some(0.1), default: Some(Duration::from_secs(5)) },
            age_reading: AgeReading::Rfc,
        };
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let rules = response_rules(status, resp, &policy, at);
        let verdict = storable("GET", status, req, resp, &policy);
        if verdict.is_ok() {
            assert!(vary_names(resp).is_some(), "stored with Vary: *");
        }
        let age = initial_age(&rules, resp, at, at) + Duration::from_secs(u64::from(first));
        let r = request_rules(req);
        match usable(&rules, age, &r) {
            Use::Fresh => assert!(!rules.no_cache && !r.no_cache && rules.lifetime.is_some_and(|l| age < l)),
            Use::StaleAllowed => assert!(!rules.must_revalidate && r.max_stale.is_some()),
            Use::Validate => {}
        }
        if let Some(names) = vary_names(resp) {
            let key = vary_key(&names, req);
            assert!(vary_matches(&key, req), "a request matches the variant it selected");
        }
        let _ = not_modified(req, resp, at);
        for v in req.all("range") {
            if let Ok(Some((a, b))) = byte_range(v, u64::from(first)) {
                assert!(a <= b && b < u64::from(first));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn policy() -> Policy {
        Policy {
            surrogate: "me".into(),
            targets: target_list("me-cache-control"),
            heuristic: Heuristic::default(),
            age_reading: AgeReading::Rfc,
        }
    }

    fn rules(pairs: &[(&str, &str)]) -> ResponseRules {
        response_rules(200, Fields(pairs), &policy(), SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
    }

    fn lifetime(pairs: &[(&str, &str)]) -> Option<u64> {
        rules(pairs).lifetime.map(|d| d.as_secs())
    }

    #[test]
    fn freshness_comes_from_the_origin_s_words_in_order() {
        assert_eq!(lifetime(&[("cache-control", "public, max-age=30")]), Some(30));
        assert_eq!(lifetime(&[("cache-control", "max-age=30, s-maxage=5")]), Some(5), "s-maxage first");
        assert_eq!(lifetime(&[("cache-control", "max-age=\"12\"")]), Some(12), "quoted form accepted");
        assert_eq!(lifetime(&[("cache-control", "max-age='12'")]), None, "not a number");
        assert_eq!(lifetime(&[("cache-control", "max-age=-1")]), None);
        assert_eq!(lifetime(&[("cache-control", "max-age =5")]), None, "whitespace around =");
        assert_eq!(lifetime(&[("cache-control", "max-age=003600")]), Some(3600));
        assert_eq!(lifetime(&[("cache-control", "max-age=99999999999")]), Some(DELTA_SECONDS_MAX));
        assert_eq!(lifetime(&[("cache-control", "ext=\"max-age=3600\", max-age=1")]), Some(1));
        assert_eq!(lifetime(&[("cache-control", "max-age=3600"), ("surrogate-control", "max-age=1")]), Some(1));
        assert_eq!(lifetime(&[("surrogate-control", "max-age=9;other"), ("cache-control", "max-age=2")]), Some(2));
        assert_eq!(lifetime(&[("surrogate-control", "max-age=9;me")]), Some(9));
        assert_eq!(lifetime(&[("expires", "0")]), Some(0), "an Expires that does not read is past");
        let dated = [("date", "Sun, 06 Nov 1994 08:49:37 GMT"), ("expires", "Sun, 06 Nov 1994 08:50:37 GMT")];
        assert_eq!(lifetime(&dated), Some(60), "Expires less Date");
        assert_eq!(lifetime(&[]), None, "no word, no heuristic: stale");
    }

    /// The age a response arrives with, as `initial_age` counts it for a response with no
    /// `Date` that took no time to arrive: its `Age` alone.
    fn arrival_age(age_lines: &[&str]) -> Option<u64> {
        let mut pairs = vec![("cache-control", "max-age=3600")];
        pairs.extend(age_lines.iter().map(|v| ("age", *v)));
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let r = response_rules(200, Fields(&pairs), &policy(), at);
        assert_eq!(r.lifetime, Some(Duration::from_secs(3600)), "Age never changes the lifetime: {age_lines:?}");
        match r.age {
            AgeField::Seconds(s) => {
                assert_eq!(initial_age(&r, Fields(&pairs), at, at), Duration::from_secs(s));
                Some(s)
            }
            AgeField::Absent | AgeField::Invalid => {
                assert_eq!(initial_age(&r, Fields(&pairs), at, at), Duration::ZERO, "ignored as if absent");
                None
            }
        }
    }

    /// RFC 9111 §5.1: a list-valued `Age` counts by its first member; a value that is not a
    /// non-negative integer (after that) is ignored. Several field lines are one list (RFC 9110
    /// §5.3), so the first line's first member counts.
    #[test]
    fn age_counts_its_first_member_and_ignores_what_is_not_an_integer() {
        assert_eq!(arrival_age(&[]), None);
        assert_eq!(arrival_age(&["7200"]), Some(7200));
        assert_eq!(arrival_age(&[" 7200 "]), Some(7200), "optional whitespace around the value");
        assert_eq!(arrival_age(&["abc"]), None, "not a number: ignored");
        assert_eq!(arrival_age(&["-7200"]), None, "negative: ignored");
        assert_eq!(arrival_age(&["7200.0"]), None, "a fraction: ignored");
        assert_eq!(arrival_age(&["7200;foo=bar"]), None, "a parameter is not an integer: ignored");
        assert_eq!(arrival_age(&["0, 7200"]), Some(0), "one line: the first member counts");
        assert_eq!(arrival_age(&["7200, 0"]), Some(7200));
        assert_eq!(arrival_age(&["0,7200"]), Some(0));
        assert_eq!(arrival_age(&["0, 0"]), Some(0));
        assert_eq!(arrival_age(&["0", "7200"]), Some(0), "several lines: the first counts");
        assert_eq!(arrival_age(&["7200", "0"]), Some(7200));
        assert_eq!(arrival_age(&["3600", "3600"]), Some(3600));
        assert_eq!(arrival_age(&["abc, 0"]), None, "the first member is invalid: the field is ignored");
        assert_eq!(arrival_age(&["", "5"]), Some(5), "an empty line is no member (RFC 9110 §5.6.1)");
        assert_eq!(arrival_age(&["2147483648"]), Some(DELTA_SECONDS_MAX));
        assert_eq!(arrival_age(&["99999999999"]), Some(DELTA_SECONDS_MAX), "capped, still stale");
        // What the suite checks end to end: a max-age=3600 response is fresh on arrival with
        // the Age values it should ignore or whose first member is 0, stale with 7200 first.
        let fresh = |lines: &[&str]| arrival_age(lines).unwrap_or(0) < 3600;
        for ok in [&["abc"][..], &["-7200"], &["7200.0"], &["0, 7200"], &["0", "7200"], &["0, 0"], &["0", "0"]] {
            assert!(fresh(ok), "{ok:?} is fresh");
        }
        for old in [&["7200, 0"][..], &["7200", "0"], &["2147483647"], &["2147483649"]] {
            assert!(!fresh(old), "{old:?} is stale");
        }
    }

    /// The suite's npm release 0.4.5 (`http-cache-tests`, tests/age-parse.mjs): under
    /// `max-age=3600` (10000 for the repeated 3600), cached (fresh) or not (stale), each as
    /// its twelve `age-parse-*` tests require; the RFC reading gives the opposite on nine.
    #[test]
    fn the_suite_0_4_5_reading_answers_its_twelve_age_tests_and_the_rfc_differs_on_nine() {
        let cases: [(&[&str], u64, bool); 12] = [
            (&["abc"], 3600, false),
            (&["-7200"], 3600, false),
            (&["7200.0"], 3600, false),
            (&["7200,0"], 3600, false),
            (&["0,7200"], 3600, true),
            (&["7200", "0"], 3600, false),
            (&["0", "7200"], 3600, false),
            (&["0, 0"], 3600, false),
            (&["0", "0"], 3600, false),
            (&["3600, 3600"], 10000, false),
            (&["7200;foo=bar"], 3600, false),
            (&["7200;foo=111"], 3600, false),
        ];
        let fresh = |reading: AgeReading, lines: &[&str], max_age: u64| {
            let pairs: Vec<(&str, &str)> = lines.iter().map(|v| ("age", *v)).collect();
            match age_field_read(Fields(&pairs), reading) {
                AgeField::Seconds(s) => s < max_age,
                AgeField::Absent | AgeField::Invalid => true,
            }
        };
        let mut against_the_rfc = 0;
        for (lines, max_age, cached) in cases {
            assert_eq!(fresh(AgeReading::Suite045, lines, max_age), cached, "suite-0.4.5 reading of {lines:?}");
            against_the_rfc += usize::from(fresh(AgeReading::Rfc, lines, max_age) != cached);
        }
        assert_eq!(against_the_rfc, 9);
        assert_eq!(age_field_read(Fields(&[]), AgeReading::Suite045), AgeField::Absent);
        assert_eq!(age_field_read(Fields(&[("age", "60")]), AgeReading::Suite045), AgeField::Seconds(60));
        assert_eq!("suite-0.4.5".parse(), Ok(AgeReading::Suite045));
        assert_eq!("rfc".parse(), Ok(AgeReading::Rfc));
        assert!("0.4.5".parse::<AgeReading>().unwrap_err().contains("expected rfc or suite-0.4.5"));
    }

    /// RFC 9213 §2.1–§3: a CDN cache obeys the first field of its target list (its own
    /// targeted field, then `CDN-Cache-Control`) that is present, valid and non-empty, and
    /// ignores `Cache-Control` and `Expires` when one is; the directives mean what they mean in
    /// `Cache-Control`. §2.2: an empty field, or one that is not a structured-field Dictionary,
    /// is ignored as if absent.
    #[test]
    fn a_targeted_field_governs_over_cache_control() {
        let p = policy();
        let store = |resp: &[(&str, &str)]| storable("GET", 200, Fields(&[]), Fields(resp), &p);
        let cdn = |v| ("cdn-cache-control", v);
        // Freshness.
        assert_eq!(lifetime(&[cdn("max-age=3600")]), Some(3600));
        assert_eq!(lifetime(&[("cache-control", "max-age=1"), cdn("max-age=3600")]), Some(3600), "long over short");
        assert_eq!(lifetime(&[("cache-control", "max-age=3600"), cdn("max-age=1")]), Some(1), "short over long");
        assert_eq!(lifetime(&[cdn("max-age=99999999999")]), Some(DELTA_SECONDS_MAX));
        assert_eq!(lifetime(&[cdn("foobar, max-age=3600")]), Some(3600), "an extension is ignored");
        let dated = |e| [cdn("max-age=0"), ("expires", e), ("date", "Sun, 06 Nov 1994 08:49:37 GMT")];
        assert_eq!(lifetime(&dated("Sun, 06 Nov 1994 09:49:37 GMT")), Some(0), "Expires is ignored");
        assert_eq!(lifetime(&[cdn("max-age=3600"), ("expires", "0")]), Some(3600), "an invalid Expires too");
        assert_eq!(lifetime(&[cdn("max-age=0"), ("expires", "Thu, 01 Jan 2099 00:00:00 GMT")]), Some(0));
        // Age still counts against it (RFC 9111 §4.2.3 is unchanged).
        let aged = rules(&[cdn("max-age=3600"), ("age", "7200")]);
        assert_eq!(usable(&aged, Duration::from_secs(7200), &RequestRules::default()), Use::Validate);
        // What may be stored, and how it is used.
        let fresh_cc = [("cache-control", "max-age=10000"), ("expires", "Thu, 01 Jan 2099 00:00:00 GMT")];
        let with = |v| [cdn(v), fresh_cc[0], fresh_cc[1]];
        assert_eq!(store(&with("private")), Err(NotStored::Private));
        assert_eq!(store(&with("no-store")), Err(NotStored::NoStore));
        assert!(rules(&with("no-cache")).no_cache, "no-cache: validated on every use");
        assert_eq!(rules(&with("no-cache")).lifetime, None, "Cache-Control's max-age is ignored");
        assert!(rules(&[cdn("max-age=5, must-revalidate")]).must_revalidate);
        assert_eq!(store(&[("cache-control", "no-store"), cdn("max-age=10000")]), Ok(()), "CC no-store ignored");
        assert_eq!(store(&[("cache-control", "private"), cdn("max-age=10000")]), Ok(()));
        // Invalid or empty fields are ignored: Cache-Control governs again.
        let no_store = ("cache-control", "no-store");
        assert_eq!(store(&[cdn("max-age=10000, &&&&&"), no_store]), Err(NotStored::NoStore), "not a Dictionary");
        assert_eq!(store(&[cdn(""), no_store]), Err(NotStored::NoStore), "empty");
        assert_eq!(store(&[cdn("max-age=10000,"), no_store]), Err(NotStored::NoStore), "trailing comma");
        assert_eq!(store(&[cdn("MaX-aGe=10000"), no_store]), Err(NotStored::NoStore), "keys are lower case");
        assert_eq!(lifetime(&[("cache-control", "max-age=1"), cdn("max-age =100")]), Some(1), "space before =");
        assert_eq!(lifetime(&[("cache-control", "max-age=1"), cdn("max-age= 100")]), Some(1), "space after =");
        // A valid field whose directive has the wrong type governs, but that directive is not
        // consumed: no freshness from it, and Cache-Control stays ignored.
        assert_eq!(store(&[cdn("max-age=\"10000\""), no_store]), Ok(()));
        assert_eq!(lifetime(&[cdn("max-age=\"10000\""), ("cache-control", "max-age=50")]), None);
        assert_eq!(lifetime(&[cdn("max-age=10.5")]), None, "a Decimal is not an Integer");
        assert_eq!(lifetime(&[cdn("max-age=-5")]), None, "negative");
        assert_eq!(store(&[cdn("no-store=?0"), ("cache-control", "max-age=5")]), Ok(()), "Boolean false");
        assert_eq!(lifetime(&[cdn("none")]), None, "a field of an unknown directive governs (RFC 9213 §3.1)");
        // Lines join as one list; a later duplicate key wins (RFC 8941 §4.2.2).
        assert_eq!(lifetime(&[cdn("max-age=5"), cdn("max-age=9")]), Some(9));
        assert_eq!(lifetime(&[cdn("public, max-age=7;a=1, x=(1 2)")]), Some(7), "parameters and inner lists");
        // The field targeted at this cache comes first, then CDN-Cache-Control, then
        // Surrogate-Control, then Cache-Control.
        let own = |v| ("me-cache-control", v);
        assert_eq!(lifetime(&[cdn("max-age=5"), own("max-age=50")]), Some(50));
        assert_eq!(lifetime(&[own("max-age=50"), cdn("no-store")]), Some(50));
        assert_eq!(store(&[own("max-age=50"), cdn("no-store")]), Ok(()));
        assert_eq!(lifetime(&[own("&"), cdn("max-age=5")]), Some(5), "an invalid own field falls to the next");
        assert_eq!(lifetime(&[cdn("max-age=5"), ("surrogate-control", "max-age=9;me")]), Some(5));
        // Fields targeted at other caches change nothing.
        assert_eq!(lifetime(&[("other-cache-control", "max-age=50"), ("cache-control", "max-age=5")]), Some(5));
        assert_eq!(target_list("Switchyard-Cache-Control"), [OWN_TARGETED_FIELD, CDN_CACHE_CONTROL]);
        assert_eq!(target_list("CDN-Cache-Control"), [CDN_CACHE_CONTROL], "named once");
    }

    #[test]
    fn a_heuristic_applies_only_where_the_rfc_lets_it() {
        let p = Policy {
            surrogate: "me".into(),
            targets: target_list("me-cache-control"),
            heuristic: Heuristic { last_modified_fraction: Some(0.1), default: Some(Duration::from_secs(7)) },
            age_reading: AgeReading::Rfc,
        };
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let lm = httpdate::fmt_http_date(now - Duration::from_secs(1000));
        let date = httpdate::fmt_http_date(now);
        let with_lm = [("last-modified", lm.as_str()), ("date", date.as_str())];
        assert_eq!(response_rules(200, Fields(&with_lm), &p, now).lifetime, Some(Duration::from_secs(100)));
        assert_eq!(response_rules(200, Fields(&[]), &p, now).lifetime, Some(Duration::from_secs(7)));
        assert_eq!(response_rules(201, Fields(&with_lm), &p, now).lifetime, None, "201 is not heuristically cacheable");
        let public = [("cache-control", "public")];
        assert_eq!(response_rules(599, Fields(&public), &p, now).lifetime, Some(Duration::from_secs(7)));
    }

    #[test]
    fn what_a_shared_cache_may_store() {
        let p = policy();
        let get = |status, req: &[(&str, &str)], resp: &[(&str, &str)]| {
            storable("GET", status, Fields(req), Fields(resp), &p)
        };
        assert_eq!(get(200, &[], &[("cache-control", "max-age=5")]), Ok(()));
        assert_eq!(get(200, &[], &[]), Ok(()), "heuristically cacheable: kept for revalidation");
        assert_eq!(get(201, &[], &[]), Err(NotStored::Nothing));
        assert_eq!(get(500, &[], &[("expires", "Thu, 01 Jan 2099 00:00:00 GMT")]), Ok(()));
        assert_eq!(get(206, &[], &[("cache-control", "max-age=5")]), Err(NotStored::Status));
        assert_eq!(get(200, &[], &[("cache-control", "No-Store")]), Err(NotStored::NoStore));
        assert_eq!(get(200, &[("cache-control", "no-store")], &[]), Err(NotStored::NoStore));
        assert_eq!(get(200, &[], &[("cache-control", "private, max-age=5")]), Err(NotStored::Private));
        assert_eq!(get(200, &[], &[("cache-control", "private=\"x\", max-age=5")]), Ok(()), "qualified: x left out");
        assert_eq!(
            get(200, &[("authorization", "x")], &[("cache-control", "max-age=5")]),
            Err(NotStored::Authorization)
        );
        assert_eq!(get(200, &[("authorization", "x")], &[("cache-control", "s-maxage=5")]), Ok(()));
        assert_eq!(get(599, &[], &[("cache-control", "max-age=5, must-understand")]), Err(NotStored::NotUnderstood));
        assert_eq!(get(200, &[], &[("cache-control", "no-store, must-understand")]), Ok(()));
        assert_eq!(get(200, &[], &[("vary", ""), ("vary", "*")]), Err(NotStored::VaryStar));
        assert_eq!(get(200, &[], &[("cache-control", "no-store"), ("surrogate-control", "max-age=9;me")]), Ok(()));
        assert_eq!(
            get(200, &[], &[("cache-control", "max-age=9"), ("surrogate-control", "no-store")]),
            Err(NotStored::NoStore)
        );
        assert_eq!(storable("POST", 200, Fields(&[]), Fields(&[]), &p), Err(NotStored::Method));
        // RFC 9111 §3: only a final response is stored, whatever it says of itself.
        for interim in [100, 102, 103, 199] {
            let fresh = [("cache-control", "public, max-age=100000"), ("expires", "Thu, 01 Jan 2099 00:00:00 GMT")];
            assert_eq!(get(interim, &[], &fresh), Err(NotStored::Interim), "{interim}");
            assert_eq!(get(interim, &[], &[("cdn-cache-control", "max-age=100000")]), Err(NotStored::Interim));
        }
    }

    #[test]
    fn a_request_s_directives_bound_what_it_accepts() {
        let r = rules(&[("cache-control", "max-age=100")]);
        let req = |cc: &str| request_rules(Fields(&[("cache-control", cc)]));
        let s = Duration::from_secs;
        assert_eq!(usable(&r, s(10), &req("nothing-to-see-here")), Use::Fresh);
        assert_eq!(usable(&r, s(100), &req("")), Use::Validate, "fresh only while age < lifetime");
        assert_eq!(usable(&r, s(10), &req("max-age=5")), Use::Validate);
        assert_eq!(usable(&r, s(10), &req("min-fresh=95")), Use::Validate);
        assert_eq!(usable(&r, s(10), &req("no-cache")), Use::Validate);
        assert_eq!(usable(&r, s(150), &req("max-stale=60")), Use::StaleAllowed);
        assert_eq!(usable(&r, s(170), &req("max-stale=60")), Use::Validate);
        assert_eq!(usable(&r, s(1_000_000), &req("max-stale")), Use::StaleAllowed);
        let strict = rules(&[("cache-control", "max-age=100, must-revalidate")]);
        assert_eq!(usable(&strict, s(150), &req("max-stale")), Use::Validate);
        assert!(!stale_within(&strict, s(150), s(1000)));
        assert!(
            !stale_within(&rules(&[("cache-control", "s-maxage=100")]), s(150), s(1000)),
            "s-maxage implies proxy-revalidate"
        );
        assert!(stale_within(&r, s(150), s(60)) && !stale_within(&r, s(170), s(60)));
    }

    #[test]
    fn variants_match_on_normalised_fields() {
        let names = vary_names(Fields(&[("vary", "Foo, Accept-Language")])).unwrap();
        let key = vary_key(&names, Fields(&[("foo", "1, 2"), ("accept-language", "en, de")]));
        assert!(vary_matches(&key, Fields(&[("foo", "1"), ("foo", "2"), ("accept-language", "DE,en")])));
        assert!(
            !vary_matches(&key, Fields(&[("foo", "2, 1"), ("accept-language", "en, de")])),
            "order matters for Foo"
        );
        assert!(!vary_matches(&key, Fields(&[("accept-language", "en, de")])), "absent is not empty");
        assert_eq!(vary_names(Fields(&[("vary", "Foo, *")])), None);
    }

    #[test]
    fn a_client_s_conditions_are_answered() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let stored = [("etag", "W/\"a\""), ("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT")];
        let nm = |req: &[(&str, &str)]| not_modified(Fields(req), Fields(&stored), at);
        assert!(nm(&[("if-none-match", "\"x\", \"a\"")]), "weak comparison");
        assert!(nm(&[("if-none-match", "*")]));
        assert!(
            !nm(&[("if-none-match", "\"b\""), ("if-modified-since", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            "INM first"
        );
        assert!(nm(&[("if-modified-since", "Sunday, 06-Nov-94 08:49:37 GMT")]), "RFC 850 dates read");
        assert!(!nm(&[("if-modified-since", "Sun, 06 Nov 1994 08:49:36 GMT")]));
        assert!(!nm(&[]));
    }

    #[test]
    fn byte_ranges() {
        assert_eq!(byte_range("bytes=0-1", 10), Ok(Some((0, 1))));
        assert_eq!(byte_range("bytes=5-", 10), Ok(Some((5, 9))));
        assert_eq!(byte_range("bytes=-3", 10), Ok(Some((7, 9))));
        assert_eq!(byte_range("bytes=-30", 10), Ok(Some((0, 9))));
        assert_eq!(byte_range("bytes=8-100", 10), Ok(Some((8, 9))));
        assert_eq!(byte_range("bytes=10-", 10), Err(()));
        assert_eq!(byte_range("bytes=0-1,3-4", 10), Ok(None), "several ranges: the whole body");
        assert_eq!(byte_range("items=0-1", 10), Ok(None));
        assert_eq!(byte_range("bytes=5-2", 10), Ok(None));
    }

    #[test]
    fn the_fields_a_cache_keeps_to_itself() {
        let f = [("connection", "close, a"), ("a", "1")];
        assert!(hop_by_hop("a", Fields(&f)) && hop_by_hop("keep-alive", Fields(&f)) && !hop_by_hop("b", Fields(&f)));
        assert!(!updated_by_304("content-length") && !updated_by_304("etag") && updated_by_304("cache-control"));
    }

    proptest! {
        /// Every field is outside input: any values read without a panic, and the decisions
        /// hang together (a fresh response is usable; an unstorable one is never fresh for a
        /// no-cache request).
        #[test]
        fn any_fields_read_without_panic(
            cc in "[ -~]{0,40}", sc in "[ -~]{0,20}", age in "[ -~]{0,8}", expires in "[ -~]{0,30}",
            vary in "[ -~]{0,12}", range in "[ -~]{0,16}", status in 100u16..700, secs in 0u64..10_000,
        ) {
            let resp = [("cache-control", cc.as_str()), ("surrogate-control", sc.as_str()), ("age", age.as_str()), ("expires", expires.as_str()), ("vary", vary.as_str())];
            let at = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000_000);
            let r = response_rules(status, Fields(&resp), &policy(), at);
            let _ = storable("GET", status, Fields(&[("cache-control", cc.as_str())]), Fields(&resp), &policy());
            let _ = initial_age(&r, Fields(&resp), at, at);
            let _ = vary_names(Fields(&resp));
            let _ = byte_range(&range, secs);
            let age = Duration::from_secs(secs);
            let u = usable(&r, age, &RequestRules::default());
            prop_assert_eq!(u == Use::Fresh, !r.no_cache && r.lifetime.is_some_and(|l| age < l));
            prop_assert_eq!(usable(&r, age, &RequestRules { no_cache: true, ..Default::default() }), Use::Validate);
            if let Ok(Some((a, b))) = byte_range(&range, secs) {
                prop_assert!(a <= b && b < secs);
            }
        }
    }

    /// The `http_fields` fuzz corpus, replayed on stable.
    #[test]
    fn the_fuzz_corpus_reads_without_panic() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/http_fields");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).expect("the corpus is in the tree") {
            fuzzing::check(&std::fs::read(entry.unwrap().path()).unwrap());
            n += 1;
        }
        assert!(n >= 10, "{n} inputs");
    }
}
