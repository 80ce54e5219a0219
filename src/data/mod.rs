//! Where each step's input comes from. The measurement loop (`bench::measure`) asks a `DataSource` for the next
//! batch and times how long it waits; strategies never see the source. `SourceSpec` says what a run needs: single
//! and each ddp rank load their per-device batch; dp loads the global batch on the master, with `--workers` ×
//! devices decode threads (the same decode budget as ddp's `--workers` per rank).
//!
//! **Synthetic** (the default, `synthetic`): as tf_cnn_benchmarks does it, random images and labels are made once
//! on the device, and the loop rotates among four distinct batches so that no step reuses the previous step's
//! tensors. It isolates compute and communication from input.
//!
//! **`--data PATH`** (`imagefolder`): an ImageFolder tree, `PATH/train/<class>/*.JPEG` or `PATH` holding the
//! class folders; labels are the sorted class names; files ending in .jpg, .jpeg or .png (any case) are listed.
//! The row's `data` column is `imagefolder:PATH`. Layout errors (no such directory, no class folders, no images,
//! more classes than `--num-classes`) are one line and exit 2, found before the run starts.
//! - Decoding (`decode`): the format is told from the file's bytes, not its name (ImageNet has PNGs and CMYK
//!   JPEGs named `.JPEG`); JPEGs come out as RGB. JPEG goes through zune-jpeg (pure Rust, one small dependency,
//!   nothing to install on a fresh machine), PNG through the png crate. zune-jpeg fills a truncated scan with
//!   grey, so a JPEG without an end-of-image marker in its last 4 KiB is decoded again in strict mode.
//! - Transform (`transform`, the ImageNet training recipe): RandomResizedCrop to `--image-size` (area 0.08–1,
//!   aspect 3/4–4/3, torchvision's ten tries then a centre crop), resized with an antialiased bilinear filter as
//!   PIL does, horizontal flip with p = 0.5. An AVX2 path of the resize (`pmaddwd`) gives exactly the bytes of
//!   the portable one, which a unit test checks.
//! - Normalization happens on the device, as DALI does: workers produce uint8 NHWC batches (a quarter of the
//!   bytes of float) in a host buffer pinned on CUDA, copied non-blocking; the device converts to float, applies
//!   the ImageNet mean and std, and makes NCHW unless `--channels-last`.
//! - Workers: `--workers N` decode threads per device (default: the cores shared among the devices, 1 to 8).
//!   Worker w builds whole batches w, w+N, … into a queue of 2; the consumer takes batch k from worker k mod N,
//!   so the order never depends on thread timing, and each sample's crop and flip come from its own generator
//!   keyed by (seed, epoch, position): the same seed gives the same batches.
//! - Sharding (`sampler`, ddp): DistributedSampler with drop_last; every rank uses the same seed, so shards are
//!   disjoint and equal and reshuffled each epoch. Epochs follow each other without a break.
//! - Bad files: a file that cannot be read or decoded is replaced by the next of the epoch, the first three are
//!   named on stderr, and the row's `data_skipped` counts distinct files (one several ddp ranks met counts once).
//!
//! Input-bound runs: when `data_wait_share` exceeds 10 % (`INPUT_BOUND_SHARE`) the summary adds a line
//! `input-bound: …` suggesting more `--workers`. `gpubench data-bench` (`bench`) runs the loader alone, no model:
//! the decoder's raw rate (one thread, files in memory: the ceiling) and the full pipeline's;
//! `scripts/bench-data` runs it beside torchvision's ImageFolder + DataLoader. Figures: `results/README.md`.
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
    /// One optimizer step's input: its micro-batches, one without
    /// `--grad-accum` (`Accumulated` gives one from each of its sources).
    fn next_step(&mut self) -> Result<Vec<Batch>> {
        Ok(vec![self.next_batch()?])
    }
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
pub(crate) fn column_name(data: &str) -> String {
    if data == "synthetic" {
        data.into()
    } else {
        format!("imagefolder:{data}")
    }
}

/// A run whose input wait is above this share of the step time is input-bound.
pub(crate) const INPUT_BOUND_SHARE: f64 = 0.10;

/// The one line that says a run was input-bound, if it was.
pub(crate) fn input_bound_line(share: Option<f64>, workers: Option<u32>) -> Option<String> {
    let s = share.filter(|s| *s > INPUT_BOUND_SHARE)?;
    let w = workers.map(|w| format!(" (now {w})")).unwrap_or_default();
    Some(format!(
        "input-bound: the step waited for data {:.0}% of its time (over {:.0}%); raise --workers{w} or use faster storage",
        s * 100.0,
        INPUT_BOUND_SHARE * 100.0
    ))
}

/// Default `--workers`: the cores shared among this node's devices, 1 to 8.
pub(crate) fn default_workers(local_devices: usize) -> usize {
    (crate::device::cpu_cores() / local_devices.max(1)).clamp(1, 8)
}

/// What a run's data source is made for.
pub(crate) struct SourceSpec {
    /// Images per batch: per device, or dp's global batch.
    pub batch: i64,
    pub device: tch::Device,
    /// The data seed, the same on every rank: the sampler's and
    /// augmentation's seed, and synthetic data's once offset by the rank.
    pub seed: u64,
    pub rank: usize,
    pub world: usize,
    /// Decode threads for this source.
    pub workers: usize,
}

/// The run's data source: synthetic, or the ImageFolder tree at `cfg.data`.
/// With `--grad-accum K`, micro-batch k of rank r is what rank r·K + k of a
/// job K times as wide would see (synthetic data: that rank's seed; files:
/// that rank's shard), so accumulating on one device reproduces K ranks.
pub(crate) fn make_source(cfg: &crate::config::RunConfig, spec: SourceSpec) -> Result<Box<dyn DataSource>> {
    let k = cfg.grad_accum.max(1) as usize;
    // The tree is scanned once; each micro-batch's loader shards the same list.
    let ds = if cfg.host.data == "synthetic" { None } else { Some(imagefolder::scan(&cfg.host.data)?) };
    let one = |rank: usize, world: usize| -> Result<Box<dyn DataSource>> {
        let Some(ds) = &ds else {
            let seed = spec.seed.wrapping_add(crate::init::RANK_SEED_STRIDE.wrapping_mul(rank as u64));
            let s = synthetic::Synthetic::new(
                spec.batch,
                cfg.workload.image_size,
                cfg.workload.num_classes,
                spec.device,
                seed,
            )?;
            if cfg.workload.channels_last {
                s.to_channels_last()?;
            }
            return Ok(Box::new(s));
        };
        let lc = imagefolder::LoaderConfig {
            batch: spec.batch as usize,
            image_size: cfg.workload.image_size as usize,
            // The micro-batches' loaders share the rank's decode threads.
            workers: (spec.workers / k).max(1),
            seed: spec.seed,
            rank,
            world,
            pin: None,
            // One set of warnings per rank, not one per micro-batch.
            warn: rank.is_multiple_of(k),
        };
        Ok(Box::new(imagefolder::ImageFolder::new(
            ds.clone(),
            lc,
            spec.device,
            cfg.workload.channels_last,
            &cfg.host.data,
        )?))
    };
    if k == 1 {
        return one(spec.rank, spec.world);
    }
    let sources = (0..k).map(|i| one(spec.rank * k + i, spec.world * k)).collect::<Result<Vec<_>>>()?;
    Ok(Box::new(Accumulated { sources }))
}

/// `--grad-accum`: one source per micro-batch of a step.
struct Accumulated {
    sources: Vec<Box<dyn DataSource>>,
}

impl DataSource for Accumulated {
    fn next_batch(&mut self) -> Result<Batch> {
        self.sources[0].next_batch()
    }

    fn next_step(&mut self) -> Result<Vec<Batch>> {
        self.sources.iter_mut().map(|s| s.next_batch()).collect()
    }

    fn name(&self) -> String {
        self.sources[0].name()
    }

    fn bad_files(&self) -> Option<Vec<u32>> {
        // A file two micro-batches' shards both met counts once.
        let mut all: Vec<u32> = self.sources.iter().filter_map(|s| s.bad_files()).flatten().collect();
        all.sort_unstable();
        all.dedup();
        (self.sources.iter().any(|s| s.bad_files().is_some())).then_some(all)
    }
}
