//! Activation checkpointing (`--checkpoint`), stage by stage: the forward
//! pass runs the stem and each ResNet stage without autograd and keeps only
//! their inputs; the backward pass recomputes each from its input, last
//! first, and back-propagates the gradient that reached its output. This trades one
//! more forward of the stages for their activations, as
//! `torch.utils.checkpoint` does per stage; libtorch has no C++ version.
//!
//! The vector-Jacobian product of a stage with output gradient `g` runs
//! through the shim (`ffi::backward_from`: autograd's backward with an
//! output gradient), since tch's `backward` takes none; `sum(y · g)` would
//! give the same gradients but make a full-size product first. BatchNorm's running statistics are updated
//! twice per stage and step (the forward and the recompute), as under
//! PyTorch's checkpoint; the batch statistics, and so the loss and the
//! gradients, are those of a run without it.
use anyhow::Result;
use tch::{Device, Tensor};

use super::precision::autocast;
use crate::config::Precision;
use crate::model::ResNet;

/// What the backward pass needs: the images, each stage's input (detached)
/// and the head's input, a leaf whose gradient starts the backward.
pub(crate) struct Saved {
    images: Tensor,
    inputs: Vec<Tensor>,
    head_in: Tensor,
}

/// The logits, with the stem's and the stages' activations dropped. Call
/// under the run's autocast, as the forward pass would be.
pub(crate) fn forward(net: &ResNet, images: &Tensor) -> Result<(Tensor, Saved)> {
    let mut inputs = vec![];
    tch::no_grad(|| {
        inputs.push(net.stem(images, true));
        for i in 0..net.n_stages() {
            let y = net.stage(i, inputs.last().expect("a stage input"), true);
            inputs.push(y);
        }
    });
    let head_in = inputs.pop().expect("the last stage's output").f_detach()?.set_requires_grad(true);
    let logits = net.head(&head_in);
    Ok((logits, Saved { images: images.shallow_clone(), inputs, head_in }))
}

/// Back-propagates `loss` (already scaled, as it will be stepped) through
/// the head, then recomputes and back-propagates each stage, last first,
/// under the run's autocast (`precision` on `device`).
pub(crate) fn backward(net: &ResNet, saved: Saved, loss: &Tensor, precision: Precision, device: Device) -> Result<()> {
    loss.f_backward()?;
    let mut g = saved.head_in.grad();
    let mut inputs = saved.inputs;
    // Each input is dropped once its stage is done: while the first stage
    // recomputes, the later ones' inputs are gone.
    while let Some(x) = inputs.pop() {
        let i = inputs.len();
        if !g.defined() {
            anyhow::bail!("checkpointing: no gradient reached stage {}'s output", i + 1);
        }
        // Each stage's input is a leaf whose gradient feeds the stage below,
        // and the first stage's feeds the stem's recompute.
        let input = x.f_detach()?.set_requires_grad(true);
        let y = autocast(precision, device, || net.stage(i, &input, true))?;
        crate::ffi::backward_from(&y, &g)?;
        g = input.grad();
    }
    if !g.defined() {
        anyhow::bail!("checkpointing: no gradient reached the stem's output");
    }
    let y = autocast(precision, device, || net.stem(&saved.images, true))?;
    crate::ffi::backward_from(&y, &g)?;
    Ok(())
}
