//! `report`, `compare` and `check`: their arguments.
use clap::{Args, ValueEnum};
use std::path::PathBuf;

use super::parse::{parse_alpha, parse_fraction};
use crate::config::Impl;
use crate::report::check::{CheckOptions, Metric};
use crate::report::export::Format;

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// Results CSV files written by `gpubench run` (several are read as one).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Also draw charts into DIR (SVG, plus PNG when a font is available).
    #[arg(long, value_name = "DIR")]
    pub charts: Option<PathBuf>,
    /// Also write one self-contained HTML page (tables and charts) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
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
    /// Also write one self-contained HTML page (table and chart) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
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
    #[arg(long = "impl", value_enum, default_value_t = Impl::Gpubench)]
    pub implementation: Impl,
    /// Output format.
    #[arg(long, value_enum, default_value_t = CheckFormat::Table)]
    pub format: CheckFormat,
    /// Also write the verdicts as one self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl CheckArgs {
    /// What `check` judges, and how it prints the verdicts.
    pub(crate) fn options(&self) -> (CheckOptions, Format) {
        let opts = CheckOptions {
            metrics: self.metrics.clone(),
            max_drop: self.max_drop,
            alpha: self.alpha,
            strict: self.strict,
            implementation: self.implementation.into(),
        };
        let format = match self.format {
            CheckFormat::Table => Format::Table,
            CheckFormat::Markdown => Format::Markdown,
        };
        (opts, format)
    }
}

#[derive(Args, Debug, Clone)]
pub struct DiagnoseArgs {
    /// Results files from the fleet's nodes (several are read as one).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Known-good results to hold each configuration against; without it,
    /// the fleet's own median of each configuration (3 rows or more).
    #[arg(long, value_name = "B.csv")]
    pub baseline: Option<PathBuf>,
    /// How far below the baseline a row may be before it counts, when its
    /// interval is apart too: `5%` or `0.05`.
    #[arg(long, default_value = "5%", value_parser = parse_fraction, value_name = "PCT")]
    pub max_drop: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Also write the diagnosis as one self-contained HTML page to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}
