//! Charts as SVG (plotters, with the DejaVu font embedded so no system font is needed): line
//! charts of series against a shared x axis, and bar charts of labelled values, each with a
//! logarithmic axis where the values span decades.

use std::sync::Once;

use plotters::prelude::*;

fn register_font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // The embedded font is valid; registration cannot fail for it.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// One bar of a [`bar_chart`].
#[derive(Clone, Debug)]
pub struct Bar {
    /// What the bar is (drawn beside it).
    pub label: String,
    /// Its length.
    pub value: f64,
    /// Bars of one group share a colour (one policy across a sweep, say).
    pub group: usize,
}

/// A horizontal bar chart, one bar per entry from the top down, as an SVG document. On a
/// logarithmic axis (for values that span decades, where a linear axis leaves the small ones
/// slivers) bars at or below zero are left out; they have no place on it.
pub fn bar_chart(title: &str, value_label: &str, bars: &[Bar], log: bool) -> Result<String, String> {
    register_font();
    let shown = |b: &Bar| b.value.is_finite() && (!log || b.value > 0.0);
    let lo = bars.iter().filter(|b| shown(b)).map(|b| b.value).fold(f64::INFINITY, f64::min);
    let hi = bars.iter().filter(|b| shown(b)).map(|b| b.value).fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (1.0, 10.0) };
    let mut svg = String::new();
    let height = 90 + 22 * bars.len().max(1) as u32;
    {
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let n = bars.len() as u32;
        let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
        let fmt = |v: &f64| tick(*v);
        // Bar k from the top sits in segment n - 1 - k: plotters counts segments from the bottom.
        let label = |v: &SegmentValue<u32>| match v {
            // plotters also asks for the segment past the last; it has no label.
            SegmentValue::CenterOf(i) => {
                n.checked_sub(1 + *i).and_then(|k| labels.get(k as usize).cloned()).unwrap_or_default()
            }
            _ => String::new(),
        };
        macro_rules! draw {
            ($x:expr, $base:expr) => {{
                let mut chart = ChartBuilder::on(&root)
                    .caption(title, ("sans-serif", 18))
                    .margin(10)
                    .x_label_area_size(40)
                    .y_label_area_size(300)
                    .build_cartesian_2d($x, (0u32..n).into_segmented())
                    .map_err(|e| e.to_string())?;
                chart
                    .configure_mesh()
                    .disable_y_mesh()
                    .x_desc(value_label)
                    .x_label_formatter(&fmt)
                    .y_labels(bars.len())
                    .y_label_formatter(&label)
                    .draw()
                    .map_err(|e| e.to_string())?;
                // Bars drawn one by one in order: plotters' `Histogram` gathers its data in a
                // `HashMap`, and drew them in a different order on every run, so the same runs
                // made SVG files that differed byte for byte.
                let rows_axis = chart.as_coord_spec().y_spec().clone();
                let rects: Vec<Rectangle<(f64, SegmentValue<u32>)>> = bars
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| shown(b))
                    .filter_map(|(i, b)| {
                        let k = n.saturating_sub(1 + i as u32) as usize;
                        let (from, to) = (rows_axis.from_index(k)?, rows_axis.from_index(k + 1)?);
                        let color = Palette99::pick(b.group).to_rgba();
                        let mut bar = Rectangle::new([(b.value, from), ($base, to)], color.filled());
                        bar.set_margin(3, 3, 0, 0);
                        Some(bar)
                    })
                    .collect();
                chart.draw_series(rects).map_err(|e| e.to_string())?;
            }};
        }
        if log {
            let base = lo / 1.5;
            draw!((base..hi * 1.5).log_scale(), base);
        } else {
            draw!(0.0f64.min(lo)..hi.max(f64::MIN_POSITIVE) * 1.1, 0.0);
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// One named series of points for [`line_chart`].
#[derive(Clone, Debug)]
pub struct Series {
    /// The legend's name for it.
    pub name: String,
    /// (x, y) points, drawn in order.
    pub points: Vec<(f64, f64)>,
    /// How it is drawn.
    pub style: Style,
}

/// How a [`Series`] is drawn: what it is tells the reader how to read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A measure: a line through marked points.
    Measured,
    /// A model: a dashed line, no markers.
    Model,
    /// Published figures: crosses, no line (nothing is known between them).
    Published,
}

/// Which axes of a [`line_chart_with`] are logarithmic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Axes {
    /// A logarithmic x axis (message sizes, rates over decades).
    pub log_x: bool,
    /// A logarithmic y axis (tail latencies, where 66 µs and 1,153 µs must both be seen).
    pub log_y: bool,
}

/// A line chart of `series` against a shared x axis, as an SVG document.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> Result<String, String> {
    line_chart_with(title, x_label, y_label, series, Axes::default())
}

/// A tick label a person reads: no trailing `.0`, thousands grouped, small values to three
/// significant figures (not `50000.0`).
pub fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e7).contains(&a) {
        format!("{v:.1e}")
    } else if (v - v.round()).abs() < 1e-9 * a.max(1.0) {
        let digits = format!("{}", v.round().abs() as u64);
        let mut grouped = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(ch);
        }
        if v < 0.0 { format!("-{grouped}") } else { grouped }
    } else {
        let places = (2 - libm::log10(a).floor() as i32).clamp(0, 6) as usize;
        let t = format!("{v:.places$}");
        if t.contains('.') { t.trim_end_matches('0').trim_end_matches('.').to_string() } else { t }
    }
}

/// [`line_chart`] with a choice of logarithmic axes. On a log axis, points at or below zero are
/// left out (they have no place on it).
pub fn line_chart_with(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    axes: Axes,
) -> Result<String, String> {
    register_font();
    let keep =
        |p: &(f64, f64)| p.0.is_finite() && p.1.is_finite() && (!axes.log_x || p.0 > 0.0) && (!axes.log_y || p.1 > 0.0);
    let all = || series.iter().flat_map(|s| s.points.iter().copied()).filter(keep);
    let (x_lo, x_hi) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let (y_lo, y_hi) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    let (x_lo, x_hi) = if x_lo.is_finite() { (x_lo, x_hi) } else { (1.0, 10.0) };
    let (y_lo, y_hi) = if y_lo.is_finite() { (y_lo, y_hi) } else { (1.0, 10.0) };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 460)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let builder = || {
            let mut b = ChartBuilder::on(&root);
            b.caption(title, ("sans-serif", 18)).margin(12).x_label_area_size(40).y_label_area_size(70);
            b
        };
        let fmt = |v: &f64| tick(*v);
        // Each combination of axes is a different coordinate type in plotters; the drawing is
        // the same for all four.
        macro_rules! draw {
            ($x:expr, $y:expr) => {{
                let mut chart = builder().build_cartesian_2d($x, $y).map_err(|e| e.to_string())?;
                chart
                    .configure_mesh()
                    .x_desc(x_label)
                    .y_desc(y_label)
                    .x_label_formatter(&fmt)
                    .y_label_formatter(&fmt)
                    .draw()
                    .map_err(|e| e.to_string())?;
                for (i, s) in series.iter().enumerate() {
                    let color = Palette99::pick(i).to_rgba();
                    let points: Vec<(f64, f64)> = s.points.iter().copied().filter(keep).collect();
                    let drawn = match s.style {
                        Style::Model => chart.draw_series(DashedLineSeries::new(points, 6, 4, color.stroke_width(2))),
                        Style::Measured => {
                            chart.draw_series(LineSeries::new(points, color.stroke_width(2)).point_size(3))
                        }
                        Style::Published => {
                            chart.draw_series(points.into_iter().map(|p| Cross::new(p, 7, color.stroke_width(3))))
                        }
                    };
                    drawn
                        .map_err(|e| e.to_string())?
                        .label(s.name.clone())
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                }
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK)
                    .position(SeriesLabelPosition::UpperLeft)
                    .draw()
                    .map_err(|e| e.to_string())?;
            }};
        }
        let lin = |lo: f64, hi: f64| 0.0f64.min(lo)..(hi.max(f64::MIN_POSITIVE) * 1.08);
        let log = |lo: f64, hi: f64| (lo / 1.5)..(hi * 1.5);
        match (axes.log_x, axes.log_y) {
            (false, false) => draw!(lin(x_lo, x_hi), lin(y_lo, y_hi)),
            (true, false) => draw!(log(x_lo, x_hi).log_scale(), lin(y_lo, y_hi)),
            (false, true) => draw!(lin(x_lo, x_hi), log(y_lo, y_hi).log_scale()),
            (true, true) => draw!(log(x_lo, x_hi).log_scale(), log(y_lo, y_hi).log_scale()),
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_chart_names_every_series_and_draws_published_points_alone() {
        let series = [
            Series { name: "measured".into(), points: vec![(1.0, 2.0), (2.0, 3.0)], style: Style::Measured },
            Series { name: "model".into(), points: vec![(1.0, 1.0), (2.0, 4.0)], style: Style::Model },
            Series { name: "published".into(), points: vec![(1.5, f64::NAN), (2.0, 5.0)], style: Style::Published },
        ];
        let svg = line_chart("t", "x", "y", &series).unwrap();
        for name in ["measured", "model", "published", "t"] {
            assert!(svg.contains(name), "{name} missing");
        }
        // A marked line has circles; a dashed model and crosses add paths but no circles.
        assert_eq!(svg.matches("<circle").count(), 2, "{svg}");
    }

    #[test]
    fn a_log_bar_chart_draws_bars_that_span_decades_and_leaves_out_zero() {
        let bar = |label: &str, value: f64| Bar { label: label.into(), value, group: 0 };
        let bars = [bar("small", 66.0), bar("large", 1153.0), bar("none", 0.0)];
        let log = bar_chart("p99", "µs", &bars, true).unwrap();
        let linear = bar_chart("p99", "µs", &bars, false).unwrap();
        for svg in [&log, &linear] {
            assert!(svg.contains("small") && svg.contains("large") && svg.contains("none"), "{svg}");
        }
        // The zero bar has no place on a log axis; on a linear one it is an empty rectangle.
        assert_eq!(log.matches("<rect").count() + 1, linear.matches("<rect").count());
    }
}

#[cfg(test)]
mod tick_tests {
    use super::tick;

    #[test]
    fn ticks_read_as_a_person_writes_them() {
        assert_eq!(tick(50_000.0), "50,000");
        assert_eq!(tick(1153.0), "1,153");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(66.5), "66.5");
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(-2000.0), "-2,000");
        assert_eq!(tick(2.5e9), "2.5e9");
    }
}
