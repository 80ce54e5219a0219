//! `report`, `compare` and `check`: where their output goes. Tables go to
//! stdout; notes about charts go to stderr, so that `--format csv|json`
//! output stays machine-readable.
use anyhow::Result;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::usage;
use crate::report::charts::{self, ChartWriter};
use crate::report::check::{self, CheckOptions};
use crate::report::comm::allreduce_table;
use crate::report::compare;
use crate::report::export::{exporter, Format, Table};
use crate::report::serving::serving_table;
use crate::report::summary::{load_files, report_table, summarize, Group, Scope};
use crate::results::long;

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn print(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

pub fn emit(table: &Table, format: Format) -> Result<()> {
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
pub fn chart_writer(dir: &Path) -> Result<ChartWriter> {
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

/// `gpubench report FILES`.
pub fn run_report(files: &[PathBuf], charts_dir: Option<&Path>, format: Format) -> Result<i32> {
    let runs = load_files(files)?;
    let (devices, device_notes) = long::load_devices(files);
    // All-reduce rows are curves over message size, not configurations.
    let all: Vec<usize> = (0..runs.len()).filter(|&i| runs[i].row.mode != "allreduce").collect();
    let has_allreduce = all.len() < runs.len();
    let groups = summarize(&runs, &all, Scope::of, &devices);
    // Training and serving rows answer different questions: a table each.
    let (serving, training): (Vec<Group>, Vec<Group>) = groups.into_iter().partition(|g| g.key.is_infer());
    let mut tables = vec![];
    if !training.is_empty() || (serving.is_empty() && !has_allreduce) {
        let mut t = report_table(&runs, &training, files);
        t.notes.extend(device_notes);
        tables.push(t);
    }
    if !serving.is_empty() {
        tables.push(serving_table(&runs, &serving, files));
    }
    if has_allreduce {
        tables.push(allreduce_table(&runs, files));
    }
    if let Some(dir) = charts_dir {
        let mut w = chart_writer(dir)?;
        let mut notes = charts::report_charts(&mut w, &runs, &training, &devices)?;
        notes.extend(charts::serving_charts(&mut w, &runs, &serving)?);
        charts::allreduce_charts(&mut w, &runs)?;
        say_written(&w, dir, &notes);
    }
    for t in &tables {
        emit(t, format)?;
    }
    Ok(0)
}

/// `gpubench compare FILES`.
pub fn run_compare(files: &[PathBuf], charts_dir: Option<&Path>, format: Format) -> Result<i32> {
    let runs = load_files(files)?;
    let (devices, _) = long::load_devices(files);
    let cmp = compare::compare(&runs, &devices)?;
    let table = cmp.table(&runs);
    if let Some(dir) = charts_dir {
        let mut w = chart_writer(dir)?;
        let (keys, values) = cmp.chart_data();
        let names: Vec<String> = cmp.sets.iter().map(|s| s.name.clone()).collect();
        if keys.is_empty() {
            eprintln!("note: compare chart skipped: no set has a throughput figure");
        } else {
            charts::compare_chart(&mut w, &names, &keys, values)?;
        }
        say_written(&w, dir, &[]);
    }
    emit(&table, format)?;
    Ok(0)
}

/// `gpubench check`. Exit 0 when nothing regressed, 1 when something did (or, with --strict,
/// is missing); unusable input is an error, which `main` maps to 2.
pub fn run_check(baseline: &Path, current: &Path, opts: &CheckOptions, format: Format) -> Result<i32> {
    if opts.metrics.is_empty() {
        return Err(usage("--metric needs at least one of throughput, scaling, step-p50, step-p90, latency-p99"));
    }
    let base = load_files(&[baseline.to_path_buf()])?;
    let cur = load_files(&[current.to_path_buf()])?;
    let report = check::check(&base, &cur, opts)?;
    emit(&report.table(), format)?;
    Ok(report.exit_code())
}

/// `gpubench trace-summary DIR`.
pub fn run_trace_summary(dir: &Path, json: bool) -> Result<i32> {
    let rows = crate::report::trace::summarize_dir(dir)?;
    if json {
        print(serde_json::to_string(&rows)?.as_bytes())?;
        print(b"\n")?;
    } else {
        print(crate::report::trace::table(&rows).as_bytes())?;
    }
    Ok(0)
}
