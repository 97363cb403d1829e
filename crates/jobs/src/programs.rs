//! The programs a worker runs: built-in map and reduce functions (word count, grep, inverted
//! index, one k-means step) and commands its operator allow-listed (Hadoop Streaming style).
//!
//! Nothing a coordinator or submitter sends is evaluated: an application names a program, and
//! a worker runs its own code or its operator's command for that name. (Misco `eval`s task
//! descriptions and imports downloaded modules, Dou §2.3; that is what this avoids.)
//!
//! Records between map and reduce are lines `KEY<TAB>VALUE`; a map's output is split into one
//! part per reduce partition by a hash of the key, and a reduce sees its partition's records
//! from every map, in map order, and writes its lines sorted by key.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// The built-in programs' names: every worker runs them. A worker's poll lists these and
/// `exec:NAME` for each command its operator allow-listed ([`crate::wire::Poll::programs`]).
pub const BUILT_IN: [&str; 5] = ["wordcount", "grep", "invindex", "kmeans", "sleep"];

/// A program an application runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Program {
    /// `word<TAB>count` per word (a maximal run of bytes that are not ASCII whitespace, as
    /// `tr -s '[:space:]'` splits in the C locale), sorted by word.
    WordCount,
    /// The lines matching a regular expression, in input order (map only).
    Grep {
        /// The pattern (regex-automata's syntax).
        pattern: String,
    },
    /// Input lines `DOC<TAB>TEXT`; output `word<TAB>doc1,doc2,…` (documents sorted, once each).
    InvertedIndex,
    /// One step of Lloyd's k-means: input lines are points `x1,x2,…`; output
    /// `i<TAB>c1,c2,…`, the new centroid of each cluster that has points.
    KMeansStep {
        /// The current centroids.
        centroids: Vec<Vec<f64>>,
    },
    /// Does nothing for a while: each map sleeps `map` seconds and emits one record, each
    /// reduce sleeps `reduce` seconds (tasks of known length, for experiments and benchmarks).
    Sleep {
        /// Seconds a map takes.
        map: f64,
        /// Seconds a reduce takes.
        reduce: f64,
    },
    /// A command the worker's operator allow-listed under this name.
    Exec {
        /// The name the worker knows it by.
        name: String,
    },
}

/// Why a program cannot be built, or its input is not what it reads.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ProgramError {
    /// No such program.
    #[error(
        "unknown program {0:?}: built in are wordcount, grep, invindex, kmeans and sleep; a command a worker allow-listed is exec:NAME"
    )]
    Unknown(String),
    /// Its arguments are wrong.
    #[error("{program}: {why}")]
    Args {
        /// The program.
        program: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A line of input it cannot read.
    #[error("{program}: input line {line}: {why}")]
    Input {
        /// The program.
        program: &'static str,
        /// The line, from 1, in the whole input.
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// The program has no reduce but reduces were asked for, or the other way round.
    #[error("{0}")]
    Shape(String),
    /// An allow-listed command failed.
    #[error("command {name:?}: {why}")]
    Command {
        /// The allow-listed name.
        name: String,
        /// What happened.
        why: String,
    },
}

impl Program {
    /// The program `name` with its argument (grep's pattern, k-means' centroids `x,y;x,y`).
    pub fn parse(name: &str, arg: &str) -> Result<Self, ProgramError> {
        match name {
            "wordcount" => Ok(Self::WordCount),
            "grep" => {
                if arg.is_empty() {
                    return Err(ProgramError::Args { program: "grep", why: "give a pattern".into() });
                }
                regex_automata::meta::Regex::new(arg)
                    .map_err(|e| ProgramError::Args { program: "grep", why: format!("bad pattern: {e}") })?;
                Ok(Self::Grep { pattern: arg.to_string() })
            }
            "invindex" => Ok(Self::InvertedIndex),
            "kmeans" => Ok(Self::KMeansStep { centroids: parse_centroids(arg)? }),
            "sleep" => {
                let bad = || ProgramError::Args {
                    program: "sleep",
                    why: format!("{arg:?}: give MAP_SECS,REDUCE_SECS, each 0 to 3600"),
                };
                let (m, r) = arg.split_once(',').ok_or_else(bad)?;
                let secs = |x: &str| x.trim().parse::<f64>().ok().filter(|v| (0.0..=3600.0).contains(v));
                Ok(Self::Sleep { map: secs(m).ok_or_else(bad)?, reduce: secs(r).ok_or_else(bad)? })
            }
            _ => match name.strip_prefix("exec:") {
                Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) => {
                    Ok(Self::Exec { name: n.to_string() })
                }
                _ => Err(ProgramError::Unknown(name.to_string())),
            },
        }
    }

    /// Its name as [`Program::parse`] reads it.
    pub fn name(&self) -> String {
        match self {
            Self::WordCount => "wordcount".into(),
            Self::Grep { .. } => "grep".into(),
            Self::InvertedIndex => "invindex".into(),
            Self::KMeansStep { .. } => "kmeans".into(),
            Self::Sleep { .. } => "sleep".into(),
            Self::Exec { name } => format!("exec:{name}"),
        }
    }

    /// Checks that `reduces` suits it: grep is map-only, the others reduce.
    pub fn check_shape(&self, reduces: u32) -> Result<(), ProgramError> {
        match (self, reduces) {
            (Self::Grep { .. }, r) if r > 0 => Err(ProgramError::Shape(
                "grep is map-only: give 0 reduces (its output is the matching lines in input order)".into(),
            )),
            (Self::WordCount | Self::InvertedIndex | Self::KMeansStep { .. } | Self::Sleep { .. }, 0) => {
                Err(ProgramError::Shape(format!("{} needs at least 1 reduce", self.name())))
            }
            _ => Ok(()),
        }
    }

    /// Checks the whole input before it is split, so that bad input is refused at submission
    /// with the line that is wrong rather than failing a task again and again.
    pub fn check_input(&self, input: &[u8]) -> Result<(), ProgramError> {
        match self {
            Self::InvertedIndex => {
                for (i, line) in lines(input).enumerate() {
                    if !line.is_empty() && !line.contains(&b'\t') {
                        return Err(ProgramError::Input {
                            program: "invindex",
                            line: i + 1,
                            why: "no tab: each line is DOC<TAB>TEXT".into(),
                        });
                    }
                }
                Ok(())
            }
            Self::KMeansStep { centroids } => {
                let dim = centroids[0].len();
                for (i, line) in lines(input).enumerate() {
                    if line.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    let p =
                        parse_point(line).map_err(|why| ProgramError::Input { program: "kmeans", line: i + 1, why })?;
                    if p.len() != dim {
                        return Err(ProgramError::Input {
                            program: "kmeans",
                            line: i + 1,
                            why: format!("{} coordinates, the centroids have {dim}", p.len()),
                        });
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

fn parse_centroids(arg: &str) -> Result<Vec<Vec<f64>>, ProgramError> {
    let bad = |why: String| ProgramError::Args { program: "kmeans", why };
    if arg.trim().is_empty() {
        return Err(bad("give the centroids as x,y;x,y;…".into()));
    }
    let centroids: Vec<Vec<f64>> = arg
        .split(';')
        .map(|c| parse_point(c.as_bytes()).map_err(|e| bad(format!("centroid {c:?}: {e}"))))
        .collect::<Result<_, _>>()?;
    let dim = centroids[0].len();
    if centroids.iter().any(|c| c.len() != dim) {
        return Err(bad("every centroid needs the same number of coordinates".into()));
    }
    Ok(centroids)
}

fn parse_point(text: &[u8]) -> Result<Vec<f64>, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8".to_string())?;
    text.trim()
        .split(',')
        .map(|x| match x.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(format!("{x:?} is not a finite number")),
        })
        .collect()
}

/// The lines of `data`, without their newlines (a last line without one included).
pub fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let data = data.strip_suffix(b"\n").unwrap_or(data);
    data.split(|&b| b == b'\n').filter(move |_| !data.is_empty())
}

/// Splits `input` into pieces of about `size` bytes, each ending at a newline (a line longer
/// than `size` is one piece). At least one piece, so that an empty input has one (empty) map.
pub fn split(input: &[u8], size: usize) -> Vec<&[u8]> {
    let size = size.max(1);
    let mut out = Vec::new();
    let mut at = 0;
    while at < input.len() {
        let end = (at + size).min(input.len());
        let end = if end == input.len() {
            end
        } else {
            match input[end - 1..].iter().position(|&b| b == b'\n') {
                Some(nl) => end + nl,
                None => input.len(),
            }
        };
        out.push(&input[at..end]);
        at = end;
    }
    if out.is_empty() {
        out.push(&input[..0]);
    }
    out
}

/// The partition of `key` among `parts` (xxh3, so every worker and the reference agree).
pub fn partition(key: &[u8], parts: u32) -> usize {
    (xxhash_rust::xxh3::xxh3_64(key) % u64::from(parts.max(1))) as usize
}

/// Where a worker finds the commands its operator allow-listed.
pub trait Commands {
    /// The map command of `name`, if allowed.
    fn map(&self, name: &str) -> Option<&str>;
    /// The reduce command of `name`, if allowed (none: the sorted records are the output).
    fn reduce(&self, name: &str) -> Option<&str>;
}

/// No commands allowed.
pub struct NoCommands;

impl Commands for NoCommands {
    fn map(&self, _: &str) -> Option<&str> {
        None
    }
    fn reduce(&self, _: &str) -> Option<&str> {
        None
    }
}

/// Runs a map over one split: one part per partition (one part for a map-only program).
pub fn run_map(
    program: &Program,
    split: &[u8],
    reduces: u32,
    commands: &dyn Commands,
) -> Result<Vec<Vec<u8>>, ProgramError> {
    let parts = reduces.max(1) as usize;
    let mut out = vec![Vec::new(); parts];
    let emit = |out: &mut Vec<Vec<u8>>, key: &[u8], value: &[u8]| record(&mut out[partition(key, reduces)], key, value);
    match program {
        Program::WordCount => {
            // Counted per split (a combiner), so a map's output is one line per distinct word.
            let mut counts: BTreeMap<&[u8], u64> = BTreeMap::new();
            for word in split.split(|b| b.is_ascii_whitespace() || *b == 0x0b).filter(|w| !w.is_empty()) {
                *counts.entry(word).or_default() += 1;
            }
            for (word, n) in counts {
                emit(&mut out, word, n.to_string().as_bytes());
            }
        }
        Program::Grep { pattern } => {
            let re = regex_automata::meta::Regex::new(pattern)
                .map_err(|e| ProgramError::Args { program: "grep", why: e.to_string() })?;
            for line in lines(split) {
                if re.is_match(line) {
                    out[0].extend_from_slice(line);
                    out[0].push(b'\n');
                }
            }
        }
        Program::InvertedIndex => {
            let mut seen: BTreeMap<(&[u8], &[u8]), ()> = BTreeMap::new();
            for line in lines(split) {
                let Some(tab) = line.iter().position(|&b| b == b'\t') else { continue };
                let (doc, text) = (&line[..tab], &line[tab + 1..]);
                for word in text.split(|b| b.is_ascii_whitespace() || *b == 0x0b).filter(|w| !w.is_empty()) {
                    seen.insert((word, doc), ());
                }
            }
            for (word, doc) in seen.into_keys() {
                emit(&mut out, word, doc);
            }
        }
        Program::KMeansStep { centroids } => {
            let dim = centroids[0].len();
            let mut sums = vec![vec![0.0; dim]; centroids.len()];
            let mut counts = vec![0u64; centroids.len()];
            for line in lines(split) {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let Ok(p) = parse_point(line) else { continue };
                if p.len() != dim {
                    continue;
                }
                let nearest = nearest(centroids, &p);
                counts[nearest] += 1;
                for (s, x) in sums[nearest].iter_mut().zip(&p) {
                    *s += x;
                }
            }
            let width = digits(centroids.len());
            for (i, (sum, n)) in sums.iter().zip(&counts).enumerate() {
                if *n > 0 {
                    let mut v = n.to_string();
                    for s in sum {
                        v.push(',');
                        v.push_str(&format!("{s:?}"));
                    }
                    emit(&mut out, format!("{i:0width$}").as_bytes(), v.as_bytes());
                }
            }
        }
        Program::Sleep { map, .. } => {
            std::thread::sleep(std::time::Duration::from_secs_f64(*map));
            emit(&mut out, b"slept", b"1");
        }
        Program::Exec { name } => {
            let cmd = commands.map(name).ok_or_else(|| ProgramError::Command {
                name: name.clone(),
                why: "not allow-listed on this worker (its operator gives --allow NAME=COMMAND)".into(),
            })?;
            let stdout = run_command(name, cmd, split)?;
            for line in lines(&stdout) {
                let tab = line.iter().position(|&b| b == b'\t').unwrap_or(line.len());
                let key = &line[..tab];
                let value = line.get(tab + 1..).unwrap_or(b"");
                if reduces == 0 {
                    out[0].extend_from_slice(line);
                    out[0].push(b'\n');
                } else {
                    emit(&mut out, key, value);
                }
            }
        }
    }
    Ok(out)
}

/// Appends one record, `KEY<TAB>VALUE` and a newline.
fn record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.extend_from_slice(key);
    out.push(b'\t');
    out.extend_from_slice(value);
    out.push(b'\n');
}

fn digits(n: usize) -> usize {
    n.saturating_sub(1).max(1).to_string().len()
}

fn nearest(centroids: &[Vec<f64>], p: &[f64]) -> usize {
    let mut best = (0, f64::INFINITY);
    for (i, c) in centroids.iter().enumerate() {
        let d: f64 = c.iter().zip(p).map(|(a, b)| (a - b) * (a - b)).sum();
        if d < best.1 {
            best = (i, d);
        }
    }
    best.0
}

/// Runs a reduce over its partition's records from every map (in map order): its output
/// lines, sorted by key.
pub fn run_reduce(program: &Program, records: &[u8], commands: &dyn Commands) -> Result<Vec<u8>, ProgramError> {
    // Values of one key stay in the order they arrived (map order), as Hadoop's stable sort
    // of a partition keeps them.
    let mut groups: BTreeMap<&[u8], Vec<&[u8]>> = BTreeMap::new();
    for line in lines(records) {
        let tab = line.iter().position(|&b| b == b'\t').unwrap_or(line.len());
        groups.entry(&line[..tab]).or_default().push(line.get(tab + 1..).unwrap_or(b""));
    }
    let mut out = Vec::new();
    let mut line = |key: &[u8], value: &[u8]| record(&mut out, key, value);
    match program {
        Program::WordCount => {
            for (word, counts) in &groups {
                let mut total = 0u64;
                for c in counts {
                    total += std::str::from_utf8(c).ok().and_then(|c| c.parse::<u64>().ok()).ok_or_else(|| {
                        ProgramError::Input {
                            program: "wordcount",
                            line: 0,
                            why: "a count that is not a number".into(),
                        }
                    })?;
                }
                line(word, total.to_string().as_bytes());
            }
        }
        Program::InvertedIndex => {
            for (word, docs) in &groups {
                let mut docs = docs.clone();
                docs.sort_unstable();
                docs.dedup();
                line(word, &docs.join(&b","[..]));
            }
        }
        Program::KMeansStep { centroids } => {
            let dim = centroids[0].len();
            for (key, partials) in &groups {
                let mut n = 0u64;
                let mut sum = vec![0.0; dim];
                for v in partials {
                    let text = std::str::from_utf8(v).unwrap_or("");
                    let mut fields = text.split(',');
                    n += fields.next().and_then(|c| c.parse::<u64>().ok()).unwrap_or(0);
                    for (s, x) in sum.iter_mut().zip(fields) {
                        *s += x.parse::<f64>().unwrap_or(0.0);
                    }
                }
                let centroid: Vec<String> = sum.iter().map(|s| format!("{:?}", s / n.max(1) as f64)).collect();
                line(key, centroid.join(",").as_bytes());
            }
        }
        Program::Grep { .. } => return Err(ProgramError::Shape("grep has no reduce".into())),
        Program::Sleep { reduce, .. } => {
            std::thread::sleep(std::time::Duration::from_secs_f64(*reduce));
            for (key, values) in &groups {
                line(key, values.len().to_string().as_bytes());
            }
        }
        Program::Exec { name } => {
            let mut sorted = Vec::new();
            for (key, values) in &groups {
                for v in values {
                    record(&mut sorted, key, v);
                }
            }
            return match commands.reduce(name) {
                Some(cmd) => run_command(name, cmd, &sorted),
                None => Ok(sorted),
            };
        }
    }
    Ok(out)
}

/// The application's output from its reduces' outputs: merged by key, so that the whole is
/// sorted as each part is (a map-only application's parts are joined in map order).
pub fn merge(parts: &[Vec<u8>], map_only: bool) -> Vec<u8> {
    if map_only {
        return parts.concat();
    }
    let mut all: Vec<&[u8]> = parts.iter().flat_map(|p| lines(p)).collect();
    let key = |l: &&[u8]| -> Vec<u8> { l.split(|&b| b == b'\t').next().unwrap_or(b"").to_vec() };
    all.sort_by_cached_key(key);
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    for l in all {
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out
}

/// The whole application in one process, for checking a distributed run against: the same
/// splits, maps, partitions and reduces, in order.
pub fn reference(program: &Program, input: &[u8], split_size: usize, reduces: u32) -> Result<Vec<u8>, ProgramError> {
    let maps: Vec<Vec<Vec<u8>>> = split(input, split_size)
        .into_iter()
        .map(|s| run_map(program, s, reduces, &NoCommands))
        .collect::<Result<_, _>>()?;
    if reduces == 0 {
        return Ok(merge(&maps.into_iter().map(|mut m| m.remove(0)).collect::<Vec<_>>(), true));
    }
    let mut outs = Vec::new();
    for p in 0..reduces as usize {
        let records: Vec<u8> = maps.iter().flat_map(|m| m[p].iter().copied()).collect();
        outs.push(run_reduce(program, &records, &NoCommands)?);
    }
    Ok(merge(&outs, false))
}

fn run_command(name: &str, cmd: &str, input: &[u8]) -> Result<Vec<u8>, ProgramError> {
    let fail = |why: String| ProgramError::Command { name: name.to_string(), why };
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("cannot start: {e}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let data = input.to_vec();
    // Written from a thread, so a command that writes before it has read everything cannot
    // dead-lock against us.
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().map_err(|e| fail(format!("{e}")))?;
    let _ = writer.join();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(fail(format!("{} ({})", out.status, err.trim())));
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names a worker says it runs are the names [`Program::parse`] knows: a built-in
    /// program missing from the list would never be handed to anyone.
    #[test]
    fn the_built_in_list_is_what_parse_knows() {
        for name in BUILT_IN {
            let parsed = Program::parse(name, "");
            assert!(!matches!(parsed, Err(ProgramError::Unknown(_))), "{name}: {parsed:?}");
            assert!(ProgramError::Unknown("x".into()).to_string().contains(name), "{name} in the message");
        }
        for arg in ["", "a", "0,0", "1,1"] {
            for name in ["wordcount", "grep", "invindex", "kmeans", "sleep"] {
                if let Ok(p) = Program::parse(name, arg) {
                    assert!(BUILT_IN.contains(&p.name().as_str()), "{}", p.name());
                }
            }
        }
    }

    #[test]
    fn split_ends_at_newlines_and_keeps_every_byte() {
        let input = b"one two\nthree\nfour five six\nseven";
        for size in 1..input.len() + 2 {
            let parts = split(input, size);
            assert_eq!(parts.concat(), input.to_vec(), "size {size}");
            for p in &parts[..parts.len() - 1] {
                assert_eq!(p.last(), Some(&b'\n'), "size {size}");
            }
        }
        assert_eq!(split(b"", 10), vec![&b""[..]]);
    }

    #[test]
    fn word_count_is_sorted_and_independent_of_splits_and_partitions() {
        let input = b"b a  c\n\ta b\r\nz a\n";
        let want = b"a\t3\nb\t2\nc\t1\nz\t1\n".to_vec();
        for size in [1, 3, 100] {
            for reduces in [1, 2, 5] {
                assert_eq!(reference(&Program::WordCount, input, size, reduces).unwrap(), want);
            }
        }
    }

    #[test]
    fn inverted_index_and_grep_and_kmeans() {
        let input = b"d1\tthe cat\nd2\tthe dog\nd1\tcat\n";
        let out = reference(&Program::InvertedIndex, input, 8, 3).unwrap();
        assert_eq!(out, b"cat\td1\ndog\td2\nthe\td1,d2\n".to_vec());
        let grep = Program::parse("grep", "^d1").unwrap();
        assert_eq!(reference(&grep, input, 5, 0).unwrap(), b"d1\tthe cat\nd1\tcat\n".to_vec());
        let km = Program::parse("kmeans", "0,0;10,10").unwrap();
        let out = reference(&km, b"1,1\n3,3\n9,9\n11,11\n", 4, 2).unwrap();
        assert_eq!(out, b"0\t2.0,2.0\n1\t10.0,10.0\n".to_vec());
    }

    #[test]
    fn bad_programs_and_inputs_are_named() {
        assert!(matches!(Program::parse("eval", ""), Err(ProgramError::Unknown(_))));
        assert!(matches!(Program::parse("exec:../x", ""), Err(ProgramError::Unknown(_))));
        assert!(Program::parse("grep", "(").is_err());
        assert!(Program::parse("kmeans", "1,2;3").is_err());
        let e = Program::InvertedIndex.check_input(b"d\tok\nno tab here\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let km = Program::parse("kmeans", "0,0").unwrap();
        assert!(km.check_input(b"1,2\n1,x\n").unwrap_err().to_string().contains("line 2"));
        assert!(Program::parse("grep", "a").unwrap().check_shape(2).is_err());
        assert!(Program::WordCount.check_shape(0).is_err());
    }

    #[test]
    fn exec_runs_the_allowed_command_only() {
        struct One;
        impl Commands for One {
            fn map(&self, name: &str) -> Option<&str> {
                (name == "upper").then_some("tr a-z A-Z | awk '{print $1\"\\t1\"}'")
            }
            fn reduce(&self, _: &str) -> Option<&str> {
                None
            }
        }
        let p = Program::parse("exec:upper", "").unwrap();
        let parts = run_map(&p, b"a\nb\na\n", 1, &One).unwrap();
        assert_eq!(run_reduce(&p, &parts[0], &One).unwrap(), b"A\t1\nA\t1\nB\t1\n".to_vec());
        let other = Program::parse("exec:rm", "").unwrap();
        assert!(run_map(&other, b"x", 1, &One).unwrap_err().to_string().contains("not allow-listed"));
    }
}
