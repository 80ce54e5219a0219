//! `gpubench peak`: its arguments, checked into a plan before any work.
use anyhow::Result;
use clap::Args;

use super::opts::{DeviceOpts, FormatOpt, LabelOpt, OutOpt};
use super::parse::parse_duration;
use super::{Configure, Job};
use crate::bench::peak::PeakPlan;
use crate::config::Precision;
use crate::device::{self, DeviceKind};
use crate::error::usage;

/// Measure the device's matrix-multiply peak per precision and keep it
/// (~/.cache/gpubench/peaks.json), so that runs report their MFU against it.
#[derive(Args, Debug, Clone)]
pub(crate) struct PeakArgs {
    #[command(flatten)]
    pub devices: DeviceOpts,
    /// Precisions to measure, comma-separated (default: fp32, tf32, fp16 and
    /// bf16 on a GPU, bf16 from compute capability 8.0; fp32 and bf16 on the CPU).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "LIST")]
    pub precisions: Vec<Precision>,
    /// The square matrices' side (default 8192 on a GPU, 2048 on the CPU).
    #[arg(long, value_name = "N")]
    pub size: Option<i64>,
    /// Rounds per precision; their median is kept.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub rounds: usize,
    /// Each round runs at least this long.
    #[arg(long, default_value = "1s", allow_hyphen_values = true, value_name = "DURATION")]
    pub round_time: String,
    #[command(flatten)]
    pub format: FormatOpt,
    // With --out: one results row per device and precision (mode `peak`).
    #[command(flatten)]
    pub out: OutOpt,
    #[command(flatten)]
    pub label: LabelOpt,
}

impl Configure for PeakArgs {
    fn configure(self) -> Result<Job> {
        let plan = plan(self)?;
        Ok(Box::new(move || crate::commands::peak::run(&plan)))
    }
}

fn plan(a: PeakArgs) -> Result<PeakPlan> {
    a.devices.one_cpu("peak", "")?;
    let devices = device::resolve(a.devices.gpus.as_deref(), a.devices.cpu.map(|_| 1), true)?;
    let cpu = devices.kind == DeviceKind::Cpu;
    // A CPU without fast bf16 kernels measures it only when asked (then
    // within the budget, at a smaller size): by default it is said skipped.
    let slow_bf16 = if cpu { device::cpu_slow_bf16() } else { None };
    let mut skipped = vec![];
    let precisions = if a.precisions.is_empty() {
        match cpu {
            true if slow_bf16.is_some() => {
                skipped.push((Precision::Bf16, slow_bf16.clone().unwrap_or_default()));
                vec![Precision::Fp32]
            }
            true => vec![Precision::Fp32, Precision::Bf16],
            false if device::bf16_unsupported(&devices.ordinals).is_some() => {
                vec![Precision::Fp32, Precision::Tf32, Precision::Fp16]
            }
            false => Precision::ALL.to_vec(),
        }
    } else {
        a.precisions.clone()
    };
    if cpu && precisions.contains(&Precision::Tf32) {
        return Err(usage("--precisions tf32 is a CUDA tensor-core mode; on the CPU use fp32 or bf16"));
    }
    let size = a.size.unwrap_or(if cpu { 2048 } else { 8192 });
    if !(64..=65536).contains(&size) {
        return Err(usage(format!("--size {size}: the matrices' side must be between 64 and 65536")));
    }
    if a.rounds == 0 {
        return Err(usage("--rounds 0: at least one round"));
    }
    let round_time = parse_duration("--round-time", &a.round_time)?;
    // Each precision ends within three times its rounds (10 s at least),
    // warm-up included: a slower one is measured at a smaller size.
    let budget = (round_time * a.rounds as u32 * 3).max(std::time::Duration::from_secs(10));
    crate::results::peak::check_store()?;
    if let Some(out) = a.out.as_deref() {
        crate::results::csv::check_writable(out)?;
    }
    Ok(PeakPlan {
        devices,
        precisions,
        size,
        rounds: a.rounds,
        round_time,
        budget,
        skipped,
        format: *a.format,
        out: a.out.out,
        label: a.label.label,
    })
}
