//! `gpubench peak`: the device's matrix-multiply throughput for one
//! precision, as the ceiling its training runs are put against (`mfu_pct`).
//! Square matmuls back to back, the device synchronized before each clock
//! reading, warm-up excluded; rounds of at least `min_time`, their median
//! kept with the lowest and highest.
//!
//! Every precision's measurement has a time budget: a probe at a small size
//! says how long one matmul at the asked size would take, and the size is
//! halved until warm-up and rounds fit (a CPU's reference bf16 kernels once
//! kept `peak --cpu` running for over 20 minutes). The size measured is
//! reported.
use anyhow::Result;
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

use crate::config::Precision;
use crate::device::DeviceKind;
use crate::results::csv::Row;
use crate::results::peak::{self, Peak};

/// What one precision's rounds gave, TFLOP/s.
#[derive(Debug, Clone, Copy)]
pub struct PeakRounds {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
    /// The matrices' side measured: the one asked, or a smaller one that fits the budget.
    pub size: i64,
}

/// The smallest side the budget may cut a measurement to.
const SMALLEST: i64 = 256;

/// The largest side, from `asked` halving down to `SMALLEST`, at which the
/// warm-up and rounds (`matmuls` in all) take at most `budget`, when one
/// `SMALLEST` matmul took `probe` (a matmul's time grows as the side cubed).
fn fitting_size(asked: i64, probe: Duration, matmuls: u32, budget: Duration) -> i64 {
    let mut n = asked;
    while n > SMALLEST {
        let one = probe.as_secs_f64() * (n as f64 / SMALLEST as f64).powi(3);
        if one * matmuls as f64 <= budget.as_secs_f64() {
            break;
        }
        n = (n / 2).max(SMALLEST);
    }
    n
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

/// `rounds` rounds of `n`×`n` matmuls on `device` at `p` (TF32 allowed
/// only for tf32), at a smaller side if `n` would not fit `budget`.
pub fn measure(
    device: Device,
    p: Precision,
    n: i64,
    rounds: usize,
    min_time: Duration,
    budget: Duration,
) -> Result<PeakRounds> {
    crate::ffi::set_tf32(p == Precision::Tf32)?;
    let opts = (kind_of(p), device);
    // The probe: one small matmul after one untimed, so the kernels are chosen.
    let probe_n = n.min(SMALLEST);
    let (a, b) = (Tensor::f_randn([probe_n, probe_n], opts)?, Tensor::f_randn([probe_n, probe_n], opts)?);
    let _ = a.f_matmul(&b)?;
    sync(device);
    let t0 = Instant::now();
    let _ = a.f_matmul(&b)?;
    sync(device);
    // 3 warm-up matmuls, then at least one per round (the CPU reads the clock after each).
    let n = fitting_size(n, t0.elapsed(), 3 + rounds as u32, budget);
    let a = Tensor::f_randn([n, n], opts)?;
    let b = Tensor::f_randn([n, n], opts)?;
    let flop = 2.0 * (n as f64).powi(3);
    // Warm-up: kernels chosen, clocks up.
    for _ in 0..3 {
        let _ = a.f_matmul(&b)?;
    }
    sync(device);
    // A few matmuls between a GPU's syncs keep it busy; the CPU's clock is free to read.
    let every = if device == Device::Cpu { 1 } else { 4 };
    let mut v = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        sync(device);
        let t0 = Instant::now();
        let mut k = 0u32;
        loop {
            let _ = a.f_matmul(&b)?;
            k += 1;
            if k.is_multiple_of(every) {
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
    Ok(PeakRounds { median: crate::metrics::stats::percentile(&v, 50.0), lo, hi, size: n })
}

/// `gpubench peak`, checked: which devices, precisions, sizes.
#[derive(Debug, Clone)]
pub struct PeakPlan {
    pub devices: crate::device::Devices,
    pub precisions: Vec<Precision>,
    pub size: i64,
    pub rounds: usize,
    pub round_time: Duration,
    /// The most one precision's measurement may take before its size is cut.
    pub budget: Duration,
    /// Precisions left out, each with why (a CPU without fast bf16 kernels).
    pub skipped: Vec<(Precision, String)>,
    pub format: crate::report::export::Format,
    /// `--out`: the results file that gets a row per device and precision.
    pub out: Option<std::path::PathBuf>,
    /// `--label`, in those rows.
    pub label: String,
}

/// One device's peak at one precision.
pub(crate) struct Measured {
    /// The device's name (GPU, or CPU model).
    pub name: String,
    pub precision: Precision,
    pub rounds: PeakRounds,
    /// The datasheet's figure for this device and precision, where known.
    pub sheet: Option<f64>,
}

/// What `gpubench peak` measured: every device × precision, their rows,
/// the notes (what was skipped or cut), and where the peaks were kept. A
/// cache that cannot be written loses no measurement: `store_failed` says
/// why after the figures.
pub(crate) struct PeakRun {
    pub measured: Vec<Measured>,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub kept: Option<std::path::PathBuf>,
    pub store_failed: Option<anyhow::Error>,
}

/// Measures every device and precision of `plan`, one after another, and
/// keeps each peak (`results::peak`).
pub(crate) fn measure_all(plan: &PeakPlan) -> Result<PeakRun> {
    let targets: Vec<(Device, String)> = match plan.devices.kind {
        DeviceKind::Cpu => vec![(Device::Cpu, crate::device::cpu_model())],
        DeviceKind::Cuda => {
            plan.devices.ordinals.iter().map(|&o| (Device::Cuda(o), crate::device::device_name(o))).collect()
        }
    };
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let skipped = plan.skipped.iter().map(|(p, why)| {
        format!("{} skipped: {why}; --precisions {} measures it anyway, cut to fit the time budget", p.name(), p.name())
    });
    let mut run = PeakRun { measured: vec![], rows: vec![], notes: skipped.collect(), kept: None, store_failed: None };
    for (device, name) in &targets {
        for &p in &plan.precisions {
            if let Device::Cuda(o) = device {
                let _ = crate::ffi::cuda_set_device(*o);
            }
            let r = measure(*device, p, plan.size, plan.rounds, plan.round_time, plan.budget)?;
            if r.size < plan.size {
                run.notes.push(format!(
                    "{name} {}: measured at {n}×{n}, not {m}×{m}: one matmul at {m} would not fit the {} budget",
                    p.name(),
                    humantime::format_duration(plan.budget),
                    n = r.size,
                    m = plan.size
                ));
            }
            let sheet = peak::datasheet(name, p.name());
            let entry = Peak { tflops: r.median, lo: r.lo, hi: r.hi, size: r.size, measured_at: now.clone() };
            match peak::store(name, p.name(), entry) {
                Ok(path) => run.kept = Some(path),
                Err(e) => run.store_failed = Some(e),
            }
            run.rows.push(peak_row(plan, *device, name, p, &r, sheet));
            run.measured.push(Measured { name: name.clone(), precision: p, rounds: r, sheet });
        }
    }
    Ok(run)
}

/// A measured peak as a results row (mode `peak`): the device, precision and
/// library versions of a run's row, the median TFLOP/s in `achieved_tflops`,
/// the rounds' range and the matrices in the note.
fn peak_row(
    plan: &PeakPlan,
    device: tch::Device,
    name: &str,
    p: crate::config::Precision,
    r: &PeakRounds,
    sheet: Option<f64>,
) -> Row {
    let devices = match device {
        tch::Device::Cuda(o) => crate::device::Devices { kind: DeviceKind::Cuda, ordinals: vec![o] },
        _ => crate::device::Devices { kind: DeviceKind::Cpu, ordinals: vec![0] },
    };
    let mut row = crate::bench::row::identity_row(&devices, &plan.label, crate::results::Implementation::Gpubench);
    row.mode = crate::results::Mode::Peak;
    row.status = crate::results::Status::Ok;
    row.device_name = name.to_string();
    row.devices = devices.ordinals.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(",");
    row.n_devices = 1;
    row.precision = p.name().into();
    row.achieved_tflops = Some(r.median);
    row.mfu_datasheet_pct = sheet.map(|s| 100.0 * r.median / s);
    row.note = format!(
        "matmul peak: {n}x{n}x{n}, median of {} rounds of at least {}, rounds from {:.3} to {:.3} TFLOP/s",
        plan.rounds,
        humantime::format_duration(plan.round_time),
        r.lo,
        r.hi,
        n = r.size
    );
    row
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn the_size_is_halved_until_the_rounds_fit_the_budget() {
        let ms = Duration::from_millis;
        // 1 ms at 256: 2048 is 512 ms a matmul, 8 of them 4 s.
        assert_eq!(super::fitting_size(2048, ms(1), 8, ms(5000)), 2048);
        assert_eq!(super::fitting_size(2048, ms(1), 8, ms(1000)), 1024);
        // Reference kernels: even 256 is over, and 256 is the floor.
        assert_eq!(super::fitting_size(2048, ms(900), 8, ms(1000)), 256);
        assert_eq!(super::fitting_size(128, ms(900), 8, ms(1000)), 128);
    }
}
