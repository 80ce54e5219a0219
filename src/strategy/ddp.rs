//! DistributedDataParallel: one process per device; gradients are averaged by libtorch's own c10d `Reducer`,
//! the engine `torch.nn.parallel.DistributedDataParallel` drives, over a `ProcessGroupGloo` or
//! `ProcessGroupNCCL` (`--backend`; default nccl on CUDA, gloo on the CPU; nccl on the CPU is a usage error),
//! after rendezvous through a `TCPStore` (`dist`; launching is `bench::ddp`).
//!
//! Construction (`Ddp::new`, as DDP's constructor): every rank builds its replica with the same seed; the
//! Reducer checks that every rank's parameters have the same shapes, broadcasts them (and, with buffer
//! broadcast, the buffers) from rank 0, and assigns buckets. Without `--find-unused-parameters` the first
//! iteration uses one bucket; at the start of the second the buckets are rebuilt in the order gradients became
//! ready, capped at `--bucket-cap-mb` (default 25). gpubench always passes that cap explicitly, so, as with an explicit
//! `bucket_cap_mb` in torch 2.11, the first bucket gets the same cap rather than DDP's default 1 MiB.
//!
//! Each step, as DDP's forward does:
//! - prepare for forward (the bucket rebuild once, then the buffer broadcast from rank 0, i.e. BatchNorm
//!   statistics, unless `--no-broadcast-buffers`), forward and loss (under autocast for fp16/bf16), prepare for
//!   backward;
//! - backward: each bucket's all-reduce starts from the autograd hooks as soon as it is ready, overlapping the
//!   rest of backward;
//! - the optimizer step. Under fp16 the gradients are unscaled after the all-reduce, so every rank unscales the
//!   same averaged values and skips the same steps (rank 0's count is the job's `skipped_steps`).
//!
//! `--gradient-as-bucket-view` and `--find-unused-parameters` mean what they mean in PyTorch. With bucket
//! views, gradients are zeroed in place (`dist::zero_grads_in_place`): tch's `zero_grad` detaches them, which
//! fails on views.
//!
//! `agree` all-reduces two numbers after each step, outside the timed region: loss ÷ world (so the reported loss
//! is the global mean) and rank 0's decision to stop, so a `--duration` run stops every rank at the same step (a
//! rank that stopped alone would leave the others waiting in an all-reduce). `reducer_stats` are the Reducer's
//! own averaged runtime statistics, which become the row's `ddp_*` columns (`metrics`).
use anyhow::Result;
use tch::{nn, Device, Kind, Tensor};

use super::precision::{autocast, Amp};
use super::{backward, build_optimizer, forward_loss, share, step_loss, Phase, PhaseClock, Strategy};
use crate::config::RunConfig;
use crate::device::Devices;
use crate::dist::{ProcessGroup, Reducer, ReducerOptions, ReducerStats};
use crate::model::{build_model, Model};

pub struct Ddp {
    device: Devices,
    vs: nn::VarStore,
    model: Model,
    opt: super::optim::Optimizer,
    params: Vec<Tensor>,
    // Declared before `pg` so it is dropped first: it holds the group.
    reducer: Reducer,
    pg: ProcessGroup,
    batch: i64,
    world: usize,
    rank: usize,
    grad_as_bucket_view: bool,
    amp: Amp,
    checkpoint: bool,
    /// `Hook::SlowRank`: ms this rank sleeps in a forward, and in how many
    /// (all when None) (tests only).
    slow: Option<(u64, Option<u64>)>,
    forwards: u64,
    /// The Reducer's per-iteration times summed over the timed steps only
    /// (its own averages include warm-up), and how many were summed.
    timed: TimedReducer,
}

/// Sums of the Reducer's per-iteration times over the timed steps.
#[derive(Default)]
struct TimedReducer {
    n: u32,
    forward: f64,
    backward: f64,
    comm: f64,
    overlap: f64,
}

impl Ddp {
    /// Builds this rank's replica on its device (`cfg.devices`; same seed on
    /// every rank, and rank 0's weights are broadcast anyway, as DDP does) and
    /// the Reducer over `pg`, with `cfg.ddp`'s settings.
    pub fn new(cfg: &RunConfig, pg: ProcessGroup) -> Result<Self> {
        let device = cfg.placement.devices.clone();
        let a = &cfg.ddp;
        let (vs, model) = build_model(&cfg.workload, device.device(0));
        let opt = build_optimizer(cfg, &vs)?;
        let params = vs.trainable_variables();
        let trainable: std::collections::HashSet<*mut torch_sys::C_tensor> =
            params.iter().map(|p| p.as_ptr() as *mut _).collect();
        // Buffers (BatchNorm statistics), in a fixed order on every rank.
        let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let buffers: Vec<Tensor> = named
            .into_iter()
            .filter(|(_, t)| !t.requires_grad() && !trainable.contains(&(t.as_ptr() as *mut _)))
            .map(|(_, t)| t)
            .collect();
        let opts = ReducerOptions {
            bucket_cap_bytes: Some((a.bucket_cap_mb * 1024.0 * 1024.0) as i64),
            first_bucket_cap_bytes: None,
            find_unused_parameters: a.find_unused_parameters,
            gradient_as_bucket_view: a.gradient_as_bucket_view,
            broadcast_buffers: a.broadcast_buffers,
            // Every iteration: the verdict reads the timed steps' compute and
            // communication, not the Reducer's default sample of mostly warm-up.
            stats_sample_rate: Some(1),
            comm_hook: a.comm_hook,
        };
        let reducer = Reducer::new(&pg, &params, &buffers, &opts)?;
        let (world, rank) = (pg.world(), pg.rank());
        Ok(Ddp {
            device,
            vs,
            model,
            opt,
            params,
            reducer,
            pg,
            batch: cfg.batch_per_device,
            world,
            rank,
            grad_as_bucket_view: a.gradient_as_bucket_view,
            amp: Amp::new(cfg.workload.precision),
            checkpoint: cfg.checkpoint,
            slow: slow_rank(rank),
            forwards: 0,
            timed: TimedReducer::default(),
        })
    }
}

/// `Hook::SlowRank`'s delay for `rank` (`RANK:MS`, or `RANK:MS:ITERATIONS`
/// for the first ITERATIONS forwards only), when it names this rank.
fn slow_rank(rank: usize) -> Option<(u64, Option<u64>)> {
    let v = crate::internal::Hook::SlowRank.get()?;
    let mut f = v.split(':').map(str::trim);
    if f.next()?.parse::<usize>().ok()? != rank {
        return None;
    }
    let ms = f.next()?.parse().ok()?;
    Some((ms, f.next().and_then(|n| n.parse().ok())))
}

impl Strategy for Ddp {
    fn input_device(&self) -> Device {
        self.device.device(0)
    }

    fn input_batch(&self) -> i64 {
        self.batch
    }

    fn step_timed(&mut self, micro: &[crate::data::Batch], clock: &mut dyn PhaseClock) -> Result<Tensor> {
        if self.grad_as_bucket_view {
            // Gradients are views into the Reducer's buckets: zero them in
            // place (tch's zero_grad would try to detach them and fail).
            crate::dist::zero_grads_in_place(&self.params);
        } else {
            self.opt.zero_grad()?;
        }
        let dev = self.device.device(0);
        let k = micro.len();
        let mut losses = Vec::with_capacity(k);
        for (i, batch) in micro.iter().enumerate() {
            // Only the last micro-batch is a Reducer iteration (PyTorch's
            // no_sync for the others): without prepare_for_backward its
            // hooks let the gradients accumulate locally, and the last
            // backward all-reduces the sum. Buffers are broadcast before
            // every forward, as DDP's forward does under no_sync too.
            let sync = i + 1 == k;
            if sync {
                self.reducer.prepare_forward()?;
            } else {
                self.reducer.broadcast_buffers()?;
            }
            let (logits, loss, saved) =
                autocast(self.amp.precision, dev, || forward_loss(&self.model, self.checkpoint, batch))??;
            if let Some((ms, first)) = self.slow {
                // The test hook's straggler: inside the forward the Reducer times.
                if first.is_none_or(|n| self.forwards < n) {
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                }
            }
            self.forwards += 1;
            if sync {
                self.reducer.prepare_backward(&[&logits])?;
            }
            clock.mark(Phase::Forward);
            // fp16: the Reducer averages the scaled gradients; every rank then
            // unscales the same averaged values and so skips the same steps.
            // Checkpointed, the step is several backward passes, each
            // parameter's gradient arriving in exactly one of them: the
            // Reducer's hooks fire once per parameter, as in one pass.
            let scaled = self.amp.scaled(&share(&loss, k)?)?;
            backward(&self.model, saved, &scaled, (self.amp.precision, dev))?;
            clock.mark(if sync { Phase::Backward } else { Phase::Accumulated });
            losses.push(loss.f_detach()?);
        }
        self.amp.step(&self.params, &mut self.opt)?;
        clock.mark(Phase::Optimizer);
        step_loss(losses)
    }

    /// One small all-reduce of [loss / world, rank 0's stop flag]: every rank
    /// reports the global mean loss and stops at the same step.
    fn agree(&mut self, loss: &Tensor, stop: bool) -> Result<(f64, bool)> {
        let flag = if self.rank == 0 && stop { 1.0 } else { 0.0 };
        let l = loss.f_detach()?.f_to_kind(Kind::Double)?.f_to_device(Device::Cpu)?.double_value(&[]);
        let mut t = Tensor::from_slice(&[l / self.world as f64, flag]).to_device(self.device.device(0));
        self.pg.allreduce_sum(&mut t)?;
        let v: Vec<f64> = Vec::<f64>::try_from(t.to_device(Device::Cpu))?;
        Ok((v[0], v[1] > 0.5))
    }

    fn skipped_steps(&self) -> u64 {
        self.amp.skipped_steps()
    }

    fn devices(&self) -> &Devices {
        &self.device
    }

    fn reducer_stats(&mut self) -> Option<ReducerStats> {
        let mut s = self.reducer.stats().ok()?;
        // The logger's averages run over every iteration, warm-up included
        // (cuDNN's autotuning and the allocator's growth in the first one):
        // the row reports the timed steps' own.
        let t = &self.timed;
        if t.n > 0 {
            let n = t.n as f64;
            s.avg_forward_compute_ms = Some(t.forward / n);
            s.avg_backward_compute_ms = Some(t.backward / n);
            s.avg_backward_comm_ms = Some(t.comm / n);
            s.avg_backward_overlap_ms = Some(t.overlap / n);
        }
        Some(s)
    }

    fn timed_step_done(&mut self) {
        // After the step's sync: reading the iteration's CUDA events costs no wait.
        let Ok(s) = self.reducer.stats() else { return };
        if !s.timed {
            return;
        }
        let t = &mut self.timed;
        t.n += 1;
        t.forward += s.forward_compute_ms.unwrap_or(0.0);
        t.backward += s.backward_compute_ms.unwrap_or(0.0);
        t.comm += s.backward_comm_ms.unwrap_or(0.0);
        t.overlap += s.backward_overlap_ms.unwrap_or(0.0);
    }

    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    fn optimizer_state_bytes(&self) -> u64 {
        self.opt.state_bytes()
    }
}
