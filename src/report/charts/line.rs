//! Line charts: throughput and scaling against device count, each point
//! with its 95 % interval as an error bar where one is known.
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::draw::*;
use super::{pe, Chart};

// ---- line charts: throughput and scaling against device count --------------

pub(crate) struct Line {
    pub name: String,
    pub color: RGBColor,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
    /// Per point: the 95 % interval (lo, hi), when known.
    pub errors: Vec<Option<(f64, f64)>>,
}

pub(crate) struct LineChart {
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
        let values = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let interval_tops = self.lines.iter().flat_map(|l| l.errors.iter().filter_map(|e| e.map(|(_, hi)| hi)));
        let y_top = value_top(values, interval_tops).max(self.y_min_top);
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
            .house_style(14, 16)
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
                let bars = l.points.iter().zip(&l.errors).filter_map(|(&(x, y), e)| {
                    e.map(|(lo, hi)| {
                        ErrorBar::new_vertical(x, lo.max(0.0), y, hi.min(y_top), l.color.stroke_width(2), 12)
                    })
                });
                chart.draw_series(bars).map_err(pe)?;
            }
        }
        Ok(())
    }
}
