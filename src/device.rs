//! Which devices a run uses, resolved from `--gpus` / `--cpu` and checked
//! against what this machine has.
use anyhow::Result;
use serde::Serialize;
use tch::Device;

use crate::error::usage;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Cpu,
    Cuda,
}

/// The devices of a run, in order; the first is dp's master and ddp's rank 0
/// (on this node). On the CPU every replica or rank is `Device::Cpu`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Devices {
    pub kind: DeviceKind,
    /// CUDA ordinals, or 0..n for CPU replicas.
    pub ordinals: Vec<usize>,
}

impl Devices {
    pub fn cpu(n: usize) -> Self {
        Devices { kind: DeviceKind::Cpu, ordinals: (0..n).collect() }
    }

    pub fn cuda(ordinals: Vec<usize>) -> Self {
        Devices { kind: DeviceKind::Cuda, ordinals }
    }

    pub fn len(&self) -> usize {
        self.ordinals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ordinals.is_empty()
    }

    pub fn device(&self, i: usize) -> Device {
        match self.kind {
            DeviceKind::Cpu => Device::Cpu,
            DeviceKind::Cuda => Device::Cuda(self.ordinals[i]),
        }
    }

    pub fn all(&self) -> Vec<Device> {
        (0..self.len()).map(|i| self.device(i)).collect()
    }

    /// As written in the `devices` column: "cuda:0,1" or "cpu×2".
    pub fn describe(&self) -> String {
        match self.kind {
            DeviceKind::Cpu => format!("cpu×{}", self.len()),
            DeviceKind::Cuda => {
                let l: Vec<String> = self.ordinals.iter().map(|o| o.to_string()).collect();
                format!("cuda:{}", l.join(","))
            }
        }
    }

    /// Waits for all queued work on every device, so a clock read after it
    /// measures finished work. A no-op on the CPU, where ops run synchronously.
    pub fn synchronize(&self) {
        if self.kind == DeviceKind::Cuda {
            for &o in &self.ordinals {
                tch::Cuda::synchronize(o as i64);
            }
        }
    }
}

/// Parses a `--gpus` list such as "0,1,2,3" (syntax only).
pub fn parse_gpu_list(s: &str) -> Result<Vec<usize>> {
    let s = s.trim();
    if s.is_empty() {
        return Err(usage("--gpus is empty; list CUDA device ordinals such as --gpus 0,1"));
    }
    let mut out = vec![];
    for part in s.split(',') {
        let p = part.trim();
        let o: usize = p.parse().map_err(|_| {
            usage(format!(
                "--gpus {s:?}: {p:?} is not a device ordinal; write a comma-separated list such as --gpus 0,1,2,3"
            ))
        })?;
        if out.contains(&o) {
            return Err(usage(format!("--gpus {s:?} lists device {o} twice; list each device once")));
        }
        out.push(o);
    }
    Ok(out)
}

/// Resolves `--gpus` / `--cpu` against this machine. With neither, GPU 0 if
/// CUDA is available, else the CPU, and says which on stderr.
pub fn resolve(gpus: Option<&str>, cpu: Option<usize>, quiet: bool) -> Result<Devices> {
    if let Some(n) = cpu {
        if n == 0 {
            return Err(usage("--cpu takes the number of replicas or ranks, at least 1"));
        }
        return Ok(Devices::cpu(n));
    }
    let count = cuda_device_count();
    match gpus {
        Some(list) => {
            let ordinals = parse_gpu_list(list)?;
            if count == 0 {
                return Err(usage(format!(
                    "--gpus {list}: CUDA is not available on this machine (no NVIDIA GPU or driver found); use --cpu to run on the CPU"
                )));
            }
            if let Some(&bad) = ordinals.iter().find(|&&o| o >= count) {
                let names: Vec<String> = (0..count).map(|i| format!("{i}: {}", device_name(i))).collect();
                return Err(usage(format!(
                    "--gpus {list}: there is no CUDA device {bad}; this machine has {count} ({}), so use ordinals below {count}",
                    names.join(", ")
                )));
            }
            Ok(Devices::cuda(ordinals))
        }
        None if count > 0 => {
            if !quiet {
                eprintln!("gpubench: no --gpus or --cpu given; using GPU 0 ({})", device_name(0));
            }
            Ok(Devices::cuda(vec![0]))
        }
        None => {
            if !quiet {
                eprintln!("gpubench: no --gpus or --cpu given and no CUDA device found; using the CPU");
            }
            Ok(Devices::cpu(1))
        }
    }
}

pub fn cuda_device_count() -> usize {
    if tch::Cuda::is_available() {
        tch::Cuda::device_count().max(0) as usize
    } else {
        0
    }
}

pub fn device_name(ordinal: usize) -> String {
    crate::ffi::cuda_device_props(ordinal).map(|p| p.name).unwrap_or_else(|_| "unknown".into())
}

/// The CPU's model name, from /proc/cpuinfo.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

pub fn cpu_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// The NVIDIA driver's version, from the kernel module, if one is loaded.
pub fn driver_version() -> Option<String> {
    let t = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun ..."
    let line = t.lines().next()?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string)
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_lists() {
        assert_eq!(parse_gpu_list("0,1, 2,3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_gpu_list("3").unwrap(), vec![3]);
        for bad in ["", " ", "0,,1", "a", "0,-1", "1,1"] {
            let e = parse_gpu_list(bad).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2, "{bad}");
        }
    }

    #[test]
    fn describe_devices() {
        assert_eq!(Devices::cuda(vec![0, 2]).describe(), "cuda:0,2");
        assert_eq!(Devices::cpu(2).describe(), "cpu×2");
        assert_eq!(Devices::cpu(2).device(1), Device::Cpu);
    }
}
