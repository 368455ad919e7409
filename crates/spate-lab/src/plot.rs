//! Plots of simulator runs, SVG or PNG (plotters).
//!
//! Text in PNGs is drawn with DejaVu Sans embedded in the binary (the `dejavu` crate), so plots
//! render identically on a machine without any system fonts. SVGs name the font and leave
//! rendering to the viewer.
//!
//! The run plot has two panels sharing the time axis: goodput (all flows, and each flow when
//! there are several) against capacity, on a log scale when capacity spans more than a factor of
//! 20 (a 100 Mbit/s → 10 Gbit/s handover would otherwise flatten the first phase); and mean and
//! maximum queueing delay at the bottleneck.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, bail, Result};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use spate_sim::{Report, TimeSeries};

const WIDTH: u32 = 1200;
const HEIGHT: u32 = 800;
const FLOW_COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
];

/// Fail early, before a long run, on a plot file name we cannot write.
pub fn check_extension(p: &Path) -> Result<()> {
    match p.extension().and_then(|e| e.to_str()) {
        Some("svg") | Some("png") => Ok(()),
        _ => bail!("plot file {} must end in .svg or .png", p.display()),
    }
}

fn register_fonts() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The embedded font is a valid TrueType file; failure would be a packaging bug, and
        // text would then be missing rather than the program failing.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
    });
}

/// Write the run plot of a simulator run to `path` (.svg or .png).
pub fn sim_plot(path: &Path, r: &Report, s: &TimeSeries) -> Result<()> {
    let labels: Vec<String> = r
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| match f.protocol.as_str() {
            "spate" => format!("flow {i} (spate {})", f.policy),
            p => format!("flow {i} ({p})"),
        })
        .collect();
    run_plot(
        path,
        &format!("{} (seed {})", r.scenario, r.seed),
        s,
        &labels,
    )
}

/// Write the run plot of a time series to `path`; `labels` name the flows.
pub fn run_plot(path: &Path, title: &str, s: &TimeSeries, labels: &[String]) -> Result<()> {
    let flows = s.rows.first().map_or(0, |r| r.flow_goodput_mbps.len());
    let mut lines = vec![(
        "goodput (all flows)".to_owned(),
        s.rows.iter().map(|r| (r.t_s, r.goodput_mbps)).collect(),
    )];
    if flows > 1 {
        for i in 0..flows {
            lines.push((
                labels
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| format!("flow {i}")),
                s.rows
                    .iter()
                    .map(|r| (r.t_s, r.flow_goodput_mbps[i]))
                    .collect(),
            ));
        }
    }
    let queue = vec![
        (
            "max".to_owned(),
            s.rows
                .iter()
                .map(|r| (r.t_s, r.queue_delay_ms_max))
                .collect(),
        ),
        (
            "mean".to_owned(),
            s.rows
                .iter()
                .map(|r| (r.t_s, r.queue_delay_ms_mean))
                .collect(),
        ),
    ];
    let competitive = (0..flows)
        .filter_map(|i| {
            let spans = spans(s, |r| r.flow_competitive.get(i).is_some_and(|&c| c >= 0.5));
            let name = labels
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("flow {i}"));
            (!spans.is_empty()).then(|| (format!("{name} competitive"), i, spans))
        })
        .collect();
    let figure = Figure {
        title: title.to_owned(),
        t_max: s.rows.last().map_or(1.0, |r| r.t_s + s.bin_s).max(s.bin_s),
        capacity: s.rows.iter().map(|r| (r.t_s, r.capacity_mbps)).collect(),
        goodput: lines,
        queue,
        competitive,
    };
    figure.write(path)
}

/// The [start, end) time spans of the rows where `on` holds.
fn spans(s: &TimeSeries, on: impl Fn(&spate_sim::report::SeriesRow) -> bool) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for r in s.rows.iter().filter(|r| on(r)) {
        match out.last_mut() {
            Some(last) if (last.1 - r.t_s).abs() < s.bin_s / 2.0 => last.1 = r.t_s + s.bin_s,
            _ => out.push((r.t_s, r.t_s + s.bin_s)),
        }
    }
    out
}

/// A two-panel figure over time: goodput lines against capacity, and queueing delay lines.
pub struct Figure {
    /// Title.
    pub title: String,
    /// End of the time axis, seconds.
    pub t_max: f64,
    /// Capacity, Mbit/s, over time.
    pub capacity: Vec<(f64, f64)>,
    /// Named goodput lines, Mbit/s (the first is drawn thicker).
    pub goodput: Vec<(String, Vec<(f64, f64)>)>,
    /// Named queueing-delay lines, ms (the last is drawn thicker).
    pub queue: Vec<(String, Vec<(f64, f64)>)>,
    /// Spans during which a flow's rate controller competed with buffer-filling traffic:
    /// (legend, index of the flow's goodput line after the total, [start, end) seconds),
    /// drawn as a band in the flow's colour along the bottom of the goodput panel.
    pub competitive: Vec<Band>,
}

/// A flow's mode band: legend, index of the flow, [start, end) spans in seconds.
pub type Band = (String, usize, Vec<(f64, f64)>);

impl Figure {
    /// Write to `path` (.svg or .png).
    pub fn write(&self, path: &Path) -> Result<()> {
        check_extension(path)?;
        register_fonts();
        let res = if path.extension().and_then(|e| e.to_str()) == Some("svg") {
            let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(root).map_err(|e| anyhow!("{e:?}"))
        } else {
            let root = BitMapBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
            self.draw(root).map_err(|e| anyhow!("{e:?}"))
        };
        res.map_err(|e| anyhow!("cannot draw plot {}: {e}", path.display()))
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let root = root.titled(&self.title, ("sans-serif", 24))?;
        let (top, bottom) = root.split_vertically(HEIGHT * 62 / 100);
        let t_max = self.t_max;
        let values = || self.capacity.iter().map(|p| p.1);
        let cap_max = values().fold(0.0, f64::max).max(1e-3);
        let cap_min = values().fold(f64::MAX, f64::min).max(1e-3);
        let top_max = self
            .goodput
            .iter()
            .flat_map(|l| l.1.iter().map(|p| p.1))
            .fold(cap_max, f64::max);
        let mut series: Vec<Line> = vec![(
            "capacity".into(),
            BLACK.stroke_width(2),
            self.capacity.clone(),
        )];
        for (i, (name, pts)) in self.goodput.iter().enumerate() {
            let total = self.goodput.len() == 1 || (i == 0 && name.starts_with("goodput"));
            let style = if total {
                RGBColor(0xd6, 0x27, 0x28).stroke_width(2)
            } else {
                FLOW_COLORS[i % FLOW_COLORS.len()].stroke_width(2)
            };
            series.push((name.clone(), style, pts.clone()));
        }
        if cap_max / cap_min > 20.0 {
            let lo = (cap_min / 10.0).max(1e-3);
            let mut c = ChartBuilder::on(&top)
                .margin(12)
                .x_label_area_size(30)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..t_max, (lo..top_max * 1.5).log_scale())?;
            c.configure_mesh()
                .y_desc("Mbit/s (log)")
                .x_desc("time (s)")
                .draw()?;
            draw_lines(&mut c, series, lo)?;
        } else {
            let mut c = ChartBuilder::on(&top)
                .margin(12)
                .x_label_area_size(30)
                .y_label_area_size(70)
                .build_cartesian_2d(0.0..t_max, 0.0..top_max * 1.15)?;
            c.configure_mesh()
                .y_desc("Mbit/s")
                .x_desc("time (s)")
                .draw()?;
            let band = top_max * 1.15 * 0.025;
            for (k, (name, flow, spans)) in self.competitive.iter().enumerate() {
                // The flow's line is goodput[flow + 1] (after the total).
                let color = FLOW_COLORS[(flow + 1) % FLOW_COLORS.len()].mix(0.45);
                let (y0, y1) = (band * k as f64, band * (k as f64 + 1.0));
                c.draw_series(
                    spans
                        .iter()
                        .map(|&(a, b)| Rectangle::new([(a, y0), (b, y1)], color.filled())),
                )?
                .label(name.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 20, y + 4)], color.filled())
                });
            }
            draw_lines(&mut c, series, f64::MIN)?;
        }
        let q_max = self
            .queue
            .iter()
            .flat_map(|l| l.1.iter().map(|p| p.1))
            .fold(0.0, f64::max)
            .max(1.0);
        let mut q = ChartBuilder::on(&bottom)
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..t_max, 0.0..q_max * 1.1)?;
        q.configure_mesh()
            .y_desc("queueing delay (ms)")
            .x_desc("time (s)")
            .draw()?;
        let n = self.queue.len();
        let lines: Vec<Line> = self
            .queue
            .iter()
            .enumerate()
            .map(|(i, (name, pts))| {
                let style = if n == 2 && i == 0 {
                    RGBColor(0x99, 0x99, 0x99).stroke_width(1)
                } else if n == 2 {
                    RGBColor(0x1f, 0x77, 0xb4).stroke_width(2)
                } else {
                    FLOW_COLORS[i % FLOW_COLORS.len()].stroke_width(1)
                };
                (name.clone(), style, pts.clone())
            })
            .collect();
        draw_lines(&mut q, lines, f64::MIN)?;
        root.present()
    }
}

/// A named line: legend text, style, points.
type Line = (String, ShapeStyle, Vec<(f64, f64)>);

/// Draw named lines with a legend; values below `floor` are drawn at `floor` (a log axis
/// cannot show zero).
fn draw_lines<'a, DB: DrawingBackend + 'a, Y: Ranged<ValueType = f64>>(
    c: &mut ChartContext<'a, DB, Cartesian2d<RangedCoordf64, Y>>,
    series: Vec<Line>,
    floor: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (name, style, pts) in series {
        let pts: Vec<_> = pts.into_iter().map(|(t, v)| (t, v.max(floor))).collect();
        c.draw_series(LineSeries::new(pts, style))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    c.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
}

/// Write a heat map of utilization (after adapting) over RTT (x) and loss (y) to `path`.
/// Cells are (RTT ms, loss %, utilization); each distinct RTT and loss is one column or row.
pub fn heatmap(path: &Path, cells: &[(f64, f64, f64)]) -> Result<()> {
    check_extension(path)?;
    register_fonts();
    let res = if path.extension().and_then(|e| e.to_str()) == Some("svg") {
        let root = SVGBackend::new(path, (WIDTH, HEIGHT * 3 / 4)).into_drawing_area();
        draw_heatmap(root, cells).map_err(|e| anyhow!("{e:?}"))
    } else {
        let root = BitMapBackend::new(path, (WIDTH, HEIGHT * 3 / 4)).into_drawing_area();
        draw_heatmap(root, cells).map_err(|e| anyhow!("{e:?}"))
    };
    res.map_err(|e| anyhow!("cannot draw heat map {}: {e}", path.display()))
}

fn distinct(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// Red (≤ 0.5) through yellow to green (≥ 0.965, the payload limit).
fn heat_color(u: f64) -> RGBColor {
    let t = ((u - 0.5) / (0.965 - 0.5)).clamp(0.0, 1.0);
    let (r, g) = if t < 0.5 {
        (1.0, t * 2.0)
    } else {
        (1.0 - (t - 0.5) * 2.0, 1.0)
    };
    RGBColor((60.0 + 180.0 * r) as u8, (60.0 + 160.0 * g) as u8, 90)
}

/// Axis labels for categorical cells: the value of cell `i` at `i + 0.5`, nothing elsewhere.
fn category_labels(values: Vec<f64>) -> impl Fn(&f64) -> String {
    move |x: &f64| {
        let i = (x - 0.5).round();
        if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < values.len() {
            format!("{}", values[i as usize])
        } else {
            String::new()
        }
    }
}

fn draw_heatmap<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    cells: &[(f64, f64, f64)],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let root = root.titled(
        "utilization after adapting (goodput / capacity; payload limit 0.965)",
        ("sans-serif", 22),
    )?;
    let rtts = distinct(cells.iter().map(|c| c.0).collect());
    let losses = distinct(cells.iter().map(|c| c.1).collect());
    let (nx, ny) = (rtts.len() as f64, losses.len() as f64);
    let mut c = ChartBuilder::on(&root)
        .margin(16)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..nx, 0.0..ny)?;
    let xf = category_labels(rtts.clone());
    let yf = category_labels(losses.clone());
    c.configure_mesh()
        .disable_mesh()
        .x_labels(rtts.len() * 2 + 1)
        .y_labels(losses.len() * 2 + 1)
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .x_desc("RTT (ms)")
        .y_desc("random loss (%)")
        .draw()?;
    for &(rtt, loss, u) in cells {
        let x = rtts.iter().position(|&v| v == rtt).unwrap_or(0) as f64;
        let y = losses.iter().position(|&v| v == loss).unwrap_or(0) as f64;
        c.draw_series(std::iter::once(Rectangle::new(
            [(x + 0.02, y + 0.02), (x + 0.98, y + 0.98)],
            heat_color(u).filled(),
        )))?;
        c.draw_series(std::iter::once(Text::new(
            format!("{u:.3}"),
            (x + 0.3, y + 0.6),
            ("sans-serif", 18).into_font(),
        )))?;
    }
    Ok(())
}
