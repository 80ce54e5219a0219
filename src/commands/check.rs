//! `gpubench check`: the CI gate's verdict, its table, its exit code.
use anyhow::Result;
use std::path::Path;

use crate::report::check::{self, CheckOptions};
use crate::report::export::Format;
use crate::report::history;
use crate::report::html::{Outcome, Page, Section};
use crate::report::pipeline::{emit, write_html};
use crate::report::summary::load_columns;
use crate::results::packed::Columns;

/// `--baseline-from-history`: the baseline is a history, cut to each
/// configuration's current level.
#[derive(Debug, Clone)]
pub(crate) struct FromHistory {
    pub acks: Option<std::path::PathBuf>,
}

/// `gpubench check`. Exit 0 when nothing regressed, 1 when something did (or, with --strict,
/// is missing); unusable input is an error, which `main` maps to 2.
pub(crate) fn run(
    baseline: &Path,
    current: &Path,
    opts: &CheckOptions,
    history: Option<&FromHistory>,
    format: Format,
    html_path: Option<&Path>,
) -> Result<i32> {
    // The two files are independent: read side by side (a CI runner has a
    // core to spare, and a year of nightly rows takes seconds to read).
    let keep = Columns::named(check::COLUMNS);
    let base_keep = if history.is_some() { keep.with(Columns::named(history::COLUMNS)) } else { keep };
    let (base, cur) = std::thread::scope(|s| {
        let b = s.spawn(|| load_columns(&[baseline.to_path_buf()], base_keep));
        let c = load_columns(&[current.to_path_buf()], keep);
        (b.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), c)
    });
    // The baseline's problem first, as when they were read in turn.
    let (mut base, cur) = (base?, cur?);
    if let Some(h) = history {
        let acks = h.acks.as_deref().map(history::acks::read).transpose()?.unwrap_or_default();
        let options = history::Options {
            metrics: vec![check::Metric::Throughput, check::Metric::Scaling, check::Metric::LatencyP99],
            implementation: opts.implementation,
            ..history::Options::default()
        };
        let rows = history::current_level_rows(&base, &acks, &options)?;
        let before = base.len();
        base = rows.into_iter().map(|i| base[i].clone()).collect();
        eprintln!(
            "note: baseline from history: {} of {before} row(s) of {}, each configuration's current level",
            base.len(),
            baseline.display()
        );
    }
    let report = check::check(&base, &cur, opts)?;
    // The report owns what the table shows: the rows' memory is free for it.
    drop((base, cur));
    let table = report.table();
    if let Some(path) = html_path {
        let outcome = if report.exit_code() == 0 { Outcome::Pass } else { Outcome::Fail };
        let page = Page {
            title: "gpubench check".into(),
            inputs: vec![baseline.to_path_buf(), current.to_path_buf()],
            outcome: Some((outcome, report.summary())),
            sections: vec![Section::Table(table.clone())],
        };
        write_html(path, &page)?;
    }
    emit(&table, format)?;
    Ok(report.exit_code())
}
