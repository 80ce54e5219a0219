//! `gpubench data-bench`: its arguments.
use clap::Args;

#[derive(Args, Debug, Clone)]
pub(crate) struct DataBenchArgs {
    /// ImageFolder tree: DIR/train/<class>/*.JPEG or DIR/<class>/*.JPEG.
    #[arg(long)]
    pub data: String,
    /// Decode threads. Default: the machine's cores, at most 8.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Square output size in pixels.
    #[arg(long, default_value_t = 224)]
    pub image_size: i64,
    #[arg(long, default_value_t = 64)]
    pub batch_size: i64,
    /// How long to time the pipeline (after one batch per worker of warm-up).
    #[arg(long, default_value = "10s", allow_hyphen_values = true, value_name = "DURATION")]
    pub duration: String,
    /// At most this many files for the decode-only pass.
    #[arg(long, default_value_t = 300)]
    pub decode_files: usize,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

impl DataBenchArgs {
    /// What to measure, checked; and whether to print JSON.
    pub(crate) fn into_spec(self) -> anyhow::Result<(crate::data::bench::DataBenchSpec, bool)> {
        if self.image_size < 1 || self.batch_size < 1 || self.workers == Some(0) {
            return Err(crate::error::usage("--image-size, --batch-size and --workers must be at least 1"));
        }
        let duration = super::parse::parse_duration("--duration", &self.duration)?;
        let spec = crate::data::bench::DataBenchSpec {
            workers: self.workers.unwrap_or_else(|| crate::device::cpu_cores().min(8)),
            data: self.data,
            image_size: self.image_size,
            batch_size: self.batch_size,
            duration,
            decode_files: self.decode_files,
            seed: self.seed,
            warn: !self.json,
        };
        Ok((spec, self.json))
    }
}
