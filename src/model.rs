//! Model builders over `nn::Path`. The ResNets are tch's torchvision-compatible
//! builders (same parameter counts as torchvision); `tinycnn` is ours.
use tch::nn::{self, ModuleT};

use crate::config::{ModelKind, RunConfig};

pub(crate) type Model = Box<dyn ModuleT>;

/// Builds the run's model on `device` with its seed, so every replica and
/// rank starts from the same weights; convolution weights go channels-last
/// when the run asks for it.
pub fn build_model(cfg: &RunConfig, device: tch::Device) -> (nn::VarStore, Model) {
    tch::manual_seed(cfg.seed as i64);
    let vs = nn::VarStore::new(device);
    let m = build(&vs.root(), cfg.model, cfg.num_classes);
    if cfg.channels_last {
        for v in vs.variables().values() {
            // Only 4-D weights (convolutions) change layout.
            let _ = crate::ffi::to_channels_last(v);
        }
    }
    (vs, m)
}

pub(crate) fn build(p: &nn::Path, kind: ModelKind, num_classes: i64) -> Model {
    use tch::vision::resnet;
    match kind {
        ModelKind::Resnet18 => Box::new(resnet::resnet18(p, num_classes)),
        ModelKind::Resnet34 => Box::new(resnet::resnet34(p, num_classes)),
        ModelKind::Resnet50 => Box::new(resnet::resnet50(p, num_classes)),
        ModelKind::Resnet101 => Box::new(resnet::resnet101(p, num_classes)),
        ModelKind::Resnet152 => Box::new(resnet::resnet152(p, num_classes)),
        ModelKind::Tinycnn => Box::new(tiny_cnn(p, num_classes)),
    }
}

/// A small CNN with no BatchNorm: two strided 3×3 convolutions, global average
/// pooling and a linear classifier. Without BatchNorm, splitting a batch across
/// replicas gives exactly the full-batch gradient, which the dp and ddp
/// equivalence tests rely on; it is also fast enough for smoke runs on a CPU.
pub(crate) fn tiny_cnn(p: &nn::Path, num_classes: i64) -> impl ModuleT {
    let cfg = nn::ConvConfig { stride: 2, padding: 1, ..Default::default() };
    let c1 = nn::conv2d(p / "conv1", 3, 16, 3, cfg);
    let c2 = nn::conv2d(p / "conv2", 16, 32, 3, cfg);
    let fc = nn::linear(p / "fc", 32, num_classes, Default::default());
    nn::func_t(move |xs, _train| {
        xs.apply(&c1).relu().apply(&c2).relu().adaptive_avg_pool2d([1, 1]).flatten(1, -1).apply(&fc)
    })
}

/// Number of trainable scalars, for the summary.
#[cfg(test)]
pub(crate) fn parameter_count(vs: &nn::VarStore) -> i64 {
    vs.trainable_variables().iter().map(|t| t.numel() as i64).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind, Tensor};

    #[test]
    fn resnet18_matches_torchvision_parameter_count() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _m = build(&vs.root(), ModelKind::Resnet18, 1000);
        assert_eq!(parameter_count(&vs), 11_689_512);
    }

    #[test]
    fn tiny_cnn_shapes() {
        let vs = nn::VarStore::new(Device::Cpu);
        let m = build(&vs.root(), ModelKind::Tinycnn, 10);
        let y = m.forward_t(&Tensor::zeros([2, 3, 16, 16], (Kind::Float, Device::Cpu)), true);
        assert_eq!(y.size(), vec![2, 10]);
    }
}
