//! Which devices a run uses, resolved from `--gpus` / `--cpu` and checked
//! against what this machine has. What needs no libtorch is here, so that
//! the torch-free build's configurations and rows name devices too; asking
//! libtorch and CUDA (resolving, checking, synchronizing) is `torch`'s.
pub(crate) mod capacity;
#[cfg(feature = "torch")]
mod torch;
use anyhow::Result;
use serde::Serialize;
#[cfg(feature = "torch")]
pub use torch::*;

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

    pub(crate) fn cuda(ordinals: Vec<usize>) -> Self {
        Devices { kind: DeviceKind::Cuda, ordinals }
    }

    pub fn len(&self) -> usize {
        self.ordinals.len()
    }

    /// Whether one GPU is listed more than once (`--gpus 0,0`, dp's test
    /// mode): its counters are counted once, and its rows are kept out of
    /// scaling, verdicts and MFU.
    pub(crate) fn shares_a_gpu(&self) -> bool {
        self.kind == DeviceKind::Cuda && first_repeat(&self.ordinals).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.ordinals.is_empty()
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
}

/// The first ordinal a list names again, if any.
pub(crate) fn first_repeat(ordinals: &[usize]) -> Option<usize> {
    (1..ordinals.len()).find(|&i| ordinals[..i].contains(&ordinals[i])).map(|i| ordinals[i])
}

/// Parses a `--gpus` list such as "0,1,2,3" (syntax only).
pub(crate) fn parse_gpu_list(s: &str) -> Result<Vec<usize>> {
    parse_gpu_list_with(s, false)
}

/// `parse_gpu_list`; `repeats` allows a device more than once (dp's test
/// mode: several replicas on one GPU).
pub(crate) fn parse_gpu_list_with(s: &str, repeats: bool) -> Result<Vec<usize>> {
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
        if out.contains(&o) && !repeats {
            return Err(usage(format!(
                "--gpus {s:?} lists device {o} twice; list each device once (only --strategy dp, and ddp with \
                 --backend gloo, take a device twice, as a test mode)"
            )));
        }
        out.push(o);
    }
    Ok(out)
}

/// The CUDA_VISIBLE_DEVICES a child process needs to see `ordinals` (this
/// process's numbering) as its devices 0..n: the entries of our own
/// CUDA_VISIBLE_DEVICES at those positions (UUIDs and MIG ids kept), or the
/// ordinals themselves when it is unset.
pub(crate) fn visible_ids(ordinals: &[usize], cvd: Option<&str>) -> String {
    let entries: Vec<&str> = cvd.map(|v| v.split(',').map(str::trim).collect()).unwrap_or_default();
    let id = |o: usize| match cvd {
        Some(_) => entries.get(o).map(|e| e.to_string()).unwrap_or_else(|| o.to_string()),
        None => o.to_string(),
    };
    ordinals.iter().map(|&o| id(o)).collect::<Vec<_>>().join(",")
}

/// The CPU's model name, from /proc/cpuinfo.
pub(crate) fn cpu_model() -> String {
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

/// Why this CPU has no fast bf16 matmul, if it has none: without AVX512-BF16
/// or AMX, libtorch's bf16 kernels are reference loops, tens of times
/// slower than fp32 (a 2-core EPYC's bf16 peak ran for over 20 minutes).
pub(crate) fn cpu_slow_bf16() -> Option<String> {
    let file = crate::internal::Hook::CpuInfo.get().unwrap_or_else(|| "/proc/cpuinfo".into());
    let info = std::fs::read_to_string(file).unwrap_or_default();
    slow_bf16(&info, &cpu_model())
}

/// `cpu_slow_bf16` from /proc/cpuinfo's text (empty off Linux: no claim made).
fn slow_bf16(cpuinfo: &str, model: &str) -> Option<String> {
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags"))?;
    let fast = flags.split_whitespace().any(|f| matches!(f, "avx512_bf16" | "amx_bf16"));
    (!fast).then(|| {
        format!("this CPU ({model}) has no AVX512-BF16 or AMX, so libtorch's bf16 runs slow reference kernels")
    })
}

pub(crate) fn cpu_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Intra-op threads per worker on a GPU host at most. There the host threads
/// only stage batches (copies, conversions, resizes): more of them spin on
/// those copies beside the GPU's work (the H200 serving run: 16 per worker,
/// 924 % CPU, the GPU 21.6 % busy) and take cores from the load generator.
pub(crate) const GPU_HOST_THREADS: usize = 4;

/// The one rule for a run's intra-op threads per worker (a ddp rank, a
/// serving worker, a single or dp process) when `--threads` does not say:
/// on the CPU, where every worker computes, the `cores` shared evenly among
/// `workers`; on a GPU the same share, at most [`GPU_HOST_THREADS`]. At
/// least one.
pub(crate) fn default_threads(kind: DeviceKind, cores: usize, workers: usize) -> usize {
    let share = (cores / workers.max(1)).max(1);
    match kind {
        DeviceKind::Cpu => share,
        DeviceKind::Cuda => share.min(GPU_HOST_THREADS),
    }
}

/// Intra-op threads per worker: `--threads` (a total for the workers of this
/// host, shared evenly, at least one each), else [`default_threads`].
pub(crate) fn threads_per_worker(kind: DeviceKind, threads: Option<usize>, workers: usize) -> usize {
    match threads {
        Some(t) => (t / workers.max(1)).max(1),
        None => default_threads(kind, cpu_cores(), workers),
    }
}

/// The NVIDIA driver's version, from the kernel module, if one is loaded.
pub(crate) fn driver_version() -> Option<String> {
    let t = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sun ..."
    let line = t.lines().next()?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .map(str::to_string)
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::{default_threads, threads_per_worker, DeviceKind};

    #[test]
    fn gpu_hosts_get_a_few_staging_threads_and_cpu_hosts_every_core() {
        // 16 cores, one worker: every core computes on the CPU; a GPU's
        // host threads only stage batches.
        assert_eq!(default_threads(DeviceKind::Cpu, 16, 1), 16);
        assert_eq!(default_threads(DeviceKind::Cuda, 16, 1), 4);
        // Eight workers on 16 cores: two each, either way; never none.
        assert_eq!(default_threads(DeviceKind::Cuda, 16, 8), 2);
        assert_eq!(default_threads(DeviceKind::Cpu, 2, 4), 1);
        assert_eq!(default_threads(DeviceKind::Cuda, 1, 0), 1);
        // --threads overrides, shared among the workers.
        assert_eq!(threads_per_worker(DeviceKind::Cuda, Some(16), 1), 16);
        assert_eq!(threads_per_worker(DeviceKind::Cpu, Some(6), 4), 1);
    }

    #[test]
    fn bf16_is_slow_without_avx512_bf16_or_amx() {
        let epyc = "processor\t: 0\nflags\t\t: fpu sse avx2 avx512f\n";
        assert!(super::slow_bf16(epyc, "AMD EPYC").unwrap().contains("AMD EPYC"));
        assert_eq!(super::slow_bf16("flags\t: avx2 avx512_bf16\n", "x"), None);
        assert_eq!(super::slow_bf16("flags\t: avx2 amx_bf16 amx_tile\n", "x"), None);
        assert_eq!(super::slow_bf16("", "x"), None, "no cpuinfo: no claim");
    }

    use super::*;

    #[test]
    fn gpu_lists() {
        assert_eq!(parse_gpu_list("0,1, 2,3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_gpu_list("3").unwrap(), vec![3]);
        assert_eq!(parse_gpu_list_with("0,0", true).unwrap(), vec![0, 0]);
        for bad in ["", " ", "0,,1", "a", "0,-1", "1,1"] {
            let e = parse_gpu_list(bad).unwrap_err();
            assert_eq!(crate::error::exit_code(&e), 2, "{bad}");
        }
    }

    #[test]
    fn child_processes_see_the_same_gpus() {
        assert_eq!(visible_ids(&[1, 0], None), "1,0");
        assert_eq!(visible_ids(&[0, 1], Some("4,5,6,7")), "4,5");
        assert_eq!(visible_ids(&[1], Some("GPU-aaaa, MIG-bbbb")), "MIG-bbbb");
    }

    #[test]
    fn describe_devices() {
        assert_eq!(Devices::cuda(vec![0, 2]).describe(), "cuda:0,2");
        assert_eq!(Devices::cpu(2).describe(), "cpu×2");
    }
}
