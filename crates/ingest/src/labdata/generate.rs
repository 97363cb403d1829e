//! The synthetic trace: the real one's format, quirks and light behaviour, from a seed.

use std::f64::consts::{PI, TAU};
use std::fmt::Write as _;

use super::{MoteLocation, civil_from_days};

// The quirks `synthetic` writes into every trace of at least QUIRK_ROOM readings, each on a line
// of its own (a reading's line, changed).
/// Lines cut after the epoch: no mote id.
pub(super) const CUT_AFTER_EPOCH: usize = 2;
/// Lines cut after the humidity: no light value.
pub(super) const CUT_AFTER_HUMIDITY: usize = 6;
/// Lines without the voltage (these still read).
pub(super) const NO_VOLTAGE: usize = 3;
/// Readings re-numbered as from mote 60, which no locations file lists.
pub(super) const FROM_MOTE_60: usize = 3;
/// Readings' lines emptied.
pub(super) const BLANK: usize = 2;
/// The fewest readings a trace must have to get the quirks.
pub(super) const QUIRK_ROOM: usize = 200;
/// The chance that a reading is lost (the real trace misses some rounds of some motes).
pub(super) const LOSS: f64 = 0.03;
/// The round length of the real trace, seconds.
pub(super) const ROUND_S: f64 = 31.0;
/// 2004-03-01 04:00:00 UTC, a Monday before dawn (the real trace began on Saturday 28 February),
/// so that even a sample of a few hours has the night, the working day's lights and the evening.
pub(super) const START_S: i64 = 1_078_113_600;

/// A trace in the real one's format: 54 motes at made-up places on a 40 m × 30 m floor, each
/// reporting about every 31 s for `hours` (clamped to 0..=960), and the readings file's text.
/// The same seed gives the same bytes on every platform (splitmix64 and libm, no std maths).
///
/// Light, the attribute the experiments use, behaves as in a lab: dark at night (0–10 Lux),
/// ceiling lights switched on and off zone by zone (on weekdays from about 8 h to between 16:30 and
/// 21 h; some weekend days), daylight that rises and falls through the day and varies with the
/// weather, brightest by the windows on the south (y = 0) and east (x = 40) walls, and noise per
/// mote. Temperature, humidity and voltage follow the room and a slowly draining battery. About 3%
/// of readings are lost. Lines come out round by round in mote order, so not in time order, a few
/// arrive late, and, as in the real file, 8 lines are cut short before the light value (2 of them
/// before the mote id), 3 lack the voltage, 3 come from mote 60 and 2 are blank (in any trace of
/// at least 200 readings).
pub fn synthetic(seed: u64, hours: f64) -> (Vec<MoteLocation>, String) {
    let mut rng = SplitMix(seed);
    let motes: Vec<Mote> = (0..54u16).map(|i| Mote::new(i, &mut rng)).collect();
    let rounds = (hours.clamp(0.0, 960.0) * 3600.0 / ROUND_S) as u64;
    let days: Vec<Day> = (0..=rounds * 31 / 86_400 + 1).map(|d| Day::new(d as i64, &mut rng)).collect();
    let first_day = START_S.div_euclid(86_400);
    let mut lines = Vec::new();
    for round in 0..rounds {
        for m in &motes {
            if rng.unit() < LOSS {
                continue;
            }
            let t = START_S as f64 + round as f64 * ROUND_S + m.phase + rng.range(-0.5, 0.5);
            let day = t.div_euclid(86_400.0) as i64;
            let hour = t.rem_euclid(86_400.0) / 3600.0;
            let weather = &days[(day - first_day) as usize];
            // Quantised as the motes' converters quantise the real file's values (light in
            // 0.46 Lux steps, temperature in 0.0098 °C steps, voltage as 1.223 V × 1024 / code).
            let light = step(m.light(weather, hour, &mut rng), 0.46);
            let sun = weather.sun(hour);
            let warm = 0.5 - 0.5 * libm::cos(TAU * (hour - 4.0) / 24.0);
            let temperature = 18.0 + m.warmth + 2.0 * warm + 2.5 * m.window * sun + 0.03 * rng.normal();
            let temperature = step(temperature + 38.4, 0.0098) - 38.4;
            let humidity = 45.0 - 1.8 * (temperature - 18.0) + m.damp + 0.15 * rng.normal();
            let humidity = step(humidity.clamp(5.0, 95.0), 0.0405);
            let days_in = (t - START_S as f64) / 86_400.0;
            let voltage = 1252.352 / libm::round(1252.352 / (m.battery - 0.004 * days_in + 0.002 * rng.normal()));
            let mut line = stamp(t);
            let _ = write!(
                line,
                " {} {} {temperature:.4} {humidity:.4} {light:.2} {voltage:.5}",
                round + 2, // the real trace's rounds count from 2
                m.id
            );
            lines.push(line);
        }
    }
    add_quirks(&mut lines, &mut rng);
    let locations = motes.iter().map(|m| MoteLocation { mote: m.id, x: m.x, y: m.y }).collect();
    let mut text = String::with_capacity(lines.len() * 64);
    for line in &lines {
        text.push_str(line);
        text.push('\n');
    }
    (locations, text)
}

/// `v` to the nearest multiple of `size`.
fn step(v: f64, size: f64) -> f64 {
    libm::round(v / size) * size
}

/// `yyyy-mm-dd hh:mm:ss[.ffffff]`, with the fraction's trailing zeros dropped as in the real file.
pub(super) fn stamp(t: f64) -> String {
    let micros = libm::round(t * 1e6) as i64;
    let (secs, us) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    let mut out = format!("{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    if us > 0 {
        let _ = write!(out, ".{}", format!("{us:06}").trim_end_matches('0'));
    }
    out
}

/// Cuts, re-numbers and blanks distinct lines as the real file has them, and delays a few
/// lines, as a base station that forwards late would.
fn add_quirks(lines: &mut [String], rng: &mut SplitMix) {
    if lines.len() < QUIRK_ROOM {
        return;
    }
    // Late by 100 to 600 lines (by fewer in a short trace).
    let late = (lines.len() / 2).min(600);
    for _ in 0..lines.len() / 2000 + 5 {
        let i = rng.below(lines.len() - late);
        let j = i + late / 6 + rng.below(late * 5 / 6);
        lines.swap(i, j);
    }
    let mut used = Vec::new();
    let mut pick = |rng: &mut SplitMix| loop {
        let i = rng.below(lines.len());
        if !used.contains(&i) {
            used.push(i);
            return i;
        }
    };
    let picks: Vec<(usize, usize)> = [CUT_AFTER_EPOCH, CUT_AFTER_HUMIDITY, NO_VOLTAGE, FROM_MOTE_60, BLANK]
        .into_iter()
        .enumerate()
        .flat_map(|(kind, n)| (0..n).map(move |_| kind))
        .map(|kind| (kind, pick(rng)))
        .collect();
    for (kind, i) in picks {
        let fields: Vec<&str> = lines[i].split(' ').collect();
        lines[i] = match kind {
            0 => fields[..3].join(" "),
            1 => fields[..6].join(" "),
            2 => fields[..7].join(" "),
            3 => [&fields[..3], &["60"], &fields[4..]].concat().join(" "),
            _ => String::new(),
        };
    }
}

/// A made-up mote.
struct Mote {
    id: u16,
    x: f64,
    y: f64,
    /// When in the round it reports, seconds.
    phase: f64,
    /// How much daylight reaches it: 1 at a window, falling off over a few metres.
    window: f64,
    /// How much of its zone's ceiling light reaches it.
    lamp: f64,
    /// Its zone (a quarter of the floor), whose lights switch together.
    zone: usize,
    /// Light at night, Lux (exit signs, stand-by lamps, the street).
    dark: f64,
    warmth: f64,
    damp: f64,
    battery: f64,
}

impl Mote {
    /// Mote `i + 1` on a 9 × 6 grid over the floor, each moved a little, at decimetre precision.
    fn new(i: u16, rng: &mut SplitMix) -> Self {
        let deci = |v: f64| libm::round(v * 10.0) / 10.0;
        let x = deci((f64::from(i % 9) + 0.5) * 40.0 / 9.0 + rng.range(-1.2, 1.2));
        let y = deci((f64::from(i / 9) + 0.5) * 5.0 + rng.range(-1.0, 1.0));
        let to_window = y.min(40.0 - x).max(0.0);
        Self {
            id: i + 1,
            x,
            y,
            phase: rng.range(0.0, ROUND_S),
            window: libm::exp(-to_window / 4.0),
            lamp: rng.range(0.7, 1.2),
            zone: usize::from(x >= 20.0) + 2 * usize::from(y >= 15.0),
            dark: rng.range(0.3, 6.0),
            warmth: 0.7 * rng.normal(),
            damp: 2.0 * rng.normal(),
            battery: rng.range(2.62, 2.74),
        }
    }

    fn light(&self, day: &Day, hour: f64, rng: &mut SplitMix) -> f64 {
        let (on, off) = day.lights[self.zone];
        let lamps = if (on..off).contains(&hour) { 220.0 * self.lamp } else { 0.0 };
        let sun = day.sun(hour) * (330.0 * self.window + 30.0);
        let lux = (self.dark + lamps + sun) * (1.0 + 0.03 * rng.normal()) + 0.4 * rng.normal();
        lux.max(0.0)
    }
}

/// A day's weather and its lights' switching hours.
struct Day {
    /// How much of the clear-sky daylight gets through, 0.35 (overcast) to 1.
    clear: f64,
    /// Per zone, the hours the ceiling lights are on (an empty range for a day they stay off).
    lights: [(f64, f64); 4],
}

impl Day {
    /// Day `n` of the trace (day 0 is a Monday).
    fn new(n: i64, rng: &mut SplitMix) -> Self {
        let weekend = n.rem_euclid(7) >= 5;
        let clear = rng.range(0.35, 1.0);
        let lights = [(); 4].map(|()| {
            if !weekend {
                (rng.range(7.0, 9.5), rng.range(16.5, 21.0))
            } else if rng.unit() < 0.3 {
                (rng.range(10.0, 13.0), rng.range(14.0, 18.0))
            } else {
                (0.0, 0.0)
            }
        });
        Self { clear, lights }
    }

    /// Daylight from 0 to 1: up at 6:30, down at 18:30.
    fn sun(&self, hour: f64) -> f64 {
        let s = libm::sin(PI * (hour - 6.5) / 12.0);
        if s > 0.0 { self.clear * s } else { 0.0 }
    }
}

/// splitmix64: a tiny generator whose stream is fixed by its seed.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        libm::sqrt(-2.0 * libm::log(u)) * libm::cos(TAU * self.unit())
    }
}
