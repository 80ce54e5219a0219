//! `gpubench compare`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::{RenderOpts};
use super::{Configure, Job};

/// Put result sets side by side (machines, dates, published figures), each
/// with the verdicts against its own 1-device run.
#[derive(Args, Debug, Clone)]
pub(crate) struct CompareArgs {
    /// Results files to put side by side; each file's rows are split into
    /// sets by label, else device name, else file name.
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub render: RenderOpts,
}

impl Configure for CompareArgs {
    fn configure(self) -> Result<Job> {
        let out = super::report::outputs(&self.render)?;
        Ok(Box::new(move || crate::commands::compare::run(&self.files, &out)))
    }
}
