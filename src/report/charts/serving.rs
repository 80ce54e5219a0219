//! Serving charts: p99 latency against the rate answered (where a server's
//! knee is), and p99 latency against the number of camera streams with the
//! latency bound drawn, one line per strategy.
use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;

use super::draw::*;
use super::Chart;
use super::{pe, ChartWriter};
use crate::report::format::fmt_rate;
use crate::report::summary::{column_median, Group, Run, Scope};
use crate::results::Fields;

pub(crate) struct XyLine {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

/// Points joined by lines on continuous axes, with an optional horizontal
/// limit (the latency bound).
pub(crate) struct XyChart {
    pub title: String,
    pub subtitle: String,
    pub x_desc: String,
    pub y_desc: String,
    pub lines: Vec<XyLine>,
    pub limit: Option<(f64, String)>,
    /// How x values are labelled (sizes drawn as log2 bytes show as sizes).
    pub x_fmt: fn(f64) -> String,
}

impl Chart for XyChart {
    fn size(&self) -> (u32, u32) {
        (1000, 640)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()> {
        let mut entries: Vec<Legend> = self.lines.iter().map(|l| legend(&l.name, l.color, Mark::Line)).collect();
        if let Some((_, name)) = &self.limit {
            entries.push(legend(name, GRAY, Mark::Dashed));
        }
        let area = frame(root, &self.title, &self.subtitle, &entries)?;
        let xs = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let ys = self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1)).chain(self.limit.as_ref().map(|l| l.0));
        let (x_top, y_top) = (top(max_of(xs)), top(max_of(ys)));
        let mut chart = ChartBuilder::on(&area)
            .margin(16)
            .margin_right(40)
            .x_label_area_size(56)
            .y_label_area_size(90)
            .build_cartesian_2d(0.0..x_top, 0.0..y_top)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .x_label_formatter(&|x| (self.x_fmt)(*x))
            .y_label_formatter(&|y| axis_num(*y))
            .house_style(14, 16)
            .draw()
            .map_err(pe)?;
        if let Some((y, _)) = &self.limit {
            chart
                .draw_series(DashedLineSeries::new(vec![(0.0, *y), (x_top, *y)], 10, 6, GRAY.stroke_width(2)))
                .map_err(pe)?;
        }
        for l in &self.lines {
            chart.draw_series(LineSeries::new(l.points.clone(), l.color.stroke_width(3))).map_err(pe)?;
            chart.draw_series(l.points.iter().map(|p| Circle::new(*p, 5, l.color.filled()))).map_err(pe)?;
        }
        Ok(())
    }
}

/// What serving charts are drawn per: machine set-up, model, precision,
/// largest batch and scenario.
type ServeKey = (Scope, String, Option<u32>, String, Option<u32>, String);

/// Draws the serving charts the groups allow; returns notes on those left out.
pub(crate) fn serving_charts(w: &mut ChartWriter, runs: &[Run], groups: &[Group]) -> Result<Vec<String>> {
    let mut sets: BTreeMap<ServeKey, Vec<&Group>> = BTreeMap::new();
    for g in groups.iter().filter(|g| g.key.is_infer()) {
        let scenario = runs[g.ok.first().or(g.excluded.first()).copied().unwrap_or(0)].row.scenario().to_string();
        let k = &g.key;
        sets.entry((g.scope.clone(), k.model.clone(), k.image_size, k.precision.clone(), k.batch_per_device, scenario))
            .or_default()
            .push(g);
    }
    let mut notes = vec![];
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for ((scope, model, img, prec, batch, scenario), gs) in &sets {
        // File names say the scenario; a second set of it gets -2, -3, …
        let n = seen.entry(scenario.as_str()).or_default();
        *n += 1;
        let suffix = match (sets.len(), *n) {
            (1, _) => String::new(),
            (_, 1) => format!("-{scenario}"),
            (_, k) => format!("-{scenario}-{k}"),
        };
        let subtitle = format!(
            "{}  |  {model} {}px {prec}, max batch {}  |  {scenario}",
            if scope.label.is_empty() {
                scope.hardware.clone()
            } else {
                format!("{} ({})", scope.hardware, scope.label)
            },
            img.map_or("?".into(), |v| v.to_string()),
            batch.map_or("?".into(), |v| v.to_string())
        );
        let mut by: BTreeMap<(String, u32, crate::results::Implementation), Vec<&Group>> = BTreeMap::new();
        for g in gs {
            by.entry((g.key.strategy.clone(), g.key.n_devices, g.scope.implementation)).or_default().push(g);
        }
        // gpubench's lines in their strategy's colour, PyTorch's beside them in others.
        let line = |(s, n, imp): &(String, u32, crate::results::Implementation), pts: Vec<(f64, f64)>| XyLine {
            name: if *imp == crate::results::Implementation::Gpubench {
                format!("{s} x{n}")
            } else {
                format!("{s} x{n} ({imp})")
            },
            color: match (imp, s.as_str()) {
                (crate::results::Implementation::Gpubench, _) => strategy_color(s),
                (_, "replicas") => TAB10[8],
                _ => TAB10[9],
            },
            points: pts,
        };
        let mut lat = vec![];
        let mut streams = vec![];
        for (k, gs) in &by {
            let mut a: Vec<(f64, f64)> = gs
                .iter()
                .filter_map(|g| Some((g.throughput?, column_median(runs, &g.ok, |r| r.latency_ms_p99())?)))
                .collect();
            a.sort_by(|x, y| x.0.total_cmp(&y.0));
            if !a.is_empty() {
                lat.push(line(k, a));
            }
            let mut s: Vec<(f64, f64)> = gs
                .iter()
                .filter_map(|g| {
                    Some((
                        column_median(runs, &g.ok, |r| r.streams().map(f64::from))?,
                        column_median(runs, &g.ok, |r| r.latency_ms_p99())?,
                    ))
                })
                .collect();
            s.sort_by(|x, y| x.0.total_cmp(&y.0));
            if !s.is_empty() {
                streams.push(line(k, s));
            }
        }
        let bound = gs.iter().find_map(|g| column_median(runs, &g.ok, |r| r.latency_bound_ms()));
        let limit = bound.map(|b| (b, format!("bound {} ms", fmt_rate(b))));
        if lat.is_empty() {
            notes.push(format!("latency chart skipped for {subtitle}: no latency figures (offline rows have none)"));
        } else {
            w.write(
                &format!("serving-latency{suffix}"),
                &XyChart {
                    title: "p99 latency against requests answered per second".into(),
                    subtitle: subtitle.clone(),
                    x_desc: "requests answered per second".into(),
                    y_desc: "p99 latency (ms, from the scheduled arrival)".into(),
                    lines: lat,
                    limit: limit.clone(),
                    x_fmt: axis_num,
                },
            )?;
        }
        if !streams.is_empty() {
            w.write(
                &format!("serving-streams{suffix}"),
                &XyChart {
                    title: "p99 latency against camera streams".into(),
                    subtitle,
                    x_desc: "camera streams".into(),
                    y_desc: "p99 latency (ms, from the scheduled arrival)".into(),
                    lines: streams,
                    limit,
                    x_fmt: axis_num,
                },
            )?;
        }
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::summarize;
    use crate::report::summary::tests::{row, runs_of};
    use crate::results::csv::Row;
    use crate::results::long::DeviceData;

    #[test]
    fn streams_rows_get_both_charts_with_the_bound_and_offline_rows_none() {
        let infer = |s: &str, streams: u32, p99: f64, scenario: &str| Row {
            mode: crate::results::Mode::Infer,
            scenario: scenario.into(),
            streams: (scenario == "streams").then_some(streams),
            fps: Some(5.0),
            latency_bound_ms: Some(100.0),
            latency_ms_p99: (scenario != "offline").then_some(p99),
            ..row(s, 2, streams as f64 * 5.0)
        };
        let runs = runs_of(vec![
            infer("replicas", 10, 20.0, "streams"),
            infer("replicas", 40, 80.0, "streams"),
            infer("processes", 10, 25.0, "streams"),
            infer("replicas", 0, 0.0, "offline"),
        ]);
        let all: Vec<usize> = (0..runs.len()).collect();
        let groups = summarize(&runs, &all, Scope::of, &DeviceData::default());
        let dir = tempfile::tempdir().unwrap();
        let mut w = ChartWriter::new(dir.path(), None).unwrap();
        let notes = serving_charts(&mut w, &runs, &groups).unwrap();
        let names: Vec<String> =
            w.written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        assert_eq!(names, vec!["serving-latency-streams.svg", "serving-streams-streams.svg"], "{notes:?}");
        assert!(notes.iter().any(|n| n.contains("offline rows have none")), "{notes:?}");
        let svg = std::fs::read_to_string(dir.path().join("serving-streams-streams.svg")).unwrap();
        assert!(svg.contains("bound 100 ms") && svg.contains("processes x2") && svg.contains("replicas x2"));
    }
}
