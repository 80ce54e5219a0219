//! `gpubench compare FILES`: result sets side by side, each with the
//! verdicts against its own 1-device run.
use anyhow::Result;
use std::path::PathBuf;

use crate::report::charts;
use crate::comm::expected::expected_allreduce;
use crate::report::compare;
use crate::report::html::Page;
use crate::report::pipeline::{charts_for, emit_all, finish, verdict_tables, Outputs};
use crate::report::summary::load_files;
use crate::results::long;

/// `gpubench compare FILES`.
pub(crate) fn run(files: &[PathBuf], out: &Outputs) -> Result<i32> {
    let Outputs { format, charts: charts_dir, html: html_path } = out;
    let (format, charts_dir, html_path) = (*format, charts_dir.as_deref(), html_path.as_deref());
    let runs = load_files(files)?;
    let (devices, _) = long::load_devices(files);
    let cmp = compare::compare(&runs, &devices)?;
    let table = cmp.table(&runs);
    let v = cmp.verdicts(&runs, &expected_allreduce(&runs));
    let mut tables = vec![table];
    tables.extend(verdict_tables(&v, true));
    let mut w = charts_for(charts_dir, html_path)?;
    let mut notes = vec![];
    if let Some(w) = &mut w {
        let (keys, values) = cmp.chart_data();
        let names: Vec<String> = cmp.sets.iter().map(|s| s.name.clone()).collect();
        if keys.is_empty() {
            notes.push("compare chart skipped: no set has a throughput figure".to_string());
        } else {
            charts::compare_chart(w, &names, &keys, values)?;
        }
        notes.extend(charts::verdict_chart(w, &v)?);
    }
    let page = |sections| Page { title: "gpubench compare".into(), inputs: files.to_vec(), outcome: None, sections };
    finish(w, charts_dir, html_path, notes, page, &tables)?;
    emit_all(&tables, format)?;
    Ok(0)
}

