//! Precision knobs shared by every strategy: autocast (fp16/bf16) around the forward pass and the loss, dynamic
//! loss scaling for fp16 (as `torch.amp.GradScaler`), and the process-wide settings (TF32, cuDNN autotuning,
//! determinism), applied once before any model is built (`apply_globals`, from `bench::session::apply_knobs`).
//! Every knob is recorded in the row (`precision`, `channels_last`, `cudnn_benchmark`, `deterministic`), and
//! precision is part of the configuration key in `report`, `compare` and `check`: fp32 and fp16 are different
//! workloads.
//!
//! - `--precision fp32` (default): TF32 is off for both cuBLAS matmuls and cuDNN convolutions (PyTorch's own
//!   default leaves it on for cuDNN), so that `fp32` means fp32.
//! - `--precision tf32`: TF32 tensor-core math for cuBLAS and cuDNN, fp32 storage. CUDA only: on the CPU it is a
//!   usage error (`cli::run`).
//! - `--precision bf16`: autocast to bfloat16 for the forward pass and the loss, on the CPU and CUDA.
//! - `--precision fp16`: autocast to float16 with dynamic loss scaling (`LossScaler`, GradScaler's defaults):
//!   the loss is scaled (initially by 2^16), gradients are unscaled after backward (after dp's gradient sum and
//!   ddp's all-reduce, so every rank decides alike), a step with non-finite gradients is skipped and the scale
//!   halved, and after 2000 good steps in a row the scale doubles. Skipped steps are the row's `skipped_steps`.
//!   The shim's autocast (`ffi::set_autocast`) works on the CPU too (tch's own is fp16 on CUDA only).
//! - `--channels-last`: NHWC memory format for the model's 4-D weights (`model::build_model`) and the inputs.
//! - `--cudnn-benchmark on|off` (default off): cuDNN autotuning.
//! - `--deterministic`: deterministic algorithms and cuDNN, autotuning forced off, and
//!   `CUBLAS_WORKSPACE_CONFIG=:4096:8` unless already set; with the same `--seed`, two runs give bit-identical
//!   losses (`tests/run_cli.rs` checks it on the CPU).
//!
//! Autocast is entered per thread, as `torch.autocast` is thread-local: dp's replica threads each enter it for
//! their forward, and leave it even when the forward fails (tch panics on libtorch errors).
//!
//! When to set `--cudnn-benchmark`: autotuning pays when input shapes are fixed, as they are here on every step
//! and every strategy, because cuDNN picks the fastest convolution algorithm once per shape; the first steps are
//! slower while it tunes, so give it warm-up (`--warmup` ≥ 5, more for large models). `--deterministic` disables
//! it; that speed cost is the price of reproducibility. Measured figures, where there are any: `results/README.md`.
use anyhow::Result;
use tch::{Device, Tensor};

use crate::config::Precision;
use crate::ffi;

/// Process-wide settings, applied once before any model is built.
pub fn apply_globals(p: Precision, cudnn_benchmark: bool, deterministic: bool) -> Result<()> {
    ffi::set_tf32(p == Precision::Tf32)?;
    tch::Cuda::cudnn_set_benchmark(cudnn_benchmark && !deterministic);
    ffi::set_deterministic(deterministic)
}

/// Runs `f` under autocast for `device` when the precision asks for it. The
/// state is thread-local, so dp's replica threads each call this themselves.
pub fn autocast<T>(p: Precision, device: Device, f: impl FnOnce() -> T) -> Result<T> {
    let bf16 = match p {
        Precision::Fp16 => false,
        Precision::Bf16 => true,
        _ => return Ok(f()),
    };
    let cuda = device.is_cuda();
    ffi::set_autocast(cuda, bf16, true)?;
    // Leave autocast even if `f` panics (tch panics on libtorch errors).
    struct Exit(bool, bool);
    impl Drop for Exit {
        fn drop(&mut self) {
            let _ = ffi::set_autocast(self.0, self.1, false);
        }
    }
    let _exit = Exit(cuda, bf16);
    Ok(f())
}

/// Dynamic loss scaling, with torch.amp.GradScaler's defaults: start at
/// 2^16; a step whose gradients are not all finite is skipped and the scale
/// halved; after 2000 good steps in a row the scale doubles.
#[derive(Debug, Clone, PartialEq)]
pub struct LossScaler {
    pub scale: f64,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: u32,
    good_steps: u32,
    pub skipped: u64,
}

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler {
            scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            good_steps: 0,
            skipped: 0,
        }
    }
}

impl LossScaler {
    /// Records whether this step's gradients were all finite; returns whether
    /// the optimizer may step.
    pub fn update(&mut self, all_finite: bool) -> bool {
        if all_finite {
            self.good_steps += 1;
            if self.good_steps >= self.growth_interval {
                self.scale *= self.growth_factor;
                self.good_steps = 0;
            }
            true
        } else {
            self.scale *= self.backoff_factor;
            self.good_steps = 0;
            self.skipped += 1;
            false
        }
    }

    /// Divides every defined gradient by the scale, in place, and says
    /// whether all of them are finite.
    pub fn unscale(&self, params: &[Tensor]) -> Result<bool> {
        let inv = 1.0 / self.scale;
        tch::no_grad(|| -> Result<bool> {
            let mut finite = true;
            for p in params {
                let mut g = p.grad();
                if g.defined() {
                    let _ = g.f_mul_scalar_(inv)?;
                    if finite && !g.f_isfinite()?.f_all()?.f_int64_value(&[])?.eq(&1) {
                        finite = false;
                    }
                }
            }
            Ok(finite)
        })
    }
}

/// What a strategy needs to train at a given precision.
#[derive(Debug, Clone)]
pub struct Amp {
    pub precision: Precision,
    /// Some for fp16: loss scaling.
    pub scaler: Option<LossScaler>,
}

impl Amp {
    pub fn new(p: Precision) -> Self {
        Amp { precision: p, scaler: (p == Precision::Fp16).then(LossScaler::default) }
    }

    /// The tensor to call backward on: the loss, scaled for fp16.
    pub fn scaled(&self, loss: &Tensor) -> Result<Tensor> {
        Ok(match &self.scaler {
            Some(s) => loss.f_mul_scalar(s.scale)?,
            None => loss.shallow_clone(),
        })
    }

    /// After backward (and any gradient reduction): unscales and decides
    /// whether the optimizer may step.
    pub fn should_step(&mut self, params: &[Tensor]) -> Result<bool> {
        match &mut self.scaler {
            Some(s) => {
                let finite = s.unscale(params)?;
                Ok(s.update(finite))
            }
            None => Ok(true),
        }
    }

    pub fn skipped_steps(&self) -> u64 {
        self.scaler.as_ref().map_or(0, |s| s.skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    #[test]
    fn scaler_skips_backs_off_and_grows_back() {
        let mut s = LossScaler { growth_interval: 3, ..Default::default() };
        assert!(!s.update(false));
        assert_eq!((s.scale, s.skipped), (32768.0, 1));
        assert!(!s.update(false));
        assert_eq!(s.scale, 16384.0);
        assert!(s.update(true) && s.update(true));
        assert_eq!(s.scale, 16384.0);
        assert!(s.update(true));
        assert_eq!(s.scale, 32768.0, "grows after growth_interval good steps");
        // a bad step resets the run of good steps
        s.update(true);
        s.update(false);
        s.update(true);
        s.update(true);
        assert_eq!(s.scale, 16384.0);
        assert_eq!(s.skipped, 3);
    }

    #[test]
    fn unscale_detects_injected_non_finite_gradients() {
        let p = Tensor::ones([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        (&p * 8.0).sum(Kind::Float).backward();
        let mut amp = Amp { precision: Precision::Fp16, scaler: Some(LossScaler { scale: 4.0, ..Default::default() }) };
        assert!(amp.should_step(std::slice::from_ref(&p)).unwrap());
        assert_eq!(Vec::<f32>::try_from(p.grad()).unwrap(), vec![2.0, 2.0, 2.0]);
        // inject an inf into the gradient: the step is skipped, the scale halves
        tch::no_grad(|| {
            let _ = p.grad().get(1).fill_(f64::INFINITY);
        });
        assert!(!amp.should_step(std::slice::from_ref(&p)).unwrap());
        assert_eq!(amp.skipped_steps(), 1);
        assert_eq!(amp.scaler.as_ref().unwrap().scale, 2.0);
    }

    #[test]
    fn bf16_autocast_on_cpu_computes_in_bf16_and_restores() {
        let a = Tensor::ones([4, 4], (Kind::Float, Device::Cpu));
        let y = autocast(Precision::Bf16, Device::Cpu, || a.matmul(&a)).unwrap();
        assert_eq!(y.kind(), Kind::BFloat16);
        assert_eq!(a.matmul(&a).kind(), Kind::Float, "autocast left on");
        let z = autocast(Precision::Fp32, Device::Cpu, || a.matmul(&a)).unwrap();
        assert_eq!(z.kind(), Kind::Float);
    }
}
