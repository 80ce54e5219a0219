//! The all-reduce chart: bus bandwidth against message size (log scale,
//! drawn as log2 bytes), one line per backend, world size, dtype and
//! placement, per machine.
use anyhow::Result;
use std::collections::BTreeMap;

use super::draw::TAB10;
use super::serving::{XyChart, XyLine};
use super::ChartWriter;
use crate::report::comm::curves;
use crate::report::format::fmt_bytes;
use crate::report::summary::{column_median, Run};
use crate::results::Fields;

fn size_label(x: f64) -> String {
    fmt_bytes(2f64.powf(x).round())
}

/// Draws one busbw chart per machine that has all-reduce rows.
pub(crate) fn allreduce_charts(w: &mut ChartWriter, runs: &[Run]) -> Result<()> {
    let mut by_machine: BTreeMap<(String, String), Vec<XyLine>> = BTreeMap::new();
    for (i, ((hw, label, backend, n, dtype, ip), sizes)) in curves(runs).into_iter().enumerate() {
        let points: Vec<(f64, f64)> = sizes
            .iter()
            .filter_map(|(&b, idx)| Some(((b as f64).log2(), column_median(runs, idx, |r| r.busbw_gbs())?)))
            .collect();
        let name = format!("{backend} ×{n} {dtype} {}", if ip { "in-place" } else { "out-of-place" });
        by_machine.entry((hw, label)).or_default().push(XyLine { name, color: TAB10[i % 10], points });
    }
    let many = by_machine.len() > 1;
    for (k, ((hw, label), lines)) in by_machine.into_iter().enumerate() {
        let stem = if many { format!("allreduce-busbw-{}", k + 1) } else { "allreduce-busbw".into() };
        let subtitle = if label.is_empty() { hw } else { format!("{hw} ({label})") };
        w.write(
            &stem,
            &XyChart {
                title: "all-reduce bus bandwidth against message size".into(),
                subtitle,
                x_desc: "message size (bytes, log scale)".into(),
                y_desc: "busbw (GB/s)".into(),
                lines,
                limit: None,
                x_fmt: size_label,
            },
        )?;
    }
    Ok(())
}
