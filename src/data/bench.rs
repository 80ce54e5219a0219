//! The loader alone, no model (`gpubench data-bench`): the decoder's raw
//! rate on the files (one thread, files already in memory: the ceiling) and
//! the full pipeline's rate (read, decode, crop, resize, flip, batch).
use anyhow::Result;
use serde::Serialize;
use std::time::{Duration, Instant};

use super::imagefolder::{scan, Loader, LoaderConfig};

/// What to measure.
#[derive(Debug, Clone)]
pub struct DataBenchSpec {
    /// ImageFolder tree.
    pub data: String,
    /// Decode threads.
    pub workers: usize,
    pub image_size: i64,
    pub batch_size: i64,
    /// How long to time the pipeline (after one batch per worker of warm-up).
    pub duration: Duration,
    /// At most this many files for the decode-only pass.
    pub decode_files: usize,
    pub seed: u64,
    /// Say so on stderr when unreadable files are skipped.
    pub warn: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct DataBenchResult {
    pub data: String,
    pub files: usize,
    pub classes: usize,
    pub image_size: i64,
    pub batch_size: i64,
    pub workers: usize,
    /// Decode only, one thread, files in memory.
    pub decode_img_s: f64,
    pub decode_files: usize,
    /// The whole loader with `workers` threads.
    pub pipeline_img_s: f64,
    pub pipeline_img_s_per_worker: f64,
    pub pipeline_images: u64,
    /// Pipeline per worker over decode-only per thread.
    pub fraction_of_decode: f64,
    pub skipped: u64,
}

pub(crate) fn data_bench(a: &DataBenchSpec) -> Result<DataBenchResult> {
    let ds = scan(&a.data)?;
    let workers = a.workers;
    // Decode only: spread over the dataset, read first so that no I/O is timed.
    let n = a.decode_files.clamp(1, ds.files.len());
    let stride = ds.files.len() / n;
    let bytes: Vec<Vec<u8>> = (0..n).filter_map(|i| std::fs::read(&ds.files[i * stride]).ok()).collect();
    let mut rgb = vec![];
    let mut ok = 0usize;
    let t = Instant::now();
    for b in &bytes {
        if super::decode::decode_rgb(b, &mut rgb).is_ok() {
            ok += 1;
        }
    }
    let decode_img_s = ok as f64 / t.elapsed().as_secs_f64();

    let (classes, files) = (ds.classes.len(), ds.files.len());
    let cfg = LoaderConfig {
        batch: a.batch_size as usize,
        image_size: a.image_size as usize,
        workers,
        seed: a.seed,
        rank: 0,
        world: 1,
        pin: None,
        warn: a.warn,
    };
    let mut loader = Loader::new(ds, cfg)?;
    for _ in 0..workers {
        loader.next_host()?;
    }
    let t = Instant::now();
    let mut images = 0u64;
    while t.elapsed() < a.duration {
        images += loader.next_host()?.indices.len() as u64;
    }
    let pipeline = images as f64 / t.elapsed().as_secs_f64();
    let per_worker = pipeline / workers as f64;
    Ok(DataBenchResult {
        data: a.data.clone(),
        files,
        classes,
        image_size: a.image_size,
        batch_size: a.batch_size,
        workers,
        decode_img_s,
        decode_files: ok,
        pipeline_img_s: pipeline,
        pipeline_img_s_per_worker: per_worker,
        pipeline_images: images,
        fraction_of_decode: per_worker / decode_img_s,
        skipped: loader.skipped(),
    })
}
