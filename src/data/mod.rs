//! Where each step's input comes from. The runner asks a `DataSource` for the
//! next batch and times how long it waits; strategies never see the source.
pub mod bench;
pub mod decode;
pub mod imagefolder;
pub mod sampler;
pub mod synthetic;
pub mod transform;

use anyhow::Result;
use tch::Tensor;

/// One step's input: images (N, 3, H, W) float and labels (N) int64.
#[derive(Debug)]
pub struct Batch {
    pub images: Tensor,
    pub labels: Tensor,
}

pub trait DataSource {
    /// The next batch, already on the device the strategy asked for.
    fn next_batch(&mut self) -> Result<Batch>;
    /// How the source is named in the `data` column.
    fn name(&self) -> String;
    /// Dataset indices of the unreadable files skipped so far (None: the
    /// source reads no files). Indices, not a count, so that ddp can count a
    /// file that several ranks met in different epochs once.
    fn bad_files(&self) -> Option<Vec<u32>> {
        None
    }
}

/// The row's `data` column for `--data`: "synthetic" or "imagefolder:PATH".
pub fn column_name(data: &str) -> String {
    if data == "synthetic" {
        data.into()
    } else {
        format!("imagefolder:{data}")
    }
}

/// A run whose input wait is above this share of the step time is input-bound.
pub const INPUT_BOUND_SHARE: f64 = 0.10;

/// The one line that says a run was input-bound, if it was.
pub fn input_bound_line(share: Option<f64>, workers: Option<u32>) -> Option<String> {
    let s = share.filter(|s| *s > INPUT_BOUND_SHARE)?;
    let w = workers.map(|w| format!(" (now {w})")).unwrap_or_default();
    Some(format!(
        "input-bound: the step waited for data {:.0}% of its time (over {:.0}%); raise --workers{w} or use faster storage",
        s * 100.0,
        INPUT_BOUND_SHARE * 100.0
    ))
}

/// Default `--workers`: the cores shared among this node's devices, 1 to 8.
pub fn default_workers(local_devices: usize) -> usize {
    (crate::device::cpu_cores() / local_devices.max(1)).clamp(1, 8)
}

/// What a run's data source is made for.
pub struct SourceSpec {
    /// Images per batch: per device, or dp's global batch.
    pub batch: i64,
    pub device: tch::Device,
    /// Synthetic data's seed (per rank under ddp).
    pub synthetic_seed: u64,
    /// The sampler's and augmentation's seed: the same on every rank.
    pub seed: u64,
    pub rank: usize,
    pub world: usize,
    /// Decode threads for this source.
    pub workers: usize,
}

/// The run's data source: synthetic, or the ImageFolder tree at `cfg.data`.
pub fn make_source(cfg: &crate::config::RunConfig, spec: SourceSpec) -> Result<Box<dyn DataSource>> {
    if cfg.data == "synthetic" {
        let s =
            synthetic::Synthetic::new(spec.batch, cfg.image_size, cfg.num_classes, spec.device, spec.synthetic_seed)?;
        if cfg.channels_last {
            s.to_channels_last()?;
        }
        return Ok(Box::new(s));
    }
    let ds = imagefolder::scan(&cfg.data)?;
    let lc = imagefolder::LoaderConfig {
        batch: spec.batch as usize,
        image_size: cfg.image_size as usize,
        workers: spec.workers,
        seed: spec.seed,
        rank: spec.rank,
        world: spec.world,
        pin: None,
        warn: true,
    };
    Ok(Box::new(imagefolder::ImageFolder::new(ds, lc, spec.device, cfg.channels_last, &cfg.data)?))
}
