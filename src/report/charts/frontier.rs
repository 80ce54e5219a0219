//! `max-batch --frontier`'s chart: throughput against the global batch (log
//! scale, drawn as log2), a line per memory lever. The lines come decided
//! (`sweep::frontier::lines`); this only draws them.
use anyhow::Result;

use super::draw::TAB10;
use super::serving::{XyChart, XyLine};
use super::ChartWriter;

fn batch_label(x: f64) -> String {
    format!("{}", 2f64.powf(x).round())
}

/// Draws `frontier.svg` (and `.png`): `lines` are (lever, [(global batch, img/s)]).
pub(crate) fn frontier_chart(
    w: &mut ChartWriter,
    subtitle: String,
    lines: Vec<(String, Vec<(f64, f64)>)>,
) -> Result<()> {
    let lines = lines
        .into_iter()
        .enumerate()
        .map(|(i, (name, pts))| XyLine {
            name,
            color: TAB10[i % 10],
            points: pts.into_iter().filter(|p| p.0 >= 1.0).map(|(b, t)| (b.log2(), t)).collect(),
        })
        .collect();
    w.write(
        "frontier",
        &XyChart {
            title: "throughput against the global batch, by memory lever".into(),
            subtitle,
            x_desc: "global batch (log scale; the last point of a line is its way to the target)".into(),
            y_desc: "img/s".into(),
            lines,
            limit: None,
            x_fmt: batch_label,
        },
    )
}
