//! `gpubench info`: what this machine offers a benchmark, and which build
//! this is. Works with no GPU, and in the torch-free build (which says so).
use anyhow::Result;
use serde::Serialize;

use crate::device;
#[cfg(feature = "torch")]
use crate::ffi::{self, DeviceProps};

/// The full build, over libtorch.
#[cfg(feature = "torch")]
const BUILD: &str = "full";
/// What the torch-free build is, as `info` says it.
#[cfg(not(feature = "torch"))]
const BUILD: &str = "torch-free";

#[cfg(feature = "torch")]
#[derive(Debug, Serialize)]
pub(crate) struct Info {
    pub gpubench_version: String,
    /// The commit this gpubench was built from (`-dirty` for a changed
    /// checkout); empty for a build outside a git checkout.
    pub gpubench_commit: String,
    /// "full", or "torch-free" (`--no-default-features`).
    pub build: String,
    pub libtorch_version: String,
    pub cuda_version: String,
    pub cudnn_version: String,
    pub nccl_version: String,
    pub cuda_available: bool,
    pub cuda_shim: bool,
    pub driver_version: String,
    pub devices: Vec<DeviceProps>,
    pub cpu_model: String,
    pub cpu_cores: usize,
    pub intra_op_threads: i32,
    /// Backend name → "ok" or the reason it cannot be created here.
    pub process_groups: Vec<(String, String)>,
}

#[cfg(feature = "torch")]
pub(crate) fn collect() -> Info {
    let v = ffi::cuda_versions();
    let n = device::cuda_device_count();
    let devices = (0..n).filter_map(|i| ffi::cuda_device_props(i).ok()).collect();
    let process_groups = ["gloo", "nccl"]
        .iter()
        .map(|b| {
            let r = probe_backend(b, n > 0);
            (b.to_string(), r.map(|_| "ok".to_string()).unwrap_or_else(|e| crate::error::one_line(&e)))
        })
        .collect();
    Info {
        gpubench_version: env!("CARGO_PKG_VERSION").into(),
        gpubench_commit: crate::results::GPUBENCH_COMMIT.into(),
        build: BUILD.into(),
        libtorch_version: ffi::libtorch_version(),
        cuda_version: ffi::format_cuda_version(v.cudart),
        cudnn_version: ffi::format_cudnn_version(v.cudnn),
        nccl_version: ffi::format_nccl_version(v.nccl),
        cuda_available: n > 0,
        cuda_shim: ffi::built_with_cuda(),
        driver_version: device::driver_version().unwrap_or_else(|| "n/a".into()),
        devices,
        cpu_model: device::cpu_model(),
        cpu_cores: device::cpu_cores(),
        intra_op_threads: tch::get_num_threads(),
        process_groups,
    }
}

/// The version as `info` says it: `0.1.0 (abc123def456)`, the commit
/// telling apart two builds of one version.
fn version(version: &str, commit: &str) -> String {
    if commit.is_empty() {
        version.to_string()
    } else {
        format!("{version} ({commit})")
    }
}

/// Creates a one-rank process group of `backend` on a loopback store and runs
/// a one-element all-reduce over it, which is what a ddp run needs first; the
/// error says why it cannot be.
#[cfg(feature = "torch")]
pub(crate) fn probe_backend(backend: &str, cuda: bool) -> Result<()> {
    use crate::dist::{Backend, ProcessGroup, Store};
    let be: Backend = backend.parse()?;
    let timeout = std::time::Duration::from_secs(10);
    let port = crate::dist::free_port()?;
    let store = Store::new("127.0.0.1", port, 0, 1, true, timeout)?;
    let dev = (be == Backend::Nccl && cuda).then_some(0);
    let pg = ProcessGroup::new(&store, be, 0, 1, dev, timeout)?;
    // A real collective: NCCL builds its communicator only at the first one,
    // which is where /dev/shm limits and network problems show (F13).
    let device = if dev.is_some() { tch::Device::Cuda(0) } else { tch::Device::Cpu };
    let mut t = tch::Tensor::f_ones([1], (tch::Kind::Float, device))?;
    pg.allreduce_sum(&mut t)?;
    if t.f_double_value(&[0])? != 1.0 {
        anyhow::bail!("a one-element all-reduce over {backend} gave {}", t.double_value(&[0]));
    }
    Ok(())
}

#[cfg(feature = "torch")]
pub(crate) fn run(json: bool) -> Result<i32> {
    let i = collect();
    if json {
        crate::report::envelope::Envelope::new().own("info", &i)?.print()?;
        return Ok(0);
    }
    println!("gpubench         {}, {} build", version(&i.gpubench_version, &i.gpubench_commit), i.build);
    println!("libtorch         {}", i.libtorch_version);
    println!("CUDA runtime     {}", i.cuda_version);
    println!("cuDNN            {}", i.cudnn_version);
    println!("NCCL             {}", i.nccl_version);
    println!("NVIDIA driver    {}", i.driver_version);
    println!("CUDA available   {}", if i.cuda_available { "yes" } else { "no" });
    for d in &i.devices {
        println!(
            "  cuda:{}  {}  {:.1} GiB  sm_{}  ({} SMs, PCI {})",
            d.ordinal,
            d.name,
            d.total_memory_bytes as f64 / (1u64 << 30) as f64,
            d.compute_capability.replace('.', ""),
            d.multiprocessors,
            d.pci_bus_id
        );
    }
    println!("CPU              {} ({} cores, {} intra-op threads)", i.cpu_model, i.cpu_cores, i.intra_op_threads);
    for (b, r) in &i.process_groups {
        println!("process group    {b}: {r}");
    }
    Ok(0)
}

/// What the torch-free build knows of this machine.
#[cfg(not(feature = "torch"))]
#[derive(Debug, Serialize)]
pub(crate) struct Info {
    pub gpubench_version: String,
    pub gpubench_commit: String,
    pub build: String,
    /// Always None: this build has no libtorch.
    pub libtorch_version: Option<String>,
    pub note: String,
    pub driver_version: String,
    pub cpu_model: String,
    pub cpu_cores: usize,
}

#[cfg(not(feature = "torch"))]
pub(crate) fn run(json: bool) -> Result<i32> {
    let i = Info {
        gpubench_version: env!("CARGO_PKG_VERSION").into(),
        gpubench_commit: crate::results::GPUBENCH_COMMIT.into(),
        build: BUILD.into(),
        libtorch_version: None,
        note: format!(
            "no libtorch: {} only (for the benchmarks: scripts/setup, then cargo build --release)",
            super::torch_free_commands()
        ),
        driver_version: device::driver_version().unwrap_or_else(|| "n/a".into()),
        cpu_model: device::cpu_model(),
        cpu_cores: device::cpu_cores(),
    };
    if json {
        crate::report::envelope::Envelope::new().own("info", &i)?.print()?;
        return Ok(0);
    }
    println!("gpubench         {}, {} build", version(&i.gpubench_version, &i.gpubench_commit), i.build);
    println!("libtorch         none: {}", i.note);
    println!("NVIDIA driver    {}", i.driver_version);
    println!("CPU              {} ({} cores)", i.cpu_model, i.cpu_cores);
    Ok(0)
}
