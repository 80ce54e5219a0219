//! `gpubench peak`: its arguments, checked into a plan before any work.
use anyhow::Result;

use super::parse::parse_duration;
use super::PeakArgs;
use crate::bench::peak::PeakPlan;
use crate::config::Precision;
use crate::device::{self, DeviceKind};
use crate::error::usage;

pub(crate) fn plan(a: PeakArgs) -> Result<PeakPlan> {
    let devices = device::resolve(a.gpus.as_deref(), a.cpu.then_some(1), true)?;
    let cpu = devices.kind == DeviceKind::Cpu;
    let precisions = if a.precision.is_empty() {
        match cpu {
            true => vec![Precision::Fp32, Precision::Bf16],
            false if device::bf16_unsupported(&devices.ordinals).is_some() => {
                vec![Precision::Fp32, Precision::Tf32, Precision::Fp16]
            }
            false => Precision::ALL.to_vec(),
        }
    } else {
        a.precision.clone()
    };
    if cpu && precisions.contains(&Precision::Tf32) {
        return Err(usage("--precision tf32 is a CUDA tensor-core mode; on the CPU use fp32 or bf16"));
    }
    let size = a.size.unwrap_or(if cpu { 2048 } else { 8192 });
    if !(64..=65536).contains(&size) {
        return Err(usage(format!("--size {size}: the matrices' side must be between 64 and 65536")));
    }
    if a.rounds == 0 {
        return Err(usage("--rounds 0: at least one round"));
    }
    let round_time = parse_duration("--round-time", &a.round_time)?;
    if let Some(out) = &a.out {
        crate::results::csv::check_writable(out)?;
    }
    Ok(PeakPlan { devices, precisions, size, rounds: a.rounds, round_time, json: a.json, out: a.out })
}
