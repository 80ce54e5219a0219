//! `gpubench collect`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::OutOpt;
use super::{Configure, Job};
use crate::error::usage;

/// Merge the cells of a sweep emitted with `sweep --emit slurm|k8s DIR` into
/// one results file, in manifest order; a cell with no file is a `missing`
/// row naming its array task.
#[derive(Args, Debug, Clone)]
pub(crate) struct CollectArgs {
    /// The directory `sweep --emit` wrote.
    pub dir: PathBuf,
    #[command(flatten)]
    pub out: OutOpt,
}

impl Configure for CollectArgs {
    fn configure(self) -> Result<Job> {
        let out = self.out.out.ok_or_else(|| {
            usage(format!("collect needs --out FILE.csv: where the merged rows of {} go", self.dir.display()))
        })?;
        // A file there must be a results file of this schema: collect replaces
        // it (keeping it beside), never someone else's CSV.
        crate::results::csv::check_writable(&out)?;
        let dir = self.dir;
        Ok(Box::new(move || crate::commands::collect::run(&dir, &out)))
    }
}
