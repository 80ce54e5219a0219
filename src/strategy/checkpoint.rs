//! Activation checkpointing (`--checkpoint`), stage by stage: the forward
//! pass runs each ResNet stage without autograd and keeps only its input;
//! the backward pass recomputes each stage from that input, last first, and
//! back-propagates the gradient that reached its output. This trades one
//! more forward of the stages for their activations, as
//! `torch.utils.checkpoint` does per stage; libtorch has no C++ version.
//!
//! The vector-Jacobian product of a stage with output gradient `g` is the
//! gradient of `sum(y · g)` with `g` held constant, which is what tch's
//! scalar `backward` can run. BatchNorm's running statistics are updated
//! twice per stage and step (the forward and the recompute), as under
//! PyTorch's checkpoint; the batch statistics, and so the loss and the
//! gradients, are those of a run without it.
use anyhow::Result;
use tch::{Device, Kind, Tensor};

use super::precision::autocast;
use crate::config::Precision;
use crate::model::ResNet;

/// What the backward pass needs: each stage's input (the first with the
/// stem's graph, the others detached) and the head's input, a leaf whose
/// gradient starts the stages' backward.
pub(crate) struct Saved {
    inputs: Vec<Tensor>,
    head_in: Tensor,
}

/// The logits, with the stages' activations dropped. Call under the run's
/// autocast, as the forward pass would be.
pub(crate) fn forward(net: &ResNet, images: &Tensor) -> Result<(Tensor, Saved)> {
    let mut inputs = vec![net.stem(images, true)];
    tch::no_grad(|| {
        for i in 0..net.n_stages() {
            let y = net.stage(i, inputs.last().expect("a stage input"), true);
            inputs.push(y);
        }
    });
    let head_in = inputs.pop().expect("the last stage's output").f_detach()?.set_requires_grad(true);
    let logits = net.head(&head_in);
    Ok((logits, Saved { inputs, head_in }))
}

/// Back-propagates `loss` (already scaled, as it will be stepped) through
/// the head, then recomputes and back-propagates each stage, last first,
/// under the run's autocast (`precision` on `device`).
pub(crate) fn backward(net: &ResNet, saved: Saved, loss: &Tensor, precision: Precision, device: Device) -> Result<()> {
    loss.f_backward()?;
    let mut g = saved.head_in.grad();
    for (i, x) in saved.inputs.iter().enumerate().rev() {
        if !g.defined() {
            anyhow::bail!("checkpointing: no gradient reached stage {}'s output", i + 1);
        }
        // The first stage's input keeps the stem's graph, so its backward
        // reaches the stem; the others are leaves whose gradient feeds the
        // stage below.
        let input = if i == 0 { x.shallow_clone() } else { x.f_detach()?.set_requires_grad(true) };
        let y = autocast(precision, device, || net.stage(i, &input, true))?;
        y.f_mul(&g)?.f_sum(Kind::Float)?.f_backward()?;
        if i > 0 {
            g = input.grad();
        }
    }
    Ok(())
}
