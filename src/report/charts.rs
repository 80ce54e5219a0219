//! Charts with plotters: every chart as SVG, and as PNG when a TrueType font
//! is available.
//!
//! PNG text is rasterized by ab_glyph from a font loaded at run time (none is
//! embedded): `$GPUBENCH_FONT`, then the system's DejaVu Sans, then the copy
//! `scripts/setup` unpacks from Debian's fonts-dejavu-core. SVG needs no font:
//! the viewer renders the text. So layout here never asks the font for text
//! sizes (that would fail without one); widths are estimated from character
//! counts instead, and legends are drawn by this module rather than by
//! plotters, whose legend box measures text.

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::element::EmptyElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::report::devices::DeviceData;
use crate::report::summary::{fmt_rate, strategy_rank, ConfigKey, Group, Run, Scope};

// ---- fonts ----------------------------------------------------------------

const DEJAVU: &str = "usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Where a font is looked for, in order.
pub fn font_candidates() -> Vec<PathBuf> {
    let mut v = vec![];
    if let Some(p) = std::env::var_os("GPUBENCH_FONT").filter(|p| !p.is_empty()) {
        v.push(PathBuf::from(p));
    }
    v.push(Path::new("/").join(DEJAVU));
    if let Some(h) = std::env::var_os("GPUBENCH_HOME").filter(|p| !p.is_empty()) {
        v.push(Path::new(&h).join("fonts").join(DEJAVU));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
        v.push(Path::new(&h).join(".cache/gpubench/fonts").join(DEJAVU));
    }
    v
}

/// The first candidate that exists, or the one line to print instead.
pub fn find_font() -> std::result::Result<PathBuf, String> {
    font_candidates().into_iter().find(|p| p.is_file()).ok_or_else(|| {
        "PNG charts need a TrueType font and none was found; only SVG written \
         (run scripts/setup, which unpacks DejaVu Sans from Debian's fonts-dejavu-core, \
         or set GPUBENCH_FONT=/path/to/font.ttf)"
            .to_string()
    })
}

/// plotters keeps fonts in a process-wide table that wants `'static` bytes,
/// so each file is read and leaked once; a second call with the same path is free.
static REGISTERED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Makes `path` the font of all charts (and its -Bold sibling, when present,
/// for titles).
pub fn register_font(path: &Path) -> Result<()> {
    let mut done = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    if done.as_deref() == Some(path) {
        return Ok(());
    }
    let load = |p: &Path, style: FontStyle| -> Result<()> {
        let bytes = std::fs::read(p).with_context(|| format!("cannot read font {}", p.display()))?;
        plotters::style::register_font(FONT, style, Box::leak(bytes.into_boxed_slice()))
            .map_err(|_| anyhow!("{} is not a TrueType/OpenType font", p.display()))
    };
    load(path, FontStyle::Normal)?;
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let bold = path.with_file_name(format!("{stem}-Bold.ttf"));
    if bold.is_file() {
        // A bad bold face only costs bold titles.
        let _ = load(&bold, FontStyle::Bold);
    }
    *done = Some(path.to_path_buf());
    Ok(())
}

// ---- writing --------------------------------------------------------------

/// Family name plotters and SVG viewers both understand.
const FONT: &str = "sans-serif";

fn pe<E: Display>(e: E) -> anyhow::Error {
    anyhow!("drawing chart: {e}")
}

pub trait Chart {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Writes charts into one directory: `<stem>.svg` always, `<stem>.png` when a
/// font is registered.
pub struct ChartWriter {
    dir: PathBuf,
    png: bool,
    pub written: Vec<PathBuf>,
}

impl ChartWriter {
    /// Creates `dir` if needed. `font`: a font file to register for PNGs.
    pub fn new(dir: &Path, font: Option<&Path>) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| crate::error::usage(format!("--charts {}: cannot create directory ({e})", dir.display())))?;
        if let Some(f) = font {
            register_font(f)?;
        }
        Ok(ChartWriter { dir: dir.to_path_buf(), png: font.is_some(), written: vec![] })
    }

    pub fn write<C: Chart>(&mut self, stem: &str, chart: &C) -> Result<()> {
        let size = chart.size();
        let svg_path = self.dir.join(format!("{stem}.svg"));
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            chart.draw(&root).with_context(|| format!("rendering {}", svg_path.display()))?;
            root.present().map_err(pe)?;
        }
        std::fs::write(&svg_path, svg).with_context(|| format!("cannot write {}", svg_path.display()))?;
        self.written.push(svg_path);
        if self.png {
            let png_path = self.dir.join(format!("{stem}.png"));
            {
                let root = BitMapBackend::new(&png_path, size).into_drawing_area();
                chart.draw(&root).with_context(|| format!("rendering {}", png_path.display()))?;
                root.present().map_err(|e| anyhow!("cannot write {}: {e}", png_path.display()))?;
            }
            self.written.push(png_path);
        }
        Ok(())
    }
}

// ---- drawing helpers ------------------------------------------------------

const TAB10: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
const GRAY: RGBColor = RGBColor(110, 110, 110);
const GRID_BOLD: RGBColor = RGBColor(215, 215, 215);
const GRID_LIGHT: RGBColor = RGBColor(240, 240, 240);

/// Strategies keep their colour across every chart.
pub fn strategy_color(s: &str) -> RGBColor {
    match s {
        "single" => TAB10[0],
        "dp" => TAB10[1],
        "ddp" => TAB10[2],
        other => TAB10[3 + other.bytes().map(usize::from).sum::<usize>() % 7],
    }
}

fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from(FontDesc::new(FontFamily::SansSerif, size as f64, FontStyle::Normal)).color(&BLACK)
}

/// Text width without asking the font (see the module comment). DejaVu Sans
/// averages about 0.6 em per character; erring wide only costs margin.
fn text_w(s: &str, size: u32) -> u32 {
    (s.chars().count() as f64 * size as f64 * 0.56).ceil() as u32
}

/// `s`, shortened with an ellipsis to fit `width` pixels at `size`.
fn fit(s: &str, size: u32, width: u32) -> String {
    if text_w(s, size) <= width {
        return s.to_string();
    }
    let keep = (width as f64 / (size as f64 * 0.56)) as usize;
    let mut t: String = s.chars().take(keep.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[derive(Clone, Copy, PartialEq)]
enum Mark {
    Line,
    Dashed,
    Bar,
}

struct Legend {
    label: String,
    color: RGBColor,
    mark: Mark,
}

fn legend(label: impl Into<String>, color: RGBColor, mark: Mark) -> Legend {
    Legend { label: label.into(), color, mark }
}

/// White background, title, subtitle and a legend row (wrapped as needed)
/// above the plot, where it can never hide data. Returns the area left.
fn frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
    entries: &[Legend],
) -> Result<DrawingArea<DB, Shift>> {
    root.fill(&WHITE).map_err(pe)?;
    let (w, _) = root.dim_in_pixel();
    let cx = w as i32 / 2;
    let title_style = TextStyle::from(FontDesc::new(FontFamily::SansSerif, 24.0, FontStyle::Bold))
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    root.draw(&Text::new(title.to_string(), (cx, 12), title_style)).map_err(pe)?;
    let mut y = 44;
    if !subtitle.is_empty() {
        let style = font(15).color(&GRAY).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(fit(subtitle, 15, w.saturating_sub(40)), (cx, y), style)).map_err(pe)?;
        y += 26;
    }
    if !entries.is_empty() {
        y += 4;
        // Lay entries out in rows that fit, then centre each row.
        let item_w = |e: &Legend| 30 + text_w(&e.label, 14) + 24;
        let mut rows: Vec<Vec<&Legend>> = vec![vec![]];
        let mut used = 0;
        for e in entries {
            if used + item_w(e) > w.saturating_sub(60) && !rows.last().unwrap().is_empty() {
                rows.push(vec![]);
                used = 0;
            }
            used += item_w(e);
            rows.last_mut().unwrap().push(e);
        }
        for row in rows {
            let total: u32 = row.iter().map(|e| item_w(e)).sum();
            let mut x = cx - total as i32 / 2;
            let my = y + 9;
            for e in row {
                let c = e.color;
                match e.mark {
                    Mark::Bar => root.draw(&Rectangle::new([(x, my - 7), (x + 22, my + 7)], c.filled())),
                    Mark::Line => root.draw(&PathElement::new(vec![(x, my), (x + 22, my)], c.stroke_width(3))),
                    Mark::Dashed => {
                        root.draw(&PathElement::new(vec![(x, my), (x + 8, my)], c.stroke_width(2))).map_err(pe)?;
                        root.draw(&PathElement::new(vec![(x + 14, my), (x + 22, my)], c.stroke_width(2)))
                    }
                }
                .map_err(pe)?;
                let style = font(14).pos(Pos::new(HPos::Left, VPos::Center));
                root.draw(&Text::new(e.label.clone(), (x + 30, my), style)).map_err(pe)?;
                x += item_w(e) as i32;
            }
            y += 24;
        }
    }
    Ok(root.split_vertically(y + 6).1)
}

/// Categories sit at integer positions 0..k, so that plotters' own tick
/// algorithm, asked for k labels on a range k wide, puts one tick on each.
fn category_range(k: usize) -> std::ops::Range<f64> {
    -0.5..(k.max(1) as f64 - 0.5)
}

/// The category at axis value `v` (a tick), if `v` is one; `reversed` counts
/// from the top, for horizontal charts that list categories top-down.
fn category_at(v: f64, k: usize, reversed: bool) -> Option<usize> {
    let r = v.round();
    if (v - r).abs() > 1e-6 || r < 0.0 || r as usize >= k {
        return None;
    }
    Some(if reversed { k - 1 - r as usize } else { r as usize })
}

/// Axis tick text: no decimals on whole numbers, one or two otherwise.
fn axis_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn int_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{}", v.round())
    } else {
        String::new()
    }
}

/// Headroom above the largest value, and a positive range even for zeros.
fn top(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.15
    } else {
        1.0
    }
}

fn max_of(it: impl Iterator<Item = f64>) -> f64 {
    it.filter(|v| v.is_finite()).fold(0.0, f64::max)
}

// ---- line charts: throughput and scaling against device count --------------

pub struct Line {
    pub name: String,
    pub color: RGBColor,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

pub struct LineChart {
    pub title: String,
    pub subtitle: String,
    pub x_desc: String,
    pub y_desc: String,
    pub lines: Vec<Line>,
    /// The largest device count; x runs from 0.5 to here + 0.5.
    pub x_max: f64,
    pub y_min_top: f64,
    pub y_fmt: fn(f64) -> String,
}

impl Chart for LineChart {
    fn size(&self) -> (u32, u32) {
        (1000, 640)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let entries: Vec<Legend> = self
            .lines
            .iter()
            .map(|l| legend(&l.name, l.color, if l.dashed { Mark::Dashed } else { Mark::Line }))
            .collect();
        let area = frame(root, &self.title, &self.subtitle, &entries)?;
        let x_max = self.x_max.max(1.0);
        let y_top = top(max_of(self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)))).max(self.y_min_top);
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .margin_right(40)
            .x_label_area_size(56)
            .y_label_area_size(90)
            .build_cartesian_2d(0.5..x_max + 0.5, 0.0..y_top)
            .map_err(pe)?;
        let y_fmt = self.y_fmt;
        chart
            .configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .x_labels((x_max as usize).clamp(1, 16))
            .x_label_formatter(&int_label)
            .y_label_formatter(&|y| y_fmt(*y))
            .label_style(font(14))
            .axis_desc_style(font(16))
            .bold_line_style(GRID_BOLD)
            .light_line_style(GRID_LIGHT)
            .max_light_lines(1)
            .draw()
            .map_err(pe)?;
        for l in &self.lines {
            if l.dashed {
                chart
                    .draw_series(DashedLineSeries::new(l.points.clone(), 10, 6, l.color.stroke_width(2)))
                    .map_err(pe)?;
            } else {
                chart.draw_series(LineSeries::new(l.points.clone(), l.color.stroke_width(3))).map_err(pe)?;
                chart.draw_series(l.points.iter().map(|p| Circle::new(*p, 5, l.color.filled()))).map_err(pe)?;
            }
        }
        Ok(())
    }
}

// ---- bar charts -------------------------------------------------------------

/// Bars in groups: `values[category][series]`. Vertical with categories on
/// x, or horizontal with categories down the y axis (long names stay readable).
pub struct Bars {
    pub title: String,
    pub subtitle: String,
    pub value_desc: String,
    pub category_desc: String,
    pub categories: Vec<String>,
    pub series: Vec<(String, RGBColor)>,
    /// With one series: a colour per category (strategies keep theirs).
    pub category_colors: Vec<RGBColor>,
    pub values: Vec<Vec<Option<f64>>>,
    /// Text printed at the end of each bar; None for no label.
    pub labels: Vec<Vec<Option<String>>>,
    pub value_fmt: fn(f64) -> String,
    pub horizontal: bool,
    /// Draw no legend when the categories already say what the bars are.
    pub show_legend: bool,
    /// Lower bound of the value axis' top, e.g. 100 for percentages.
    pub min_top: f64,
}

impl Bars {
    fn slot(&self) -> u32 {
        // pixels per category along the category axis
        let n = self.series.len().max(1) as u32;
        if self.horizontal {
            n * 18 + 16
        } else {
            (n * 26 + 30).max(90)
        }
    }

    fn category_label_size(&self) -> u32 {
        if self.horizontal {
            let longest = self.categories.iter().map(|c| text_w(c, 13)).max().unwrap_or(0);
            (longest + 20).clamp(80, 420)
        } else {
            56
        }
    }

    fn draw_panel<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>) -> Result<()> {
        let k = self.categories.len();
        let v_top = top(max_of(self.values.iter().flatten().flatten().copied())).max(self.min_top);
        // Room for the value labels at the bar ends.
        let v_top =
            if self.labels.iter().flatten().any(Option::is_some) && self.horizontal { v_top * 1.12 } else { v_top };
        let label_of = |v: &f64| -> String {
            // Horizontal charts list categories top-down.
            category_at(*v, k, self.horizontal).map(|i| self.categories[i].clone()).unwrap_or_default()
        };
        let n = self.series.len().max(1) as f64;
        let group_w = if n == 1.0 { 0.6 } else { 0.8 };
        let bar = group_w / n;
        let color_of = |i: usize, j: usize| self.category_colors.get(i).copied().unwrap_or(self.series[j].1);
        let vfmt = self.value_fmt;
        let value_label_style = font(12).color(&RGBColor(40, 40, 40));

        let mut b = ChartBuilder::on(area);
        b.margin(16).margin_right(30);
        if self.horizontal {
            b.x_label_area_size(56).y_label_area_size(self.category_label_size());
            let mut chart = b.build_cartesian_2d(0.0..v_top, category_range(k)).map_err(pe)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .y_labels(k.max(1))
                .x_desc(self.value_desc.as_str())
                .y_desc(self.category_desc.as_str())
                .x_label_formatter(&|v| vfmt(*v))
                .y_label_formatter(&label_of)
                .label_style(font(13))
                .axis_desc_style(font(16))
                .bold_line_style(GRID_BOLD)
                .light_line_style(GRID_LIGHT)
                .max_light_lines(1)
                .draw()
                .map_err(pe)?;
            for (i, row) in self.values.iter().enumerate() {
                let y0 = (k - 1 - i) as f64 + group_w / 2.0;
                for (j, v) in row.iter().enumerate() {
                    let Some(v) = v else { continue };
                    let (a, c) = (y0 - bar * (j as f64 + 1.0), y0 - bar * j as f64);
                    let color = color_of(i, j);
                    chart
                        .draw_series(std::iter::once(Rectangle::new([(0.0, a), (*v, c)], color.filled())))
                        .map_err(pe)?;
                    if let Some(Some(t)) = self.labels.get(i).and_then(|r| r.get(j)) {
                        let style = value_label_style.clone().pos(Pos::new(HPos::Left, VPos::Center));
                        chart
                            .draw_series(std::iter::once(
                                EmptyElement::at((*v, (a + c) / 2.0)) + Text::new(t.clone(), (4, 0), style),
                            ))
                            .map_err(pe)?;
                    }
                }
            }
        } else {
            b.x_label_area_size(self.category_label_size()).y_label_area_size(90);
            let mut chart = b.build_cartesian_2d(category_range(k), 0.0..v_top).map_err(pe)?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(k.max(1))
                .x_desc(self.category_desc.as_str())
                .y_desc(self.value_desc.as_str())
                .x_label_formatter(&label_of)
                .y_label_formatter(&|v| vfmt(*v))
                .label_style(font(13))
                .axis_desc_style(font(16))
                .bold_line_style(GRID_BOLD)
                .light_line_style(GRID_LIGHT)
                .max_light_lines(1)
                .draw()
                .map_err(pe)?;
            for (i, row) in self.values.iter().enumerate() {
                let x0 = i as f64 - group_w / 2.0;
                for (j, v) in row.iter().enumerate() {
                    let Some(v) = v else { continue };
                    let (a, c) = (x0 + bar * j as f64, x0 + bar * (j as f64 + 1.0));
                    let color = color_of(i, j);
                    chart
                        .draw_series(std::iter::once(Rectangle::new([(a, 0.0), (c, *v)], color.filled())))
                        .map_err(pe)?;
                    if let Some(Some(t)) = self.labels.get(i).and_then(|r| r.get(j)) {
                        let style = value_label_style.clone().pos(Pos::new(HPos::Center, VPos::Bottom));
                        chart
                            .draw_series(std::iter::once(
                                EmptyElement::at(((a + c) / 2.0, *v)) + Text::new(t.clone(), (0, -4), style),
                            ))
                            .map_err(pe)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn legend(&self) -> Vec<Legend> {
        if !self.show_legend {
            return vec![];
        }
        self.series.iter().map(|(n, c)| legend(n, *c, Mark::Bar)).collect()
    }
}

impl Chart for Bars {
    fn size(&self) -> (u32, u32) {
        let k = self.categories.len() as u32;
        if self.horizontal {
            (1000, (170 + k * self.slot() + 70).max(420))
        } else {
            ((k * self.slot() + 200).max(800), 600)
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let area = frame(root, &self.title, &self.subtitle, &self.legend())?;
        self.draw_panel(&area)
    }
}

/// Two bar panels stacked under one title and legend (memory above
/// utilization), sharing categories and series.
pub struct StackedBars {
    pub title: String,
    pub subtitle: String,
    pub panels: Vec<Bars>,
}

impl Chart for StackedBars {
    fn size(&self) -> (u32, u32) {
        let w = self.panels.iter().map(|p| p.size().0).max().unwrap_or(800);
        (w, 160 + 380 * self.panels.len() as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let entries = self.panels.first().map(Bars::legend).unwrap_or_default();
        let area = frame(root, &self.title, &self.subtitle, &entries)?;
        let parts = area.split_evenly((self.panels.len().max(1), 1));
        for (p, a) in self.panels.iter().zip(&parts) {
            p.draw_panel(a)?;
        }
        Ok(())
    }
}

// ---- step-time distribution -------------------------------------------------

pub struct StepDist {
    pub label: String,
    pub color: RGBColor,
    pub p50: f64,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    pub mean: Option<f64>,
}

/// One row per run: a box from p50 to p90, a whisker on to p99 and a mark at
/// the mean. The rows carry percentiles, not every step, so this is the
/// honest shape of the distribution they allow (no lower quartile to draw).
pub struct StepChart {
    pub title: String,
    pub subtitle: String,
    pub runs: Vec<StepDist>,
}

impl Chart for StepChart {
    fn size(&self) -> (u32, u32) {
        (1000, (200 + 30 * self.runs.len() as u32).max(420))
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let mut entries: Vec<Legend> = vec![];
        let mut seen = vec![];
        for r in &self.runs {
            let s = r.label.split_whitespace().next().unwrap_or("").to_string();
            if !seen.contains(&s) {
                entries.push(legend(s.clone(), r.color, Mark::Bar));
                seen.push(s);
            }
        }
        entries.push(legend("box p50 to p90, whisker to p99, black tick: mean", GRAY, Mark::Line));
        let area = frame(root, &self.title, &self.subtitle, &entries)?;
        let k = self.runs.len();
        let x_top = top(max_of(self.runs.iter().flat_map(|r| [Some(r.p50), r.p90, r.p99, r.mean]).flatten()));
        let longest = self.runs.iter().map(|r| text_w(&r.label, 13)).max().unwrap_or(0);
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .margin_right(30)
            .x_label_area_size(56)
            .y_label_area_size((longest + 20).clamp(80, 420))
            .build_cartesian_2d(0.0..x_top, category_range(k))
            .map_err(pe)?;
        let label_of = |v: &f64| category_at(*v, k, true).map(|i| self.runs[i].label.clone()).unwrap_or_default();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(k.max(1))
            .x_desc("step time (ms)")
            .y_desc("run")
            .x_label_formatter(&|v| axis_num(*v))
            .y_label_formatter(&label_of)
            .label_style(font(13))
            .axis_desc_style(font(16))
            .bold_line_style(GRID_BOLD)
            .light_line_style(GRID_LIGHT)
            .max_light_lines(1)
            .draw()
            .map_err(pe)?;
        for (i, r) in self.runs.iter().enumerate() {
            let y = (k - 1 - i) as f64;
            let hi = r.p90.unwrap_or(r.p50);
            if let Some(p99) = r.p99 {
                chart
                    .draw_series(std::iter::once(PathElement::new(vec![(hi, y), (p99, y)], r.color.stroke_width(2))))
                    .map_err(pe)?;
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(p99, y - 0.15), (p99, y + 0.15)],
                        r.color.stroke_width(2),
                    )))
                    .map_err(pe)?;
            }
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(r.p50, y - 0.3), (hi, y + 0.3)],
                    r.color.mix(0.35).filled(),
                )))
                .map_err(pe)?;
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(r.p50, y - 0.3), (hi, y + 0.3)],
                    r.color.stroke_width(2),
                )))
                .map_err(pe)?;
            if let Some(m) = r.mean {
                chart
                    .draw_series(std::iter::once(PathElement::new(
                        vec![(m, y - 0.36), (m, y + 0.36)],
                        BLACK.stroke_width(2),
                    )))
                    .map_err(pe)?;
            }
        }
        Ok(())
    }
}

// ---- the report's charts ----------------------------------------------------

/// What scaling is measured across: one machine set-up and workload.
type ScenarioKey = (Scope, String, Option<u32>, String, Option<u32>);

fn scenario_of(g: &Group) -> ScenarioKey {
    let (model, img, prec, batch) = g.key.workload();
    (g.scope.clone(), model, img, prec, batch)
}

fn scenario_title(s: &ScenarioKey) -> String {
    let (scope, model, img, prec, batch) = s;
    let mut parts = vec![scope.hardware.clone()];
    if !scope.label.is_empty() && scope.label != scope.hardware {
        parts.push(scope.label.clone());
    }
    if scope.implementation == crate::report::summary::PUBLISHED {
        parts.push("published figures".into());
    } else if scope.implementation != "gpubench" {
        parts.push(format!("impl {}", scope.implementation));
    }
    parts.push(format!(
        "{model} {}px {prec}, batch {}/device",
        img.map_or("?".into(), |v| v.to_string()),
        batch.map_or("?".into(), |v| v.to_string())
    ));
    parts.join("  |  ")
}

/// The parts of a scenario, for file names.
fn scenario_parts(s: &ScenarioKey) -> [String; 7] {
    let (scope, model, img, prec, batch) = s;
    [
        scope.hardware.clone(),
        scope.label.clone(),
        scope.implementation.clone(),
        model.clone(),
        img.map_or("x".into(), |v| format!("{v}px")),
        prec.clone(),
        batch.map_or("bx".into(), |v| format!("b{v}")),
    ]
}

/// File-name suffix for scenario `s`: only the parts that differ among all
/// the scenarios charted, so names stay short (`throughput-fp16`).
fn slug(s: &ScenarioKey, all: &[&ScenarioKey]) -> String {
    let parts = scenario_parts(s);
    let varying: Vec<String> = (0..parts.len())
        .filter(|&i| all.iter().any(|o| scenario_parts(o)[i] != parts[i]))
        .map(|i| parts[i].clone())
        .filter(|p| !p.is_empty())
        .collect();
    let raw = varying.join("-");
    let mut out = String::new();
    for c in raw.to_lowercase().chars() {
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if !(c == '-' && (out.ends_with('-') || out.is_empty())) {
            out.push(c);
        }
    }
    out.trim_end_matches('-').to_string()
}

/// Short per-run labels: strategy and devices, plus whatever else varies
/// among the runs shown, plus `#k` for repeats.
fn run_labels(runs: &[Run], idx: &[usize]) -> Vec<String> {
    let varies = |f: &dyn Fn(&Run) -> String| {
        let first = idx.first().map(|&i| f(&runs[i]));
        idx.iter().any(|&i| Some(f(&runs[i])) != first)
    };
    let hw = varies(&|r| r.row.device_name.clone() + &r.row.label);
    let model = varies(&|r| r.row.model.clone());
    let img = varies(&|r| format!("{:?}", r.row.image_size));
    let prec = varies(&|r| r.row.precision.clone());
    let batch = varies(&|r| format!("{:?}", r.row.batch_per_device));
    let base: Vec<String> = idx
        .iter()
        .map(|&i| {
            let r = &runs[i].row;
            let mut s = format!("{} x{}", r.strategy, r.n_devices);
            if model {
                s += &format!(" {}", r.model);
            }
            if img {
                s += &format!(" {}px", r.image_size.map_or("?".into(), |v| v.to_string()));
            }
            if prec {
                s += &format!(" {}", r.precision);
            }
            if batch {
                s += &format!(" b{}", r.batch_per_device.map_or("?".into(), |v| v.to_string()));
            }
            if hw {
                let h = if r.label.is_empty() { &r.device_name } else { &r.label };
                s += &format!(" [{h}]");
            }
            s
        })
        .collect();
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for b in &base {
        *count.entry(b).or_default() += 1;
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    base.iter()
        .map(|b| {
            if count[b.as_str()] > 1 {
                let k = seen.entry(b).or_default();
                *k += 1;
                format!("{b} #{k}")
            } else {
                b.clone()
            }
        })
        .collect()
}

/// Draws every report chart that the data allows into `w`; returns notes on
/// those left out and why.
pub fn report_charts(w: &mut ChartWriter, runs: &[Run], groups: &[Group], devices: &DeviceData) -> Result<Vec<String>> {
    let mut notes = vec![];
    let mut scenarios: BTreeMap<ScenarioKey, Vec<&Group>> = BTreeMap::new();
    for g in groups.iter().filter(|g| g.throughput.is_some()) {
        scenarios.entry(scenario_of(g)).or_default().push(g);
    }
    let keys: Vec<&ScenarioKey> = scenarios.keys().collect();
    let mut used: HashMap<String, usize> = HashMap::new();
    for (s, gs) in &scenarios {
        let mut suffix = if keys.len() > 1 { format!("-{}", slug(s, &keys)) } else { String::new() };
        // Two scenarios whose parts fold to the same file name (case,
        // punctuation) get -2, -3, …, so no chart overwrites another.
        let n = used.entry(suffix.clone()).or_default();
        *n += 1;
        if *n > 1 {
            suffix = format!("{suffix}-{n}");
        }
        scenario_charts(w, s, gs, &suffix, &mut notes)?;
    }
    // Runs in table order, for the per-run charts.
    let ordered: Vec<usize> = groups.iter().flat_map(|g| g.ok.iter().copied()).collect();
    memory_chart(w, runs, &ordered, devices, &mut notes)?;
    step_chart(w, runs, &ordered)?;
    Ok(notes)
}

/// Charts 1, 2 and 5 for one scenario: throughput and scaling against device
/// count, and the strategies side by side at one device count.
fn scenario_charts(
    w: &mut ChartWriter,
    s: &ScenarioKey,
    gs: &[&Group],
    suffix: &str,
    notes: &mut Vec<String>,
) -> Result<()> {
    let subtitle = scenario_title(s);
    let mut by_strategy: BTreeMap<(u8, String), Vec<&Group>> = BTreeMap::new();
    for g in gs {
        by_strategy.entry((strategy_rank(&g.key.strategy), g.key.strategy.clone())).or_default().push(g);
    }
    let mut ns: Vec<u32> = gs.iter().map(|g| g.key.n_devices).collect();
    ns.sort();
    ns.dedup();
    let max_n = *ns.last().unwrap_or(&1);

    if ns.len() < 2 {
        notes.push(format!("throughput and scaling charts for {subtitle} skipped: runs at one device count only"));
    } else {
        // 1. throughput against devices, with the ideal line
        let mut lines: Vec<Line> = by_strategy
            .iter()
            .map(|((_, name), gs)| Line {
                name: name.clone(),
                color: strategy_color(name),
                dashed: false,
                points: gs.iter().map(|g| (g.key.n_devices as f64, g.throughput.unwrap())).collect(),
            })
            .collect();
        let base = gs.iter().find_map(|g| g.base_throughput);
        if let Some(b) = base {
            lines.push(Line {
                name: format!("ideal: devices x {} img/s", fmt_rate(b)),
                color: GRAY,
                dashed: true,
                points: vec![(1.0, b), (max_n as f64, b * max_n as f64)],
            });
        }
        w.write(
            &format!("throughput{suffix}"),
            &LineChart {
                title: "Training throughput by device count".into(),
                subtitle: subtitle.clone(),
                x_desc: "devices".into(),
                y_desc: "throughput (images/s)".into(),
                lines,
                x_max: max_n as f64,
                y_min_top: 0.0,
                y_fmt: axis_num,
            },
        )?;

        // 2. scaling efficiency
        let mut lines: Vec<Line> = by_strategy
            .iter()
            .filter_map(|((_, name), gs)| {
                let points: Vec<(f64, f64)> =
                    gs.iter().filter_map(|g| g.efficiency.map(|e| (g.key.n_devices as f64, e * 100.0))).collect();
                (!points.is_empty()).then(|| Line {
                    name: name.clone(),
                    color: strategy_color(name),
                    dashed: false,
                    points,
                })
            })
            .collect();
        if lines.is_empty() {
            notes.push(format!("scaling chart for {subtitle} skipped: no 1-device run to scale from"));
        } else {
            lines.push(Line {
                name: "ideal (100%)".into(),
                color: GRAY,
                dashed: true,
                points: vec![(0.5, 100.0), (max_n as f64 + 0.5, 100.0)],
            });
            w.write(
                &format!("scaling{suffix}"),
                &LineChart {
                    title: "Scaling efficiency by device count".into(),
                    subtitle: subtitle.clone(),
                    x_desc: "devices".into(),
                    y_desc: "scaling efficiency (% of linear)".into(),
                    lines,
                    x_max: max_n as f64,
                    y_min_top: 110.0,
                    y_fmt: |v| format!("{v:.0}%"),
                },
            )?;
        }
    }

    // 5. the seed's chart: one bar per strategy at one device count,
    // the count with the most strategies (the larger on ties).
    let fixed =
        ns.iter().copied().max_by_key(|&n| (gs.iter().filter(|g| g.key.n_devices == n).count(), n)).unwrap_or(1);
    let at: Vec<&&Group> = gs.iter().filter(|g| g.key.n_devices == fixed).collect();
    if at.len() >= 2 {
        let best = at.iter().filter_map(|g| g.throughput).fold(0.0, f64::max);
        let mut at = at;
        at.sort_by_key(|g| (strategy_rank(&g.key.strategy), g.key.strategy.clone()));
        let labels = at
            .iter()
            .map(|g| {
                let t = g.throughput.unwrap();
                let rel = if t >= best { "fastest".to_string() } else { format!("{:.2}x slower", best / t) };
                vec![Some(format!("{} img/s, {rel}", fmt_rate(t)))]
            })
            .collect();
        w.write(
            &format!("strategies{suffix}"),
            &Bars {
                title: format!("Strategies on {fixed} device{}", if fixed == 1 { "" } else { "s" }),
                subtitle: subtitle.clone(),
                value_desc: "throughput (images/s)".into(),
                category_desc: "strategy".into(),
                categories: at.iter().map(|g| g.key.strategy.clone()).collect(),
                series: vec![("throughput".into(), TAB10[0])],
                category_colors: at.iter().map(|g| strategy_color(&g.key.strategy)).collect(),
                values: at.iter().map(|g| vec![g.throughput]).collect(),
                labels,
                value_fmt: axis_num,
                horizontal: false,
                show_legend: false,
                min_top: 0.0,
            },
        )?;
    }
    Ok(())
}

/// Chart 3: per-device peak memory and mean utilization of every run that
/// has per-device values.
fn memory_chart(
    w: &mut ChartWriter,
    runs: &[Run],
    ordered: &[usize],
    devices: &DeviceData,
    notes: &mut Vec<String>,
) -> Result<()> {
    let with_devices: Vec<usize> =
        ordered.iter().copied().filter(|&i| !devices.get(&runs[i].row.run_id).is_empty()).collect();
    if with_devices.is_empty() {
        notes.push(
            "memory/utilization chart skipped: no per-device file (e.g. results.devices.csv) next to the inputs".into(),
        );
    } else {
        let labels = run_labels(runs, &with_devices);
        let n_dev = with_devices.iter().map(|&i| devices.get(&runs[i].row.run_id).len()).max().unwrap_or(1);
        let series: Vec<(String, RGBColor)> = (0..n_dev)
            .map(|d| {
                if d == 0 {
                    ("device 0 (dp's master)".to_string(), TAB10[3])
                } else {
                    // Other devices in steady blues, so device 0 stands out.
                    let shade = [TAB10[0], RGBColor(82, 150, 200), RGBColor(120, 175, 215)][(d - 1) % 3];
                    (format!("device {d}"), shade)
                }
            })
            .collect();
        let pick = |f: &dyn Fn(&crate::report::devices::DeviceValues) -> Option<f64>| -> Vec<Vec<Option<f64>>> {
            with_devices
                .iter()
                .map(|&i| {
                    let d = devices.get(&runs[i].row.run_id);
                    (0..n_dev).map(|j| d.get(j).and_then(f)).collect()
                })
                .collect()
        };
        let mem = pick(&|d| d.peak_mem_bytes.map(|b| b / 1073741824.0));
        let util = pick(&|d| d.util_mean_pct);
        let none = |v: &Vec<Vec<Option<f64>>>| vec![vec![None; n_dev]; v.len()];
        let panel = |desc: &str, values: Vec<Vec<Option<f64>>>, fmt: fn(f64) -> String, min_top: f64| Bars {
            title: String::new(),
            subtitle: String::new(),
            value_desc: desc.into(),
            category_desc: "run".into(),
            categories: labels.clone(),
            series: series.clone(),
            category_colors: vec![],
            labels: none(&values),
            values,
            value_fmt: fmt,
            horizontal: false,
            show_legend: true,
            min_top,
        };
        w.write(
            "memory_util",
            &StackedBars {
                title: "Per-device peak memory and utilization".into(),
                subtitle: "one bar per device; DataParallel's master (device 0) gathers outputs and holds more".into(),
                panels: vec![
                    panel("peak memory (GiB)", mem, axis_num, 0.0),
                    panel("mean utilization (%)", util, axis_num, 100.0),
                ],
            },
        )?;
    }
    Ok(())
}

/// Chart 4: the step-time distribution of every run.
fn step_chart(w: &mut ChartWriter, runs: &[Run], ordered: &[usize]) -> Result<()> {
    let with_steps: Vec<usize> = ordered.iter().copied().filter(|&i| runs[i].row.step_ms_p50.is_some()).collect();
    if !with_steps.is_empty() {
        let labels = run_labels(runs, &with_steps);
        let dists = with_steps
            .iter()
            .zip(labels)
            .map(|(&i, label)| {
                let r = &runs[i].row;
                StepDist {
                    label,
                    color: strategy_color(&r.strategy),
                    p50: r.step_ms_p50.unwrap(),
                    p90: r.step_ms_p90,
                    p99: r.step_ms_p99,
                    mean: r.step_ms_mean,
                }
            })
            .collect();
        w.write(
            "step_time",
            &StepChart {
                title: "Step time per run".into(),
                subtitle: "timed steps after warm-up; lower is better".into(),
                runs: dists,
            },
        )?;
    }
    Ok(())
}

/// `compare`'s grouped bars: throughput of each set for every joined config.
pub fn compare_chart(
    w: &mut ChartWriter,
    set_names: &[String],
    configs: &[ConfigKey],
    values: Vec<Vec<Option<f64>>>,
) -> Result<()> {
    let labels = values.iter().map(|row| row.iter().map(|v| v.map(fmt_rate)).collect()).collect();
    w.write(
        "compare",
        &Bars {
            title: "Throughput by result set".into(),
            subtitle: "medians over repeated runs; a missing bar means that set has no run of the config".into(),
            value_desc: "throughput (images/s)".into(),
            category_desc: "config".into(),
            categories: configs.iter().map(ConfigKey::describe).collect(),
            series: set_names.iter().enumerate().map(|(i, n)| (n.clone(), TAB10[i % 10])).collect(),
            category_colors: vec![],
            values,
            labels,
            value_fmt: axis_num,
            horizontal: true,
            show_legend: true,
            min_top: 0.0,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::summarize;
    use crate::report::summary::tests::{row, runs_of};

    fn png_dims(bytes: &[u8]) -> (u32, u32) {
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG magic");
        assert_eq!(&bytes[12..16], b"IHDR");
        let be = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
        (be(16), be(20))
    }

    fn sample_runs() -> Vec<Run> {
        let mut rows = vec![row("single", 1, 360.0), row("single", 1, 370.0)];
        for (s, n, t) in [("dp", 2, 560.0), ("dp", 4, 900.0), ("ddp", 2, 700.0), ("ddp", 4, 1380.0)] {
            let mut r = row(s, n, t);
            r.step_ms_mean = Some(95.0);
            r.step_ms_p99 = Some(140.0);
            rows.push(r);
        }
        runs_of(rows)
    }

    fn render(dir: &Path, font: Option<&Path>, devices: &DeviceData) -> (Vec<PathBuf>, Vec<String>) {
        let runs = sample_runs();
        let all: Vec<usize> = (0..runs.len()).collect();
        let groups = summarize(&runs, &all, Scope::of, devices);
        let mut w = ChartWriter::new(dir, font).unwrap();
        let notes = report_charts(&mut w, &runs, &groups, devices).unwrap();
        (w.written, notes)
    }

    #[test]
    fn svg_needs_no_font_and_has_titles_and_axis_labels() {
        let dir = tempfile::tempdir().unwrap();
        let (files, notes) = render(dir.path(), None, &DeviceData::default());
        let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, ["throughput.svg", "scaling.svg", "strategies.svg", "step_time.svg"]);
        assert!(notes.iter().any(|n| n.contains("memory/utilization chart skipped")), "{notes:?}");
        let svg = std::fs::read_to_string(dir.path().join("throughput.svg")).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.contains("<text"));
        for t in [
            "Training throughput by device count",
            "throughput (images/s)",
            "devices",
            "ideal: devices x 365 img/s",
            "ddp",
        ] {
            assert!(svg.contains(t), "missing {t:?}");
        }
        assert!(svg.len() > 3000 && svg.len() < 200_000, "{}", svg.len());
        let scaling = std::fs::read_to_string(dir.path().join("scaling.svg")).unwrap();
        assert!(scaling.contains("scaling efficiency (% of linear)"));
        let seed = std::fs::read_to_string(dir.path().join("strategies.svg")).unwrap();
        assert!(seed.contains("Strategies on 4 devices") && seed.contains("1.53x slower"), "dp vs ddp ratio label");
    }

    #[test]
    fn pngs_are_valid_when_a_font_exists() {
        let Ok(font) = find_font() else {
            // The no-font path is covered above; say so rather than pass silently.
            eprintln!("no font on this machine: PNG rendering not exercised");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let mut devices = DeviceData::default();
        let runs = sample_runs();
        for r in &runs {
            let n = r.row.n_devices as usize;
            let v = (0..n)
                .map(|d| crate::report::devices::DeviceValues {
                    device: d.to_string(),
                    peak_mem_bytes: Some(if d == 0 && r.row.strategy == "dp" { 9e9 } else { 5e9 }),
                    util_mean_pct: Some(if d == 0 { 97.0 } else { 70.0 }),
                })
                .collect();
            devices.by_run.insert(r.row.run_id.clone(), v);
        }
        let (files, notes) = render(dir.path(), Some(&font), &devices);
        assert!(notes.is_empty(), "{notes:?}");
        let pngs: Vec<&PathBuf> = files.iter().filter(|p| p.extension().unwrap() == "png").collect();
        assert_eq!(pngs.len(), 5, "{files:?}");
        for p in pngs {
            let bytes = std::fs::read(p).unwrap();
            let (w, h) = png_dims(&bytes);
            assert!((600..=4000).contains(&w) && (400..=4000).contains(&h), "{p:?}: {w}x{h}");
            // Text and lines, not a blank canvas: a white PNG compresses to ~5 KB.
            assert!(bytes.len() > 15_000, "{p:?}: {} bytes", bytes.len());
        }
        if let Ok(keep) = std::env::var("GPUBENCH_KEEP_CHARTS") {
            for f in &files {
                std::fs::copy(f, Path::new(&keep).join(f.file_name().unwrap())).unwrap();
            }
        }
    }

    #[test]
    fn a_bad_font_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join("bad.ttf");
        std::fs::write(&bad, b"not a font").unwrap();
        let err = register_font(&bad).unwrap_err();
        assert!(format!("{err}").contains("bad.ttf is not a TrueType"), "{err}");
    }

    #[test]
    fn run_labels_show_only_what_varies_and_number_repeats() {
        let runs = sample_runs();
        let labels = run_labels(&runs, &[0, 1, 2]);
        assert_eq!(labels, ["single x1 #1", "single x1 #2", "dp x2"]);
    }

    #[test]
    fn slugs_are_file_safe() {
        let s: ScenarioKey = (Scope::of(&row("ddp", 2, 1.0)), "resnet50".into(), Some(224), "fp32".into(), Some(64));
        let mut t = s.clone();
        t.0.hardware = "Tesla K80 (GK210)".into();
        t.3 = "fp16".into();
        assert_eq!(slug(&s, &[&s, &t]), "tesla-v100-fp32");
        assert_eq!(slug(&t, &[&s, &t]), "tesla-k80-gk210-fp16");
        let mut u = s.clone();
        u.0.implementation = "pytorch".into();
        assert_eq!((slug(&s, &[&s, &u]), slug(&u, &[&s, &u])), ("gpubench".into(), "pytorch".into()));
    }

    #[test]
    fn no_chart_overwrites_another() {
        // gpubench and PyTorch rows of one sweep, and two labels that fold
        // to the same file name: every scenario keeps its own files.
        let mut rows = vec![];
        for (imp, label) in [("gpubench", ""), ("pytorch", ""), ("gpubench", "A b"), ("gpubench", "a-B")] {
            for (s, n, t) in [("single", 1, 100.0), ("ddp", 2, 180.0)] {
                let mut r = row(s, n, t);
                r.implementation = imp.into();
                r.label = label.into();
                rows.push(r);
            }
        }
        let runs = runs_of(rows);
        let all: Vec<usize> = (0..runs.len()).collect();
        let devices = DeviceData::default();
        let groups = summarize(&runs, &all, Scope::of, &devices);
        let dir = tempfile::tempdir().unwrap();
        let mut w = ChartWriter::new(dir.path(), None).unwrap();
        report_charts(&mut w, &runs, &groups, &devices).unwrap();
        let mut names: Vec<String> =
            w.written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a chart file was written twice: {names:?}");
        let throughput = names.iter().filter(|f| f.starts_with("throughput")).count();
        assert_eq!(throughput, 4, "{names:?}");
        assert!(names.contains(&"throughput-pytorch.svg".to_string()), "{names:?}");
    }
}
