//! `gpubench diagnose`: its arguments.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::{Baseline, FormatOpt, HtmlOpt, MaxDrop};
use super::{Configure, Job};

/// Which node or GPU of a fleet is slow: each row against its
/// configuration's baseline (a file, or the fleet's median); exit 1 when
/// something is defective.
#[derive(Args, Debug, Clone)]
pub(crate) struct DiagnoseArgs {
    /// Results files from the fleet's nodes (several are read as one).
    #[arg(required = true, value_name = "FILES")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub baseline: Baseline,
    #[command(flatten)]
    pub max_drop: MaxDrop,
    #[command(flatten)]
    pub format: FormatOpt,
    #[command(flatten)]
    pub html: HtmlOpt,
}

impl Configure for DiagnoseArgs {
    fn configure(self) -> Result<Job> {
        if let Some(p) = self.html.as_deref() {
            crate::report::html::check_html_path(p)?;
        }
        let (format, max_drop) = (*self.format, *self.max_drop);
        Ok(Box::new(move || {
            crate::commands::diagnose::run(
                &self.files,
                self.baseline.as_deref(),
                max_drop,
                format,
                self.html.as_deref(),
            )
        }))
    }
}
