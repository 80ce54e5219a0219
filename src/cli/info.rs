//! `gpubench info`: its arguments.
use anyhow::Result;
use clap::Args;

use super::opts::FormatOpt;
use super::{Configure, Job};
use crate::report::export::Format;

/// Print versions, CUDA devices, CPU and which process groups work here.
#[derive(Args, Debug, Clone)]
pub(crate) struct InfoArgs {
    #[command(flatten)]
    pub format: FormatOpt,
}

impl Configure for InfoArgs {
    fn configure(self) -> Result<Job> {
        let json = self.format.one_of("info", &[Format::Table, Format::Json])? == Format::Json;
        Ok(Box::new(move || crate::commands::info::run(json)))
    }
}
