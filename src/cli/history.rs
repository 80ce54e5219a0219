//! `gpubench history`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::{AcksOpt, ImplOpt, MetricsOpt, RenderOpts};
use super::parse::{parse_alpha, parse_fraction};
use super::{Configure, Job};
use crate::commands::history::HistoryJob;
use crate::error::usage;
use crate::report::history::acks::Kind;
use crate::report::history::detect::Params;
use crate::report::history::series::{By, Order};
use crate::report::history::Options;

/// The weeks of a nightly benchmark: per configuration, machine and metric,
/// the nights its level changed (with the commits to bisect and what else
/// changed), slow drift, and a CI gate (--gate) on new regressions.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("metrics", |a| a.default_values(["throughput", "scaling", "step-p50", "latency-p99"])))]
pub(crate) struct HistoryArgs {
    /// Results files of many nights (read as one).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub metrics: MetricsOpt,
    /// A series per host (machines never mixed), or per device name (hosts of one kind pooled).
    #[arg(long, value_name = "host|device", default_value = "host", value_parser = ["host", "device"])]
    pub by: String,
    /// A point per commit under test (ordered by when it first ran), or per sweep (else run) by time.
    #[arg(long, value_name = "commit|time", default_value = "commit", value_parser = ["commit", "time"])]
    pub order: String,
    /// Only rows from this date on (YYYY-MM-DD, or an RFC 3339 time).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Significance level a change must reach (a pooled t-test of the points either side).
    #[arg(long = "p", value_name = "P", default_value_t = 0.0003, value_parser = parse_alpha)]
    pub p: f64,
    /// Points searched for a split, and the most either side of a change that its test pools.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub window: usize,
    /// Points a new level needs before it is judged (and the old one too).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub min_points: usize,
    /// Smallest change of the mean that counts, e.g. 1%.
    #[arg(long, value_name = "PCT", default_value = "0%", value_parser = parse_fraction)]
    pub min_magnitude: f64,
    /// The gate's window: a regression whose new level starts within the last N points.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub last: usize,
    /// Drift past this, per week, fails the gate (e.g. 0.5%).
    #[arg(long, value_name = "PCT", default_value = "0.5%", value_parser = parse_fraction)]
    pub drift_bound: f64,
    /// Points the drift slope is fitted over, at most (fewer since the last change).
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub drift_points: usize,
    #[command(flatten)]
    pub acks: AcksOpt,
    /// Acknowledge a change or drift by its id: appends a line to --acks.
    #[arg(long, value_name = "ID", requires = "acks")]
    pub ack: Option<String>,
    /// What --ack says: expected (a known change starting a new level) or accepted (a regression tracked).
    #[arg(long, value_name = "KIND", default_value = "accepted", value_parser = ["accepted", "expected"])]
    pub kind: String,
    /// Why: required with --ack.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Exit 1 on an unacknowledged regression in the last --last points, or drift past --drift-bound.
    #[arg(long)]
    pub gate: bool,
    /// Write Bencher's metric format (BMF JSON) of the newest points.
    #[arg(long, value_name = "FILE.json")]
    pub export_bmf: Option<PathBuf>,
    /// Write github-action-benchmark's customBiggerIsBetter file (throughput, scaling).
    #[arg(long, value_name = "FILE.json")]
    pub export_gab_bigger: Option<PathBuf>,
    /// Write github-action-benchmark's customSmallerIsBetter file (step time, latency).
    #[arg(long, value_name = "FILE.json")]
    pub export_gab_smaller: Option<PathBuf>,
    #[command(flatten)]
    pub implementation: ImplOpt,
    #[command(flatten)]
    pub render: RenderOpts,
}

/// `--since`: a date (midnight UTC) or an RFC 3339 time, as seconds since the epoch.
pub(crate) fn parse_since(s: &str) -> Result<f64> {
    let t = if s.len() == 10 { format!("{s}T00:00:00Z") } else { s.to_string() };
    let at = humantime::parse_rfc3339(&t)
        .map_err(|_| usage(format!("--since `{s}` is not a date (YYYY-MM-DD) or an RFC 3339 time")))?;
    Ok(at.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()))
}

impl HistoryArgs {
    pub(crate) fn job(self) -> Result<HistoryJob> {
        if self.metrics.metrics.is_empty() {
            return Err(usage("--metric needs at least one of throughput, scaling, step-p50, step-p90, latency-p99"));
        }
        if self.min_points < 2 {
            return Err(usage("--min-points must be at least 2: a level of one point has no spread to test"));
        }
        if self.window < 2 * self.min_points {
            return Err(usage(format!(
                "--window {} is too small: it must hold a level on each side, 2 × --min-points = {}",
                self.window,
                2 * self.min_points
            )));
        }
        if self.last == 0 || self.drift_points < 3 {
            return Err(usage("--last must be at least 1 and --drift-points at least 3"));
        }
        let ack = match (&self.ack, &self.reason) {
            (None, _) => None,
            (Some(id), _) if !crate::report::history::acks::is_id(id) => {
                return Err(usage(format!(
                    "--ack `{id}` is not a finding id (12 hex digits, as `gpubench history` prints)"
                )))
            }
            (Some(_), None) => return Err(usage("--ack needs --reason TEXT: an acknowledgement says why")),
            (Some(_), Some(r)) if r.trim().is_empty() => return Err(usage("--reason is empty: say why")),
            (Some(id), Some(r)) => {
                Some((id.clone(), if self.kind == "expected" { Kind::Expected } else { Kind::Accepted }, r.clone()))
            }
        };
        let out = super::report::outputs(&self.render)?;
        let since = self.since.as_deref().map(parse_since).transpose()?.unwrap_or(f64::MIN);
        let options = Options {
            metrics: self.metrics.metrics,
            by: if self.by == "device" { By::Device } else { By::Host },
            order: if self.order == "time" { Order::Time } else { Order::Commit },
            params: Params {
                p: self.p,
                window: self.window,
                min_size: self.min_points,
                min_magnitude: self.min_magnitude,
            },
            last: self.last,
            drift_points: self.drift_points,
            drift_bound: self.drift_bound,
            implementation: (*self.implementation).into(),
            since,
        };
        Ok(HistoryJob {
            files: self.files,
            options,
            acks: self.acks.acks,
            ack,
            gate: self.gate,
            bmf: self.export_bmf,
            gab_bigger: self.export_gab_bigger,
            gab_smaller: self.export_gab_smaller,
            format: out.format,
            charts: out.charts,
            html: out.html,
        })
    }
}

impl Configure for HistoryArgs {
    fn configure(self) -> Result<Job> {
        let job = self.job()?;
        Ok(Box::new(move || crate::commands::history::run(&job)))
    }
}
