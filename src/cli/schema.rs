//! `gpubench schema`: its arguments.
use anyhow::Result;
use clap::Args;

use super::opts::FormatOpt;
use super::{Configure, Job};

/// Print the columns of gpubench's CSV files: name, unit and meaning.
#[derive(Args, Debug, Clone)]
pub(crate) struct SchemaArgs {
    #[command(flatten)]
    pub format: FormatOpt,
}

impl Configure for SchemaArgs {
    fn configure(self) -> Result<Job> {
        let format = *self.format;
        Ok(Box::new(move || crate::commands::schema::run(format)))
    }
}
