//! `report` for peak rows (`gpubench peak --out FILE`): each device's
//! measured matmul ceiling by precision, the latest measurement of each, and
//! the training rows' efficiency against it.
use crate::results::Fields;
use std::collections::BTreeMap;

use super::export::{Cell, Column, Table};
use super::summary::Run;

/// One row per host, device and precision: the newest peak's TFLOP/s (by
/// its RFC 3339 timestamp, which sorts as text, whatever order the files
/// were given in).
pub(crate) fn peaks_table(runs: &[Run]) -> Option<Table> {
    let mut latest: BTreeMap<(String, String, String), &Run> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.row.is_peak() && r.is_ok()) {
        let key = (r.row.host().to_string(), r.row.device_name().to_string(), r.row.precision().to_string());
        if latest.get(&key).is_none_or(|old| old.row.timestamp() <= r.row.timestamp()) {
            latest.insert(key, r);
        }
    }
    if latest.is_empty() {
        return None;
    }
    let columns = vec![
        Column::text("host", "host"),
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
                Cell::text(row.host()),
                Cell::text(row.device_name()),
                Cell::text(row.precision()),
                row.achieved_tflops().map_or(Cell::none(), |t| Cell::num(t, format!("{t:.3}"))),
                row.mfu_datasheet_pct().map_or(Cell::none(), |p| Cell::num(p, format!("{p:.0}%"))),
                Cell::text(row.timestamp()),
            ]
        })
        .collect();
    let notes =
        latest.values().map(|r| format!("{} {}: {}", r.row.device_name(), r.row.precision(), r.row.note())).collect();
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
            (r.mode, r.achieved_tflops, r.throughput_img_s) = (crate::results::Mode::Peak, Some(t), None);
            (r.precision, r.timestamp) = ("bf16".into(), stamp.into());
            r
        };
        // The newest wins, in whichever order the files came.
        let runs = runs_of(vec![
            peak(0.42, "2026-12-04T10:00:00Z"),
            peak(0.40, "2026-12-01T10:00:00Z"),
            row("single", 1, 100.0),
        ]);
        let t = peaks_table(&runs).expect("a table");
        assert_eq!(t.rows.len(), 1);
        assert_eq!((t.rows[0][3].display(), t.rows[0][5].display()), ("0.420", "2026-12-04T10:00:00Z"));
        assert!(peaks_table(&runs_of(vec![row("single", 1, 100.0)])).is_none());
    }
}
