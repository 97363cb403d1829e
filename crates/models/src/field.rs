//! The sensor field: where the locations and base stations are, which locations neighbour
//! which, and how the true values change (Yates §5.3–5.4; notes 000 §3.8, §4.2–4.3).

use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use switchyard_core::cache::{Neighbourhood, Neighbours, Point, Rule, neighbours};

/// σ of the independent and correlated change models: Yates set it equal to the standard
/// deviation of the end-to-end delay in no-cache runs, so that delay and deviation weigh alike.
pub const YATES_SIGMA: f64 = 0.407514;

/// How a synthetic field's values change.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChangeModel {
    /// Each change draws a fresh value from N(0, σ), truncated at ±6σ.
    Independent,
    /// Jindal and Psounis's space–time correlation (Yates §5.3): the new value is drawn from
    /// N(m, σ) with `m = (μ + v_l + v̄_N(l)) / 3`, μ = 0 the long-term mean, v_l the location's
    /// present value and v̄_N(l) its neighbours' present values weighted by inverse distance.
    /// The thesis's μ_{l,t} "may be the previous mean or the previous value" (notes 000 §3.8):
    /// we take the value, which makes the field an autoregressive process whose values, not
    /// only their means, are correlated in space.
    Correlated,
}

/// Where base stations stand on the 1,000-location lattice: the thesis says only "four, on the
/// X–Y plane" (notes 000 §4.3). The choice sets the cost unit (p makes the cheapest message
/// cost 1), so it scales every cost; hit ratios and delays hardly move.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Stations {
    /// The centres of the four quadrants of the lattice's z = 0 face.
    #[default]
    Quadrants,
    /// The four corners of the z = 0 face, one lattice step outside it.
    Corners,
}

/// A trace of readings: positions, and (time, location, value) in time order.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// Each location's (x, y), in metres.
    pub positions: Vec<(f64, f64)>,
    /// Readings: seconds from the trace's start, the location, the value.
    pub readings: Vec<(f64, u32, f64)>,
}

/// What field to simulate.
#[derive(Clone, Debug)]
pub enum FieldSpec {
    /// Yates's synthetic 10 × 10 × 10 lattice (spacing 8, 6, 4), changing `rate` locations a
    /// second, in sequence.
    Lattice {
        /// How values change.
        model: ChangeModel,
        /// Changes a second (9, 90 or 900 in the thesis).
        rate: f64,
        /// Where the base stations stand.
        stations: Stations,
        /// Which locations neighbour which; `None`: the (up to) six sharing a face.
        rule: Option<Rule>,
    },
    /// A trace (the Intel lab's light readings), replayed in a loop if the run outlasts it.
    /// Base stations stand at the corners of the locations' bounding box grown by a tenth of
    /// its size on every side: "the corners of the lab" (notes 000 §4.2), which is larger than
    /// the motes' box; without the margin a mote near a corner makes the cheapest message
    /// nearly free and every cost, in its units, huge.
    Trace {
        /// The readings.
        trace: Trace,
        /// The neighbourhood rule.
        rule: Rule,
    },
}

/// The field as a model runs it: the simulator's gateway model, and the field emulator that
/// `switchyard field` serves in real time.
pub struct Field {
    points: Vec<Point>,
    stations: Vec<Point>,
    neighbours: Neighbours,
    /// The true values now.
    values: Vec<f64>,
    changes: Changes,
}

enum Changes {
    Synthetic { model: ChangeModel, period_s: f64, next: usize, normal: Normal<f64> },
    Trace { readings: Vec<(f64, u32, f64)>, span_s: f64, next: usize, lap: u64 },
}

const DIMS: [usize; 3] = [10, 10, 10];
const SPACING: [f64; 3] = [8.0, 6.0, 4.0];

fn truncated(normal: &Normal<f64>, mean: f64, rng: &mut ChaCha8Rng) -> f64 {
    loop {
        let v = normal.sample(rng);
        if (v - mean).abs() <= 6.0 * YATES_SIGMA {
            return v;
        }
    }
}

impl Field {
    /// The field `spec` describes, its first values drawn from `rng`.
    pub fn new(spec: &FieldSpec, rng: &mut ChaCha8Rng) -> Result<Self, String> {
        match spec {
            FieldSpec::Lattice { model, rate, stations, rule } => {
                if !(rate.is_finite() && *rate > 0.0) {
                    return Err(format!("change rate {rate}: give a positive number of changes a second"));
                }
                let points = neighbours::lattice(DIMS, SPACING);
                let (x, y) = (SPACING[0] * (DIMS[0] - 1) as f64, SPACING[1] * (DIMS[1] - 1) as f64);
                let stations = match stations {
                    Stations::Quadrants => [(0.25, 0.25), (0.75, 0.25), (0.25, 0.75), (0.75, 0.75)]
                        .map(|(fx, fy)| [fx * x, fy * y, 0.0])
                        .to_vec(),
                    Stations::Corners => {
                        let (dx, dy) = (SPACING[0], SPACING[1]);
                        vec![[-dx, -dy, 0.0], [x + dx, -dy, 0.0], [-dx, y + dy, 0.0], [x + dx, y + dy, 0.0]]
                    }
                };
                let neighbours = Neighbours::new(&points, rule.unwrap_or(Rule::Lattice { dims: DIMS }));
                let normal = Normal::new(0.0, YATES_SIGMA).expect("σ is positive");
                let values = (0..points.len()).map(|_| truncated(&normal, 0.0, rng)).collect();
                Ok(Self {
                    points,
                    stations,
                    neighbours,
                    values,
                    changes: Changes::Synthetic { model: *model, period_s: 1.0 / rate, next: 0, normal },
                })
            }
            FieldSpec::Trace { trace, rule } => {
                let n = trace.positions.len();
                if n < 2 {
                    return Err(format!("the trace has {n} locations; a field needs at least two"));
                }
                if let Some(&(t, l, _)) = trace.readings.iter().find(|r| r.1 as usize >= n) {
                    return Err(format!(
                        "a reading at {t} s is of location {l}, but the trace has locations 0 to {}",
                        n - 1
                    ));
                }
                if trace.readings.is_empty() {
                    return Err("the trace has no readings".into());
                }
                let points: Vec<Point> = trace.positions.iter().map(|&(x, y)| [x, y, 0.0]).collect();
                let (lo, hi) = points.iter().fold(([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]), |(lo, hi), p| {
                    ([lo[0].min(p[0]), lo[1].min(p[1])], [hi[0].max(p[0]), hi[1].max(p[1])])
                });
                let margin = [0.1 * (hi[0] - lo[0]), 0.1 * (hi[1] - lo[1])];
                let (lo, hi) = ([lo[0] - margin[0], lo[1] - margin[1]], [hi[0] + margin[0], hi[1] + margin[1]]);
                let stations = vec![[lo[0], lo[1], 0.0], [hi[0], lo[1], 0.0], [lo[0], hi[1], 0.0], [hi[0], hi[1], 0.0]];
                // Each location starts at its first reading (a location never read stays 0).
                let mut values = vec![f64::NAN; n];
                for &(_, l, v) in &trace.readings {
                    if let Some(slot) = values.get_mut(l as usize).filter(|s| s.is_nan()) {
                        *slot = v;
                    }
                }
                values.iter_mut().filter(|v| v.is_nan()).for_each(|v| *v = 0.0);
                let first = trace.readings[0].0;
                let last = trace.readings[trace.readings.len() - 1].0;
                // A lap is the trace's span and a little more (a mean gap's worth, and a
                // second), so the loop does not put two readings at one instant.
                let span_s = (last - first) * (1.0 + 1.0 / trace.readings.len() as f64) + 1.0;
                let readings = trace.readings.iter().map(|&(t, l, v)| (t - first, l, v)).collect();
                Ok(Self {
                    neighbours: Neighbours::new(&points, *rule),
                    points,
                    stations,
                    values,
                    changes: Changes::Trace { readings, span_s, next: 0, lap: 0 },
                })
            }
        }
    }

    /// When the next change happens, in seconds from the start.
    pub fn next_change_s(&self) -> f64 {
        match &self.changes {
            Changes::Synthetic { period_s, next, .. } => *next as f64 * period_s,
            Changes::Trace { readings, span_s, next, lap } => *lap as f64 * span_s + readings[*next].0,
        }
    }

    /// Makes the next change.
    pub fn change(&mut self, rng: &mut ChaCha8Rng) {
        match &mut self.changes {
            Changes::Synthetic { model, next, normal, .. } => {
                let l = *next % self.values.len();
                *next += 1;
                self.values[l] = match model {
                    ChangeModel::Independent => truncated(normal, 0.0, rng),
                    ChangeModel::Correlated => {
                        let (sum, weights) = self
                            .neighbours
                            .of(&(l as u32))
                            .iter()
                            .fold((0.0, 0.0), |(s, w), &(n, d)| (s + self.values[n as usize] / d, w + 1.0 / d));
                        let around = if weights > 0.0 { sum / weights } else { 0.0 };
                        let mean = (0.0 + self.values[l] + around) / 3.0;
                        mean + truncated(normal, 0.0, rng)
                    }
                };
            }
            Changes::Trace { readings, next, lap, .. } => {
                let (_, l, v) = readings[*next];
                self.values[l as usize] = v;
                *next += 1;
                if *next == readings.len() {
                    *next = 0;
                    *lap += 1;
                }
            }
        }
    }
}

impl Field {
    /// The locations' coordinates.
    pub fn points(&self) -> &[Point] {
        &self.points
    }

    /// The base stations' coordinates.
    pub fn stations(&self) -> &[Point] {
        &self.stations
    }

    /// Which locations neighbour which.
    pub fn neighbours(&self) -> &Neighbours {
        &self.neighbours
    }

    /// The true values now.
    pub fn values(&self) -> &[f64] {
        &self.values
    }
}
