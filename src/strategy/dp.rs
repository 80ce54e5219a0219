//! DataParallel semantics, costs included. One process; the master (the first listed device) holds the model,
//! the optimizer and the whole input batch (global batch = per-device batch × devices), as
//! `torch.nn.DataParallel`'s input does. Every step:
//!
//! 1. **replicate**: the master's parameters and buffers are copied onto one replica per other device. Replicas
//!    are built once and refreshed every step, as DataParallel replicates on every forward; replica 0 is the
//!    master's own model.
//! 2. **scatter**: the batch is split along dim 0 into one equal chunk per replica, each copied to its device
//!    (non-blocking on CUDA).
//! 3. **parallel forward**: each replica runs forward on its own thread, a new one each step, as PyTorch's
//!    `parallel_apply` does. On one device the model is called directly with no replica thread, as DataParallel
//!    does (a fresh thread would also build a fresh OpenMP team on the CPU, a cost PyTorch skips). A failing
//!    replica's error names its device.
//! 4. **gather**: the outputs are copied onto the master and concatenated; the loss is computed there.
//! 5. **backward**: one backward call reaches every replica through the gather.
//! 6. **reduce and step**: the replicas' gradients are summed into the master's, on the master, and the
//!    optimizer steps on the master alone.
//!
//! These per-step copies and the master's extra work are DataParallel's real costs, which is why they are
//! measured rather than optimised away. The master's extra memory (model, gathered outputs and loss, summed
//! gradients) is what limits dp's batch while the replicas still have room; the row's `master_mem_excess_pct`
//! and `master_util_excess_pct` show it.
//!
//! - **BatchNorm**: each replica normalises its own chunk with that chunk's statistics, and the running
//!   statistics that survive are the master's (the other replicas' are overwritten by the next refresh).
//! - **Precision**: autocast is thread-local, as `torch.autocast` is, so each replica thread enters it for its
//!   own forward; under fp16 the gradients are unscaled after the gradient sum (`strategy::precision`).
//! - **On the CPU** (`--strategy dp --cpu N`) the replicas share the cores: each replica thread gets
//!   `threads ÷ N` intra-op threads (at least one), where `threads` is `--threads` or the number of cores, so N
//!   replicas do not oversubscribe the machine; backward is called on the calling thread, whose thread count is
//!   not split. The row's `note` names the master and the split (`bench::session`), and the one process gets
//!   one per-device row, role `process`.
//!
//! Tests (`tests/it/strategies.rs`) check on the CPU that dp with 1, 2 and 4 replicas matches `single` on the
//! global batch with `tinycnn`, which has no BatchNorm, so splitting a batch gives exactly the full-batch
//! gradient. What has run on GPUs is in `results/README.md`.
use anyhow::{anyhow, Result};
use tch::{nn, Device, Kind, Tensor};

use super::precision::{autocast, Amp};
use super::{build_optimizer, loss_fn, share, step_loss, MasterParts, MasterWork, Phase, PhaseClock, Strategy};
use crate::config::{RunConfig, Workload};
use crate::data::Batch;
use crate::device::{DeviceKind, Devices};
use crate::model::{build_model, Model};

struct Replica {
    vs: nn::VarStore,
    model: Model,
    /// Trainable variables in creation order, matching the master's.
    params: Vec<Tensor>,
    /// Every variable (parameters and BatchNorm buffers), in name order,
    /// matching the master's: what replicate copies.
    vars: Vec<Tensor>,
    device: Device,
}

pub struct DataParallel {
    devices: Devices,
    /// Replica 0 is the master's own model, as in PyTorch.
    replicas: Vec<Replica>,
    /// The master's optimizer; None for serving, which never steps one.
    opt: Option<super::optim::Optimizer>,
    global_batch: i64,
    /// Intra-op threads per replica thread on the CPU, so that N replicas do
    /// not oversubscribe the cores; None on CUDA, where a replica thread only
    /// launches kernels (and the step need not set it every time).
    threads_per_replica: Option<i32>,
    non_blocking: bool,
    /// CUDA replicas on distinct devices: replicate and reduce in coalesced
    /// buffers, as DataParallel does (a few copies per device per step).
    coalesced: bool,
    amp: Amp,
    /// The master's extra memory by cause: the gradient sum's buffers from
    /// the start, input and outputs from the first step's tensors (every
    /// step's are the same size, so later steps count nothing).
    parts: MasterParts,
    /// The last step's master work, when it was timed exactly.
    work: Option<MasterWork>,
}

/// Laps of the host clock around dp's master work, or nothing at all when
/// the step cannot be timed exactly (`MasterWork`): then no clock is read.
/// `sync`: synchronize the devices before each reading (CUDA under
/// `--breakdown`); on the CPU the work is done when the call returns.
struct Laps {
    last: Option<std::time::Instant>,
    sync: bool,
}

impl Laps {
    fn new(on: bool, sync: bool) -> Laps {
        Laps { last: on.then(std::time::Instant::now), sync }
    }

    /// Seconds since the previous lap; 0 when off.
    fn lap(&mut self, devices: &Devices) -> f64 {
        let Some(last) = self.last else { return 0.0 };
        if self.sync {
            devices.synchronize();
        }
        let now = std::time::Instant::now();
        self.last = Some(now);
        (now - last).as_secs_f64()
    }
}

fn bytes(t: &Tensor) -> u64 {
    t.numel() as u64 * t.kind().elt_size_in_bytes() as u64
}

/// A serving DataParallel was asked to train: a bug, said as one.
fn serving_only() -> anyhow::Error {
    anyhow!("this DataParallel was built for serving, without an optimizer; it cannot train")
}

impl DataParallel {
    /// For training: the replicas of `cfg`'s model and the master's optimizer.
    pub fn new(cfg: &RunConfig) -> Result<Self> {
        let p = &cfg.placement;
        let mut dp = DataParallel::replicas(&cfg.workload, &p.devices, cfg.host.count(), cfg.micro_global_batch())?;
        dp.opt = Some(build_optimizer(cfg, &dp.replicas[0].vs)?);
        Ok(dp)
    }

    /// The replicas alone, one per device, for `global_batch` images a
    /// forward: what serving needs (it never steps an optimizer).
    pub(crate) fn replicas(w: &Workload, devices: &Devices, threads: Option<usize>, global_batch: i64) -> Result<Self> {
        let devices = devices.clone();
        let mut replicas = Vec::with_capacity(devices.len());
        for i in 0..devices.len() {
            let device = devices.device(i);
            let (vs, model) = build_model(w, device);
            let params = vs.trainable_variables();
            let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
            named.sort_by(|a, b| a.0.cmp(&b.0));
            let vars = named.into_iter().map(|(_, t)| t).collect();
            replicas.push(Replica { vs, model, params, vars, device });
        }
        // Each replica thread's intra-op threads on the CPU (OpenMP's are per
        // calling thread): the process's share, by the one rule.
        let threads_per_replica = (devices.kind == DeviceKind::Cpu)
            .then(|| crate::device::threads_per_worker(devices.kind, threads, devices.len()) as i32);
        let non_blocking = devices.kind == DeviceKind::Cuda;
        let distinct = (1..devices.len()).all(|i| !devices.ordinals[..i].contains(&devices.ordinals[i]));
        let coalesced =
            devices.kind == DeviceKind::Cuda && devices.len() > 1 && distinct && crate::ffi::built_with_cuda();
        let reduce = reduce_bytes(&replicas[0].params, devices.len(), coalesced);
        Ok(DataParallel {
            devices,
            replicas,
            opt: None,
            global_batch,
            threads_per_replica,
            non_blocking,
            coalesced,
            amp: Amp::new(w.precision),
            parts: MasterParts { reduce, ..Default::default() },
            work: None,
        })
    }

    fn training_opt(&mut self) -> Result<&mut super::optim::Optimizer> {
        self.opt.as_mut().ok_or_else(serving_only)
    }

    /// Copies the master's parameters and buffers onto every other replica,
    /// as DataParallel's replicate() does on every forward: coalesced across
    /// CUDA devices, else one in-place copy per tensor (no temporaries).
    fn replicate(&mut self) -> Result<()> {
        let (master, rest) = self.replicas.split_first_mut().expect("at least one replica");
        if rest.is_empty() {
            return Ok(());
        }
        if self.coalesced {
            let dst: Vec<Tensor> = rest.iter().flat_map(|r| r.vars.iter().map(|t| t.shallow_clone())).collect();
            return crate::ffi::broadcast_coalesced_into(&master.vars, &dst);
        }
        tch::no_grad(|| -> Result<()> {
            for r in rest.iter() {
                for (dst, src) in r.vars.iter().zip(&master.vars) {
                    dst.shallow_clone().f_copy_(src)?;
                }
            }
            Ok(())
        })
    }

    /// Splits the batch along dim 0 into one chunk per replica, each copied
    /// to its replica's device as `kind`. Training needs one chunk for every
    /// replica; serving (`partial`) may use fewer when the batch has fewer rows.
    fn scatter(&self, images: &Tensor, kind: Kind, partial: bool) -> Result<Vec<Tensor>> {
        let n = self.replicas.len() as i64;
        let chunks = images.f_chunk(n, 0)?;
        if chunks.len() != self.replicas.len() && !partial {
            return Err(anyhow!("cannot split a batch of {} into {n} chunks", images.size()[0]));
        }
        chunks
            .iter()
            .zip(&self.replicas)
            .map(|(c, r)| Ok(c.f_to_device_(r.device, kind, self.non_blocking, false)?))
            .collect()
    }

    /// The replicas' outputs, in replica order, concatenated on the master.
    fn gather(&self, outputs: &[Tensor]) -> Result<Tensor> {
        let master = self.replicas[0].device;
        let gathered: Vec<Tensor> =
            outputs.iter().map(|o| o.f_to_device_(master, o.kind(), false, false)).collect::<Result<_, _>>()?;
        Ok(Tensor::f_cat(&gathered, 0)?)
    }

    /// Runs every replica's forward on its own thread (a new one each step, as
    /// PyTorch's parallel_apply does) and returns the outputs
    /// in replica order. A failing replica's error (e.g. out of memory) is
    /// returned, naming the device.
    fn parallel_forward(&mut self, inputs: Vec<Tensor>, train: bool) -> Result<Vec<Tensor>> {
        let threads = self.threads_per_replica;
        let precision = self.amp.precision;
        if let ([r], [x]) = (&mut self.replicas[..], &inputs[..]) {
            // One device: torch.nn.DataParallel calls the module directly, with
            // no replica thread; so does this. (A fresh thread per step would
            // also build a fresh OpenMP team on the CPU, a cost PyTorch skips.)
            let device = r.device;
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                autocast(precision, device, || forward(&mut r.model, x, train))
            }));
            return match out {
                Ok(t) => Ok(vec![t?]),
                Err(p) => Err(anyhow!("replica on {device:?}: {}", crate::error::panic_message(&*p))),
            };
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = self
                .replicas
                .iter_mut()
                .zip(inputs)
                .map(|(r, x)| {
                    let model = &mut r.model;
                    let device = r.device;
                    s.spawn(move || {
                        if let Some(t) = threads {
                            tch::set_num_threads(t);
                        }
                        if let Device::Cuda(o) = device {
                            // This thread works for one GPU: make it current.
                            let _ = crate::ffi::cuda_set_device(o);
                        }
                        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            // autocast state is per thread: each replica enters it.
                            autocast(precision, device, || forward(model, &x, train))
                        }));
                        (device, out)
                    })
                })
                .collect();
            let mut outs = Vec::with_capacity(handles.len());
            for h in handles {
                let (device, res) = h.join().map_err(|_| anyhow!("a replica thread died"))?;
                match res {
                    Ok(t) => outs.push(t?),
                    Err(p) => {
                        return Err(anyhow!("replica on {device:?}: {}", crate::error::panic_message(&*p)));
                    }
                }
            }
            Ok(outs)
        })
    }

    /// DataParallel's forward alone, for serving: replicate, scatter `images`
    /// (on the master) over as many replicas as it has rows, forward in eval
    /// mode with autograd off, gather the outputs on the master.
    pub(crate) fn infer(&mut self, images: &Tensor) -> Result<Tensor> {
        self.replicate()?;
        let inputs = self.scatter(images, images.kind(), true)?;
        let outputs = self.parallel_forward(inputs, false)?;
        self.gather(&outputs)
    }

    /// Sums every other replica's gradients into the master's, on the master:
    /// coalesced across CUDA devices (one buffer per replica, as
    /// DataParallel's ReduceAddCoalesced), else tensor by tensor.
    fn reduce_gradients(&mut self) -> Result<()> {
        if self.coalesced && self.reduce_coalesced()? {
            return Ok(());
        }
        let (master, rest) = self.replicas.split_first_mut().expect("at least one replica");
        let dev = master.device;
        tch::no_grad(|| -> Result<()> {
            for r in rest.iter() {
                for (mp, rp) in master.params.iter().zip(&r.params) {
                    let rg = rp.grad();
                    if !rg.defined() {
                        continue;
                    }
                    let mut mg = mp.grad();
                    if mg.defined() {
                        let _ = mg.f_add_(&rg.f_to_device_(dev, rg.kind(), self.non_blocking, false)?)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// The coalesced reduce; false (nothing done) when some gradient is
    /// missing or the kinds differ, for the tensor-by-tensor path.
    fn reduce_coalesced(&mut self) -> Result<bool> {
        let (master, rest) = self.replicas.split_first().expect("at least one replica");
        let grads = |r: &Replica| -> Vec<Tensor> { r.params.iter().map(|p| p.grad()).collect() };
        let mg = grads(master);
        let kind = mg.first().map(|g| g.kind());
        let usable = |g: &[Tensor]| g.iter().all(|t| t.defined() && Some(t.kind()) == kind);
        if !usable(&mg) || rest.iter().any(|r| !usable(&grads(r))) {
            return Ok(false);
        }
        let flat = |g: &[Tensor]| -> Result<Tensor> {
            let views = g.iter().map(|t| t.f_flatten(0, -1)).collect::<Result<Vec<_>, _>>()?;
            Ok(Tensor::f_cat(&views, 0)?)
        };
        tch::no_grad(|| -> Result<bool> {
            let mut acc = flat(&mg)?;
            for r in rest {
                let theirs = flat(&grads(r))?.f_to_device_(master.device, acc.kind(), false, false)?;
                let _ = acc.f_add_(&theirs)?;
            }
            let sizes: Vec<i64> = mg.iter().map(|g| g.numel() as i64).collect();
            for (g, part) in mg.iter().zip(acc.f_split_with_sizes(&sizes, 0)?) {
                g.shallow_clone().f_copy_(&part.f_view_as(g)?)?;
            }
            Ok(true)
        })
    }

    /// What a micro-batch puts on the master beyond a replica's share: the
    /// input beyond its own chunk, and the outputs (gathered logits, the
    /// loss's saved log-softmax, their gradient). Sizes, not allocator
    /// readings: the allocator cannot tell these apart from the activations.
    /// Counted on the first step only.
    fn count_master_parts(&mut self, images: &Tensor, logits: &Tensor) {
        if self.parts.outputs > 0 {
            return;
        }
        let n = self.replicas.len() as u64;
        self.parts.input = bytes(images) * (n - 1) / n;
        self.parts.outputs = 3 * bytes(logits);
    }

    fn zero_replica_grads(&mut self) -> Result<()> {
        tch::no_grad(|| -> Result<()> {
            for r in self.replicas.iter().skip(1) {
                for p in &r.params {
                    let mut g = p.grad();
                    if g.defined() {
                        let _ = g.f_zero_()?;
                    }
                }
            }
            Ok(())
        })
    }
}

/// A replica's forward: in train mode as autograd records it; in eval mode
/// with autograd off (grad mode is per thread, so each replica thread sets it).
fn forward(model: &mut Model, x: &Tensor, train: bool) -> Tensor {
    if train {
        model.forward_t(x, true)
    } else {
        tch::no_grad(|| model.forward_t(x, false))
    }
}

/// The gradient sum's buffers on the master: coalesced, the flat
/// accumulator and one replica's incoming flat copy (2× the gradients);
/// else the largest gradient, copied one at a time; none on one device.
fn reduce_bytes(params: &[Tensor], n: usize, coalesced: bool) -> u64 {
    match (n, coalesced) {
        (0 | 1, _) => 0,
        (_, true) => 2 * params.iter().map(bytes).sum::<u64>(),
        (_, false) => params.iter().map(bytes).max().unwrap_or(0),
    }
}

impl Strategy for DataParallel {
    fn input_device(&self) -> Device {
        self.replicas[0].device
    }

    fn input_batch(&self) -> i64 {
        self.global_batch
    }

    fn step_timed(&mut self, micro: &[Batch], clock: &mut dyn PhaseClock) -> Result<Tensor> {
        let k = micro.len();
        let master = self.replicas[0].device;
        // The master's gradients are zeroed once a step and take every
        // micro-batch's reduction; the replicas' are zeroed before each.
        self.training_opt()?.zero_grad()?;
        let mut losses = Vec::with_capacity(k);
        let cuda = self.devices.kind == DeviceKind::Cuda;
        let timed = self.replicas.len() >= 2 && (!cuda || clock.synced());
        let mut laps = Laps::new(timed, cuda);
        let mut work = MasterWork::default();
        for (i, batch) in micro.iter().enumerate() {
            laps.lap(&self.devices);
            self.replicate()?;
            work.replicate += laps.lap(&self.devices);
            let inputs = self.scatter(&batch.images, Kind::Float, false)?;
            work.scatter += laps.lap(&self.devices);
            let outputs = self.parallel_forward(inputs, true)?;
            work.compute += laps.lap(&self.devices);
            let logits = self.gather(&outputs)?;
            self.count_master_parts(&batch.images, &logits);
            let loss = autocast(self.amp.precision, master, || loss_fn(&logits, &batch.labels))??;
            work.gather += laps.lap(&self.devices);
            clock.mark(Phase::Forward);
            // Zeroing the reused replicas' gradients is this emulation's cost
            // (DataParallel's replicas are new each step): in no part.
            self.zero_replica_grads()?;
            laps.lap(&self.devices);
            self.amp.scaled(&share(&loss, k)?)?.f_backward()?;
            work.compute += laps.lap(&self.devices);
            self.reduce_gradients()?;
            work.reduce += laps.lap(&self.devices);
            clock.mark(if i + 1 < k { Phase::Accumulated } else { Phase::Backward });
            losses.push(loss.f_detach()?);
        }
        self.work = timed.then_some(work);
        let opt = self.opt.as_mut().ok_or_else(serving_only)?;
        self.amp.step(&self.replicas[0].params, opt)?;
        clock.mark(Phase::Optimizer);
        step_loss(losses)
    }

    fn skipped_steps(&self) -> u64 {
        self.amp.skipped_steps()
    }

    fn make_capturable(&mut self) -> Result<()> {
        let opt = self.opt.as_ref().ok_or_else(serving_only)?;
        super::graphed::capturable(&mut self.amp, opt, self.devices.len())
    }

    fn devices(&self) -> &Devices {
        &self.devices
    }

    fn var_store(&self) -> &nn::VarStore {
        &self.replicas[0].vs
    }

    fn optimizer_state_bytes(&self) -> u64 {
        self.opt.as_ref().map_or(0, |o| o.state_bytes())
    }

    fn master_parts(&self) -> Option<MasterParts> {
        (self.replicas.len() >= 2).then_some(self.parts)
    }

    fn master_work(&self) -> Option<MasterWork> {
        self.work
    }
}
