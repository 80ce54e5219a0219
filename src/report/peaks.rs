//! `report` for peak rows (`gpubench peak --out FILE`): each device's
//! measured matmul ceiling by precision, the latest measurement of each, and
//! the training rows' efficiency against it.
use std::collections::BTreeMap;

use super::export::{Cell, Column, Table};
use super::summary::Run;

/// One row per device and precision: the latest peak row's TFLOP/s (rows
/// are read in file order, so a later measurement replaces an earlier one).
pub(crate) fn peaks_table(runs: &[Run]) -> Option<Table> {
    let mut latest: BTreeMap<(String, String), &Run> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.row.is_peak() && r.is_ok()) {
        latest.insert((r.row.device_name.clone(), r.row.precision.clone()), r);
    }
    if latest.is_empty() {
        return None;
    }
    let columns = vec![
        Column::text("device", "device"),
        Column::text("precision", "precision"),
        Column::num("tflops", "TFLOP/s"),
        Column::num("of_datasheet_pct", "of datasheet"),
        Column::text("measured_at", "measured"),
    ];
    let rows = latest
        .values()
        .map(|r| {
            let row = &r.row;
            vec![
                Cell::text(&row.device_name),
                Cell::text(&row.precision),
                row.achieved_tflops.map_or(Cell::none(), |t| Cell::num(t, format!("{t:.3}"))),
                row.mfu_datasheet_pct.map_or(Cell::none(), |p| Cell::num(p, format!("{p:.0}%"))),
                Cell::text(&row.timestamp),
            ]
        })
        .collect();
    let notes = latest.values().map(|r| format!("{} {}: {}", r.row.device_name, r.row.precision, r.row.note)).collect();
    Some(Table { title: "measured matmul peaks (gpubench peak): the ceiling of mfu_pct".into(), columns, rows, notes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::summary::tests::{row, runs_of};

    #[test]
    fn the_latest_peak_of_each_device_and_precision_is_shown() {
        let peak = |t: f64, stamp: &str| {
            let mut r = row("single", 1, 0.0);
            (r.mode, r.achieved_tflops, r.throughput_img_s) = ("peak".into(), Some(t), None);
            (r.precision, r.timestamp) = ("bf16".into(), stamp.into());
            r
        };
        let runs = runs_of(vec![peak(0.40, "t1"), peak(0.42, "t2"), row("single", 1, 100.0)]);
        let t = peaks_table(&runs).expect("a table");
        assert_eq!(t.rows.len(), 1);
        assert_eq!((t.rows[0][2].display(), t.rows[0][4].display()), ("0.420", "t2"));
        assert!(peaks_table(&runs_of(vec![row("single", 1, 100.0)])).is_none());
    }
}
