//! `gpubench schema`: the columns of the results, devices and telemetry
//! files, from the same definitions the writers are tested against.
use anyhow::Result;

use crate::report::export::{exporter, Cell, Column, Format, Table};
use crate::results::schema::{ColumnDoc, DEVICES, RESULTS, TELEMETRY};

/// The three files' column tables, one after another.
pub(crate) fn run(format: Format) -> Result<i32> {
    let mut out = vec![];
    let files: [(&str, &[ColumnDoc]); 3] = [
        ("results file (--out FILE.csv), CSV schema v5: one row per run", RESULTS),
        ("devices file (FILE.devices.csv beside --out): one row per run and device", DEVICES),
        ("telemetry file (--telemetry FILE.csv): one row per sample and device", TELEMETRY),
    ];
    for (i, (title, cols)) in files.into_iter().enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        out.extend(exporter(format).export(&table(title, cols))?);
    }
    super::report::print(&out)?;
    Ok(0)
}

fn table(title: &str, cols: &[ColumnDoc]) -> Table {
    Table {
        title: title.into(),
        columns: vec![
            Column::text("column", "column"),
            Column::text("unit", "unit"),
            Column::text("meaning", "meaning"),
        ],
        rows: cols.iter().map(|c| vec![Cell::text(c.name), Cell::text(c.unit), Cell::text(c.meaning)]).collect(),
        notes: vec![],
    }
}
