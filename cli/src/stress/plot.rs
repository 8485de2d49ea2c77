//! SVG plots of a stress run: throughput over time with growth events
//! marked, and latency percentiles per operation.

use super::report::StressReport;
use crate::human::{self, HumanCount};
use crate::latency::PERCENTILES;
use plotters::prelude::*;
use std::path::Path;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 860;
const OP_COLORS: [RGBColor; 3] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];
const GROWTH_COLOR: RGBColor = RGBColor(230, 120, 0);

pub fn stress(path: &Path, report: &StressReport) -> anyhow::Result<()> {
    let mut svg = String::new();
    draw(&mut svg, report).map_err(|e| anyhow::anyhow!("cannot draw the plot: {e}"))?;
    crate::output::write_file(path, svg.as_bytes())
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw(svg: &mut String, report: &StressReport) -> DrawResult {
    let root = SVGBackend::with_string(svg, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(HEIGHT * 52 / 100);
    throughput(&top, report)?;
    latency(&bottom, report)?;
    root.present()?;
    Ok(())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn throughput(area: &Area<'_>, r: &StressReport) -> DrawResult {
    let points: Vec<(f64, f64)> = r
        .timeline
        .iter()
        .map(|p| (p.t_secs, p.ops_per_sec / 1e6))
        .collect();
    let x_max = r.duration_secs.max(0.1);
    let y_max = points.iter().map(|p| p.1).fold(0.0, f64::max).max(0.001) * 1.15;
    let growth = if r.growth_events.is_empty() {
        "no growth event in this run".to_string()
    } else {
        format!("{} growth events", r.growth_events.len())
    };
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "Throughput: {} threads, mix {}, {} keys ({}); {growth}",
                r.threads,
                r.mix,
                HumanCount(r.items),
                r.keys
            ),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("million operations / s")
        .label_style(("sans-serif", 17))
        .axis_desc_style(("sans-serif", 19))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    chart
        .draw_series(LineSeries::new(points, OP_COLORS[0].stroke_width(3)))?
        .label(format!(
            "all operations (mean {}ops/s)",
            human::rate(r.ops_per_sec)
        ))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], OP_COLORS[0].stroke_width(3)));
    // Doublings seen at the same tick share one line: "gen 1-5".
    let groups = r.growth_events.chunk_by(|a, b| a.t_secs == b.t_secs);
    for (i, group) in groups.enumerate() {
        let (t, first) = (group[0].t_secs, group[0].generation);
        let last = group[group.len() - 1].generation;
        let line = chart.draw_series(std::iter::once(PathElement::new(
            vec![(t, 0.0), (t, y_max)],
            GROWTH_COLOR.stroke_width(2),
        )))?;
        if i == 0 {
            line.label("table doubled (label: new generation)")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], GROWTH_COLOR.stroke_width(2))
                });
        }
        let label = if first == last {
            format!(" gen {first}")
        } else {
            format!(" gen {first}-{last}")
        };
        // Staggered heights keep the labels of close events apart.
        let height = y_max * (0.95 - 0.07 * (i % 4) as f64);
        chart.draw_series(std::iter::once(Text::new(
            label,
            (t, height),
            ("sans-serif", 16).into_font().color(&GROWTH_COLOR),
        )))?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)
}

fn latency(area: &Area<'_>, r: &StressReport) -> DrawResult {
    let names: Vec<&str> = PERCENTILES.iter().map(|p| p.0).chain(["max"]).collect();
    let series: Vec<(&str, Vec<u64>)> = r
        .latency
        .iter()
        .map(|l| {
            let mut v: Vec<u64> = l.percentiles_ns.iter().map(|p| p.1).collect();
            v.push(l.max_ns);
            (l.op.as_str(), v)
        })
        .collect();
    let all = series.iter().flat_map(|s| s.1.iter().copied());
    let lo = all.clone().min().unwrap_or(10).max(1) as f64 / 1.5;
    let hi = all.max().unwrap_or(1000).max(2) as f64 * 1.5;
    let last = names.len() as f64 - 1.0;
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!(
                "Latency percentiles per operation (1 op in {} timed; log scale)",
                r.latency_sample_every
            ),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(50)
        .y_label_area_size(95)
        .build_cartesian_2d(-0.3..last + 0.3, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(names.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].to_string()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| human::nanos(*y as u64))
        .x_desc("percentile")
        .y_desc("latency")
        .label_style(("sans-serif", 17))
        .axis_desc_style(("sans-serif", 19))
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (i, (op, values)) in series.iter().enumerate() {
        let color = OP_COLORS[i % OP_COLORS.len()];
        let points: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .map(|(x, &v)| (x as f64, v.max(1) as f64))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(3)))?
            .label(*op)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
            });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 5, color.filled())))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)
}

/// The series' legend box, alike in both charts.
fn legend<'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(position)
        .label_font(("sans-serif", 17))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}
