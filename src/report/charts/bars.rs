//! Bar charts: grouped and stacked.
use anyhow::Result;
use plotters::coord::Shift;
use plotters::element::EmptyElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::draw::*;
use super::{pe, Chart};

// ---- bar charts -------------------------------------------------------------

/// Bars in groups: `values[category][series]`. Vertical with categories on
/// x, or horizontal with categories down the y axis (long names stay readable).
pub(crate) struct Bars {
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
                .house_style(13, 16)
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
                .house_style(13, 16)
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
pub(crate) struct StackedBars {
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
