//! Bindings to src/shim/info.cpp and src/shim/precision.cpp: versions, CUDA
//! device properties, the CUDA caching allocator's statistics, autocast, the
//! TF32 and determinism switches and the channels-last layout, which tch does
//! not expose. (c10d's bindings are `dist`, one to one with c10d.cpp.)
use anyhow::{anyhow, Result};
use std::ffi::{c_char, c_int, c_long, CStr};

extern "C" {
    fn gb_free_error(e: *mut c_char);
    fn gb_init_logging();
    fn gb_libtorch_version(buf: *mut c_char, len: usize);
    fn gb_built_with_cuda() -> c_int;
    fn gb_cuda_versions(cudart: *mut c_long, cudnn: *mut c_long, nccl: *mut u64);
    fn gb_cuda_build(shim_cudart: *mut c_long, buf: *mut c_char, len: usize);
    fn gb_cuda_device_props(
        dev: c_int,
        name: *mut c_char,
        name_len: usize,
        pci: *mut c_char,
        pci_len: usize,
        total_mem: *mut u64,
        major: *mut c_int,
        minor: *mut c_int,
        sm_count: *mut c_int,
    ) -> *mut c_char;
    fn gb_cuda_memory_stats(dev: c_int, out: *mut i64) -> *mut c_char;
    fn gb_cuda_reset_peak_memory(dev: c_int) -> *mut c_char;
    fn gb_cuda_set_device(dev: c_int) -> *mut c_char;
    fn gb_autocast(cuda: c_int, bf16: c_int, enabled: c_int) -> *mut c_char;
    fn gb_profiler_start(cuda: c_int) -> *mut c_char;
    fn gb_profiler_metadata(key: *const c_char, json: *const c_char) -> *mut c_char;
    fn gb_profiler_stop(path: *const c_char) -> *mut c_char;
    fn gb_range_begin(name: *const c_char) -> *mut std::ffi::c_void;
    fn gb_range_end(handle: *mut std::ffi::c_void);
    fn gb_nvtx_available() -> c_int;
    fn gb_nvtx_push(name: *const c_char);
    fn gb_nvtx_pop();
    fn gb_set_tf32(on: c_int) -> *mut c_char;
    fn gb_set_deterministic(on: c_int) -> *mut c_char;
    fn gb_channels_last_(t: *mut std::ffi::c_void) -> *mut c_char;
    fn gb_is_channels_last(t: *mut std::ffi::c_void) -> c_int;
    fn gb_broadcast_coalesced_into(
        src: *mut *mut std::ffi::c_void,
        n: usize,
        dst: *mut *mut std::ffi::c_void,
        replicas: usize,
    ) -> *mut c_char;
    fn gb_amp_unscale(
        grads: *mut *mut std::ffi::c_void,
        n: usize,
        found_inf: *mut std::ffi::c_void,
        inv_scale: *mut std::ffi::c_void,
    ) -> *mut c_char;
    fn gb_sgd_step(
        imp: c_int,
        params: *const *mut std::ffi::c_void,
        bufs: *const *mut std::ffi::c_void,
        n: usize,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
        first_step: c_int,
        found_inf: *mut std::ffi::c_void,
    ) -> *mut c_char;
    fn gb_adamw_step(
        imp: c_int,
        params: *const *mut std::ffi::c_void,
        exp_avgs: *const *mut std::ffi::c_void,
        exp_avg_sqs: *const *mut std::ffi::c_void,
        steps: *const *mut std::ffi::c_void,
        n: usize,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        step: i64,
        found_inf: *mut std::ffi::c_void,
    ) -> *mut c_char;
    fn gb_zero_grads(params: *const *mut std::ffi::c_void, n: usize) -> *mut c_char;
    fn gb_cpu_memory_install() -> *mut c_char;
    fn gb_backward_from(output: *mut std::ffi::c_void, grad: *mut std::ffi::c_void) -> *mut c_char;
    fn gb_cpu_memory(live: *mut i64, peak: *mut i64, reset: c_int);
    fn gb_amp_update_scale(
        scale: *mut std::ffi::c_void,
        growth_tracker: *mut std::ffi::c_void,
        found_inf: *mut std::ffi::c_void,
        growth: f64,
        backoff: f64,
        interval: c_long,
    ) -> *mut c_char;
}

/// Turns a shim error pointer into a Result, freeing the message.
pub(crate) fn check(err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: the shim returns either NULL or a malloc'd NUL-terminated string.
    let msg = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    unsafe { gb_free_error(err) };
    Err(anyhow!(msg))
}

fn buf_to_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// libtorch's own log level: TORCH_CPP_LOG_LEVEL if set, else FATAL, since
/// every error libtorch raises reaches the user as gpubench's one-line error.
pub fn init_logging() {
    if std::env::var_os("TORCH_CPP_LOG_LEVEL").is_none() {
        // Called first thing in main, before any other thread exists.
        std::env::set_var("TORCH_CPP_LOG_LEVEL", "FATAL");
    }
    unsafe { gb_init_logging() };
}

pub(crate) fn libtorch_version() -> String {
    let mut buf = [0u8; 64];
    unsafe { gb_libtorch_version(buf.as_mut_ptr().cast(), buf.len()) };
    buf_to_string(&buf)
}

pub(crate) fn built_with_cuda() -> bool {
    unsafe { gb_built_with_cuda() != 0 }
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CudaVersions {
    /// e.g. 13000 for CUDA 13.0; 0 when CUDA is absent.
    pub cudart: i64,
    /// e.g. 91900 for cuDNN 9.19.0.
    pub cudnn: i64,
    /// NCCL's version, packed as major << 32 | minor << 16 | patch.
    pub nccl: u64,
}

// c_long is i64 here but i32 on other targets, hence `from`.
#[allow(clippy::useless_conversion)]
pub(crate) fn cuda_versions() -> CudaVersions {
    let (mut a, mut b, mut c) = (0 as c_long, 0 as c_long, 0u64);
    unsafe { gb_cuda_versions(&mut a, &mut b, &mut c) };
    CudaVersions { cudart: i64::from(a), cudnn: i64::from(b), nccl: c }
}

/// How this binary and the libtorch it runs on were built for CUDA.
#[derive(Debug, Clone, Default)]
pub(crate) struct CudaBuild {
    /// CUDA runtime version of the headers the shim was compiled with (0: no CUDA shim).
    pub shim_cudart: i64,
    /// libtorch's CUDA configuration text (empty without libtorch_cuda).
    pub config: String,
}

/// The kernels of the libtorch this process runs on: from its configuration
/// text when a driver lets libtorch report it, else from the flags build.rs
/// found in the libtorch_cuda it built against.
pub(crate) fn libtorch_kernels() -> Kernels {
    let k = Kernels::parse(&cuda_build().config);
    if k.sm.is_empty() && k.ptx.is_empty() {
        Kernels::parse(env!("GPUBENCH_TORCH_GENCODE"))
    } else {
        k
    }
}

#[allow(clippy::useless_conversion)]
pub(crate) fn cuda_build() -> CudaBuild {
    let mut v: c_long = 0;
    let mut buf = vec![0u8; 16384];
    unsafe { gb_cuda_build(&mut v, buf.as_mut_ptr().cast(), buf.len()) };
    CudaBuild { shim_cudart: i64::from(v), config: buf_to_string(&buf) }
}

/// The GPU code a libtorch carries, from its `-gencode` flags: cubins per
/// compute capability (`code=sm_XY`) and PTX (`code=compute_XY`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Kernels {
    /// (major, minor) of each cubin.
    pub sm: Vec<(u32, u32)>,
    pub ptx: Vec<(u32, u32)>,
}

impl Kernels {
    pub(crate) fn parse(config: &str) -> Kernels {
        let mut k = Kernels::default();
        let cc = |s: &str| -> Option<(u32, u32)> {
            let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            let n: u32 = digits.parse().ok()?;
            Some((n / 10, n % 10))
        };
        for part in config.split(|c: char| c == ';' || c == ',' || c.is_whitespace()) {
            if let Some(x) = part.strip_prefix("code=sm_").and_then(cc) {
                if !k.sm.contains(&x) {
                    k.sm.push(x);
                }
            } else if let Some(x) = part.strip_prefix("code=compute_").and_then(cc) {
                if !k.ptx.contains(&x) {
                    k.ptx.push(x);
                }
            }
        }
        k.sm.sort();
        k.ptx.sort();
        k
    }

    /// Whether a GPU of compute capability `cc` can run this code: a cubin of
    /// the same major version and no newer minor, or PTX no newer than it.
    pub(crate) fn run_on(&self, cc: (u32, u32)) -> bool {
        self.sm.iter().any(|&(maj, min)| maj == cc.0 && min <= cc.1) || self.ptx.iter().any(|&p| p <= cc)
    }

    /// "7.5, 8.0, 8.6, 9.0 (+PTX 12.0)".
    pub(crate) fn describe(&self) -> String {
        let list = |v: &[(u32, u32)]| v.iter().map(|(a, b)| format!("{a}.{b}")).collect::<Vec<_>>().join(", ");
        let mut s = list(&self.sm);
        if !self.ptx.is_empty() {
            s += &format!(" (+PTX {})", list(&self.ptx));
        }
        s
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct DeviceProps {
    pub ordinal: usize,
    pub name: String,
    pub pci_bus_id: String,
    pub total_memory_bytes: u64,
    pub compute_capability: String,
    pub multiprocessors: i32,
}

pub(crate) fn cuda_device_props(dev: usize) -> Result<DeviceProps> {
    let mut name = [0u8; 256];
    let mut pci = [0u8; 32];
    let (mut mem, mut major, mut minor, mut sms) = (0u64, 0, 0, 0);
    check(unsafe {
        gb_cuda_device_props(
            dev as c_int,
            name.as_mut_ptr().cast(),
            name.len(),
            pci.as_mut_ptr().cast(),
            pci.len(),
            &mut mem,
            &mut major,
            &mut minor,
            &mut sms,
        )
    })?;
    Ok(DeviceProps {
        ordinal: dev,
        name: buf_to_string(&name),
        pci_bus_id: buf_to_string(&pci),
        total_memory_bytes: mem,
        compute_capability: format!("{major}.{minor}"),
        multiprocessors: sms,
    })
}

/// Caching-allocator bytes on a CUDA device.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct AllocatorStats {
    pub allocated: i64,
    pub peak_allocated: i64,
    pub reserved: i64,
    pub peak_reserved: i64,
    /// Since the process began: cudaMalloc failures the allocator survived
    /// by freeing its cache and retrying (each a device-wide sync), and
    /// out-of-memory errors it raised.
    pub alloc_retries: i64,
    pub ooms: i64,
}

pub(crate) fn cuda_memory_stats(dev: usize) -> Result<AllocatorStats> {
    let mut v = [0i64; 6];
    check(unsafe { gb_cuda_memory_stats(dev as c_int, v.as_mut_ptr()) })?;
    Ok(AllocatorStats {
        allocated: v[0],
        peak_allocated: v[1],
        reserved: v[2],
        peak_reserved: v[3],
        alloc_retries: v[4],
        ooms: v[5],
    })
}

/// Makes CUDA device `dev` this thread's current device (a no-op without
/// the CUDA shim). Threads that work for one device call it first, so that
/// nothing they do lands on GPU 0 by default.
pub(crate) fn cuda_set_device(dev: usize) -> Result<()> {
    check(unsafe { gb_cuda_set_device(dev as c_int) })
}

pub(crate) fn cuda_reset_peak_memory(dev: usize) -> Result<()> {
    check(unsafe { gb_cuda_reset_peak_memory(dev as c_int) })
}

/// Starts PyTorch's profiler (Kineto): CPU ops on every thread, and CUDA
/// kernels when `cuda`.
pub(crate) fn profiler_start(cuda: bool) -> Result<()> {
    check(unsafe { gb_profiler_start(c_int::from(cuda)) })
}

/// Top-level metadata for the trace being recorded (`json`: a JSON value).
pub(crate) fn profiler_metadata(key: &str, json: &str) -> Result<()> {
    let (k, j) = (cstring(key, "profiler metadata key")?, cstring(json, "profiler metadata")?);
    check(unsafe { gb_profiler_metadata(k.as_ptr(), j.as_ptr()) })
}

/// Stops the profiler and writes its Chrome trace to `path`.
pub(crate) fn profiler_stop(path: &std::path::Path) -> Result<()> {
    let p = cstring(&path.display().to_string(), "the trace path")?;
    check(unsafe { gb_profiler_stop(p.as_ptr()) })
}

/// `s` for C, or an error naming `what` when it holds a NUL byte.
pub(crate) fn cstring(s: &str, what: &str) -> Result<std::ffi::CString> {
    std::ffi::CString::new(s).map_err(|_| anyhow!("{what} contains a NUL byte: {s:?}"))
}

/// Whether this build can emit NVTX ranges (`--nvtx`).
pub(crate) fn nvtx_available() -> bool {
    unsafe { gb_nvtx_available() != 0 }
}

static NVTX: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--nvtx`: every [`Range`] is also an NVTX range, for Nsight Systems.
pub(crate) fn set_nvtx(on: bool) {
    NVTX.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// A named range in the profiler's trace (what torch.profiler.record_function
/// opens) and, with `--nvtx`, an NVTX range; closed on drop. Nothing is
/// recorded when neither is on.
pub(crate) struct Range {
    record: *mut std::ffi::c_void,
    nvtx: bool,
}

impl Range {
    pub(crate) fn begin(name: &str) -> Range {
        let Ok(c) = std::ffi::CString::new(name) else {
            return Range { record: std::ptr::null_mut(), nvtx: false };
        };
        let nvtx = NVTX.load(std::sync::atomic::Ordering::Relaxed);
        if nvtx {
            unsafe { gb_nvtx_push(c.as_ptr()) }
        }
        Range { record: unsafe { gb_range_begin(c.as_ptr()) }, nvtx }
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        if !self.record.is_null() {
            unsafe { gb_range_end(self.record) }
        }
        if self.nvtx {
            unsafe { gb_nvtx_pop() }
        }
    }
}

/// Enters (`on`) or leaves libtorch's autocast for CUDA or the CPU, to
/// float16 or bfloat16. The state is thread-local.
pub(crate) fn set_autocast(cuda: bool, bf16: bool, on: bool) -> Result<()> {
    check(unsafe { gb_autocast(c_int::from(cuda), c_int::from(bf16), c_int::from(on)) })
}

/// TF32 tensor-core math for cuBLAS and cuDNN, process-wide.
pub(crate) fn set_tf32(on: bool) -> Result<()> {
    check(unsafe { gb_set_tf32(c_int::from(on)) })
}

/// Deterministic algorithms, process-wide.
pub(crate) fn set_deterministic(on: bool) -> Result<()> {
    check(unsafe { gb_set_deterministic(c_int::from(on)) })
}

/// Lays a 4-D tensor out as NHWC in place (other tensors are left alone).
pub(crate) fn to_channels_last(t: &tch::Tensor) -> Result<()> {
    check(unsafe { gb_channels_last_(t.as_ptr() as *mut _) })
}

pub fn is_channels_last(t: &tch::Tensor) -> bool {
    unsafe { gb_is_channels_last(t.as_ptr() as *mut _) != 0 }
}

/// dp's replicate on CUDA: `src` (the master's variables) copied to every
/// replica's device in large coalesced buffers, each of `dst` (n per
/// replica, replica by replica) taking its copy's storage.
pub(crate) fn broadcast_coalesced_into(src: &[tch::Tensor], dst: &[tch::Tensor]) -> Result<()> {
    let replicas = if src.is_empty() { 0 } else { dst.len() / src.len() };
    let mut s: Vec<*mut std::ffi::c_void> = src.iter().map(|t| t.as_ptr() as *mut _).collect();
    let mut d: Vec<*mut std::ffi::c_void> = dst.iter().map(|t| t.as_ptr() as *mut _).collect();
    check(unsafe { gb_broadcast_coalesced_into(s.as_mut_ptr(), s.len(), d.as_mut_ptr(), replicas) })
}

/// GradScaler's fused unscale: divides every gradient by the scale in place
/// (`inv_scale` = 1/scale) and sets `found_inf` to 1 if any is not finite.
/// All on one device, and nothing read back.
pub(crate) fn amp_unscale(grads: &[tch::Tensor], found_inf: &tch::Tensor, inv_scale: &tch::Tensor) -> Result<()> {
    let mut ptrs: Vec<*mut std::ffi::c_void> = grads.iter().map(|g| g.as_ptr() as *mut _).collect();
    check(unsafe {
        gb_amp_unscale(ptrs.as_mut_ptr(), ptrs.len(), found_inf.as_ptr() as *mut _, inv_scale.as_ptr() as *mut _)
    })
}

/// One SGD step over every parameter in multi-tensor kernels (`fused`: one
/// `_fused_sgd_`, else `_foreach_*`); `bufs` are the momentum buffers.
/// `skip_if` (fused only): a one-element flag on the device; the step
/// changes nothing where it is non-zero (fp16's skipped step, no host sync).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgd_step(
    fused: bool,
    params: &[tch::Tensor],
    bufs: &[tch::Tensor],
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    first_step: bool,
    skip_if: Option<&tch::Tensor>,
) -> Result<()> {
    if params.len() != bufs.len() {
        return Err(anyhow!("sgd_step: {} parameters but {} momentum buffers", params.len(), bufs.len()));
    }
    let p: Vec<*mut std::ffi::c_void> = params.iter().map(|t| t.as_ptr() as *mut _).collect();
    let b: Vec<*mut std::ffi::c_void> = bufs.iter().map(|t| t.as_ptr() as *mut _).collect();
    let imp = if fused { 2 } else { 1 };
    let inf = skip_if.map_or(std::ptr::null_mut(), |t| t.as_ptr() as *mut std::ffi::c_void);
    check(unsafe {
        gb_sgd_step(imp, p.as_ptr(), b.as_ptr(), p.len(), lr, momentum, weight_decay, first_step as c_int, inf)
    })
    .map_err(|e| e.context(if fused { "fused SGD step" } else { "foreach SGD step" }))
}

/// AdamW's state for `adamw_step`: both moments, each parameter's step
/// count on its device, and this step's number (from 1).
pub(crate) struct AdamWState<'a> {
    pub exp_avg: &'a [tch::Tensor],
    pub exp_avg_sq: &'a [tch::Tensor],
    pub steps: &'a [tch::Tensor],
    pub step: i64,
}

/// AdamW's hyper-parameters for `adamw_step` (from the caller: the base
/// layer does not read the configuration).
pub(crate) struct AdamWHyper {
    pub lr: f64,
    pub betas: (f64, f64),
    pub weight_decay: f64,
    pub eps: f64,
}

/// One AdamW step over every parameter in multi-tensor kernels (`fused`:
/// one `_fused_adamw_`, else `_foreach_*`); `skip_if` as for `sgd_step`.
pub(crate) fn adamw_step(
    fused: bool,
    params: &[tch::Tensor],
    s: &AdamWState,
    h: &AdamWHyper,
    skip_if: Option<&tch::Tensor>,
) -> Result<()> {
    let n = params.len();
    if [s.exp_avg.len(), s.exp_avg_sq.len(), s.steps.len()].iter().any(|&k| k != n) {
        return Err(anyhow!("adamw_step: {n} parameters but state for another count"));
    }
    let ptrs = |v: &[tch::Tensor]| -> Vec<*mut std::ffi::c_void> { v.iter().map(|t| t.as_ptr() as *mut _).collect() };
    let (p, m, v, t) = (ptrs(params), ptrs(s.exp_avg), ptrs(s.exp_avg_sq), ptrs(s.steps));
    let imp = if fused { 2 } else { 1 };
    check(unsafe {
        gb_adamw_step(
            imp,
            p.as_ptr(),
            m.as_ptr(),
            v.as_ptr(),
            t.as_ptr(),
            n,
            h.lr,
            h.betas.0,
            h.betas.1,
            h.weight_decay,
            h.eps,
            s.step,
            skip_if.map_or(std::ptr::null_mut(), |t| t.as_ptr() as *mut std::ffi::c_void),
        )
    })
    .map_err(|e| e.context(if fused { "fused AdamW step" } else { "foreach AdamW step" }))
}

/// Back-propagates `grad` from `output` (autograd's backward with an output
/// gradient, which tch's `backward` does not take).
pub(crate) fn backward_from(output: &tch::Tensor, grad: &tch::Tensor) -> Result<()> {
    check(unsafe { gb_backward_from(output.as_ptr() as *mut _, grad.as_ptr() as *mut _) })
}

/// Counts the bytes libtorch allocates on the CPU from now on
/// (`cpu_memory`); blocks allocated before are not counted.
pub(crate) fn cpu_memory_install() -> Result<()> {
    check(unsafe { gb_cpu_memory_install() })
}

/// (live, peak) bytes libtorch holds on the CPU, counted since
/// `cpu_memory_install`; `reset` restarts the peak from the live bytes.
pub(crate) fn cpu_memory(reset: bool) -> (i64, i64) {
    let (mut live, mut peak) = (0i64, 0i64);
    unsafe { gb_cpu_memory(&mut live, &mut peak, reset as c_int) };
    (live, peak)
}

/// Every gradient of `params` dropped (set to None), as PyTorch's zero_grad.
pub(crate) fn zero_grads(params: &[tch::Tensor]) -> Result<()> {
    let p: Vec<*mut std::ffi::c_void> = params.iter().map(|t| t.as_ptr() as *mut _).collect();
    check(unsafe { gb_zero_grads(p.as_ptr(), p.len()) })
}

/// GradScaler's fused scale update, on the device: after a step with
/// `found_inf`, the scale backs off; after `interval` good steps it grows.
pub(crate) fn amp_update_scale(
    scale: &tch::Tensor,
    growth_tracker: &tch::Tensor,
    found_inf: &tch::Tensor,
    growth: f64,
    backoff: f64,
    interval: i64,
) -> Result<()> {
    check(unsafe {
        gb_amp_update_scale(
            scale.as_ptr() as *mut _,
            growth_tracker.as_ptr() as *mut _,
            found_inf.as_ptr() as *mut _,
            growth,
            backoff,
            interval as c_long,
        )
    })
}

/// "13.0" from 13000.
pub(crate) fn format_cuda_version(v: i64) -> String {
    if v <= 0 {
        "n/a".into()
    } else {
        format!("{}.{}", v / 1000, (v % 1000) / 10)
    }
}

/// "9.19.0" from 91900 (cuDNN ≥ 9 encodes major*10000 + minor*100 + patch).
pub(crate) fn format_cudnn_version(v: i64) -> String {
    if v <= 0 {
        "n/a".into()
    } else if v >= 10000 {
        format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
    }
}

/// "2.28.9" from libtorch's packed NCCL version (major << 32 | minor << 16 | patch).
pub(crate) fn format_nccl_version(v: u64) -> String {
    if v == 0 {
        "n/a".into()
    } else {
        format!("{}.{}.{}", v >> 32, (v >> 16) & 0xffff, v & 0xffff)
    }
}

#[repr(C)]
struct GbGraph {
    _private: [u8; 0],
}
#[repr(C)]
struct GbStream {
    _private: [u8; 0],
}
#[repr(C)]
struct GbEvent {
    _private: [u8; 0],
}

extern "C" {
    fn gb_graph_new(device: c_int, out: *mut *mut GbGraph) -> *mut c_char;
    fn gb_graph_free(g: *mut GbGraph);
    fn gb_graph_capture_begin(g: *mut GbGraph, share: *const GbGraph) -> *mut c_char;
    fn gb_graph_capture_end(g: *mut GbGraph) -> *mut c_char;
    fn gb_graph_replay(g: *mut GbGraph) -> *mut c_char;
    fn gb_stream_new(device: c_int, out: *mut *mut GbStream) -> *mut c_char;
    fn gb_stream_free(s: *mut GbStream);
    fn gb_stream_make_current(s: *mut GbStream, before: *mut *mut GbStream) -> *mut c_char;
    fn gb_event_record(s: *mut GbStream, device: c_int, out: *mut *mut GbEvent) -> *mut c_char;
    fn gb_event_block(e: *mut GbEvent, s: *mut GbStream, device: c_int) -> *mut c_char;
    fn gb_event_synchronize(e: *mut GbEvent) -> *mut c_char;
    fn gb_event_free(e: *mut GbEvent);
}

/// A CUDA graph (`at::cuda::CUDAGraph`): the work of one closure on one
/// device, captured once and replayed. The tensors the closure read and
/// made are the graph's static inputs and outputs: a replay reads the
/// inputs' memory as it is then and overwrites the outputs in place.
pub(crate) struct CudaGraph {
    raw: *mut GbGraph,
    captured: bool,
}

// SAFETY: the graph is used by one thread at a time (it is moved, never shared).
unsafe impl Send for CudaGraph {}

impl CudaGraph {
    pub(crate) fn new(device: usize) -> Result<CudaGraph> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { gb_graph_new(device as c_int, &mut raw) })?;
        Ok(CudaGraph { raw, captured: false })
    }

    /// Captures what `f` queues on this thread (on a side stream made
    /// current meanwhile; nothing runs). With `share`, memory comes from that
    /// graph's private pool. The thread's stream is restored even when `f`
    /// fails or panics; the capture's error then comes with `f`'s.
    pub(crate) fn capture<T>(&mut self, share: Option<&CudaGraph>, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let share = share.map_or(std::ptr::null(), |g| g.raw as *const GbGraph);
        check(unsafe { gb_graph_capture_begin(self.raw, share) })
            .map_err(|e| e.context("starting a CUDA graph capture"))?;
        let out = crate::error::guarded(f);
        let ended = check(unsafe { gb_graph_capture_end(self.raw) });
        match (out, ended) {
            (Ok(v), Ok(())) => {
                self.captured = true;
                Ok(v)
            }
            (Ok(_), Err(e)) => Err(e.context("ending the CUDA graph capture")),
            (Err(e), Ok(())) => Err(e.context("inside the CUDA graph capture")),
            (Err(e), Err(end)) => Err(e.context(format!("inside the CUDA graph capture (which then failed: {end})"))),
        }
    }

    /// Launches the captured work on the thread's current stream.
    pub(crate) fn replay(&self) -> Result<()> {
        if !self.captured {
            return Err(anyhow!("CUDA graph replayed before it was captured"));
        }
        check(unsafe { gb_graph_replay(self.raw) })
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        unsafe { gb_graph_free(self.raw) }
    }
}

/// A CUDA stream from libtorch's pool, for work beside the default stream.
pub(crate) struct CudaStream {
    raw: *mut GbStream,
    device: usize,
}

// SAFETY: a stream handle is a value (a device and a cudaStream_t); libtorch's
// streams may be used from any thread.
unsafe impl Send for CudaStream {}

impl CudaStream {
    pub(crate) fn new(device: usize) -> Result<CudaStream> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { gb_stream_new(device as c_int, &mut raw) })?;
        Ok(CudaStream { raw, device })
    }

    /// The CUDA device it belongs to.
    pub(crate) fn device(&self) -> usize {
        self.device
    }

    /// Runs `f` with this stream current on the thread (its ops queue here),
    /// then makes the previous stream current again.
    pub(crate) fn run<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let mut before = std::ptr::null_mut();
        check(unsafe { gb_stream_make_current(self.raw, &mut before) })?;
        let before = CudaStream { raw: before, device: self.device };
        let out = crate::error::guarded(f);
        check(unsafe { gb_stream_make_current(before.raw, std::ptr::null_mut()) })?;
        out
    }

    /// An event recorded now on this stream.
    pub(crate) fn record(&self) -> Result<CudaEvent> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { gb_event_record(self.raw, self.device as c_int, &mut raw) })?;
        Ok(CudaEvent { raw })
    }
}

impl Drop for CudaStream {
    fn drop(&mut self) {
        unsafe { gb_stream_free(self.raw) }
    }
}

/// A point in a stream's work.
pub(crate) struct CudaEvent {
    raw: *mut GbEvent,
}

// SAFETY: as CudaStream's.
unsafe impl Send for CudaEvent {}

impl CudaEvent {
    /// An event recorded now on `device`'s current stream.
    pub(crate) fn on_current(device: usize) -> Result<CudaEvent> {
        let mut raw = std::ptr::null_mut();
        check(unsafe { gb_event_record(std::ptr::null_mut(), device as c_int, &mut raw) })?;
        Ok(CudaEvent { raw })
    }

    /// Work queued later on `device`'s current stream waits for this event
    /// (the host does not).
    pub(crate) fn block_current(&self, device: usize) -> Result<()> {
        check(unsafe { gb_event_block(self.raw, std::ptr::null_mut(), device as c_int) })
    }

    /// Waits on the host until the work before the event is done.
    pub(crate) fn synchronize(&self) -> Result<()> {
        check(unsafe { gb_event_synchronize(self.raw) })
    }
}

impl Drop for CudaEvent {
    fn drop(&mut self) {
        unsafe { gb_event_free(self.raw) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_formats() {
        assert_eq!(format_cuda_version(13000), "13.0");
        assert_eq!(format_cuda_version(12060), "12.6");
        assert_eq!(format_cuda_version(0), "n/a");
        assert_eq!(format_cudnn_version(91900), "9.19.0");
        assert_eq!(format_cudnn_version(8907), "8.9.7");
        assert_eq!(format_nccl_version((2 << 32) | (28 << 16) | 9), "2.28.9");
    }

    #[test]
    fn kernels_from_the_gencode_flags() {
        let k = Kernels::parse(
            "  - NVCC architecture flags: -gencode;arch=compute_75,code=sm_75;-gencode;arch=compute_80,code=sm_80;\
             -gencode;arch=compute_90,code=sm_90;-gencode;arch=compute_120,code=compute_120",
        );
        assert_eq!(k.sm, [(7, 5), (8, 0), (9, 0)]);
        assert_eq!(k.ptx, [(12, 0)]);
        assert!(k.run_on((8, 6)), "an 8.0 cubin runs on 8.6");
        assert!(k.run_on((9, 0)) && k.run_on((12, 1)), "PTX 12.0 is compiled for 12.1");
        assert!(!k.run_on((7, 0)), "no V100 kernels");
        assert!(!k.run_on((10, 0)), "no cubin for 10.x, and PTX 12.0 is newer");
        assert_eq!(k.describe(), "7.5, 8.0, 9.0 (+PTX 12.0)");
    }

    #[test]
    fn this_libtorch_reports_its_kernels() {
        if !built_with_cuda() {
            eprintln!("skipped: built without the CUDA shim");
            return;
        }
        // Every torch 2.11.0 CUDA build runs on 9.0 (Hopper) and none on 3.7 (K80).
        let k = libtorch_kernels();
        assert!(k.run_on((9, 0)) && !k.run_on((3, 7)), "{k:?}");
        assert_eq!(cuda_build().shim_cudart / 1000, cuda_versions().cudart / 1000);
    }

    #[test]
    fn channels_last_in_place() {
        use tch::{Device, Kind, Tensor};
        let t = Tensor::ones([2, 3, 4, 4], (Kind::Float, Device::Cpu));
        assert!(!is_channels_last(&t));
        to_channels_last(&t).unwrap();
        assert!(is_channels_last(&t));
        assert_eq!(t.size(), vec![2, 3, 4, 4]);
    }

    #[test]
    fn libtorch_version_is_pinned() {
        assert!(libtorch_version().starts_with("2.11.0"), "{}", libtorch_version());
    }
}
