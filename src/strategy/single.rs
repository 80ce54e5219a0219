//! One device: the reference every other strategy is measured against.
use anyhow::Result;
use tch::{nn, Device, Tensor};

use super::precision::{autocast, Amp};
use super::{backward, build_optimizer, forward_loss, share, step_loss, Phase, PhaseClock, Strategy};
use crate::config::RunConfig;
use crate::data::Batch;
use crate::device::Devices;
use crate::model::{build_model, Model};

pub struct Single {
    devices: Devices,
    vs: nn::VarStore,
    model: Model,
    opt: super::optim::Optimizer,
    batch: i64,
    amp: Amp,
    params: Vec<Tensor>,
    checkpoint: bool,
}

impl Single {
    pub fn new(cfg: &RunConfig) -> Result<Self> {
        let devices = cfg.placement.devices.clone();
        let (vs, model) = build_model(&cfg.workload, devices.device(0));
        let opt = build_optimizer(cfg, &vs)?;
        let params = vs.trainable_variables();
        Ok(Single {
            devices,
            vs,
            model,
            opt,
            batch: cfg.batch_per_device,
            amp: Amp::new(cfg.workload.precision),
            params,
            checkpoint: cfg.checkpoint,
        })
    }
}

impl Strategy for Single {
    fn input_device(&self) -> Device {
        self.devices.device(0)
    }

    fn input_batch(&self) -> i64 {
        self.batch
    }

    fn step_timed(&mut self, micro: &[Batch], clock: &mut dyn PhaseClock) -> Result<Tensor> {
        let dev = self.devices.device(0);
        let k = micro.len();
        self.opt.zero_grad()?;
        let mut losses = Vec::with_capacity(k);
        for (i, batch) in micro.iter().enumerate() {
            let (_, loss, saved) =
                autocast(self.amp.precision, dev, || forward_loss(&self.model, self.checkpoint, batch))??;
            clock.mark(Phase::Forward);
            let scaled = self.amp.scaled(&share(&loss, k)?)?;
            backward(&self.model, saved, &scaled, (self.amp.precision, dev))?;
            clock.mark(if i + 1 < k { Phase::Accumulated } else { Phase::Backward });
            losses.push(loss.f_detach()?);
        }
        self.amp.step(&self.params, &mut self.opt)?;
        clock.mark(Phase::Optimizer);
        step_loss(losses)
    }

    fn skipped_steps(&self) -> u64 {
        self.amp.skipped_steps()
    }

    fn make_capturable(&mut self) -> Result<()> {
        super::graphed::capturable(&mut self.amp, &self.opt, self.devices.len())
    }

    fn devices(&self) -> &Devices {
        &self.devices
    }

    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }

    fn optimizer_state_bytes(&self) -> u64 {
        self.opt.state_bytes()
    }
}
