//! `gpubench predict`'s arguments and their one conversion into a
//! `PredictConfig`.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use crate::config::{CommHook, CurveSource, ModelKind, Precision, PredictConfig, ScaleTo};
use crate::device::{self, DeviceKind, Devices};
use crate::error::usage;

#[derive(Args, Debug, Clone)]
pub(crate) struct PredictArgs {
    /// The GPU to profile (one ordinal). Default: GPU 0 if there is one, else the CPU.
    #[arg(long, value_name = "N", conflicts_with = "cpu")]
    pub gpus: Option<String>,
    /// Profile on the CPU (each rank's share of the cores).
    #[arg(long)]
    pub cpu: bool,
    /// World sizes to predict, comma-separated (devices per node).
    #[arg(long, default_value = "2,4,8", value_name = "LIST")]
    pub devices: String,
    /// Nodes: each world size is devices × nodes.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    #[arg(long, value_enum, default_value_t = ModelKind::Resnet50)]
    pub model: ModelKind,
    #[arg(long, default_value_t = 1000)]
    pub num_classes: i64,
    #[arg(long, default_value_t = 224)]
    pub image_size: i64,
    /// Images per device.
    #[arg(long, default_value_t = 64)]
    pub batch_size: i64,
    #[arg(long, value_enum, default_value_t = Precision::Fp32)]
    pub precision: Precision,
    #[arg(long)]
    pub channels_last: bool,
    #[arg(long, default_value_t = 25.0)]
    pub bucket_cap_mb: f64,
    #[arg(long, value_enum, default_value_t = CommHook::None)]
    pub comm_hook: CommHook,
    /// Predict for another device from its one-device throughput (images/s,
    /// e.g. a published figure) at --target-batch and --target-image-size:
    /// the profile here gives only the step's shape (phases, buckets, when
    /// they become ready), scaled to that speed. Implies a GPU target
    /// (communication overlaps backward).
    #[arg(long, value_name = "IMG/S")]
    pub scale_to: Option<f64>,
    /// With --scale-to: the target's images per device (default --batch-size).
    #[arg(long, value_name = "N", requires = "scale_to")]
    pub target_batch: Option<i64>,
    /// With --scale-to: the target's image size (default --image-size).
    #[arg(long, value_name = "PX", requires = "scale_to")]
    pub target_image_size: Option<i64>,
    /// As run's: the ddp being predicted does not broadcast BatchNorm
    /// buffers before each forward.
    #[arg(long)]
    pub no_broadcast_buffers: bool,
    /// A results file with in-place rows from `gpubench allreduce` at each world size.
    #[arg(long, value_name = "FILE.csv", conflicts_with = "busbw")]
    pub allreduce: Option<PathBuf>,
    /// Instead of a file: the bus bandwidth in GB/s (e.g. a published nccl-tests figure)...
    #[arg(long, value_name = "GB/s")]
    pub busbw: Option<f64>,
    /// ...and the latency of an all-reduce.
    #[arg(long, default_value = "20us", allow_hyphen_values = true, value_name = "DURATION")]
    pub latency: String,
    /// Timed profile steps, after --warmup untimed ones...
    #[arg(long, default_value_t = 10)]
    pub steps: u64,
    /// ...and more until this much time was timed (a short step needs many
    /// samples for a steady median).
    #[arg(long, default_value = "2s", allow_hyphen_values = true, value_name = "DURATION")]
    pub min_time: String,
    #[arg(long, default_value_t = 3)]
    pub warmup: u64,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub label: String,
    /// Append a row per world size (impl=predicted) to this CSV file.
    #[arg(long, value_name = "FILE.csv")]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
    #[arg(long, short)]
    pub quiet: bool,
}

impl PredictArgs {
    pub(crate) fn into_config(self) -> Result<PredictConfig> {
        let a = self;
        let curve = match (&a.allreduce, a.busbw) {
            (Some(p), _) => {
                if !p.is_file() {
                    return Err(usage(format!("--allreduce {}: no such file", p.display())));
                }
                let rows = crate::results::csv::read_rows(p)?;
                if !rows.iter().any(|r| r.mode == "allreduce") {
                    return Err(usage(format!(
                        "--allreduce {}: no all-reduce rows in it; write them with gpubench allreduce --out {}",
                        p.display(),
                        p.display()
                    )));
                }
                CurveSource::File(p.clone())
            }
            (None, Some(b)) if b.is_finite() && b > 0.0 => {
                let latency = super::parse::parse_duration_or_zero("--latency", &a.latency)?;
                CurveSource::Busbw { busbw_gbs: b, latency }
            }
            (None, Some(b)) => return Err(usage(format!("--busbw must be above zero (it is {b})"))),
            (None, None) => {
                return Err(usage(
                    "predict needs an all-reduce curve: --allreduce FILE (from gpubench allreduce --out FILE) or \
                     --busbw GB/s for hardware you do not have",
                ))
            }
        };
        let mut devices = vec![];
        for d in a.devices.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            match d.parse::<usize>() {
                Ok(n) if n >= 1 => devices.push(n),
                _ => {
                    return Err(usage(format!(
                        "--devices {}: {d:?} is not a device count; write e.g. 2,4,8",
                        a.devices
                    )))
                }
            }
        }
        if a.nodes == 0 {
            return Err(usage("--nodes must be at least 1"));
        }
        if devices.is_empty() || devices.iter().all(|&n| n * a.nodes < 2) {
            return Err(usage("--devices needs a world size of 2 or more (devices × --nodes)"));
        }
        devices.retain(|&n| n * a.nodes >= 2);
        if a.batch_size <= 0 {
            return Err(usage("--batch-size must be at least 1 (it is per device)"));
        }
        let min_time = super::parse::parse_duration_or_zero("--min-time", &a.min_time)?;
        if a.steps == 0 {
            return Err(usage("--steps must be at least 1"));
        }
        if !a.bucket_cap_mb.is_finite() || a.bucket_cap_mb <= 0.0 {
            return Err(usage("--bucket-cap-mb must be above zero"));
        }
        let min = a.model.min_image_size();
        if a.image_size < min {
            return Err(usage(format!(
                "--image-size {} is too small for {}; use at least {min}",
                a.image_size,
                a.model.name()
            )));
        }
        let scale_to = match a.scale_to {
            None => None,
            Some(t) if !t.is_finite() || t <= 0.0 => {
                return Err(usage(format!("--scale-to must be a throughput above zero in images/s (it is {t})")))
            }
            Some(throughput) => {
                let batch = a.target_batch.unwrap_or(a.batch_size);
                if batch <= 0 {
                    return Err(usage("--target-batch must be at least 1 (images per device)"));
                }
                let image_size = a.target_image_size.unwrap_or(a.image_size);
                if image_size < min {
                    return Err(usage(format!(
                        "--target-image-size {image_size} is too small for {}; use at least {min}",
                        a.model.name()
                    )));
                }
                Some(ScaleTo { throughput, batch, image_size })
            }
        };
        let device = if a.cpu {
            Devices::cpu(1)
        } else {
            let d = device::resolve(a.gpus.as_deref(), None, a.quiet || a.json)?;
            Devices { kind: d.kind, ordinals: d.ordinals.into_iter().take(1).collect() }
        };
        if device.kind == DeviceKind::Cpu && a.precision == Precision::Tf32 {
            return Err(usage("--precision tf32 is a CUDA tensor-core mode; on the CPU use fp32 or bf16"));
        }
        Ok(PredictConfig {
            device,
            devices,
            nodes: a.nodes,
            model: a.model,
            num_classes: a.num_classes,
            image_size: a.image_size,
            batch_per_device: a.batch_size,
            precision: a.precision,
            channels_last: a.channels_last,
            bucket_cap_mb: a.bucket_cap_mb,
            comm_hook: a.comm_hook,
            broadcast_buffers: !a.no_broadcast_buffers,
            scale_to,
            curve,
            steps: a.steps,
            min_time,
            warmup: a.warmup,
            seed: a.seed,
            label: a.label,
            out: a.out,
            json: a.json,
            quiet: a.quiet,
        })
    }
}
