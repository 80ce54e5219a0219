//! `gpubench schema`: the columns of the results, devices and telemetry
//! files, from the same definitions the writers are tested against.
use anyhow::Result;

use crate::report::export::{Cell, Column, Format, Table};
use crate::report::pipeline::emit_all;
use crate::results::csv::SCHEMA_VERSION;
use crate::results::schema::{ColumnDoc, DEVICES, RESULTS, TELEMETRY};

/// The three files' column tables, one after another (one JSON document).
pub(crate) fn run(format: Format) -> Result<i32> {
    let results = format!("results file (--out FILE.csv), CSV schema v{SCHEMA_VERSION}: one row per run");
    let files: [(&str, &[ColumnDoc]); 3] = [
        (&results, RESULTS),
        ("devices file (FILE.devices.csv beside --out): one row per run and device", DEVICES),
        ("telemetry file (--telemetry FILE.csv): one row per sample and device", TELEMETRY),
    ];
    let tables: Vec<Table> = files.into_iter().map(|(title, cols)| table(title, cols)).collect();
    emit_all(&tables, format)?;
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
