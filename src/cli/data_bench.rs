//! `gpubench data-bench`: its arguments.
use anyhow::Result;
use clap::Args;

use super::opts::{BatchSize, DataOpt, DurationOpt, FormatOpt, ImageSize, Seed, WorkersOpt};
use super::{Configure, Job};
use crate::error::usage;
use crate::report::export::Format;

/// Measure the input pipeline alone (decode, crop, resize, flip) in
/// images/s, no model.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("duration", |a| a.default_value("10s")))]
pub(crate) struct DataBenchArgs {
    #[command(flatten)]
    pub data: DataOpt,
    #[command(flatten)]
    pub workers: WorkersOpt,
    #[command(flatten)]
    pub image_size: ImageSize,
    #[command(flatten)]
    pub batch_size: BatchSize,
    #[command(flatten)]
    pub duration: DurationOpt,
    /// At most this many files for the decode-only pass.
    #[arg(long, default_value_t = 300, value_name = "N")]
    pub decode_files: usize,
    #[command(flatten)]
    pub seed: Seed,
    #[command(flatten)]
    pub format: FormatOpt,
}

impl Configure for DataBenchArgs {
    fn configure(self) -> Result<Job> {
        let json = self.format.one_of("data-bench", &[Format::Table, Format::Json])? == Format::Json;
        let spec = self.into_spec(json)?;
        Ok(Box::new(move || crate::commands::data_bench::run(&spec, json)))
    }
}

impl DataBenchArgs {
    /// What to measure, checked.
    fn into_spec(self, json: bool) -> Result<crate::data::bench::DataBenchSpec> {
        if *self.image_size < 1 || *self.batch_size < 1 || *self.workers == Some(0) {
            return Err(usage("--image-size, --batch-size and --workers must be at least 1"));
        }
        if *self.data == "synthetic" {
            return Err(usage("data-bench measures reading images: give --data DIR (an ImageFolder tree)"));
        }
        let duration = self.duration.time("data-bench")?.ok_or_else(|| usage("data-bench needs --duration"))?;
        Ok(crate::data::bench::DataBenchSpec {
            workers: self.workers.unwrap_or_else(|| crate::device::cpu_cores().min(8)),
            data: self.data.data,
            image_size: *self.image_size,
            batch_size: *self.batch_size,
            duration,
            decode_files: self.decode_files,
            seed: *self.seed,
            warn: !json,
        })
    }
}
