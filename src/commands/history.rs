//! `gpubench history FILES`: series, their changes and drift, the tables,
//! the exports and charts, an acknowledgement appended, the gate's exit code.
use anyhow::Result;
use std::path::Path;

use crate::error::usage;
use crate::report::charts;
use crate::report::envelope::Envelope;
use crate::report::export::Format;
use crate::report::history::{self, acks, output};
use crate::report::html::{Outcome, Page};
use crate::report::pipeline::{charts_for, emit_all, finish};
use crate::report::summary::load_columns;
use crate::results::packed::Columns;

/// What `history` was asked to do besides analysing.
#[derive(Debug, Clone)]
pub(crate) struct HistoryJob {
    pub files: Vec<std::path::PathBuf>,
    pub options: history::Options,
    pub acks: Option<std::path::PathBuf>,
    /// `--ack ID` with its kind and reason.
    pub ack: Option<(String, acks::Kind, String)>,
    pub gate: bool,
    pub bmf: Option<std::path::PathBuf>,
    pub gab_bigger: Option<std::path::PathBuf>,
    pub gab_smaller: Option<std::path::PathBuf>,
    pub format: Format,
    pub charts: Option<std::path::PathBuf>,
    pub html: Option<std::path::PathBuf>,
}

/// `gpubench history`. Exit 0, or with `--gate` 1 when it fails; unusable
/// input is an error, which `main` maps to 2.
pub(crate) fn run(job: &HistoryJob) -> Result<i32> {
    let acks = match &job.acks {
        Some(p) => acks::read(p)?,
        None => vec![],
    };
    let runs = load_columns(&job.files, Columns::named(history::COLUMNS))?;
    let h = history::analyze(&runs, &acks, &job.options)?;
    drop(runs);
    if let Some((id, kind, reason)) = &job.ack {
        return acknowledge(&h, job.acks.as_deref().expect("clap requires --acks"), id, *kind, reason);
    }
    for (path, bytes) in [
        (&job.bmf, job.bmf.as_ref().map(|_| output::bmf(&h)).transpose()?),
        (&job.gab_bigger, job.gab_bigger.as_ref().map(|_| output::gab(&h, true)).transpose()?),
        (&job.gab_smaller, job.gab_smaller.as_ref().map(|_| output::gab(&h, false)).transpose()?),
    ] {
        if let (Some(p), Some(b)) = (path, bytes) {
            crate::results::write_whole(p, &b)?;
            eprintln!("wrote {}", p.display());
        }
    }
    let tables = output::tables(&h);
    let (dir, html) = (job.charts.as_deref(), job.html.as_deref());
    let mut w = charts_for(dir, html)?;
    let mut notes = vec![];
    if let Some(w) = &mut w {
        notes = charts::history_charts(w, &h)?;
    }
    let code = if job.gate { h.gate_code() } else { 0 };
    let outcome = job.gate.then(|| (if code == 0 { Outcome::Pass } else { Outcome::Fail }, h.summary()));
    let page = |sections| Page { title: "gpubench history".into(), inputs: job.files.clone(), outcome, sections };
    finish(w, dir, html, notes, page, &tables)?;
    if job.format == Format::Json {
        Envelope::new().tables(&tables)?.own("history", output::json(&h))?.print()?;
    } else {
        emit_all(&tables, job.format)?;
    }
    Ok(code)
}

/// `--ack ID`: appends the line when some change or drift of these rows has
/// the id; otherwise refuses, naming what ids there are.
fn acknowledge(h: &history::History, path: &Path, id: &str, kind: acks::Kind, reason: &str) -> Result<i32> {
    let is_drift = h.drifts.iter().any(|d| d.id == id);
    if !h.findings.iter().any(|f| f.id == id) && !is_drift {
        let ids: Vec<&str> = h.findings.iter().map(|f| f.id.as_str()).take(8).collect();
        return Err(usage(format!(
            "--ack {id}: no change or drift of these files has that id ({}); run `gpubench history` on the same \
             files to see the ids",
            if ids.is_empty() { "they have no change".to_string() } else { format!("theirs: {}", ids.join(", ")) }
        )));
    }
    if is_drift && kind == acks::Kind::Expected {
        return Err(usage(format!(
            "--ack {id} is a drift: a drift can be accepted, not expected (use --kind accepted)"
        )));
    }
    acks::append(path, kind, id, reason)?;
    println!("{}: {} {id} ({reason})", path.display(), kind.word());
    Ok(0)
}
