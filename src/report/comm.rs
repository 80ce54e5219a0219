//! `report` for all-reduce rows (`gpubench allreduce`): per machine,
//! backend, world size, dtype and placement, each message size's time and
//! bandwidths (medians over repeats), and busbw against size for the chart.
use crate::results::Fields;
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::export::{Cell, Column, Table};
use super::format::{fmt_bytes, fmt_rate};
use super::summary::{cell_opt, column_median, files_phrase, int_cell, Run};

/// What an all-reduce curve is: machine, label, backend, ranks, dtype, in place.
pub(crate) type CurveKey = (String, String, String, u32, String, bool);

/// Every ok all-reduce row, by curve and size (run indices).
pub(crate) fn curves(runs: &[Run]) -> BTreeMap<CurveKey, BTreeMap<u64, Vec<usize>>> {
    let mut by: BTreeMap<CurveKey, BTreeMap<u64, Vec<usize>>> = BTreeMap::new();
    for (i, r) in runs.iter().enumerate().filter(|(_, r)| r.row.is_allreduce() && r.is_ok()) {
        let (Some(bytes), Some(ip)) = (r.row.bytes(), r.row.in_place()) else { continue };
        let row = &r.row;
        let k = (
            row.device_name().to_string(),
            row.label().to_string(),
            row.backend().to_string(),
            row.n_devices(),
            row.precision().to_string(),
            ip,
        );
        by.entry(k).or_default().entry(bytes).or_default().push(i);
    }
    by
}

pub(crate) fn allreduce_table(runs: &[Run], files: &[PathBuf]) -> Table {
    let columns = vec![
        Column::text("hardware", "hardware"),
        Column::text("label", "label"),
        Column::text("backend", "backend"),
        Column::num("n_devices", "ranks"),
        Column::text("dtype", "dtype"),
        Column::text("placement", "placement"),
        Column::num("bytes", "size"),
        Column::num("runs", "runs"),
        Column::num("time_us", "time us"),
        Column::num("p99_us", "p99 us"),
        Column::num("algbw_gbs", "algbw GB/s"),
        Column::num("busbw_gbs", "busbw GB/s"),
    ];
    let mut rows = vec![];
    for ((hw, label, backend, n, dtype, ip), sizes) in curves(runs) {
        for (bytes, idx) in sizes {
            let us =
                |f: fn(&crate::results::packed::Packed) -> Option<f64>| column_median(runs, &idx, f).map(|ms| ms * 1e3);
            rows.push(vec![
                Cell::text(&hw),
                Cell::text(&label),
                Cell::text(&backend),
                int_cell(Some(n)),
                Cell::text(&dtype),
                Cell::text(if ip { "in-place" } else { "out-of-place" }),
                Cell::num(bytes as f64, fmt_bytes(bytes as f64)),
                int_cell(Some(idx.len() as u32)),
                cell_opt(us(|r| r.step_ms_mean()), fmt_rate),
                cell_opt(us(|r| r.step_ms_p99()), fmt_rate),
                cell_opt(column_median(runs, &idx, |r| r.algbw_gbs()), |v| format!("{v:.3}")),
                cell_opt(column_median(runs, &idx, |r| r.busbw_gbs()), |v| format!("{v:.3}")),
            ]);
        }
    }
    Table {
        title: format!("gpubench all-reduce report: {} sizes from {}", rows.len(), files_phrase(files)),
        columns,
        rows,
        notes: vec![
            "time = mean over back-to-back operations (averaged over ranks); algbw = size ÷ time; busbw = algbw × \
             2(n-1)/n (nccl-tests); GB = 10^9 bytes; medians over repeated runs"
                .into(),
            "out-of-place includes a copy into the output buffer: c10d's all_reduce works in place".into(),
        ],
    }
}
