//! `gpubench predict`'s arguments and their one conversion into a
//! `PredictConfig`.
use anyhow::Result;
use clap::Args;
use std::path::PathBuf;

use super::opts::{BatchSize, DeviceCounts, DeviceOpts, ModelOpts, Nnodes, OutputOpts, ReducerOpts, StepOpts};
use super::{Configure, Job};
use crate::config::{CurveSource, PredictConfig, ScaleTo};
use crate::results::Fields;
use crate::report::export::Format;
use crate::device::{self, Devices};
use crate::error::usage;

/// Predict DDP's step time and scaling on N devices from one device's
/// profile and an all-reduce curve (measured or published).
#[derive(Args, Debug, Clone)]
#[command(
    mut_arg("device_counts", |a| a.default_value("2,4,8")),
    mut_arg("steps", |a| a.default_value("10")),
    mut_arg("warmup", |a| a.default_value("3"))
)]
pub(crate) struct PredictArgs {
    // The one device profiled: the first of --gpus, or the CPU.
    #[command(flatten)]
    pub devices: DeviceOpts,
    #[command(flatten)]
    pub device_counts: DeviceCounts,
    #[command(flatten)]
    pub nnodes: Nnodes,
    #[command(flatten)]
    pub model: ModelOpts,
    #[command(flatten)]
    pub batch_size: BatchSize,
    #[command(flatten)]
    pub reducer: ReducerOpts,
    /// Predict for another device from its one-device throughput (images/s,
    /// e.g. a published figure) at --target-batch-size and
    /// --target-image-size: the profile here gives only the step's shape
    /// (phases, buckets, when they become ready), scaled to that speed.
    /// Implies a GPU target (communication overlaps backward).
    #[arg(long, value_name = "IMG/S")]
    pub scale_to: Option<f64>,
    /// With --scale-to: the target's images per device (default --batch-size).
    #[arg(long, value_name = "N", requires = "scale_to")]
    pub target_batch_size: Option<i64>,
    /// With --scale-to: the target's image size (default --image-size).
    #[arg(long, value_name = "PX", requires = "scale_to")]
    pub target_image_size: Option<i64>,
    /// A results file with in-place rows from `gpubench allreduce` at each world size.
    #[arg(long, value_name = "FILE.csv", conflicts_with = "busbw")]
    pub allreduce: Option<PathBuf>,
    /// Instead of a file: the bus bandwidth in GB/s (e.g. a published nccl-tests figure)...
    #[arg(long, value_name = "GB/s")]
    pub busbw: Option<f64>,
    /// ...and the latency of an all-reduce.
    #[arg(long, default_value = "20us", allow_hyphen_values = true, value_name = "DURATION")]
    pub latency: String,
    #[command(flatten)]
    pub steps: StepOpts,
    /// The profile's timed steps go on past --steps until this much was
    /// timed (a short step needs many samples for a steady median).
    #[arg(long, default_value = "2s", allow_hyphen_values = true, value_name = "DURATION")]
    pub min_time: String,
    // --out: a row per world size (impl=predicted).
    #[command(flatten)]
    pub output: OutputOpts,
}

impl Configure for PredictArgs {
    fn configure(self) -> Result<Job> {
        let cfg = self.into_config()?;
        Ok(Box::new(move || crate::commands::predict::run(cfg)))
    }
}

impl PredictArgs {
    pub(crate) fn into_config(self) -> Result<PredictConfig> {
        let a = self;
        let output = a.output.output("predict", &[Format::Table, Format::Csv, Format::Json])?;
        a.devices.one_cpu("predict", " and the world sizes with --device-counts")?;
        let m = &a.model;
        let (batch_size, nodes) = (*a.batch_size, *a.nnodes);
        let steps = a.steps.steps;
        let warmup: u64 = a.steps.warmup.trim().parse().map_err(|_| {
            usage(format!(
                "--warmup {}: predict warms up for a number of steps (auto is run's rule), e.g. --warmup 3",
                a.steps.warmup
            ))
        })?;
        let curve = match (&a.allreduce, a.busbw) {
            (Some(p), _) => {
                if !p.is_file() {
                    return Err(usage(format!("--allreduce {}: no such file", p.display())));
                }
                let rows = crate::results::csv::read_rows(p)?;
                if !rows.iter().any(|r| r.is_allreduce()) {
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
        let mut devices: Vec<usize> = a.device_counts.device_counts.clone();
        if devices.contains(&0) {
            return Err(usage("--device-counts 0: a device count is 1 or more; write e.g. 2,4,8"));
        }
        if nodes == 0 {
            return Err(usage("--nnodes must be at least 1"));
        }
        if devices.is_empty() || devices.iter().all(|&n| n * nodes < 2) {
            return Err(usage("--device-counts needs a world size of 2 or more (devices × --nnodes)"));
        }
        devices.retain(|&n| n * nodes >= 2);
        let min_time = super::parse::parse_duration_or_zero("--min-time", &a.min_time)?;
        let r = &a.reducer;
        let min = m.model.min_image_size();
        let scale_to = match a.scale_to {
            None => None,
            Some(t) if !t.is_finite() || t <= 0.0 => {
                return Err(usage(format!("--scale-to must be a throughput above zero in images/s (it is {t})")))
            }
            Some(throughput) => {
                let batch = a.target_batch_size.unwrap_or(batch_size);
                if batch <= 0 {
                    return Err(usage("--target-batch-size must be at least 1 (images per device)"));
                }
                let image_size = a.target_image_size.unwrap_or(*m.image_size);
                if image_size < min {
                    return Err(usage(format!(
                        "--target-image-size {image_size} is too small for {}; use at least {min}",
                        m.model.name()
                    )));
                }
                Some(ScaleTo { throughput, batch, image_size })
            }
        };
        let device = if a.devices.cpu.is_some() {
            Devices::cpu(1)
        } else {
            let d = device::resolve(a.devices.gpus.as_deref(), None, !output.talks())?;
            Devices { kind: d.kind, ordinals: d.ordinals.into_iter().take(1).collect() }
        };
        let workload = m.workload(device.kind)?;
        Ok(PredictConfig {
            device,
            devices,
            nodes,
            workload,
            batch_per_device: batch_size,
            bucket_cap_mb: r.bucket_cap_mb,
            comm_hook: r.comm_hook,
            broadcast_buffers: !r.no_broadcast_buffers,
            scale_to,
            curve,
            steps,
            min_time,
            warmup,
            output,
        })
    }
}
