//! `--cuda-graphs` for training: the whole step (forward, loss, backward,
//! fp16's unscale and scale update, the fused optimizer) captured once in a
//! CUDA graph and replayed at every step after. A replay is one launch
//! where the eager step makes hundreds, so graphs pay where the host's
//! launches, not the GPU, set the pace: small batches per GPU.
//!
//! The recipe (research-wave4.md section 3, PyTorch's notes/cuda.rst):
//! - `EAGER_STEPS` eager steps first, on a side stream, so that cuDNN's autotuning, the
//!   optimizer's momentum buffers and the loss scaler's state all exist
//!   before the capture (none of them may be made inside it);
//! - the strategy then drops every host sync from its step
//!   (`Strategy::make_capturable`): fp16's skip is decided on the device
//!   and handed to the fused optimizer;
//! - gradients are dropped before the capture; the captured backward makes
//!   them in the graph's private memory, where every replay rewrites them;
//! - static input and label tensors: each step's batch is copied into them
//!   on the stream the replay is launched on, so the copy is ordered before
//!   it (and counted in the step, as the eager step counts its input).
//!
//! All of this happens in the first step, which the runner's warm-up
//! (at least one step, `cli::run` checks) keeps out of the timing.
//! The learning rate is a constant of the graph, as it is of every run here.
use anyhow::{anyhow, Result};
use tch::{nn, Device, Tensor};

use super::optim::Optimizer;
use super::precision::Amp;
use super::{MasterParts, MasterWork, NoClock, Phase, PhaseClock, Strategy};
use crate::data::Batch;
use crate::device::Devices;
use crate::ffi::CudaGraph;

/// Eager steps before the capture (PyTorch's notes ask for at least three).
pub(crate) const EAGER_STEPS: usize = 3;

/// What single and dp check before their step is captured: one device (dp
/// over several runs a thread per replica, whose work a capture on this
/// thread would not hold), the fused optimizer (the one implementation that
/// takes a skip flag on the device), then the loss scaler's device-side mode.
pub(crate) fn capturable(amp: &mut Amp, opt: &Optimizer, devices: usize) -> Result<()> {
    if devices != 1 {
        return Err(anyhow!(
            "--cuda-graphs captures a step on one device; dp over {devices} GPUs runs a thread per replica"
        ));
    }
    if !opt.is_fused() {
        return Err(anyhow!("--cuda-graphs needs --optimizer-impl fused (the default)"));
    }
    amp.make_capturable()
}

/// A copy of `t` in new memory, in its layout (channels-last stays so).
fn fresh_copy(t: &Tensor) -> Result<Tensor> {
    let mut c = t.f_empty_like()?;
    c.f_copy_(t)?;
    Ok(c)
}

/// A strategy whose step is replayed from a CUDA graph.
pub(crate) struct Graphed {
    inner: Box<dyn Strategy>,
    device: usize,
    graph: Option<Captured>,
}

/// The graph and its static tensors.
struct Captured {
    graph: CudaGraph,
    images: Tensor,
    labels: Tensor,
    loss: Tensor,
}

impl Graphed {
    pub(crate) fn new(inner: Box<dyn Strategy>) -> Result<Graphed> {
        let device = match inner.input_device() {
            Device::Cuda(o) => o,
            d => return Err(anyhow!("--cuda-graphs needs a CUDA device, not {d:?}")),
        };
        Ok(Graphed { inner, device, graph: None })
    }

    /// The eager steps, then the capture of one step on `batch`'s copy.
    fn capture(&mut self, batch: &Batch) -> Result<Captured> {
        // On a side stream, as PyTorch's recipe warms up, fenced by device
        // syncs on both sides (the batch was made on the default stream).
        let side = crate::ffi::CudaStream::new(self.device)?;
        tch::Cuda::synchronize(self.device as i64);
        let inner = &mut self.inner;
        side.run(|| {
            for _ in 0..EAGER_STEPS {
                let _ = inner.step(batch)?;
            }
            Ok(())
        })?;
        tch::Cuda::synchronize(self.device as i64);
        self.inner.make_capturable()?;
        let images = fresh_copy(&batch.images)?;
        let labels = fresh_copy(&batch.labels)?;
        let mut graph = CudaGraph::new(self.device)?;
        let fixed = Batch { images: images.shallow_clone(), labels: labels.shallow_clone() };
        let inner = &mut self.inner;
        let loss = graph.capture(None, || inner.step_timed(std::slice::from_ref(&fixed), &mut NoClock))?;
        Ok(Captured { graph, images, labels, loss })
    }
}

impl Strategy for Graphed {
    fn input_device(&self) -> Device {
        self.inner.input_device()
    }

    fn input_batch(&self) -> i64 {
        self.inner.input_batch()
    }

    fn step_timed(&mut self, micro: &[Batch], clock: &mut dyn PhaseClock) -> Result<Tensor> {
        let [batch] = micro else {
            return Err(anyhow!("--cuda-graphs captures one micro-batch per step, not {}", micro.len()));
        };
        if self.graph.is_none() {
            self.graph = Some(self.capture(batch)?);
        }
        let g = self.graph.as_mut().expect("captured above");
        // Ordered before the replay: both queue on this thread's stream.
        if batch.images.data_ptr() != g.images.data_ptr() {
            g.images.f_copy_(&batch.images)?;
            g.labels.f_copy_(&batch.labels)?;
        }
        g.graph.replay()?;
        // One launch holds every phase: the marks close them together.
        for p in [Phase::Forward, Phase::Backward, Phase::Optimizer] {
            clock.mark(p);
        }
        // The graph's own loss, which the next replay overwrites: the runner
        // reads it (`agree`) before the next step, so no copy is made in the
        // timed step.
        Ok(g.loss.shallow_clone())
    }

    fn devices(&self) -> &Devices {
        self.inner.devices()
    }

    fn reducer_stats(&mut self) -> Option<crate::dist::ReducerStats> {
        self.inner.reducer_stats()
    }

    fn timed_step_done(&mut self) {
        self.inner.timed_step_done()
    }

    fn agree(&mut self, loss: &Tensor, stop: bool) -> Result<(f64, bool)> {
        self.inner.agree(loss, stop)
    }

    fn skipped_steps(&self) -> u64 {
        self.inner.skipped_steps()
    }

    fn var_store(&self) -> &nn::VarStore {
        self.inner.var_store()
    }

    fn optimizer_state_bytes(&self) -> u64 {
        self.inner.optimizer_state_bytes()
    }

    fn master_parts(&self) -> Option<MasterParts> {
        self.inner.master_parts()
    }

    fn master_work(&self) -> Option<MasterWork> {
        self.inner.master_work()
    }
}
