//! The keys a placement experiment places ([`crate::placement`], `switchyard place`): the
//! shipped sample, a generator (uniform, Zipf), a capture's packets, or a file of keys, each
//! read into units with their flows' sequence numbers.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, Result, bail};

use crate::ExperimentError;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Zipf};
use switchyard_core::{FlowKey, FlowMap, Unit};

/// The sample shipped in the repository: synthetic TCP/UDP 5-tuples, one unit per line.
const SAMPLE: &str = include_str!("../../../data/keys/sample-flows.txt");

/// A source of keys, as given to `--keys`.
#[derive(Clone, Debug, PartialEq)]
pub enum KeySource {
    /// The shipped sample (`data/keys/sample-flows.txt`).
    Sample,
    /// `uniform:COUNT`: COUNT distinct random keys, one unit each.
    Uniform {
        /// Units (and keys).
        count: u64,
    },
    /// `zipf:S:COUNT[:KEYS]`: COUNT units whose keys follow Zipf(S) over KEYS keys (default COUNT).
    Zipf {
        /// The exponent.
        s: f64,
        /// Units.
        count: u64,
        /// Distinct keys they are drawn from.
        keys: u64,
    },
    /// A text file (or `-` for standard input): one key per line.
    File(PathBuf),
}

const FORMS: &str = "sample, uniform:COUNT, zipf:S:COUNT[:KEYS], a pcap or pcapng capture (one key per TCP or UDP packet), or a path to a file with one key per line (- for standard input)";

impl FromStr for KeySource {
    type Err = ExperimentError;

    fn from_str(s: &str) -> Result<Self, ExperimentError> {
        Ok(parse(s)?)
    }
}

fn parse(s: &str) -> Result<KeySource> {
    let count = |v: &str, what: &str| -> Result<u64> {
        let n: u64 =
            v.replace('_', "").parse().with_context(|| format!("`{s}`: {what} must be a whole number, not `{v}`"))?;
        if n == 0 {
            bail!("`{s}`: {what} must be at least 1");
        }
        Ok(n)
    };
    if s == "sample" {
        return Ok(KeySource::Sample);
    }
    if let Some(rest) = s.strip_prefix("uniform:") {
        return Ok(KeySource::Uniform { count: count(rest, "COUNT")? });
    }
    if let Some(rest) = s.strip_prefix("zipf:") {
        let parts: Vec<&str> = rest.split(':').collect();
        if !(2..=3).contains(&parts.len()) {
            bail!("`{s}`: expected zipf:S:COUNT or zipf:S:COUNT:KEYS");
        }
        let exp: f64 = parts[0].parse().with_context(|| format!("`{s}`: S must be a number, not `{}`", parts[0]))?;
        if !(exp.is_finite() && exp > 0.0) {
            bail!("`{s}`: the Zipf exponent S must be greater than 0");
        }
        let n = count(parts[1], "COUNT")?;
        let keys = match parts.get(2) {
            Some(k) => count(k, "KEYS")?,
            None => n,
        };
        return Ok(KeySource::Zipf { s: exp, count: n, keys });
    }
    if s.is_empty() {
        bail!("empty key source; expected {FORMS}");
    }
    Ok(KeySource::File(PathBuf::from(s)))
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sample => write!(f, "the shipped sample"),
            Self::Uniform { count } => write!(f, "uniform:{count}"),
            Self::Zipf { s, count, keys } => write!(f, "zipf:{s}:{count}:{keys}"),
            Self::File(p) if p.as_os_str() == "-" => write!(f, "standard input"),
            Self::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Units to place and the number of distinct flows among them.
pub struct Units {
    /// The units, in the source's order.
    pub units: Vec<Unit>,
    /// Distinct flows among them.
    pub flows: usize,
    /// What a capture's reader left out (packets that are not TCP or UDP, damaged ones), said
    /// in a sentence; `None` where nothing was.
    pub left_out: Option<String>,
}

/// The most units a source may produce, to keep memory bounded (≈ 56 bytes each).
pub const MAX_UNITS: u64 = 50_000_000;

impl KeySource {
    /// Reads or generates the units. Generated keys are numbers; `seed` fixes them.
    pub fn load(&self, seed: u64, undirected: bool) -> Result<Units, ExperimentError> {
        Ok(self.read(seed, undirected)?)
    }

    fn read(&self, seed: u64, undirected: bool) -> Result<Units> {
        let mut b = Builder::default();
        match self {
            Self::Sample => read_lines(SAMPLE.as_bytes(), "the shipped sample", undirected, &mut b)?,
            Self::Uniform { count } => {
                check_size(*count)?;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                for _ in 0..*count {
                    b.push(FlowKey::Number(rand::RngExt::random(&mut rng)));
                }
            }
            Self::Zipf { s, count, keys } => {
                check_size(*count)?;
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let z = Zipf::new(*keys as f64, *s).context("bad Zipf parameters")?;
                for _ in 0..*count {
                    // Rank r (1 = most popular) is key r; the digest spreads the ranks.
                    b.push(FlowKey::Number(z.sample(&mut rng) as u64));
                }
            }
            Self::File(p) if p.as_os_str() == "-" => {
                read_lines(io::stdin().lock(), "standard input", undirected, &mut b)?;
            }
            Self::File(p) => {
                let f = File::open(p)
                    .with_context(|| format!("cannot open key file `{}` (key sources are: {FORMS})", p.display()))?;
                let mut r = BufReader::new(f);
                let name = p.display().to_string();
                if is_capture(r.fill_buf().with_context(|| format!("reading {name}"))?) {
                    read_capture(r, &name, undirected, &mut b)?;
                } else {
                    read_lines(r, &name, undirected, &mut b)?;
                }
            }
        }
        if b.units.is_empty() {
            bail!("{self} holds no keys: every line was empty or a # comment");
        }
        Ok(Units { units: b.units, flows: b.flows, left_out: b.left_out })
    }
}

fn check_size(n: u64) -> Result<()> {
    if n > MAX_UNITS {
        bail!("{n} units is more than this command holds in memory ({MAX_UNITS}); use a smaller COUNT");
    }
    Ok(())
}

#[derive(Default)]
struct Builder {
    units: Vec<Unit>,
    seq: FlowMap<u64>,
    flows: usize,
    left_out: Option<String>,
}

impl Builder {
    fn push(&mut self, key: FlowKey) {
        let flow = key.id();
        let seq = self.seq.get_or_insert_with(flow, || 0);
        if *seq == 0 {
            self.flows += 1;
        }
        self.units.push(Unit::of_flow(flow, 1).with_seq(*seq));
        *seq += 1;
    }
}

/// Whether `head` starts like a pcap (either byte order, µs or ns) or pcapng file.
fn is_capture(head: &[u8]) -> bool {
    const MAGICS: [[u8; 4]; 5] = [
        [0xd4, 0xc3, 0xb2, 0xa1],
        [0xa1, 0xb2, 0xc3, 0xd4],
        [0x4d, 0x3c, 0xb2, 0xa1],
        [0xa1, 0xb2, 0x3c, 0x4d],
        [0x0a, 0x0d, 0x0d, 0x0a],
    ];
    head.len() >= 4 && MAGICS.iter().any(|m| head[..4] == *m)
}

/// Reads a capture's TCP and UDP packets, one key (the 5-tuple) per packet. Packets that are
/// not TCP or UDP are left out and counted.
fn read_capture(r: impl Read + Send, name: &str, undirected: bool, b: &mut Builder) -> Result<()> {
    let mut reader = switchyard_ingest::CaptureReader::new(r).with_context(|| format!("reading {name}"))?;
    while let Some(p) = reader.next_packet().with_context(|| format!("reading {name}"))? {
        b.push(FlowKey::Tuple(if undirected { p.key.undirected() } else { p.key }));
    }
    if reader.skipped().total() > 0 {
        b.left_out = Some(format!("{name}: left out {} packets: {}", reader.skipped().total(), reader.skipped()));
    }
    Ok(())
}

/// Reads one key per line. Lines are trimmed; empty lines and lines starting with `#` are
/// skipped. A line that is not UTF-8 is kept as an opaque byte key, so nothing is dropped.
fn read_lines(r: impl Read, name: &str, undirected: bool, b: &mut Builder) -> Result<()> {
    let mut reader = BufReader::new(r);
    let mut line = Vec::new();
    let mut lineno = 0u64;
    loop {
        line.clear();
        let n =
            reader.read_until(b'\n', &mut line).with_context(|| format!("reading {name} at line {}", lineno + 1))?;
        if n == 0 {
            return Ok(());
        }
        lineno += 1;
        if b.units.len() as u64 >= MAX_UNITS {
            bail!("{name}: more than {MAX_UNITS} keys (stopped at line {lineno}); split the file");
        }
        let key = match std::str::from_utf8(&line) {
            Ok(text) => {
                let t = text.trim();
                if t.is_empty() || t.starts_with('#') {
                    continue;
                }
                FlowKey::parse(t)
            }
            Err(_) => FlowKey::Bytes(line.trim_ascii().into()),
        };
        b.push(if undirected { key.undirected() } else { key });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_parse_and_errors_teach() {
        assert_eq!("uniform:1_000".parse::<KeySource>().unwrap(), KeySource::Uniform { count: 1000 });
        assert_eq!("zipf:1.1:100".parse::<KeySource>().unwrap(), KeySource::Zipf { s: 1.1, count: 100, keys: 100 });
        for (bad, needle) in [
            ("uniform:x", "COUNT must be a whole number"),
            ("uniform:0", "at least 1"),
            ("zipf:0:10", "greater than 0"),
            ("zipf:1", "expected zipf:S:COUNT"),
            ("", "empty key source"),
        ] {
            let e = bad.parse::<KeySource>().unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn sample_has_repeated_flows() {
        let u = KeySource::Sample.load(0, false).unwrap();
        assert!(u.units.len() > u.flows && u.flows > 100);
    }

    proptest::proptest! {
        /// Any bytes: no panic, and every line that is not blank or a `#` comment becomes a unit.
        #[test]
        fn any_bytes_lose_no_line(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let mut b = Builder::default();
            read_lines(&bytes[..], "t", false, &mut b).unwrap();
            let expected = bytes
                .split(|&c| c == b'\n')
                .filter(|l| match std::str::from_utf8(l) {
                    Ok(t) => !t.trim().is_empty() && !t.trim().starts_with('#'),
                    Err(_) => true,
                })
                .count();
            proptest::prop_assert_eq!(b.units.len(), expected);
        }
    }

    #[test]
    fn non_utf8_lines_are_kept() {
        let mut b = Builder::default();
        read_lines(&b"a\n\xff\xfe\n\n# c\nb\n"[..], "t", false, &mut b).unwrap();
        assert_eq!(b.units.len(), 3);
    }
}
