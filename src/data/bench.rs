//! `gpubench data-bench`: the loader alone, no model. Prints the decoder's
//! raw rate on the files (one thread, files already in memory: the ceiling)
//! and the full pipeline's rate (read, decode, crop, resize, flip, batch).
use anyhow::Result;
use clap::Args;
use serde::Serialize;
use std::time::{Duration, Instant};

use super::imagefolder::{scan, Loader, LoaderConfig};
use crate::error::usage;

#[derive(Args, Debug, Clone)]
pub struct DataBenchArgs {
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
    #[arg(long, default_value = "10s", value_name = "DURATION")]
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

#[derive(Debug, Serialize)]
pub struct DataBenchResult {
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

pub fn run_data_bench(a: DataBenchArgs) -> Result<i32> {
    if a.image_size < 1 || a.batch_size < 1 || a.workers == Some(0) {
        return Err(usage("--image-size, --batch-size and --workers must be at least 1"));
    }
    let dur = crate::config::parse_duration("--duration", &a.duration)?;
    let r = data_bench(&a, dur)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "data-bench {}: {} files in {} classes, {}×{} crops, batch {}",
            r.data, r.files, r.classes, r.image_size, r.image_size, r.batch_size
        );
        println!("decode only  {:>8.1} img/s on one thread ({} files in memory)", r.decode_img_s, r.decode_files);
        println!(
            "pipeline     {:>8.1} img/s with {} workers ({:.1} per worker, {:.0}% of decode only)",
            r.pipeline_img_s,
            r.workers,
            r.pipeline_img_s_per_worker,
            r.fraction_of_decode * 100.0
        );
        if r.skipped > 0 {
            println!("skipped      {} unreadable files", r.skipped);
        }
    }
    Ok(0)
}

pub fn data_bench(a: &DataBenchArgs, dur: Duration) -> Result<DataBenchResult> {
    let ds = scan(&a.data)?;
    let workers = a.workers.unwrap_or_else(|| crate::device::cpu_cores().min(8));
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
        warn: !a.json,
    };
    let mut loader = Loader::new(ds, cfg)?;
    for _ in 0..workers {
        loader.next_host()?;
    }
    let t = Instant::now();
    let mut images = 0u64;
    while t.elapsed() < dur {
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
