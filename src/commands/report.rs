//! `gpubench report FILES`: a table by hardware and configuration (training,
//! serving, all-reduce and peaks, each its own), the verdicts, and charts.
use anyhow::Result;
use std::path::PathBuf;

use crate::comm::expected::expected_allreduce;
use crate::report::charts;
use crate::report::comm::allreduce_table;
use crate::report::history;
use crate::report::html::{Page, Section};
use crate::report::pipeline::{charts_for, emit_all, finish, verdict_tables, Outputs};
use crate::report::serving::serving_table;
use crate::report::export::Table;
use crate::report::summary::{load_files, report_table, summarize, Group, Run, Scope};
use crate::report::verdict::{self, Verdict};
use crate::results::long;
use crate::results::Fields;

/// `gpubench report FILES`.
pub(crate) fn run(files: &[PathBuf], out: &Outputs) -> Result<i32> {
    let Outputs { format, charts: charts_dir, html: html_path } = out;
    let (format, charts_dir, html_path) = (*format, charts_dir.as_deref(), html_path.as_deref());
    let runs = load_files(files)?;
    let (devices, device_notes) = long::load_devices(files);
    let all: Vec<usize> = (0..runs.len()).collect();
    let has_allreduce = runs.iter().any(|r| r.row.is_allreduce());
    let groups = summarize(&runs, &all, Scope::of, &devices);
    // Training and serving rows answer different questions: a table each.
    let (serving, training): (Vec<Group>, Vec<Group>) = groups.into_iter().partition(|g| g.key.is_infer());
    let mut tables = vec![];
    let Training { mut table, why, verdicts } = self::training(&runs, &training, files, true);
    let has_peaks = runs.iter().any(|r| r.row.is_peak());
    if !training.is_empty() || (serving.is_empty() && !has_allreduce && !has_peaks) {
        table.notes.extend(device_notes);
        table.notes.extend(crate::report::published::notes(&runs, &training));
        tables.push(table);
        tables.extend(verdicts);
    }
    if !serving.is_empty() {
        tables.push(serving_table(&runs, &serving, files));
    }
    if has_allreduce {
        tables.push(allreduce_table(&runs, files));
    }
    tables.extend(crate::report::peaks::peaks_table(&runs));
    let mut w = charts_for(charts_dir, html_path)?;
    let mut notes = vec![];
    if let Some(w) = &mut w {
        notes = training_charts(w, &runs, &training, &devices, &why)?;
        notes.extend(charts::serving_charts(w, &runs, &serving)?);
        charts::allreduce_charts(w, &runs)?;
    }
    let history = if html_path.is_some() { history_sections(&runs)? } else { vec![] };
    // The tables and charts own what they show: the rows' memory is free for the output.
    drop(runs);
    let page = |mut sections: Vec<Section>| {
        sections.extend(history);
        Page { title: "gpubench report".into(), inputs: files.to_vec(), outcome: None, sections }
    };
    finish(w, charts_dir, html_path, notes, page, &tables)?;
    emit_all(&tables, format)?;
    Ok(0)
}

/// The training report over `groups`: its table, the scaling verdicts, and
/// theirs. `report` and `sweep` both show it.
pub(crate) struct Training {
    pub table: Table,
    pub why: Vec<Verdict>,
    pub verdicts: Vec<Table>,
}

/// `curves_read`: whether the rows were searched for an all-reduce curve to
/// hold ddp's communication against (a sweep's file holds none).
pub(crate) fn training(runs: &[Run], groups: &[Group], files: &[PathBuf], curves_read: bool) -> Training {
    let why = verdict::verdicts(runs, groups, &expected_allreduce(runs));
    let verdicts = verdict_tables(&why, curves_read);
    Training { table: report_table(runs, groups, files), why, verdicts }
}

/// The training report's charts: each scenario's, and the verdicts'.
pub(crate) fn training_charts(
    w: &mut charts::ChartWriter,
    runs: &[Run],
    groups: &[Group],
    devices: &long::DeviceData,
    why: &[Verdict],
) -> Result<Vec<String>> {
    let mut notes = charts::report_charts(w, runs, groups, devices)?;
    notes.extend(charts::verdict_chart(w, why)?);
    Ok(notes)
}

/// The page's history section, when the files hold a history: some
/// configuration measured at enough commits (or sweeps) to be judged.
/// Nothing otherwise: one night's results are no history.
fn history_sections(runs: &[Run]) -> Result<Vec<Section>> {
    let Ok(h) = history::analyze(runs, &[], &history::Options::default()) else { return Ok(vec![]) };
    let mut w = charts::ChartWriter::in_memory();
    let notes = charts::history_charts(&mut w, &h)?;
    let mut tables = history::output::tables(&h);
    tables[0].title = format!("history: {}", h.summary());
    let mut sections: Vec<Section> = tables.into_iter().map(Section::Table).collect();
    sections.push(Section::Charts { charts: w.svgs, notes });
    Ok(sections)
}
