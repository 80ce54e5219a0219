//! History's trend charts, one per series: each point (its repeats as a
//! bar from lowest to highest), each level's mean and ±2 sd band, and a
//! marker where a level begins, labelled with its change and what else
//! changed that night; acknowledged and expected changes are drawn grey.
//! What is a change is decided in `report::history`; this only draws it.
use anyhow::Result;
use plotters::coord::Shift;
use plotters::element::EmptyElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::draw::*;
use super::{pe, Chart, ChartWriter};
use crate::report::history::History;

/// Charts drawn at most; the tables carry every series.
const MAX_CHARTS: usize = 40;

const POINT: RGBColor = RGBColor(31, 119, 180);
const LEVEL: RGBColor = RGBColor(44, 160, 44);
const WORSE: RGBColor = RGBColor(214, 39, 40);
const BETTER: RGBColor = RGBColor(44, 160, 44);
const KNOWN: RGBColor = RGBColor(150, 150, 150);

struct Mark {
    at: usize,
    color: RGBColor,
    label: String,
}

struct Trend {
    title: String,
    subtitle: String,
    y_desc: String,
    values: Vec<f64>,
    ranges: Vec<(f64, f64)>,
    /// Each level: first index, end (exclusive), mean, sd.
    levels: Vec<(usize, usize, f64, f64)>,
    marks: Vec<Mark>,
    dates: Vec<String>,
    fmt: fn(f64) -> String,
}

impl Chart for Trend {
    fn size(&self) -> (u32, u32) {
        (1100, 560)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let entries = [
            legend("point (repeats' range)", POINT, super::draw::Mark::Line),
            legend("level mean ±2 sd", LEVEL, super::draw::Mark::Bar),
            legend("regression", WORSE, super::draw::Mark::Dashed),
            legend("acknowledged or expected", KNOWN, super::draw::Mark::Dashed),
        ];
        let area = frame(root, &self.title, &self.subtitle, &entries)?;
        let n = self.values.len();
        let lo =
            self.ranges.iter().map(|r| r.0).chain(self.levels.iter().map(|l| l.2 - 2.0 * l.3)).fold(f64::MAX, f64::min);
        let hi =
            self.ranges.iter().map(|r| r.1).chain(self.levels.iter().map(|l| l.2 + 2.0 * l.3)).fold(f64::MIN, f64::max);
        let pad = ((hi - lo) * 0.12).max(hi.abs() * 0.005).max(1e-9);
        let (y0, y1) = (lo - pad, hi + pad * 2.5);
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .margin_right(40)
            .x_label_area_size(56)
            .y_label_area_size(90)
            .build_cartesian_2d(-0.5..(n as f64 - 0.5), y0..y1)
            .map_err(pe)?;
        let dates = self.dates.clone();
        let fmt = self.fmt;
        chart
            .configure_mesh()
            .x_desc("point (a commit, or a night), oldest first")
            .y_desc(self.y_desc.as_str())
            .x_labels(8.min(n.max(1)))
            .x_label_formatter(&move |v| {
                category_at(*v, dates.len(), false).map(|i| dates[i].clone()).unwrap_or_default()
            })
            .y_label_formatter(&|v| fmt(*v))
            .house_style(13, 14)
            .draw()
            .map_err(pe)?;
        for &(a, b, mean, sd) in &self.levels {
            let (x0, x1) = (a as f64 - 0.5, b as f64 - 0.5);
            let band = RGBColor(200, 230, 200).mix(0.55);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x0, mean - 2.0 * sd), (x1, mean + 2.0 * sd)],
                    band.filled(),
                )))
                .map_err(pe)?;
            chart.draw_series(LineSeries::new([(x0, mean), (x1, mean)], LEVEL.stroke_width(2))).map_err(pe)?;
        }
        for (i, (&v, &(rlo, rhi))) in self.values.iter().zip(&self.ranges).enumerate() {
            let x = i as f64;
            if rhi > rlo {
                chart
                    .draw_series(std::iter::once(PathElement::new(vec![(x, rlo), (x, rhi)], POINT.stroke_width(1))))
                    .map_err(pe)?;
            }
            chart.draw_series(std::iter::once(Circle::new((x, v), 3, POINT.filled()))).map_err(pe)?;
        }
        for (k, m) in self.marks.iter().enumerate() {
            let x = m.at as f64 - 0.5;
            let mut y = y0;
            let step = (y1 - y0) / 60.0;
            while y < y1 {
                let e = (y + step).min(y1);
                chart
                    .draw_series(std::iter::once(PathElement::new(vec![(x, y), (x, e)], m.color.stroke_width(2))))
                    .map_err(pe)?;
                y += 2.0 * step;
            }
            // Labels alternate rows near the top, so neighbouring changes do not overwrite each other.
            let ly = y1 - (y1 - y0) * (0.04 + 0.07 * (k % 3) as f64);
            let style = font(12)
                .color(&m.color)
                .pos(Pos::new(if m.at * 2 > n { HPos::Right } else { HPos::Left }, VPos::Center));
            let dx = if m.at * 2 > n { -4 } else { 4 };
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((x, ly)) + Text::new(fit(&m.label, 12, 520), (dx, 0), style),
                ))
                .map_err(pe)?;
        }
        Ok(())
    }
}

/// Draws `history-<n>.svg` (and `.png`) per series; a note when some did
/// not fit.
pub(crate) fn history_charts(w: &mut ChartWriter, h: &History) -> Result<Vec<String>> {
    for (si, s) in h.series.iter().enumerate().take(MAX_CHARTS) {
        let values: Vec<f64> = s.points.iter().map(|p| p.value).collect();
        let ranges = s
            .points
            .iter()
            .map(|p| {
                let lo = p.repeats.iter().copied().fold(f64::MAX, f64::min);
                let hi = p.repeats.iter().copied().fold(f64::MIN, f64::max);
                (lo, hi)
            })
            .collect();
        let mut starts: Vec<usize> = h.findings.iter().filter(|f| f.series == si).map(|f| f.change.at).collect();
        starts.insert(0, 0);
        starts.push(values.len());
        let levels = starts
            .windows(2)
            .map(|w| {
                let l = crate::report::history::level_of(&s.points[w[0]..w[1]]);
                (w[0], w[1], l.mean, l.sd)
            })
            .collect();
        let marks = h
            .findings
            .iter()
            .filter(|f| f.series == si)
            .map(|f| {
                let known = f.ack.is_some() || f.change.fixed;
                let color = if known {
                    KNOWN
                } else if f.worse {
                    WORSE
                } else {
                    BETTER
                };
                let what = f.what_changed();
                let mut label = format!("{:+.1}%", f.change.relative() * 100.0);
                if !what.is_empty() {
                    label += &format!(" {what}");
                }
                if let Some(a) = &f.ack {
                    label += &format!(" ({})", a.kind.word());
                }
                Mark { at: f.change.at, color, label }
            })
            .collect();
        let m = s.metric;
        let chart = Trend {
            title: format!("{} · {}", s.metric.title(), s.name()),
            subtitle: format!(
                "{} points, {} .. {}; levels between change points (p < {})",
                s.points.len(),
                s.points[0].date(),
                s.points[s.points.len() - 1].date(),
                h.options.params.p
            ),
            y_desc: m.title().to_string(),
            values,
            ranges,
            levels,
            marks,
            // Dates, or the points' commits (ids) when they all ran on one day.
            dates: if s.points[0].date() == s.points[s.points.len() - 1].date() {
                s.points
                    .iter()
                    .map(|p| if p.commit.is_empty() { &p.id } else { &p.commit })
                    .map(|c| c.chars().take(7).collect())
                    .collect()
            } else {
                s.points.iter().map(|p| p.date()[5..].to_string()).collect()
            },
            fmt: match m {
                crate::report::check::Metric::Scaling => |v| format!("{:.0}%", v * 100.0),
                _ => axis_num,
            },
        };
        w.write(&format!("history-{:02}-{}", si + 1, m.name()), &chart)?;
    }
    Ok(if h.series.len() > MAX_CHARTS {
        vec![format!("history charts: the first {MAX_CHARTS} of {} series; the tables have all", h.series.len())]
    } else {
        vec![]
    })
}
