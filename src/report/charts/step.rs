//! Step-time distributions.
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::draw::*;
use super::{pe, Chart};

// ---- step-time distribution -------------------------------------------------

pub(crate) struct StepDist {
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
pub(crate) struct StepChart {
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
            .house_style(13, 16)
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
