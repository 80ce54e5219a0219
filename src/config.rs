//! A run's validated configuration. Everything the command line can get
//! wrong is checked here, before any device is touched or any work is done.
use anyhow::Result;
use clap::ValueEnum;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::RunArgs;
use crate::device::Devices;
use crate::error::usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StrategyKind {
    /// One device.
    Single,
    /// DataParallel: one process, replicas refreshed from the master every step.
    Dp,
    /// DistributedDataParallel: one process per device, c10d Reducer all-reduce.
    Ddp,
}

impl StrategyKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Single => "single",
            Self::Dp => "dp",
            Self::Ddp => "ddp",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    Resnet18,
    Resnet34,
    Resnet50,
    Resnet101,
    Resnet152,
    /// Small BatchNorm-free CNN for tests and smoke runs.
    Tinycnn,
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Resnet18 => "resnet18",
            Self::Resnet34 => "resnet34",
            Self::Resnet50 => "resnet50",
            Self::Resnet101 => "resnet101",
            Self::Resnet152 => "resnet152",
            Self::Tinycnn => "tinycnn",
        }
    }

    /// Smallest square input the model accepts: ResNets downsample by 32.
    pub fn min_image_size(self) -> i64 {
        match self {
            Self::Tinycnn => 8,
            _ => 32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Gloo,
    Nccl,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Gloo => "gloo",
            Self::Nccl => "nccl",
        }
    }
}

/// How long a phase lasts: a number of steps or a wall-clock time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Length {
    Steps(u64),
    Time(#[serde(with = "humantime_serde_secs")] Duration),
}

mod humantime_serde_secs {
    pub fn serialize<S: serde::Serializer>(d: &std::time::Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub strategy: StrategyKind,
    pub devices: Devices,
    pub model: ModelKind,
    pub num_classes: i64,
    pub image_size: i64,
    pub batch_per_device: i64,
    pub timed: Length,
    pub warmup: Length,
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    pub seed: u64,
    pub threads: Option<usize>,
    pub data: String,
    pub label: String,
    pub out: Option<PathBuf>,
    pub json: bool,
    pub quiet: bool,
    pub precision: crate::strategy::precision::Precision,
    pub channels_last: bool,
    pub cudnn_benchmark: bool,
    pub deterministic: bool,
    pub breakdown: bool,
    pub sample_interval: Duration,
    pub telemetry: Option<PathBuf>,
}

impl RunConfig {
    pub fn global_batch(&self) -> i64 {
        self.batch_per_device * self.devices.len() as i64
    }
}

pub fn parse_duration(flag: &str, s: &str) -> Result<Duration> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| usage(format!("{flag} {s:?} is not a duration ({e}); write it like 30s, 2m or 1m30s")))?;
    if d.is_zero() {
        return Err(usage(format!("{flag} must be longer than zero")));
    }
    Ok(d)
}

/// Checks everything that does not need a device; `devices` is resolved by
/// the caller (it needs to ask CUDA).
pub fn validate(a: &RunArgs, devices: Devices) -> Result<RunConfig> {
    if a.batch_size <= 0 {
        return Err(usage("--batch-size must be at least 1 (it is per device)"));
    }
    if a.num_classes < 2 {
        return Err(usage("--num-classes must be at least 2"));
    }
    let min = a.model.min_image_size();
    if a.image_size < min {
        return Err(usage(format!(
            "--image-size {} is too small for {}; use at least {min}",
            a.image_size,
            a.model.name()
        )));
    }
    let timed = match &a.duration {
        Some(s) => Length::Time(parse_duration("--duration", s)?),
        None if a.steps == 0 => return Err(usage("--steps must be at least 1")),
        None => Length::Steps(a.steps),
    };
    let warmup = match &a.warmup_time {
        Some(s) => Length::Time(parse_duration("--warmup-time", s)?),
        None => Length::Steps(a.warmup),
    };
    if a.threads == Some(0) {
        return Err(usage("--threads must be at least 1"));
    }
    if a.workers == Some(0) {
        return Err(usage("--workers must be at least 1"));
    }
    if a.data != "synthetic" {
        crate::data::imagefolder::check_layout(&a.data, a.num_classes)?;
    }
    if a.strategy == StrategyKind::Single && devices.len() > 1 {
        return Err(usage(format!(
            "--strategy single uses one device but {} were given; use --strategy dp or ddp for several",
            devices.len()
        )));
    }
    for (flag, v) in [("--lr", a.lr.unwrap_or(0.1)), ("--momentum", a.momentum), ("--weight-decay", a.weight_decay)] {
        if !v.is_finite() || v < 0.0 {
            return Err(usage(format!("{flag} must be a finite number ≥ 0")));
        }
    }
    {
        use crate::strategy::precision::Precision;
        let cpu = devices.kind == crate::device::DeviceKind::Cpu;
        if cpu && a.precision == Precision::Tf32 {
            return Err(usage("--precision tf32 is a CUDA tensor-core mode; on the CPU use fp32 or bf16"));
        }
    }
    let n = devices.len() as i64;
    let global = a.batch_size * n;
    Ok(RunConfig {
        strategy: a.strategy,
        devices,
        model: a.model,
        num_classes: a.num_classes,
        image_size: a.image_size,
        batch_per_device: a.batch_size,
        timed,
        warmup,
        lr: a.lr.unwrap_or(0.1 * global as f64 / 256.0),
        momentum: a.momentum,
        weight_decay: a.weight_decay,
        seed: a.seed,
        threads: a.threads,
        data: a.data.clone(),
        label: a.label.clone(),
        out: a.out.clone(),
        json: a.json,
        quiet: a.quiet,
        precision: a.precision,
        channels_last: a.channels_last,
        cudnn_benchmark: a.cudnn_benchmark,
        deterministic: a.deterministic,
        breakdown: a.breakdown,
        sample_interval: parse_duration("--sample-interval", &a.sample_interval)?,
        telemetry: a.telemetry.clone(),
    })
}
