//! Parallel strategies. The measurement loop (`bench::measure`) owns warm-up,
//! timing, synchronization and sampling; a strategy holds only the
//! parallelism: where the model lives, how a global batch becomes gradients,
//! and how the optimizer steps.
pub(crate) mod checkpoint;
pub mod ddp;
pub mod dp;
pub(crate) mod graphed;
pub mod optim;
pub mod precision;
pub mod single;

use anyhow::Result;
use tch::nn;
use tch::{Device, Tensor};

use crate::config::RunConfig;
use crate::data::Batch;
use crate::device::Devices;

pub trait Strategy {
    /// Where the runner must place each step's input.
    fn input_device(&self) -> Device;
    /// Images per step in that input: the per-device batch for single and
    /// ddp, the global batch for dp (DataParallel's input lives on the master).
    fn input_batch(&self) -> i64;
    /// One optimizer step over `micro`, its micro-batches (one without
    /// `--grad-accum`): gradients accumulate over them, each micro-batch's
    /// loss weighted 1/K, so the step follows the mean over all its images;
    /// returns that mean loss. `clock` is told when each phase ends
    /// (forward, backward, optimizer); the runner decides whether that costs
    /// a device sync (`--breakdown`).
    fn step_timed(&mut self, micro: &[Batch], clock: &mut dyn PhaseClock) -> Result<Tensor>;
    /// A step on one batch, with no phase timing.
    fn step(&mut self, batch: &Batch) -> Result<Tensor> {
        self.step_timed(std::slice::from_ref(batch), &mut NoClock)
    }
    /// The devices this process drives, for synchronization and metrics.
    fn devices(&self) -> &Devices;
    /// ddp: the Reducer's runtime statistics, averaged over the sampled
    /// iterations (None for the others, or when it has none).
    fn reducer_stats(&mut self) -> Option<crate::dist::ReducerStats> {
        None
    }
    /// Called after each timed step's sync, outside the timed region: ddp
    /// gathers the Reducer's times of that iteration, so that its averages
    /// leave warm-up out.
    fn timed_step_done(&mut self) {}
    /// Turns a step's loss and this process's "should we stop?" into the
    /// values every process acts on. Single and dp just read the loss; ddp
    /// averages the loss over ranks and takes rank 0's decision, so that all
    /// ranks stop at the same step (a rank that stopped alone would leave the
    /// others waiting in an all-reduce). Called outside the timed region.
    fn agree(&mut self, loss: &Tensor, stop: bool) -> Result<(f64, bool)> {
        Ok((loss.f_double_value(&[])?, stop))
    }
    /// `--cuda-graphs`: from here on the step must queue device work only,
    /// with no host sync in it (fp16's skip decided on the device, the fused
    /// optimizer), so that `graphed::Graphed` can capture it. Called after
    /// eager steps have made every piece of state. Err names why this
    /// strategy's step cannot be captured.
    fn make_capturable(&mut self) -> Result<()> {
        Err(anyhow::anyhow!("this strategy's step cannot be captured in a CUDA graph"))
    }
    /// fp16 steps skipped for non-finite gradients (loss scaling).
    fn skipped_steps(&self) -> u64 {
        0
    }
    /// The master's (or this rank's) parameters, for tests and for saving.
    fn var_store(&self) -> &nn::VarStore;
    /// Bytes of the optimizer's state on the master (or this rank).
    fn optimizer_state_bytes(&self) -> u64;
    /// dp on 2+ devices: what the master holds beyond a replica, by cause.
    fn master_parts(&self) -> Option<MasterParts> {
        None
    }
    /// dp on 2+ devices: the master's work in the last step, when it could
    /// be timed exactly (see [`MasterWork`]); None otherwise.
    fn master_work(&self) -> Option<MasterWork> {
        None
    }
}

/// DataParallel's master's extra memory by cause, in bytes, from the sizes
/// of the tensors dp makes there (the largest micro-batch's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MasterParts {
    /// The global input batch beyond the master's own chunk.
    pub input: u64,
    /// The gathered outputs, the loss's saved log-softmax, and their gradient.
    pub outputs: u64,
    /// The gradient sum's buffers.
    pub reduce: u64,
}

/// DataParallel's master work in one step, host-timed, in seconds. Exact
/// only where the host's clock sees the work finish: on the CPU, whose ops
/// return when done, or on CUDA under `--breakdown`, whose clock already
/// synchronizes the devices (dp then synchronizes at these bounds too).
/// Elsewhere a CUDA copy returns when queued, so nothing is recorded rather
/// than launch times.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MasterWork {
    /// The master's parameters and buffers copied onto the other replicas.
    pub replicate: f64,
    /// The batch split and copied to the replicas.
    pub scatter: f64,
    /// The outputs copied back and concatenated, and the loss on the master.
    pub gather: f64,
    /// The replicas' gradients summed into the master's.
    pub reduce: f64,
    /// Not the master's extra but what it waits for: the replicas' forward
    /// passes and the backward pass (through the gather and the loss on the
    /// master too, which autograd runs as one pass), so that a verdict can
    /// set dp's compute against the 1-device run's as it does ddp's.
    pub compute: f64,
}

/// The phases of a training step, for `--breakdown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Everything up to the loss: for dp also replicate, scatter and gather;
    /// for ddp also the Reducer's forward preparation and buffer broadcast.
    Forward,
    /// Zeroing gradients and backward: for dp also the gradient sum on the
    /// master; for ddp including the all-reduce overlapped with it.
    Backward,
    /// The optimizer step.
    Optimizer,
    /// A micro-batch's backward, before the next micro-batch's forward
    /// (`--grad-accum`): counted as backward.
    Accumulated,
}

/// Told by a strategy when each phase of a step ends.
pub trait PhaseClock {
    fn mark(&mut self, phase: Phase);
    /// Whether each mark synchronizes the devices (`--breakdown`): a run
    /// already slowed by syncs, where a strategy may add a few of its own
    /// within a phase (dp does, to time its master work).
    fn synced(&self) -> bool {
        false
    }
}

/// For runs without `--breakdown`: marks cost nothing.
pub struct NoClock;

impl PhaseClock for NoClock {
    fn mark(&mut self, _: Phase) {}
}

/// The run's optimizer (SGD with momentum and weight decay, as in the ResNet
/// ImageNet recipe, or AdamW), in the implementation `cfg.optimizer_impl` names.
pub fn build_optimizer(cfg: &RunConfig, vs: &nn::VarStore) -> Result<optim::Optimizer> {
    optim::Optimizer::new(cfg, vs)
}

/// A micro-batch's share of the step's loss: its mean ÷ K, so that the
/// gradients accumulated over K micro-batches are those of the mean over
/// every image of the step (the loss itself when K is 1).
pub(crate) fn share(loss: &Tensor, k: usize) -> Result<Tensor> {
    Ok(if k == 1 { loss.shallow_clone() } else { loss.f_div_scalar(k as f64)? })
}

/// The step's loss from its micro-batches' mean losses: their mean.
pub(crate) fn step_loss(losses: Vec<Tensor>) -> Result<Tensor> {
    match losses.len() {
        1 => Ok(losses.into_iter().next().expect("one loss")),
        _ => Ok(Tensor::f_stack(&losses, 0)?.f_mean(None)?),
    }
}

/// One micro-batch's forward to its loss: the model's own, or with the
/// stages' activations dropped (`--checkpoint`: `Some` of what the
/// backward pass needs). Call under the run's autocast.
pub(crate) fn forward_loss(
    model: &crate::model::Model,
    checkpoint: bool,
    batch: &Batch,
) -> Result<(Tensor, Tensor, Option<checkpoint::Saved>)> {
    match model.staged().filter(|_| checkpoint) {
        Some(net) => {
            let (logits, saved) = checkpoint::forward(net, &batch.images)?;
            let loss = loss_fn(&logits, &batch.labels)?;
            Ok((logits, loss, Some(saved)))
        }
        None => {
            let logits = model.forward_t(&batch.images, true);
            let loss = loss_fn(&logits, &batch.labels)?;
            Ok((logits, loss, None))
        }
    }
}

/// The backward of a loss from `forward_loss`: one pass, or the
/// checkpointed stages' recompute.
pub(crate) fn backward(
    model: &crate::model::Model,
    saved: Option<checkpoint::Saved>,
    scaled: &Tensor,
    amp: (crate::config::Precision, Device),
) -> Result<()> {
    match (saved, model.staged()) {
        (Some(s), Some(net)) => checkpoint::backward(net, s, scaled, amp.0, amp.1),
        _ => Ok(scaled.f_backward()?),
    }
}

/// Mean cross-entropy of logits against integer labels.
pub fn loss_fn(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    Ok(logits.f_cross_entropy_loss::<Tensor>(labels, None, tch::Reduction::Mean, -100, 0.0)?)
}
