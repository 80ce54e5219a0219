//! `gpubench peak`: the device's matrix-multiply throughput for one
//! precision, as the ceiling its training runs are put against (`mfu_pct`).
//! Square matmuls back to back, the device synchronized before each clock
//! reading, warm-up excluded; rounds of at least `min_time`, their median
//! kept with the lowest and highest.
use anyhow::Result;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

use crate::config::Precision;

/// What one precision's rounds gave, TFLOP/s.
#[derive(Debug, Clone, Copy)]
pub struct PeakRounds {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

fn kind_of(p: Precision) -> Kind {
    match p {
        Precision::Fp32 | Precision::Tf32 => Kind::Float,
        Precision::Fp16 => Kind::Half,
        Precision::Bf16 => Kind::BFloat16,
    }
}

fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

/// `rounds` rounds of `n`×`n` matmuls on `device` at `p` (TF32 allowed only for tf32).
pub fn measure(device: Device, p: Precision, n: i64, rounds: usize, min_time: Duration) -> Result<PeakRounds> {
    crate::ffi::set_tf32(p == Precision::Tf32)?;
    let opts = (kind_of(p), device);
    let a = Tensor::f_randn([n, n], opts)?;
    let b = Tensor::f_randn([n, n], opts)?;
    let flop = 2.0 * (n as f64).powi(3);
    // Warm-up: kernels chosen, clocks up.
    for _ in 0..3 {
        let _ = a.f_matmul(&b)?;
    }
    sync(device);
    let mut v = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        sync(device);
        let t0 = Instant::now();
        let mut k = 0u32;
        loop {
            let _ = a.f_matmul(&b)?;
            k += 1;
            // Reading the clock needs the device done; a few matmuls between syncs.
            if k.is_multiple_of(4) {
                sync(device);
                if t0.elapsed() >= min_time {
                    break;
                }
            }
        }
        v.push(flop * k as f64 / t0.elapsed().as_secs_f64() / 1e12);
    }
    crate::ffi::set_tf32(false)?;
    let (lo, hi) = (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max));
    Ok(PeakRounds { median: crate::metrics::stats::percentile(&v, 50.0), lo, hi })
}

/// `gpubench peak`, checked: which devices, precisions, sizes.
#[derive(Debug, Clone)]
pub struct PeakPlan {
    pub devices: crate::device::Devices,
    pub precisions: Vec<Precision>,
    pub size: i64,
    pub rounds: usize,
    pub round_time: Duration,
    pub format: crate::report::export::Format,
    /// `--out`: the results file that gets a row per device and precision.
    pub out: Option<std::path::PathBuf>,
    /// `--label`, in those rows.
    pub label: String,
}
