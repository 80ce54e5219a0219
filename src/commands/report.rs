//! `report`, `compare` and `check`: where their output goes. Tables go to
//! stdout; notes about charts go to stderr, so that `--format csv|json`
//! output stays machine-readable. `--html` gets the same tables and the very
//! SVG charts `--charts` writes, on one page.
use anyhow::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::comm::curve::curve;
use crate::config::{Backend, CommHook, CurveSource, ModelKind};
use crate::error::usage;
use crate::report::charts::{self, ChartWriter};
use crate::report::check::{self, CheckOptions};
use crate::report::comm::allreduce_table;
use crate::report::compare;
use crate::report::export::{exporter, Format, Table};
use crate::report::html::{self, Outcome, Page, Section};
use crate::report::serving::serving_table;
use crate::report::summary::{load_files, report_table, summarize, Group, Run, Scope};
use crate::report::verdict::{self, Expected, Verdict};
use crate::results::csv::Row;
use crate::results::long;

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

pub(crate) fn emit(table: &Table, format: Format) -> Result<()> {
    print(&exporter(format).export(table)?)?;
    // CSV has no place for notes; keep them visible without breaking parsers.
    if format == Format::Csv {
        for n in &table.notes {
            eprintln!("note: {n}");
        }
    }
    Ok(())
}

/// Opens the chart directory with a font if one is usable; otherwise says in
/// one line why only SVGs are written.
pub(crate) fn chart_writer(dir: &Path) -> Result<ChartWriter> {
    if let Some(f) = std::env::var_os("GPUBENCH_FONT").filter(|f| !f.is_empty()) {
        if !Path::new(&f).is_file() {
            eprintln!("note: GPUBENCH_FONT={} is not a file; looking for a font elsewhere", Path::new(&f).display());
        }
    }
    let font = match charts::find_font() {
        Ok(p) => Some(p),
        Err(msg) => {
            eprintln!("note: {msg}");
            None
        }
    };
    match ChartWriter::new(dir, font.as_deref()) {
        Err(e) if font.is_some() && crate::error::exit_code(&e) != 2 => {
            eprintln!("note: {}; PNG charts skipped, only SVG written", crate::error::one_line(&e));
            ChartWriter::new(dir, None)
        }
        r => r,
    }
}

fn say_written(w: &ChartWriter, dir: &Path, notes: &[String]) {
    for n in notes {
        eprintln!("note: {n}");
    }
    eprintln!(
        "wrote {} chart file{} to {}",
        w.written.len(),
        if w.written.len() == 1 { "" } else { "s" },
        dir.display()
    );
}

/// The chart writer `--charts` and `--html` need: files in DIR, SVGs kept for
/// the page, both, or none.
pub(crate) fn charts_for(dir: Option<&Path>, html: Option<&Path>) -> Result<Option<ChartWriter>> {
    Ok(match (dir, html) {
        (Some(d), h) => Some(chart_writer(d).map(|w| if h.is_some() { w.keeping_svgs() } else { w })?),
        (None, Some(_)) => Some(ChartWriter::in_memory()),
        (None, None) => None,
    })
}

/// Says what was drawn, and writes the page when one was asked for.
pub(crate) fn finish(
    w: Option<ChartWriter>,
    dir: Option<&Path>,
    html_path: Option<&Path>,
    notes: Vec<String>,
    page: impl FnOnce(Vec<Section>) -> Page,
    tables: &[Table],
) -> Result<()> {
    if let (Some(w), Some(d)) = (&w, dir) {
        say_written(w, d, &notes);
    } else {
        for n in &notes {
            eprintln!("note: {n}");
        }
    }
    if let Some(path) = html_path {
        let mut sections: Vec<Section> = tables.iter().cloned().map(Section::Table).collect();
        let charts = w.map(|w| w.svgs).unwrap_or_default();
        sections.push(Section::Charts { charts, notes });
        write_html(path, &page(sections))?;
    }
    Ok(())
}

/// Writes the page and says where, and whether it replaced one.
fn write_html(path: &Path, page: &Page) -> Result<()> {
    let replaced = crate::results::write_whole(path, &html::render(page))?;
    eprintln!("wrote {}{}", path.display(), if replaced { " (replacing the previous page)" } else { "" });
    Ok(())
}

/// Where `report` and `compare` put their output: the table's format,
/// `--charts DIR` and `--html FILE`.
pub(crate) struct Outputs<'a> {
    pub format: Format,
    pub charts: Option<&'a Path>,
    pub html: Option<&'a Path>,
}

impl Outputs<'_> {
    /// Refuses an unusable `--html` path before any work.
    fn check(&self) -> Result<()> {
        self.html.map_or(Ok(()), html::check_html_path)
    }
}

/// `gpubench report FILES`.
pub(crate) fn run_report(files: &[PathBuf], out: &Outputs) -> Result<i32> {
    out.check()?;
    let Outputs { format, charts: charts_dir, html: html_path } = *out;
    let runs = load_files(files)?;
    let (devices, device_notes) = long::load_devices(files);
    let all: Vec<usize> = (0..runs.len()).collect();
    let has_allreduce = runs.iter().any(|r| r.row.is_allreduce());
    let groups = summarize(&runs, &all, Scope::of, &devices);
    // Training and serving rows answer different questions: a table each.
    let (serving, training): (Vec<Group>, Vec<Group>) = groups.into_iter().partition(|g| g.key.is_infer());
    let mut tables = vec![];
    let v = verdict::verdicts(&runs, &training, &expected_allreduce(&runs));
    let has_peaks = runs.iter().any(|r| r.row.is_peak());
    if !training.is_empty() || (serving.is_empty() && !has_allreduce && !has_peaks) {
        let mut t = report_table(&runs, &training, files);
        t.notes.extend(device_notes);
        t.notes.extend(crate::report::published::notes(&runs, &training));
        tables.push(t);
        tables.extend(verdict_tables(&v, true));
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
        notes = charts::report_charts(w, &runs, &training, &devices)?;
        notes.extend(charts::verdict_chart(w, &v)?);
        notes.extend(charts::serving_charts(w, &runs, &serving)?);
        charts::allreduce_charts(w, &runs)?;
    }
    let page = |sections| Page { title: "gpubench report".into(), inputs: files.to_vec(), outcome: None, sections };
    finish(w, charts_dir, html_path, notes, page, &tables)?;
    for t in &tables {
        emit(t, format)?;
    }
    Ok(0)
}

/// The verdicts' tables: the parts, then their waterfall; none without verdicts.
/// `curves_read`: all-reduce rows were looked for among the files read, so a
/// ddp verdict without a curve says where (sweep reads its own rows only).
pub(crate) fn verdict_tables(v: &[Verdict], curves_read: bool) -> Vec<Table> {
    if v.is_empty() {
        return vec![];
    }
    let mut t = verdict::table(v);
    if curves_read && v.iter().any(|v| v.wants_curve) {
        t.notes.push(
            "no all-reduce curve for some ddp configuration's world size and backend among the files read: add \
             `gpubench allreduce --out FILE` output, of the same ranks and backend, to the files for what the \
             all-reduce alone should cost"
                .into(),
        );
    }
    vec![t, verdict::waterfall_table(v)]
}

/// What a ddp row's gradient all-reduce alone should cost, from an
/// all-reduce curve among the files read (rows of `gpubench allreduce --out
/// FILE`) of the same world size and backend, in the dtype the gradients
/// travel in: the row's gradient bytes (`mem_grads_mb`; for older rows the
/// model's parameters counted from its architecture, for ImageNet's 1000
/// classes, gpubench's default) in the row's number of buckets, taken as
/// equal, each all-reduced on its own.
pub(crate) fn expected_allreduce(runs: &[Run]) -> impl Fn(&Row) -> Option<Expected> + '_ {
    // Each file's all-reduce rows, gathered once for every verdict.
    let mut files: Vec<(&Path, Vec<Row>)> = vec![];
    for r in runs.iter().filter(|r| r.row.is_allreduce()) {
        match files.iter_mut().find(|(f, _)| *f == r.file.as_path()) {
            Some((_, rows)) => rows.push(r.row.clone()),
            None => files.push((&r.file, vec![r.row.clone()])),
        }
    }
    move |row| {
        if row.strategy != "ddp" {
            return None;
        }
        let backend = Backend::ALL.into_iter().find(|b| b.name() == row.backend)?;
        // Rows from before the column have no hook: the Reducer's own fp32.
        let hook = match row.comm_hook.as_str() {
            "" => CommHook::None,
            h => CommHook::ALL.into_iter().find(|k| k.name() == h)?,
        };
        let buckets = row.ddp_buckets.filter(|&b| b > 0)?;
        files.iter().find_map(|(f, rows)| {
            let c = curve(&CurveSource::File(f.to_path_buf()), rows, row.n_devices as usize, backend, hook)?;
            // The run's own gradient bytes (fp32) where its row has them.
            let fp32 = match row.mem_grads_mb {
                Some(mb) => mb * 1048576.0,
                None => {
                    let model = ModelKind::ALL.into_iter().find(|m| m.name() == row.model)?;
                    crate::arch::param_count(model, 1000) as f64 * 4.0
                }
            };
            let wire = if hook == CommHook::None { 1.0 } else { 0.5 };
            let each = fp32 * wire / buckets as f64;
            Some(Expected {
                ms: buckets as f64 * c.time(each) * 1e3,
                from: format!(
                    "{}, the gradients in {buckets} equal bucket{} of {}",
                    c.describe(),
                    if buckets == 1 { "" } else { "s" },
                    binary_bytes(each)
                ),
            })
        })
    }
}

/// Bytes with a binary unit: "21.2 KiB", "22.3 MiB", "512 bytes".
fn binary_bytes(b: f64) -> String {
    let t = crate::report::format::fmt_bytes(b);
    match t.strip_suffix(['K', 'M', 'G']) {
        Some(n) => format!("{n} {}iB", &t[n.len()..]),
        None => format!("{t} bytes"),
    }
}

/// `gpubench compare FILES`.
pub(crate) fn run_compare(files: &[PathBuf], out: &Outputs) -> Result<i32> {
    out.check()?;
    let Outputs { format, charts: charts_dir, html: html_path } = *out;
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
    for t in &tables {
        emit(t, format)?;
    }
    Ok(0)
}

/// `gpubench check`. Exit 0 when nothing regressed, 1 when something did (or, with --strict,
/// is missing); unusable input is an error, which `main` maps to 2.
pub(crate) fn run_check(
    baseline: &Path,
    current: &Path,
    opts: &CheckOptions,
    format: Format,
    html_path: Option<&Path>,
) -> Result<i32> {
    if opts.metrics.is_empty() {
        return Err(usage("--metric needs at least one of throughput, scaling, step-p50, step-p90, latency-p99"));
    }
    if let Some(p) = html_path {
        html::check_html_path(p)?;
    }
    let base = load_files(&[baseline.to_path_buf()])?;
    let cur = load_files(&[current.to_path_buf()])?;
    let report = check::check(&base, &cur, opts)?;
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

/// `gpubench diagnose`: the defective nodes and GPUs, a line each, then the table.
pub(crate) fn run_diagnose(
    files: &[std::path::PathBuf],
    baseline: Option<&Path>,
    max_drop: f64,
    format: Format,
    html_path: Option<&Path>,
) -> Result<i32> {
    let runs = load_files(files)?;
    let base = baseline.map(|b| load_files(&[b.to_path_buf()])).transpose()?;
    let d = crate::report::diagnose::diagnose(&runs, base.as_deref(), max_drop);
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

/// `gpubench trace-summary DIR`.
pub(crate) fn run_trace_summary(dir: &Path, json: bool) -> Result<i32> {
    let rows = crate::report::trace::summarize_dir(dir)?;
    if json {
        print(serde_json::to_string(&rows)?.as_bytes())?;
        print(b"\n")?;
    } else {
        print(crate::report::trace::table(&rows).as_bytes())?;
    }
    Ok(0)
}
