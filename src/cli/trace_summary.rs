//! `gpubench trace-summary`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::FormatOpt;
use super::{Configure, Job};
use crate::report::export::Format;

/// Per rank, where the steps traced by `run --profile DIR` went: compute,
/// communication, data wait, idle, and how much communication overlapped compute.
#[derive(Args, Debug, Clone)]
pub(crate) struct TraceSummaryArgs {
    /// The directory `run --profile` wrote.
    pub dir: PathBuf,
    #[command(flatten)]
    pub format: FormatOpt,
}

impl Configure for TraceSummaryArgs {
    fn configure(self) -> Result<Job> {
        let format = self.format.one_of("trace-summary", &[Format::Table, Format::Json])?;
        Ok(Box::new(move || crate::commands::trace_summary::run(&self.dir, format)))
    }
}
