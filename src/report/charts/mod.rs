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

mod bars;
mod comm;
mod draw;
mod frontier;
mod line;
mod report;
mod serving;
mod step;
mod trend;
mod verdict;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub(crate) use comm::allreduce_charts;
#[cfg(feature = "torch")]
pub(crate) use frontier::frontier_chart;
pub(crate) use report::{compare_chart, report_charts};
pub(crate) use serving::serving_charts;
pub(crate) use trend::history_charts;
pub(crate) use verdict::verdict_chart;

// ---- fonts ----------------------------------------------------------------

const DEJAVU: &str = "usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Where a font is looked for, in order.
pub(crate) fn font_candidates() -> Vec<PathBuf> {
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
pub(crate) fn register_font(path: &Path) -> Result<()> {
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
pub(crate) const FONT: &str = "sans-serif";

pub(crate) fn pe<E: Display>(e: E) -> anyhow::Error {
    anyhow!("drawing chart: {e}")
}

pub(crate) trait Chart {
    fn size(&self) -> (u32, u32);
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>;
}

/// Writes charts into one directory (`<stem>.svg` always, `<stem>.png` when a
/// font is registered), keeps them in memory for an HTML page, or both: the
/// page embeds the very SVG the directory gets.
pub(crate) struct ChartWriter {
    dir: Option<PathBuf>,
    png: bool,
    keep: bool,
    pub written: Vec<PathBuf>,
    /// `(stem, svg)` of every chart in drawing order, when kept.
    pub svgs: Vec<(String, String)>,
}

impl ChartWriter {
    /// Creates `dir` if needed. `font`: a font file to register for PNGs.
    pub(crate) fn new(dir: &Path, font: Option<&Path>) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| crate::error::usage(format!("--charts {}: cannot create directory ({e})", dir.display())))?;
        if let Some(f) = font {
            register_font(f)?;
        }
        Ok(ChartWriter {
            dir: Some(dir.to_path_buf()),
            png: font.is_some(),
            keep: false,
            written: vec![],
            svgs: vec![],
        })
    }

    /// Charts kept in memory only, for an HTML page; no file is written.
    pub(crate) fn in_memory() -> Self {
        ChartWriter { dir: None, png: false, keep: true, written: vec![], svgs: vec![] }
    }

    /// Also keeps every SVG in memory.
    pub(crate) fn keeping_svgs(mut self) -> Self {
        self.keep = true;
        self
    }

    pub(crate) fn write<C: Chart>(&mut self, stem: &str, chart: &C) -> Result<()> {
        let size = chart.size();
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            chart.draw(&root).with_context(|| format!("rendering chart {stem}"))?;
            root.present().map_err(pe)?;
        }
        if self.keep {
            self.svgs.push((stem.to_string(), svg.clone()));
        }
        let Some(dir) = &self.dir else { return Ok(()) };
        let svg_path = dir.join(format!("{stem}.svg"));
        std::fs::write(&svg_path, svg).with_context(|| format!("cannot write {}", svg_path.display()))?;
        self.written.push(svg_path);
        if self.png {
            let png_path = dir.join(format!("{stem}.png"));
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

#[cfg(test)]
mod tests {
    use super::report::*;
    use super::*;
    use crate::report::summary::summarize;
    use crate::report::summary::tests::{row, runs_of};
    use crate::report::summary::{Run, Scope};
    use crate::results::long::DeviceData;
    use crate::results::Fields;

    /// The README demo's disturbed run (1944 ±85331 img/s) once set an axis
    /// to 180 000 and flattened every other line.
    #[test]
    fn one_wide_interval_cannot_set_the_axis() {
        let top = |v: &[f64], i: &[f64]| super::draw::value_top(v.iter().copied(), i.iter().copied());
        assert!(top(&[1944.0, 1800.0], &[87275.0]) <= 2.0 * 1944.0 * 1.15 + 1e-9);
        // An ordinary interval still fits.
        assert!(top(&[1944.0], &[2100.0]) >= 2100.0);
        assert_eq!(top(&[], &[]), 1.0);
    }

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
            let n = r.row.n_devices() as usize;
            let v = (0..n)
                .map(|d| crate::results::long::DeviceValues {
                    device: d.to_string(),
                    role: String::new(),
                    peak_mem_bytes: Some(if d == 0 && r.row.strategy() == "dp" { 9e9 } else { 5e9 }),
                    peak_mem_kind: "alloc",
                    peak_rss_mb: None,
                    util_mean_pct: Some(if d == 0 { 97.0 } else { 70.0 }),
                    cpu_util_pct: None,
                })
                .collect();
            devices.by_run.insert(r.row.run_id().to_string(), v);
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
    fn cpu_runs_get_a_process_chart_and_no_empty_device_chart() {
        let dir = tempfile::tempdir().unwrap();
        let mut devices = DeviceData::default();
        for r in &sample_runs() {
            let n = if r.row.strategy() == "ddp" { r.row.n_devices() as usize } else { 1 };
            let v = (0..n)
                .map(|d| crate::results::long::DeviceValues {
                    device: if d == 0 { "cpu".into() } else { format!("cpu:rank{d}") },
                    role: String::new(),
                    peak_mem_bytes: None,
                    peak_mem_kind: "",
                    peak_rss_mb: Some(900.0 + d as f64),
                    util_mean_pct: None,
                    cpu_util_pct: Some(180.0),
                })
                .collect();
            devices.by_run.insert(r.row.run_id().to_string(), v);
        }
        let (files, notes) = render(dir.path(), None, &devices);
        let names: Vec<String> = files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert!(names.contains(&"processes.svg".to_string()), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("memory_util")), "{names:?}");
        assert!(notes.is_empty(), "{notes:?}");
        let svg = std::fs::read_to_string(dir.path().join("processes.svg")).unwrap();
        for t in ["Per-process peak memory and CPU use", "peak resident set (GiB)", "CPU use (% of one core)", "rank 3"]
        {
            assert!(svg.contains(t), "missing {t:?}");
        }
    }

    #[test]
    fn intervals_become_error_bars() {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = sample_runs();
        for r in &mut runs {
            r.edit(|r| {
                let t = r.throughput_img_s.unwrap();
                (r.throughput_ci95_lo, r.throughput_ci95_hi) = (Some(t * 0.9), Some(t * 1.1));
            });
        }
        let all: Vec<usize> = (0..runs.len()).collect();
        let devices = DeviceData::default();
        let groups = summarize(&runs, &all, Scope::of, &devices);
        let with = |dir: &Path, groups: &[crate::report::summary::Group]| {
            let mut w = ChartWriter::new(dir, None).unwrap();
            report_charts(&mut w, &runs, groups, &devices).unwrap();
            std::fs::read_to_string(dir.join("throughput.svg")).unwrap()
        };
        let svg = with(dir.path(), &groups);
        assert!(svg.contains("bars: 95 % intervals"), "subtitle says what the bars are");
        let plain: Vec<_> = groups
            .iter()
            .cloned()
            .map(|mut g| {
                g.throughput_ci = None;
                g
            })
            .collect();
        let other = tempfile::tempdir().unwrap();
        let bare = with(other.path(), &plain);
        // Each of five points gains a bar: three more line elements each.
        let lines = |s: &str| s.matches("<line").count() + s.matches("<polyline").count();
        assert!(lines(&svg) >= lines(&bare) + 5, "{} vs {}", lines(&svg), lines(&bare));
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
        let s: ScenarioKey =
            (Scope::of(&row("ddp", 2, 1.0)), "resnet50".into(), Some(224), "fp32".into(), Some(64), String::new());
        let mut t = s.clone();
        t.0.hardware = "Tesla K80 (GK210)".into();
        t.3 = "fp16".into();
        assert_eq!(slug(&s, &[&s, &t]), "tesla-v100-fp32");
        assert_eq!(slug(&t, &[&s, &t]), "tesla-k80-gk210-fp16");
        let mut u = s.clone();
        u.0.implementation = crate::results::Implementation::Pytorch;
        assert_eq!((slug(&s, &[&s, &u]), slug(&u, &[&s, &u])), ("gpubench".into(), "pytorch".into()));
    }

    #[test]
    fn no_chart_overwrites_another() {
        // gpubench and PyTorch rows of one sweep, and two labels that fold
        // to the same file name: every scenario keeps its own files.
        let mut rows = vec![];
        use crate::results::Implementation::{Gpubench, Pytorch};
        for (imp, label) in [(Gpubench, ""), (Pytorch, ""), (Gpubench, "A b"), (Gpubench, "a-B")] {
            for (s, n, t) in [("single", 1, 100.0), ("ddp", 2, 180.0)] {
                let mut r = row(s, n, t);
                r.implementation = imp;
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
