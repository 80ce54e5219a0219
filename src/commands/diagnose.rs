//! `gpubench diagnose`: the defective nodes and GPUs of a fleet.
use anyhow::Result;
use std::path::Path;

use crate::report::export::Format;
use crate::report::html::{Outcome, Page, Section};
use crate::report::pipeline::{emit, write_html};
use crate::report::summary::load_files;

/// `gpubench diagnose`: the defective nodes and GPUs, a line each, then the table.
pub(crate) fn run(
    files: &[std::path::PathBuf],
    baseline: Option<&Path>,
    max_drop: f64,
    format: Format,
    html_path: Option<&Path>,
) -> Result<i32> {
    let runs = load_files(files)?;
    let base = baseline.map(|b| load_files(&[b.to_path_buf()])).transpose()?;
    let d = crate::report::diagnose::diagnose(&runs, base.as_deref(), max_drop);
    // The findings own what the table shows: the rows' memory is free for it.
    drop((runs, base));
    let table = d.table();
    let lines = d.lines();
    let summary = match lines.len() {
        0 => format!("no defect among {} rows", d.findings.len()),
        n => format!("{n} of {} rows defective", d.findings.len()),
    };
    if let Some(path) = html_path {
        let outcome = if d.exit_code() == 0 { Outcome::Pass } else { Outcome::Fail };
        let mut inputs = files.to_vec();
        inputs.extend(baseline.map(Path::to_path_buf));
        let page = Page {
            title: "gpubench diagnose".into(),
            inputs,
            outcome: Some((
                outcome,
                format!(
                    "{summary}{}",
                    if lines.is_empty() { String::new() } else { format!(": {}", lines.join(" | ")) }
                ),
            )),
            sections: vec![Section::Table(table.clone())],
        };
        write_html(path, &page)?;
    }
    if matches!(format, Format::Table | Format::Markdown) {
        for l in &lines {
            println!("{l}");
        }
        println!("{summary}\n");
    }
    emit(&table, format)?;
    Ok(d.exit_code())
}

