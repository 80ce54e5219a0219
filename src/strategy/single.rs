//! One device: the reference every other strategy is measured against.
use anyhow::Result;
use tch::{nn, Device, Tensor};

use super::{build_model, build_optimizer, loss_fn, Strategy};
use crate::config::RunConfig;
use crate::data::Batch;
use crate::device::Devices;
use crate::model::Model;

pub struct Single {
    devices: Devices,
    vs: nn::VarStore,
    model: Model,
    opt: nn::Optimizer,
    batch: i64,
}

impl Single {
    pub fn new(cfg: &RunConfig) -> Result<Self> {
        let devices = cfg.devices.clone();
        let (vs, model) = build_model(cfg, devices.device(0));
        let opt = build_optimizer(cfg, &vs)?;
        Ok(Single { devices, vs, model, opt, batch: cfg.batch_per_device })
    }
}

impl Strategy for Single {
    fn input_device(&self) -> Device {
        self.devices.device(0)
    }

    fn input_batch(&self) -> i64 {
        self.batch
    }

    fn step(&mut self, batch: &Batch) -> Result<Tensor> {
        let logits = self.model.forward_t(&batch.images, true);
        let loss = loss_fn(&logits, &batch.labels)?;
        self.opt.zero_grad();
        loss.f_backward()?;
        self.opt.step();
        Ok(loss)
    }

    fn devices(&self) -> &Devices {
        &self.devices
    }

    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
}
