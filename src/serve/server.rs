//! gpubench's inference server, in one process: a load generator on the
//! calling thread, one shared queue, and workers that form batches
//! dynamically and serve them.
//!
//! - `replicas`: one worker thread per device, each with its own model
//!   replica, all taking from the one queue (the seed's thread server, with
//!   no GIL in the way).
//! - `dp`: one worker whose batch DataParallel's forward splits over the
//!   devices (`strategy::dp`: replicate, scatter, parallel forward, gather).
//! - a `processes` worker process (`serve::processes`) runs this server with
//!   its one device and its share of the arrivals.
//!
//! A worker takes the oldest request, then more until the batch holds
//! `--max-batch` or `--max-wait` has passed since it took the first. A
//! request older than `--drop-older-than` when taken is dropped, as a camera
//! server drops a stale frame. When the load's window ends the generator
//! stops; workers serve what is queued for as long again as the window,
//! then drop the rest. Every request taken is recorded once, served or dropped
//! (`serve::records`).
//!
//! Each batch: its frames are copied into a staging buffer (pinned on CUDA),
//! preprocessed (resize to `--image-size`, ImageNet normalisation) on the
//! device or on the CPU, the model runs in eval mode with autograd off (under
//! autocast for fp16/bf16), and the predicted classes are copied back; the
//! device is synchronised before each clock read, so every part is finished
//! work. Warm-up batches (at the largest batch and at batch 1) run on every
//! worker before the load starts, and are not recorded.
use anyhow::{anyhow, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tch::{Device, Kind, Tensor};

use super::forward::{Forward, Replica, Sleeper};
use super::records::{Record, Served};
use super::schedule::Arrival;
use crate::config::{InferConfig, Preprocess, Scenario, ServeStrategy};
use crate::metrics::collect::Window;
use crate::metrics::interference::{host_window, HostSnapshot};
use crate::model::build_model;
use crate::strategy::dp::DataParallel;

/// A request the generator issued later than this after its scheduled time
/// counts as late; many late requests mean the generator, not the server,
/// limited the load.
pub(crate) const LATE_AFTER: Duration = Duration::from_millis(1);

/// How the load's start is agreed.
pub(crate) enum StartSignal {
    /// As soon as every worker has warmed up.
    Now,
    /// A `processes` worker: say "ready" (the file), then start at the time
    /// the parent writes to `go`.
    Files { ready: std::path::PathBuf, go: std::path::PathBuf },
}

/// What one server process measured.
pub(crate) struct ServeOutcome {
    pub records: Vec<Record>,
    /// Requests the generator issued more than `LATE_AFTER` late.
    pub late: u64,
    /// The error that stopped the run, if one did.
    pub error: Option<anyhow::Error>,
    /// The load's window [start, start + duration], with this process's CPU
    /// seconds inside it (the server's own; None where it is not in this process).
    pub window: Option<Window>,
    /// What disturbed the host during the load (`metrics::interference`).
    pub interference: Vec<String>,
}

/// Camera frames: uint8 H×W×3 images on the CPU; request i shows frame i mod n.
pub(crate) struct Frames(pub Vec<Tensor>);

impl Frames {
    /// `--data PATH`'s images, else eight random frames from the seed.
    pub(crate) fn load(cfg: &InferConfig) -> Result<Frames> {
        if cfg.data == "synthetic" {
            return Ok(Frames::synthetic(cfg));
        }
        Frames::from_folder(std::path::Path::new(&cfg.data), cfg)
    }

    pub(crate) fn synthetic(cfg: &InferConfig) -> Frames {
        tch::manual_seed(cfg.workload.seed as i64 ^ 0xf4a3);
        Frames(
            (0..8).map(|_| Tensor::randint(256, [cfg.frame_h, cfg.frame_w, 3], (Kind::Uint8, Device::Cpu))).collect(),
        )
    }

    /// Up to 16 JPEG or PNG files under `dir` (sorted by path), decoded and
    /// resized to the frame size, as a camera would deliver them.
    pub(crate) fn from_folder(dir: &std::path::Path, cfg: &InferConfig) -> Result<Frames> {
        let mut files = vec![];
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).map_err(|e| anyhow!("cannot read {}: {e}", d.display()))?.flatten() {
                let p = e.path();
                let ext = p.extension().and_then(|x| x.to_str()).map(str::to_ascii_lowercase);
                if p.is_dir() {
                    stack.push(p);
                } else if matches!(ext.as_deref(), Some("jpg" | "jpeg" | "png")) {
                    files.push(p);
                }
            }
        }
        files.sort();
        let mut frames = vec![];
        let mut buf = vec![];
        for f in &files {
            let Ok(bytes) = std::fs::read(f) else { continue };
            let Ok(d) = crate::data::decode::decode_rgb(&bytes, &mut buf) else { continue };
            let img = Tensor::from_slice(&buf[..d.width * d.height * 3])
                .view([1, d.height as i64, d.width as i64, 3])
                .permute([0, 3, 1, 2])
                .to_kind(Kind::Float)
                .upsample_bilinear2d([cfg.frame_h, cfg.frame_w], false, None, None)
                .round()
                .clamp(0.0, 255.0)
                .to_kind(Kind::Uint8)
                .permute([0, 2, 3, 1])
                .squeeze_dim(0)
                .contiguous();
            frames.push(img);
            if frames.len() == 16 {
                break;
            }
        }
        if frames.is_empty() {
            return Err(crate::error::usage(format!(
                "--data {}: no readable JPEG or PNG file in it; give a folder of images, or leave --data out for \
                 synthetic frames",
                dir.display()
            )));
        }
        Ok(Frames(frames))
    }
}

struct Pending {
    id: u64,
    sched: f64,
}

struct Shared {
    queue: Mutex<VecDeque<Pending>>,
    cv: Condvar,
    /// The generator has issued its last request.
    issued_all: AtomicBool,
    /// A worker failed: everyone stops.
    stop: AtomicBool,
    next_id: AtomicU64,
    t0: OnceLock<Instant>,
}

enum Take {
    Got(Pending),
    /// Nothing came before the deadline.
    Timeout,
    /// Nothing more will come.
    Finished,
}

impl Shared {
    fn take(&self, deadline: Option<Instant>) -> Take {
        let mut q = self.queue.lock().expect("queue lock");
        loop {
            if let Some(p) = q.pop_front() {
                return Take::Got(p);
            }
            if self.stop.load(Ordering::Relaxed) || self.issued_all.load(Ordering::Acquire) {
                return Take::Finished;
            }
            let now = Instant::now();
            let wait = match deadline {
                Some(d) if now >= d => return Take::Timeout,
                Some(d) => (d - now).min(Duration::from_millis(50)),
                None => Duration::from_millis(50),
            };
            q = self.cv.wait_timeout(q, wait).expect("queue lock").0;
        }
    }
}

/// The batch sizes warmed once each before the load, besides --warmup's
/// rounds of the largest and of one: every size up to `max_batch` when cuDNN
/// autotunes (`cudnn`: --cudnn-benchmark on a GPU; each new shape is tuned
/// at its first use), none otherwise.
pub(crate) fn warmup_sizes(cudnn: bool, max_batch: i64) -> Vec<i64> {
    if cudnn {
        (1..=max_batch).rev().collect()
    } else {
        vec![]
    }
}

/// The test hook `crate::internal::Hook::ServiceMs`: a model that takes
/// exactly that long per batch. Rows say so in their note.
pub(crate) fn test_service_ms() -> Option<f64> {
    crate::internal::Hook::ServiceMs.get()?.parse().ok().filter(|&ms: &f64| ms >= 0.0)
}

/// One worker: its model, its staging buffer, its records.
struct Worker<'a> {
    index: u32,
    cfg: &'a InferConfig,
    /// Its own handles on the frames (tensors may move between threads, not be shared).
    frames: Frames,
    /// The devices to synchronise before a clock read (all of them for dp).
    sync: crate::device::Devices,
    model: Box<dyn Forward>,
    /// The input buffers: one set, or two under overlap (the next batch is
    /// staged in one while the model reads the other).
    buffers: Vec<Buffers>,
    mean: Tensor,
    std: Tensor,
    records: Vec<Record>,
    /// Input overlapped with compute (`overlap`): the copy stream (None on
    /// the CPU, where only tests ask for it) and the pipeline while it runs.
    overlap: Option<Overlap>,
    /// Tests: each served request's logits.
    predictions: Option<Vec<(u64, Vec<f32>)>>,
}

/// A worker's input buffers, made once: a batch costs copies into them and
/// no allocation, so the cost per frame does not grow with the batch. (A
/// fresh float batch at the frames' full size, B x 11 MB at 1280x720, took
/// new zeroed pages from the kernel at every batch of 3 or more and made
/// batching slower than serving one frame at a time.)
struct Buffers {
    /// The batch as the model takes it, [max_batch, 3, s, s] float on the
    /// preprocessing device (channels-last when asked).
    inputs: Tensor,
    /// When preprocessing is on the CPU and the model on a GPU: `inputs` is
    /// pinned, and this is its copy on the GPU.
    on_device: Option<Tensor>,
    /// Preprocessing on a GPU: the frames, pinned uint8 NHWC on the host and
    /// their copy on the GPU, and one frame in float at full size (CUDA's
    /// bilinear resize takes no uint8) that each frame passes through.
    gpu: Option<(Tensor, Tensor, Tensor)>,
    /// Preprocessing on the CPU: one frame resized, still uint8 (the CPU
    /// resizes uint8 directly, 5x faster than in float).
    small: Tensor,
}

impl Buffers {
    fn new(cfg: &InferConfig, device: Device) -> Result<Buffers> {
        let (b, s, h, w) = (cfg.max_batch, cfg.workload.image_size, cfg.frame_h, cfg.frame_w);
        let on_gpu = device.is_cuda();
        let prep = if cfg.preprocess == Preprocess::Device { device } else { Device::Cpu };
        let batch = |d: Device| -> Result<Tensor> {
            let t = Tensor::f_zeros([b, 3, s, s], (Kind::Float, d))?;
            if cfg.workload.channels_last {
                crate::ffi::to_channels_last(&t)?;
            }
            Ok(t)
        };
        let mut inputs = batch(prep)?;
        let on_device = match (on_gpu, prep) {
            (true, Device::Cpu) => {
                inputs = inputs.f_pin_memory(device)?;
                Some(batch(device)?)
            }
            _ => None,
        };
        let gpu = match prep.is_cuda() {
            true => Some((
                Tensor::f_zeros([b, h, w, 3], (Kind::Uint8, Device::Cpu))?.f_pin_memory(device)?,
                Tensor::f_zeros([b, h, w, 3], (Kind::Uint8, device))?,
                Tensor::f_zeros([1, 3, h, w], (Kind::Float, device))?,
            )),
            false => None,
        };
        Ok(Buffers { inputs, on_device, gpu, small: Tensor::f_zeros([1, 3, s, s], (Kind::Uint8, Device::Cpu))? })
    }
}

impl<'a> Worker<'a> {
    fn new(index: u32, cfg: &'a InferConfig, frames: Frames) -> Result<Self> {
        let dp = cfg.strategy == ServeStrategy::Dp;
        let device = cfg.devices.device(if dp { 0 } else { index as usize });
        if let Device::Cuda(o) = device {
            crate::ffi::cuda_set_device(o)?;
        }
        let t = cfg.threads_per_worker();
        tch::set_num_threads(if dp { t * cfg.devices.len() } else { t } as i32);
        let sleeper = test_service_ms();
        // What overlap needs: a GPU to compute while the host stages, and one
        // device per worker (dp's forward copies between devices itself).
        let overlap = cfg.overlap && device.is_cuda() && !dp && sleeper.is_none();
        let buffers =
            (0..if overlap { 2 } else { 1 }).map(|_| Buffers::new(cfg, device)).collect::<Result<Vec<_>>>()?;
        let mut model: Box<dyn Forward> = if let Some(ms) = sleeper {
            Box::new(Sleeper {
                per_batch: Duration::from_secs_f64(ms / 1e3),
                classes: cfg.workload.num_classes,
                device,
            })
        } else if dp {
            let global = cfg.max_batch * cfg.devices.len() as i64;
            Box::new(DataParallel::replicas(&cfg.workload, &cfg.devices, cfg.threads, global)?)
        } else {
            let (vs, model) = build_model(&cfg.workload, device);
            Box::new(Replica { _vs: vs, model, device, precision: cfg.workload.precision })
        };
        if let (true, Device::Cuda(o)) = (cfg.cuda_graphs, device) {
            // The graphs read the buffer the model is fed from.
            let input = buffers[0].on_device.as_ref().unwrap_or(&buffers[0].inputs).shallow_clone();
            model = Box::new(super::graphs::Graphed::new(model, o, input, overlap)?);
        }
        let sync = if dp {
            cfg.devices.clone()
        } else {
            crate::device::Devices { kind: cfg.devices.kind, ordinals: vec![cfg.devices.ordinals[index as usize]] }
        };
        let stats = |v: [f32; 3]| Tensor::from_slice(&v.map(|x| x * 255.0)).view([1, 3, 1, 1]);
        let on = if cfg.preprocess == Preprocess::Device { device } else { Device::Cpu };
        Ok(Worker {
            index,
            cfg,
            frames,
            sync,
            model,
            buffers,
            mean: stats([0.485, 0.456, 0.406]).f_to_device(on)?,
            std: stats([0.229, 0.224, 0.225]).f_to_device(on)?,
            records: vec![],
            overlap: match (overlap, device) {
                (true, Device::Cuda(o)) => Some(Overlap::new(Some(o))?),
                _ => None,
            },
            predictions: crate::internal::Hook::Predictions.is_set().then(Vec::new),
        })
    }

    fn synchronize(&self) {
        self.sync.synchronize();
    }

    /// The batch of `ids` on the device, resized to the model's input
    /// (unless the frames already have its size) and normalised, frame by
    /// frame into the worker's buffers: (x/255 - mean)/std computed as
    /// (x - 255 mean)/(255 std), in place, one pass fewer.
    fn input(&self, ids: &[u64]) -> Result<Tensor> {
        self.input_in(0, ids)
    }

    /// `input` into the buffers of slot `k`.
    fn input_in(&self, k: usize, ids: &[u64]) -> Result<Tensor> {
        let (s, n) = (self.cfg.workload.image_size, ids.len() as i64);
        let b = &self.buffers[k];
        let frames = &self.frames.0;
        let frame = |id: u64| &frames[(id % frames.len() as u64) as usize];
        let resize = self.cfg.frame_h != s || self.cfg.frame_w != s;
        // Each slot of the batch is written through a view, so a
        // channels-last batch stays channels-last.
        let slot = |i: usize| b.inputs.f_narrow(0, i as i64, 1);
        match &b.gpu {
            Some((pinned, raw, full)) => {
                for (i, &id) in ids.iter().enumerate() {
                    pinned.f_get(i as i64)?.f_copy_(frame(id))?;
                }
                let mut raw = raw.f_narrow(0, 0, n)?;
                raw.f_copy_(&pinned.f_narrow(0, 0, n)?)?;
                let mut full = full.shallow_clone();
                for i in 0..ids.len() {
                    let nchw = raw.f_narrow(0, i as i64, 1)?.f_permute([0, 3, 1, 2])?;
                    if resize {
                        full.f_copy_(&nchw)?;
                        let _ = full.f_upsample_bilinear2d_out(&slot(i)?, [s, s], false, None, None)?;
                    } else {
                        slot(i)?.f_copy_(&nchw)?;
                    }
                }
            }
            None => {
                for (i, &id) in ids.iter().enumerate() {
                    let nchw = frame(id).f_permute([2, 0, 1])?.f_unsqueeze(0)?;
                    if resize {
                        let _ = nchw.f_upsample_bilinear2d_out(&b.small, [s, s], false, None, None)?;
                        slot(i)?.f_copy_(&b.small)?;
                    } else {
                        slot(i)?.f_copy_(&nchw)?;
                    }
                }
            }
        }
        let mut x = b.inputs.f_narrow(0, 0, n)?;
        let _ = x.f_sub_(&self.mean)?.f_div_(&self.std)?;
        match &b.on_device {
            Some(d) => {
                let mut d = d.f_narrow(0, 0, n)?;
                d.f_copy_(&x)?;
                Ok(d)
            }
            None => Ok(x),
        }
    }

    /// Serves one batch; returns its timestamps (seconds after `t0`).
    fn serve(&mut self, ids: &[u64], t0: Instant) -> Result<Served> {
        let secs = |t: Instant| (t - t0).as_secs_f64();
        let closed = Instant::now();
        let x = self.input(ids)?;
        self.synchronize();
        let copied = Instant::now();
        let logits = self.model.forward(&x)?;
        self.synchronize();
        let computed = Instant::now();
        let classes = logits.f_argmax(1, false)?.f_to_device(Device::Cpu)?;
        let done = Instant::now();
        check_predictions(&classes, &logits, ids, &mut self.predictions)?;
        Ok(Served {
            closed: secs(closed),
            copied: secs(copied),
            computed: secs(computed),
            done: secs(done),
            batch: ids.len() as u32,
        })
    }

    fn warm_up(&mut self) -> Result<()> {
        let big: Vec<u64> = (0..self.cfg.max_batch as u64).collect();
        let t = Instant::now();
        // cuDNN autotunes each new input shape at its first use; dynamic
        // batching meets every size up to --max-batch, so under
        // --cudnn-benchmark each is tuned here, not inside the load's p99 (G15).
        let cudnn = self.cfg.workload.cudnn_benchmark && self.cfg.devices.kind == crate::device::DeviceKind::Cuda;
        for b in warmup_sizes(cudnn, self.cfg.max_batch) {
            self.serve(&big[..b as usize], t)?;
        }
        for _ in 0..self.cfg.warmup_batches {
            self.serve(&big, t)?;
            self.serve(&[0], t)?;
        }
        if self.cfg.cuda_graphs {
            self.model.capture()?;
            // A replay of the largest and the smallest bucket before the load.
            self.serve(&big, t)?;
            self.serve(&[0], t)?;
        }
        Ok(())
    }

    fn record(&mut self, batch: &[Pending], taken: &[f64], t0: Instant) -> Result<()> {
        if self.overlap.as_ref().is_some_and(|o| o.pipe.is_some()) {
            return self.submit(batch, taken);
        }
        let ids: Vec<u64> = batch.iter().map(|p| p.id).collect();
        let result = self.serve(&ids, t0);
        let served = result.as_ref().ok().copied();
        for (p, &tk) in batch.iter().zip(taken) {
            self.records.push(Record { id: p.id, worker: self.index, sched: p.sched, taken: tk, served });
        }
        result.map(|_| ())
    }

    /// Serves the load of `cfg.scenario`: serially, or with the next batch's
    /// input staged while the current one computes (`overlap`).
    fn serve_load(&mut self, sh: &Shared, t0: Instant) -> Result<()> {
        let run = |w: &mut Self| match w.cfg.scenario {
            Scenario::Offline | Scenario::SingleStream => w.serve_backlog(sh, t0),
            _ => w.serve_queue(sh, t0),
        };
        match self.overlap.is_some() {
            true => self.pipelined(t0, run),
            false => run(self),
        }
    }

    /// Runs `body` with the pipeline to a completer thread up: every batch
    /// `record` gets is submitted to it; its records join this worker's.
    fn pipelined(&mut self, t0: Instant, body: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let (to_done, pending) = std::sync::mpsc::sync_channel::<InFlight>(SLOTS);
        let (free_tx, free) = std::sync::mpsc::channel::<usize>();
        for k in 0..SLOTS {
            let _ = free_tx.send(k);
        }
        let keep = self.predictions.is_some();
        let device = self.overlap.as_ref().and_then(Overlap::device);
        let index = self.index;
        std::thread::scope(|s| {
            let completer = s.spawn(move || complete(pending, free_tx, t0, index, keep, device));
            if let Some(o) = self.overlap.as_mut() {
                o.pipe = Some(Pipe { to_done, free });
            }
            let served = body(self);
            // Dropping the sender ends the completer once it has drained.
            if let Some(o) = self.overlap.as_mut() {
                o.pipe = None;
            }
            let done = completer.join().unwrap_or_else(|_| Completed {
                error: Some(anyhow!("the serving completer thread panicked")),
                ..Default::default()
            });
            self.records.extend(done.records);
            if let Some(p) = self.predictions.as_mut() {
                p.extend(done.predictions);
            }
            match (served, done.error) {
                (Err(e), _) | (Ok(()), Some(e)) => Err(e),
                (Ok(()), None) => Ok(()),
            }
        })
    }

    /// Under overlap: stages `batch` in a free slot on the copy stream,
    /// queues its forward after the staging (an event orders them), and
    /// hands it to the completer, which waits for it, reads the predictions
    /// and records it. The host is free to take and stage the next batch
    /// meanwhile; at most `SLOTS` batches are in flight.
    fn submit(&mut self, batch: &[Pending], taken: &[f64]) -> Result<()> {
        let ids: Vec<u64> = batch.iter().map(|p| p.id).collect();
        let launched = (|| -> Result<InFlight> {
            let o = self.overlap.as_ref().expect("submit runs under overlap");
            let pipe = o.pipe.as_ref().expect("the pipeline is running");
            // A free slot: its previous batch is done (the completer says so).
            let k = pipe.free.recv().map_err(|_| anyhow!("the serving completer stopped"))?;
            let closed = Instant::now();
            let (x, input_ready) = match &o.stream {
                Some(stream) => {
                    let x = stream.run(|| self.input_in(k, &ids))?;
                    let ready = stream.record()?;
                    ready.block_current(stream.device())?;
                    (x, Some(ready))
                }
                None => (self.input_in(k, &ids)?, None),
            };
            let logits = self.model.forward(&x)?;
            let classes = logits.f_argmax(1, false)?;
            // The logits are the graph's output under --cuda-graphs, which the
            // next replay overwrites: tests, which keep them, take a copy.
            let logits = match self.predictions.is_some() {
                true => {
                    let mut c = logits.f_empty_like()?;
                    c.f_copy_(&logits)?;
                    c
                }
                false => Tensor::new(),
            };
            let done = o.device().map(crate::ffi::CudaEvent::on_current).transpose()?;
            Ok(InFlight {
                ids: ids.clone(),
                sched: batch.iter().map(|p| p.sched).collect(),
                taken: taken.to_vec(),
                slot: k,
                closed,
                input_ready,
                done,
                classes,
                logits,
            })
        })();
        let sent = launched.and_then(|f| {
            let pipe = self.overlap.as_ref().and_then(|o| o.pipe.as_ref()).expect("the pipeline is running");
            pipe.to_done.send(f).map_err(|_| anyhow!("the serving completer stopped"))
        });
        if let Err(e) = sent {
            // Taken but never served: recorded as dropped, never lost.
            for (p, &tk) in batch.iter().zip(taken) {
                self.records.push(Record { id: p.id, worker: self.index, sched: p.sched, taken: tk, served: None });
            }
            return Err(e);
        }
        Ok(())
    }

    /// Serves the shared queue until the generator is done and the queue is
    /// empty (arrival scenarios).
    fn serve_queue(&mut self, sh: &Shared, t0: Instant) -> Result<()> {
        let cfg = self.cfg;
        let end = t0 + cfg.duration + grace(cfg);
        let stale = cfg.drop_older_than.map(|d| d.as_secs_f64());
        // Takes one request; Some(request, taken) when kept, None when dropped.
        let keep = |me: &mut Self, p: Pending| -> Option<(Pending, f64)> {
            let now = Instant::now();
            let taken = (now - t0).as_secs_f64();
            if now > end || stale.is_some_and(|s| taken - p.sched > s) {
                me.records.push(Record { id: p.id, worker: me.index, sched: p.sched, taken, served: None });
                return None;
            }
            Some((p, taken))
        };
        loop {
            let (first, taken) = match sh.take(None) {
                Take::Got(p) => match keep(self, p) {
                    Some(k) => k,
                    None => continue,
                },
                Take::Timeout => continue,
                Take::Finished => return Ok(()),
            };
            let deadline = Instant::now() + cfg.max_wait;
            let (mut batch, mut times) = (vec![first], vec![taken]);
            while (batch.len() as i64) < cfg.max_batch {
                match sh.take(Some(deadline)) {
                    Take::Got(p) => {
                        if let Some((p, t)) = keep(self, p) {
                            batch.push(p);
                            times.push(t);
                        }
                    }
                    Take::Timeout | Take::Finished => break,
                }
            }
            self.record(&batch, &times, t0)?;
        }
    }

    /// Offline (an endless backlog, batches as large as allowed) or
    /// single-stream (one request at a time), until the window ends.
    fn serve_backlog(&mut self, sh: &Shared, t0: Instant) -> Result<()> {
        let end = t0 + self.cfg.duration;
        let size = if self.cfg.scenario == Scenario::SingleStream { 1 } else { self.cfg.max_batch as u64 };
        while Instant::now() < end && !sh.stop.load(Ordering::Relaxed) {
            let first = sh.next_id.fetch_add(size, Ordering::Relaxed);
            let now = (Instant::now() - t0).as_secs_f64();
            // Offline: every frame was ready at the start; single-stream: issued now.
            let sched = if size == 1 { now } else { 0.0 };
            let batch: Vec<Pending> = (first..first + size).map(|id| Pending { id, sched }).collect();
            self.record(&batch, &vec![now; batch.len()], t0)?;
        }
        Ok(())
    }
}

/// Batches in flight under overlap: one computing, one staged beside it.
const SLOTS: usize = 2;

/// Input overlapped with compute: a stream of its own for the staging
/// copies and kernels, and the pipeline to the completer while a load runs.
struct Overlap {
    stream: Option<crate::ffi::CudaStream>,
    pipe: Option<Pipe>,
}

impl Overlap {
    /// On CUDA device `device`; None: on the CPU (tests), where staging
    /// and compute take turns on the one thread and nothing overlaps.
    fn new(device: Option<usize>) -> Result<Overlap> {
        let stream = device.map(crate::ffi::CudaStream::new).transpose()?;
        Ok(Overlap { stream, pipe: None })
    }

    /// The CUDA device it stages for; None on the CPU.
    fn device(&self) -> Option<usize> {
        self.stream.as_ref().map(crate::ffi::CudaStream::device)
    }
}

struct Pipe {
    to_done: std::sync::mpsc::SyncSender<InFlight>,
    /// Slots whose batch is done.
    free: std::sync::mpsc::Receiver<usize>,
}

/// A batch launched under overlap, on its way to the completer.
struct InFlight {
    ids: Vec<u64>,
    sched: Vec<f64>,
    taken: Vec<f64>,
    slot: usize,
    closed: Instant,
    /// Recorded on the copy stream after the staging; the forward waited for it.
    input_ready: Option<crate::ffi::CudaEvent>,
    /// Recorded after the forward and the argmax.
    done: Option<crate::ffi::CudaEvent>,
    /// On the device until the completer reads them.
    classes: Tensor,
    /// Kept for tests only (undefined otherwise).
    logits: Tensor,
}

#[derive(Default)]
struct Completed {
    records: Vec<Record>,
    predictions: Vec<(u64, Vec<f32>)>,
    error: Option<anyhow::Error>,
}

/// The completer: for each batch in order, waits for its input (`copied`:
/// when the host saw it ready, no earlier than the previous batch's end)
/// and its forward (`computed`), reads its predictions (`done`), records
/// every request and frees its slot. After an error the batches still in
/// flight are recorded as dropped.
fn complete(
    pending: std::sync::mpsc::Receiver<InFlight>,
    free: std::sync::mpsc::Sender<usize>,
    t0: Instant,
    worker: u32,
    keep: bool,
    device: Option<usize>,
) -> Completed {
    if let Some(d) = device {
        let _ = crate::ffi::cuda_set_device(d);
    }
    let secs = |t: Instant| (t - t0).as_secs_f64();
    let mut out = Completed::default();
    let mut kept = keep.then(Vec::new);
    // Dropped at the first error: the worker waiting for a slot then stops.
    let mut free = Some(free);
    for f in pending {
        let served = match out.error {
            Some(_) => None,
            None => {
                let r = (|| -> Result<Served> {
                    if let Some(e) = &f.input_ready {
                        e.synchronize()?;
                    }
                    let copied = Instant::now();
                    if let Some(e) = &f.done {
                        e.synchronize()?;
                    }
                    let computed = Instant::now();
                    let classes = f.classes.f_to_device(Device::Cpu)?;
                    let done = Instant::now();
                    check_predictions(&classes, &f.logits, &f.ids, &mut kept)?;
                    Ok(Served {
                        closed: secs(f.closed),
                        copied: secs(copied),
                        computed: secs(computed),
                        done: secs(done),
                        batch: f.ids.len() as u32,
                    })
                })();
                match r {
                    Ok(s) => Some(s),
                    Err(e) => {
                        out.error = Some(e);
                        free = None;
                        None
                    }
                }
            }
        };
        for i in 0..f.ids.len() {
            out.records.push(Record { id: f.ids[i], worker, sched: f.sched[i], taken: f.taken[i], served });
        }
        if let Some(free) = &free {
            let _ = free.send(f.slot);
        }
    }
    out.predictions = kept.unwrap_or_default();
    out
}

/// The test hook `Hook::Predictions`: worker `k`'s served requests, one
/// line each, its id then its logits.
fn write_predictions(dir: &std::path::Path, k: u32, p: &[(u64, Vec<f32>)]) {
    use std::fmt::Write;
    let mut text = String::new();
    for (id, l) in p {
        let _ = write!(text, "{id}");
        for v in l {
            let _ = write!(text, " {v}");
        }
        text.push('\n');
    }
    if let Err(e) = std::fs::write(dir.join(format!("worker-{k}.txt")), text) {
        eprintln!("gpubench: test hook {}: {e}", crate::internal::Hook::Predictions.var());
    }
}

/// A batch gave one prediction per request (and, for tests, keeps each
/// request's logits).
fn check_predictions(
    classes: &Tensor,
    logits: &Tensor,
    ids: &[u64],
    keep: &mut Option<Vec<(u64, Vec<f32>)>>,
) -> Result<()> {
    if classes.size() != [ids.len() as i64] {
        return Err(anyhow!("a batch of {} gave {:?} predictions", ids.len(), classes.size()));
    }
    if let Some(k) = keep {
        let l = logits.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?;
        for (i, &id) in ids.iter().enumerate() {
            k.push((id, Vec::<f32>::try_from(l.f_get(i as i64)?)?));
        }
    }
    Ok(())
}

/// How long workers keep serving the queue after the window: as long
/// again as the window (at least 1 s), so that an overloaded server shows
/// its queue as latency, not as drops; what is still queued then is dropped.
pub(crate) fn grace(cfg: &InferConfig) -> Duration {
    cfg.duration.max(Duration::from_secs(1))
}

/// Runs the load `arrivals` (this process's share; empty for offline and
/// single-stream) against this process's workers.
pub(crate) fn serve(
    cfg: &InferConfig,
    frames: &Frames,
    arrivals: impl Iterator<Item = Arrival>,
    start: &StartSignal,
) -> ServeOutcome {
    let n_workers = match (cfg.strategy, cfg.scenario) {
        (ServeStrategy::Dp, _) | (_, Scenario::SingleStream) => 1,
        _ => cfg.devices.len(),
    };
    let sh = Shared {
        queue: Mutex::new(VecDeque::new()),
        cv: Condvar::new(),
        issued_all: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        next_id: AtomicU64::new(0),
        t0: OnceLock::new(),
    };
    let (warm, go) = (Barrier::new(n_workers + 1), Barrier::new(n_workers + 1));
    let errors: Mutex<Vec<anyhow::Error>> = Mutex::new(vec![]);
    let mut records = vec![];
    let mut late = 0;
    let mut window = None;
    let mut host = None;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n_workers as u32)
            .map(|i| {
                let (sh, warm, go, errors) = (&sh, &warm, &go, &errors);
                let mine = Frames(frames.0.iter().map(Tensor::shallow_clone).collect());
                s.spawn(move || -> Vec<Record> {
                    let built = crate::error::guarded(|| {
                        let mut w = Worker::new(i, cfg, mine)?;
                        w.warm_up()?;
                        if let Some(p) = w.predictions.as_mut() {
                            p.clear();
                        }
                        Ok(w)
                    });
                    warm.wait();
                    go.wait();
                    let mut w = match built {
                        Ok(w) => w,
                        Err(e) => {
                            errors.lock().expect("lock").push(e.context(format!("worker {i}")));
                            sh.stop.store(true, Ordering::Relaxed);
                            return vec![];
                        }
                    };
                    let Some(&t0) = sh.t0.get() else { return vec![] };
                    let res = crate::error::guarded(|| w.serve_load(sh, t0));
                    if let Err(e) = res {
                        errors.lock().expect("lock").push(e);
                        sh.stop.store(true, Ordering::Relaxed);
                        sh.cv.notify_all();
                    }
                    if let (Some(p), Some(dir)) = (&w.predictions, crate::internal::Hook::Predictions.get()) {
                        write_predictions(std::path::Path::new(&dir), i, p);
                    }
                    w.records
                })
            })
            .collect();
        warm.wait();
        // Allocator peaks from here cover the load, not the model's build and
        // warm-up, and each probe of a --find-max search starts afresh (G15).
        crate::metrics::collect::reset_peaks(&cfg.devices);
        let failed = !errors.lock().expect("lock").is_empty();
        let t0 = if failed { Err(anyhow!("a worker failed to start")) } else { agree_start(start) };
        match t0 {
            Ok(t0) => {
                let _ = sh.t0.set(t0);
            }
            Err(e) => {
                if !failed {
                    errors.lock().expect("lock").push(e);
                }
                sh.stop.store(true, Ordering::Relaxed);
            }
        }
        go.wait();
        if let Some(&t0) = sh.t0.get() {
            let h0 = HostSnapshot::take();
            let cpu0 = crate::metrics::sampler::process_cpu_seconds();
            late = generate(&sh, arrivals, t0, cfg.duration);
            let cpu_secs = cpu0.zip(crate::metrics::sampler::process_cpu_seconds()).map(|(a, b)| b - a);
            window = Some(Window { start: t0, end: t0 + cfg.duration, cpu_secs });
            host = h0.zip(HostSnapshot::take());
        }
        sh.issued_all.store(true, Ordering::Release);
        sh.cv.notify_all();
        for h in handles {
            match h.join() {
                Ok(r) => records.extend(r),
                Err(_) => errors.lock().expect("lock").push(anyhow!("a serving thread panicked")),
            }
        }
    });
    // What a stopped run left queued is dropped, never lost.
    if let Some(&t0) = sh.t0.get() {
        let taken = (Instant::now() - t0).as_secs_f64();
        for p in sh.queue.lock().expect("queue lock").drain(..) {
            records.push(Record { id: p.id, worker: 0, sched: p.sched, taken, served: None });
        }
    }
    let error = errors.into_inner().expect("lock").into_iter().next();
    let interference = host_notes(host);
    ServeOutcome { records, late, error, window, interference }
}

/// The host's load between two snapshots, in words.
pub(crate) fn host_notes(host: Option<(HostSnapshot, HostSnapshot)>) -> Vec<String> {
    host.and_then(|(a, b)| host_window(&a, &b, crate::device::cpu_cores())).map(|w| w.notes(None)).unwrap_or_default()
}

/// Issues each arrival at its time; returns how many were issued late. For
/// offline and single-stream (no arrivals) it just waits out the window.
fn generate(sh: &Shared, arrivals: impl Iterator<Item = Arrival>, t0: Instant, duration: Duration) -> u64 {
    let mut late = 0;
    let mut arrivals = arrivals.peekable();
    let at = |a: &Arrival| t0 + Duration::from_secs_f64(a.offset);
    let none = arrivals.peek().is_none();
    while let Some(first) = arrivals.peek() {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let due = at(first);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let now = Instant::now();
        // Everything due by now goes in at once, then one wake-up.
        let mut q = sh.queue.lock().expect("queue lock");
        while let Some(a) = arrivals.next_if(|a| at(a) <= now) {
            if now - at(&a) > LATE_AFTER {
                late += 1;
            }
            q.push_back(Pending { id: a.id, sched: a.offset });
        }
        drop(q);
        sh.cv.notify_all();
    }
    if none {
        let end = t0 + duration;
        while Instant::now() < end && !sh.stop.load(Ordering::Relaxed) {
            std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
        }
    }
    late
}

/// The load's start: now, or (a `processes` worker) the time its parent
/// writes once every worker is ready.
fn agree_start(start: &StartSignal) -> Result<Instant> {
    match start {
        StartSignal::Now => Ok(Instant::now()),
        StartSignal::Files { ready, go } => {
            std::fs::write(ready, b"ready\n").map_err(|e| anyhow!("cannot write {}: {e}", ready.display()))?;
            // The parent writes it once every worker is ready, or stops us.
            let waited = Instant::now();
            let text = loop {
                match std::fs::read_to_string(go) {
                    Ok(t) if t.ends_with('\n') => break t,
                    _ if waited.elapsed() > Duration::from_secs(600) => {
                        return Err(anyhow!("no start signal from the parent in 10 minutes"))
                    }
                    _ => std::thread::sleep(Duration::from_millis(1)),
                }
            };
            let at_ns: u128 = text.trim().parse().map_err(|_| anyhow!("{}: not a start time", go.display()))?;
            let now_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
            Ok(Instant::now() + Duration::from_nanos(at_ns.saturating_sub(now_ns) as u64))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every frame of a batch is the frame resized and normalised alone (in
    /// uint8 on the CPU: within one grey level of resizing in float), in the
    /// layout asked for, whatever else shares the batch.
    #[test]
    fn a_batch_is_each_frame_resized_and_normalised_alone() {
        for cl in [false, true] {
            let mut a = vec!["--cpu", "1", "--model", "tinycnn", "--image-size", "32", "--frame-size", "96x64"];
            a.extend(["--max-batch", "4", "--num-classes", "10"]);
            if cl {
                a.push("--channels-last");
            }
            let cfg = crate::cli::infer::parse_infer(&a).unwrap();
            let frames = Frames::load(&cfg).unwrap();
            let n = frames.0.len() as u64;
            let mine = Frames(frames.0.iter().map(Tensor::shallow_clone).collect());
            let w = Worker::new(0, &cfg, mine).unwrap();
            let ids = [3u64, 0, 1];
            let x = w.input(&ids).unwrap();
            assert_eq!(x.size(), [3, 3, 32, 32]);
            assert_eq!(crate::ffi::is_channels_last(&x), cl, "channels-last {cl}");
            let m = Tensor::from_slice(&[0.485f32, 0.456, 0.406]).view([1, 3, 1, 1]) * 255.0;
            let sd = Tensor::from_slice(&[0.229f32, 0.224, 0.225]).view([1, 3, 1, 1]) * 255.0;
            for (i, &id) in ids.iter().enumerate() {
                let f = frames.0[(id % n) as usize].permute([2, 0, 1]).unsqueeze(0).to_kind(Kind::Float);
                let want = (f.upsample_bilinear2d([32, 32], false, None, None) - &m) / &sd;
                let diff = (x.narrow(0, i as i64, 1) - want).abs().max().double_value(&[]);
                assert!(diff <= 1.0 / (255.0 * 0.224) + 1e-4, "frame {i}: off by {diff}");
            }
            // Alone, a frame comes out as it did in the batch.
            let one = w.input(&[0]).unwrap().copy();
            let again = w.input(&ids).unwrap();
            assert!(one.equal(&again.narrow(0, 1, 1)), "frame 0 alone and in a batch");
        }
    }

    /// The overlapped path (two slots, the completer thread) predicts what
    /// the serial path predicts for every request, and records each once.
    /// On the CPU nothing overlaps, but the slots, the ordering and the
    /// hand-over are the ones a GPU runs.
    #[test]
    fn overlapped_batches_predict_what_serial_batches_predict() {
        let mut a = vec!["--cpu", "1", "--model", "tinycnn", "--image-size", "32", "--frame-size", "48x40"];
        a.extend(["--max-batch", "4", "--num-classes", "10", "--seed", "3"]);
        let cfg = crate::cli::infer::parse_infer(&a).unwrap();
        let frames = Frames::load(&cfg).unwrap();
        let worker = |overlap: bool| {
            let mine = Frames(frames.0.iter().map(Tensor::shallow_clone).collect());
            let mut w = Worker::new(0, &cfg, mine).unwrap();
            if overlap {
                w.buffers.push(Buffers::new(&cfg, Device::Cpu).unwrap());
                w.overlap = Some(Overlap::new(None).unwrap());
            }
            w.predictions = Some(vec![]);
            w
        };
        let batches: Vec<Vec<u64>> = vec![vec![3, 0, 1], vec![5], vec![2, 4, 6, 7], vec![1, 2], vec![7, 6, 5, 4]];
        let t0 = Instant::now();
        let feed = |w: &mut Worker| -> Result<()> {
            for b in &batches {
                let p: Vec<Pending> = b.iter().map(|&id| Pending { id, sched: 0.0 }).collect();
                w.record(&p, &vec![0.0; p.len()], t0)?;
            }
            Ok(())
        };
        let sorted = |w: &Worker| {
            let mut p = w.predictions.clone().unwrap();
            p.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.partial_cmp(&b.1).unwrap()));
            p
        };
        // Each worker builds its model from the seed through libtorch's one
        // global generator: a neighbouring test's draw between the two builds
        // makes their weights differ (as in model::tests). A real difference
        // fails every attempt; a neighbour's draw almost never four times.
        let _seeded = crate::model::SEEDED.lock().unwrap_or_else(|e| e.into_inner());
        let mut attempts = 0;
        let (want, got, piped) = loop {
            let mut serial = worker(false);
            feed(&mut serial).unwrap();
            let mut piped = worker(true);
            piped.pipelined(t0, feed).unwrap();
            let (want, got) = (sorted(&serial), sorted(&piped));
            attempts += 1;
            if want == got || attempts == 4 {
                break (want, got, piped);
            }
        };
        assert_eq!(want.len(), 14);
        assert_eq!(got, want);
        // The comparison can fail: the frames' logits differ.
        assert!(want.iter().any(|p| p.1 != want[0].1), "{want:?}");
        assert_eq!(piped.records.len(), 14);
        assert!(piped.records.iter().all(|r| r.served.is_some_and(|s| s.done >= s.computed && s.computed >= s.copied)));
    }

    #[test]
    fn every_batch_size_is_tuned_before_the_load_under_cudnn_benchmark() {
        assert_eq!(warmup_sizes(true, 4), [4, 3, 2, 1]);
        assert!(warmup_sizes(false, 64).is_empty());
    }
}
