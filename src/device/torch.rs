//! Devices as libtorch and CUDA see them: resolving `--gpus` / `--cpu`
//! against this machine, checking that libtorch can run on them, and
//! synchronizing them before a clock is read.
use anyhow::Result;
use tch::Device;

use super::{driver_version, parse_gpu_list, parse_gpu_list_with, DeviceKind, Devices};
use crate::error::usage;

impl Devices {
    pub fn device(&self, i: usize) -> Device {
        match self.kind {
            DeviceKind::Cpu => Device::Cpu,
            DeviceKind::Cuda => Device::Cuda(self.ordinals[i]),
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

/// Resolves `--gpus` / `--cpu` against this machine. With neither, GPU 0 if
/// CUDA is available, else the CPU, and says which on stderr. CUDA devices
/// are checked before any work: the libtorch must have kernels for them, and
/// a loaded NVIDIA driver with no device visible is an error, never a quiet
/// fall back to the CPU.
pub fn resolve(gpus: Option<&str>, cpu: Option<usize>, quiet: bool) -> Result<Devices> {
    resolve_with(gpus, cpu, quiet, false)
}

/// `resolve`; `repeats` lets `--gpus` list a device more than once (dp's test
/// mode, `--gpus 0,0`: replica threads, scatter and gather on one GPU).
pub(crate) fn resolve_with(gpus: Option<&str>, cpu: Option<usize>, quiet: bool, repeats: bool) -> Result<Devices> {
    if let Some(n) = cpu {
        if n == 0 {
            return Err(usage("--cpu takes the number of replicas or ranks, at least 1"));
        }
        return Ok(Devices::cpu(n));
    }
    let count = cuda_device_count();
    if count == 0 {
        let cvd = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        let cudart = crate::ffi::cuda_versions().cudart;
        if let Some(msg) = no_device_message(driver_version().as_deref(), cudart, cvd.as_deref()) {
            return Err(usage(msg));
        }
    }
    match gpus {
        Some(list) => {
            let ordinals = parse_gpu_list_with(list, repeats)?;
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
            check_cuda(&ordinals)?;
            Ok(Devices::cuda(ordinals))
        }
        None if count > 0 => {
            check_cuda(&[0])?;
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

/// The devices for a run that another program makes (the PyTorch reference):
/// `--gpus` as listed, unchecked against this libtorch, which may not even
/// see GPUs the reference's torch can use (the legacy route: a K80 box).
/// Neither flag: GPU 0 if this libtorch sees one, else the CPU, with a note
/// when a driver is loaded.
pub(crate) fn resolve_for_reference(gpus: Option<&str>, cpu: Option<usize>, quiet: bool) -> Result<Devices> {
    if let Some(n) = cpu {
        if n == 0 {
            return Err(usage("--cpu takes the number of replicas or ranks, at least 1"));
        }
        return Ok(Devices::cpu(n));
    }
    if let Some(list) = gpus {
        return Ok(Devices::cuda(parse_gpu_list(list)?));
    }
    if cuda_device_count() > 0 {
        return Ok(Devices::cuda(vec![0]));
    }
    if !quiet {
        let why = match driver_version() {
            Some(d) => {
                format!("gpubench's libtorch sees no GPU (NVIDIA driver {d}); pass --gpus to give the reference GPUs")
            }
            None => "no CUDA device found".to_string(),
        };
        eprintln!("gpubench: no --gpus or --cpu given and {why}; using the CPU");
    }
    Ok(Devices::cpu(1))
}

/// Checks that this process can run on CUDA devices `ordinals`: the binary's
/// CUDA headers match the libtorch it runs on, and libtorch has kernels for
/// every device's compute capability.
pub(crate) fn check_cuda(ordinals: &[usize]) -> Result<()> {
    if ASSUMED_GPUS.get().is_some() {
        return Ok(());
    }
    let build = crate::ffi::cuda_build();
    let cudart = crate::ffi::cuda_versions().cudart;
    if let Some(msg) = runtime_mismatch(build.shim_cudart, cudart) {
        return Err(usage(msg));
    }
    let kernels = crate::ffi::libtorch_kernels();
    for &o in ordinals {
        let p = crate::ffi::cuda_device_props(o)?;
        let (major, minor) = p.compute_capability.split_once('.').unwrap_or(("0", "0"));
        let cc = (major.parse().unwrap_or(0), minor.parse().unwrap_or(0));
        if let Some(msg) = kernel_message(o, &p.name, cc, &kernels, cudart) {
            return Err(usage(msg));
        }
    }
    Ok(())
}

/// Why bf16 would not help on these CUDA devices, if it would not: before
/// compute capability 8.0 (Ampere) there are no bf16 tensor cores, and
/// libtorch emulates it at a fraction of fp16's speed.
pub(crate) fn bf16_unsupported(ordinals: &[usize]) -> Option<String> {
    before_ampere(ordinals, "bf16")
}

/// Why TF32 would not help on these CUDA devices, if it would not: TF32
/// tensor cores came with compute capability 8.0 too (before it, `tf32`
/// runs as fp32).
pub(crate) fn tf32_unsupported(ordinals: &[usize]) -> Option<String> {
    before_ampere(ordinals, "TF32")
}

fn before_ampere(ordinals: &[usize], what: &str) -> Option<String> {
    if ASSUMED_GPUS.get().is_some() {
        return None;
    }
    ordinals.iter().find_map(|&o| {
        let p = crate::ffi::cuda_device_props(o).ok()?;
        let major: u32 = p.compute_capability.split('.').next()?.parse().ok()?;
        (major < 8).then(|| {
            format!("GPU {o} ({}, compute capability {}) has no {what} tensor cores", p.name, p.compute_capability)
        })
    })
}

/// "13.0" from libtorch's 13000.
fn cuda_text(cudart: i64) -> String {
    crate::ffi::format_cuda_version(cudart)
}

/// Why a loaded NVIDIA driver shows no CUDA device, when it does.
pub(crate) fn no_device_message(driver: Option<&str>, cudart: i64, cvd: Option<&str>) -> Option<String> {
    let driver = driver?;
    if let Some(v) = cvd.filter(|v| v.trim().is_empty() || v.trim() == "-1") {
        return Some(format!(
            "the NVIDIA driver {driver} is loaded but CUDA_VISIBLE_DEVICES={v:?} hides every GPU; unset it, or use --cpu"
        ));
    }
    if cudart <= 0 {
        // A CPU-only libtorch or a GPUBENCH_NO_CUDA build: no driver would help (G14).
        return Some(format!(
            "the NVIDIA driver {driver} is loaded but this gpubench runs on a libtorch without CUDA (a CPU-only torch, \
             or a GPUBENCH_NO_CUDA build): run scripts/setup and rebuild, or use --cpu"
        ));
    }
    let need = if cudart >= 13000 { "580" } else { "525.60.13" };
    Some(format!(
        "the NVIDIA driver {driver} is loaded but CUDA sees no GPU: this libtorch is built for CUDA {}, which needs \
         driver >= {need}; run scripts/setup --plan for the torch build that fits this driver, or use --cpu",
        cuda_text(cudart)
    ))
}

/// When gpubench's shim was compiled against another CUDA major version than
/// the libtorch it runs on (their structs differ: device properties misread).
pub(crate) fn runtime_mismatch(shim_cudart: i64, torch_cudart: i64) -> Option<String> {
    (shim_cudart > 0 && torch_cudart > 0 && shim_cudart / 1000 != torch_cudart / 1000).then(|| {
        format!(
            "gpubench was built against CUDA {} headers but runs on a libtorch for CUDA {}: rebuild it against this \
             libtorch (scripts/gpubench), or run it with the torch build it was built for",
            cuda_text(shim_cudart),
            cuda_text(torch_cudart)
        )
    })
}

/// When libtorch has no kernels for device `ordinal`.
pub(crate) fn kernel_message(
    ordinal: usize,
    name: &str,
    cc: (u32, u32),
    kernels: &crate::ffi::Kernels,
    cudart: i64,
) -> Option<String> {
    if kernels.run_on(cc) || (kernels.sm.is_empty() && kernels.ptx.is_empty()) {
        return None;
    }
    let fix = if cc < (5, 0) {
        "no torch 2.11 build supports it: use the legacy route, --impl pytorch with GPUBENCH_PYTHON pointing at an \
         older torch (README, GPU status)"
    } else if cc < (7, 5) {
        "torch 2.11.0's CUDA 12.6 build does (5.0 to 9.0): run scripts/setup --plan, which chooses it for this GPU"
    } else {
        "run scripts/setup --plan for the torch build that has them"
    };
    Some(format!(
        "cuda:{ordinal} ({name}) is compute capability {}.{}, but this libtorch (CUDA {}) has kernels for {} only; {fix}",
        cc.0,
        cc.1,
        cuda_text(cudart),
        kernels.describe()
    ))
}

/// CUDA devices taken as present, with no CUDA call made: by `gpubench
/// validate --assume-gpus` (a command line checked without a GPU), and by a
/// sweep emitted for a cluster (`sweep --gpus … --emit`: the GPUs are the
/// cluster's, and a login node has none).
static ASSUMED_GPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Takes `n` CUDA devices as present for the rest of this process, each
/// passing `check_cuda`. Only `validate` and an emitting sweep call it;
/// nothing runs on a device after it.
pub(crate) fn assume_gpus(n: usize) {
    let _ = ASSUMED_GPUS.set(n);
}

pub fn cuda_device_count() -> usize {
    if let Some(&n) = ASSUMED_GPUS.get() {
        return n;
    }
    if tch::Cuda::is_available() {
        tch::Cuda::device_count().max(0) as usize
    } else {
        0
    }
}

pub(crate) fn device_name(ordinal: usize) -> String {
    if ASSUMED_GPUS.get().is_some() {
        return format!("GPU {ordinal} (not on this host)");
    }
    crate::ffi::cuda_device_props(ordinal).map(|p| p.name).unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_driver_without_devices_is_explained() {
        assert_eq!(no_device_message(None, 13000, None), None, "no driver: the CPU is fine");
        let m = no_device_message(Some("535.104.05"), 13000, None).unwrap();
        assert!(m.contains("535.104.05") && m.contains("CUDA 13.0") && m.contains(">= 580"), "{m}");
        let m = no_device_message(Some("470.1"), 12060, None).unwrap();
        assert!(m.contains(">= 525.60.13"), "{m}");
        let m = no_device_message(Some("580.1"), 13000, Some("")).unwrap();
        assert!(m.contains("CUDA_VISIBLE_DEVICES"), "{m}");
        let m = no_device_message(Some("580.1"), 0, None).unwrap();
        assert!(m.contains("without CUDA") && !m.contains("n/a"), "{m}");
    }

    #[test]
    fn gpus_without_kernels_are_named_with_the_fix() {
        let k = crate::ffi::Kernels::parse("code=sm_75;code=sm_80;code=sm_86;code=sm_90;code=sm_100;code=sm_120");
        assert_eq!(kernel_message(0, "NVIDIA H100", (9, 0), &k, 13000), None);
        let m = kernel_message(1, "Tesla V100-SXM2-16GB", (7, 0), &k, 13000).unwrap();
        assert!(m.starts_with("cuda:1 (Tesla V100-SXM2-16GB) is compute capability 7.0"), "{m}");
        assert!(m.contains("7.5, 8.0, 8.6, 9.0, 10.0, 12.0") && m.contains("CUDA 12.6"), "{m}");
        let m = kernel_message(0, "Tesla K80", (3, 7), &k, 13000).unwrap();
        assert!(m.contains("legacy route"), "{m}");
        // Without a kernel list there is nothing to check against.
        assert_eq!(kernel_message(0, "x", (3, 7), &crate::ffi::Kernels::default(), 13000), None);
    }

    #[test]
    fn a_cuda_major_mismatch_is_refused() {
        assert_eq!(runtime_mismatch(13000, 13000), None);
        assert_eq!(runtime_mismatch(0, 12060), None, "no CUDA shim: nothing to misread");
        let m = runtime_mismatch(13000, 12060).unwrap();
        assert!(m.contains("CUDA 13.0 headers") && m.contains("CUDA 12.6"), "{m}");
    }

    #[test]
    fn cpu_replicas_are_the_cpu_device() {
        assert_eq!(Devices::cpu(2).device(1), Device::Cpu);
    }
}
