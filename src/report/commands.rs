//! The `report`, `compare` and `check` subcommands: argument parsing and
//! where output goes. Tables go to stdout; notes about charts go to stderr, so
//! that `--format csv|json` output stays machine-readable.

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::usage;
use crate::report::charts::{self, ChartWriter};
use crate::report::check::{self, CheckOptions, Metric};
use crate::report::compare;
use crate::report::devices;
use crate::report::export::{exporter, Format, Table};
use crate::report::summary::{load_files, report_table, summarize, Scope};

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Results CSV files written by `gpubench run` (several are read as one).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Also draw charts into DIR (SVG, plus PNG when a font is available).
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Result files to put side by side; each file's rows are split into sets
    /// by label, else device name, else file name.
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Also draw a grouped bar chart into DIR.
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// Aligned plain text.
    Table,
    /// For a pull-request comment.
    Markdown,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    /// Results that are known good.
    #[arg(long, value_name = "B.csv")]
    pub baseline: PathBuf,
    /// Results to judge.
    #[arg(long, value_name = "C.csv")]
    pub current: PathBuf,
    /// Metrics to gate on (repeat or comma-separate).
    #[arg(long = "metric", value_name = "METRIC", value_enum, value_delimiter = ',', default_values_t = [Metric::Throughput, Metric::Scaling])]
    pub metrics: Vec<Metric>,
    /// Worsening tolerated as noise, relative to the baseline: `5%` or `0.05`.
    #[arg(long, default_value = "5%", value_parser = parse_fraction, value_name = "PCT")]
    pub max_drop: f64,
    /// Significance level of Welch's t-test, used when both sides have 2+ runs.
    #[arg(long, default_value_t = 0.05, value_parser = parse_alpha)]
    pub alpha: f64,
    /// Fail (exit 1) when a baseline config is missing from the current results.
    #[arg(long)]
    pub strict: bool,
    /// Which implementation's rows to judge; the other's are left out (a
    /// file from `sweep --impl gpubench,pytorch` holds both).
    #[arg(long = "impl", value_enum, default_value_t = crate::reference::Impl::Gpubench)]
    pub implementation: crate::reference::Impl,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Table)]
    pub format: CheckFormat,
}

/// `5%` or `0.05`. A bare number of 1 or more is refused: `5` would mean 500%.
pub fn parse_fraction(s: &str) -> std::result::Result<f64, String> {
    let t = s.trim();
    let (num, pct) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a percentage; write e.g. 5% or 0.05"))?;
    let v = if pct { v / 100.0 } else { v };
    if !pct && v >= 1.0 {
        return Err(format!("`{s}` is ambiguous; write {s}% for a percentage, or a fraction below 1"));
    }
    if !(0.0..1.0).contains(&v) {
        return Err(format!("`{s}` must be at least 0% and below 100%"));
    }
    Ok(v)
}

fn parse_alpha(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!("`{s}` must be a probability between 0 and 1, e.g. 0.05")),
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn print(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

fn emit(table: &Table, format: Format) -> Result<()> {
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
fn chart_writer(dir: &Path) -> Result<ChartWriter> {
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

pub fn run_report(args: &ReportArgs) -> Result<i32> {
    let runs = load_files(&args.files)?;
    let (devices, device_notes) = devices::load_for(&args.files);
    let all: Vec<usize> = (0..runs.len()).collect();
    let groups = summarize(&runs, &all, Scope::of, &devices);
    let mut table = report_table(&runs, &groups, &args.files);
    table.notes.extend(device_notes);
    if let Some(dir) = &args.charts {
        let mut w = chart_writer(dir)?;
        let notes = charts::report_charts(&mut w, &runs, &groups, &devices)?;
        say_written(&w, dir, &notes);
    }
    emit(&table, args.format)?;
    Ok(0)
}

pub fn run_compare(args: &CompareArgs) -> Result<i32> {
    let runs = load_files(&args.files)?;
    let (devices, _) = devices::load_for(&args.files);
    let cmp = compare::compare(&runs, &devices)?;
    let table = cmp.table(&runs);
    if let Some(dir) = &args.charts {
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
    emit(&table, args.format)?;
    Ok(0)
}

/// Exit 0 when nothing regressed, 1 when something did (or, with --strict,
/// is missing); unusable input is an error, which `main` maps to 2.
pub fn run_check(args: &CheckArgs) -> Result<i32> {
    if args.metrics.is_empty() {
        return Err(usage("--metric needs at least one of throughput, scaling, step-p50, step-p90"));
    }
    let base = load_files(std::slice::from_ref(&args.baseline))?;
    let cur = load_files(std::slice::from_ref(&args.current))?;
    let opts = CheckOptions {
        metrics: args.metrics.clone(),
        max_drop: args.max_drop,
        alpha: args.alpha,
        strict: args.strict,
        implementation: args.implementation.name().into(),
    };
    let report = check::check(&base, &cur, &opts)?;
    let format = match args.format {
        CheckFormat::Table => Format::Table,
        CheckFormat::Markdown => Format::Markdown,
    };
    emit(&report.table(), format)?;
    Ok(report.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_drop_accepts_percent_and_fraction_only() {
        assert_eq!(parse_fraction("5%"), Ok(0.05));
        assert_eq!(parse_fraction("0.05"), Ok(0.05));
        assert_eq!(parse_fraction(" 12.5 % "), Ok(0.125));
        assert!(parse_fraction("5").unwrap_err().contains("ambiguous"));
        assert!(parse_fraction("fast").is_err());
        assert!(parse_fraction("-1%").is_err());
        assert!(parse_fraction("100%").is_err());
    }

    #[test]
    fn alpha_must_be_a_probability() {
        assert_eq!(parse_alpha("0.01"), Ok(0.01));
        assert!(parse_alpha("1").is_err());
        assert!(parse_alpha("0").is_err());
    }
}
