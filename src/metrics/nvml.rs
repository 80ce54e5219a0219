//! Device telemetry through NVML (loaded at run time, so the binary runs
//! with no NVIDIA driver), in the full build only: its CUDA devices come
//! from libtorch.
use anyhow::{anyhow, Result};

use super::sampler::{map_cuda_to_nvml, DeviceSample, DeviceSource, MB};

/// Reads the run's CUDA devices through NVML, loaded at run time.
pub(crate) struct NvmlSource {
    nvml: nvml_wrapper::Nvml,
    /// (name as "cuda:N", NVML index)
    devices: Vec<(String, u32)>,
}

impl NvmlSource {
    /// Fails with the reason (no driver, no libnvidia-ml, device not found).
    pub(crate) fn new(cuda_ordinals: &[usize]) -> Result<Self> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| anyhow!("NVML unavailable ({e})"))?;
        let n = nvml.device_count().map_err(|e| anyhow!("NVML device count: {e}"))?;
        let mut by_index = vec![];
        for i in 0..n {
            if let Ok(d) = nvml.device_by_index(i) {
                if let Ok(p) = d.pci_info() {
                    by_index.push((i, p.bus_id));
                }
            }
        }
        let cuda: Vec<(usize, String)> = cuda_ordinals
            .iter()
            .map(|&o| Ok((o, crate::ffi::cuda_device_props(o)?.pci_bus_id)))
            .collect::<Result<_>>()?;
        let mut devices = vec![];
        for (ord, idx) in map_cuda_to_nvml(&cuda, &by_index) {
            let idx = idx.ok_or_else(|| anyhow!("NVML has no device with cuda:{ord}'s PCI bus id"))?;
            devices.push((format!("cuda:{ord}"), idx));
        }
        Ok(NvmlSource { nvml, devices })
    }
}

impl DeviceSource for NvmlSource {
    fn sample(&mut self) -> Vec<DeviceSample> {
        use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
        let mut out = vec![];
        for (name, idx) in &self.devices {
            let mut s = DeviceSample { device: name.clone(), ..Default::default() };
            if let Ok(d) = self.nvml.device_by_index(*idx) {
                if let Ok(u) = d.utilization_rates() {
                    s.gpu_util_pct = Some(u.gpu as f64);
                    s.mem_util_pct = Some(u.memory as f64);
                }
                if let Ok(m) = d.memory_info() {
                    s.mem_used_mb = Some(m.used as f64 / MB);
                    s.mem_total_mb = Some(m.total as f64 / MB);
                }
                s.power_w = d.power_usage().ok().map(|mw| mw as f64 / 1000.0);
                s.sm_clock_mhz = d.clock_info(Clock::SM).ok().map(f64::from);
                s.temperature_c = d.temperature(TemperatureSensor::Gpu).ok().map(f64::from);
                s.throttle = d.current_throttle_reasons().ok().map(throttle_text);
                s.other_procs_mb = d.running_compute_processes().ok().and_then(|ps| others_mb(&ps));
                s.energy_j = d.total_energy_consumption().ok().map(|mj| mj as f64 / 1000.0);
            }
            out.push(s);
        }
        out
    }

    fn energy(&mut self) -> Vec<DeviceSample> {
        let nvml = &self.nvml;
        self.devices
            .iter()
            .map(|(name, idx)| DeviceSample {
                device: name.clone(),
                energy_j: nvml
                    .device_by_index(*idx)
                    .ok()
                    .and_then(|d| d.total_energy_consumption().ok())
                    .map(|mj| mj as f64 / 1000.0),
                ..Default::default()
            })
            .collect()
    }
}

/// The throttle reasons that slow a benchmark (idle and sync boost do not).
fn throttle_text(r: nvml_wrapper::bitmasks::device::ThrottleReasons) -> String {
    use nvml_wrapper::bitmasks::device::ThrottleReasons as T;
    let mut v = vec![];
    if r.intersects(T::SW_THERMAL_SLOWDOWN | T::HW_THERMAL_SLOWDOWN) {
        v.push("thermal");
    }
    if r.intersects(T::SW_POWER_CAP | T::HW_POWER_BRAKE_SLOWDOWN) {
        v.push("power");
    }
    if r.contains(T::HW_SLOWDOWN) {
        v.push("hw");
    }
    if r.contains(T::APPLICATIONS_CLOCKS_SETTING) {
        v.push("app clocks");
    }
    v.join("+")
}

/// Memory of the compute processes outside this process group. NVML names
/// processes by the host's pids: in a container they may match none of
/// ours, and then nothing can be attributed (None).
fn others_mb(ps: &[nvml_wrapper::struct_wrappers::device::ProcessInfo]) -> Option<f64> {
    use nvml_wrapper::enums::device::UsedGpuMemory;
    // SAFETY: getpgrp has no preconditions.
    let group = unsafe { libc::getpgrp() } as i64;
    let ours = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').and_then(|x| x.1.split_whitespace().nth(2)?.parse::<i64>().ok()))
            == Some(group)
    };
    if !ps.iter().any(|p| ours(p.pid)) {
        return None;
    }
    let bytes: u64 = ps
        .iter()
        .filter(|p| !ours(p.pid))
        .map(|p| match p.used_gpu_memory {
            UsedGpuMemory::Used(b) => b,
            UsedGpuMemory::Unavailable => 0,
        })
        .sum();
    Some(bytes as f64 / MB)
}
