//! `gpubench check`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::{AcksOpt, Baseline, FormatOpt, HtmlOpt, ImplOpt, MaxDrop, MetricsOpt};
use super::parse::parse_alpha;
use super::{Configure, Job};
use crate::error::usage;
use crate::report::check::CheckOptions;

/// CI gate: exit 1 when the current results regressed against a baseline
/// (significantly, and by more than --max-drop).
#[derive(Args, Debug, Clone)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub baseline: Baseline,
    /// Results to judge.
    #[arg(long, value_name = "C.csv")]
    pub current: Option<PathBuf>,
    #[command(flatten)]
    pub metrics: MetricsOpt,
    #[command(flatten)]
    pub max_drop: MaxDrop,
    /// Significance level of Welch's t-test, used when both sides have 2+ runs.
    #[arg(long, default_value_t = 0.05, value_parser = parse_alpha)]
    pub alpha: f64,
    /// Fail (exit 1) when a baseline configuration is missing from the current results.
    #[arg(long)]
    pub strict: bool,
    /// The baseline file is a history of many nights: judge against each
    /// configuration's current level (the points since its last change, as
    /// `gpubench history` finds it) instead of every row of the file.
    #[arg(long)]
    pub baseline_from_history: bool,
    #[command(flatten)]
    pub acks: AcksOpt,
    #[command(flatten)]
    pub implementation: ImplOpt,
    #[command(flatten)]
    pub format: FormatOpt,
    #[command(flatten)]
    pub html: HtmlOpt,
}

impl Configure for CheckArgs {
    fn configure(self) -> Result<Job> {
        let baseline = self.baseline.baseline.clone().ok_or_else(|| {
            usage("check needs --baseline B.csv (known-good results) and --current C.csv (the results to judge)")
        })?;
        let current = self
            .current
            .clone()
            .ok_or_else(|| usage("check needs --current C.csv (the results to judge) beside --baseline B.csv"))?;
        if self.metrics.is_empty() {
            return Err(usage("--metric needs at least one of throughput, scaling, step-p50, step-p90, latency-p99"));
        }
        if let Some(p) = self.html.as_deref() {
            crate::report::html::check_html_path(p)?;
        }
        let opts = CheckOptions {
            metrics: self.metrics.metrics,
            max_drop: *self.max_drop,
            alpha: self.alpha,
            strict: self.strict,
            implementation: (*self.implementation).into(),
        };
        let (format, html) = (*self.format, self.html.html);
        if self.acks.is_some() && !self.baseline_from_history {
            return Err(usage("--acks is read with --baseline-from-history (or by gpubench history)"));
        }
        let history =
            self.baseline_from_history.then_some(crate::commands::check::FromHistory { acks: self.acks.acks });
        Ok(Box::new(move || {
            crate::commands::check::run(&baseline, &current, &opts, history.as_ref(), format, html.as_deref())
        }))
    }
}
