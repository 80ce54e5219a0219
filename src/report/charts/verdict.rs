//! The verdicts' waterfall: for each multi-device configuration, a panel of
//! horizontal bars from ideal scaling (100 % of N × the 1-device run) down
//! through each measured part to what was measured. The steps come decided
//! (`verdict::steps`); this only draws them.
use anyhow::Result;
use plotters::coord::Shift;
use plotters::element::EmptyElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::draw::*;
use super::{pe, Chart, ChartWriter};
use crate::report::verdict::{steps, Step, StepKind, Verdict};

/// Panels drawn at most; the tables carry every verdict.
const MAX_PANELS: usize = 6;

const IDEAL: RGBColor = RGBColor(150, 150, 150);
const LOST: RGBColor = RGBColor(214, 39, 40);
const GAINED: RGBColor = RGBColor(44, 160, 44);
const MEASURED: RGBColor = RGBColor(31, 119, 180);

struct Waterfall {
    panels: Vec<(String, Vec<Step>)>,
    subtitle: String,
}

fn color(s: &Step) -> RGBColor {
    match s.kind {
        StepKind::Ideal => IDEAL,
        StepKind::Measured => MEASURED,
        StepKind::Part if s.to > s.from => GAINED,
        StepKind::Part => LOST,
    }
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, title: &str, steps: &[Step]) -> Result<()> {
    let k = steps.len();
    let right = steps.iter().map(|s| s.from.max(s.to)).fold(100.0, f64::max) * 1.1;
    let left = steps.iter().map(|s| s.from.min(s.to)).fold(0.0, f64::min);
    let label_w = steps.iter().map(|s| text_w(&s.name, 13)).max().unwrap_or(0) + 20;
    // The panel's title drawn by hand: plotters' caption measures text, which
    // needs a font that SVG-only runs do not have.
    let (w, _) = area.dim_in_pixel();
    let style = font(15).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(fit(title, 15, w.saturating_sub(40)), (w as i32 / 2, 4), style)).map_err(pe)?;
    let area = area.split_vertically(24).1;
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .margin_right(30)
        .x_label_area_size(36)
        .y_label_area_size(label_w.clamp(80, 300))
        .build_cartesian_2d(left..right, category_range(k))
        .map_err(pe)?;
    let name_at = |v: &f64| category_at(*v, k, true).map(|i| steps[i].name.clone()).unwrap_or_default();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(k.max(1))
        .y_label_formatter(&name_at)
        .x_label_formatter(&|v| axis_num(*v))
        .x_desc("% of ideal")
        .house_style(13, 14)
        .draw()
        .map_err(pe)?;
    for (i, s) in steps.iter().enumerate() {
        let y = (k - 1 - i) as f64;
        let (lo, hi) = (s.from.min(s.to), s.from.max(s.to));
        chart
            .draw_series(std::iter::once(Rectangle::new([(lo, y - 0.35), (hi, y + 0.35)], color(s).filled())))
            .map_err(pe)?;
        let text = match s.kind {
            // A part too small to show a sign is 0.0, not "-0.0".
            StepKind::Part if (s.to - s.from).abs() < 0.05 => "0.0".into(),
            StepKind::Part => format!("{:+.1}", s.to - s.from),
            _ => format!("{:.1}", s.to),
        };
        let style = font(12).color(&RGBColor(40, 40, 40)).pos(Pos::new(HPos::Left, VPos::Center));
        chart.draw_series(std::iter::once(EmptyElement::at((hi, y)) + Text::new(text, (4, 0), style))).map_err(pe)?;
    }
    Ok(())
}

impl Chart for Waterfall {
    fn size(&self) -> (u32, u32) {
        let rows: u32 = self.panels.iter().map(|(_, s)| s.len() as u32 * 26 + 90).sum();
        (1000, 130 + rows)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let entries = [
            legend("ideal", IDEAL, Mark::Bar),
            legend("lost to a part", LOST, Mark::Bar),
            legend("gained", GAINED, Mark::Bar),
            legend("measured", MEASURED, Mark::Bar),
        ];
        let mut area = frame(root, "why: from ideal scaling to what was measured", &self.subtitle, &entries)?;
        for (title, steps) in &self.panels {
            let h = steps.len() as u32 * 26 + 90;
            let (top, rest) = area.split_vertically(h);
            draw_panel(&top, title, steps)?;
            area = rest;
        }
        Ok(())
    }
}

/// Draws `verdict.svg` (and `.png`) from the verdicts; nothing without any.
/// Returns a note when some verdicts did not fit.
pub(crate) fn verdict_chart(w: &mut ChartWriter, verdicts: &[Verdict]) -> Result<Vec<String>> {
    if verdicts.is_empty() {
        return Ok(vec![]);
    }
    let panels = verdicts.iter().take(MAX_PANELS).map(|v| (v.config.clone(), steps(v))).collect();
    let subtitle = "each part in points of ideal, measured from the runs (see the verdict table)".to_string();
    w.write("verdict", &Waterfall { panels, subtitle })?;
    Ok(if verdicts.len() > MAX_PANELS {
        vec![format!("verdict chart: the first {MAX_PANELS} of {} configurations; the tables have all", verdicts.len())]
    } else {
        vec![]
    })
}
