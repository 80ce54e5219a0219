//! `gpubench report`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::{RenderOpts};
use super::{Configure, Job};
use crate::report::pipeline::Outputs;

/// Summarize result files: a table by hardware and configuration, the
/// verdicts of every comparison, and charts.
#[derive(Args, Debug, Clone)]
pub(crate) struct ReportArgs {
    /// Results files written by gpubench (several are read as one).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub render: RenderOpts,
}

/// report's and compare's outputs, checked before any work.
pub(crate) fn outputs(r: &RenderOpts) -> Result<Outputs> {
    if let Some(p) = r.html.as_deref() {
        crate::report::html::check_html_path(p)?;
    }
    Ok(Outputs { format: *r.format, charts: r.charts.charts.clone(), html: r.html.html.clone() })
}

impl Configure for ReportArgs {
    fn configure(self) -> Result<Job> {
        let out = outputs(&self.render)?;
        Ok(Box::new(move || crate::commands::report::run(&self.files, &out)))
    }
}
