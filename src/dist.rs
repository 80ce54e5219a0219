//! libtorch's own c10d, reached through src/shim/c10d.cpp: the TCPStore
//! rendezvous, Gloo and NCCL process groups, and DistributedDataParallel's
//! gradient engine, `c10d::Reducer`, driven the way torch 2.11's
//! `DistributedDataParallel` drives it (bucketing, bucket rebuild, autograd
//! hooks that all-reduce buckets during backward, runtime statistics).
//!
//! One DDP training step with a [`Reducer`]:
//! ```ignore
//! reducer.prepare_forward()?;            // DDP._pre_forward
//! let out = model.forward_t(&x, true);
//! reducer.prepare_backward(&[&out])?;    // DDP._post_forward
//! loss(&out).backward();                 // hooks all-reduce the gradient buckets
//! let stats = reducer.stats()?;          // this iteration's timings, if sampled
//! optimizer.step();
//! ```
//! With `gradient_as_bucket_view`, zero gradients in place (see
//! [`zero_grads_in_place`]): tch's `zero_grad` detaches them, which fails on
//! bucket views ("Can't detach views in-place").
pub use crate::config::{Backend, CommHook};
use crate::ffi::cstring;
use anyhow::{anyhow, bail, Result};
use std::ffi::{c_char, c_int, CStr};
use std::ptr::NonNull;
use std::time::Duration;
use tch::Tensor;
use torch_sys::C_tensor;

#[repr(C)]
struct GbStore {
    _private: [u8; 0],
}
#[repr(C)]
struct GbPg {
    _private: [u8; 0],
}
#[repr(C)]
struct GbReducer {
    _private: [u8; 0],
}

/// Mirrors `struct gb_reducer_stats` in c10d.cpp.
#[repr(C)]
#[derive(Default)]
struct GbReducerStats {
    iteration: i64,
    timed_iteration: i64,
    forward_compute_ms: f64,
    backward_compute_ms: f64,
    backward_comm_ms: f64,
    backward_overlap_ms: f64,
    avg_forward_compute_ms: f64,
    avg_backward_compute_ms: f64,
    avg_backward_comm_ms: f64,
    avg_backward_overlap_ms: f64,
    num_buckets: i64,
    has_rebuilt_buckets: i64,
    total_parameter_bytes: i64,
    sample_rate: i64,
}

extern "C" {
    fn gb_free_error(e: *mut c_char);

    fn gb_store_new(
        host: *const c_char,
        port: c_int,
        rank: c_int,
        world: c_int,
        is_server: c_int,
        timeout_ms: c_int,
        out: *mut *mut GbStore,
    ) -> *mut c_char;
    fn gb_store_client(
        host: *const c_char,
        port: c_int,
        rank: c_int,
        world: c_int,
        timeout_ms: c_int,
        out: *mut *mut GbStore,
    ) -> *mut c_char;
    fn gb_store_free(s: *mut GbStore);
    fn gb_store_set(s: *mut GbStore, key: *const c_char, data: *const u8, len: usize) -> *mut c_char;
    fn gb_store_get(s: *mut GbStore, key: *const c_char, data: *mut *mut u8, len: *mut usize) -> *mut c_char;
    fn gb_store_add(s: *mut GbStore, key: *const c_char, delta: i64, out: *mut i64) -> *mut c_char;
    fn gb_store_check(s: *mut GbStore, key: *const c_char, exists: *mut c_int) -> *mut c_char;
    fn gb_free_bytes(p: *mut u8);

    fn gb_pg_new(
        s: *mut GbStore,
        backend: *const c_char,
        rank: c_int,
        world: c_int,
        cuda_device: c_int,
        timeout_ms: c_int,
        out: *mut *mut GbPg,
    ) -> *mut c_char;
    fn gb_pg_free(p: *mut GbPg);
    fn gb_pg_barrier(p: *mut GbPg) -> *mut c_char;
    fn gb_pg_allreduce_sum(p: *mut GbPg, t: *mut C_tensor) -> *mut c_char;
    #[cfg(test)]
    fn gb_pg_broadcast(p: *mut GbPg, ts: *const *mut C_tensor, n: usize, root: c_int) -> *mut c_char;

    fn gb_reducer_new(
        p: *mut GbPg,
        params: *const *mut C_tensor,
        n_params: usize,
        buffers: *const *mut C_tensor,
        n_buffers: usize,
        bucket_cap_bytes: i64,
        first_bucket_cap_bytes: i64,
        find_unused: c_int,
        grad_as_bucket_view: c_int,
        broadcast_buffers: c_int,
        out: *mut *mut GbReducer,
    ) -> *mut c_char;
    fn gb_reducer_free(r: *mut GbReducer);
    fn gb_reducer_set_sample_rate(r: *mut GbReducer, rate: c_int) -> *mut c_char;
    fn gb_reducer_comm_hook(r: *mut GbReducer, kind: c_int) -> *mut c_char;
    fn gb_reducer_param_layout(r: *mut GbReducer, bucket_of: *mut i64, ready_ns: *mut i64, n: usize) -> *mut c_char;
    fn gb_reducer_prepare_forward(r: *mut GbReducer) -> *mut c_char;
    fn gb_reducer_broadcast_buffers(r: *mut GbReducer) -> *mut c_char;
    fn gb_reducer_time_ready_on_device(r: *mut GbReducer) -> *mut c_char;
    fn gb_reducer_device_ready_ms(r: *mut GbReducer, out: *mut f64, n: usize) -> *mut c_char;
    fn gb_reducer_prepare_backward(r: *mut GbReducer, outputs: *const *mut C_tensor, n: usize) -> *mut c_char;
    fn gb_reducer_stats(r: *mut GbReducer, out: *mut GbReducerStats) -> *mut c_char;
    fn gb_reducer_bucket_sizes(r: *mut GbReducer, out: *mut i64, cap: usize, n: *mut usize) -> *mut c_char;
}

/// Turns a shim error (NULL or a malloc'd message) into a Result.
fn check(err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: the shim returns NULL or a malloc'd NUL-terminated string, freed once here.
    let msg = unsafe { CStr::from_ptr(err) }.to_string_lossy().into_owned();
    unsafe { gb_free_error(err) };
    Err(anyhow!(msg))
}

fn int(v: usize, what: &str) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| anyhow!("{what} {v} is too large"))
}

fn timeout_ms(t: Duration) -> c_int {
    t.as_millis().clamp(1, c_int::MAX as u128) as c_int
}

fn ptrs(ts: &[Tensor]) -> Vec<*mut C_tensor> {
    // The shim copies the at::Tensor handles (refcounted), so the pointers
    // only need to live for the call.
    ts.iter().map(|t| t.as_ptr() as *mut C_tensor).collect()
}

/// A port that was free a moment ago on 127.0.0.1, for a single-node
/// rendezvous store.
pub fn free_port() -> Result<u16> {
    use anyhow::Context;
    let l = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port for the rendezvous store")?;
    Ok(l.local_addr()?.port())
}

/// A c10d `TCPStore`: the key-value rendezvous of a run. Rank 0 hosts it.
pub struct Store {
    ptr: NonNull<GbStore>,
}

// SAFETY: c10d::TCPStore serialises its client operations with an internal
// mutex and is used from several threads by torch.distributed itself; the
// shim's wrapper adds only immutable fields and an atomic group counter. So
// the handle may move between threads (Send) and be used from several at
// once (Sync).
unsafe impl Send for Store {}
unsafe impl Sync for Store {}

impl Store {
    /// Connects to (and, for `is_server`, hosts) the store at host:port.
    /// The server waits up to `timeout` for all `world` ranks to connect;
    /// clients retry connecting for up to `timeout`. `timeout` is also the
    /// limit of every later blocking [`Store::get`].
    pub fn new(host: &str, port: u16, rank: usize, world: usize, is_server: bool, timeout: Duration) -> Result<Store> {
        let h = cstring(host, "store host")?;
        let mut out = std::ptr::null_mut();
        check(unsafe {
            gb_store_new(
                h.as_ptr(),
                c_int::from(port),
                int(rank, "rank")?,
                int(world, "world size")?,
                c_int::from(is_server),
                timeout_ms(timeout),
                &mut out,
            )
        })
        .map_err(|e| e.context(format!("TCPStore {host}:{port} (rank {rank} of {world})")))?;
        Ok(Store { ptr: NonNull::new(out).ok_or_else(|| anyhow!("gb_store_new returned null"))? })
    }

    /// One more client of the running store at host:port, not counted as a
    /// worker; each of its operations gives up after `timeout`.
    pub(crate) fn client(host: &str, port: u16, rank: usize, world: usize, timeout: Duration) -> Result<Store> {
        let h = cstring(host, "store host")?;
        let mut out = std::ptr::null_mut();
        check(unsafe {
            gb_store_client(
                h.as_ptr(),
                c_int::from(port),
                int(rank, "rank")?,
                int(world, "world size")?,
                timeout_ms(timeout),
                &mut out,
            )
        })
        .map_err(|e| e.context(format!("TCPStore {host}:{port} (a second client for rank {rank})")))?;
        Ok(Store { ptr: NonNull::new(out).ok_or_else(|| anyhow!("gb_store_client returned null"))? })
    }

    pub(crate) fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let k = cstring(key, "store key")?;
        check(unsafe { gb_store_set(self.ptr.as_ptr(), k.as_ptr(), value.as_ptr(), value.len()) })
            .map_err(|e| e.context(format!("store set {key:?}")))
    }

    /// Waits (up to the store's timeout) until `key` is set, and returns it.
    pub(crate) fn get(&self, key: &str) -> Result<Vec<u8>> {
        let k = cstring(key, "store key")?;
        let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
        check(unsafe { gb_store_get(self.ptr.as_ptr(), k.as_ptr(), &mut data, &mut len) })
            .map_err(|e| e.context(format!("store get {key:?}")))?;
        if data.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: the shim malloc'd `len` bytes at `data`; copied, then freed once.
        let v = unsafe { std::slice::from_raw_parts(data, len) }.to_vec();
        unsafe { gb_free_bytes(data) };
        Ok(v)
    }

    /// Whether `key` is set, without waiting.
    pub(crate) fn contains(&self, key: &str) -> Result<bool> {
        let k = cstring(key, "store key")?;
        let mut v: c_int = 0;
        check(unsafe { gb_store_check(self.ptr.as_ptr(), k.as_ptr(), &mut v) })
            .map_err(|e| e.context(format!("store check {key:?}")))?;
        Ok(v != 0)
    }

    /// `key`'s value if it is set within `wait`, else None.
    pub(crate) fn get_within(&self, key: &str, wait: Duration) -> Result<Option<Vec<u8>>> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            if self.contains(key)? {
                return self.get(key).map(Some);
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Atomically adds `delta` to the counter at `key` (0 when absent) and
    /// returns the new value.
    pub(crate) fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let k = cstring(key, "store key")?;
        let mut v = 0i64;
        check(unsafe { gb_store_add(self.ptr.as_ptr(), k.as_ptr(), delta, &mut v) })
            .map_err(|e| e.context(format!("store add {key:?}")))?;
        Ok(v)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        unsafe { gb_store_free(self.ptr.as_ptr()) }
    }
}

/// A c10d `ProcessGroup` with one backend, built as `init_process_group`
/// builds it. Its keys live under a prefix ("0/", "1/", ...: the n-th group
/// created on the store), so every rank must create its groups on a store
/// in the same order. Launcher keys on the same store should not start with
/// a digit and a slash.
pub struct ProcessGroup {
    ptr: NonNull<GbPg>,
    backend: Backend,
    rank: usize,
    world: usize,
}

// SAFETY: the handle owns a refcounted (atomic) c10d::ProcessGroup whose
// backends are thread-safe to call into and have no thread affinity, so it
// may move to another thread. Not Sync: collectives issued concurrently
// from several threads would be ordered differently on different ranks.
unsafe impl Send for ProcessGroup {}

impl ProcessGroup {
    /// Rendezvous of `world` ranks over `store`. `cuda_device` is required
    /// for NCCL (it becomes the current CUDA device first) and ignored for
    /// Gloo. `timeout` bounds the rendezvous and every collective.
    pub fn new(
        store: &Store,
        backend: Backend,
        rank: usize,
        world: usize,
        cuda_device: Option<usize>,
        timeout: Duration,
    ) -> Result<ProcessGroup> {
        let b = cstring(backend.name(), "backend")?;
        let dev = match cuda_device {
            Some(d) => int(d, "cuda device")?,
            None => -1,
        };
        let mut out = std::ptr::null_mut();
        check(unsafe {
            gb_pg_new(
                store.ptr.as_ptr(),
                b.as_ptr(),
                int(rank, "rank")?,
                int(world, "world size")?,
                dev,
                timeout_ms(timeout),
                &mut out,
            )
        })
        .map_err(|e| e.context(format!("{backend} process group (rank {rank} of {world})")))?;
        let ptr = NonNull::new(out).ok_or_else(|| anyhow!("gb_pg_new returned null"))?;
        Ok(ProcessGroup { ptr, backend, rank, world })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub(crate) fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn world(&self) -> usize {
        self.world
    }

    /// Returns when every rank has entered the barrier.
    pub(crate) fn barrier(&self) -> Result<()> {
        check(unsafe { gb_pg_barrier(self.ptr.as_ptr()) }).map_err(|e| e.context("barrier"))
    }

    /// Sums `t` over all ranks, in place, and waits. For CUDA tensors over
    /// NCCL "waits" means the current stream waits, as in torch.
    pub(crate) fn allreduce_sum(&self, t: &mut Tensor) -> Result<()> {
        check(unsafe { gb_pg_allreduce_sum(self.ptr.as_ptr(), t.as_mut_ptr()) }).map_err(|e| e.context("all_reduce"))
    }

    /// Overwrites `ts` on every rank with rank `root`'s values (coalesced
    /// into 250 MiB buckets, as DDP's parameter sync), and waits.
    #[cfg(test)]
    pub(crate) fn broadcast(&self, ts: &mut [Tensor], root: usize) -> Result<()> {
        let p: Vec<*mut C_tensor> = ts.iter_mut().map(|t| t.as_mut_ptr()).collect();
        check(unsafe { gb_pg_broadcast(self.ptr.as_ptr(), p.as_ptr(), p.len(), int(root, "root")?) })
            .map_err(|e| e.context("broadcast"))
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        unsafe { gb_pg_free(self.ptr.as_ptr()) }
    }
}

/// DistributedDataParallel's constructor arguments.
#[derive(Debug, Clone)]
pub(crate) struct ReducerOptions {
    /// `bucket_cap_mb` in bytes. None: DDP's default, 25 MiB with a 1 MiB
    /// first bucket. Some(cap): as an explicit `bucket_cap_mb`, which in
    /// torch 2.11 also caps the first bucket at `cap`.
    pub bucket_cap_bytes: Option<i64>,
    /// Overrides the first bucket's cap (DDP's `_DEFAULT_FIRST_BUCKET_BYTES`).
    pub first_bucket_cap_bytes: Option<i64>,
    pub find_unused_parameters: bool,
    /// Gradients become views into the all-reduce buckets (no copy back).
    /// Zero them with [`zero_grads_in_place`], not `zero_grad`.
    pub gradient_as_bucket_view: bool,
    /// Broadcast the buffers from rank 0 at construction and before every
    /// forward (DDP's default: true).
    pub broadcast_buffers: bool,
    /// Time every `n`-th iteration after the first 10 (DDP: 100). Some(1)
    /// times every iteration.
    pub stats_sample_rate: Option<u32>,
    /// Gradient compression before the all-reduce (DDP's comm hook).
    pub comm_hook: CommHook,
}

impl Default for ReducerOptions {
    fn default() -> Self {
        ReducerOptions {
            bucket_cap_bytes: None,
            first_bucket_cap_bytes: None,
            find_unused_parameters: false,
            gradient_as_bucket_view: false,
            broadcast_buffers: true,
            stats_sample_rate: None,
            comm_hook: CommHook::None,
        }
    }
}

/// What the Reducer measured, as DDP's Logger reports it. Times in ms.
///
/// The Reducer times only sampled iterations: the first 10, then every
/// `sample_rate`-th. The per-iteration fields are Some only when the
/// iteration just finished was sampled (`timed`); the averages cover all
/// sampled iterations so far. For CPU parameters the clock is the host's;
/// for CUDA parameters they are CUDA event times on the current stream.
/// - forward_compute: prepare_forward to prepare_backward (includes the
///   bucket rebuild and buffer broadcast, as in DDP);
/// - backward_compute: prepare_backward to the end of the autograd pass;
/// - backward_comm: first bucket's all-reduce launched to all reductions
///   finished;
/// - backward_overlap: first all-reduce launched to the end of the autograd
///   pass (communication hidden behind backward computation).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReducerStats {
    /// Iterations started (prepare_forward calls).
    pub iteration: u64,
    /// Whether `iteration` was sampled, i.e. the per-iteration times are its.
    pub timed: bool,
    pub forward_compute_ms: Option<f64>,
    pub backward_compute_ms: Option<f64>,
    pub backward_comm_ms: Option<f64>,
    pub backward_overlap_ms: Option<f64>,
    pub avg_forward_compute_ms: Option<f64>,
    pub avg_backward_compute_ms: Option<f64>,
    pub avg_backward_comm_ms: Option<f64>,
    pub avg_backward_overlap_ms: Option<f64>,
    pub num_buckets: usize,
    /// Bucket sizes in reduction order (first reduced first).
    pub bucket_sizes_bytes: Vec<i64>,
    /// Buckets were rebuilt in gradient-ready order (happens at iteration 2).
    pub has_rebuilt_buckets: bool,
    pub total_parameter_bytes: Option<i64>,
    pub sample_rate: u32,
}

fn opt_ms(v: f64) -> Option<f64> {
    (v >= 0.0).then_some(v)
}

/// libtorch's `c10d::Reducer` with its `c10d::Logger`: DDP's gradient
/// synchronisation for one model replica. Holds a reference to its process
/// group (the C++ side keeps it alive), so the [`ProcessGroup`] handle may be
/// dropped first. The Reducer hooks the parameters' gradient accumulators:
/// do not drop it while a backward pass over those parameters is running.
pub(crate) struct Reducer {
    ptr: NonNull<GbReducer>,
}

// SAFETY: the handle owns refcounted C++ objects (Reducer, Logger, tensors)
// with no thread affinity; the Reducer guards its state with its own mutex,
// and its hooks run on whichever thread runs backward, as in PyTorch. So it
// may move to another thread. Not Sync: the prepare_*/stats sequence of one
// iteration is a single-threaded protocol (methods take &mut self).
unsafe impl Send for Reducer {}

impl Reducer {
    /// DistributedDataParallel's constructor: checks that every rank has the
    /// same parameter shapes, broadcasts `params` (and, with
    /// broadcast_buffers, `buffers`) from rank 0, assigns buckets, and builds
    /// the Reducer and its Logger. `params` must be the model's trainable
    /// leaf tensors, in the same order on every rank; they are updated in
    /// place. Collective: every rank must call it.
    pub(crate) fn new(
        pg: &ProcessGroup,
        params: &[Tensor],
        buffers: &[Tensor],
        opts: &ReducerOptions,
    ) -> Result<Reducer> {
        if params.is_empty() {
            bail!("Reducer needs at least one parameter");
        }
        let p = ptrs(params);
        let b = ptrs(buffers);
        let mut out = std::ptr::null_mut();
        check(unsafe {
            gb_reducer_new(
                pg.ptr.as_ptr(),
                p.as_ptr(),
                p.len(),
                b.as_ptr(),
                b.len(),
                opts.bucket_cap_bytes.unwrap_or(-1),
                opts.first_bucket_cap_bytes.unwrap_or(-1),
                c_int::from(opts.find_unused_parameters),
                c_int::from(opts.gradient_as_bucket_view),
                c_int::from(opts.broadcast_buffers),
                &mut out,
            )
        })
        .map_err(|e| e.context("DDP reducer"))?;
        let mut r = Reducer { ptr: NonNull::new(out).ok_or_else(|| anyhow!("gb_reducer_new returned null"))? };
        if let Some(rate) = opts.stats_sample_rate {
            r.set_sample_rate(rate)?;
        }
        let kind = match opts.comm_hook {
            CommHook::None => 0,
            CommHook::Fp16 => 1,
            CommHook::Bf16 => 2,
        };
        if kind > 0 {
            check(unsafe { gb_reducer_comm_hook(r.ptr.as_ptr(), kind) })
                .map_err(|e| e.context(format!("{} comm hook", opts.comm_hook.name())))?;
        }
        Ok(r)
    }

    /// Times the first 10 iterations, then every `rate`-th.
    pub(crate) fn set_sample_rate(&mut self, rate: u32) -> Result<()> {
        let rate = c_int::try_from(rate).map_err(|_| anyhow!("sample rate {rate} too large"))?;
        check(unsafe { gb_reducer_set_sample_rate(self.ptr.as_ptr(), rate) })
    }

    /// DDP's pre-forward: starts the iteration (and its forward timer),
    /// rebuilds the buckets once (iteration 2; a collective), and broadcasts
    /// the buffers from rank 0 if asked to. Call before every forward pass
    /// whose gradients should be synchronised.
    pub(crate) fn prepare_forward(&mut self) -> Result<()> {
        check(unsafe { gb_reducer_prepare_forward(self.ptr.as_ptr()) }).map_err(|e| e.context("DDP prepare_forward"))
    }

    /// DDP's forward under `no_sync` (a micro-batch before the last of a
    /// gradient accumulation): the buffer broadcast alone, no iteration.
    pub(crate) fn broadcast_buffers(&mut self) -> Result<()> {
        check(unsafe { gb_reducer_broadcast_buffers(self.ptr.as_ptr()) }).map_err(|e| e.context("DDP buffer broadcast"))
    }

    /// DDP's post-forward: arms the autograd hooks for the next backward.
    /// `outputs` seed the unused-parameter search (only used with
    /// find_unused_parameters, as in DDP).
    pub(crate) fn prepare_backward(&mut self, outputs: &[&Tensor]) -> Result<()> {
        let p: Vec<*mut C_tensor> = outputs.iter().map(|t| t.as_ptr() as *mut C_tensor).collect();
        check(unsafe { gb_reducer_prepare_backward(self.ptr.as_ptr(), p.as_ptr(), p.len()) })
            .map_err(|e| e.context("DDP prepare_backward"))
    }

    /// Statistics of the iteration that just finished. Call after
    /// `backward()` returned (before, the iteration's times are lost). For
    /// CUDA parameters this synchronises with the iteration's timing events.
    pub(crate) fn stats(&mut self) -> Result<ReducerStats> {
        let mut s = GbReducerStats::default();
        check(unsafe { gb_reducer_stats(self.ptr.as_ptr(), &mut s) }).map_err(|e| e.context("DDP reducer stats"))?;
        Ok(ReducerStats {
            iteration: s.iteration.max(0) as u64,
            timed: s.timed_iteration >= 0,
            forward_compute_ms: opt_ms(s.forward_compute_ms),
            backward_compute_ms: opt_ms(s.backward_compute_ms),
            backward_comm_ms: opt_ms(s.backward_comm_ms),
            backward_overlap_ms: opt_ms(s.backward_overlap_ms),
            avg_forward_compute_ms: opt_ms(s.avg_forward_compute_ms),
            avg_backward_compute_ms: opt_ms(s.avg_backward_compute_ms),
            avg_backward_comm_ms: opt_ms(s.avg_backward_comm_ms),
            avg_backward_overlap_ms: opt_ms(s.avg_backward_overlap_ms),
            num_buckets: s.num_buckets.max(0) as usize,
            bucket_sizes_bytes: self.bucket_sizes()?,
            has_rebuilt_buckets: s.has_rebuilt_buckets > 0,
            total_parameter_bytes: (s.total_parameter_bytes >= 0).then_some(s.total_parameter_bytes),
            sample_rate: s.sample_rate.max(0) as u32,
        })
    }

    /// Per parameter of `n_params` (the order given to `new`): its bucket's
    /// index, and when its gradient was ready in the last sampled backward,
    /// ns after prepare_backward (None when unknown).
    pub(crate) fn param_layout(&self, n_params: usize) -> Result<Vec<(Option<usize>, Option<i64>)>> {
        let (mut bucket, mut ready) = (vec![-1i64; n_params], vec![-1i64; n_params]);
        check(unsafe {
            gb_reducer_param_layout(self.ptr.as_ptr(), bucket.as_mut_ptr(), ready.as_mut_ptr(), n_params)
        })?;
        Ok(bucket.into_iter().zip(ready).map(|(b, r)| (usize::try_from(b).ok(), (r >= 0).then_some(r))).collect())
    }

    /// From the next backward on, records when each gradient is ready on
    /// the device (CUDA events), not when its kernels were queued (the host
    /// times `param_layout` gives). CUDA parameters only.
    pub(crate) fn time_ready_on_device(&mut self) -> Result<()> {
        check(unsafe { gb_reducer_time_ready_on_device(self.ptr.as_ptr()) })
    }

    /// The last backward's device ready times in seconds after
    /// `prepare_backward`, per parameter (None: not recorded); waits for them.
    pub(crate) fn device_ready(&self, n_params: usize) -> Result<Vec<Option<f64>>> {
        let mut ms = vec![-1f64; n_params];
        check(unsafe { gb_reducer_device_ready_ms(self.ptr.as_ptr(), ms.as_mut_ptr(), n_params) })?;
        Ok(ms.into_iter().map(|m| (m >= 0.0).then_some(m / 1e3)).collect())
    }

    /// Current bucket sizes in bytes, in reduction order.
    pub(crate) fn bucket_sizes(&self) -> Result<Vec<i64>> {
        let mut n = 0usize;
        check(unsafe { gb_reducer_bucket_sizes(self.ptr.as_ptr(), std::ptr::null_mut(), 0, &mut n) })?;
        let mut v = vec![0i64; n];
        let mut m = 0usize;
        check(unsafe { gb_reducer_bucket_sizes(self.ptr.as_ptr(), v.as_mut_ptr(), v.len(), &mut m) })?;
        v.truncate(m.min(n));
        Ok(v)
    }
}

impl Drop for Reducer {
    fn drop(&mut self) {
        unsafe { gb_reducer_free(self.ptr.as_ptr()) }
    }
}

/// Zeroes defined gradients in place, without detaching them: required with
/// `gradient_as_bucket_view`, where they are views into the Reducer's
/// buckets and tch's `zero_grad` fails ("Can't detach views in-place").
pub(crate) fn zero_grads_in_place(params: &[Tensor]) {
    tch::no_grad(|| {
        for p in params {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use tch::{Device, Kind};

    const TIMEOUT: Duration = Duration::from_secs(60);

    fn free_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    /// Runs `f(rank, store)` for every rank, each on its own thread, and
    /// returns the results in rank order.
    fn run_ranks<R: Send>(world: usize, f: impl Fn(usize, Store) -> R + Sync) -> Vec<R> {
        let port = free_port();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..world)
                .map(|rank| {
                    let f = &f;
                    s.spawn(move || {
                        let store = Store::new("127.0.0.1", port, rank, world, rank == 0, TIMEOUT).unwrap();
                        f(rank, store)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("rank thread panicked")).collect()
        })
    }

    fn values(t: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(&t.flatten(0, -1).to_kind(Kind::Float)).unwrap()
    }

    #[test]
    fn store_round_trip_between_ranks() {
        let got = run_ranks(2, |rank, store| {
            let payload: Vec<u8> = vec![rank as u8, 0, 255, b'{', b'}'];
            store.set(&format!("result/{rank}"), &payload).unwrap();
            store.set(&format!("empty/{rank}"), &[]).unwrap();
            store.add("count", 1).unwrap();
            let other = 1 - rank;
            let theirs = store.get(&format!("result/{other}")).unwrap();
            let empty = store.get(&format!("empty/{other}")).unwrap();
            // Both ranks have added once they have both read each other's keys.
            store.set(&format!("read/{rank}"), b"1").unwrap();
            store.get(&format!("read/{other}")).unwrap();
            let count = store.add("count", 0).unwrap();
            // Rank 0 hosts the server: it must outlive the other ranks' use.
            store.set(&format!("done/{rank}"), b"1").unwrap();
            if rank == 0 {
                store.get("done/1").unwrap();
            }
            (theirs, empty, count)
        });
        assert_eq!(got[0].0, vec![1, 0, 255, b'{', b'}']);
        assert_eq!(got[1].0, vec![0, 0, 255, b'{', b'}']);
        assert!(got[0].1.is_empty() && got[1].1.is_empty());
        assert_eq!((got[0].2, got[1].2), (2, 2));
    }

    #[test]
    fn store_get_times_out_with_message() {
        let port = free_port();
        let store = Store::new("127.0.0.1", port, 0, 1, true, Duration::from_millis(300)).unwrap();
        let err = store.get("never-set").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("never-set"), "{msg}");
        // Bounded waits say "not there" instead of failing.
        assert!(!store.contains("k").unwrap());
        assert_eq!(store.get_within("k", Duration::from_millis(100)).unwrap(), None);
        store.set("k", b"v").unwrap();
        assert!(store.contains("k").unwrap());
        assert_eq!(store.get_within("k", Duration::from_millis(100)).unwrap(), Some(b"v".to_vec()));
    }

    #[test]
    fn allreduce_broadcast_barrier_over_gloo() {
        let got = run_ranks(2, |rank, store| {
            let pg = ProcessGroup::new(&store, Backend::Gloo, rank, 2, None, TIMEOUT).unwrap();
            assert_eq!((pg.rank(), pg.world(), pg.backend()), (rank, 2, Backend::Gloo));
            let r = rank as f32 + 1.0;
            let mut t = Tensor::from_slice(&[r, 10.0 * r, -r]);
            pg.allreduce_sum(&mut t).unwrap();
            let mut b =
                vec![Tensor::full([3], rank as f64, (Kind::Float, Device::Cpu)), Tensor::from_slice(&[rank as i64])];
            pg.broadcast(&mut b, 1).unwrap();
            pg.barrier().unwrap();
            (values(&t), values(&b[0]), Vec::<i64>::try_from(&b[1]).unwrap())
        });
        for (sum, bcast, ints) in got {
            assert_eq!(sum, vec![3.0, 30.0, -3.0]);
            assert_eq!(bcast, vec![1.0, 1.0, 1.0]);
            assert_eq!(ints, vec![1]);
        }
    }

    /// Deterministic, rank-dependent values (no global RNG: ranks are threads).
    fn pattern(shape: &[i64], seed: f64) -> Tensor {
        let n: i64 = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| ((i as f64 + 1.0) * 0.7 + seed).sin() as f32 * 0.5).collect();
        Tensor::from_slice(&v).reshape(shape)
    }

    struct Mlp {
        params: Vec<Tensor>, // w1, b1, w2, b2
    }

    impl Mlp {
        fn new(vs: &tch::nn::VarStore, seed: f64) -> Mlp {
            let root = vs.root();
            let params = vec![
                root.var_copy("w1", &pattern(&[8, 4], seed)),
                root.var_copy("b1", &pattern(&[8], seed + 1.0)),
                root.var_copy("w2", &pattern(&[3, 8], seed + 2.0)),
                root.var_copy("b2", &pattern(&[3], seed + 3.0)),
            ];
            Mlp { params }
        }
        fn forward(&self, x: &Tensor) -> Tensor {
            let p = &self.params;
            x.linear(&p[0], Some(&p[1])).relu().linear(&p[2], Some(&p[3]))
        }
        fn sgd_step(&self, lr: f64) {
            tch::no_grad(|| {
                for p in &self.params {
                    let mut p = p.shallow_clone();
                    let _ = p.f_sub_(&(p.grad() * lr)).unwrap();
                }
            });
        }
    }

    fn batch(rank: usize, iter: usize) -> (Tensor, Tensor) {
        let seed = 10.0 * rank as f64 + 100.0 * iter as f64;
        (pattern(&[5, 4], seed) * 3.0, pattern(&[5, 3], seed + 0.5))
    }

    fn loss(m: &Mlp, x: &Tensor, y: &Tensor) -> (Tensor, Tensor) {
        let out = m.forward(x);
        let l = (&out - y).square().mean(Kind::Float);
        (out, l)
    }

    const ITERS: usize = 3;
    const TOTAL_PARAM_BYTES: i64 = 4 * (32 + 8 + 24 + 3);

    struct RankResult {
        before: Vec<Vec<f32>>,
        after_sync: Vec<Vec<f32>>,
        grads: Vec<Vec<Vec<f32>>>, // [iter][param]
        stats: Vec<ReducerStats>,
        /// A float and an int64 buffer right after construction.
        buffers_after_sync: (Vec<f32>, Vec<i64>),
        /// The float buffer after each prepare_forward.
        buffer_seen: Vec<Vec<f32>>,
    }

    fn ddp_rank(rank: usize, store: Store, opts: &ReducerOptions) -> RankResult {
        let pg = ProcessGroup::new(&store, Backend::Gloo, rank, 2, None, TIMEOUT).unwrap();
        let vs = tch::nn::VarStore::new(Device::Cpu);
        // Rank 1 starts from different weights: the Reducer must overwrite them.
        let model = Mlp::new(&vs, if rank == 0 { 0.0 } else { 42.0 });
        let before = model.params.iter().map(values).collect();
        // Buffers (BatchNorm statistics in a real model) also differ per rank.
        let mut buf = Tensor::full([3], rank as f64 + 1.0, (Kind::Float, Device::Cpu));
        let count = Tensor::from_slice(&[7 * rank as i64]);
        let buffers = [buf.shallow_clone(), count.shallow_clone()];
        let mut reducer = Reducer::new(&pg, &model.params, &buffers, opts).unwrap();
        drop(pg); // the Reducer keeps its process group alive
        let after_sync = model.params.iter().map(values).collect();
        let buffers_after_sync = (values(&buf), Vec::<i64>::try_from(&count).unwrap());
        let (mut grads, mut stats, mut buffer_seen) = (vec![], vec![], vec![]);
        for it in 0..ITERS {
            let _ = buf.fill_((10 * rank + it) as f64);
            reducer.prepare_forward().unwrap();
            buffer_seen.push(values(&buf));
            let (x, y) = batch(rank, it);
            let (out, l) = loss(&model, &x, &y);
            reducer.prepare_backward(&[&out]).unwrap();
            l.backward();
            stats.push(reducer.stats().unwrap());
            grads.push(model.params.iter().map(|p| values(&p.grad())).collect());
            model.sgd_step(0.1);
            zero_grads_in_place(&model.params);
        }
        RankResult { before, after_sync, grads, stats, buffers_after_sync, buffer_seen }
    }

    /// Gradients of the mean loss over both ranks' batches, on one model.
    fn reference_grads() -> Vec<Vec<Vec<f32>>> {
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let model = Mlp::new(&vs, 0.0);
        let mut grads = vec![];
        for it in 0..ITERS {
            let ((x0, y0), (x1, y1)) = (batch(0, it), batch(1, it));
            let (_, l) = loss(&model, &Tensor::cat(&[x0, x1], 0), &Tensor::cat(&[y0, y1], 0));
            l.backward();
            grads.push(model.params.iter().map(|p| values(&p.grad())).collect());
            model.sgd_step(0.1);
            zero_grads_in_place(&model.params);
        }
        grads
    }

    fn check_ddp(opts: ReducerOptions) -> Vec<RankResult> {
        let res = run_ranks(2, |rank, store| ddp_rank(rank, store, &opts));
        let (r0, r1) = (&res[0], &res[1]);
        assert_ne!(r0.before, r1.before, "test needs different initial weights");
        assert_eq!(r1.after_sync, r0.before, "rank 1's parameters were not overwritten by rank 0's");
        assert_eq!(r0.after_sync, r0.before, "rank 0's parameters changed");
        for (rank, r) in res.iter().enumerate() {
            for it in 0..ITERS {
                // With broadcast_buffers, rank 0's buffers overwrite the others'
                // at construction and before every forward.
                let from = if opts.broadcast_buffers { 0 } else { rank };
                assert_eq!(r.buffer_seen[it], vec![(10 * from + it) as f32; 3], "rank {rank}");
            }
            let from = if opts.broadcast_buffers { 0 } else { rank };
            assert_eq!(r.buffers_after_sync, (vec![from as f32 + 1.0; 3], vec![7 * from as i64]));
        }
        let want = reference_grads();
        for it in 0..ITERS {
            assert_eq!(r0.grads[it], r1.grads[it], "iteration {it}: ranks' gradients differ");
            for (p, (got, want)) in r0.grads[it].iter().zip(&want[it]).enumerate() {
                let diff = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(diff <= 1e-6, "iteration {it}, param {p}: |Δgrad| = {diff}");
                assert!(want.iter().any(|v| *v != 0.0), "degenerate reference gradient");
            }
        }
        for r in &res {
            for (it, s) in r.stats.iter().enumerate() {
                assert_eq!(s.iteration, it as u64 + 1);
                assert!(s.timed, "iterations 1..=10 are always sampled: {s:?}");
                for v in [s.forward_compute_ms, s.backward_compute_ms, s.backward_comm_ms, s.backward_overlap_ms] {
                    assert!(v.is_some_and(|v| v > 0.0 && v < 60_000.0), "{s:?}");
                }
                assert!(s.avg_backward_compute_ms.is_some(), "{s:?}");
                assert_eq!(s.total_parameter_bytes, Some(TOTAL_PARAM_BYTES));
                assert_eq!(s.bucket_sizes_bytes.iter().sum::<i64>(), TOTAL_PARAM_BYTES);
                assert_eq!(s.num_buckets, s.bucket_sizes_bytes.len());
            }
            // Iteration 1: one bucket (DDP without find_unused_parameters).
            assert_eq!(r.stats[0].num_buckets, 1, "{:?}", r.stats[0]);
            assert!(!r.stats[0].has_rebuilt_buckets);
            // Rebuilt at the start of iteration 2, by size in gradient-ready order.
            assert!(r.stats[1].has_rebuilt_buckets);
        }
        assert_eq!(res[0].stats[2].bucket_sizes_bytes, res[1].stats[2].bucket_sizes_bytes);
        res
    }

    #[test]
    fn reducer_matches_full_batch_gradients() {
        // A 100-byte cap splits the 268 parameter bytes into several buckets
        // once they are rebuilt.
        let res = check_ddp(ReducerOptions { bucket_cap_bytes: Some(100), ..Default::default() });
        let s = &res[0].stats[2];
        assert!(s.num_buckets >= 2, "{s:?}");
    }

    #[test]
    fn reducer_with_gradient_as_bucket_view() {
        let res =
            check_ddp(ReducerOptions { gradient_as_bucket_view: true, broadcast_buffers: false, ..Default::default() });
        // Default caps: 268 bytes fit in the 1 MiB first bucket.
        assert_eq!(res[0].stats[2].num_buckets, 1);
    }

    #[test]
    fn stats_follow_the_sampling_rate() {
        // Timed: iterations 1..=10, then every 4th. The Logger keeps the
        // last timed iteration's numbers, which must not be reported as
        // iteration 11's.
        let res = run_ranks(2, |rank, store| {
            let pg = ProcessGroup::new(&store, Backend::Gloo, rank, 2, None, TIMEOUT).unwrap();
            let vs = tch::nn::VarStore::new(Device::Cpu);
            let model = Mlp::new(&vs, 0.0);
            let opts = ReducerOptions { stats_sample_rate: Some(4), ..Default::default() };
            let mut reducer = Reducer::new(&pg, &model.params, &[], &opts).unwrap();
            (1..=12)
                .map(|it| {
                    reducer.prepare_forward().unwrap();
                    let (x, y) = batch(rank, it);
                    let (out, l) = loss(&model, &x, &y);
                    reducer.prepare_backward(&[&out]).unwrap();
                    l.backward();
                    zero_grads_in_place(&model.params);
                    reducer.stats().unwrap()
                })
                .collect::<Vec<_>>()
        });
        for stats in res {
            for (i, s) in stats.iter().enumerate() {
                let it = i as u64 + 1;
                assert_eq!((s.iteration, s.sample_rate), (it, 4));
                let timed = it <= 10 || it.is_multiple_of(4);
                assert_eq!(s.timed, timed, "{s:?}");
                assert_eq!(s.backward_compute_ms.is_some(), timed, "{s:?}");
                assert_eq!(s.backward_comm_ms.is_some(), timed, "{s:?}");
                assert!(s.avg_backward_comm_ms.is_some(), "{s:?}");
            }
        }
    }

    #[test]
    fn device_ready_times_are_for_cuda_parameters_only() {
        let store = Store::new("127.0.0.1", free_port(), 0, 1, true, TIMEOUT).unwrap();
        let pg = ProcessGroup::new(&store, Backend::Gloo, 0, 1, None, TIMEOUT).unwrap();
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let p = vs.root().var_copy("w", &Tensor::zeros([4], (Kind::Float, Device::Cpu)));
        let mut reducer = Reducer::new(&pg, &[p], &[], &ReducerOptions::default()).unwrap();
        let e = reducer.time_ready_on_device().unwrap_err().to_string();
        assert!(e.contains("need CUDA parameters"), "{e}");
        assert!(reducer.device_ready(1).unwrap_err().to_string().contains("not asked for"));
    }

    #[test]
    fn reducer_rejects_mismatched_parameters() {
        let res = run_ranks(2, |rank, store| {
            let pg = ProcessGroup::new(&store, Backend::Gloo, rank, 2, None, TIMEOUT).unwrap();
            let vs = tch::nn::VarStore::new(Device::Cpu);
            let n = if rank == 0 { 4 } else { 5 };
            let p = vs.root().var_copy("w", &Tensor::zeros([n], (Kind::Float, Device::Cpu)));
            Reducer::new(&pg, &[p], &[], &ReducerOptions::default()).err().map(|e| format!("{e:#}"))
        });
        // Rank 1 checks its shapes against rank 0's (verify_params_across_processes);
        // rank 0 then fails too, in the parameter broadcast, as rank 1 leaves.
        let msg1 = res[1].as_deref().expect("rank 1 must reject the mismatch");
        assert!(msg1.contains("DDP reducer") && msg1.contains("appears not to match"), "{msg1}");
        assert!(!msg1.contains("frame #0"), "C++ backtrace in the message: {msg1}");
        assert!(res[0].is_some(), "rank 0 must not hang or succeed alone");
    }

    #[test]
    fn nccl_group_without_gpu_is_an_error() {
        let store = Store::new("127.0.0.1", free_port(), 0, 1, true, TIMEOUT).unwrap();
        let res = ProcessGroup::new(&store, Backend::Nccl, 0, 1, Some(0), TIMEOUT);
        if tch::Cuda::device_count() == 0 || !cfg!(gpubench_cuda) {
            let msg = format!("{:#}", res.err().expect("NCCL without a GPU must fail"));
            assert!(msg.contains("NCCL"), "{msg}");
        } else {
            // On a GPU machine (not run on the GPU-less development machine):
            // a one-rank NCCL group and a Reducer over CUDA parameters.
            let pg = res.unwrap();
            let cuda = Device::Cuda(0);
            let mut t = Tensor::ones([4], (Kind::Float, cuda));
            pg.allreduce_sum(&mut t).unwrap();
            assert_eq!(values(&t), vec![1.0; 4]);
            let vs = tch::nn::VarStore::new(cuda);
            let w = vs.root().var_copy("w", &pattern(&[3, 4], 0.0).to_device(cuda));
            let mut reducer = Reducer::new(&pg, std::slice::from_ref(&w), &[], &ReducerOptions::default()).unwrap();
            let x = pattern(&[5, 4], 1.0).to_device(cuda);
            for it in 1..=2u64 {
                reducer.prepare_forward().unwrap();
                let out = x.matmul(&w.tr());
                reducer.prepare_backward(&[&out]).unwrap();
                out.sum(Kind::Float).backward();
                let s = reducer.stats().unwrap();
                assert_eq!((s.iteration, s.timed), (it, true), "{s:?}");
                // d(sum(x w^T))/dw = column sums of x, repeated per output row.
                let want = x.sum_dim_intlist(0, false, Kind::Float).repeat([3, 1]);
                // On CUDA one side is a GEMM, the other a reduction: their
                // accumulation orders may differ in the last bit (G13).
                let diff = values(&w.grad()).iter().zip(values(&want)).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(diff <= 1e-4, "iteration {it}: |grad - want| = {diff}");
                zero_grads_in_place(std::slice::from_ref(&w));
            }
        }
        // A failed group creation leaves the store usable.
        store.set("k", b"v").unwrap();
        assert_eq!(store.get("k").unwrap(), b"v");
    }

    #[test]
    fn backend_names_parse() {
        assert_eq!("NCCL".parse::<Backend>().unwrap(), Backend::Nccl);
        assert_eq!(Backend::Gloo.to_string(), "gloo");
        assert!("mpi".parse::<Backend>().is_err());
    }
}
