//! The report's plots, with `plotters` (SVG and PNG backends only).
//!
//! * `head_to_head_p50`: grouped bars, one group per size, one bar per transport, p50 on a
//!   log scale.
//! * `cdf_SIZE`: the one-way latency CDF of every head-to-head transport at 1 KiB and at the
//!   largest size run (log x).
//!
//! Text needs a TrueType font: plotters 0.3 has no built-in one, and its `ab_glyph` feature
//! (pure Rust, no fontconfig) lays out and renders a font this process registers, read at
//! run time from `$SHMBUS_BENCH_FONT` or the usual system places (DejaVu, Liberation, Noto;
//! `make test` installs `fonts-dejavu-core` when none is there). Without one, no plot is
//! written: one line says so, and the summary notes it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;

use crate::suite::{ns_label, size_label, Measured};

/// A font file to use for PNG text.
pub const FONT_ENV: &str = "SHMBUS_BENCH_FONT";

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",
    "/usr/share/fonts/noto/NotoSans-Regular.ttf",
];

/// Registers a TrueType font as "sans-serif" once; whether one is available.
fn font() -> bool {
    static FONT: OnceLock<bool> = OnceLock::new();
    *FONT.get_or_init(|| {
        let env = std::env::var_os(FONT_ENV).map(PathBuf::from);
        let paths = env.into_iter().chain(FONT_CANDIDATES.iter().map(PathBuf::from));
        for p in paths {
            if let Ok(bytes) = std::fs::read(&p) {
                // The font must live as long as the process (plotters keeps a &'static).
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return true;
                }
            }
        }
        false
    })
}

/// One plot and the files written for it.
#[derive(Debug, Clone)]
pub struct Plot {
    /// What it shows.
    pub title: String,
    /// Files written (SVG, PNG).
    pub files: Vec<PathBuf>,
    /// A note for the summary (what was not written, and why).
    pub note: Option<String>,
}

type DrawResult = Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Both formats of one plot.
fn both(out: &Path, stem: &str, title: &str, draw: &dyn Fn(Canvas) -> DrawResult) -> Plot {
    let mut plot = Plot { title: title.to_string(), files: Vec::new(), note: None };
    if !font() {
        let note = format!(
            "{stem}.svg and {stem}.png not written: no TrueType font found for the text (set {FONT_ENV} to a .ttf file)"
        );
        eprintln!("shmbus-bench: report: {note}");
        plot.note = Some(note);
        return plot;
    }
    let size = (1100u32, 620u32);
    let svg = out.join(format!("{stem}.svg"));
    let r = draw(Canvas::Svg(svg.clone(), size));
    match r {
        Ok(()) => plot.files.push(svg),
        Err(e) => eprintln!("shmbus-bench: report: cannot draw {}: {e}", svg.display()),
    }
    let png = out.join(format!("{stem}.png"));
    match draw(Canvas::Png(png.clone(), size)) {
        Ok(()) => plot.files.push(png),
        Err(e) => eprintln!("shmbus-bench: report: cannot draw {}: {e}", png.display()),
    }
    plot
}

/// Where to draw.
enum Canvas {
    Svg(PathBuf, (u32, u32)),
    Png(PathBuf, (u32, u32)),
}

/// Runs `f` on the canvas's drawing area and saves it.
macro_rules! on_canvas {
    ($canvas:expr, $f:expr) => {
        match $canvas {
            Canvas::Svg(p, s) => {
                let root = SVGBackend::new(&p, s).into_drawing_area();
                $f(&root)?;
                root.present().map_err(err)
            }
            Canvas::Png(p, s) => {
                let root = BitMapBackend::new(&p, s).into_drawing_area();
                $f(&root)?;
                root.present().map_err(err)
            }
        }
    };
}

/// Writes every plot into `out`.
pub fn write_all(out: &Path, h2h: &[Measured], sizes: &[usize]) -> Vec<Plot> {
    let mut plots = Vec::new();
    plots.push(both(out, "head_to_head_p50", "Head-to-head: one-way p50 by size (log scale)", &|canvas| {
        on_canvas!(canvas, |root| bars(root, h2h, sizes))
    }));
    let mut cdf_sizes = vec![1024];
    if let Some(&last) = sizes.last() {
        if last != 1024 {
            cdf_sizes.push(last);
        }
    }
    for size in cdf_sizes {
        let title = format!("One-way latency CDF at {}", size_label(size));
        let stem = format!("cdf_{}", size_label(size).replace(' ', ""));
        plots.push(both(out, &stem, &title, &|canvas| on_canvas!(canvas, |root| cdf(root, h2h, size, &title))));
    }
    plots
}

/// The labels in first-seen order.
fn labels(h2h: &[Measured]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for m in h2h {
        if !v.contains(&m.label) {
            v.push(m.label.clone());
        }
    }
    v
}

fn bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    h2h: &[Measured],
    sizes: &[usize],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let labels = labels(h2h);
    // The legend gets its own column on the right, clear of the bars.
    let (w, _) = root.dim_in_pixel();
    let (left, right) = root.split_horizontally(w.saturating_sub(230));
    for (j, label) in labels.iter().enumerate() {
        let color = Palette99::pick(j).to_rgba();
        let y = 60 + 22 * j as i32;
        right.draw(&Rectangle::new([(8, y - 6), (22, y + 6)], color.filled())).map_err(err)?;
        right
            .draw(&Text::new(label.as_str(), (30, y - 7), ("sans-serif", 14).into_font().color(&BLACK)))
            .map_err(err)?;
    }
    let values: Vec<u64> = h2h.iter().filter_map(Measured::p50).collect();
    let lo = values.iter().copied().min().unwrap_or(1).max(1) as f64 / 2.0;
    let hi = values.iter().copied().max().unwrap_or(1000).max(2) as f64 * 3.0;
    let n = sizes.len();
    let mut chart = ChartBuilder::on(&left)
        .caption("Head-to-head: one-way p50 (RTT/2), log scale", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        // Groups are centred on 0, 1, 2, …; only those ticks get a label.
        .x_label_formatter(&|x| {
            let i = x.round();
            match sizes.get(i as usize) {
                Some(&b) if (x - i).abs() < 1e-6 && i >= 0.0 => size_label(b),
                _ => String::new(),
            }
        })
        .y_label_formatter(&|y| ns_label(*y as u64))
        .y_desc("one-way p50")
        .draw()
        .map_err(err)?;
    let m = labels.len().max(1) as f64;
    let width = 0.84 / m;
    for (j, label) in labels.iter().enumerate() {
        let color = Palette99::pick(j).to_rgba();
        let rects: Vec<Rectangle<(f64, f64)>> = sizes
            .iter()
            .enumerate()
            .filter_map(|(i, &size)| {
                let v = h2h.iter().find(|x| &x.label == label && x.size == size)?.p50()? as f64;
                let x0 = i as f64 - 0.42 + j as f64 * width;
                Some(Rectangle::new([(x0, lo), (x0 + width * 0.9, v)], color.filled()))
            })
            .collect();
        chart.draw_series(rects).map_err(err)?;
    }
    Ok(())
}

fn cdf<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    h2h: &[Measured],
    size: usize,
    title: &str,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let rows: Vec<(&Measured, &Vec<(f64, u64)>)> =
        h2h.iter().filter(|m| m.size == size).filter_map(|m| m.result.as_ref().ok().map(|r| (m, &r.cdf))).collect();
    let all: Vec<u64> = rows.iter().flat_map(|(_, c)| c.iter().map(|p| p.1)).filter(|&v| v > 0).collect();
    let lo = all.iter().copied().min().unwrap_or(1).max(1) as f64 / 1.5;
    let hi = all.iter().copied().max().unwrap_or(1000).max(2) as f64 * 1.5;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|x| ns_label(*x as u64))
        .x_desc("one-way latency (RTT/2), log scale")
        .y_desc("fraction of round trips")
        .draw()
        .map_err(err)?;
    for (j, (m, points)) in rows.iter().enumerate() {
        let color = Palette99::pick(j).to_rgba();
        let line: Vec<(f64, f64)> = points.iter().map(|&(q, ns)| ((ns.max(1)) as f64, q)).collect();
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(err)?
            .label(m.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The rate grid: p50 one-way latency against message rate (log x), one line per ring
/// size; spin on the left, block on the right. `cells` are `rate-grid --json` objects.
pub fn rate_grid(out: &Path, cells: &[serde_json::Value]) -> Plot {
    let title = "rate-grid: stream one-way p50 vs message rate, one line per ring";
    if !cells.iter().any(|c| c["p50_ns"].as_u64().is_some()) {
        let note = "rate_grid_p50.svg and rate_grid_p50.png not written: no rate-grid results".to_string();
        eprintln!("shmbus-bench: report: {note}");
        return Plot { title: title.to_string(), files: Vec::new(), note: Some(note) };
    }
    both(out, "rate_grid_p50", title, &|canvas| on_canvas!(canvas, |root| grid(root, cells)))
}

/// (rate, p50 ns) points of one mode and ring, by rate.
fn grid_line(cells: &[serde_json::Value], mode: &str, ring: u64) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = cells
        .iter()
        .filter(|c| c["mode"] == mode && c["ring"] == ring)
        .filter_map(|c| Some((c["rate"].as_u64()? as f64, c["p50_ns"].as_u64()?.max(1) as f64)))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

fn grid<DB: DrawingBackend>(root: &DrawingArea<DB, plotters::coord::Shift>, cells: &[serde_json::Value]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(err)?;
    let mut rings: Vec<u64> = cells.iter().filter_map(|c| c["ring"].as_u64()).collect();
    rings.sort_unstable();
    rings.dedup();
    let rates: Vec<f64> = cells.iter().filter_map(|c| c["rate"].as_u64()).map(|r| r as f64).collect();
    let p50s: Vec<f64> = cells.iter().filter_map(|c| c["p50_ns"].as_u64()).map(|v| v.max(1) as f64).collect();
    let (xlo, xhi) = (
        rates.iter().copied().fold(f64::INFINITY, f64::min).min(1e6) / 1.3,
        rates.iter().copied().fold(0.0, f64::max).max(2.0) * 1.3,
    );
    let (ylo, yhi) = (
        p50s.iter().copied().fold(f64::INFINITY, f64::min).min(1e9) / 1.5,
        p50s.iter().copied().fold(0.0, f64::max).max(2.0) * 1.5,
    );
    let (w, _) = root.dim_in_pixel();
    let (left, right) = root.split_horizontally(w / 2);
    for (area, mode) in [(left, "spin"), (right, "block")] {
        let mut chart = ChartBuilder::on(&area)
            .caption(format!("stream {mode}: one-way p50 vs msg/s"), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| ns_label(*y as u64))
            .x_desc("messages per second (log)")
            .y_desc("one-way p50 (log)")
            .draw()
            .map_err(err)?;
        for (j, &ring) in rings.iter().enumerate() {
            let color = Palette99::pick(j).to_rgba();
            let line = grid_line(cells, mode, ring);
            if line.is_empty() {
                continue;
            }
            chart.draw_series(line.iter().map(|&p| Circle::new(p, 3, color.filled()))).map_err(err)?;
            chart
                .draw_series(LineSeries::new(line, color.stroke_width(2)))
                .map_err(err)?
                .label(format!("ring {}", size_label(ring as usize)))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], color.stroke_width(2)));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}
