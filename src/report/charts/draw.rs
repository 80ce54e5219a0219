//! Colours, font sizes, the frame and legend, and axis helpers shared by
//! every chart. Text widths are estimated from character counts (see the
//! module above: layout never asks the font).
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::pe;

// ---- drawing helpers ------------------------------------------------------

pub(super) const TAB10: [RGBColor; 10] = [
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
pub(super) const GRAY: RGBColor = RGBColor(110, 110, 110);
pub(super) const GRID_BOLD: RGBColor = RGBColor(215, 215, 215);
pub(super) const GRID_LIGHT: RGBColor = RGBColor(240, 240, 240);

/// Strategies keep their colour across every chart.
pub(crate) fn strategy_color(s: &str) -> RGBColor {
    match s {
        "single" => TAB10[0],
        "dp" => TAB10[1],
        "ddp" => TAB10[2],
        "replicas" => TAB10[3],
        "processes" => TAB10[4],
        other => TAB10[3 + other.bytes().map(usize::from).sum::<usize>() % 7],
    }
}

/// Every chart's mesh in the house style: tick labels at `label` px, axis
/// titles at `desc` px, grey grid lines with one light line between bold
/// ones. One place, so the charts cannot drift apart.
pub(super) trait HouseMesh {
    fn house_style(&mut self, label: u32, desc: u32) -> &mut Self;
}

impl<'a, 'b, X: Ranged, Y: Ranged, DB: DrawingBackend> HouseMesh for plotters::chart::MeshStyle<'a, 'b, X, Y, DB> {
    fn house_style(&mut self, label: u32, desc: u32) -> &mut Self {
        self.label_style(font(label))
            .axis_desc_style(font(desc))
            .bold_line_style(GRID_BOLD)
            .light_line_style(GRID_LIGHT)
            .max_light_lines(1)
    }
}

pub(super) fn font(size: u32) -> TextStyle<'static> {
    TextStyle::from(FontDesc::new(FontFamily::SansSerif, size as f64, FontStyle::Normal)).color(&BLACK)
}

/// Text width without asking the font (see the module comment). DejaVu Sans
/// averages about 0.6 em per character; erring wide only costs margin.
pub(super) fn text_w(s: &str, size: u32) -> u32 {
    (s.chars().count() as f64 * size as f64 * 0.56).ceil() as u32
}

/// `s`, shortened with an ellipsis to fit `width` pixels at `size`.
pub(super) fn fit(s: &str, size: u32, width: u32) -> String {
    if text_w(s, size) <= width {
        return s.to_string();
    }
    let keep = (width as f64 / (size as f64 * 0.56)) as usize;
    let mut t: String = s.chars().take(keep.saturating_sub(1)).collect();
    t.push('…');
    t
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Mark {
    Line,
    Dashed,
    Bar,
}

pub(super) struct Legend {
    label: String,
    color: RGBColor,
    mark: Mark,
}

pub(super) fn legend(label: impl Into<String>, color: RGBColor, mark: Mark) -> Legend {
    Legend { label: label.into(), color, mark }
}

/// White background, title, subtitle and a legend row (wrapped as needed)
/// above the plot, where it can never hide data. Returns the area left.
pub(super) fn frame<DB: DrawingBackend>(
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
pub(super) fn category_range(k: usize) -> std::ops::Range<f64> {
    -0.5..(k.max(1) as f64 - 0.5)
}

/// The category at axis value `v` (a tick), if `v` is one; `reversed` counts
/// from the top, for horizontal charts that list categories top-down.
pub(super) fn category_at(v: f64, k: usize, reversed: bool) -> Option<usize> {
    let r = v.round();
    if (v - r).abs() > 1e-6 || r < 0.0 || r as usize >= k {
        return None;
    }
    Some(if reversed { k - 1 - r as usize } else { r as usize })
}

/// Axis tick text: no decimals on whole numbers, one or two otherwise.
pub(super) fn axis_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(super) fn int_label(v: &f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{}", v.round())
    } else {
        String::new()
    }
}

/// Headroom above the largest value, and a positive range even for zeros.
pub(super) fn top(max: f64) -> f64 {
    if max.is_finite() && max > 0.0 {
        max * 1.15
    } else {
        1.0
    }
}

/// The value axis' top for `values` with intervals reaching `interval_tops`:
/// an interval may lift it to twice the highest value, no further, so one
/// disturbed run's wide interval cannot flatten every bar and line beside it
/// (its bar is cut at the top instead).
pub(super) fn value_top(values: impl Iterator<Item = f64>, interval_tops: impl Iterator<Item = f64>) -> f64 {
    let v = max_of(values);
    let i = max_of(interval_tops);
    top(if v > 0.0 { v.max(i.min(2.0 * v)) } else { i })
}

pub(super) fn max_of(it: impl Iterator<Item = f64>) -> f64 {
    it.filter(|v| v.is_finite()).fold(0.0, f64::max)
}
