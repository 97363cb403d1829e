//! The Intel Berkeley Research Lab sensor trace: 54 motes' temperature, humidity, light and
//! battery voltage, sampled about every 31 s over five weeks of 2004 (the trace-driven sensor
//! field of Yates's Part II).
//!
//! The trace is two files. The mote locations (`mote_locs.txt`, `moteid x y` in metres) are small
//! and must be right, so any fault in them is an error naming the line. The readings (`data.txt`,
//! usually gzipped) are large and known to be untidy — short lines, motes missing from the
//! locations — so, as with damaged packets in a capture, such lines are left out and counted by
//! reason ([`LabSkipped`]); lines out of time order are kept, and the readings are sorted by time.
//!
//! The real trace cannot be downloaded here: [`synthetic`] writes one in the same format, and
//! `data/labdata/` ships 15 hours of one (made by `examples/lab_sample.rs`).
//!
//! ```no_run
//! use std::path::Path;
//! use switchyard_ingest::labdata::{open_locations, open_readings};
//!
//! let motes = open_locations(Path::new("data/labdata/mote_locs.txt"))?;
//! let trace = open_readings(Path::new("data/labdata/data.txt.gz"), &motes)?;
//! println!("{} readings of {} motes; {}", trace.readings.len(), motes.len(), trace.skipped);
//! # Ok::<(), switchyard_ingest::labdata::LabError>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use thiserror::Error;

mod generate;
pub use generate::synthetic;

/// One reading of one mote.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LabReading {
    /// When it was taken, seconds since 1970-01-01 00:00 UTC (the file's date and time, read as
    /// UTC: the trace gives no time zone).
    pub time_s: f64,
    /// TinyDB's sample number: readings of one sampling round share it.
    pub epoch: u32,
    /// The mote that took it (one of the locations file's).
    pub mote: u16,
    /// Degrees Celsius (faulty motes report values far outside a room's range; kept as read).
    pub temperature: Option<f64>,
    /// Temperature-corrected relative humidity, percent.
    pub humidity: Option<f64>,
    /// Lux. Always present in a reading from [`read_readings`], which skips lines without it: it is
    /// the attribute the experiments use. The fields are `Option` because the file's trailing
    /// values go missing, and so that readings from elsewhere may lack any of them.
    pub light: Option<f64>,
    /// Battery volts; missing on some lines of the real file.
    pub voltage: Option<f64>,
}

/// Where a mote sits, in metres from the lab's upper-right corner.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MoteLocation {
    /// The mote's id, as in the readings.
    pub mote: u16,
    /// Metres along the lab's long side.
    pub x: f64,
    /// Metres along the short side.
    pub y: f64,
}

/// The usable readings of a readings file, and what was left out.
#[derive(Clone, Debug)]
pub struct LabTrace {
    /// Sorted by time; readings with equal times keep the file's order.
    pub readings: Vec<LabReading>,
    /// Lines left out, by reason.
    pub skipped: LabSkipped,
}

/// Lines of a readings file left out, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabSkipped {
    /// Empty or whitespace-only lines.
    pub blank: u64,
    /// Lines cut short before the light value (some lack even the mote id).
    pub no_light: u64,
    /// Readings from a mote that is not in the locations file.
    pub unknown_mote: u64,
    /// Lines whose fields are there but do not read (a date that is not a date, a word where a
    /// number belongs, too many fields, bytes that are not UTF-8).
    pub unreadable: u64,
    /// The first unreadable line, kept so that a message can show it.
    pub first_unreadable: Option<UnreadableLine>,
}

/// An unreadable line of a readings file, for the message that reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnreadableLine {
    /// Its line number, from 1.
    pub line: u64,
    /// Its text, shortened to 80 characters.
    pub text: String,
    /// What does not read.
    pub why: &'static str,
}

/// How much of an offending line or field an error or a skip count shows.
const SHOWN_CHARS: usize = 80;

impl LabSkipped {
    /// Lines left out for any reason.
    pub fn total(&self) -> u64 {
        self.blank + self.no_light + self.unknown_mote + self.unreadable
    }

    fn unreadable_line(&mut self, line: u64, text: &[u8], why: &'static str) {
        self.unreadable += 1;
        if self.first_unreadable.is_none() {
            let text = shorten(String::from_utf8_lossy(text).trim_end());
            self.first_unreadable = Some(UnreadableLine { line, text, why });
        }
    }
}

impl fmt::Display for LabSkipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total();
        if total == 0 {
            return f.write_str("no lines skipped");
        }
        write!(f, "{total} line{} skipped: ", if total == 1 { "" } else { "s" })?;
        let parts = [
            (self.no_light, "without a light value"),
            (self.unknown_mote, "from motes not in the locations file"),
            (self.blank, "blank"),
            (self.unreadable, "unreadable"),
        ];
        let mut first = true;
        for (n, what) in parts.into_iter().filter(|&(n, _)| n > 0) {
            write!(f, "{}{n} {what}", if first { "" } else { ", " })?;
            first = false;
        }
        if let Some(u) = &self.first_unreadable {
            write!(f, " (the first, line {}: {}: \"{}\")", u.line, u.why, u.text)?;
        }
        Ok(())
    }
}

/// Why the trace could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LabError {
    /// A file could not be opened.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Reading failed part way (for a gzipped file, this includes a damaged stream).
    #[error("reading line {line}: {source}")]
    Read {
        /// The line being read, from 1.
        line: u64,
        /// What the reader said.
        source: io::Error,
    },
    /// A line of the locations file is malformed.
    #[error("mote locations, line {line}: {what}")]
    Location {
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        what: String,
    },
    /// The locations file lists no mote.
    #[error("the mote locations list no mote")]
    NoMotes,
    /// No line of the readings file gave a usable reading.
    #[error("no usable readings in {lines} lines ({skipped})")]
    NoReadings {
        /// Lines in the file.
        lines: u64,
        /// Why each was left out.
        skipped: LabSkipped,
    },
    /// An error in the contents of a named file.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        source: Box<Self>,
    },
}

/// Calls `f` with each line's number (from 1) and bytes (with its newline); a failing reader is
/// an error naming the line it failed on.
fn for_each_line(
    mut reader: impl BufRead,
    mut f: impl FnMut(u64, &[u8]) -> Result<(), LabError>,
) -> Result<(), LabError> {
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        buf.clear();
        if reader.read_until(b'\n', &mut buf).map_err(|source| LabError::Read { line: line + 1, source })? == 0 {
            return Ok(());
        }
        line += 1;
        f(line, &buf)?;
    }
}

/// Reads a mote locations file: `moteid x y` per line, whitespace separated, blank lines allowed.
/// Anything else — a missing or extra field, a value that is not a number, a mote listed twice,
/// no mote at all — is an error naming the line, because every reading is judged against this list.
pub fn read_locations(reader: impl BufRead) -> Result<Vec<MoteLocation>, LabError> {
    let mut motes = Vec::new();
    let mut seen: HashMap<u16, u64> = HashMap::new();
    for_each_line(reader, |line, buf| {
        let bad = |what: String| LabError::Location { line, what };
        let text = std::str::from_utf8(buf).map_err(|_| bad("not UTF-8 text".into()))?;
        let fields: Vec<&str> = text.split_whitespace().collect();
        let &[mote, x, y] = fields.as_slice() else {
            if fields.is_empty() {
                return Ok(());
            }
            return Err(bad(format!("expected 3 fields (mote x y), found {}", fields.len())));
        };
        let id = whole(mote)
            .and_then(|m| u16::try_from(m).ok())
            .ok_or_else(|| bad(format!("mote id \"{}\" is not a whole number from 0 to 65535", shorten(mote))))?;
        let x = real(x).ok_or_else(|| bad(format!("x \"{}\" is not a number of metres", shorten(x))))?;
        let y = real(y).ok_or_else(|| bad(format!("y \"{}\" is not a number of metres", shorten(y))))?;
        if let Some(first) = seen.insert(id, line) {
            return Err(bad(format!("mote {id} is listed twice (first on line {first})")));
        }
        motes.push(MoteLocation { mote: id, x, y });
        Ok(())
    })?;
    if motes.is_empty() {
        return Err(LabError::NoMotes);
    }
    Ok(motes)
}

/// Reads a readings file (`date time epoch moteid temperature humidity light voltage` per line)
/// and sorts the readings by time. Lines are judged in this order: blank; cut short before the
/// light value; unreadable (a field that does not read, or more than 8 fields); from a mote not in
/// `motes`. A missing voltage is kept as `None`. Values are kept as read, however implausible:
/// judging them is the user's business. Only a failing reader, or no usable reading at all, is an
/// error.
pub fn read_readings(reader: impl BufRead, motes: &[MoteLocation]) -> Result<LabTrace, LabError> {
    let mut known = vec![false; usize::from(u16::MAX) + 1];
    for m in motes {
        known[usize::from(m.mote)] = true;
    }
    let mut readings = Vec::new();
    let mut skipped = LabSkipped::default();
    let mut lines = 0;
    for_each_line(reader, |line, buf| {
        lines = line;
        match parse_reading(buf) {
            Ok(r) if known[usize::from(r.mote)] => readings.push(r),
            Ok(_) | Err(Bad::UnknownMote) => skipped.unknown_mote += 1,
            Err(Bad::Blank) => skipped.blank += 1,
            Err(Bad::NoLight) => skipped.no_light += 1,
            Err(Bad::Unreadable(why)) => skipped.unreadable_line(line, buf, why),
        }
        Ok(())
    })?;
    if readings.is_empty() {
        return Err(LabError::NoReadings { lines, skipped });
    }
    // Every time is finite (parse_reading sees to it), and sort_by is stable.
    readings.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
    Ok(LabTrace { readings, skipped })
}

/// Opens and reads a readings file, gunzipping it if its name ends in `.gz`.
pub fn open_readings(path: &Path, motes: &[MoteLocation]) -> Result<LabTrace, LabError> {
    read_readings(open(path)?, motes).map_err(|e| in_file(path, e))
}

/// Opens and reads a mote locations file, gunzipping it if its name ends in `.gz`.
pub fn open_locations(path: &Path) -> Result<Vec<MoteLocation>, LabError> {
    read_locations(open(path)?).map_err(|e| in_file(path, e))
}

fn open(path: &Path) -> Result<Box<dyn BufRead>, LabError> {
    let file = File::open(path).map_err(|source| LabError::Io { path: path.to_owned(), source })?;
    Ok(if path.extension().is_some_and(|e| e == "gz") {
        // Multi-member, as gzip itself reads: a file made by concatenating .gz files is one stream.
        Box::new(BufReader::new(flate2::read::MultiGzDecoder::new(file)))
    } else {
        Box::new(BufReader::new(file))
    })
}

fn in_file(path: &Path, e: LabError) -> LabError {
    LabError::InFile { path: path.to_owned(), source: Box::new(e) }
}

/// Why a line gives no reading.
enum Bad {
    Blank,
    NoLight,
    UnknownMote,
    Unreadable(&'static str),
}

fn parse_reading(line: &[u8]) -> Result<LabReading, Bad> {
    let text = std::str::from_utf8(line).map_err(|_| Bad::Unreadable("not UTF-8 text"))?;
    let fields: Vec<&str> = text.split_whitespace().collect();
    match fields.len() {
        0 => return Err(Bad::Blank),
        1..7 => return Err(Bad::NoLight),
        7 | 8 => {}
        _ => return Err(Bad::Unreadable("more than 8 fields")),
    }
    let time_s = parse_time(fields[0], fields[1])?;
    let epoch = whole(fields[2])
        .and_then(|e| u32::try_from(e).ok())
        .ok_or(Bad::Unreadable("the epoch is not a whole number below 2^32"))?;
    let value = |s: &str| real(s).ok_or(Bad::Unreadable("a reading is not a finite number"));
    let (temperature, humidity, light) = (value(fields[4])?, value(fields[5])?, value(fields[6])?);
    let voltage = fields.get(7).map(|&v| value(v)).transpose()?;
    // Any whole number reads; one too large for a mote id is certainly not a listed mote.
    let mote = whole(fields[3]).ok_or(Bad::Unreadable("the mote id is not a whole number"))?;
    let mote = u16::try_from(mote).map_err(|_| Bad::UnknownMote)?;
    Ok(LabReading {
        time_s,
        epoch,
        mote,
        temperature: Some(temperature),
        humidity: Some(humidity),
        light: Some(light),
        voltage,
    })
}

/// `yyyy-mm-dd` and `hh:mm:ss[.fraction]` (any number of fraction digits) as Unix seconds.
fn parse_time(date: &str, time: &str) -> Result<f64, Bad> {
    let bad_date = || Bad::Unreadable("the date is not a real yyyy-mm-dd");
    let [y, mo, d] = split3(date, '-', [4, 2, 2]).ok_or_else(bad_date)?;
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) {
        return Err(bad_date());
    }
    let bad_time = || Bad::Unreadable("the time is not hh:mm:ss[.fraction]");
    let (hms, fraction) = match time.split_once('.') {
        Some((hms, f)) => (hms, fraction_of(f).ok_or_else(bad_time)?),
        None => (time, 0.0),
    };
    let [h, mi, s] = split3(hms, ':', [2, 2, 2]).ok_or_else(bad_time)?;
    if h > 23 || mi > 59 || s > 59 {
        return Err(bad_time());
    }
    let day = days_from_civil(y as i64, mo as i64, d as i64);
    Ok((day * 86_400 + (h * 3600 + mi * 60 + s) as i64) as f64 + fraction)
}

/// Three runs of digits of the given widths, separated by `sep`.
fn split3(s: &str, sep: char, widths: [usize; 3]) -> Option<[u64; 3]> {
    let mut parts = s.split(sep);
    let mut out = [0; 3];
    for (slot, width) in out.iter_mut().zip(widths) {
        let part = parts.next().filter(|p| p.len() == width)?;
        *slot = whole(part)?;
    }
    parts.next().is_none().then_some(out)
}

/// The digits after a decimal point as a fraction; digits past the ninth are below f64's
/// resolution at these magnitudes and only checked.
fn fraction_of(digits: &str) -> Option<f64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let used = &digits[..digits.len().min(9)];
    Some(used.parse::<u64>().ok()? as f64 / 10f64.powi(used.len() as i32))
}

/// A run of ASCII digits (no sign, at most 18 of them, so that it fits).
fn whole(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 18 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// A finite decimal number.
fn real(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

fn shorten(s: &str) -> String {
    s.chars().take(SHOWN_CHARS).collect()
}

fn is_leap(y: u64) -> bool {
    y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400))
}

fn days_in_month(y: u64, m: u64) -> u64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date. The year is counted from March, so that
/// the leap day falls at its end, in 400-year eras of 146 097 days.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`], for the generator's dates.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let d = day_of_year - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (year_of_era + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use flate2::Compression;
    use flate2::write::GzEncoder;
    use proptest::prelude::*;

    use super::generate::*;
    use super::*;

    /// Motes 1 to 54, as in the real trace.
    fn lab() -> Vec<MoteLocation> {
        (1..=54).map(|mote| MoteLocation { mote, x: f64::from(mote), y: 1.0 }).collect()
    }

    fn read(text: &str) -> Result<LabTrace, LabError> {
        read_readings(text.as_bytes(), &lab())
    }

    fn time_of(date_time: &str) -> f64 {
        read(&format!("{date_time} 1 1 20 40 100 2.7\n")).unwrap().readings[0].time_s
    }

    fn skip_of(line: &str) -> LabSkipped {
        // A good line beside it, so that the file as a whole reads.
        read(&format!("2004-03-01 00:00:00 1 1 20 40 100 2.7\n{line}\n")).unwrap().skipped
    }

    #[test]
    fn a_good_line_reads_whole() {
        let t = read("2004-03-31 03:38:15.757551 2 1 122.153 -3.91901 11.04 2.03397\n").unwrap();
        assert_eq!(t.skipped.total(), 0);
        let r = t.readings[0];
        assert!((r.time_s - (1_080_704_295.0 + 0.757_551)).abs() < 1e-6, "{}", r.time_s);
        assert_eq!((r.epoch, r.mote), (2, 1));
        assert_eq!(r.temperature, Some(122.153));
        assert_eq!(r.humidity, Some(-3.91901));
        assert_eq!(r.light, Some(11.04));
        assert_eq!(r.voltage, Some(2.03397));
    }

    #[test]
    fn times_match_known_unix_times_across_month_and_year_ends() {
        for (date_time, unix) in [
            ("1970-01-01 00:00:00", 0),
            ("2000-02-29 12:00:00", 951_825_600),
            ("2003-12-31 23:59:59", 1_072_915_199),
            ("2004-01-01 00:00:00", 1_072_915_200),
            ("2004-02-28 00:00:00", 1_077_926_400),
            ("2004-02-29 00:00:00", 1_078_012_800),
            ("2004-03-01 00:00:00", 1_078_099_200),
            ("2004-04-05 11:02:32", 1_081_162_952),
        ] {
            assert_eq!(time_of(date_time), unix as f64, "{date_time}");
        }
    }

    #[test]
    fn fractions_of_0_to_6_digits_read() {
        let base = 1_078_099_200.0;
        for (fraction, value) in
            [("", 0.0), (".5", 0.5), (".25", 0.25), (".125", 0.125), (".0625", 0.0625), (".03125", 0.03125)]
        {
            assert_eq!(time_of(&format!("2004-03-01 00:00:00{fraction}")) - base, value, "{fraction}");
        }
        let six = time_of("2004-03-01 00:00:00.757551") - base;
        assert!((six - 0.757_551).abs() < 1e-6, "{six}");
        // More digits than f64 resolves are read and ignored.
        let many = time_of("2004-03-01 00:00:00.7575519999999") - base;
        assert!((many - 0.757_552).abs() < 1e-6, "{many}");
    }

    #[test]
    fn calendar_conversions_invert() {
        for day in -800_000..800_000 {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        assert_eq!(stamp(1_078_099_200.0), "2004-03-01 00:00:00");
        assert_eq!(stamp(1_078_099_199.25), "2004-02-29 23:59:59.25");
    }

    #[test]
    fn short_lines_are_counted_without_a_light_value() {
        for line in ["2004-03-01", "2004-03-01 00:00:01 5", "2004-03-01 00:00:01 5 3 20.1 40.2", "x y z"] {
            let s = skip_of(line);
            assert_eq!((s.no_light, s.total()), (1, 1), "{line}");
        }
    }

    #[test]
    fn a_missing_voltage_still_reads() {
        let t = read("2004-03-01 00:00:01 5 3 20.1 40.2 310.5\n").unwrap();
        assert_eq!(t.readings[0].light, Some(310.5));
        assert_eq!(t.readings[0].voltage, None);
    }

    #[test]
    fn motes_not_in_the_locations_are_counted() {
        for mote in ["60", "0", "55", "65536", "99999999999"] {
            let s = skip_of(&format!("2004-03-01 00:00:01 5 {mote} 20 40 100 2.7"));
            assert_eq!((s.unknown_mote, s.total()), (1, 1), "{mote}");
        }
    }

    #[test]
    fn blank_lines_are_counted_and_crlf_reads() {
        let t = read("\n   \n\t\r\n2004-03-01 00:00:01 5 3 20 40 100 2.7\r\n").unwrap();
        assert_eq!((t.skipped.blank, t.skipped.total()), (3, 3));
        assert_eq!(t.readings[0].voltage, Some(2.7));
    }

    #[test]
    fn unreadable_lines_are_counted_and_the_first_kept() {
        let bad = [
            "abc 00:00:01 5 3 20 40 100 2.7",
            "2003-02-29 00:00:01 5 3 20 40 100 2.7",
            "2004-13-01 00:00:01 5 3 20 40 100 2.7",
            "2004-04-31 00:00:01 5 3 20 40 100 2.7",
            "2004-3-01 00:00:01 5 3 20 40 100 2.7",
            "2004-03-01 24:00:00 5 3 20 40 100 2.7",
            "2004-03-01 00:60:00 5 3 20 40 100 2.7",
            "2004-03-01 00:00 5 3 20 40 100 2.7",
            "2004-03-01 00:00:01. 5 3 20 40 100 2.7",
            "2004-03-01 00:00:01.5x 5 3 20 40 100 2.7",
            "2004-03-01 +0:00:01 5 3 20 40 100 2.7",
            "2004-03-01 00:00:01 -5 3 20 40 100 2.7",
            "2004-03-01 00:00:01 4294967296 3 20 40 100 2.7",
            "2004-03-01 00:00:01 5 three 20 40 100 2.7",
            "2004-03-01 00:00:01 5 3 warm 40 100 2.7",
            "2004-03-01 00:00:01 5 3 20 40 NaN 2.7",
            "2004-03-01 00:00:01 5 3 20 40 100 inf",
            "2004-03-01 00:00:01 5 3 20 40 100 2.7 9",
            "2004-é3-01 00:00:01 5 3 20 40 100 2.7",
        ];
        for line in bad {
            let s = skip_of(line);
            assert_eq!((s.unreadable, s.total()), (1, 1), "{line}");
            let first = s.first_unreadable.unwrap();
            assert_eq!((first.line, first.text.as_str()), (2, line));
        }
        let mut text = String::from("2004-03-01 00:00:00 1 1 20 40 100 2.7\n");
        for line in bad {
            text.push_str(line);
            text.push('\n');
        }
        let s = read(&text).unwrap().skipped;
        assert_eq!(s.unreadable, bad.len() as u64);
        assert_eq!(s.first_unreadable.unwrap().why, "the date is not a real yyyy-mm-dd");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_unreadable() {
        let mut input = b"2004-03-01 00:00:00 1 1 20 40 100 2.7\n2004-03-01 \xff\xfe 1 1 20 40 100 2.7\n".to_vec();
        input.extend_from_slice(b"\xc3\n");
        let s = read_readings(input.as_slice(), &lab()).unwrap().skipped;
        assert_eq!(s.unreadable, 2);
        let first = s.first_unreadable.unwrap();
        assert_eq!((first.line, first.why), (2, "not UTF-8 text"));
        assert!(first.text.starts_with("2004-03-01 "));
    }

    #[test]
    fn skips_read_well() {
        let mut s = LabSkipped { no_light: 10, unknown_mote: 2, ..LabSkipped::default() };
        assert_eq!(s.to_string(), "12 lines skipped: 10 without a light value, 2 from motes not in the locations file");
        s = LabSkipped::default();
        assert_eq!(s.to_string(), "no lines skipped");
        s.blank = 1;
        assert_eq!(s.to_string(), "1 line skipped: 1 blank");
        let s = skip_of("2004-03-01 noon 5 3 20 40 100 2.7");
        assert_eq!(
            s.to_string(),
            "1 line skipped: 1 unreadable (the first, line 2: the time is not hh:mm:ss[.fraction]: \
             \"2004-03-01 noon 5 3 20 40 100 2.7\")"
        );
    }

    #[test]
    fn a_file_without_usable_readings_is_an_error_that_says_why() {
        let e = read("2004-03-01 00:00:01 5\n2004-03-01 00:00:01 5 60 20 40 100 2.7\n").unwrap_err();
        assert!(matches!(&e, LabError::NoReadings { lines: 2, skipped } if skipped.total() == 2), "{e:?}");
        assert_eq!(
            e.to_string(),
            "no usable readings in 2 lines (2 lines skipped: 1 without a light value, 1 from motes not in the \
             locations file)"
        );
        assert!(matches!(read("").unwrap_err(), LabError::NoReadings { lines: 0, .. }));
        let none = read_readings("2004-03-01 00:00:01 5 3 20 40 100 2.7\n".as_bytes(), &[]).unwrap_err();
        assert!(matches!(none, LabError::NoReadings { .. }));
    }

    #[test]
    fn readings_come_out_sorted_by_time_and_stable() {
        let t = read(
            "2004-03-01 00:00:03 3 1 20 40 100 2.7\n\
             2004-02-29 23:59:59.9 1 2 20 40 100 2.7\n\
             2004-03-01 00:00:01 2 3 20 40 100 2.7\n\
             2004-03-01 00:00:01.000 2 4 20 40 100 2.7\n\
             2003-12-31 23:59:59 0 5 20 40 100 2.7\n",
        )
        .unwrap();
        let motes: Vec<u16> = t.readings.iter().map(|r| r.mote).collect();
        assert_eq!(motes, [5, 2, 3, 4, 1]);
    }

    #[test]
    fn locations_read_and_every_fault_names_its_line() {
        let motes = read_locations("1 21.5 23\n\n2 24.5 20\r\n 3   0 -1.25 \n".as_bytes()).unwrap();
        assert_eq!(
            motes,
            [
                MoteLocation { mote: 1, x: 21.5, y: 23.0 },
                MoteLocation { mote: 2, x: 24.5, y: 20.0 },
                MoteLocation { mote: 3, x: 0.0, y: -1.25 }
            ]
        );
        for (text, message) in [
            ("1 2 3\n2 3\n", "mote locations, line 2: expected 3 fields (mote x y), found 2"),
            ("1 2 3 4\n", "mote locations, line 1: expected 3 fields (mote x y), found 4"),
            ("a 2 3\n", "mote locations, line 1: mote id \"a\" is not a whole number from 0 to 65535"),
            ("65536 2 3\n", "mote locations, line 1: mote id \"65536\" is not a whole number from 0 to 65535"),
            ("-1 2 3\n", "mote locations, line 1: mote id \"-1\" is not a whole number from 0 to 65535"),
            ("1 two 3\n", "mote locations, line 1: x \"two\" is not a number of metres"),
            ("1 2 inf\n", "mote locations, line 1: y \"inf\" is not a number of metres"),
            ("1 2 3\n\n1 4 5\n", "mote locations, line 3: mote 1 is listed twice (first on line 1)"),
            ("", "the mote locations list no mote"),
            ("\n \n", "the mote locations list no mote"),
        ] {
            let e = read_locations(text.as_bytes()).unwrap_err();
            assert_eq!(e.to_string(), message, "{text:?}");
        }
        let e = read_locations(b"1 2 3\n\xff 1 1\n".as_slice()).unwrap_err();
        assert_eq!(e.to_string(), "mote locations, line 2: not UTF-8 text");
        let long = format!("1 {} 3\n", "9x".repeat(100));
        let e = read_locations(long.as_bytes()).unwrap_err().to_string();
        assert!(e.len() < 150, "a long field is shortened: {e}");
    }

    #[test]
    fn files_read_plain_and_gzipped_and_errors_name_them() {
        let dir = std::env::temp_dir().join(format!("switchyard-labdata-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (motes, readings) = synthetic(5, 1.0);
        let locations: String = motes.iter().map(|m| format!("{} {} {}\n", m.mote, m.x, m.y)).collect();
        let gz = |text: &str| {
            let mut e = GzEncoder::new(Vec::new(), Compression::fast());
            e.write_all(text.as_bytes()).unwrap();
            e.finish().unwrap()
        };
        std::fs::write(dir.join("mote_locs.txt.gz"), gz(&locations)).unwrap();
        std::fs::write(dir.join("data.txt"), &readings).unwrap();
        // A file of two gzip members reads as their concatenation, as gzip -d does.
        let half = readings.len() / 2 + readings[readings.len() / 2..].find('\n').unwrap() + 1;
        let two = [gz(&readings[..half]), gz(&readings[half..])].concat();
        std::fs::write(dir.join("data.txt.gz"), two).unwrap();

        assert_eq!(open_locations(&dir.join("mote_locs.txt.gz")).unwrap(), motes);
        let plain = open_readings(&dir.join("data.txt"), &motes).unwrap();
        let gzipped = open_readings(&dir.join("data.txt.gz"), &motes).unwrap();
        assert_eq!(plain.readings, gzipped.readings);
        assert_eq!(plain.skipped, gzipped.skipped);
        assert_eq!(plain.readings.len(), read_readings(readings.as_bytes(), &motes).unwrap().readings.len());

        let missing = open_locations(&dir.join("nothing.txt")).unwrap_err();
        assert!(matches!(&missing, LabError::Io { path, .. } if path.ends_with("nothing.txt")), "{missing:?}");
        assert!(missing.to_string().contains("nothing.txt"));
        std::fs::write(dir.join("damaged.txt.gz"), &gz(&readings)[..5000]).unwrap();
        let damaged = open_readings(&dir.join("damaged.txt.gz"), &motes).unwrap_err();
        assert!(
            matches!(&damaged, LabError::InFile { path, source } if path.ends_with("damaged.txt.gz")
                && matches!(**source, LabError::Read { .. })),
            "{damaged:?}"
        );
        std::fs::write(dir.join("bad_locs.txt"), "1 2 3\n1 2 3\n").unwrap();
        let dup = open_locations(&dir.join("bad_locs.txt")).unwrap_err().to_string();
        assert!(dup.contains("bad_locs.txt") && dup.contains("line 2"), "{dup}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Lines of a trace whose quirk lines are skipped: all but the kept ones without voltage.
    const QUIRK_SKIPS: usize = CUT_AFTER_EPOCH + CUT_AFTER_HUMIDITY + FROM_MOTE_60 + BLANK;

    fn quirks_counted(s: &LabSkipped) {
        assert_eq!(s.no_light, (CUT_AFTER_EPOCH + CUT_AFTER_HUMIDITY) as u64);
        assert_eq!(s.unknown_mote, FROM_MOTE_60 as u64);
        assert_eq!(s.blank, BLANK as u64);
        assert_eq!((s.unreadable, s.total()), (0, QUIRK_SKIPS as u64));
    }

    #[test]
    fn synthetic_traces_are_fixed_by_the_seed_and_carry_the_quirks() {
        let (motes, text) = synthetic(7, 2.0);
        assert_eq!((motes.clone(), text.clone()), synthetic(7, 2.0));
        assert_ne!(text, synthetic(8, 2.0).1);
        assert_eq!(motes.len(), 54);
        for m in &motes {
            assert!((0.0..=40.0).contains(&m.x) && (0.0..=30.0).contains(&m.y), "{m:?}");
        }
        let t = read_readings(text.as_bytes(), &motes).unwrap();
        quirks_counted(&t.skipped);
        assert_eq!(t.readings.len(), text.lines().count() - QUIRK_SKIPS);
        assert_eq!(t.readings.iter().filter(|r| r.voltage.is_none()).count(), NO_VOLTAGE);
        let in_order = text.lines().filter_map(|l| l.get(..26)).collect::<Vec<_>>().is_sorted();
        assert!(!in_order, "the lines are not in time order");
        for r in &t.readings {
            assert!((0.0..=1000.0).contains(&r.light.unwrap()), "{r:?}");
            assert!((10.0..=30.0).contains(&r.temperature.unwrap()), "{r:?}");
            assert!((5.0..=95.0).contains(&r.humidity.unwrap()), "{r:?}");
            assert!(r.voltage.is_none_or(|v| (2.0..=3.0).contains(&v)), "{r:?}");
        }
        // Too short for the quirks, or empty: no panic, and what there is reads.
        assert_eq!(synthetic(1, 0.0).1, "");
        assert_eq!(synthetic(1, f64::NAN).1, "");
        assert!(synthetic(1, 0.05).1.lines().count() > 250);
    }

    /// The shipped sample (data/labdata, from `examples/lab_sample.rs`) is what
    /// `synthetic(1, 15.0)` writes, and reads back with the generator's motes and quirks.
    #[test]
    fn the_shipped_sample_is_the_generators_and_reads_back() {
        const HOURS: f64 = 15.0;
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/labdata"));
        let motes = open_locations(&dir.join("mote_locs.txt")).unwrap();
        let trace = open_readings(&dir.join("data.txt.gz"), &motes).unwrap();
        let (made_motes, made) = synthetic(1, HOURS);
        assert_eq!(motes.len(), 54);
        assert_eq!(motes, made_motes);
        quirks_counted(&trace.skipped);
        let emitted = 54.0 * (HOURS * 3600.0 / ROUND_S).floor() * (1.0 - LOSS);
        let expected = emitted - (QUIRK_SKIPS) as f64;
        let read = trace.readings.len() as f64;
        assert!((read / expected - 1.0).abs() < 0.01, "{read} readings, {expected} expected");
        // The shipped bytes are the generator's: change one, remake the other.
        let shipped = read_readings(
            BufReader::new(flate2::read::GzDecoder::new(File::open(dir.join("data.txt.gz")).unwrap())),
            &motes,
        )
        .unwrap();
        assert_eq!(shipped.readings, read_readings(made.as_bytes(), &made_motes).unwrap().readings);
        // Light swings widely over the day: dark before dawn, lit through the working day.
        let light: Vec<f64> = trace.readings.iter().map(|r| r.light.unwrap()).collect();
        let mean = light.iter().sum::<f64>() / read;
        let sd = (light.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / read).sqrt();
        assert!(sd > 80.0 && mean > 100.0, "light mean {mean}, std dev {sd}");
        let night = trace.readings.iter().take_while(|r| r.time_s < START_S as f64 + 3600.0);
        assert!(night.clone().count() > 5000 && night.clone().all(|r| r.light.unwrap() <= 10.0));
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(text in any::<String>()) {
            let _ = read_readings(text.as_bytes(), &lab());
            let _ = read_locations(text.as_bytes());
        }

        #[test]
        fn line_like_text_never_panics_and_reads_consistently(
            text in "([0-9]{1,5}[-:. ]{0,2}|2004-0[0-9]-[0-3][0-9] [0-2][0-9]:[0-6][0-9]:[0-6][0-9]\\.?[0-9]{0,7}|[ \n\t]|e|-|inf|NaN){0,60}"
        ) {
            if let Ok(t) = read_readings(text.as_bytes(), &lab()) {
                let lines = text.lines().count() as u64;
                prop_assert!(t.readings.len() as u64 + t.skipped.total() == lines);
                prop_assert!(t.readings.is_sorted_by(|a, b| a.time_s <= b.time_s));
                prop_assert!(t.readings.iter().all(|r| (1..=54).contains(&r.mote) && r.light.is_some()));
            }
            if let Ok(m) = read_locations(text.as_bytes()) {
                prop_assert!(!m.is_empty());
            }
        }
    }
}
