//! Gathers a run's per-device metrics: starts the right telemetry source for
//! the devices, and after the run combines its samples (inside the timed
//! window only), the allocator's peaks and the process counters.
use std::time::{Duration, Instant};

use super::devices::{apply_samples, DeviceMetrics};
use super::sampler::{peak_rss_mb, DeviceSample, EnergyMarks, NvmlSource, ProcessSource, Sampler, MB};
use crate::device::{DeviceKind, Devices};

/// The timed window, as `bench::measure` saw it.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub start: Instant,
    pub end: Instant,
    /// Process CPU seconds spent inside the window.
    pub cpu_secs: Option<f64>,
}

pub struct Monitor {
    sampler: Option<Sampler>,
    /// Why device telemetry is not available, when it is not.
    pub unavailable: Option<String>,
}

impl Monitor {
    /// NVML on CUDA devices (n/a with the reason if it cannot load), the
    /// process itself on the CPU.
    pub fn start(devices: &Devices, interval: Duration) -> Monitor {
        match devices.kind {
            DeviceKind::Cuda => match NvmlSource::new(&devices.ordinals) {
                Ok(src) => Monitor { sampler: Some(Sampler::start(Box::new(src), interval)), unavailable: None },
                Err(e) => Monitor { sampler: None, unavailable: Some(crate::error::one_line(&e)) },
            },
            DeviceKind::Cpu => {
                Monitor { sampler: Some(Sampler::start(Box::new(ProcessSource::new()), interval)), unavailable: None }
            }
        }
    }

    /// Reads the energy counters at the timed window's bounds, when
    /// telemetry runs.
    pub(crate) fn energy_marks(&self) -> Option<EnergyMarks> {
        self.sampler.as_ref().map(Sampler::energy_marks)
    }

    /// Stops sampling; returns one DeviceMetrics per device (one for the
    /// process on CPU runs) and every sample, for `--telemetry`.
    pub fn finish(
        self,
        devices: &Devices,
        roles: &[String],
        window: Option<Window>,
    ) -> (Vec<DeviceMetrics>, Vec<DeviceSample>) {
        let (devs, samples, _) = self.finish_with_notes(devices, roles, window);
        (devs, samples)
    }

    /// `finish`, and what the device samples of the window say disturbed the
    /// run (throttling, other processes: `metrics::interference`).
    pub(crate) fn finish_with_notes(
        self,
        devices: &Devices,
        roles: &[String],
        window: Option<Window>,
    ) -> (Vec<DeviceMetrics>, Vec<DeviceSample>, Vec<String>) {
        let (samples, span) = match self.sampler {
            Some(s) => {
                let span = window.map(|w| (s.clock(w.start), s.clock(w.end)));
                (s.finish(), span)
            }
            None => (vec![], None),
        };
        let cpu_util = window.and_then(|w| {
            let wall = (w.end - w.start).as_secs_f64();
            w.cpu_secs.filter(|_| wall > 0.0).map(|c| c / wall * 100.0)
        });
        let rss = peak_rss_mb();
        let mut out = vec![];
        match devices.kind {
            DeviceKind::Cuda => {
                for (i, &o) in devices.ordinals.iter().enumerate() {
                    // A GPU listed twice (`--gpus 0,0`) is one device, with
                    // one line: its energy, power and allocator counters
                    // would otherwise be summed twice into the row.
                    if devices.ordinals[..i].contains(&o) {
                        continue;
                    }
                    let mut m = DeviceMetrics {
                        device: format!("cuda:{o}"),
                        role: roles.get(i).cloned().unwrap_or_default(),
                        cpu_util_pct: cpu_util,
                        peak_rss_mb: rss,
                        ..Default::default()
                    };
                    if let Ok(a) = crate::ffi::cuda_memory_stats(o) {
                        m.peak_alloc_mb = Some(a.peak_allocated as f64 / MB);
                        m.peak_reserved_mb = Some(a.peak_reserved as f64 / MB);
                        m.alloc_retries = Some(a.alloc_retries.max(0) as u64);
                        m.alloc_ooms = Some(a.ooms.max(0) as u64);
                    }
                    if let Some((t0, t1)) = span {
                        apply_samples(&mut m, &samples, t0, t1);
                    }
                    out.push(m);
                }
            }
            DeviceKind::Cpu => {
                let mut m = DeviceMetrics {
                    device: "cpu".into(),
                    role: roles.first().cloned().unwrap_or_default(),
                    cpu_util_pct: cpu_util,
                    peak_rss_mb: rss,
                    ..Default::default()
                };
                // The CPU's samples carry its energy counter (RAPL) alone.
                if let Some((t0, t1)) = span {
                    apply_samples(&mut m, &samples, t0, t1);
                }
                out.push(m);
            }
        }
        let notes = span.map(|(t0, t1)| super::interference::gpu_notes(&samples, t0, t1)).unwrap_or_default();
        (out, samples, notes)
    }
}

/// Resets the allocator's peak statistics (after warm-up), so peaks describe
/// the timed window's steady state rather than start-up.
pub(crate) fn reset_peaks(devices: &Devices) {
    if devices.kind == DeviceKind::Cuda {
        for &o in &devices.ordinals {
            let _ = crate::ffi::cuda_reset_peak_memory(o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_nvml_cuda_metrics_are_na_with_the_reason() {
        if nvml_wrapper::Nvml::init().is_ok() {
            eprintln!("skipped: NVML is present on this machine");
            return;
        }
        let devs = Devices::cuda(vec![0]);
        let mon = Monitor::start(&devs, Duration::from_millis(10));
        let why = mon.unavailable.clone().expect("a reason");
        assert!(why.contains("NVML"), "{why}");
        let (m, samples) = mon.finish(&devs, &["single".into()], None);
        assert!(samples.is_empty());
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].device, "cuda:0");
        assert_eq!((m[0].util_mean_pct, m[0].power_mean_w, m[0].nvml_mem_peak_mb), (None, None, None));
    }

    #[test]
    fn cpu_runs_report_process_cpu_and_rss() {
        let devs = Devices::cpu(1);
        let mon = Monitor::start(&devs, Duration::from_millis(5));
        let start = Instant::now();
        let c0 = super::super::sampler::process_cpu_seconds();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(150) {
            x = x.wrapping_mul(31).wrapping_add(7);
        }
        std::hint::black_box(x);
        let c1 = super::super::sampler::process_cpu_seconds();
        let w = Window { start, end: Instant::now(), cpu_secs: c0.zip(c1).map(|(a, b)| b - a) };
        let (m, samples) = mon.finish(&devs, &["single".into()], Some(w));
        assert_eq!(m[0].device, "cpu");
        let cpu = m[0].cpu_util_pct.unwrap();
        assert!(cpu > 20.0 && cpu < 400.0, "{cpu}");
        assert!(m[0].peak_rss_mb.unwrap() > 1.0);
        assert!(samples.iter().any(|s| s.process_rss_mb.is_some()));
    }
}
