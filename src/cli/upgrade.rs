//! `gpubench upgrade`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::{Configure, Job};

/// Rewrite a results file of an earlier CSV schema for this gpubench, so
/// that rows can be appended to it; the old file is kept beside it.
#[derive(Args, Debug, Clone)]
pub(crate) struct UpgradeArgs {
    /// The results file (FILE.csv).
    pub file: PathBuf,
}

impl Configure for UpgradeArgs {
    fn configure(self) -> Result<Job> {
        Ok(Box::new(move || crate::commands::upgrade::run(&self.file)))
    }
}
