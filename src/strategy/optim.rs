//! The optimizer step, SGD (torch.optim.SGD's arithmetic: momentum, weight
//! decay, no dampening or Nesterov) or AdamW (torch.optim.AdamW's), in the
//! implementation `--optimizer-impl` names. The loop is libtorch's C++
//! `torch::optim::SGD` or `AdamW` through tch, a few kernel launches per
//! parameter (about 600 a step for ResNet-50's 161 tensors); foreach and
//! fused are the multi-tensor ops PyTorch itself uses on a GPU, called
//! through the shim (`ffi::sgd_step`, `ffi::adamw_step`), which tch does not
//! wrap. At small batches the launches are a real share of the step, so
//! gpubench steps the way the PyTorch it is compared with does.
use anyhow::Result;
use tch::nn::{self, OptimizerConfig};
use tch::{Kind, Tensor};

use crate::config::{OptimizerImpl, OptimizerKind, RunConfig, ADAMW_BETAS, ADAMW_EPS};

pub enum Optimizer {
    /// libtorch's torch::optim::SGD or AdamW, with the bytes of state its
    /// definition keeps (its buffers are out of reach).
    Loop(nn::Optimizer, u64),
    /// SGD in `_foreach_*` ops or `_fused_sgd_` over every parameter.
    Sgd {
        fused: bool,
        params: Vec<Tensor>,
        /// Momentum buffers, zero until the first step copies the update in.
        bufs: Vec<Tensor>,
        lr: f64,
        momentum: f64,
        weight_decay: f64,
        first_step: bool,
    },
    /// AdamW in `_foreach_*` ops or `_fused_adamw_`.
    AdamW {
        fused: bool,
        params: Vec<Tensor>,
        /// First and second moments.
        exp_avg: Vec<Tensor>,
        exp_avg_sq: Vec<Tensor>,
        /// Each parameter's step count, a float scalar on its device (the
        /// fused kernel reads it there); `step` is the same count here.
        steps: Vec<Tensor>,
        step: i64,
        lr: f64,
        weight_decay: f64,
    },
}

impl Optimizer {
    /// The optimizer of `vs`'s trainable variables, as `cfg` says.
    pub fn new(cfg: &RunConfig, vs: &nn::VarStore) -> Result<Optimizer> {
        let fused = match cfg.optim.optimizer_impl.resolve() {
            OptimizerImpl::Loop | OptimizerImpl::Auto => {
                // SGD keeps a momentum buffer per parameter (none without
                // momentum), AdamW two moments: in the parameters' bytes.
                let bytes = bytes_of(&vs.trainable_variables());
                let state = match cfg.optim.optimizer {
                    OptimizerKind::Sgd if cfg.optim.momentum == 0.0 => 0,
                    OptimizerKind::Sgd => bytes,
                    OptimizerKind::Adamw => 2 * bytes,
                };
                let (b1, b2) = ADAMW_BETAS;
                let o = match cfg.optim.optimizer {
                    OptimizerKind::Sgd => {
                        let sgd = nn::Sgd {
                            momentum: cfg.optim.momentum,
                            dampening: 0.0,
                            wd: cfg.optim.weight_decay,
                            nesterov: false,
                        };
                        sgd.build(vs, cfg.optim.lr)?
                    }
                    OptimizerKind::Adamw => {
                        let adamw = nn::AdamW {
                            beta1: b1,
                            beta2: b2,
                            wd: cfg.optim.weight_decay,
                            eps: ADAMW_EPS,
                            amsgrad: false,
                        };
                        adamw.build(vs, cfg.optim.lr)?
                    }
                };
                return Ok(Optimizer::Loop(o, state));
            }
            OptimizerImpl::Fused => true,
            OptimizerImpl::Foreach => false,
        };
        let params = vs.trainable_variables();
        let zeros = || params.iter().map(Tensor::f_zeros_like).collect::<Result<Vec<_>, _>>();
        Ok(match cfg.optim.optimizer {
            OptimizerKind::Sgd => Optimizer::Sgd {
                fused,
                bufs: zeros()?,
                params,
                lr: cfg.optim.lr,
                momentum: cfg.optim.momentum,
                weight_decay: cfg.optim.weight_decay,
                first_step: true,
            },
            OptimizerKind::Adamw => Optimizer::AdamW {
                fused,
                exp_avg: zeros()?,
                exp_avg_sq: zeros()?,
                steps: params
                    .iter()
                    .map(|p| Tensor::f_zeros([], (Kind::Float, p.device())))
                    .collect::<Result<Vec<_>, _>>()?,
                params,
                step: 0,
                lr: cfg.optim.lr,
                weight_decay: cfg.optim.weight_decay,
            },
        })
    }

    /// One update from the parameters' gradients.
    pub fn step(&mut self) -> Result<()> {
        self.step_unless(None)
    }

    /// Whether the step is one fused kernel, the one implementation that
    /// takes a device-side skip flag (`step_unless`).
    pub(crate) fn is_fused(&self) -> bool {
        matches!(self, Optimizer::Sgd { fused: true, .. } | Optimizer::AdamW { fused: true, .. })
    }

    /// One update, which changes nothing where `skip_if` (a one-element
    /// flag on the device, fp16's non-finite gradients) is non-zero: the
    /// decision stays on the device, so the step can be captured in a CUDA
    /// graph. Fused implementations only.
    pub(crate) fn step_unless(&mut self, skip_if: Option<&Tensor>) -> Result<()> {
        if skip_if.is_some() && !self.is_fused() {
            return Err(anyhow::anyhow!("a step skipped on the device needs --optimizer-impl fused"));
        }
        match self {
            Optimizer::Loop(o, _) => crate::error::guarded(|| {
                o.step();
                Ok(())
            }),
            Optimizer::Sgd { fused, params, bufs, lr, momentum, weight_decay, first_step } => {
                crate::ffi::sgd_step(*fused, params, bufs, *lr, *momentum, *weight_decay, *first_step, skip_if)?;
                *first_step = false;
                Ok(())
            }
            Optimizer::AdamW { fused, params, exp_avg, exp_avg_sq, steps, step, lr, weight_decay } => {
                *step += 1;
                let state = crate::ffi::AdamWState { exp_avg, exp_avg_sq, steps, step: *step };
                let hyper =
                    crate::ffi::AdamWHyper { lr: *lr, betas: ADAMW_BETAS, weight_decay: *weight_decay, eps: ADAMW_EPS };
                crate::ffi::adamw_step(*fused, params, &state, &hyper, skip_if)
            }
        }
    }

    /// Every gradient dropped (set to None, PyTorch's and libtorch's default).
    pub fn zero_grad(&mut self) -> Result<()> {
        match self {
            Optimizer::Loop(o, _) => crate::error::guarded(|| {
                o.zero_grad();
                Ok(())
            }),
            Optimizer::Sgd { params, .. } | Optimizer::AdamW { params, .. } => crate::ffi::zero_grads(params),
        }
    }

    /// Bytes of optimizer state: its buffers' (SGD's momentum, AdamW's
    /// moments and step counts), or for libtorch's loop what its definition
    /// keeps.
    pub(crate) fn state_bytes(&self) -> u64 {
        match self {
            Optimizer::Loop(_, b) => *b,
            Optimizer::Sgd { bufs, momentum, .. } => {
                if *momentum == 0.0 {
                    0
                } else {
                    bytes_of(bufs)
                }
            }
            Optimizer::AdamW { exp_avg, exp_avg_sq, steps, .. } => {
                bytes_of(exp_avg) + bytes_of(exp_avg_sq) + bytes_of(steps)
            }
        }
    }
}

/// Bytes the tensors hold (their elements × element size).
pub(crate) fn bytes_of(ts: &[Tensor]) -> u64 {
    ts.iter().filter(|t| t.defined()).map(|t| (t.numel() * t.kind().elt_size_in_bytes()) as u64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// A one-CPU run's configuration of `model`, for the optimizer alone.
    fn cpu_config(model: crate::config::ModelKind) -> RunConfig {
        let a = ["--cpu", "--model", model.name(), "--num-classes", "10", "--image-size", "32", "--batch-size", "1"];
        crate::cli::run::run_config(&a).unwrap()
    }

    /// Parameters after `steps` SGD steps with fixed pseudo-random
    /// gradients, under one implementation.
    fn trained(kind: OptimizerKind, imp: OptimizerImpl, steps: usize) -> Vec<Vec<f32>> {
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
        let mut cfg = cpu_config(crate::config::ModelKind::Tinycnn);
        cfg.optim = crate::config::Optim {
            optimizer: kind,
            optimizer_impl: imp,
            lr: 0.05,
            momentum: 0.9,
            weight_decay: kind.default_weight_decay(),
        };
        let mut opt = Optimizer::new(&cfg, &vs).unwrap();
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

    /// libtorch's own C++ SGD and AdamW are the reference each multi-tensor
    /// implementation must reproduce.
    #[test]
    fn every_implementation_gives_the_loops_weights() {
        for kind in OptimizerKind::ALL {
            let want = trained(kind, OptimizerImpl::Loop, 6);
            for imp in [OptimizerImpl::Foreach, OptimizerImpl::Fused] {
                let got = trained(kind, imp, 6);
                for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
                    assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "{} {}: {g} vs {w}", kind.name(), imp.name());
                }
            }
            // The comparison can fail: five steps fewer give other weights.
            assert_ne!(trained(kind, OptimizerImpl::Loop, 1), want);
        }
        // And the two optimizers differ.
        assert_ne!(
            trained(OptimizerKind::Sgd, OptimizerImpl::Loop, 3),
            trained(OptimizerKind::Adamw, OptimizerImpl::Loop, 3)
        );
    }

    /// AdamW keeps two moments per parameter, SGD one momentum buffer.
    #[test]
    fn adamws_state_is_twice_sgds() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _m = crate::model::build(&vs.root(), crate::config::ModelKind::Resnet18, 10);
        let base = cpu_config(crate::config::ModelKind::Resnet18);
        let state = |optimizer| {
            let mut cfg = base.clone();
            (cfg.optim.optimizer, cfg.optim.momentum, cfg.optim.optimizer_impl) =
                (optimizer, 0.9, OptimizerImpl::Fused);
            Optimizer::new(&cfg, &vs).unwrap().state_bytes()
        };
        let params = vs.trainable_variables();
        assert_eq!(state(OptimizerKind::Sgd), bytes_of(&params));
        // Two moments, and one float step count per parameter tensor.
        assert_eq!(state(OptimizerKind::Adamw), 2 * bytes_of(&params) + 4 * params.len() as u64);
    }
}
