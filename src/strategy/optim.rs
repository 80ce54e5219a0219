//! The SGD step (torch.optim.SGD's arithmetic: momentum, weight decay, no
//! dampening or Nesterov) in the implementation `--optimizer-impl` names.
//! The loop is libtorch's C++ `torch::optim::SGD` through tch, a few kernel
//! launches per parameter (about 600 a step for ResNet-50's 161 tensors);
//! foreach and fused are the multi-tensor ops PyTorch itself uses on a GPU,
//! called through the shim (`ffi::sgd_step`), which tch does not wrap. At
//! small batches the launches are a real share of the step, so gpubench
//! steps the way the PyTorch it is compared with does.
use anyhow::Result;
use tch::nn::{self, OptimizerConfig};
use tch::Tensor;

use crate::config::{OptimizerImpl, RunConfig};

pub enum Sgd {
    /// libtorch's torch::optim::SGD.
    Loop(nn::Optimizer),
    /// `_foreach_*` ops or `_fused_sgd_` over every parameter.
    MultiTensor {
        fused: bool,
        params: Vec<Tensor>,
        /// Momentum buffers, zero until the first step copies the update in.
        bufs: Vec<Tensor>,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
        first_step: bool,
    },
}

impl Sgd {
    /// The optimizer of `vs`'s trainable variables, as `cfg` says.
    pub fn new(cfg: &RunConfig, vs: &nn::VarStore) -> Result<Sgd> {
        let fused = match cfg.optimizer_impl.resolve() {
            OptimizerImpl::Loop | OptimizerImpl::Auto => {
                let sgd = nn::Sgd { momentum: cfg.momentum, dampening: 0.0, wd: cfg.weight_decay, nesterov: false };
                return Ok(Sgd::Loop(sgd.build(vs, cfg.lr)?));
            }
            OptimizerImpl::Fused => true,
            OptimizerImpl::Foreach => false,
        };
        let params = vs.trainable_variables();
        let bufs = params.iter().map(Tensor::f_zeros_like).collect::<Result<Vec<_>, _>>()?;
        Ok(Sgd::MultiTensor {
            fused,
            params,
            bufs,
            lr: cfg.lr,
            momentum: cfg.momentum,
            weight_decay: cfg.weight_decay,
            first_step: true,
        })
    }

    /// One update from the parameters' gradients.
    pub fn step(&mut self) -> Result<()> {
        match self {
            Sgd::Loop(o) => crate::error::guarded(|| {
                o.step();
                Ok(())
            }),
            Sgd::MultiTensor { fused, params, bufs, lr, momentum, weight_decay, first_step } => {
                crate::ffi::sgd_step(*fused, params, bufs, *lr, *momentum, *weight_decay, *first_step)?;
                *first_step = false;
                Ok(())
            }
        }
    }

    /// Every gradient dropped (set to None, PyTorch's and libtorch's default).
    pub fn zero_grad(&mut self) -> Result<()> {
        match self {
            Sgd::Loop(o) => crate::error::guarded(|| {
                o.zero_grad();
                Ok(())
            }),
            Sgd::MultiTensor { params, .. } => crate::ffi::zero_grads(params),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// Parameters after `steps` SGD steps with fixed pseudo-random
    /// gradients, under one implementation.
    fn trained(imp: OptimizerImpl, steps: usize) -> Vec<Vec<f32>> {
        let vs = nn::VarStore::new(Device::Cpu);
        let root = vs.root();
        let shapes: [&[i64]; 3] = [&[8, 3, 3, 3], &[8], &[10, 8]];
        let params: Vec<Tensor> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let n: i64 = s.iter().product();
                let init = (Tensor::arange(n, (Kind::Float, Device::Cpu)) * (0.37 + i as f64)).sin().reshape(*s);
                root.var_copy(&format!("p{i}"), &init)
            })
            .collect();
        let base = RunConfig::for_model(
            crate::config::ModelKind::Tinycnn,
            10,
            16,
            1,
            &crate::device::Devices::cpu(1),
            crate::config::Precision::Fp32,
            0,
        );
        let cfg = RunConfig { lr: 0.05, momentum: 0.9, weight_decay: 1e-4, optimizer_impl: imp, ..base };
        let mut opt = Sgd::new(&cfg, &vs).unwrap();
        for step in 0..steps {
            opt.zero_grad().unwrap();
            let loss = params
                .iter()
                .enumerate()
                .map(|(i, p)| (p * p).sum(Kind::Float) * (0.5 + 0.1 * (i + step) as f64) + p.cos().sum(Kind::Float))
                .reduce(|a, b| a + b)
                .unwrap();
            loss.backward();
            opt.step().unwrap();
        }
        params.iter().map(|p| Vec::<f32>::try_from(&p.flatten(0, -1)).unwrap()).collect()
    }

    #[test]
    fn every_implementation_gives_the_loops_weights() {
        let want = trained(OptimizerImpl::Loop, 6);
        for imp in [OptimizerImpl::Foreach, OptimizerImpl::Fused] {
            let got = trained(imp, 6);
            for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
                assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{}: {g} vs {w}", imp.name());
            }
        }
        // The comparison can fail: five steps fewer give other weights.
        assert_ne!(trained(OptimizerImpl::Loop, 1), want);
    }
}
