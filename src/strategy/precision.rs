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
//!   losses (`tests/it/run.rs` checks it on the CPU).
//!
//! Autocast is entered per thread, as `torch.autocast` is thread-local: dp's replica threads each enter it for
//! their forward, and leave it even when the forward fails (tch panics on libtorch errors).
//!
//! When to set `--cudnn-benchmark`: autotuning pays when input shapes are fixed, as they are here on every step
//! and every strategy, because cuDNN picks the fastest convolution algorithm once per shape; the first steps are
//! slower while it tunes, so give it warm-up (`--warmup` ≥ 5, more for large models). `--deterministic` disables
//! it; that speed cost is the price of reproducibility. Measured figures, where there are any: `results/README.md`.
use anyhow::Result;
use tch::{Device, Kind, Tensor};

use crate::config::Precision;
use crate::ffi;

/// Process-wide settings, applied once before any model is built.
pub(crate) fn apply_globals(p: Precision, cudnn_benchmark: bool, deterministic: bool) -> Result<()> {
    ffi::set_tf32(p == Precision::Tf32)?;
    tch::Cuda::cudnn_set_benchmark(cudnn_benchmark && !deterministic);
    ffi::set_deterministic(deterministic)
}

/// Runs `f` under autocast for `device` when the precision asks for it. The
/// state is thread-local, so dp's replica threads each call this themselves.
pub(crate) fn autocast<T>(p: Precision, device: Device, f: impl FnOnce() -> T) -> Result<T> {
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

/// Dynamic loss scaling, as torch.amp.GradScaler does it, with its defaults:
/// start at 2^16; a step whose gradients are not all finite is skipped and
/// the scale halved; after 2000 good steps in a row the scale doubles. The
/// scale lives on the device, gradients are unscaled and checked by one fused
/// kernel (`_amp_foreach_non_finite_check_and_unscale_`) and the scale is
/// updated by another (`_amp_update_scale_`), so a step costs one host sync
/// (reading whether to step), as GradScaler's does, not one per parameter.
#[derive(Debug)]
pub(crate) struct LossScaler {
    pub init_scale: f64,
    pub growth_factor: f64,
    pub backoff_factor: f64,
    pub growth_interval: i64,
    /// Steps skipped for non-finite gradients (counted on the host).
    pub skipped: u64,
    /// The scale, the run of good steps and this step's flag, made on the
    /// device of the first loss (with `init_scale`).
    state: Option<ScaleState>,
    /// Device-side mode (`capturable`): the skipped steps, counted on the
    /// device, since the host never reads the flag.
    on_device: Option<Tensor>,
}

#[derive(Debug)]
struct ScaleState {
    scale: Tensor,
    growth_tracker: Tensor,
    found_inf: Tensor,
}

impl Default for LossScaler {
    fn default() -> Self {
        LossScaler {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            skipped: 0,
            state: None,
            on_device: None,
        }
    }
}

impl LossScaler {
    fn state(&mut self, device: Device) -> Result<&mut ScaleState> {
        if self.state.is_none() {
            self.state = Some(ScaleState {
                scale: Tensor::f_full([1], self.init_scale, (Kind::Float, device))?,
                growth_tracker: Tensor::f_zeros([1], (Kind::Int, device))?,
                found_inf: Tensor::f_zeros([1], (Kind::Float, device))?,
            });
        }
        Ok(self.state.as_mut().expect("made above"))
    }

    /// The loss times the scale, on the loss's device (no host sync).
    pub(crate) fn scale_loss(&mut self, loss: &Tensor) -> Result<Tensor> {
        let st = self.state(loss.device())?;
        Ok(loss.f_mul(&st.scale.f_to_kind(loss.kind())?)?.f_reshape(loss.size())?)
    }

    /// Unscales every defined gradient in place and says whether all of them
    /// are finite; the one host sync of the step.
    pub(crate) fn unscale(&mut self, params: &[Tensor]) -> Result<bool> {
        if !self.unscale_on_device(params)? {
            return Ok(true);
        }
        let st = self.state.as_ref().expect("made by unscale_on_device");
        Ok(st.found_inf.f_double_value(&[0])? == 0.0)
    }

    /// Zeroes the flag and unscales every defined gradient in place, the
    /// flag set where one is not finite; no host sync. False when no
    /// parameter has a gradient (nothing done).
    fn unscale_on_device(&mut self, params: &[Tensor]) -> Result<bool> {
        let grads: Vec<Tensor> = params.iter().map(|p| p.grad()).filter(|g| g.defined()).collect();
        let Some(device) = grads.first().map(|g| g.device()) else { return Ok(false) };
        let st = self.state(device)?;
        let _ = st.found_inf.f_zero_()?;
        let inv = st.scale.f_to_kind(Kind::Double)?.f_reciprocal()?.f_to_kind(Kind::Float)?;
        tch::no_grad(|| crate::ffi::amp_unscale(&grads, &st.found_inf, &inv))?;
        Ok(true)
    }

    /// Backs off or grows the scale by the flag (`_amp_update_scale_`), on the device.
    fn update_scale(&self) -> Result<()> {
        let Some(st) = self.state.as_ref() else { return Ok(()) };
        let (g, b, n) = (self.growth_factor, self.backoff_factor, self.growth_interval);
        crate::ffi::amp_update_scale(&st.scale, &st.growth_tracker, &st.found_inf, g, b, n)
    }

    /// Switches to the device-side mode a CUDA graph needs: from here on no
    /// call reads the flag on the host; the optimizer skips the update on
    /// the device (`skip_flag`) and the skipped steps are counted there.
    /// The state must exist already (a step ran), or the capture would
    /// make it anew at every replay.
    pub(crate) fn make_capturable(&mut self) -> Result<()> {
        let st =
            self.state.as_ref().ok_or_else(|| anyhow::anyhow!("the loss scaler has no state before its first step"))?;
        if self.on_device.is_none() {
            self.on_device = Some(Tensor::f_zeros([1], (Kind::Float, st.found_inf.device()))?);
        }
        Ok(())
    }

    /// The device-side mode's step: unscale, back off or grow, count a skip;
    /// no host sync. Whether to step is `skip_flag`'s, on the device.
    fn step_on_device(&mut self, params: &[Tensor]) -> Result<()> {
        self.unscale_on_device(params)?;
        self.update_scale()?;
        let (Some(st), Some(count)) = (self.state.as_ref(), self.on_device.as_ref()) else {
            return Err(anyhow::anyhow!("the loss scaler's device-side mode was not set up"));
        };
        let _ = count.shallow_clone().f_add_(&st.found_inf)?;
        Ok(())
    }

    /// Steps skipped, the host's count and the device's.
    pub(crate) fn skipped_steps(&self) -> u64 {
        let dev = self.on_device.as_ref().and_then(|t| t.f_double_value(&[0]).ok()).unwrap_or(0.0);
        self.skipped + dev as u64
    }

    /// After a step: backs off (a non-finite step, counted as skipped) or
    /// counts a good step, growing the scale after `growth_interval` of them.
    pub(crate) fn update(&mut self, finite: bool) -> Result<()> {
        if !finite {
            self.skipped += 1;
            if let Some(st) = self.state.as_mut() {
                // `unscale` set the flag; tests set it through here.
                let _ = st.found_inf.f_fill_(1.0)?;
            }
        }
        self.update_scale()
    }

    /// The current scale (a host read, for reports and tests).
    #[cfg(test)]
    pub(crate) fn scale(&self) -> f64 {
        self.state.as_ref().map_or(self.init_scale, |s| s.scale.double_value(&[0]))
    }
}

/// What a strategy needs to train at a given precision.
#[derive(Debug)]
pub(crate) struct Amp {
    pub precision: Precision,
    /// Some for fp16: loss scaling.
    pub scaler: Option<LossScaler>,
}

impl Amp {
    pub(crate) fn new(p: Precision) -> Self {
        Amp { precision: p, scaler: (p == Precision::Fp16).then(LossScaler::default) }
    }

    /// The tensor to call backward on: the loss, scaled for fp16.
    pub(crate) fn scaled(&mut self, loss: &Tensor) -> Result<Tensor> {
        match &mut self.scaler {
            Some(s) => s.scale_loss(loss),
            None => Ok(loss.shallow_clone()),
        }
    }

    /// After backward (and any gradient reduction), every strategy's last
    /// act: unscales fp16's gradients and steps the optimizer unless one is
    /// not finite; decided on the host (one sync), or in the device-side
    /// mode by the fused optimizer on the device.
    pub(crate) fn step(&mut self, params: &[Tensor], opt: &mut super::optim::Optimizer) -> Result<()> {
        if self.should_step(params)? {
            opt.step_unless(self.skip_flag().as_ref())?;
        }
        Ok(())
    }

    /// Unscales and decides whether the optimizer may step. In the
    /// device-side mode it is always yes on the host: the optimizer takes
    /// `skip_flag` and skips on the device.
    pub(crate) fn should_step(&mut self, params: &[Tensor]) -> Result<bool> {
        match &mut self.scaler {
            Some(s) if s.on_device.is_some() => {
                s.step_on_device(params)?;
                Ok(true)
            }
            Some(s) => {
                let finite = s.unscale(params)?;
                s.update(finite)?;
                Ok(finite)
            }
            None => Ok(true),
        }
    }

    pub(crate) fn skipped_steps(&self) -> u64 {
        self.scaler.as_ref().map_or(0, LossScaler::skipped_steps)
    }

    /// `--cuda-graphs`: no host sync from here on (`LossScaler::make_capturable`).
    pub(crate) fn make_capturable(&mut self) -> Result<()> {
        match &mut self.scaler {
            Some(s) => s.make_capturable(),
            None => Ok(()),
        }
    }

    /// The flag the optimizer skips its update on, in the device-side mode.
    fn skip_flag(&self) -> Option<Tensor> {
        let s = self.scaler.as_ref().filter(|s| s.on_device.is_some())?;
        s.state.as_ref().map(|st| st.found_inf.shallow_clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scaler on the CPU with `scale`, its state made.
    fn scaler(scale: f64, growth_interval: i64) -> LossScaler {
        let mut s = LossScaler { init_scale: scale, growth_interval, ..Default::default() };
        let _ = s.scale_loss(&Tensor::from(1.0f32)).unwrap();
        s
    }

    #[test]
    fn scaler_skips_backs_off_and_grows_back() {
        let mut s = scaler(65536.0, 3);
        s.update(false).unwrap();
        assert_eq!((s.scale(), s.skipped), (32768.0, 1));
        s.update(false).unwrap();
        assert_eq!(s.scale(), 16384.0);
        let mut p = Tensor::ones([1], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        let mut good = |s: &mut LossScaler| {
            p.zero_grad();
            (&p * 1.0).sum(Kind::Float).backward();
            let finite = s.unscale(std::slice::from_ref(&p)).unwrap();
            s.update(finite).unwrap();
        };
        good(&mut s);
        good(&mut s);
        assert_eq!(s.scale(), 16384.0);
        good(&mut s);
        assert_eq!(s.scale(), 32768.0, "grows after growth_interval good steps");
        // a bad step resets the run of good steps
        good(&mut s);
        s.update(false).unwrap();
        good(&mut s);
        good(&mut s);
        assert_eq!(s.scale(), 16384.0);
        assert_eq!(s.skipped, 3);
    }

    #[test]
    fn unscale_detects_injected_non_finite_gradients() {
        let p = Tensor::ones([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
        (&p * 8.0).sum(Kind::Float).backward();
        let mut amp = Amp { precision: Precision::Fp16, scaler: Some(scaler(4.0, 2000)) };
        assert!(amp.should_step(std::slice::from_ref(&p)).unwrap());
        assert_eq!(Vec::<f32>::try_from(p.grad()).unwrap(), vec![2.0, 2.0, 2.0]);
        // inject an inf into the gradient: the step is skipped, the scale halves
        tch::no_grad(|| {
            let _ = p.grad().get(1).fill_(f64::INFINITY);
        });
        assert!(!amp.should_step(std::slice::from_ref(&p)).unwrap());
        assert_eq!(amp.skipped_steps(), 1);
        assert_eq!(amp.scaler.as_ref().unwrap().scale(), 2.0);
        // the loss is scaled by the current scale, on its own device
        let l = amp.scaled(&Tensor::from(3.0f32)).unwrap();
        assert_eq!(l.double_value(&[]), 6.0);
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
