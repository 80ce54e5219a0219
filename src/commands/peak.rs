//! `gpubench peak`: each device's matmul peak per precision
//! (`bench::peak::measure_all`), printed beside the datasheet figure where
//! one is known; the rows to `--out`, the peaks kept (`results::peak`).
use anyhow::Result;

use crate::bench::peak::{measure_all, PeakPlan};
use crate::report::export::{Cell, Column, Table};

pub(crate) fn run(plan: &PeakPlan) -> Result<i32> {
    let all = measure_all(plan)?;
    let rows = all
        .measured
        .iter()
        .map(|m| {
            let r = &m.rounds;
            let of_sheet = m.sheet.map(|s| r.median / s);
            vec![
                Cell::text(&m.name),
                Cell::text(m.precision.name()),
                Cell::num(r.median, format!("{:.3}", r.median)),
                Cell::text(format!("{:.3}–{:.3}", r.lo, r.hi)),
                Cell::num(r.lo, ""),
                Cell::num(r.hi, ""),
                Cell::num(r.size as f64, ""),
                m.sheet.map_or(Cell::none(), |s| Cell::num(s, format!("{s}"))),
                of_sheet.map_or(Cell::none(), |f| Cell::num(f, format!("{:.0}%", 100.0 * f))),
            ]
        })
        .collect();
    let table = Table {
        title: format!("matmul peak: {n}×{n}×{n}, median of {} rounds", plan.rounds, n = plan.size),
        columns: vec![
            Column::text("device", "device"),
            Column::text("precision", "precision"),
            Column::num("tflops", "TFLOP/s"),
            Column::text("range", "rounds' range"),
            Column::raw("lo"),
            Column::raw("hi"),
            Column::raw("size"),
            Column::num("datasheet_tflops", "datasheet"),
            Column::num("of_datasheet", "of datasheet"),
        ],
        rows,
        notes: all.notes,
    };
    crate::report::pipeline::emit(&table, plan.format)?;
    if let Some(out) = &plan.out {
        crate::results::csv::append_rows(out, &all.rows)?;
        eprintln!("appended {} peak row(s) to {}", all.rows.len(), out.display());
    }
    if let Some(p) = all.kept {
        eprintln!("kept in {}: runs on this device report their MFU against it (mfu_pct)", p.display());
    }
    if let Some(e) = all.store_failed {
        eprintln!("error: the peaks were measured but not kept ({e:#}); set GPUBENCH_PEAKS to a writable file");
        return Ok(1);
    }
    Ok(0)
}
