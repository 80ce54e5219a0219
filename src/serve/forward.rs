//! What serves a batch (`Forward`): a replica on one device, DataParallel
//! over all, or the test hook's sleeper. The server drives it and
//! `graphs::Graphed` wraps it; neither needs the other to name it.

use anyhow::Result;
use std::time::Duration;
use tch::{nn, Device, Kind, Tensor};

use crate::config::Precision;
use crate::model::Model;
use crate::strategy::dp::DataParallel;
use crate::strategy::precision::autocast;

/// What serves a batch: a replica on one device, or DataParallel over all.
pub(crate) trait Forward {
    fn forward(&mut self, x: &Tensor) -> Result<Tensor>;
    /// After warm-up: `--cuda-graphs`' capture (`serve::graphs`); nothing otherwise.
    fn capture(&mut self) -> Result<()> {
        Ok(())
    }
}

pub(super) struct Replica {
    pub(super) _vs: nn::VarStore,
    pub(super) model: Model,
    pub(super) device: Device,
    pub(super) precision: Precision,
}

impl Forward for Replica {
    fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        let m = &self.model;
        autocast(self.precision, self.device, || tch::no_grad(|| m.forward_t(x, false)))
    }
}

impl Forward for DataParallel {
    fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        self.infer(x)
    }
}

/// The test hook's model (`server::test_service_ms`): it takes exactly that
/// long per batch and answers zeros.
pub(super) struct Sleeper {
    pub(super) per_batch: Duration,
    pub(super) classes: i64,
    pub(super) device: Device,
}

impl Forward for Sleeper {
    fn forward(&mut self, x: &Tensor) -> Result<Tensor> {
        std::thread::sleep(self.per_batch);
        Ok(Tensor::f_zeros([x.size()[0], self.classes], (Kind::Float, self.device))?)
    }
}
