//! The SVG plots of a bench run. Two chart shapes cover them all: line
//! panels ([`Lines`]) and grouped bars ([`Bars`]); each file is one or more
//! panels of a drawing.

use super::BenchResults;
use koel_cli::human::{self, HumanBytes, HumanCount};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Distinct, colour-blind-safe series colours (Okabe-Ito).
pub const COLORS: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(60, 60, 60),
    RGBColor(200, 185, 40),
];
const WINDOW_SHADE: RGBColor = RGBColor(255, 214, 153);
const FONT: &str = "sans-serif";

/// One line of a line panel.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Line colour.
    pub color: RGBColor,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Draw a dot at each point.
    pub dots: bool,
}

/// A line panel.
pub struct Lines<'a> {
    /// Panel title.
    pub title: String,
    /// X axis description (with unit).
    pub x_desc: &'a str,
    /// Y axis description (with unit).
    pub y_desc: &'a str,
    /// X range.
    pub x: std::ops::Range<f64>,
    /// Tick label of an x value.
    pub x_fmt: &'a dyn Fn(&f64) -> String,
    /// Tick label of a y value.
    pub y_fmt: &'a dyn Fn(&f64) -> String,
    /// Where the legend goes.
    pub legend: SeriesLabelPosition,
    /// Number of x ticks wanted.
    pub x_ticks: usize,
    /// Shaded x intervals (e.g. doubling windows), with their legend text.
    pub shade: Option<(&'a str, Vec<(f64, f64)>)>,
}

impl Lines<'_> {
    /// Draws the panel with y coordinates `y` (linear or log).
    fn draw<Y>(&self, area: &Area<'_>, y: Y, series: &[Series]) -> DrawResult
    where
        Y: AsRangedCoord<Value = f64>,
        Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, (FONT, 22))
            .margin(14)
            .margin_right(28)
            .x_label_area_size(52)
            .y_label_area_size(92)
            .build_cartesian_2d(self.x.clone(), y)?;
        chart
            .configure_mesh()
            .x_labels(self.x_ticks)
            .y_labels(8)
            .x_label_formatter(self.x_fmt)
            .y_label_formatter(self.y_fmt)
            .x_desc(self.x_desc)
            .y_desc(self.y_desc)
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .draw()?;
        if let Some((label, spans)) = &self.shade {
            let (y0, y1) = {
                let r = chart.y_range();
                (r.start, r.end)
            };
            let mut first = true;
            for &(a, b) in spans {
                let s = chart.draw_series(std::iter::once(Rectangle::new(
                    [(a, y0), (b, y1)],
                    WINDOW_SHADE.mix(0.55).filled(),
                )))?;
                if first {
                    s.label(*label).legend(|(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 24, y + 6)], WINDOW_SHADE.filled())
                    });
                    first = false;
                }
            }
        }
        for s in series {
            let color = s.color;
            chart
                .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(3)))?
                .label(s.name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
            if s.dots {
                chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
            }
        }
        chart
            .configure_series_labels()
            .position(self.legend.clone())
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    }

    /// Linear y from 0 to a little above the highest point.
    pub fn linear(&self, area: &Area<'_>, series: &[Series]) -> DrawResult {
        let top = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max);
        self.draw(area, 0.0..(top * 1.15).max(1e-9), series)
    }

    /// Log y spanning the points (zero and negative values are skipped).
    pub fn log(&self, area: &Area<'_>, series: &[Series]) -> DrawResult {
        let ys = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .filter(|&y| y > 0.0);
        let lo = ys.clone().fold(f64::INFINITY, f64::min);
        let hi = ys.fold(0.0, f64::max);
        let (lo, hi) = if lo.is_finite() {
            (lo / 2.0, hi * 3.0)
        } else {
            (1.0, 10.0)
        };
        self.log_within(area, series, lo, hi)
    }

    /// Log y from `lo` to `hi` (> 0), e.g. one span shared by panels.
    pub fn log_within(&self, area: &Area<'_>, series: &[Series], lo: f64, hi: f64) -> DrawResult {
        // Ticks at 1, 2 and 5 times each power of ten: plotters' log axis
        // labels only the powers, too few over a short range.
        let mut ticks = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi {
            for m in [1.0, 2.0, 5.0] {
                let t = decade * m;
                if (lo..=hi).contains(&t) {
                    ticks.push(t);
                }
            }
            decade *= 10.0;
        }
        self.draw(area, (lo..hi).log_scale().with_key_points(ticks), series)
    }
}

/// Grouped bars: one group per category, one bar per series.
pub struct Bars<'a> {
    /// Panel title.
    pub title: String,
    /// Y axis description (with unit).
    pub y_desc: &'a str,
    /// Category names, left to right.
    pub categories: Vec<String>,
    /// `(legend, colour, one value per category)`.
    pub groups: Vec<(String, RGBColor, Vec<f64>)>,
    /// Tick label of a y value.
    pub y_fmt: &'a dyn Fn(&f64) -> String,
    /// Write each bar's value above it with this formatter.
    pub value_fmt: Option<&'a dyn Fn(f64) -> String>,
}

impl Bars<'_> {
    /// Draws the bars on a linear y axis from 0.
    pub fn draw(&self, area: &Area<'_>) -> DrawResult {
        let n = self.categories.len();
        let top = self
            .groups
            .iter()
            .flat_map(|g| g.2.iter().copied())
            .fold(0.0, f64::max)
            .max(1e-9)
            // Headroom for the value labels and the legend (a line per group).
            * (1.15 + 0.05 * self.groups.len() as f64);
        let cats = &self.categories;
        let x_fmt = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < cats.len() {
                cats[i as usize].clone()
            } else {
                String::new()
            }
        };
        let mut chart = ChartBuilder::on(area)
            .caption(&self.title, (FONT, 22))
            .margin(14)
            .margin_right(28)
            .x_label_area_size(40)
            .y_label_area_size(92)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..top)?;
        chart
            .configure_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(self.y_fmt)
            .y_desc(self.y_desc)
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .disable_x_mesh()
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.08))
            .draw()?;
        let width = 0.8 / self.groups.len().max(1) as f64;
        for (j, (name, color, values)) in self.groups.iter().enumerate() {
            let color = *color;
            let left = |i: usize| i as f64 - 0.4 + j as f64 * width;
            chart
                .draw_series(values.iter().enumerate().map(|(i, &v)| {
                    Rectangle::new(
                        [(left(i) + 0.01, 0.0), (left(i) + width - 0.01, v)],
                        color.filled(),
                    )
                }))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 6), (x + 24, y + 6)], color.filled())
                });
            if let Some(fmt) = self.value_fmt {
                chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
                    Text::new(
                        fmt(v),
                        (left(i) + width / 2.0, v + top * 0.015),
                        TextStyle::from((FONT, 13).into_font()).pos(
                            plotters::style::text_anchor::Pos::new(
                                plotters::style::text_anchor::HPos::Center,
                                plotters::style::text_anchor::VPos::Bottom,
                            ),
                        ),
                    )
                }))?;
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        Ok(())
    }
}

/// Draws one SVG of `size` with `draw` and writes it to `dir/name`.
fn write_svg(
    dir: &Path,
    name: &str,
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> DrawResult,
) -> anyhow::Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)
            .map_err(|e| anyhow::anyhow!("cannot draw {name}: {e}"))?;
        draw(&root).map_err(|e| anyhow::anyhow!("cannot draw {name}: {e}"))?;
        root.present()
            .map_err(|e| anyhow::anyhow!("cannot draw {name}: {e}"))?;
    }
    let path = dir.join(name);
    koel_cli::output::write_file(&path, svg.as_bytes())?;
    Ok(name.to_string())
}

/// Millions with few digits: `12`, `3.5`, `0.25`.
pub fn millions(v: f64) -> String {
    short(v / 1e6)
}

/// A number with two or three significant digits and no trailing zeros:
/// `0`, `12`, `3.5`, `0.25`, `0.0012`.
pub fn short(v: f64) -> String {
    let a = v.abs();
    let text = if a == 0.0 {
        return "0".into();
    } else if a >= 10.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        // Two significant digits below 1.
        let decimals = (-a.log10()).floor() as usize + 2;
        format!("{v:.decimals$}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

fn percent(v: &f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// The plot files of a run, by what they show.
#[derive(Clone, Debug, Default)]
pub struct Plots {
    /// Latency percentiles of single operations.
    pub latency: String,
    /// Throughput of single and batch operations.
    pub throughput: String,
    /// Insert failures vs load.
    pub load_curve: String,
    /// Throughput and CAS retries by thread count.
    pub concurrency: String,
    /// One file per layout: memory and insert rate while growing.
    pub growth: Vec<String>,
    /// Throughput and FPR per key distribution.
    pub distributions: String,
}

/// Writes every plot of `r` into `dir`.
///
/// # Errors
///
/// A plot cannot be drawn or written.
pub fn write_all(dir: &Path, r: &BenchResults) -> anyhow::Result<Plots> {
    Ok(Plots {
        latency: write_svg(dir, "latency.svg", (1300, 620), |root| latency(root, r))?,
        throughput: write_svg(dir, "throughput.svg", (1300, 560), |root| {
            throughput(root, r)
        })?,
        load_curve: write_svg(dir, "load-curve.svg", (1100, 900), |root| {
            load_curve(root, r)
        })?,
        concurrency: write_svg(dir, "concurrency.svg", (1100, 900), |root| {
            concurrency(root, r)
        })?,
        growth: r
            .growth
            .iter()
            .map(|g| {
                let name = format!("growth-{}bit.svg", &g.layout[..2]);
                write_svg(dir, &name, (1100, 900), |root| growth(root, g))
            })
            .collect::<anyhow::Result<_>>()?,
        distributions: write_svg(dir, "distributions.svg", (1300, 960), |root| {
            distributions(root, r)
        })?,
    })
}

/// Percentiles plotted. The maximum is left to the tables: on a shared
/// machine it is one preemption of the thread (milliseconds) and would
/// squash everything else against the bottom of the axis.
const PCT_NAMES: [&str; 4] = ["p50", "p95", "p99", "p99.9"];

fn pct_points(m: &super::common::OpMeasure) -> Vec<(f64, f64)> {
    PCT_NAMES
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            let v = if name == "max" {
                m.latency.max_ns
            } else {
                m.pct(name)
            };
            (i as f64, v.max(1) as f64)
        })
        .collect()
}

fn latency(root: &Area<'_>, r: &BenchResults) -> DrawResult {
    // One span for every panel, so that the filters compare at a glance.
    let all = r
        .lookups
        .iter()
        .flat_map(|l| [&l.positive, &l.negative])
        .chain(r.inserts.iter().map(|i| &i.insert))
        .chain(r.deletes.iter().map(|d| &d.remove))
        .flat_map(|m| pct_points(m).into_iter().map(|p| p.1));
    let lo = all.clone().fold(f64::INFINITY, f64::min).max(1.0) / 1.5;
    // Headroom above the lines for the legend.
    let hi = all.fold(1.0, f64::max) * 8.0;
    let cols = 2;
    let rows = r.lookups.len().div_ceil(cols).max(1);
    let panels = root.split_evenly((rows, cols));
    for (l, area) in r.lookups.iter().zip(panels.iter()) {
        let mut series = vec![
            Series {
                name: "contains, present key".into(),
                color: COLORS[0],
                points: pct_points(&l.positive),
                dots: true,
            },
            Series {
                name: "contains, absent key".into(),
                color: COLORS[1],
                points: pct_points(&l.negative),
                dots: true,
            },
        ];
        // Inserts and removes of the same filter, where it has those rows.
        if let Some(ins) = r.inserts.iter().find(|i| i.layout == l.layout) {
            series.push(Series {
                name: "insert (to rated capacity)".into(),
                color: COLORS[2],
                points: pct_points(&ins.insert),
                dots: true,
            });
        }
        if let Some(del) = r.deletes.iter().find(|d| d.layout == l.layout) {
            series.push(Series {
                name: "remove".into(),
                color: COLORS[3],
                points: pct_points(&del.remove),
                dots: true,
            });
        }
        let x_fmt = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < PCT_NAMES.len() {
                PCT_NAMES[i as usize].to_string()
            } else {
                String::new()
            }
        };
        let x_desc = format!(
            "percentile (every call timed, incl. ~{} ns of clock reads)",
            r.clock_overhead_ns
        );
        Lines {
            title: format!("{}: latency per operation (log scale)", l.layout),
            x_desc: &x_desc,
            y_desc: "latency",
            x: -0.2..PCT_NAMES.len() as f64 - 0.8,
            x_fmt: &x_fmt,
            y_fmt: &|y| human::nanos(*y as u64),
            legend: SeriesLabelPosition::UpperLeft,
            x_ticks: PCT_NAMES.len(),
            shade: None,
        }
        .log_within(area, &series, lo, hi)?;
    }
    Ok(())
}

fn throughput(root: &Area<'_>, r: &BenchResults) -> DrawResult {
    let categories = vec![
        "contains (present)".to_string(),
        "contains (absent)".to_string(),
        "insert".to_string(),
    ];
    let mut groups = Vec::new();
    for (i, l) in r.lookups.iter().enumerate() {
        let ins = r.inserts.iter().find(|x| x.layout == l.layout);
        let insert = ins.map(|x| x.ops_per_sec).or(l.insert_ops_per_sec);
        let insert_many = ins
            .map(|x| x.batch_ops_per_sec)
            .or(l.insert_batch_ops_per_sec);
        groups.push((
            format!("{}, one call per key", l.layout),
            COLORS[2 * i % COLORS.len()],
            vec![
                l.positive.ops_per_sec,
                l.negative.ops_per_sec,
                insert.unwrap_or(0.0),
            ],
        ));
        groups.push((
            format!("{}, batch (contains_many / insert_many)", l.layout),
            COLORS[(2 * i + 1) % COLORS.len()],
            vec![
                l.positive_batch_ops_per_sec,
                l.negative_batch_ops_per_sec,
                insert_many.unwrap_or(0.0),
            ],
        ));
    }
    Bars {
        title: format!(
            "Single-thread throughput, {} items at rated capacity",
            HumanCount(r.config.items)
        ),
        y_desc: "million operations / s",
        categories,
        groups,
        y_fmt: &|y| millions(*y),
        value_fmt: Some(&|v| millions(v)),
    }
    .draw(root)
}

fn load_curve(root: &Area<'_>, r: &BenchResults) -> DrawResult {
    let (top, bottom) = root.split_vertically(450);
    let fail: Vec<Series> = r
        .load_curves
        .iter()
        .enumerate()
        .map(|(i, c)| Series {
            name: format!(
                "{}: first failure at {:.1}% load",
                c.layout,
                c.first_failure_load.unwrap_or(1.0) * 100.0
            ),
            color: COLORS[i % COLORS.len()],
            points: c
                .points
                .iter()
                .map(|p| (p.offered_load, p.step_failure_rate))
                .collect(),
            dots: false,
        })
        .collect();
    Lines {
        title: "Insert failures vs load (Growth::Fixed filter; steps of 1% of its slots, 0.25% above 90%)".into(),
        x_desc: "inserts offered, % of the table's slots",
        y_desc: "inserts failing in the step",
        x: 0.0..1.0,
        x_fmt: &percent,
        y_fmt: &percent,
        legend: SeriesLabelPosition::UpperLeft,
        x_ticks: 11,
        shade: None,
    }
    .linear(&top, &fail)?;
    // The knee, zoomed: failures and the load reached, 85-100% offered.
    let mut zoom = Vec::new();
    for (i, c) in r.load_curves.iter().enumerate() {
        let near = |p: &&super::load_curve::CurvePoint| p.offered_load >= ZOOM_FROM - 1e-9;
        zoom.push(Series {
            name: format!("{}: inserts failing in the step", c.layout),
            color: COLORS[i % COLORS.len()],
            points: c
                .points
                .iter()
                .filter(near)
                .map(|p| (p.offered_load, p.step_failure_rate))
                .collect(),
            dots: true,
        });
        zoom.push(Series {
            name: format!(
                "{}: load reached (at most {:.1}%)",
                c.layout,
                c.max_load * 100.0
            ),
            color: COLORS[(i + 2) % COLORS.len()],
            points: c
                .points
                .iter()
                .filter(near)
                .map(|p| (p.offered_load, p.load))
                .collect(),
            dots: true,
        });
    }
    Lines {
        title: format!("Zoom on the knee: {:.0}-100% offered", ZOOM_FROM * 100.0),
        x_desc: "inserts offered, % of the table's slots",
        y_desc: "% of inserts in the step / % load",
        x: ZOOM_FROM..1.0,
        x_fmt: &percent,
        y_fmt: &percent,
        legend: SeriesLabelPosition::MiddleLeft,
        x_ticks: 16,
        shade: None,
    }
    .linear(&bottom, &zoom)
}

/// Where the zoomed load-curve panel starts.
const ZOOM_FROM: f64 = 0.85;

fn concurrency(root: &Area<'_>, r: &BenchResults) -> DrawResult {
    let (top, bottom) = root.split_vertically(470);
    let mut keys: Vec<(String, String)> = Vec::new();
    for row in &r.concurrency {
        let k = (row.layout.clone(), row.mix.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let series = |value: &dyn Fn(&super::concurrency::ConcurrencyRow) -> f64| -> Vec<Series> {
        keys.iter()
            .enumerate()
            .map(|(i, (layout, mix))| Series {
                name: format!("{layout}, {mix}"),
                color: COLORS[i % COLORS.len()],
                points: r
                    .concurrency
                    .iter()
                    .filter(|x| &x.layout == layout && &x.mix == mix)
                    .map(|x| (x.threads as f64, value(x)))
                    .collect(),
                dots: true,
            })
            .collect()
    };
    let max_threads = r.config.threads.iter().copied().max().unwrap_or(1) as f64;
    let threads = r.config.threads.clone();
    let x_fmt = move |x: &f64| {
        if threads.iter().any(|&t| (t as f64 - x).abs() < 0.01) {
            format!("{}", x.round())
        } else {
            String::new()
        }
    };
    let x_ticks = (max_threads as usize * 4).max(2) + 1;
    Lines {
        title: format!(
            "Throughput by threads, one shared filter ({} cores; {} s per point)",
            r.cores,
            r.config.concurrency_duration.as_secs_f64()
        ),
        x_desc: "threads",
        y_desc: "million operations / s",
        x: 0.75..max_threads + 0.25,
        x_fmt: &x_fmt,
        y_fmt: &|y| millions(*y),
        legend: SeriesLabelPosition::LowerRight,
        x_ticks,
        shade: None,
    }
    .linear(&top, &series(&|x| x.ops_per_sec))?;
    Lines {
        title: "Bucket CAS retries per million operations".into(),
        x_desc: "threads",
        y_desc: "CAS retries / million ops",
        x: 0.75..max_threads + 0.25,
        x_fmt: &x_fmt,
        y_fmt: &|y| short(*y),
        legend: SeriesLabelPosition::UpperLeft,
        x_ticks,
        shade: None,
    }
    .linear(&bottom, &series(&|x| x.retries_per_million_ops))
}

fn growth(root: &Area<'_>, g: &super::growth::GrowthRow) -> DrawResult {
    let (top, bottom) = root.split_vertically(450);
    // Consecutive window slices merge into one shaded span.
    let mut spans: Vec<(f64, f64)> = Vec::new();
    let mut prev_end = 0.0;
    for s in &g.timeline {
        let end = s.items as f64;
        if s.in_window {
            match spans.last_mut() {
                Some(last) if (last.1 - prev_end).abs() < 0.5 => last.1 = end,
                _ => spans.push((prev_end, end)),
            }
        }
        prev_end = end;
    }
    let items = g.items as f64;
    let x_fmt = |x: &f64| {
        if items >= 1e6 {
            format!("{:.1}M", x / 1e6)
        } else {
            format!("{:.0}k", x / 1e3)
        }
    };
    let shade = Some(("doubling in progress", spans));
    let (unit, unit_bytes) = if g.memory_peak >= 4 << 20 {
        ("MiB", (1u64 << 20) as f64)
    } else {
        ("KiB", 1024.0)
    };
    let mem_desc = format!("table memory ({unit})");
    let memory = vec![Series {
        name: format!(
            "memory_usage(): peak {}, final {}",
            HumanBytes(g.memory_peak),
            HumanBytes(g.memory_final)
        ),
        color: COLORS[0],
        points: g
            .timeline
            .iter()
            .map(|s| (s.items as f64, s.memory_bytes as f64 / unit_bytes))
            .collect(),
        dots: false,
    }];
    Lines {
        title: format!(
            "{}: growing from {} to {} items ({} doublings)",
            g.layout,
            HumanCount(g.start_capacity),
            HumanCount(g.items),
            g.generations
        ),
        x_desc: "items inserted",
        y_desc: &mem_desc,
        x: 0.0..items,
        x_fmt: &x_fmt,
        y_fmt: &|y| short(*y),
        legend: SeriesLabelPosition::UpperLeft,
        x_ticks: 11,
        shade: shade.clone(),
    }
    .linear(&top, &memory)?;
    let latency = vec![
        Series {
            name: "p50 insert latency per slice".into(),
            color: COLORS[1],
            points: g
                .timeline
                .iter()
                .map(|s| (s.items as f64, s.insert_p50_ns.max(1) as f64))
                .collect(),
            dots: false,
        },
        Series {
            name: "p99 insert latency per slice".into(),
            color: COLORS[3],
            points: g
                .timeline
                .iter()
                .map(|s| (s.items as f64, s.insert_p99_ns.max(1) as f64))
                .collect(),
            dots: false,
        },
    ];
    Lines {
        title: format!(
            "Insert latency while growing (one thread, {} slices of {} inserts; log scale)",
            g.timeline.len(),
            HumanCount(g.items / g.timeline.len().max(1) as u64)
        ),
        x_desc: "items inserted",
        y_desc: "latency",
        x: 0.0..items,
        x_fmt: &x_fmt,
        y_fmt: &|y| human::nanos(*y as u64),
        legend: SeriesLabelPosition::UpperRight,
        x_ticks: 11,
        shade,
    }
    .log(&bottom, &latency)
}

fn distributions(root: &Area<'_>, r: &BenchResults) -> DrawResult {
    let (top, bottom) = root.split_vertically(500);
    let categories: Vec<String> = r.distributions.iter().map(|d| d.name.clone()).collect();
    Bars {
        title: "Throughput by key distribution (16-bit x 4, one thread)".into(),
        y_desc: "million operations / s",
        categories: categories.clone(),
        groups: vec![
            (
                "insert_unique".into(),
                COLORS[0],
                r.distributions
                    .iter()
                    .map(|d| d.insert_unique_ops_per_sec)
                    .collect(),
            ),
            (
                "contains (stream keys)".into(),
                COLORS[2],
                r.distributions
                    .iter()
                    .map(|d| d.lookup.ops_per_sec)
                    .collect(),
            ),
        ],
        y_fmt: &|y| millions(*y),
        value_fmt: Some(&|v| millions(v)),
    }
    .draw(&top)?;
    Bars {
        title: "False-positive rate: measured vs the filter's estimate (at each filter's load)"
            .into(),
        y_desc: "false positives per 10,000 lookups",
        categories,
        groups: vec![
            (
                "measured".into(),
                COLORS[1],
                r.distributions
                    .iter()
                    .map(|d| d.fpr.measured * 1e4)
                    .collect(),
            ),
            (
                "estimate".into(),
                COLORS[4],
                r.distributions
                    .iter()
                    .map(|d| d.fpr.estimate * 1e4)
                    .collect(),
            ),
        ],
        y_fmt: &|y| format!("{y:.2}"),
        value_fmt: Some(&|v| format!("{v:.2}")),
    }
    .draw(&bottom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers_keep_two_significant_digits_and_no_trailing_zeros() {
        assert_eq!(short(0.0), "0");
        assert_eq!(short(12.4), "12");
        assert_eq!(short(3.5), "3.5");
        assert_eq!(short(2.0), "2");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(0.0012), "0.0012");
        assert_eq!(millions(30e6), "30");
    }
}
