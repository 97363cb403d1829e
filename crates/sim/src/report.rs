//! Reports: SVG bar charts of the runs (plotters, with the DejaVu font embedded so no system font
//! is needed), and one self-contained HTML page with the charts inline, the table of runs, and
//! the published figures beside ours.

use std::fmt::Write as _;
use std::sync::Once;

use plotters::prelude::*;

use crate::scenario::Comparison;
use crate::summary::RunSummary;

/// The metrics a report plots: (field, title).
pub const PLOTTED: &[(&str, &str)] = &[
    ("units_per_s", "throughput (units/s)"),
    ("offered_gbps", "offered throughput (Gbit/s)"),
    ("utilisation_spread", "utilisation spread (max − min)"),
    ("busy_max_over_mean", "busy time, max / mean"),
    ("migrations", "flow migrations"),
    ("out_of_order", "out-of-order departures"),
    ("latency_p99_us", "99th-percentile latency (µs)"),
];

fn value(r: &RunSummary, field: &str) -> f64 {
    match field {
        "units_per_s" => r.units_per_s,
        "offered_gbps" => r.offered_gbps,
        "utilisation_spread" => r.utilisation_spread,
        "busy_max_over_mean" => r.busy_max_over_mean,
        "migrations" => r.migrations as f64,
        "out_of_order" => r.out_of_order as f64,
        "latency_p99_us" => r.latency_p99_us,
        _ => 0.0,
    }
}

fn register_font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // The embedded font is valid; registration cannot fail for it.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    });
}

/// A horizontal bar chart of `field` over the runs, as an SVG document.
pub fn bar_chart(rows: &[RunSummary], field: &str, title: &str) -> Result<String, String> {
    register_font();
    let mut svg = String::new();
    let height = 80 + 22 * rows.len().max(1) as u32;
    {
        let root = SVGBackend::with_string(&mut svg, (760, height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let top = rows.iter().map(|r| value(r, field)).fold(0.0, f64::max).max(f64::MIN_POSITIVE) * 1.1;
        let n = rows.len() as u32;
        let labels: Vec<String> = rows.iter().map(RunSummary::label).collect();
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(260)
            .build_cartesian_2d(0.0..top, (0u32..n).into_segmented())
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows.len())
            // Row 0 at the top: bars are drawn from the bottom, so index from the end.
            .y_label_formatter(&|v| match v {
                // plotters also asks for the segment past the last; it has no label.
                SegmentValue::CenterOf(i) => {
                    n.checked_sub(1 + *i).and_then(|k| labels.get(k as usize).cloned()).unwrap_or_default()
                }
                _ => String::new(),
            })
            .draw()
            .map_err(|e| e.to_string())?;
        // Bars drawn one by one in row order: plotters' `Histogram` gathers its data in a
        // `HashMap`, and drew them in a different order on every run, so the same runs made
        // SVG files that differed byte for byte.
        let rows_axis = chart.as_coord_spec().y_spec().clone();
        let bars: Vec<Rectangle<(f64, SegmentValue<u32>)>> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let k = n.saturating_sub(1 + i as u32) as usize;
                let (from, to) = (rows_axis.from_index(k)?, rows_axis.from_index(k + 1)?);
                let mut bar = Rectangle::new([(value(r, field), from), (0.0, to)], RGBColor(70, 110, 170).filled());
                bar.set_margin(3, 3, 0, 0);
                Some(bar)
            })
            .collect();
        chart.draw_series(bars).map_err(|e| e.to_string())?;
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The HTML report: title, published comparisons, charts and the table of runs, in one file.
pub fn html(title: &str, rows: &[RunSummary], comparisons: &[Comparison]) -> Result<String, String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title><style>\
         body{{font-family:sans-serif;max-width:1000px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}}\
         td:first-child,th:first-child{{text-align:left}}.why{{color:#555;font-size:13px}}</style></head><body>\
         <h1>{t}</h1><p>{n} runs. Generated by <code>switchyard</code>; the same scenario and seed give the same report.</p>",
        t = escape(title),
        n = rows.len()
    );
    if !comparisons.is_empty() {
        h.push_str("<h2>Published beside ours</h2><table><tr><th>claim</th><th>source</th><th>published</th><th>ours</th><th>difference</th></tr>");
        for c in comparisons {
            let p = &c.published;
            let (ours, diff) = match &c.ours {
                Ok(o) => (format!("{o:.3}"), c.difference_text()),
                Err(e) => (escape(e), String::new()),
            };
            let _ = write!(
                h,
                "<tr><td>{}<div class=\"why\">{}</div></td><td>{}</td><td>{:.3}</td><td>{ours}</td><td>{diff}</td></tr>",
                escape(&p.claim),
                escape(&p.explain),
                escape(&p.source),
                p.value
            );
        }
        h.push_str("</table>");
    }
    h.push_str("<h2>Runs</h2>");
    for (field, title) in PLOTTED {
        h.push_str(&bar_chart(rows, field, title)?);
    }
    h.push_str("<table><tr><th>run</th><th>units/s</th><th>Gbit/s</th><th>util</th><th>util spread</th><th>busy max/mean</th><th>migrations</th><th>out of order</th><th>p50 µs</th><th>p99 µs</th></tr>");
    for r in rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{:.0}</td><td>{:.3}</td><td>{:.2}</td><td>{:.2}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td></tr>",
            escape(&r.label()),
            r.units_per_s,
            r.offered_gbps,
            r.utilisation_mean,
            r.utilisation_spread,
            r.busy_max_over_mean,
            r.migrations,
            r.out_of_order,
            r.latency_p50_us,
            r.latency_p99_us
        );
    }
    h.push_str("</table></body></html>\n");
    Ok(h)
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
